"""What the clients do about failures, against real chunkd servers: errors
that are grpc.RpcErrors, the default service config (gRPC retries of the
idempotent unary calls, round_robin over every address of a target),
Release request ids, and the ``retries`` of Chunk and Dedup.

Streams replayed across a server restart or a stream reset, with exact
reference counts in a Redis index, are in tests/e2e/test_client_retries.py.
"""

from __future__ import annotations

import asyncio
import io
import json
import os
import random
import re
import threading
import time
import uuid
from pathlib import Path
from typing import Callable, Iterator, List

import grpc
import pytest

from chunkd_client import DEFAULT_SERVICE_CONFIG, ChunkdError, Client
from chunkd_client._replays import Replays
from chunkd_client._channel import channel_options
from chunkd_client._convert import RELEASE_BATCH, release_requests
from chunkd_client._proto.chunkd.v1 import chunkd_pb2 as pb
from chunkd_client.aio import AsyncClient
from chunkd_client.cli import main as cli_main
from chunkd_client.testing import ChunkdServer, Relay, free_port, serving

from conftest import RPC_TIMEOUT
from fake_chunkd import FakeChunkd

DATA = random.Random(2020).randbytes(3 << 20)
#: Seconds any wait of these tests may take.
WAIT = 30.0
#: Channel options that make gRPC reconnect at once to a server that was
#: down, so that the retry policy's attempts, which are what is tested
#: here, do not depend on the reconnect backoff.
FAST_RECONNECT = [
    ("grpc.initial_reconnect_backoff_ms", 10),
    ("grpc.max_reconnect_backoff_ms", 10),
]


#: Replays of a refused stream: their waits (replay_wait) add up to 13 s,
#: time enough for the held stream to let go of the server's slot however
#: loaded the machine.
REPLAYS = 10


def replay_wait(k: int) -> float:
    """The wait before replay k (from 1): 0.1 s doubling, at most 2 s."""
    return min(0.1 * 2 ** (k - 1), 2.0)


def started(server: ChunkdServer, method: str) -> int:
    """grpc_server_started_total of a ChunkService method on ``server``."""
    pattern = (rf'^grpc_server_started_total\{{grpc_method="{method}",'
               r'grpc_service="chunkd\.v1\.ChunkService"[^}]*\} (\S+)$')
    match = re.search(pattern, server.metrics(), re.MULTILINE)
    assert match is not None, f"no grpc_server_started_total for {method}"
    return int(float(match.group(1)))


def rejected(server: ChunkdServer, reason: str) -> int:
    match = re.search(rf'^chunkd_streams_rejected_total\{{reason="{reason}"\}} (\S+)$',
                      server.metrics(), re.MULTILINE)
    assert match is not None
    return int(float(match.group(1)))


# --- errors -----------------------------------------------------------------


def test_every_failed_call_is_a_grpc_rpc_error(server: ChunkdServer) -> None:
    with Client(server.address, timeout=RPC_TIMEOUT) as client:
        try:
            client.chunk_all(b"data", min_size=4)
            raise AssertionError("min_size=4 was accepted")
        except grpc.RpcError as e:
            failed = e
        with pytest.raises(grpc.RpcError) as unary:
            client.find_missing("bad namespace", [])
    for error in (failed, unary.value):
        assert isinstance(error, ChunkdError) and isinstance(error, grpc.Call)
        assert error.code() is grpc.StatusCode.INVALID_ARGUMENT
        assert error.details() == error.message and error.details()
        # The attribute of earlier releases still compares and names.
        assert error.code == grpc.StatusCode.INVALID_ARGUMENT
        assert error.code != grpc.StatusCode.UNAVAILABLE
        assert error.code.name == "INVALID_ARGUMENT"
        assert str(error) == f"INVALID_ARGUMENT: {error.details()}"
        assert not error.is_active() and error.time_remaining() is None
    assert "min_size" in failed.details() and "namespace" in unary.value.details()
    local = ChunkdError(grpc.StatusCode.DATA_LOSS, "short")
    assert local.trailing_metadata() is None and local.code() is grpc.StatusCode.DATA_LOSS

    async def main() -> List[BaseException]:
        errors: List[BaseException] = []
        async with AsyncClient(server.address, timeout=RPC_TIMEOUT) as aclient:
            for call in (aclient.chunk_all(b"data", min_size=4),
                         aclient.release("bad namespace", [])):
                try:
                    await call
                except grpc.RpcError as e:
                    errors.append(e)
        return errors

    errors = asyncio.run(main())
    assert [type(e) for e in errors] == [ChunkdError, ChunkdError]
    assert all(e.code() is grpc.StatusCode.INVALID_ARGUMENT for e in errors)  # type: ignore[attr-defined]


