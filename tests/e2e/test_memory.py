"""chunkd's memory against a real server: the allocator set-up
(server/service/allocator.h) and the memory flags sized to a memory limit
(server/service/memory_plan.h).

chunkd raises glibc's mmap and trim thresholds so that request buffers are
reused instead of faulted in afresh, and gives the memory back with
malloc_trim once streams have stopped. After a burst of large concurrent
streams and a short idle period, resident memory must drop well below its
peak; a user's own GLIBC_TUNABLES malloc settings must be left alone.

Under a memory limit (here given with --memory_limit_file) the memory flags
left at their defaults are sized to it and logged, the sized values are the
ones in force, and flags given explicitly win with a warning when they pass
the limit. tests/integration/test_memory_limit.py fills every budget at once
under a limit.
"""

from __future__ import annotations

import re
import subprocess
import threading
import time
from pathlib import Path
from typing import Iterator

import pytest

import grpc

from chunkd_client._proto.chunkd.v1 import chunkd_pb2 as pb
from chunkd_client._proto.chunkd.v1 import chunkd_pb2_grpc as pb_grpc
from chunkd_client.testing import ChunkdServer, free_port, serving

from e2e_util import RPC_TIMEOUT, SUBPROCESS_TIMEOUT, fastcdc_params, random_bytes
from metrics_util import parse_samples, value

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


GiB = 1 << 30
#: What the server logs it chose under a limit.
PLAN = re.compile(
    r"chunkd: memory limit (\d+) bytes \(([^)]*)\); sized to 85 % of it: "
    r"--max_streams (\d+) \((\w+)\), --memory_budget (\d+) \((\w+)\), "
    r"--index_max_entries (\d+) \((\w+)\), --hint_cache_mib (\d+) \((\w+)\), "
    r"--stream_memory_budget (\d+) \((\w+)\); resident memory at most (\d+) bytes")


