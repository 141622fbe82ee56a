"""chunkd with the rocksdb index (docs/design.md, "The rocksdb backend")
through the public API: what a Dedup counted is there after a restart and
after a SIGKILL; one chunkd per directory; a newer format refused; a
SIGUSR1 checkpoint that opens as an index; its metrics. (A database of a
newer format: rocksdb_index_test, which can write one.)"""

from __future__ import annotations

import signal
import subprocess
import time
from collections import Counter
from pathlib import Path

import pytest

from chunkd_client import Client
from chunkd_client.testing import ChunkdServer, ServerError

from e2e_util import RPC_TIMEOUT, random_bytes
from metrics_util import parse_samples, scrape, value

CHECKPOINT_LINE = "chunkd: SIGUSR1: index checkpoint written to "


def dedup_twice(server: ChunkdServer, data: bytes, namespace: str):
    """Dedups `data` twice; returns the fingerprints of the first pass."""
    with Client(server.address, timeout=RPC_TIMEOUT) as client:
        first, _ = client.dedup_all(data, namespace=namespace,
                                    stream_id="first-pass")
        second, _ = client.dedup_all(data, namespace=namespace)
    # Random bytes: every chunk differs from every other.
    assert len(set(r.fingerprint for r in first)) == len(first)
    assert all(r.is_new for r in first)
    assert not any(r.is_new for r in second)
    return [r.fingerprint for r in first]


def release_all(server: ChunkdServer, namespace: str, counts: Counter):
    """Releases every reference of `counts` one by one through Release and
    checks each answer: the counts left go down to 0."""
    with Client(server.address, timeout=RPC_TIMEOUT) as client:
        for fp, n in counts.items():
            for left in range(n - 1, -1, -1):
                assert client.release(namespace, [fp]) == [left]
        assert client.find_missing(namespace, list(counts)) == list(counts)


@pytest.mark.parametrize("stop", ["SIGTERM", "SIGKILL"])
def test_references_survive_a_restart(chunkd_bin: Path, tmp_path: Path,
                                      stop: str):
    index = f"rocksdb://{tmp_path / 'index'}"
    data = random_bytes(29, 3 << 20)
    server = ChunkdServer(chunkd_bin, index=index).start()
    try:
        fps = dedup_twice(server, data, "keep")
        if stop == "SIGKILL":
            server.process.send_signal(signal.SIGKILL)
            server.process.wait(30)
        server.restart()
        assert "entries kept from before" in server.log()
        with Client(server.address, timeout=RPC_TIMEOUT) as client:
            assert client.find_missing("keep", fps) == []
            # The first pass's stream id still replays what it answered.
            replay, _ = client.dedup_all(data, namespace="keep",
                                         stream_id="first-pass")
            assert [r.fingerprint for r in replay] == fps
            assert all(r.is_new for r in replay)
        release_all(server, "keep", Counter(fps * 2))
    finally:
        server.stop()


def test_a_second_chunkd_on_the_directory_is_refused(chunkd_bin: Path,
                                                     tmp_path: Path):
    directory = tmp_path / "index"
    first = ChunkdServer(chunkd_bin, index=f"rocksdb://{directory}").start()
    try:
        second = subprocess.run(
            [str(chunkd_bin), "--listen=127.0.0.1:0", "--metrics_listen=",
             f"--index=rocksdb://{directory}"],
            capture_output=True, text=True, timeout=60)
        assert second.returncode != 0
        assert f"the directory {directory} is in use by another process" in \
            second.stderr, second.stderr
    finally:
        first.stop()


def test_a_checkpoint_is_an_index(chunkd_bin: Path, tmp_path: Path):
    data = random_bytes(31, 1 << 20)
    server = ChunkdServer(
        chunkd_bin, index=f"rocksdb://{tmp_path / 'index'}").start()
    try:
        fps = dedup_twice(server, data, "cp")
        server.process.send_signal(signal.SIGUSR1)
        deadline = time.monotonic() + 60
        while CHECKPOINT_LINE not in server.log():
            assert time.monotonic() < deadline, server.log()
            time.sleep(0.1)
        line = next(l for l in server.log().splitlines()
                    if l.startswith(CHECKPOINT_LINE))
        checkpoint = Path(line[len(CHECKPOINT_LINE):])
        assert checkpoint.parent == tmp_path / "index.checkpoints"
        samples = parse_samples(scrape(server.metrics_address))
        assert value(samples, "chunkd_index_entries") == len(set(fps))
        assert value(samples, "chunkd_index_disk_bytes") > 0
        assert value(samples, "chunkd_index_block_cache_bytes",
                     state="capacity") > 0
    finally:
        server.stop()
    # The checkpoint, served by a chunkd of its own, has every reference.
    copy = ChunkdServer(chunkd_bin, index=f"rocksdb://{checkpoint}").start()
    try:
        release_all(copy, "cp", Counter(fps * 2))
    finally:
        copy.stop()


def test_a_bad_spec_stops_chunkd_naming_it(chunkd_bin: Path):
    for spec, says in [
            ("rocksdb://relative/path", "the path must be absolute"),
            ("rocksdb:///tmp/x?sync=sometimes", "sync='sometimes'"),
    ]:
        with pytest.raises(ServerError) as failed:
            ChunkdServer(chunkd_bin, index=spec).start(attempts=1)
        assert says in str(failed.value), str(failed.value)
