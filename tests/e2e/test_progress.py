"""Progress display of the command-line clients: drawn on stderr when it is a
terminal, never when it is piped; stdout is the same either way."""

from __future__ import annotations

import os
import pty
import subprocess
from pathlib import Path
from typing import List, Tuple

import pytest

from chunkd_client.testing import ChunkdServer

from clients_util import chunkd_client, run
from e2e_util import SUBPROCESS_TIMEOUT, random_bytes

SIZE = 2_000_000


@pytest.fixture(scope="module")
def data_file(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("progress") / "data.bin"
    path.write_bytes(random_bytes(31, SIZE))
    return path


def run_on_terminal(command: List[object]) -> Tuple[int, bytes, str]:
    """Runs `command` with stderr on a pseudo-terminal; returns its exit
    status, stdout and what it drew on the terminal."""
    leader, follower = pty.openpty()
    try:
        process = subprocess.Popen([str(c) for c in command], stdin=subprocess.DEVNULL,
                                   stdout=subprocess.PIPE, stderr=follower)
        os.close(follower)
        follower = -1
        drawn = b""
        while True:
            try:
                piece = os.read(leader, 65536)
            except OSError:  # EIO once the child closed the terminal
                break
            if not piece:
                break
            drawn += piece
        stdout, _ = process.communicate(timeout=SUBPROCESS_TIMEOUT)
    finally:
        if follower >= 0:
            os.close(follower)
        os.close(leader)
    return process.returncode, stdout, drawn.decode(errors="replace")


@pytest.mark.parametrize("client", ["chunkctl", "chunkd-client"])
@pytest.mark.parametrize("command", ["chunk", "dedup"])
def test_progress_on_a_terminal_only(client: str, command: str, server: ChunkdServer,
                                     chunkctl_bin: Path, data_file: Path) -> None:
    binary = chunkctl_bin if client == "chunkctl" else chunkd_client()
    args = [binary, command, "--server", server.address]
    if command == "dedup":
        args += ["--namespace", f"progress-{client}"]
    piped = run([*args, data_file])
    assert piped.stderr == b""
    code, stdout, drawn = run_on_terminal([*args, data_file])
    assert code == 0
    if command == "chunk":
        assert stdout == piped.stdout
    assert "100.0%" in drawn and "1.9 MiB/1.9 MiB" in drawn and "/s" in drawn, drawn
    assert drawn.endswith("\n"), drawn


@pytest.mark.parametrize("command", ["chunk", "dedup"])
def test_chunkctl_progress_always_and_never(command: str, server: ChunkdServer,
                                            chunkctl_bin: Path, data_file: Path) -> None:
    args = [chunkctl_bin, command, "--server", server.address]
    if command == "dedup":
        args += ["--namespace", "progress-flags"]
    # always: drawn into a pipe too; stdout unchanged.
    piped = run([*args, "--progress", "always", data_file])
    assert "100.0%" in piped.stderr.decode() and piped.stderr.endswith(b"\n"), piped.stderr
    # never: nothing on a terminal either.
    code, stdout, drawn = run_on_terminal([*args, "--progress=never", data_file])
    assert code == 0
    assert drawn == ""
    if command == "chunk":
        assert stdout == piped.stdout