# --- Release request ids ----------------------------------------------------


def test_split_release_ids_are_numbered_from_zero() -> None:
    one = list(release_requests("ns", [b"\1" * 32] * 3, "sha256", "rel"))
    assert [r.request_id for r in one] == ["rel"]
    split = list(release_requests("ns", [b"\1" * 32] * (2 * RELEASE_BATCH + 1),
                                  "sha256", "rel"))
    assert [r.request_id for r in split] == ["rel.0", "rel.1", "rel.2"]
    assert [len(r.fingerprints) for r in split] == [RELEASE_BATCH, RELEASE_BATCH, 1]


def test_release_without_an_id_gets_a_random_one(server: ChunkdServer) -> None:
    with Client(server.address, timeout=RPC_TIMEOUT) as client:
        ids = [[r.request_id for r in client._release_requests("ns", [b"\1" * 32], 1, "")]
               for _ in range(2)]
        assert all(len(i) == 1 and re.fullmatch(r"[0-9a-f]{32}", i[0]) for i in ids)
        assert ids[0] != ids[1]
        given = [r.request_id for r in client._release_requests("ns", [], 1, "mine")]
        assert given == ["mine"]


def test_split_release_applies_once_per_numbered_id(server: ChunkdServer) -> None:
    """A release of RELEASE_BATCH + 1 fingerprints is sent as "ID.0" and
    "ID.1": the server then answers those ids from its record (nothing
    applies twice), while "ID" itself was never used."""
    namespace = f"split-{uuid.uuid4().hex}"
    data = random.Random(5).randbytes(64 * (RELEASE_BATCH + 1))
    with Client(server.address, timeout=RPC_TIMEOUT) as client:
        params = dict(algorithm="fixed", avg_size=64, fingerprint="xxh128")
        records, _ = client.dedup_all(data, namespace=namespace, **params)
        client.dedup_all(data, namespace=namespace, **params)  # every count is 2
        fps = [r.fingerprint for r in records]
        assert len(set(fps)) == RELEASE_BATCH + 1
        assert client.release(namespace, fps, fingerprint="xxh128",
                              request_id="split") == [1] * len(fps)

        def raw(request_id: str, part: List[bytes]) -> List[int]:
            response = client.stub.Release(
                pb.ReleaseRequest(namespace=namespace, fingerprints=part,
                                  fingerprint=pb.FINGERPRINT_ALGORITHM_XXH128,
                                  request_id=request_id),
                timeout=RPC_TIMEOUT)
            return list(response.ref_counts)

        head, tail = fps[:RELEASE_BATCH], fps[RELEASE_BATCH:]
        assert raw("split.1", tail) == [1]          # recorded: not applied again
        assert raw("split.0", head) == [1] * RELEASE_BATCH
        assert client.find_missing(namespace, fps) == []
        assert raw("split", tail) == [0]            # a new id: applied


# --- the default service config ---------------------------------------------


def test_default_service_config_and_replacing_it() -> None:
    options = dict(channel_options(None, []))
    config = json.loads(str(options["grpc.service_config"]))
    assert config == DEFAULT_SERVICE_CONFIG
    assert config["loadBalancingConfig"] == [{"round_robin": {}}]
    (method,) = config["methodConfig"]
    assert sorted(n["method"] for n in method["name"]) == [
        "FindMissing", "GetServerInfo", "Release"]
    assert method["retryPolicy"] == {
        "maxAttempts": 5, "initialBackoff": "1s", "maxBackoff": "9s",
        "backoffMultiplier": 3, "retryableStatusCodes": ["UNAVAILABLE"]}
    mine = {"loadBalancingConfig": [{"pick_first": {}}]}
    assert json.loads(str(dict(channel_options(None, [], mine))["grpc.service_config"])) == mine
    assert dict(channel_options(None, [], "{}"))["grpc.service_config"] == "{}"
    replaced = channel_options(None, [("grpc.service_config", "{}")])
    assert [v for k, v in replaced if k == "grpc.service_config"] == ["{}"]
    with pytest.raises(TypeError):
        channel_options(None, [], 42)  # type: ignore[arg-type]


