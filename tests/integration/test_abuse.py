"""Abuse tests: a real chunkd tried as an attacker and a careless client
would, loopback only (docs/operations.md, "Running chunkd exposed").

Each test starts its own chunkd with the flags it exercises, asserts what
the server does, and that it still serves afterwards. Every loop is bounded
in count and time. The figures the targets name (resident memory under a
rapid-reset flood, how long held streams live) are measured and written to
the report file `build/abuse-report.txt` (and printed with `pytest -s`);
they are not timed assertions.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import re
import socket
import subprocess
import sys
import threading
import time
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Dict, List, Optional

import grpc
import pytest

from chunkd_client import ChunkdError, Client
from chunkd_client.aio import AsyncClient
from chunkd_client._proto.chunkd.v1 import chunkd_pb2 as pb
from chunkd_client.testing import ChunkdServer, free_port, health_status

sys.path.insert(0, str(Path(__file__).resolve().parent))
import h2raw  # noqa: E402  (the raw HTTP/2 client beside this file)

REPO = Path(__file__).resolve().parents[2]
REPORT = REPO / "build" / "abuse-report.txt"
MiB = 1 << 20
CHUNK = "/chunkd.v1.ChunkService/Chunk"
DEDUP = "/chunkd.v1.ChunkService/Dedup"
DEADLINE = 60.0
#: Bound on waiting for a line of the abuse log, written every 10 s
#: (kAbuseLogInterval in server/main.cc).
LOG_WAIT = 60.0
TOKEN_A = "token-a-0123456789abcdef"
TOKEN_B = "token-b-0123456789abcdef"


def binary(env: str, default: Path) -> Path:
    path = Path(os.environ.get(env) or default)
    if not (path.is_file() and os.access(path, os.X_OK)):
        pytest.fail(f"{path} is not an executable: build it first", pytrace=False)
    return path


@pytest.fixture(scope="module")
def chunkd_bin() -> Path:
    return binary("CHUNKD_BIN", REPO / "build" / "server" / "chunkd")


def report(line: str) -> None:
    """One figure of the abuse run, for the report file and `pytest -s`."""
    print(line)
    REPORT.parent.mkdir(parents=True, exist_ok=True)
    with REPORT.open("a") as out:
        out.write(f"{time.strftime('%Y-%m-%d %H:%M:%S')} {line}\n")


def metrics_text(server: ChunkdServer, timeout: float = 10.0) -> str:
    url = f"http://{server.metrics_address}/metrics"
    with urllib.request.urlopen(url, timeout=timeout) as response:
        return response.read().decode()


def metric(server: ChunkdServer, name: str, **labels: str) -> Optional[float]:
    """The value of one series, None when it is not exported."""
    want = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
    pattern = re.escape(name) + (r"\{" + re.escape(want) + r"\}" if labels else "")
    match = re.search(rf"^{pattern} (\S+)$", metrics_text(server), re.MULTILINE)
    return None if match is None else float(match.group(1))


def wait_until(predicate, timeout: float, what: str, step: float = 0.05):
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        assert time.monotonic() < deadline, f"{what} within {timeout}s"
        time.sleep(step)


def chunk_params(**overrides) -> pb.ChunkParams:
    chunking = dict(algorithm=pb.ALGORITHM_FASTCDC, min_size=4096, avg_size=16384,
                    max_size=65536)
    chunking.update(overrides)
    return pb.ChunkParams(chunking=pb.ChunkingParams(**chunking))


def assert_serving(server: ChunkdServer) -> None:
    """The server is alive and answers a real Chunk exactly."""
    assert server.alive(), server.log()[-3000:]
    data = os.urandom(300_000)
    with Client(server.address, timeout=DEADLINE) as client:
        records, summary = client.chunk_all(data)
    assert summary.total_bytes == len(data)
    assert sum(r.length for r in records) == len(data)


def raw_stream(channel: grpc.Channel, method: str):
    """A bidi call that sends the caller's raw bytes as messages."""
    return channel.stream_stream(method, request_serializer=None,
                                 response_deserializer=None)


