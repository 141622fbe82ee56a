"""chunkd under a memory limit at full load, loopback only.

chunkd sizes --max_streams, --memory_budget, --stream_memory_budget,
--index_max_entries and --hint_cache_mib to its memory limit when they are
left at their defaults (server/service/memory_plan.h), and each stream
reserves the memory its own chunking parameters may take once they arrive
(a stream that does not fit waits its turn). These tests give chunkd the
Helm chart's default container limit, 1 GiB, with the chart's flags:

- the worst mix fills every budget at once: a full memory index (Dedup with
  next-size hints and write tokens, the largest entries), a full hint
  cache, the stream memory filled with streams at their worst (the largest
  final chunk size any algorithm allows, repmaxcdc's 24 MiB: the chunker's
  buffers; and 64-byte chunks for a client that never reads its responses:
  the records pile up), and --max_streams streams in all, the others waiting
  with a message each of the request budget. Then resident memory's peak
  (VmHWM) must stay under the bound the server logged and under 85 % of the
  limit. The limit comes two ways: through --memory_limit_file, and, where
  the machine allows it (root, the cgroup v1 memory controller), from a real
  cgroup v1 that holds chunkd with the limit set, so that the kernel would
  kill chunkd past it: there the cgroup's own peak and OOM count are checked
  too;
- more streams of the largest chunks than the stream memory holds: they
  take turns, each ends exact, and the peak stays under the bound;
- --max_streams streams of the default parameters: every one runs at once.

Nothing depends on speed: each fill is awaited by what the server reports
(index entries, cache misses, bytes ingested, memory reserved, streams
waiting), in bounded loops.
"""

from __future__ import annotations

import os
import random
import re
import subprocess
import threading
import time
from pathlib import Path
from typing import Dict, Iterator, List, Optional

import grpc
import pytest

from chunkd_client._proto.chunkd.v1 import chunkd_pb2 as pb
from chunkd_client._proto.chunkd.v1 import chunkd_pb2_grpc as pb_grpc
from chunkd_client.testing import ChunkdServer

REPO = Path(__file__).resolve().parents[2]
MiB = 1 << 20
#: The chart's default container limit (helm/chunkd/values.yaml).
LIMIT = 1 << 30
SHARE = 0.85
MESSAGE = 4 * MiB
WINDOW = 2 * MiB  # 2 threads (--threads below)
#: The flags the chart renders by default; none sizes memory.
CHART_FLAGS = ["--max_message_bytes=4194304", "--max_inflight_bytes=16777216",
               "--threads=2", "--max_streams_per_ip=0",
               "--max_streams_per_connection=32",
               "--max_stream_rate_per_connection=1000",
               "--max_connection_idle=300s",
               # Streams wait on this test while the others fill.
               "--stream_idle_timeout=0"]
#: repmaxcdc at its largest: chunks are final only 2 x 4 MiB + 16 MiB on.
LARGE = pb.ChunkingParams(algorithm=pb.ALGORITHM_REP_MAX_CDC, min_size=4 * MiB,
                          horizon_size=16 * MiB)