def test_a_unary_call_is_retried_on_unavailable(server: ChunkdServer) -> None:
    """The first attempt finds no server (its connection is closed at
    once): UNAVAILABLE. With the default service config gRPC tries again and
    the call succeeds; with the caller's config without a retry policy it
    fails."""
    relay = Relay(server.address, refuse=1)
    try:
        with Client(relay.address, timeout=RPC_TIMEOUT, options=FAST_RECONNECT) as client:
            assert client.server_info().index_backend == "memory"
        assert relay.refused == 1
    finally:
        relay.close()

    relay = Relay(server.address, refuse=1)
    try:
        with Client(relay.address, timeout=RPC_TIMEOUT, options=FAST_RECONNECT,
                    service_config={}) as client:
            with pytest.raises(grpc.RpcError) as caught:
                client.server_info()
            assert caught.value.code() is grpc.StatusCode.UNAVAILABLE
            assert relay.refused == 1
            # The server was there all along: once connected, the call works.
            grpc.channel_ready_future(client._channel).result(timeout=WAIT)
            assert client.server_info().index_backend == "memory"
    finally:
        relay.close()

    async def main() -> str:
        async with AsyncClient(relay.address, timeout=RPC_TIMEOUT,
                               options=FAST_RECONNECT) as aclient:
            return (await aclient.server_info()).index_backend

    relay = Relay(server.address, refuse=1)
    try:
        assert asyncio.run(main()) == "memory" and relay.refused == 1
    finally:
        relay.close()


def test_a_server_slow_to_reach_is_reached(server: ChunkdServer) -> None:
    """Setting up the connection takes 0.5 s: the default channel options
    leave each connection attempt gRPC's 20 s (a short
    grpc.min_reconnect_backoff_ms fails every attempt at 0.1 s)."""
    relay = Relay(server.address, refuse=0, connect_delay=0.5)
    try:
        with Client(relay.address, timeout=RPC_TIMEOUT) as client:
            assert client.server_info(timeout=10).index_backend == "memory"

        async def main() -> str:
            async with AsyncClient(relay.address, timeout=RPC_TIMEOUT) as aclient:
                return (await aclient.server_info(timeout=10)).index_backend

        assert asyncio.run(main()) == "memory"
    finally:
        relay.close()


@pytest.fixture(scope="module")
def second_server(chunkd_bin: Path) -> Iterator[ChunkdServer]:
    yield from serving(ChunkdServer(chunkd_bin))


def test_streams_are_spread_over_every_address(server: ChunkdServer,
                                                second_server: ChunkdServer) -> None:
    """round_robin: one target naming two servers (as a dns:/// name of a
    headless Service resolves to every pod) gets streams on both; once both
    connections are up, in turn."""
    servers = (server, second_server)
    target = "ipv4:" + ",".join(s.address for s in servers)
    streams = 8

    def counts() -> List[int]:
        return [started(s, "Chunk") for s in servers]

    def spread(send: Callable[[], None]) -> List[int]:
        """Streams until both servers had one (the second connection may
        come up a moment after the first), then ``streams`` more: their
        counts per server."""
        before = counts()
        deadline = time.monotonic() + WAIT
        while min(c - b for c, b in zip(counts(), before)) == 0:
            assert time.monotonic() < deadline, f"every stream went to one server: {counts()}"
            send()
        before = counts()
        for _ in range(streams):
            send()
        return [c - b for c, b in zip(counts(), before)]

    with Client(target, timeout=RPC_TIMEOUT) as client:
        def send() -> None:
            client.chunk_all(b"spread" * 1000)

        assert spread(send) == [4, 4]

    async def main() -> List[int]:
        async with AsyncClient(target, timeout=RPC_TIMEOUT) as aclient:
            loop = asyncio.get_running_loop()

            def send() -> None:
                asyncio.run_coroutine_threadsafe(
                    aclient.chunk_all(b"spread" * 1000), loop).result(WAIT)

            return await loop.run_in_executor(None, spread, send)

    assert asyncio.run(main()) == [4, 4]

    # pick_first, the caller's choice, sends everything to one server.
    before = counts()
    with Client(target, timeout=RPC_TIMEOUT,
                service_config={"loadBalancingConfig": [{"pick_first": {}}]}) as client:
        for _ in range(streams):
            client.chunk_all(b"spread" * 1000)
    assert sorted(c - b for c, b in zip(counts(), before)) == [0, streams]