# --- 1. HTTP/2 rapid reset ----------------------------------------------------


@pytest.mark.parametrize("method", [CHUNK, "/grpc.health.v1.Health/Check",
                                    "/no.such.Service/Method"])
def test_rapid_reset_flood_is_cut_off_while_others_are_served(chunkd_bin, method) -> None:
    streams = 100_000
    # A tenth of the default rate: chunkd closes a connection only while it
    # takes the connection's streams at more than twice the rate, and a
    # loaded machine's chunkd may take fewer than 2000 a second (the docs'
    # figures for the default are in docs/operations.md).
    with ChunkdServer(chunkd_bin, extra_args=["--max_stream_rate_per_connection=100"]) as server:
        idle_kib = server.vm_kib("VmRSS")
        peak = [idle_kib]
        stop = threading.Event()

        def watch() -> None:
            while not stop.is_set():
                peak[0] = max(peak[0], server.vm_kib("VmRSS"))
                time.sleep(0.02)

        legit: Dict[str, object] = {}
        data = os.urandom(64 * MiB)

        def legitimate_call() -> None:
            try:
                with Client(server.address, timeout=DEADLINE) as client:
                    records, summary = client.chunk_all(data)
                legit["ok"] = (summary.total_bytes, sum(r.length for r in records))
            except ChunkdError as e:  # reported by the assertion below
                legit["error"] = e

        watcher = threading.Thread(target=watch)
        watcher.start()
        flood = h2raw.Connection(server.address)
        call = threading.Thread(target=legitimate_call)
        call.start()
        try:
            sent, seconds = flood.rapid_reset(method, streams)
            assert flood.closed.wait(30), "chunkd never closed the flooding connection"
            call.join(DEADLINE)
            assert not call.is_alive(), "the legitimate call never ended"
        finally:
            flood.close()
            stop.set()
            watcher.join(10)
        growth_mib = (peak[0] - idle_kib) / 1024
        report(f"rapid reset on {method}: {sent} of {streams} streams sent in "
               f"{seconds:.1f}s before chunkd closed the connection; RSS idle "
               f"{idle_kib // 1024} MiB, peak "
               f"growth {growth_mib:.0f} MiB (target <= 256, a 64 MiB Chunk "
               f"included); legitimate Chunk: {legit}")
        assert legit.get("ok") == (64 * MiB, 64 * MiB), legit
        assert growth_mib <= 256, f"RSS grew {growth_mib:.0f} MiB"
        assert metric(server, "chunkd_connections_closed_total", reason="stream_rate") == 1
        assert wait_until(lambda: metric(server, "chunkd_active_streams") == 0, 30,
                          "chunkd_active_streams back to 0")
        assert_serving(server)
        assert "connections closed for opening streams faster than" in wait_until(
            lambda: "connections closed" in server.log() and server.log(), LOG_WAIT,
            "the aggregated log line")


def test_a_fast_but_steady_client_is_refused_not_cut_off(chunkd_bin) -> None:
    """Streams past --max_stream_rate_per_connection are refused with
    RESOURCE_EXHAUSTED naming the flag; below twice the rate the connection
    stays open. The client calls back to back until it is refused, and
    after each refusal waits one stream's share of a second: however fast
    or slow it and the server are, it is refused again and again, yet never
    opens streams at twice the rate for a second."""
    rate, refusals = 10, 20
    with ChunkdServer(chunkd_bin, extra_args=[
            f"--max_stream_rate_per_connection={rate}"]) as server:
        codes: Dict[str, int] = {}
        details = set()
        with grpc.insecure_channel(server.address) as channel:
            info = channel.unary_unary("/chunkd.v1.ChunkService/GetServerInfo",
                                       request_serializer=None,
                                       response_deserializer=None)
            for _ in range(100 * refusals):
                try:
                    info(b"", timeout=DEADLINE)
                    code = "OK"
                except grpc.RpcError as e:
                    code = e.code().name
                    details.add(e.details())
                codes[code] = codes.get(code, 0) + 1
                if code != "RESOURCE_EXHAUSTED":
                    if code != "OK":
                        break
                    continue
                if codes[code] == refusals:
                    break
                time.sleep(1.0 / rate)
        assert codes.get("RESOURCE_EXHAUSTED") == refusals and set(codes) == {
            "OK", "RESOURCE_EXHAUSTED"}, codes
        assert all("--max_stream_rate_per_connection" in d for d in details), details
        assert metric(server, "chunkd_connections_closed_total", reason="stream_rate") == 0
        assert_serving(server)


