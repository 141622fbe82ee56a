"""Fixtures for the client's own tests: a REAL chunkd server, no mocks.

The server binary comes from $CHUNKD_BIN, by default
<repo>/build/server/chunkd. Tests that need no server (sources, packaging)
run without it; the others fail with a clear message when it is missing.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Iterator

import pytest

from chunkd_client import Client
from chunkd_client.testing import ChunkdServer, serving

REPO = Path(__file__).resolve().parents[3]
#: Deadline of every RPC a test makes, in seconds.
RPC_TIMEOUT = 60.0


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
def server(chunkd_bin: Path) -> Iterator[ChunkdServer]:
    """chunkd with the default limits and the memory index."""
    yield from serving(ChunkdServer(chunkd_bin))


@pytest.fixture
def client(server: ChunkdServer) -> Iterator[Client]:
    with Client(server.address, timeout=RPC_TIMEOUT) as c:
        yield c