# --- Dedup retries -------------------------------------------------------------


#: The stream methods of both clients, by name: (client, source, **kwargs)
#: -> the stream.
METHODS = {
    "chunk": lambda client, source, **kw: client.chunk(source, **kw),
    "dedup": lambda client, source, **kw: client.dedup(source, namespace="ns", **kw),
}


@pytest.mark.parametrize("method", list(METHODS))
def test_retries_need_a_source_that_can_be_read_again(server: ChunkdServer,
                                                     tmp_path: Path, method: str) -> None:
    call = METHODS[method]
    with Client(server.address, timeout=RPC_TIMEOUT) as client:
        with pytest.raises(ValueError, match="iterable of bytes"):
            call(client, iter([b"a"]), retries=1)
        read, write = os.pipe()
        with os.fdopen(read, "rb") as pipe:
            os.close(write)
            with pytest.raises(ValueError, match="cannot seek"):
                call(client, pipe, retries=2)
        for retries in (-1, 101):
            with pytest.raises(ValueError, match=r"retries must be an int in 0\.\.100"):
                call(client, b"x", retries=retries)
        with pytest.raises(TypeError, match="on_replay must be callable"):
            call(client, b"x", retries=1, on_replay="print")
        # Without retries, none of this matters.
        assert call(client, iter([b"a"])).collect()[1].total_bytes == 1

    async def main() -> None:
        async def pieces() -> Iterator[bytes]:  # type: ignore[misc]
            yield b"a"

        async with AsyncClient(server.address, timeout=RPC_TIMEOUT) as aclient:
            with pytest.raises(ValueError, match="async iterable"):
                call(aclient, pieces(), retries=1)

    asyncio.run(main())


def test_replays_policy() -> None:
    replays = Replays(3, None, channel=None)
    unavailable = ChunkdError(grpc.StatusCode.UNAVAILABLE, "down")
    assert replays.delay(ChunkdError(grpc.StatusCode.INVALID_ARGUMENT, "no")) is None
    assert replays.delay(ChunkdError(grpc.StatusCode.DEADLINE_EXCEEDED, "late")) is None
    assert [replays.delay(unavailable) for _ in range(4)] == [0.1, 0.2, 0.4, None]
    # CANCELLED, unless the caller cancelled the stream or closed the client.
    closed = False
    cancelled = ChunkdError(grpc.StatusCode.CANCELLED, "reset")
    replays = Replays(3, None, channel=None, closed=lambda: closed)
    assert replays.delay(cancelled, cancelled_here=True) is None
    assert replays.delay(cancelled) == 0.1
    closed = True
    assert replays.delay(cancelled) is None
    timed = Replays(6, 5.0, channel=None)
    codes = ("DEADLINE_EXCEEDED", "ABORTED", "RESOURCE_EXHAUSTED", "INTERNAL",
             "UNAVAILABLE", "UNAVAILABLE")
    assert [timed.delay(ChunkdError(getattr(grpc.StatusCode, c), "")) for c in codes] == [
        0.1, 0.2, 0.4, 0.8, 1.6, 2.0]
    assert timed.connect_wait == 5.0 and replays.connect_wait == 20.0


