"""What the durability tests share (test_durability.py,
test_rocksdb_crash.py): the chunkd binary, bounded waits, closing a client
whose channel grpc may still poll, and the table of docs/operations.md
("What an acknowledged Dedup survives") that they check cell by cell."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Callable, Dict, Tuple

import pytest

from chunkd_client import Client

REPO = Path(__file__).resolve().parents[2]
#: Longest wait for a process to start, stop or heal, or for a workload to
#: reach its kill point or end, seconds (never reached unless broken).
SETTLE = 90.0

EVERYTHING = "everything acknowledged"
NOTHING = "nothing"


def chunkd_binary() -> Path:
    path = Path(os.environ.get("CHUNKD_BIN") or REPO / "build" / "server" / "chunkd")
    if not (path.is_file() and os.access(path, os.X_OK)):
        pytest.fail(f"{path} is not an executable: build it (make build) or "
                    f"point $CHUNKD_BIN at it", pytrace=False)
    return path


def bounded_wait(predicate: Callable[[], bool], what: str,
                 timeout: float = SETTLE) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


def close_after_polling(client: Client) -> None:
    """Closes `client` once grpc has stopped polling its channel's
    connectivity (for at most 2 s): a replay waits for the channel through
    that poll, which ends within 0.2 s of the last wait, and a channel
    closed under it makes grpc's polling thread raise (a warning, not a
    failure). The flag is grpc's own; without it, closes at once."""
    state = getattr(getattr(client, "_channel", None), "_connectivity_state", None)
    deadline = time.monotonic() + 2.0
    while getattr(state, "polling", False) and time.monotonic() < deadline:
        time.sleep(0.05)
    client.close()


def stated_cells() -> Dict[Tuple[str, str], str]:
    """The cells of the table in docs/operations.md, "What an acknowledged
    Dedup survives": (row heading, column heading) -> text, without the
    backticks."""
    text = (REPO / "docs" / "operations.md").read_text()
    section = text.split("### What an acknowledged Dedup survives\n", 1)[1]
    rows = [[c.strip().replace("`", "") for c in line.strip().strip("|").split("|")]
            for line in section.split("\n### ", 1)[0].splitlines()
            if line.startswith("|")]
    columns = rows[0]
    return {(row[0], column): text for row in rows[2:]
            for column, text in zip(columns[1:], row[1:])}


def assert_table_states(table: Dict[Tuple[str, str], str]) -> None:
    """docs/operations.md states each cell of `table` ((index mode, event)
    -> the words its cell begins with)."""
    stated = stated_cells()
    for (mode, event), want in table.items():
        have = stated.get((mode, event))
        assert have is not None and have.startswith(want), (mode, event, have)