# --- 2. Held stream slots -------------------------------------------------------


def trailer_statuses(connections: List["h2raw.Connection"], needles: Dict[str, str]
                     ) -> Dict[str, int]:
    """The status names of the streams the server ended, counted; each
    message must name the flag `needles` gives for its status."""
    statuses: Dict[str, int] = {}
    for c in connections:
        for trailers in c.ended.values():
            status = dict(trailers).get("grpc-status")
            message = urllib.parse.unquote(dict(trailers).get("grpc-message", ""))
            key = {"4": "DEADLINE_EXCEEDED", "8": "RESOURCE_EXHAUSTED"}.get(status, status)
            statuses[key] = statuses.get(key, 0) + 1
            assert needles.get(key, "(no such status expected)") in message, (key, message)
    return statuses


def test_header_only_floods_across_tokens(chunkd_bin, tmp_path) -> None:
    tokens = tmp_path / "tokens"
    tokens.write_text(f"{TOKEN_A} *\n{TOKEN_B} *\n")
    # No --stream_idle_timeout here: the admitted streams stay until the
    # test closes them, however long opening the others takes (the idle
    # timeout is the next test's).
    with ChunkdServer(chunkd_bin, extra_args=[
            f"--auth_tokens={tokens}", "--max_streams=128",
            "--stream_idle_timeout=0"]) as server:
        # 1000 streams of token A that send their headers and nothing else,
        # 25 per connection (under --max_streams_per_connection's 32).
        connections = [h2raw.Connection(server.address, authorization=f"Bearer {TOKEN_A}")
                       for _ in range(40)]
        try:
            for c in connections:
                assert c.settings_seen.wait(DEADLINE)
                assert c.settings.get(h2raw.MAX_CONCURRENT_STREAMS) == 32
            for c in connections:
                for _ in range(25):
                    c.open_stream(c.headers_block(CHUNK))
            # Token A holds its quarter of the slots at most; the rest are
            # refused.
            wait_until(lambda: sum(len(c.ended) for c in connections) == 968, DEADLINE,
                       "968 streams refused")
            assert trailer_statuses(connections, {
                "RESOURCE_EXHAUSTED": "--max_streams_per_token"}) == {"RESOURCE_EXHAUSTED": 968}
            assert metric(server, "chunkd_active_streams") == 32
            # Another token is served meanwhile.
            t = time.monotonic()
            with Client(server.address, timeout=DEADLINE, token=TOKEN_B) as client:
                data = os.urandom(1 * MiB)
                _, summary = client.chunk_all(data)
            assert summary.total_bytes == len(data)
            other_token_seconds = time.monotonic() - t
            # Token B's stream leaves the gauge just after its client saw
            # it end; token A's stay.
            wait_until(lambda: metric(server, "chunkd_active_streams") == 32, DEADLINE,
                       "token B's stream gone, token A's 32 still held")
        finally:
            for c in connections:
                c.close()
        assert_token_streams_gone(server, per_token_limit=968, idle=0)
        report(f"header-only flood: 1000 streams of one token, 32 admitted (per-token "
               f"limit), 968 refused; another token's 1 MiB Chunk took "
               f"{other_token_seconds:.2f}s; gauge back to 0")