@pytest.fixture(scope="module")
def one_stream_server(chunkd_bin: Path) -> Iterator[ChunkdServer]:
    """chunkd serving one Chunk or Dedup stream at a time."""
    yield from serving(ChunkdServer(chunkd_bin, extra_args=["--max_streams=1"]))


def held_until_refused(server: ChunkdServer) -> threading.Thread:
    """Holds the server's only stream until it has refused another one (a
    stream of the test), then lets it finish; returns the holding thread."""
    release = threading.Event()
    deadline = time.monotonic() + WAIT
    while server.active_streams() != 0:  # the streams of earlier tests are gone
        assert time.monotonic() < deadline, "chunkd never let its streams go"
        time.sleep(0.01)
    refused_before = rejected(server, "limit")

    def stalled() -> Iterator[bytes]:
        yield b"held"
        release.wait(WAIT)

    def hold() -> None:
        with Client(server.address, timeout=RPC_TIMEOUT) as client:
            assert client.chunk_all(stalled())[1].total_bytes == 4

    def watch() -> None:
        deadline = time.monotonic() + WAIT
        while rejected(server, "limit") == refused_before and time.monotonic() < deadline:
            time.sleep(0.005)
        release.set()

    holder = threading.Thread(target=hold)
    holder.start()
    while server.active_streams() != 1:
        assert time.monotonic() < deadline, "the holding stream never started"
        time.sleep(0.01)
    threading.Thread(target=watch, daemon=True).start()
    return holder


def clean_run(server: ChunkdServer, method: str, data: bytes) -> "tuple[list, object]":
    """Chunk or Dedup (into a new namespace) of `data`, on a server of the
    default limits (a one-stream server may still hold the slot of a stream
    its client has seen end)."""
    with Client(server.address, timeout=RPC_TIMEOUT) as client:
        if method == "chunk":
            return client.chunk_all(data)
        return client.dedup_all(data, namespace=f"ref-{uuid.uuid4().hex}")


@pytest.mark.parametrize("kind", ["bytes", "path", "file"])
@pytest.mark.parametrize("method", list(METHODS))
def test_a_refused_stream_is_replayed(server: ChunkdServer, one_stream_server: ChunkdServer,
                                      tmp_path: Path, kind: str, method: str) -> None:
    """RESOURCE_EXHAUSTED (the server's one stream is taken) is replayed:
    the records and the summary are those of a clean run, each record once."""
    path = tmp_path / "data.bin"
    path.write_bytes(DATA)
    namespace = f"re-{uuid.uuid4().hex}"

    def run(client: Client, source: object, **kwargs: object):  # type: ignore[no-untyped-def]
        ns = kwargs.pop("namespace", namespace)
        if method == "chunk":
            return client.chunk_all(source, **kwargs)
        return client.dedup_all(source, namespace=ns, **kwargs)

    # A file is replayed from where it was.
    expected = clean_run(server, method, DATA if kind != "file" else DATA[10:])
    with Client(one_stream_server.address, timeout=RPC_TIMEOUT) as client:
        with open(path, "rb") as f:
            f.read(10)
            source = {"bytes": DATA, "path": path, "file": f}[kind]
            holder = held_until_refused(one_stream_server)
            refused = rejected(one_stream_server, "limit")
            replays: List["tuple[grpc.StatusCode, float]"] = []
            try:
                result = run(client, source, retries=REPLAYS,
                             on_replay=lambda e, delay: replays.append((e.code(), delay)))
            finally:
                holder.join(WAIT)
        assert rejected(one_stream_server, "limit") - refused == len(replays) >= 1
        assert replays == [(grpc.StatusCode.RESOURCE_EXHAUSTED, replay_wait(k))
                           for k in range(1, len(replays) + 1)]
        assert result == expected
        if method == "dedup":
            # Every reference counted once: releasing each record's
            # fingerprint once empties the namespace.
            fps = [r.fingerprint for r in result[0]]
            client.release(namespace, fps)
            assert client.find_missing(namespace, fps) == fps