def limit_file(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "memory.max"
    path.write_text(text)
    return path


def test_defaults_are_sized_to_the_limit_and_in_force(chunkd_bin: Path,
                                                      tmp_path: Path) -> None:
    limit = limit_file(tmp_path, f"{GiB}\n")
    with ChunkdServer(chunkd_bin, extra_args=[f"--memory_limit_file={limit}"]) as server:
        log = server.log()
        match = PLAN.search(log)
        assert match, log
        assert (int(match.group(1)), match.group(2)) == (GiB, str(limit))
        streams, budget, entries, hint_mib, stream_memory = (
            int(match.group(i)) for i in (3, 5, 7, 9, 11))
        assert {match.group(i) for i in (4, 6, 8, 10, 12)} == {"sized"}
        # Under 85 % of the limit, and smaller than the defaults, which do
        # not fit a 1 GiB container; but dozens of streams, as each reserves
        # its own parameters' memory.
        assert int(match.group(13)) <= 0.85 * GiB
        assert 20 <= streams < 128 and budget < GiB and hint_mib < 64
        assert budget >= 2 * streams * (4 << 20)
        assert "warning" not in log
        assert f"chunkd: limits: {streams} streams," in log
        samples = parse_samples(server.metrics())
        assert value(samples, "chunkd_index_max_entries") == entries
        assert value(samples, "chunkd_stream_memory_bytes", state="limit") == stream_memory
        # The sized --max_streams is in force: one stream more is refused.
        release = threading.Event()

        def held() -> Iterator[pb.ChunkRequest]:
            yield pb.ChunkRequest(params=pb.ChunkParams(chunking=fastcdc_params()),
                                  data=b"x" * 1000)
            release.wait(RPC_TIMEOUT)

        with grpc.insecure_channel(server.address) as channel:
            stub = pb_grpc.ChunkServiceStub(channel)
            calls = [stub.Chunk(held(), timeout=RPC_TIMEOUT) for _ in range(streams)]
            try:
                deadline = time.monotonic() + RPC_TIMEOUT
                while server.active_streams() != streams:
                    assert time.monotonic() < deadline, "the held streams never started"
                    time.sleep(0.05)
                # Every one of them runs: none waits for its memory.
                while True:
                    samples = parse_samples(server.metrics())
                    reserved = value(samples, "chunkd_stream_memory_bytes", state="reserved")
                    waiting = value(samples, "chunkd_streams_waiting_for_memory")
                    if reserved > 0 and waiting == 0 and reserved % streams == 0:
                        break
                    assert time.monotonic() < deadline, (reserved, waiting)
                    time.sleep(0.05)
                with pytest.raises(grpc.RpcError) as refused:
                    list(stub.Chunk(iter([pb.ChunkRequest(
                        params=pb.ChunkParams(chunking=fastcdc_params()))]),
                        timeout=RPC_TIMEOUT))
                assert refused.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
                assert "--max_streams" in refused.value.details()
            finally:
                release.set()
                for call in calls:
                    list(call)


def test_given_flags_win_with_a_warning(chunkd_bin: Path, tmp_path: Path) -> None:
    limit = limit_file(tmp_path, f"{GiB}\n")
    with ChunkdServer(chunkd_bin, extra_args=[
            f"--memory_limit_file={limit}", "--max_streams=128",
            "--memory_budget=1073741824"]) as server:
        log = server.log()
    match = PLAN.search(log)
    assert match, log
    assert match.group(3, 4, 5, 6) == ("128", "given", "1073741824", "given")
    # The others are still sized, to what the given ones leave.
    assert {match.group(i) for i in (8, 10, 12)} == {"sized"}
    assert re.search(r"chunkd: warning: the flags given put resident memory at up to "
                     r"\d+ MiB, above 85 % of the memory limit of 1024 MiB \(870 MiB\)",
                     log), log
    assert "chunkd: limits: 128 streams," in log


def test_no_limit_keeps_the_defaults(chunkd_bin: Path, tmp_path: Path) -> None:
    limit = limit_file(tmp_path, "max\n")
    with ChunkdServer(chunkd_bin, extra_args=[f"--memory_limit_file={limit}"]) as server:
        log = server.log()
    assert (f"chunkd: no memory limit (no limit in {limit}): --max_streams 128, "
            "--memory_budget 1073741824, --index_max_entries 1342177, "
            "--hint_cache_mib 64, --stream_memory_budget ") in log, log
    # Room for every stream at its largest: none ever waits.
    match = re.search(r"--stream_memory_budget (\d+); .*the largest (\d+) MiB\)", log)
    assert match, log
    largest = (int(match.group(2)) - 0.5) * MiB  # the log rounds to MiB
    assert int(match.group(1)) >= 128 * largest
    assert "chunkd: limits: 128 streams," in log


@pytest.mark.parametrize("text,needle", [
    ("1 GiB\n", '"1 GiB" is not a memory limit (a byte count or "max")'),
    (f"{64 << 20}\n", "the memory limit of 64 MiB leaves no room for one stream"),
])
def test_a_bad_or_too_small_limit_stops_startup(chunkd_bin: Path, tmp_path: Path,
                                                text: str, needle: str) -> None:
    limit = limit_file(tmp_path, text)
    result = subprocess.run(
        [str(chunkd_bin), f"--listen=127.0.0.1:{free_port()}", "--metrics_listen=",
         f"--memory_limit_file={limit}"],
        capture_output=True, text=True, timeout=SUBPROCESS_TIMEOUT)
    assert result.returncode == 2, result.stderr
    assert needle in result.stderr, result.stderr
    if text.startswith("1 GiB"):
        assert f"--memory_limit_file {limit}: " in result.stderr


def test_a_missing_limit_file_names_the_flag(chunkd_bin: Path, tmp_path: Path) -> None:
    missing = tmp_path / "nowhere"
    result = subprocess.run(
        [str(chunkd_bin), f"--listen=127.0.0.1:{free_port()}", "--metrics_listen=",
         f"--memory_limit_file={missing}"],
        capture_output=True, text=True, timeout=SUBPROCESS_TIMEOUT)
    assert result.returncode == 2
    assert f"--memory_limit_file {missing}: No such file or directory" in result.stderr