def test_held_streams_end_at_the_idle_timeout(chunkd_bin, tmp_path) -> None:
    """A token's whole share held by streams that send nothing is freed by
    --stream_idle_timeout: each ends with DEADLINE_EXCEEDED naming it."""
    tokens = tmp_path / "tokens"
    tokens.write_text(f"{TOKEN_A} *\n{TOKEN_B} *\n")
    idle = 2.0
    with ChunkdServer(chunkd_bin, extra_args=[
            f"--auth_tokens={tokens}", "--max_streams=128",
            f"--stream_idle_timeout={idle}s"]) as server:
        connections = [h2raw.Connection(server.address, authorization=f"Bearer {TOKEN_A}")
                       for _ in range(2)]
        try:
            for c in connections:
                assert c.settings_seen.wait(DEADLINE)
            started = time.monotonic()
            for c in connections:
                for _ in range(16):
                    c.open_stream(c.headers_block(CHUNK))
            wait_until(lambda: sum(len(c.ended) for c in connections) == 32, idle + DEADLINE,
                       "every held stream ended")
            held_seconds = time.monotonic() - started
            assert trailer_statuses(connections, {
                "DEADLINE_EXCEEDED": "--stream_idle_timeout"}) == {"DEADLINE_EXCEEDED": 32}
        finally:
            for c in connections:
                c.close()
        assert_token_streams_gone(server, per_token_limit=0, idle=32)
        report(f"held streams: a token's 32 streams ended {held_seconds:.1f}s after "
               f"opening (--stream_idle_timeout {idle:.0f}s, target <= {idle + 2:.0f}s)")


def assert_token_streams_gone(server: ChunkdServer, per_token_limit: int, idle: int) -> None:
    """Once the test's connections are closed: no stream left, the refusals
    and idle ends counted, and token B served."""
    wait_until(lambda: metric(server, "chunkd_active_streams") == 0, DEADLINE,
               "gauge back to 0")
    assert metric(server, "chunkd_streams_rejected_total",
                  reason="per_token_limit") == per_token_limit
    assert metric(server, "chunkd_streams_rejected_total", reason="idle") == idle
    assert_serving_with_token(server)


def assert_serving_with_token(server: ChunkdServer) -> None:
    with Client(server.address, timeout=DEADLINE, token=TOKEN_B) as client:
        _, summary = client.chunk_all(b"x" * 100_000)
    assert summary.total_bytes == 100_000


def test_refused_and_unauthenticated_streams_never_count_as_active(chunkd_bin, tmp_path) -> None:
    tokens = tmp_path / "tokens"
    tokens.write_text(f"{TOKEN_A} *\n")
    # No --stream_idle_timeout: the held streams stay however long the test takes.
    with ChunkdServer(chunkd_bin, extra_args=[f"--auth_tokens={tokens}", "--max_streams=4",
                                              "--max_streams_per_token=0",
                                              "--stream_idle_timeout=0"]) as server:
        conns = [h2raw.Connection(server.address, authorization=f"Bearer {TOKEN_A}"),
                 h2raw.Connection(server.address, authorization="Bearer not-a-known-token")]
        try:
            for c in conns:
                for _ in range(20):
                    c.open_stream(c.headers_block(CHUNK))
            wait_until(lambda: sum(len(c.ended) for c in conns) >= 36, DEADLINE, "refusals sent")
            gauge = metric(server, "chunkd_active_streams")
        finally:
            for c in conns:
                c.close()
        assert gauge == 4, gauge
        assert metric(server, "chunkd_streams_rejected_total", reason="limit") == 16
        assert metric(server, "chunkd_streams_rejected_total", reason="token") == 20
        wait_until(lambda: metric(server, "chunkd_active_streams") == 0, DEADLINE,
                   "gauge back to 0")