def test_dedup_without_retries_fails_at_once(one_stream_server: ChunkdServer) -> None:
    with Client(one_stream_server.address, timeout=RPC_TIMEOUT) as client:
        holder = held_until_refused(one_stream_server)
        try:
            with pytest.raises(grpc.RpcError) as caught:
                client.dedup_all(DATA, namespace="once")
        finally:
            holder.join(WAIT)
    assert caught.value.code() is grpc.StatusCode.RESOURCE_EXHAUSTED


@pytest.mark.parametrize("method", list(METHODS))
def test_async_replays_a_refused_stream(server: ChunkdServer, one_stream_server: ChunkdServer,
                                        method: str) -> None:
    namespace = f"aio-re-{uuid.uuid4().hex}"
    reference = clean_run(server, method, DATA)

    replays: List["tuple[grpc.StatusCode, float]"] = []

    async def main():  # type: ignore[no-untyped-def]
        async with AsyncClient(one_stream_server.address, timeout=RPC_TIMEOUT) as aclient:
            on_replay = lambda e, delay: replays.append((e.code(), delay))  # noqa: E731
            if method == "chunk":
                return await aclient.chunk_all(io.BytesIO(DATA), retries=REPLAYS,
                                               on_replay=on_replay)
            return await aclient.dedup_all(
                io.BytesIO(DATA), namespace=namespace, retries=REPLAYS, on_replay=on_replay)

    refused = rejected(one_stream_server, "limit")
    holder = held_until_refused(one_stream_server)
    try:
        result = asyncio.run(main())
    finally:
        holder.join(WAIT)
    assert rejected(one_stream_server, "limit") - refused == len(replays) >= 1
    assert replays[0] == (grpc.StatusCode.RESOURCE_EXHAUSTED, 0.1)
    assert result == reference


@pytest.mark.parametrize("command", [["chunk"], ["dedup", "--namespace", "NS"]],
                         ids=lambda c: c[0])
def test_cli_announces_each_replay(server: ChunkdServer, one_stream_server: ChunkdServer,
                                   tmp_path: Path,
                                   capsys: pytest.CaptureFixture[str],
                                   command: List[str]) -> None:
    """chunkd-client chunk|dedup --retries prints chunkctl's line for each
    replay on stderr; stdout has only the lines of the run that succeeded."""
    path = tmp_path / "data.bin"
    path.write_bytes(DATA)
    command = [f"cli-{uuid.uuid4().hex}" if w == "NS" else w for w in command]
    if command[0] == "chunk":
        assert cli_main(["chunk", "--server", server.address, "--json", str(path)]) == 0
        clean, _ = capsys.readouterr()
    refused = rejected(one_stream_server, "limit")
    holder = held_until_refused(one_stream_server)
    try:
        code = cli_main([*command, "--server", one_stream_server.address,
                         "--retries", str(REPLAYS), "--progress", "never", "--json", str(path)])
    finally:
        holder.join(WAIT)
    out, err = capsys.readouterr()
    assert code == 0
    lines = err.splitlines()
    assert len(lines) == rejected(one_stream_server, "limit") - refused >= 1, err
    for k, line in enumerate(lines, 1):
        assert re.fullmatch(
            rf"chunkd-client: {re.escape(str(path))}: RESOURCE_EXHAUSTED: .+; "
            rf"sending it again in {replay_wait(k):.2f} s \(retry {k} of {REPLAYS}\)",
            line), line
    if command[0] == "chunk":
        assert out == clean
    else:
        assert [json.loads(line)["bytes"] for line in out.splitlines()] == [len(DATA)] * 2


def test_the_wait_for_the_channel_is_cancelled(monkeypatch: pytest.MonkeyPatch) -> None:
    """A replay waits for the channel to be ready; when that wait times out
    the future is cancelled, not left subscribed to the channel."""
    from chunkd_client._requests import DEDUP, Requests
    from chunkd_client.client import ResponseStream

    futures: List[grpc.Future] = []
    ready_future = grpc.channel_ready_future

    def recorded(channel: grpc.Channel) -> grpc.Future:
        futures.append(ready_future(channel))
        return futures[-1]

    monkeypatch.setattr(grpc, "channel_ready_future", recorded)
    port = free_port()  # nothing listens there: the channel never gets ready
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        stream = ResponseStream(lambda: (None, Requests(DEDUP.request, None)),
                                DEDUP.record, DEDUP.summary,
                                Replays(1, 0.2, channel=channel))
        started_at = time.monotonic()
        stream._pause(0.0)
        assert 0.2 <= time.monotonic() - started_at < WAIT
        assert len(futures) == 1 and futures[0].cancelled()


