"""chunkd's allocator set-up (server/service/allocator.h) against a real server.

chunkd raises glibc's mmap and trim thresholds so that request buffers are
reused instead of faulted in afresh, and gives the memory back with
malloc_trim once streams have stopped. After a burst of large concurrent
streams and a short idle period, resident memory must drop well below its
peak; a user's own GLIBC_TUNABLES malloc settings must be left alone.
"""

from __future__ import annotations

import re
import subprocess
import time
from pathlib import Path

import pytest

from chunkd_client.testing import ChunkdServer, serving

from e2e_util import SUBPROCESS_TIMEOUT, random_bytes

MiB = 1 << 20
STREAMS = 8
STREAM_BYTES = 64 * MiB
#: Bound on waiting for the trim (the server trims 1 s after the last stream).
IDLE_WAIT = 30.0


@pytest.fixture
def own_server(chunkd_bin: Path):
    """A server of its own, so that its memory is this test's alone, with
    one worker thread: the eight clients then always send faster than it
    chunks, so that their streams fill their --max_inflight_bytes whatever
    the number of cores (with a worker per stream, a big machine keeps up
    and the burst holds little)."""
    yield from serving(ChunkdServer(chunkd_bin, extra_args=["--threads=1"]))


def test_memory_goes_back_after_a_burst(own_server: ChunkdServer, chunkctl_bin: Path,
                                        tmp_path: Path) -> None:
    log = own_server.log()
    assert re.search(r"malloc: mmap_threshold \d+ MiB, trim_threshold \d+ MiB", log), log
    base_kib = own_server.vm_kib("VmRSS")
    data = tmp_path / "data.bin"
    # 8 MiB of random bytes, repeated: Chunk keeps no state between chunks.
    data.write_bytes(random_bytes(11, 8 * MiB) * (STREAM_BYTES // (8 * MiB)))
    command = [str(chunkctl_bin), "chunk", "--server", own_server.address,
               "--fingerprint", "none", str(data)]
    clients = [subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
               for _ in range(STREAMS)]
    for c in clients:
        out, err = c.communicate(timeout=SUBPROCESS_TIMEOUT)
        assert c.returncode == 0, err.decode(errors="replace")
        # Every byte came back as chunks: "offset,length" lines cover the file.
        last = out.decode().strip().rsplit("\n", 1)[-1].split(",")
        assert int(last[0]) + int(last[1]) == STREAM_BYTES
    peak_kib = own_server.vm_kib("VmHWM")
    # The burst really used memory, or the check below proves nothing.
    assert peak_kib - base_kib >= 64 * 1024, (base_kib, peak_kib)

    deadline = time.monotonic() + IDLE_WAIT
    while own_server.active_streams() != 0:
        assert time.monotonic() < deadline, "chunkd_active_streams never returned to 0"
        time.sleep(0.1)
    # Well below the peak: at most a quarter of what the burst added.
    target_kib = base_kib + (peak_kib - base_kib) // 4
    rss_kib = own_server.vm_kib("VmRSS")
    while rss_kib > target_kib and time.monotonic() < deadline:
        time.sleep(0.2)
        rss_kib = own_server.vm_kib("VmRSS")
    print(f"\nRSS before {base_kib} KiB, peak {peak_kib} KiB, idle {rss_kib} KiB")
    assert rss_kib <= target_kib, (
        f"RSS {rss_kib} KiB {IDLE_WAIT:.0f} s after the burst; before it "
        f"{base_kib} KiB, peak {peak_kib} KiB")
    assert own_server.alive(), own_server.log()


def test_user_malloc_tunables_are_left_alone(chunkd_bin: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    tunables = "glibc.malloc.trim_threshold=1073741824"
    monkeypatch.setenv("GLIBC_TUNABLES", tunables)
    with ChunkdServer(chunkd_bin) as server:
        log = server.log()
    assert f"GLIBC_TUNABLES={tunables} sets glibc.malloc tunables" in log, log
    assert "mmap_threshold 32 MiB" not in log, log