def test_per_ip_limit(chunkd_bin) -> None:
    with ChunkdServer(chunkd_bin, extra_args=["--max_streams_per_ip=3",
                                              "--stream_idle_timeout=0"]) as server:
        conn = h2raw.Connection(server.address)
        try:
            for _ in range(5):
                conn.open_stream(conn.headers_block(CHUNK))
            wait_until(lambda: len(conn.ended) == 2, DEADLINE, "two refusals")
            messages = [urllib.parse.unquote(dict(t)["grpc-message"]) for t in conn.ended.values()]
        finally:
            conn.close()
        assert all("--max_streams_per_ip" in m and "127.0.0.1" in m for m in messages), messages
        assert metric(server, "chunkd_streams_rejected_total", reason="per_ip_limit") == 2


def test_idle_connection_gets_goaway(chunkd_bin) -> None:
    """--max_connection_idle: a connection without calls is closed by the
    server with GOAWAY (clients reconnect on their next call)."""
    with ChunkdServer(chunkd_bin, extra_args=["--max_connection_idle=1s"]) as server:
        conn = h2raw.Connection(server.address)
        try:
            assert conn.settings_seen.wait(10)
            wait_until(lambda: conn.goaway is not None, DEADLINE, "GOAWAY on the idle connection")
        finally:
            conn.close()
        assert_serving(server)


# --- 3. /metrics with idle connections -----------------------------------------------


def test_metrics_answer_while_idle_connections_are_open(chunkd_bin) -> None:
    with ChunkdServer(chunkd_bin) as server:
        host, port = server.metrics_address.rsplit(":", 1)
        idle = [socket.create_connection((host, int(port)), timeout=5) for _ in range(12)]
        try:
            times = []
            for _ in range(3):
                t = time.monotonic()
                text = metrics_text(server, timeout=10)
                times.append(time.monotonic() - t)
                assert "chunkd_active_streams" in text
        finally:
            for s in idle:
                s.close()
        report(f"/metrics with 12 idle connections open: scrapes took "
               f"{', '.join(f'{t:.2f}s' for t in times)} (target <= 2s)")
        assert_serving(server)


# --- 4. Garbage mid-stream ----------------------------------------------------------


GARBAGE = b"\xff\xff\xff\xff\x0f"  # a varint that never ends


@pytest.mark.parametrize("method", [CHUNK, DEDUP])
def test_garbage_message_mid_stream_is_invalid_argument(chunkd_bin, method) -> None:
    if method == CHUNK:
        first = pb.ChunkRequest(params=chunk_params()).SerializeToString()
        data = pb.ChunkRequest(data=os.urandom(200_000)).SerializeToString()
    else:
        first = pb.DedupRequest(params=pb.DedupParams(
            chunking=chunk_params().chunking, namespace="garbage")).SerializeToString()
        data = pb.DedupRequest(data=os.urandom(200_000)).SerializeToString()
    with ChunkdServer(chunkd_bin) as server, grpc.insecure_channel(server.address) as channel:
        call = raw_stream(channel, method)
        with pytest.raises(grpc.RpcError) as failure:
            list(call(iter([first, data, GARBAGE, data]), timeout=DEADLINE))
        assert failure.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        details = failure.value.details()
        assert "request message 3 of the stream" in details, details
        kind = "ChunkRequest" if method == CHUNK else "DedupRequest"
        assert f"chunkd.v1.{kind}" in details, details
        assert_serving(server)


