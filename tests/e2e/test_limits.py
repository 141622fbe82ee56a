"""Stream limits and the global memory budgets:
past --max_streams a stream gets RESOURCE_EXHAUSTED naming the flag; under a
tight --memory_budget streams pause instead of failing and every chunk comes
out exactly as without the budget; a stream whose memory does not fit
--stream_memory_budget waits its turn and loses nothing, one that never
could is refused at once; impossible settings stop startup."""

from __future__ import annotations

import re
import subprocess
import threading
import time
import urllib.request
from pathlib import Path
from typing import Iterator, List

import grpc
import pytest

from chunkd_client._proto.chunkd.v1 import chunkd_pb2 as pb
from chunkd_client._proto.chunkd.v1 import chunkd_pb2_grpc as pb_grpc
from chunkd_client.testing import ChunkdServer, free_port, serving
from e2e_util import RPC_TIMEOUT, SUBPROCESS_TIMEOUT, fastcdc_params, random_bytes

MiB = 1 << 20


def gauge(server: ChunkdServer, name: str, labels: str = "") -> float:
    url = f"http://{server.metrics_address}/metrics"
    with urllib.request.urlopen(url, timeout=10) as response:
        text = response.read().decode()
    selector = re.escape("{" + labels + "}") if labels else r"(?:\{[^}]*\})?"
    m = re.search(rf"^{name}{selector} (\S+)$", text, re.MULTILINE)
    assert m, f"{name}{{{labels}}} not exported"
    return float(m.group(1))


def wait_for_gauge(server: ChunkdServer, name: str, value: float, labels: str = "") -> None:
    deadline = time.monotonic() + 30
    while gauge(server, name, labels) != value:
        assert time.monotonic() < deadline, f"{name} never reached {value}"
        time.sleep(0.05)


def held_requests(release: threading.Event) -> Iterator[pb.ChunkRequest]:
    yield pb.ChunkRequest(params=pb.ChunkParams(chunking=fastcdc_params()), data=b"x" * 1000)
    release.wait(RPC_TIMEOUT)


@pytest.fixture(scope="module")
def two_stream_server(chunkd_bin: Path) -> Iterator[ChunkdServer]:
    yield from serving(ChunkdServer(chunkd_bin, extra_args=["--max_streams=2"]))


def test_stream_past_max_streams_is_resource_exhausted(two_stream_server) -> None:
    release = threading.Event()
    with grpc.insecure_channel(two_stream_server.address) as channel:
        stub = pb_grpc.ChunkServiceStub(channel)
        held = [stub.Chunk(held_requests(release), timeout=RPC_TIMEOUT) for _ in range(2)]
        try:
            wait_for_gauge(two_stream_server, "chunkd_active_streams", 2)
            with pytest.raises(grpc.RpcError) as info:
                list(stub.Chunk(held_requests(threading.Event()), timeout=RPC_TIMEOUT))
            assert info.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
            assert "limit of 2 streams (--max_streams)" in info.value.details()
        finally:
            release.set()
        for call in held:
            assert list(call)[-1].summary.total_bytes == 1000
        # The slots are free again.
        wait_for_gauge(two_stream_server, "chunkd_active_streams", 0)
        requests = [pb.ChunkRequest(params=pb.ChunkParams(chunking=fastcdc_params()),
                                    data=b"y" * 5000)]
        assert list(stub.Chunk(iter(requests), timeout=RPC_TIMEOUT))[-1].summary.total_bytes == 5000


def records(stub: pb_grpc.ChunkServiceStub, data: bytes, piece: int) -> List[tuple]:
    def requests():
        yield pb.ChunkRequest(params=pb.ChunkParams(chunking=fastcdc_params()))
        for i in range(0, len(data), piece):
            yield pb.ChunkRequest(data=data[i : i + piece])

    out = []
    for response in stub.Chunk(requests(), timeout=RPC_TIMEOUT):
        out.extend((r.offset, r.length, r.fingerprint) for r in response.batch.chunks)
    return out


def test_streams_pause_at_the_memory_budget_and_lose_nothing(chunkd_bin, server) -> None:
    """Four streams share a budget of four messages: each can hold at most
    one message, so they keep pausing, yet every chunk list is exact."""
    budget_server = ChunkdServer(
        chunkd_bin,
        max_message_bytes=MiB,
        extra_args=["--max_streams=4", f"--memory_budget={4 * MiB}",
                    f"--max_inflight_bytes={MiB}"],
    )
    inputs = [random_bytes(900 + i, 12 * MiB + i * 7919) for i in range(4)]
    with grpc.insecure_channel(server.address) as channel:
        expected = [records(pb_grpc.ChunkServiceStub(channel), d, MiB) for d in inputs]
    results: List[object] = [None] * len(inputs)
    with budget_server, grpc.insecure_channel(budget_server.address) as channel:
        stub = pb_grpc.ChunkServiceStub(channel)

        def run(i: int) -> None:
            try:
                results[i] = records(stub, inputs[i], 256 * 1024 + 3)
            except grpc.RpcError as e:  # reported below
                results[i] = e

        threads = [threading.Thread(target=run, args=(i,)) for i in range(len(inputs))]
        for t in threads:
            t.start()
        for t in threads:
            t.join(RPC_TIMEOUT)
        assert budget_server.alive()
    for i, result in enumerate(results):
        assert result == expected[i], f"stream {i}: {result if not isinstance(result, list) else 'differs'}"