def test_a_replay_yields_only_the_records_past_those_yielded() -> None:
    """What the stream hands out after a replay, on made-up records: those
    past the last one yielded, once the replay has repeated the ones
    yielded exactly; a replay that cuts otherwise (the source changed) is
    DATA_LOSS, and the call is cancelled."""
    from chunkd_client import DedupRecord
    from chunkd_client._requests import DEDUP, Requests
    from chunkd_client.client import ResponseStream

    class Call:
        cancelled = False

        def cancel(self) -> None:
            self.cancelled = True

    first = [DedupRecord(0, 10, b"a", True), DedupRecord(10, 10, b"b", True)]
    later = DedupRecord(20, 5, b"c", False)

    def replayed(records: List[DedupRecord]) -> "tuple[List[DedupRecord], Call]":
        call = Call()
        stream = ResponseStream(lambda: (call, Requests(DEDUP.request, None)),
                                DEDUP.record, DEDUP.summary,
                                Replays(1, None, channel=None))
        assert list(stream._fresh(iter(first))) == first
        stream._delivered.replaying()
        return list(stream._fresh(iter(records))), call

    assert replayed(first + [later])[0] == [later]
    for records, message in [
            ([DedupRecord(0, 30, b"x", True)], "across offset 20"),
            ([DedupRecord(0, 10, b"a", True), DedupRecord(10, 10, b"B", True)],
             "2 chunks before offset 20 that differ from the 2 already returned"),
            ([DedupRecord(0, 20, b"a", True)],
             "1 chunks before offset 20 that differ from the 2 already returned"),
            (first + [DedupRecord(25, 5, b"d", True)],
             "goes on at offset 25, not at offset 20")]:
        with pytest.raises(ChunkdError) as caught:
            replayed(records)
        assert caught.value.code() is grpc.StatusCode.DATA_LOSS
        assert message in caught.value.details()
        assert "the source or the index changed under the replay" in caught.value.details()


def test_a_summary_must_count_the_records_yielded() -> None:
    from chunkd_client._replays import Delivered

    delivered = Delivered()
    assert delivered.take(0, 10, b"a") and delivered.take(10, 5, b"b")
    delivered.check_summary(15, 2)
    for total_bytes, total_chunks in [(15, 3), (20, 2)]:
        with pytest.raises(ChunkdError) as caught:
            delivered.check_summary(total_bytes, total_chunks)
        assert caught.value.code() is grpc.StatusCode.DATA_LOSS
    delivered.replaying()
    assert not delivered.take(0, 10, b"a")
    with pytest.raises(ChunkdError, match="ended at offset 10, before offset 15"):
        delivered.check_summary(10, 1)


# --- CANCELLED, deadlines ----------------------------------------------------


@pytest.mark.parametrize("method", list(METHODS))
def test_a_cancelled_the_caller_did_not_cause_is_replayed(method: str) -> None:
    """A server (or a proxy) that ends a stream CANCELLED: replayed like
    UNAVAILABLE, by both clients; without retries the CANCELLED surfaces."""
    with FakeChunkd(abort=(grpc.StatusCode.CANCELLED, "reset by a proxy"),
                    fail_first=1) as fake:
        with Client(fake.address, timeout=RPC_TIMEOUT) as client:
            heard: List[str] = []
            stream = METHODS[method](client, DATA, retries=1,
                                     on_replay=lambda e, _: heard.append(str(e)))
            _, summary = stream.collect()
            assert summary.total_bytes == len(DATA) and fake.calls == 2
            assert heard == ["CANCELLED: reset by a proxy"]

        async def main() -> int:
            async with AsyncClient(fake.address, timeout=RPC_TIMEOUT) as aclient:
                stream = METHODS[method](aclient, DATA, retries=1)
                return (await stream.collect())[1].total_bytes

        fake.fail_first = 3
        assert asyncio.run(main()) == len(DATA) and fake.calls == 4
        with Client(fake.address, timeout=RPC_TIMEOUT) as client:
            fake.fail_first = 5
            with pytest.raises(ChunkdError) as caught:
                METHODS[method](client, DATA).collect()
            assert caught.value.code() is grpc.StatusCode.CANCELLED