def test_garbage_first_message_and_unary_requests(chunkd_bin) -> None:
    with ChunkdServer(chunkd_bin) as server, grpc.insecure_channel(server.address) as channel:
        with pytest.raises(grpc.RpcError) as failure:
            list(raw_stream(channel, CHUNK)(iter([GARBAGE]), timeout=DEADLINE))
        assert failure.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "request message 1 of the stream" in failure.value.details()
        for method, kind in [("FindMissing", "FindMissingRequest"), ("Release", "ReleaseRequest"),
                             ("GetServerInfo", "GetServerInfoRequest")]:
            unary = channel.unary_unary(f"/chunkd.v1.ChunkService/{method}",
                                        request_serializer=None, response_deserializer=None)
            with pytest.raises(grpc.RpcError) as failure:
                unary(GARBAGE, timeout=DEADLINE)
            assert failure.value.code() == grpc.StatusCode.INVALID_ARGUMENT, method
            assert f"the request is not a valid chunkd.v1.{kind}" in failure.value.details()
        assert_serving(server)


def test_dedup_retry_with_stream_id_is_exact_after_a_broken_stream(chunkd_bin) -> None:
    """A Dedup stream broken by a bad message keeps what it committed; the
    same stream retried with its stream_id counts every chunk exactly once."""
    data = os.urandom(3 * MiB)
    pieces = [data[i:i + 256 * 1024] for i in range(0, len(data), 256 * 1024)]

    def requests(namespace: str, stream_id: str, broken: bool) -> List[bytes]:
        params = pb.DedupParams(chunking=chunk_params().chunking, namespace=namespace,
                                stream_id=stream_id)
        out = [pb.DedupRequest(params=params).SerializeToString()]
        for i, piece in enumerate(pieces):
            if broken and i == len(pieces) // 2:
                out.append(GARBAGE)
            out.append(pb.DedupRequest(data=piece).SerializeToString())
        return out

    def unique_chunks(responses: List[bytes]) -> int:
        return pb.DedupResponse.FromString(responses[-1]).summary.unique_chunks

    with ChunkdServer(chunkd_bin) as server, grpc.insecure_channel(server.address) as channel:
        call = raw_stream(channel, DEDUP)
        with pytest.raises(grpc.RpcError) as failure:
            list(call(iter(requests("retry", "stream-1", broken=True)), timeout=DEADLINE))
        assert failure.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        retried = list(call(iter(requests("retry", "stream-1", broken=False)), timeout=DEADLINE))
        clean = list(call(iter(requests("clean", "stream-2", broken=False)), timeout=DEADLINE))
        assert unique_chunks(retried) == unique_chunks(clean)
        # Random data: every chunk is distinct, and counted once although
        # the broken attempt may have committed some of them already. One
        # release each removes them all.
        records = [r for raw in retried for r in pb.DedupResponse.FromString(raw).batch.chunks]
        assert len({r.fingerprint for r in records}) == len(records) == unique_chunks(clean)
        with Client(server.address, timeout=DEADLINE) as client:
            counts = client.release("retry", [r.fingerprint for r in records])
            assert counts == [0] * len(records)
            assert len(client.find_missing("retry", [r.fingerprint for r in records])) == len(records)


# --- 5. Bounded memory index ----------------------------------------------------------


def dedup_health(server: ChunkdServer) -> int:
    return health_status(server.address, service="chunkd.v1.ChunkService.Dedup",
                         timeout=DEADLINE)


