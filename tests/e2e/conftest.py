"""Fixtures for the end-to-end tests: a REAL chunkd and the real chunkctl.

Binaries: $CHUNKD_BIN (default <repo>/build/server/chunkd) and $CHUNKCTL_BIN
(default <repo>/build/clients/cli/chunkctl). Servers run on free loopback
ports with the memory index, are awaited through the gRPC health service and
stopped at the end of the session. Every RPC and every chunkctl run has a
deadline, so the tests always end by themselves.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Callable, Iterator

import pytest

from chunkd_client import Client
from chunkd_client.testing import ChunkdServer, serving

from e2e_util import REPO, RPC_TIMEOUT, SMALL_LIMIT, SUBPROCESS_TIMEOUT
from redis_util import RedisServer


def _binary(env: str, default: Path) -> Path:
    path = Path(os.environ.get(env) or default)
    if not (path.is_file() and os.access(path, os.X_OK)):
        pytest.fail(
            f"{path} is not an executable: build it (cmake --build {REPO / 'build'}) "
            f"or point ${env} at it",
            pytrace=False,
        )
    return path


@pytest.fixture(scope="session")
def chunkd_bin() -> Path:
    return _binary("CHUNKD_BIN", REPO / "build" / "server" / "chunkd")


@pytest.fixture(scope="session")
def chunkctl_bin() -> Path:
    return _binary("CHUNKCTL_BIN", REPO / "build" / "clients" / "cli" / "chunkctl")


@pytest.fixture(scope="session")
def server(chunkd_bin: Path) -> Iterator[ChunkdServer]:
    """chunkd with default limits (4 MiB messages) and the memory index."""
    yield from serving(ChunkdServer(chunkd_bin))


@pytest.fixture(scope="session")
def small_server(chunkd_bin: Path) -> Iterator[ChunkdServer]:
    """chunkd started with --max_message_bytes=SMALL_LIMIT (1 MiB)."""
    yield from serving(ChunkdServer(chunkd_bin, max_message_bytes=SMALL_LIMIT))


@pytest.fixture
def client(server: ChunkdServer) -> Iterator[Client]:
    with Client(server.address, timeout=RPC_TIMEOUT) as c:
        yield c


@pytest.fixture
def chunkctl(chunkctl_bin: Path) -> Callable[..., subprocess.CompletedProcess]:
    """Runs chunkctl with the given arguments; fails the test on a non-zero
    exit unless check=False. Returns the CompletedProcess (text output)."""

    def run(*args: object, check: bool = True, stdin: bytes = None) -> subprocess.CompletedProcess:
        command = [str(chunkctl_bin), *map(str, args)]
        result = subprocess.run(
            command,
            input=stdin,
            stdin=None if stdin is not None else subprocess.DEVNULL,
            capture_output=True,
            timeout=SUBPROCESS_TIMEOUT,
        )
        result.stdout = result.stdout.decode()
        result.stderr = result.stderr.decode(errors="replace")
        if check and result.returncode != 0:
            pytest.fail(
                f"{' '.join(command)} exited with {result.returncode}:\n{result.stderr}",
                pytrace=False,
            )
        return result

    return run


@pytest.fixture
def redis() -> Iterator[RedisServer]:
    """A redis-server of its own on a free loopback port, persistent (so that
    it can be restarted with its data), removed after the test."""
    server = RedisServer(persistent=True).start()
    try:
        yield server
    finally:
        server.cleanup()