RESERVED = 'state="reserved"'
#: Flags of both servers below, so that a stream reserves the same on each.
STREAM_MEMORY_FLAGS = ["--threads=2", "--max_message_bytes=4194304",
                       "--max_inflight_bytes=16777216", "--stream_idle_timeout=0"]


def reserved_by_one_stream(chunkd_bin: Path) -> int:
    """What one Chunk stream with fastcdc's default sizes reserves."""
    release = threading.Event()
    with ChunkdServer(chunkd_bin, extra_args=STREAM_MEMORY_FLAGS) as probe, \
            grpc.insecure_channel(probe.address) as channel:
        call = pb_grpc.ChunkServiceStub(channel).Chunk(held_requests(release),
                                                       timeout=RPC_TIMEOUT)
        try:
            deadline = time.monotonic() + RPC_TIMEOUT
            while gauge(probe, "chunkd_stream_memory_bytes", RESERVED) == 0:
                assert time.monotonic() < deadline, "the stream never reserved its memory"
                time.sleep(0.05)
            return int(gauge(probe, "chunkd_stream_memory_bytes", RESERVED))
        finally:
            release.set()
            list(call)


def test_a_stream_waits_for_its_memory_and_loses_nothing(chunkd_bin: Path, server) -> None:
    """A stream memory of one and a half streams: the second stream waits,
    reading nothing, until the first ends, then runs; both exact. A stream
    that could never fit is refused at once."""
    one = reserved_by_one_stream(chunkd_bin)
    data = random_bytes(77, 9 * MiB + 123)
    with grpc.insecure_channel(server.address) as channel:
        expected = records(pb_grpc.ChunkServiceStub(channel), data, MiB)
    release = threading.Event()

    def waiting_requests() -> Iterator[pb.ChunkRequest]:
        yield pb.ChunkRequest(params=pb.ChunkParams(chunking=fastcdc_params()))
        for i in range(0, len(data), MiB):
            yield pb.ChunkRequest(data=data[i : i + MiB])

    with ChunkdServer(chunkd_bin, extra_args=[
            *STREAM_MEMORY_FLAGS, f"--stream_memory_budget={one + one // 2}"]) as tight, \
            grpc.insecure_channel(tight.address) as channel:
        assert (f"chunkd: warning: --stream_memory_budget {one + one // 2} is below the "
                "largest stream's memory") in tight.log()
        stub = pb_grpc.ChunkServiceStub(channel)
        first = stub.Chunk(held_requests(release), timeout=RPC_TIMEOUT)
        wait_for_gauge(tight, "chunkd_stream_memory_bytes", one, RESERVED)
        second = stub.Chunk(waiting_requests(), timeout=RPC_TIMEOUT)
        try:
            wait_for_gauge(tight, "chunkd_streams_waiting_for_memory", 1)
            assert gauge(tight, "chunkd_stream_memory_bytes", 'state="waiting"') == one
            assert tight.active_streams() == 2
            # Waiting, it has cut nothing: only the first's 1000 bytes are in.
            assert gauge(tight, "chunkd_ingest_bytes_total",
                         'algorithm="fastcdc",rpc="Chunk"') == 1000
            # Chunking parameters that could never fit: refused at once.
            huge = pb.ChunkingParams(algorithm=pb.ALGORITHM_REP_MAX_CDC, min_size=4 * MiB,
                                     horizon_size=16 * MiB)
            with pytest.raises(grpc.RpcError) as refused:
                list(stub.Chunk(iter([pb.ChunkRequest(params=pb.ChunkParams(chunking=huge))]),
                                timeout=RPC_TIMEOUT))
            assert refused.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
            assert "--stream_memory_budget" in refused.value.details()
            assert gauge(tight, "chunkd_streams_waiting_for_memory") == 1
        finally:
            release.set()
        assert list(first)[-1].summary.total_bytes == 1000
        got = []
        for response in second:
            got.extend((r.offset, r.length, r.fingerprint) for r in response.batch.chunks)
        assert got == expected
        wait_for_gauge(tight, "chunkd_stream_memory_bytes", 0, RESERVED)
        assert gauge(tight, "chunkd_streams_waiting_for_memory") == 0


@pytest.mark.parametrize(
    "flags,needle",
    [
        (["--max_streams=0"], "--max_streams must be at least 1"),
        (["--max_streams=100", "--memory_budget=1000000"],
         "--memory_budget 1000000 must be at least --max_streams (100) x "
         "--max_message_bytes (4194304)"),
    ],
)
def test_impossible_limits_stop_startup(chunkd_bin: Path, flags, needle: str) -> None:
    result = subprocess.run(
        [str(chunkd_bin), f"--listen=127.0.0.1:{free_port()}", "--metrics_listen=", *flags],
        capture_output=True, text=True, timeout=SUBPROCESS_TIMEOUT,
    )
    assert result.returncode == 2
    assert needle in result.stderr