def test_memory_index_at_its_cap(chunkd_bin) -> None:
    cap = 200
    with ChunkdServer(chunkd_bin, extra_args=[f"--index_max_entries={cap}"]) as server:
        first = os.urandom(100 * 4096)  # 100 fixed-size chunks
        more = os.urandom(300 * 4096)   # 300 more: past the cap
        with Client(server.address, timeout=DEADLINE) as client:
            _, summary = client.dedup_all(first, namespace="cap", algorithm="fixed", avg_size=4096)
            assert summary.unique_chunks == 100
            with pytest.raises(ChunkdError) as failure:
                client.dedup_all(more, namespace="cap", algorithm="fixed", avg_size=4096)
            assert failure.value.code == grpc.StatusCode.RESOURCE_EXHAUSTED
            assert "--index_max_entries" in failure.value.message
            assert metric(server, "chunkd_index_entries") == cap
            # Nothing was evicted: the first file is all duplicates; reads work.
            _, again = client.dedup_all(first, namespace="cap", algorithm="fixed", avg_size=4096)
            assert again.unique_chunks == 0
            fingerprints = [hashlib.sha256(first[i:i + 4096]).digest()
                            for i in range(0, len(first), 4096)]
            assert client.find_missing("cap", fingerprints) == []
            # The health monitor probes once a second.
            wait_until(lambda: dedup_health(server) == 2, DEADLINE,
                       "Dedup health NOT_SERVING at the cap")
            assert "--index_max_entries" in server.log()
            # Releasing entries makes room again.
            for _ in range(2):
                client.release("cap", fingerprints)
            wait_until(lambda: dedup_health(server) == 1, DEADLINE,
                       "Dedup health SERVING again")
            _, summary = client.dedup_all(more[: 50 * 4096], namespace="cap",
                                          algorithm="fixed", avg_size=4096)
            assert summary.total_bytes == 50 * 4096
        assert_serving(server)


# --- 6. Client error mapping -------------------------------------------------------


def test_every_client_maps_refusals_and_dead_servers(chunkd_bin) -> None:
    chunkctl = binary("CHUNKCTL_BIN", REPO / "build" / "clients" / "cli" / "chunkctl")
    chunkd_go = os.environ.get("CHUNKD_GO_BIN") or str(REPO / "build" / "tools" / "bin" / "chunkd-go")
    python_cli = str(Path(sys.executable).parent / "chunkd-client")
    # No --stream_idle_timeout: the held slot stays however long the clients take.
    with ChunkdServer(chunkd_bin, extra_args=["--max_streams=1",
                                              "--stream_idle_timeout=0"]) as server:
        holder = h2raw.Connection(server.address)
        try:
            holder.open_stream(holder.headers_block(CHUNK))
            wait_until(lambda: metric(server, "chunkd_active_streams") == 1, DEADLINE, "slot held")
            dead = f"127.0.0.1:{free_port()}"
            for address, code, needle in [
                    (server.address, "RESOURCE_EXHAUSTED", "--max_streams"),
                    (dead, "UNAVAILABLE", "")]:
                with pytest.raises(ChunkdError) as failure:
                    with Client(address, timeout=10) as client:
                        client.chunk_all(b"x" * 1000)
                assert failure.value.code.name == code and needle in failure.value.message

                async def aio() -> None:
                    async with AsyncClient(address, timeout=10) as client:
                        await client.chunk_all(b"x" * 1000)

                with pytest.raises(ChunkdError) as failure:
                    asyncio.run(aio())
                assert failure.value.code.name == code, failure.value
                assert needle in failure.value.message
                for command in ([str(chunkctl), "chunk", "--server", address, "-"],
                                [python_cli, "chunk", "--server", address, "-"],
                                [chunkd_go, "chunk", "-server", address, "-"]):
                    if not os.access(command[0], os.X_OK):
                        pytest.fail(f"{command[0]} is not built")
                    result = subprocess.run(command, input=b"x" * 1000, capture_output=True,
                                            timeout=60)
                    stderr = result.stderr.decode(errors="replace")
                    assert result.returncode != 0, command
                    assert code in stderr and needle in stderr, (command, stderr)
        finally:
            holder.close()
        assert_serving(server)


# --- 7. Start-up: TLS files, busy ports ------------------------------------------------


def openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=60)


@pytest.fixture(scope="module")
def pki(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("pki")
    for name in ("a", "b"):
        openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
                "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
                "-keyout", f"{name}.key", "-out", f"{name}.pem", cwd=d)
    (d / "garbage.pem").write_text("this is not PEM\n")
    (d / "unreadable.pem").write_text("secret")
    (d / "unreadable.pem").chmod(0)
    return d