LARGE_FINAL = 24 * MiB
#: What a large stream sends, in whole messages: its chunker's buffer
#: reaches its largest.
LARGE_BYTES = -(-3 * (LARGE_FINAL + WINDOW + MESSAGE) // MESSAGE) * MESSAGE
SMALL = pb.ChunkingParams(algorithm=pb.ALGORITHM_FIXED, avg_size=64)
SMALL_BYTES = 64 * MiB
#: Dedup's smallest FastCDC chunks, with hints recorded for each.
TINY = pb.ChunkingParams(algorithm=pb.ALGORITHM_FASTCDC, min_size=64, avg_size=256,
                         max_size=1024)
FILL_STREAM_BYTES = 32 * MiB
HINT_CACHE_ENTRY = 176  # pipeline/hint_cache.h kBytesPerEntry
#: Bound on every wait for the server to reach a state.
WAIT = 900.0
RPC_TIMEOUT = 1800.0


def chunkd_binary() -> Path:
    return Path(os.environ.get("CHUNKD_BIN") or REPO / "build" / "server" / "chunkd")


def fill_data(seed: int) -> bytes:
    """Unique bytes of one index-filling stream, the same every time."""
    return random.Random(seed).randbytes(FILL_STREAM_BYTES)


def metric(server: ChunkdServer, name: str, **labels: str) -> float:
    """The sum of a metric's samples whose labels include `labels`."""
    total = 0.0
    for line in server.metrics().splitlines():
        match = re.match(rf"^{name}(\{{[^}}]*\}})? (\S+)$", line)
        if match and all(f'{k}="{v}"' in (match.group(1) or "") for k, v in labels.items()):
            total += float(match.group(2))
    return total


def wait_for(what: str, condition, server: ChunkdServer) -> None:
    deadline = time.monotonic() + WAIT
    while not condition():
        assert server.alive(), f"chunkd died while waiting for {what}:\n{server.log()[-3000:]}"
        assert time.monotonic() < deadline, f"never reached: {what}"
        time.sleep(0.2)


class Plan:
    """What the server logged it chose."""

    def __init__(self, log: str) -> None:
        match = re.search(
            r"memory limit (\d+) bytes \(([^)]*)\); sized to 85 % of it: "
            r"--max_streams (\d+) \(sized\), --memory_budget (\d+) \(sized\), "
            r"--index_max_entries (\d+) \(sized\), --hint_cache_mib (\d+) \(sized\), "
            r"--stream_memory_budget (\d+) \(sized\); resident memory at most (\d+) bytes",
            log)
        assert match, log
        self.limit = int(match.group(1))
        self.source = match.group(2)
        self.max_streams = int(match.group(3))
        self.budget = int(match.group(4))
        self.entries = int(match.group(5))
        self.hint_cache_mib = int(match.group(6))
        self.stream_memory = int(match.group(7))
        self.bound = int(match.group(8))


def dedup(stub: pb_grpc.ChunkServiceStub, data: bytes, stream_id: str) -> object:
    """One Dedup of `data` in MESSAGE pieces: its summary, or the RpcError."""
    def requests() -> Iterator[pb.DedupRequest]:
        yield pb.DedupRequest(params=pb.DedupParams(chunking=TINY, namespace="fill",
                                                    stream_id=stream_id))
        for at in range(0, len(data), MESSAGE):
            yield pb.DedupRequest(data=data[at : at + MESSAGE])
    try:
        return list(stub.Dedup(requests(), timeout=RPC_TIMEOUT))[-1].summary
    except grpc.RpcError as e:
        return e


def fill_index(server: ChunkdServer, stub: pb_grpc.ChunkServiceStub, plan: Plan,
               parallel: int) -> int:
    """Dedups unique data until the index refuses more; returns how many
    fill streams it took."""
    # Every chunk is at most 1024 bytes, so this many streams are enough.
    most = plan.entries * 1024 // FILL_STREAM_BYTES + parallel + 1
    seed = 0
    while metric(server, "chunkd_index_entries") < plan.entries:
        assert seed < most, "the index never filled up"
        results: List[object] = [None] * parallel
        def one(k: int) -> None:
            results[k] = dedup(stub, fill_data(seed + k), f"fill-{seed + k}")
        threads = [threading.Thread(target=one, args=(k,)) for k in range(parallel)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        for r in results:
            if isinstance(r, grpc.RpcError):
                assert r.code() == grpc.StatusCode.RESOURCE_EXHAUSTED, r
                assert "--index_max_entries" in (r.details() or ""), r.details()
        seed += parallel
    assert metric(server, "chunkd_index_entries") == plan.entries
    return seed


def fill_hint_cache(server: ChunkdServer, stub: pb_grpc.ChunkServiceStub, plan: Plan,
                    indexed_streams: int) -> None:
    """Dedups indexed data again: every chunk is a duplicate the cache does
    not hold yet, so each goes in, until more went in than it holds."""
    capacity = plan.hint_cache_mib * MiB // HINT_CACHE_ENTRY
    for seed in range(indexed_streams):
        if metric(server, "chunkd_hint_cache_total", result="miss") > capacity:
            return
        summary = dedup(stub, fill_data(seed), f"again-{seed}")
        assert not isinstance(summary, grpc.RpcError), summary
    assert metric(server, "chunkd_hint_cache_total", result="miss") > capacity, (
        "too little indexed data to fill the hint cache")


def reserved(server: ChunkdServer) -> float:
    return metric(server, "chunkd_stream_memory_bytes", state="reserved")


def waiting(server: ChunkdServer) -> float:
    return metric(server, "chunkd_streams_waiting_for_memory")


class Kind:
    """What one kind of stream sends and whether its client reads."""

    def __init__(self, name: str, rpc: str, params: "pb.ChunkingParams", size: int,
                 reads: bool) -> None:
        self.name, self.rpc, self.params, self.size, self.reads = name, rpc, params, size, reads


#: The largest final chunk size, Chunk without fingerprints: the chunker's
#: buffers at their largest.
LARGEST = Kind("largest chunks", "Chunk", LARGE, LARGE_BYTES, reads=True)
#: 64-byte chunks for a client that never reads: the responses pile up.
SMALLEST = Kind("64-byte chunks, not read", "Chunk", SMALL, SMALL_BYTES, reads=False)
#: The default parameters: Dedup with fastcdc's default sizes and hints.
DEFAULT = Kind("default parameters", "Dedup", pb.ChunkingParams(algorithm=pb.ALGORITHM_FASTCDC),
               32 * MiB, reads=True)


class Streams:
    """Streams, each on its own connection; each sends its first message with
    its parameters and a message of data, then, once admitted to run, the rest
    of its bytes, then waits for release() before it half-closes. A stream
    that waits for its memory holds its first message."""

    def __init__(self, server: ChunkdServer) -> None:
        self.server = server
        self.hold = threading.Event()
        self.source = random.Random(7).randbytes(32 * MiB)
        self.channels: List[grpc.Channel] = []
        self.calls: List[tuple] = []  # (kind, call)
        self.readers: List[threading.Thread] = []
        self.errors: List[str] = []
        self.totals: List[int] = []

    def _requests(self, i: int, kind: Kind) -> Iterator[object]:
        at = (i * MESSAGE) % len(self.source)
        def piece() -> bytes:
            nonlocal at
            data = self.source[at : at + MESSAGE]
            at = (at + MESSAGE) % len(self.source)
            return data
        if kind.rpc == "Chunk":
            fingerprint = (pb.FINGERPRINT_ALGORITHM_NONE if kind is LARGEST
                           else pb.FINGERPRINT_ALGORITHM_SHA256)
            yield pb.ChunkRequest(params=pb.ChunkParams(chunking=kind.params,
                                                        fingerprint=fingerprint),
                                  data=piece())
            make = pb.ChunkRequest
        else:
            yield pb.DedupRequest(params=pb.DedupParams(chunking=kind.params,
                                                        namespace=f"streams-{i}"),
                                  data=piece())
            make = pb.DedupRequest
        for _ in range(kind.size // MESSAGE - 1):
            yield make(data=piece())
        self.hold.wait(RPC_TIMEOUT)

    def _read(self, kind: Kind, call) -> None:
        try:
            responses = list(call)
            total = responses[-1].summary.total_bytes
            self.totals.append(total)
            if total != kind.size:
                self.errors.append(f"{kind.name}: {responses[-1].summary}")
        except grpc.RpcError as e:
            self.errors.append(f"{kind.name}: {e.code()} {e.details()}")

    def open(self, kind: Kind) -> None:
        i = len(self.calls)
        channel = grpc.insecure_channel(self.server.address)
        self.channels.append(channel)
        stub = pb_grpc.ChunkServiceStub(channel)
        call = getattr(stub, kind.rpc)(self._requests(i, kind), timeout=RPC_TIMEOUT)
        self.calls.append((kind, call))
        if kind.reads:
            reader = threading.Thread(target=self._read, args=(kind, call))
            reader.start()
            self.readers.append(reader)

    def release(self) -> None:
        """The streams whose clients read end and must be exact (those still
        waiting for their memory run first); the others are cancelled by
        their client."""
        self.hold.set()
        for kind, call in self.calls:
            if not kind.reads:
                call.cancel()
        for reader in self.readers:
            reader.join(WAIT)
        assert not any(r.is_alive() for r in self.readers), "a stream never ended"
        for channel in self.channels:
            channel.close()
        assert not self.errors, self.errors


def open_admitted(streams: Streams, kind: Kind) -> float:
    """Opens a stream that the stream memory holds at once; returns what it
    reserved."""
    before = reserved(streams.server)
    streams.open(kind)
    wait_for(f"a stream of {kind.name} reserving its memory",
             lambda: reserved(streams.server) > before, streams.server)
    assert waiting(streams.server) == 0
    return reserved(streams.server) - before


def fill_stream_memory(streams: Streams, plan: Plan) -> Dict[str, int]:
    """Opens streams of the largest and of the smallest chunks, alternately
    while both fit, until the stream memory holds no more of either (what
    each reserves is read from the server as it is admitted); returns how
    many of each."""
    cost = {LARGEST.name: open_admitted(streams, LARGEST),
            SMALLEST.name: open_admitted(streams, SMALLEST)}
    count = {LARGEST.name: 1, SMALLEST.name: 1}
    while len(streams.calls) < plan.max_streams:
        free = plan.stream_memory - reserved(streams.server)
        fits = [k for k in (LARGEST, SMALLEST) if cost[k.name] <= free]
        if not fits:
            break
        kind = min(fits, key=lambda k: count[k.name])
        assert open_admitted(streams, kind) == cost[kind.name]
        count[kind.name] += 1
    return count


def settle(server: ChunkdServer) -> None:
    """Waits (bounded) until chunkd's CPU time stops advancing: the
    streams' input is cut and their responses are queued. Only makes the
    peak more complete; nothing is asserted on it."""
    def cpu_ticks() -> int:
        fields = Path(f"/proc/{server.process.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return int(fields[11]) + int(fields[12])  # utime + stime
    last = -1
    for _ in range(240):
        now = cpu_ticks()
        if now == last:
            return
        last = now
        time.sleep(0.5)


def run_full_load(server: ChunkdServer, plan: Plan) -> Dict[str, float]:
    """Fills every budget; returns the figures, asserting the fills."""
    channel = grpc.insecure_channel(server.address)
    stub = pb_grpc.ChunkServiceStub(channel)
    start = time.monotonic()
    indexed = fill_index(server, stub, plan, parallel=min(plan.max_streams, 4))
    print(f"\nindex full after {time.monotonic() - start:.0f} s")
    fill_hint_cache(server, stub, plan, indexed)
    print(f"hint cache full after {time.monotonic() - start:.0f} s")
    channel.close()
    streams = Streams(server)
    try:
        count = fill_stream_memory(streams, plan)
        running = len(streams.calls)
        # The other slots: streams that wait for their memory, each holding
        # a message of the request budget.
        while len(streams.calls) < plan.max_streams:
            streams.open(LARGEST if len(streams.calls) % 2 else SMALLEST)
        wait_for(f"{plan.max_streams} streams admitted, {plan.max_streams - running} waiting",
                 lambda: server.active_streams() == plan.max_streams
                 and waiting(server) == plan.max_streams - running, server)
        large, small = count[LARGEST.name], count[SMALLEST.name]
        wait_for("every byte of the running large streams cut",
                 lambda: metric(server, "chunkd_ingest_bytes_total", algorithm="repmaxcdc")
                 >= large * LARGE_BYTES, server)
        wait_for("a message of each running small stream read",
                 lambda: metric(server, "chunkd_ingest_bytes_total", algorithm="fixed")
                 >= small * MESSAGE, server)
        print(f"streams full after {time.monotonic() - start:.0f} s")
        settle(server)
        figures = {
            "peak": server.vm_kib("VmHWM") * 1024.0,
            "reserved": reserved(server),
            "large": large,
            "small": small,
            "waiting": waiting(server),
            "small_ingested": metric(server, "chunkd_ingest_bytes_total", algorithm="fixed"),
        }
        assert server.alive(), server.log()[-3000:]
    finally:
        streams.release()
    return figures


def check_peak(plan: Plan, figures: Dict[str, float], what: str) -> None:
    peak = figures["peak"]
    print(f"\n{what}: limit {plan.limit >> 20} MiB, {plan.max_streams} streams, "
          f"budget {plan.budget >> 20} MiB, stream memory {plan.stream_memory >> 20} MiB, "
          f"{plan.entries} index entries, hint cache {plan.hint_cache_mib} MiB; "
          f"running {figures.get('large', 0):.0f} of the largest chunks and "
          f"{figures.get('small', 0):.0f} of 64-byte chunks "
          f"({figures.get('reserved', 0) / MiB:.0f} MiB reserved), "
          f"{figures.get('waiting', 0):.0f} waiting; peak RSS {peak / MiB:.0f} MiB = "
          f"{peak / plan.limit:.3f} of the limit, {peak / plan.bound:.3f} of the bound "
          f"({plan.bound >> 20} MiB)")
    assert plan.bound <= SHARE * plan.limit
    assert peak <= plan.bound, f"peak {peak} above the bound {plan.bound}"
    assert peak <= SHARE * plan.limit


def start_under_limit(tmp_path: Path) -> ChunkdServer:
    limit_file = tmp_path / "memory.max"
    limit_file.write_text(f"{LIMIT}\n")
    return ChunkdServer(chunkd_binary(), extra_args=[
        *CHART_FLAGS, f"--memory_limit_file={limit_file}"])


def test_full_load_under_the_charts_limit_given_by_file(tmp_path: Path) -> None:
    with start_under_limit(tmp_path) as server:
        plan = Plan(server.log())
        assert plan.limit == LIMIT and plan.source.endswith("memory.max")
        # The sizing is for real: the chart's server defaults (128 streams,
        # a 1 GiB budget) did not fit.
        assert 1 <= plan.max_streams < 128
        figures = run_full_load(server, plan)
        assert server.alive()
    check_peak(plan, figures, "--memory_limit_file")


def test_more_large_streams_than_the_stream_memory_holds_take_turns(tmp_path: Path) -> None:
    """--max_streams streams of the largest chunks: as many run as the stream
    memory holds, the others wait, reading nothing, and run as those end;
    every one ends exact and resident memory stays under the bound."""
    with start_under_limit(tmp_path) as server:
        plan = Plan(server.log())
        streams = Streams(server)
        try:
            one = open_admitted(streams, LARGEST)
            fit = int(plan.stream_memory // one)
            assert 1 <= fit < plan.max_streams
            for _ in range(plan.max_streams - 1):
                streams.open(LARGEST)
            wait_for(f"{fit} running, {plan.max_streams - fit} waiting",
                     lambda: server.active_streams() == plan.max_streams
                     and waiting(server) == plan.max_streams - fit, server)
            assert reserved(server) == fit * one
            wait_for("every byte of the running streams cut",
                     lambda: metric(server, "chunkd_ingest_bytes_total", algorithm="repmaxcdc")
                     >= fit * LARGE_BYTES, server)
            # The waiting ones hold their first message, uncut.
            assert metric(server, "chunkd_ingest_bytes_total",
                          algorithm="repmaxcdc") == fit * LARGE_BYTES
        finally:
            streams.release()  # the running ones end, the waiting ones take turns
        assert len(streams.totals) == plan.max_streams
        wait_for("every reservation back", lambda: reserved(server) == 0, server)
        figures = {"peak": server.vm_kib("VmHWM") * 1024.0, "large": fit,
                   "reserved": fit * one, "waiting": plan.max_streams - fit}
    print(f"\n{plan.max_streams} streams of the largest chunks, {one / MiB:.0f} MiB "
          f"each: {fit} at a time")
    check_peak(plan, figures, "largest chunks, taking turns")


def test_default_streams_all_run_at_once(tmp_path: Path) -> None:
    """--max_streams Dedup streams of the default parameters: every one is
    admitted and runs at once (none waits for its memory)."""
    with start_under_limit(tmp_path) as server:
        plan = Plan(server.log())
        streams = Streams(server)
        try:
            for _ in range(plan.max_streams):
                streams.open(DEFAULT)
            wait_for(f"{plan.max_streams} default streams running",
                     lambda: server.active_streams() == plan.max_streams
                     and reserved(server) > 0 and waiting(server) == 0
                     and metric(server, "chunkd_ingest_bytes_total", rpc="Dedup")
                     >= plan.max_streams * DEFAULT.size, server)
            running = plan.max_streams - waiting(server)
            figures = {"peak": server.vm_kib("VmHWM") * 1024.0,
                       "reserved": reserved(server), "waiting": waiting(server)}
        finally:
            streams.release()
        assert len(streams.totals) == plan.max_streams
    print(f"\ndefault parameters: {plan.max_streams} streams admitted, {running:.0f} "
          f"running at once ({figures['reserved'] / plan.max_streams / MiB:.1f} MiB "
          f"reserved each)")
    assert running == plan.max_streams
    check_peak(plan, figures, "default parameters")


# --- The same under a real cgroup v1 memory limit -------------------------

CGROUP_V1 = Path("/sys/fs/cgroup/memory")


def cgroup_v1_unavailable() -> Optional[str]:
    """Why a cgroup v1 memory limit cannot be set here, or None."""
    if os.geteuid() != 0:
        return "not root: cannot create a cgroup"
    if not (CGROUP_V1 / "memory.limit_in_bytes").is_file():
        return f"no cgroup v1 memory controller at {CGROUP_V1}"
    if not os.access(CGROUP_V1, os.W_OK):
        return f"{CGROUP_V1} is not writable (a container without cgroup rights)"
    return None


@pytest.fixture
def cgroup_v1() -> Iterator[Path]:
    """A fresh cgroup v1 memory cgroup with the chart's limit; removed after."""
    why = cgroup_v1_unavailable()
    if why:
        pytest.skip(why)
    group = CGROUP_V1 / f"chunkd-memory-test-{os.getpid()}"
    try:
        group.mkdir()
    except OSError as e:
        pytest.skip(f"cannot create {group}: {e}")
    try:
        (group / "memory.limit_in_bytes").write_text(str(LIMIT))
        # A process must be able to join it (a container may forbid it).
        probe = subprocess.Popen(["sleep", "60"])
        try:
            (group / "cgroup.procs").write_text(str(probe.pid))
        except OSError as e:
            pytest.skip(f"cannot move a process into {group}: {e}")
        finally:
            probe.kill()
            probe.wait()
        yield group
    finally:
        # Its process has exited (the server is stopped first).
        for _ in range(50):
            try:
                group.rmdir()
                break
            except OSError:
                time.sleep(0.1)


def test_full_load_in_a_real_cgroup_v1(cgroup_v1: Path, tmp_path: Path) -> None:
    # The server's process joins the cgroup before it execs chunkd, so that
    # chunkd finds its limit the way it would in a container.
    wrapper = tmp_path / "chunkd-in-cgroup"
    wrapper.write_text(f"#!/bin/sh\necho $$ > {cgroup_v1}/cgroup.procs || exit 3\n"
                       f"exec {chunkd_binary()} \"$@\"\n")
    wrapper.chmod(0o755)
    with ChunkdServer(wrapper, extra_args=CHART_FLAGS) as server:
        plan = Plan(server.log())
        assert plan.limit == LIMIT
        assert plan.source == str(cgroup_v1 / "memory.limit_in_bytes")
        figures = run_full_load(server, plan)
        assert server.alive(), server.log()[-3000:]
        cgroup_peak = int((cgroup_v1 / "memory.max_usage_in_bytes").read_text())
        oom = (cgroup_v1 / "memory.oom_control").read_text()
    print(f"\ncgroup v1: its peak usage {cgroup_peak / MiB:.0f} MiB = "
          f"{cgroup_peak / LIMIT:.3f} of the limit; {oom.split()}")
    assert re.search(r"^under_oom 0$", oom, re.M), oom
    kills = re.search(r"^oom_kill (\d+)$", oom, re.M)
    assert kills is None or kills.group(1) == "0", oom
    check_peak(plan, figures, "cgroup v1")