class StalledFile(io.BytesIO):
    """A seekable source that blocks at its second read until ``go`` is set
    (at most WAIT seconds)."""

    def __init__(self, data: bytes) -> None:
        super().__init__(data)
        self.go = threading.Event()
        self.stalled = threading.Event()
        self._reads = 0

    def read(self, size: int = -1) -> bytes:  # type: ignore[override]
        self._reads += 1
        if self._reads == 2:
            self.stalled.set()
            self.go.wait(WAIT)
        return super().read(size)


def test_the_callers_own_cancellation_ends_the_call(server: ChunkdServer) -> None:
    """close() of the client, or cancelling the asyncio task or stream,
    while a stream with retries runs: never replayed."""
    source = StalledFile(DATA)
    heard: List[object] = []
    client = Client(server.address, timeout=RPC_TIMEOUT)
    stream = client.chunk(source, retries=3, message_size=1 << 20,
                          on_replay=lambda e, _: heard.append(e))
    closer = threading.Thread(target=lambda: (source.stalled.wait(WAIT), client.close()))
    closer.start()
    try:
        with pytest.raises(ChunkdError) as caught:
            stream.collect()
    finally:
        source.go.set()
        closer.join(WAIT)
    assert caught.value.code() is grpc.StatusCode.CANCELLED and heard == []

    async def main() -> List[str]:
        outcomes: List[str] = []
        async with AsyncClient(server.address, timeout=RPC_TIMEOUT) as aclient:
            for how in ("task", "stream"):
                stalled = StalledFile(DATA)
                stream = aclient.chunk(stalled, retries=3, message_size=1 << 20,
                                       on_replay=lambda e, _: heard.append(e))
                task = asyncio.ensure_future(stream.collect())
                loop = asyncio.get_running_loop()
                await loop.run_in_executor(None, stalled.stalled.wait, WAIT)
                if how == "task":
                    task.cancel()
                else:
                    await stream.cancel()
                try:
                    await task
                    outcomes.append("finished")
                except asyncio.CancelledError:
                    outcomes.append("cancelled")
                except grpc.RpcError as e:
                    outcomes.append(str(e))
                finally:
                    stalled.go.set()
        return outcomes

    outcomes = asyncio.run(main())
    assert outcomes[0] == "cancelled" and outcomes[1] != "finished", outcomes
    assert heard == []


@pytest.mark.parametrize("method", list(METHODS))
def test_a_deadline_ends_the_call_while_the_source_stalls(server: ChunkdServer,
                                                          method: str) -> None:
    """A source that gives some bytes, then blocks without ending: the call
    fails DEADLINE_EXCEEDED at its deadline, in both clients, and
    ``asyncio.run`` returns (no executor thread left waiting on the read)."""
    go = threading.Event()

    def stalled() -> Iterator[bytes]:
        yield DATA[:100_000]
        go.wait(WAIT)  # released when the test ends, whatever happened

    outcomes: List[str] = []

    def sync() -> None:
        with Client(server.address) as client:
            try:
                METHODS[method](client, stalled(), timeout=0.5).collect()
            except ChunkdError as e:
                outcomes.append(e.code().name)

    async def main() -> None:
        async with AsyncClient(server.address) as aclient:
            try:
                await METHODS[method](aclient, stalled(), timeout=0.5).collect()
            except ChunkdError as e:
                outcomes.append(e.code().name)

    for run in (sync, lambda: asyncio.run(main())):
        thread = threading.Thread(target=run, daemon=True)
        thread.start()
        thread.join(WAIT)
        ended = not thread.is_alive()
        if not ended:
            go.set()
        assert ended, "the call waited for the stalled source"
    go.set()
    assert outcomes == ["DEADLINE_EXCEEDED", "DEADLINE_EXCEEDED"]