def start_and_fail(chunkd_bin: Path, *flags: str) -> "subprocess.CompletedProcess[str]":
    return subprocess.run([str(chunkd_bin), f"--listen=127.0.0.1:{free_port()}",
                           "--metrics_listen=", *flags], capture_output=True, text=True,
                          timeout=60, stdin=subprocess.DEVNULL)


@pytest.mark.parametrize("cert, key, needles", [
    ("a.pem", "b.key", ["--tls_key", "b.key", "does not match the certificate"]),
    ("garbage.pem", "a.key", ["--tls_cert", "garbage.pem", "no PEM certificate"]),
    ("a.pem", "garbage.pem", ["--tls_key", "garbage.pem", "no unencrypted PEM private key"]),
    ("missing.pem", "a.key", ["--tls_cert", "missing.pem", "cannot read"]),
])
def test_bad_tls_files_stop_startup_naming_the_file(chunkd_bin, pki, cert, key, needles) -> None:
    result = start_and_fail(chunkd_bin, f"--tls_cert={pki / cert}", f"--tls_key={pki / key}")
    assert result.returncode != 0
    for needle in needles:
        assert needle in result.stderr, result.stderr
    assert "cannot listen" not in result.stderr


def test_unreadable_tls_file(chunkd_bin, pki) -> None:
    if os.access(pki / "unreadable.pem", os.R_OK):
        pytest.skip("running as root: mode 000 does not stop reading")
    result = start_and_fail(chunkd_bin, f"--tls_cert={pki / 'unreadable.pem'}",
                            f"--tls_key={pki / 'a.key'}")
    assert result.returncode != 0 and "cannot read" in result.stderr


HANDSHAKE_LINE = re.compile(r"chunkd: (\d+) TLS handshakes failed in the last 10s \(last: .*\)")


def test_handshake_flood_is_logged_as_a_count(chunkd_bin, pki) -> None:
    attempts = 200
    with ChunkdServer(chunkd_bin, extra_args=[f"--tls_cert={pki / 'a.pem'}",
                                              f"--tls_key={pki / 'a.key'}"],
                      health_credentials=grpc.ssl_channel_credentials(
                          (pki / "a.pem").read_bytes())) as server:
        host, port = server.address.rsplit(":", 1)
        started = time.monotonic()
        for _ in range(attempts):
            with socket.create_connection((host, int(port)), timeout=5) as s:
                s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
                s.settimeout(5)
                try:
                    while s.recv(4096):
                        pass
                except OSError:
                    pass
        spread = time.monotonic() - started
        wait_until(lambda: metric(server, "chunkd_tls_handshake_failures_total") == attempts,
                   LOG_WAIT, "every failed handshake counted")

        def logged() -> List[str]:
            return [line for line in server.log().splitlines() if "andshake" in line]

        def counted(lines: List[str]) -> int:
            found = [HANDSHAKE_LINE.fullmatch(line) for line in lines]
            assert all(found), lines  # nothing of gRPC's own lines gets through
            return sum(int(m.group(1)) for m in found)

        lines = wait_until(lambda: counted(logged()) == attempts and logged(), LOG_WAIT,
                           "every failed handshake in the aggregated lines")
        # One line per 10 s at most: the attempts spread over `spread`
        # seconds, so their lines over at most that many intervals, plus one.
        assert len(lines) <= 2 + int(spread // 10), (spread, lines)
        report(f"handshake flood: {attempts} failed TLS handshakes in {spread:.1f}s, "
               f"{len(lines)} log line(s)")


def test_second_server_on_a_busy_port_refuses_to_start(chunkd_bin) -> None:
    with ChunkdServer(chunkd_bin) as server:
        result = subprocess.run([str(chunkd_bin), f"--listen={server.address}",
                                 "--metrics_listen="], capture_output=True, text=True,
                                timeout=60, stdin=subprocess.DEVNULL)
        assert result.returncode != 0
        assert f"cannot listen on --listen {server.address}" in result.stderr
        assert "already in use" in result.stderr, result.stderr
        assert_serving(server)
