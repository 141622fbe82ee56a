"""Graceful shutdown (docs/operations.md, "Shutting down"; docs/design.md,
"Threading model"): on SIGTERM chunkd turns NOT_SERVING, closes its listener
and sends every connection HTTP/2's graceful GOAWAY at once, while it still
serves every call that reaches it; running streams get --shutdown_grace to
finish, those still running then are cancelled with UNAVAILABLE, and chunkd
exits by itself.

What a client sees: one with several addresses sends its next calls to the
others and no call fails (a rolling restart of three replicas under load);
one with a single address finds no server until it is back, which its
retry policy and replays cover."""

from __future__ import annotations

import inspect
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import grpc
import pytest

from chunkd_client import ChunkdError, Client
from chunkd_client.testing import ChunkdServer

from e2e_util import REPO, RPC_TIMEOUT, SUBPROCESS_TIMEOUT, parse_csv, pb, random_bytes, rows, stub
from redis_util import RedisServer

sys.path.insert(0, str(REPO / "tests" / "integration"))
import h2raw  # noqa: E402  (the raw HTTP/2 client of the abuse tests)

_PARAMS = pb.ChunkRequest(params=pb.ChunkParams())
#: Seconds any one wait of these tests may take before it fails.
_WAIT = 60.0
#: A --shutdown_grace that only a hang runs out: the tests whose streams
#: must finish within the grace take their own steps meanwhile, which a
#: loaded machine may make slow. Streams that wait on their client are not
#: ended as idle either (--stream_idle_timeout off).
_LONG_GRACE = ["--shutdown_grace=600s", "--stream_idle_timeout=0"]
REPORT = REPO / "build" / "rolling-restart-report.json"


def _stalled_stream(stop: threading.Event):
    """Params and one piece of 1000 bytes, then nothing until `stop` is
    set (bounded): a stream that runs until the test ends it, however fast
    the server is."""
    yield _PARAMS
    yield pb.ChunkRequest(data=b"x" * 1000)
    stop.wait(4 * _WAIT)


def _run_in_background(call):
    result = {}

    def run():
        try:
            result["responses"] = list(call)
            result["code"] = grpc.StatusCode.OK
        except grpc.RpcError as e:
            result["code"] = e.code()
            result["details"] = e.details()

    thread = threading.Thread(target=run)
    thread.start()
    return thread, result


def _wait_for(predicate: Callable[[], bool], timeout: float = _WAIT) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.02)
    return False


def _left_ready(channel: grpc.Channel) -> threading.Event:
    """Once `channel` is seen READY (waited for here): an event set when it
    leaves READY (its connection got a GOAWAY or broke)."""
    seen_ready, left = threading.Event(), threading.Event()

    def on_change(state: grpc.ChannelConnectivity) -> None:
        if state == grpc.ChannelConnectivity.READY:
            seen_ready.set()
        elif seen_ready.is_set():
            left.set()

    channel.subscribe(on_change)
    assert seen_ready.wait(_WAIT), "the channel is not READY"
    return left


def _refused(address: str) -> bool:
    """True when a TCP connection to `address` is refused (no listener);
    False when it is accepted, or reset by a listener closing meanwhile."""
    host, port = address.rsplit(":", 1)
    try:
        with socket.create_connection((host, int(port)), timeout=5):
            return False
    except ConnectionRefusedError:
        return True
    except ConnectionResetError:
        return False


def _chunkd_calls(server: ChunkdServer) -> float:
    """ChunkService calls the server started (grpc_server_started_total)."""
    text = server.metrics()
    return sum(float(m.group(1)) for m in re.finditer(
        r'^grpc_server_started_total\{[^}]*grpc_service="chunkd\.v1\.ChunkService"[^}]*\} (\S+)$',
        text, re.MULTILINE))


def test_running_stream_finishes_within_grace(chunkd_bin: Path) -> None:
    with ChunkdServer(chunkd_bin, extra_args=_LONG_GRACE) as server:
        channel, service = stub(server.address)
        stop = threading.Event()
        thread, result = _run_in_background(
            service.Chunk(_stalled_stream(stop), timeout=4 * _WAIT)
        )
        assert _wait_for(lambda: server.active_streams() == 1)
        left = _left_ready(channel)
        server.process.send_signal(signal.SIGTERM)

        # The GOAWAY moves the channel off its connection, and the listener
        # is closed: with a single address a new call finds no server (a
        # failure the retry policies and replays cover; below).
        assert left.wait(_WAIT), "the channel kept its connection after SIGTERM"
        assert _refused(server.address)
        with pytest.raises(grpc.RpcError) as refused:
            list(service.Chunk(iter([_PARAMS, pb.ChunkRequest(data=b"y")]),
                               timeout=RPC_TIMEOUT))
        assert refused.value.code() == grpc.StatusCode.UNAVAILABLE

        # The running stream is still served, and completes normally.
        stop.set()
        thread.join(_WAIT)
        assert not thread.is_alive(), "the stream did not end"
        assert result["code"] == grpc.StatusCode.OK, result
        summary = result["responses"][-1].summary
        assert summary.total_bytes == 1000 and summary.total_chunks == 1
        assert server.process.wait(_WAIT) == 0
        channel.close()


def test_stream_past_grace_is_cancelled_with_clear_status(chunkd_bin: Path) -> None:
    """A stream that waits on its client for longer than the grace (here
    until the test ends it) is cancelled with UNAVAILABLE saying why."""
    with ChunkdServer(chunkd_bin, extra_args=["--shutdown_grace=1s",
                                              "--stream_idle_timeout=0"]) as server:
        channel, service = stub(server.address)
        stop = threading.Event()
        thread, result = _run_in_background(
            service.Chunk(_stalled_stream(stop), timeout=4 * _WAIT)
        )
        try:
            assert _wait_for(lambda: server.active_streams() == 1)
            server.process.send_signal(signal.SIGTERM)
            thread.join(_WAIT)
            assert not thread.is_alive(), "the stream was not cancelled"
        finally:
            stop.set()
        assert result["code"] == grpc.StatusCode.UNAVAILABLE, result
        assert "grace period (--shutdown_grace)" in result["details"]
        assert server.process.wait(_WAIT) == 0
        channel.close()


def test_drain_on_the_wire(chunkd_bin: Path) -> None:
    """The frames a connection gets: GOAWAY (last stream 2^31-1) and a PING
    at SIGTERM; a call opened before the client acknowledged that PING is
    served (here a health check, answered NOT_SERVING), not cancelled; the
    acknowledgement brings the final GOAWAY naming that call's stream; new
    connections are refused; the running stream still ends OK."""
    with ChunkdServer(chunkd_bin, extra_args=_LONG_GRACE) as server:
        conn = h2raw.Connection(server.address, ack_pings=False, keep_data=True)
        try:
            assert conn.settings_seen.wait(_WAIT)
            chunk = conn.open_stream(conn.headers_block("/chunkd.v1.ChunkService/Chunk"))
            conn.send_data(chunk, h2raw.grpc_message(_PARAMS.SerializeToString()))
            assert _wait_for(lambda: server.active_streams() == 1)
            conn.release_pings()  # the connection's own PINGs so far
            server.process.send_signal(signal.SIGTERM)

            assert _wait_for(lambda: conn.goaways), "no GOAWAY after SIGTERM"
            assert conn.goaways[0][:2] == ((1 << 31) - 1, 0)
            assert _wait_for(lambda: conn.held_pings)
            assert _refused(server.address)
            check = conn.open_stream(conn.headers_block("/grpc.health.v1.Health/Check"))
            conn.send_data(check, h2raw.grpc_message(b""), end_stream=True)
            assert _wait_for(lambda: check in conn.ended), "the health check was not answered"
            assert ("grpc-status", "0") in conn.ended[check], conn.ended[check]
            assert conn.data[check] == h2raw.grpc_message(b"\x08\x02")  # NOT_SERVING
            assert len(conn.goaways) == 1

            conn.release_pings()
            assert _wait_for(lambda: len(conn.goaways) == 2), "no final GOAWAY"
            assert conn.goaways[1][:2] == (check, 0)

            conn.send_data(chunk, h2raw.grpc_message(
                pb.ChunkRequest(data=b"z" * 5000).SerializeToString()), end_stream=True)
            assert _wait_for(lambda: chunk in conn.ended), "the running stream did not end"
            assert ("grpc-status", "0") in conn.ended[chunk], conn.ended[chunk]
            assert conn.resets == {}
            assert server.process.wait(_WAIT) == 0
        finally:
            conn.close()


def _in_flight(server: ChunkdServer, method: str) -> float:
    """Calls of `method` the server started and has not answered."""
    text = server.metrics()

    def total(metric: str) -> float:
        return sum(float(m.group(1)) for m in re.finditer(
            rf'^{metric}\{{[^}}]*grpc_method="{method}"[^}}]*\}} (\S+)$', text, re.MULTILINE))

    return total("grpc_server_started_total") - total("grpc_server_handled_total")


def test_unary_call_under_way_finishes_within_grace(
        chunkd_bin: Path, redis: RedisServer) -> None:
    """A FindMissing waiting on Redis (held with SIGSTOP) when SIGTERM comes
    is answered once Redis is back: the drain waits for it, as for streams,
    within --shutdown_grace, instead of letting the server cancel it."""
    server = ChunkdServer(chunkd_bin, index=f"redis://{redis.address}",
                          extra_args=["--shutdown_grace=60s", "--redis_connect_timeout=60s",
                                      "--redis_command_timeout=60s"])
    with server, Client(server.address, timeout=RPC_TIMEOUT) as client:
        known = [bytes([1]) * 32]
        result: Dict[str, object] = {}

        def find_missing() -> None:
            try:
                result["missing"] = client.find_missing("held", known)
            except Exception as e:  # reported by the assertion below
                result["error"] = e

        redis.process.send_signal(signal.SIGSTOP)
        try:
            thread = threading.Thread(target=find_missing)
            thread.start()
            assert _wait_for(lambda: _in_flight(server, "FindMissing") == 1)
            server.process.send_signal(signal.SIGTERM)
            # Longer than the drain waits for what it does not track
            # (Drain in server/main.cc: 1 s, then 2 s): a negative check,
            # which a slow machine can only make pass, never fail.
            time.sleep(4)
            assert thread.is_alive(), result
        finally:
            redis.process.send_signal(signal.SIGCONT)
        thread.join(_WAIT)
        assert result == {"missing": known}
        assert server.process.wait(_WAIT) == 0


def _stalled(release: threading.Event):
    """A source that sends one piece, then waits for `release`."""
    yield b"a" * 1000
    assert release.wait(_WAIT)
    yield b"b" * 1000


def test_new_call_after_sigterm_goes_to_another_replica(chunkd_bin: Path) -> None:
    """Two replicas behind one target: the streams running on the one that
    gets SIGTERM finish OK, and the calls made after it all succeed, served
    by the other."""
    with ChunkdServer(chunkd_bin, extra_args=_LONG_GRACE) as a, \
            ChunkdServer(chunkd_bin) as b, Client(b.address, timeout=RPC_TIMEOUT) as direct:
        data = random_bytes(27, 1 << 20)
        expected = rows(direct.chunk_all(data)[0])
        clean = rows(direct.chunk_all(b"a" * 1000 + b"b" * 1000)[0])
        with Client(f"ipv4:{a.address},{b.address}", timeout=RPC_TIMEOUT) as client:
            release = threading.Event()
            streams: List[threading.Thread] = []
            results: List[object] = []

            def stalled_chunk() -> None:
                try:
                    results.append(rows(client.chunk_all(_stalled(release))[0]))
                except Exception as e:  # reported by the assertion below
                    results.append(e)

            # Streams until each replica runs one (round_robin alternates).
            for _ in range(8):
                streams.append(threading.Thread(target=stalled_chunk))
                streams[-1].start()
                assert _wait_for(lambda: a.active_streams() + b.active_streams() == len(streams))
                if a.active_streams() and b.active_streams():
                    break
            assert a.active_streams() and b.active_streams()
            a.process.send_signal(signal.SIGTERM)
            assert _wait_for(lambda: _refused(a.address))

            served_by_b = _chunkd_calls(b)
            for _ in range(100):
                assert rows(client.chunk_all(data)[0]) == expected
                assert client.server_info().version
                if _chunkd_calls(b) >= served_by_b + 10:
                    break
            assert _chunkd_calls(b) >= served_by_b + 10, "the calls did not reach the other replica"

            release.set()
            for thread in streams:
                thread.join(_WAIT)
            assert results == [clean] * len(streams)
            assert a.process.wait(_WAIT) == 0


def test_single_address_client_sees_a_failure_its_replays_cover(
        chunkd_bin: Path, tmp_path: Path) -> None:
    """With one address and its server restarting, a unary call fails with
    UNAVAILABLE once its retry policy is spent, and a Dedup with `retries`
    waits for the server and succeeds once it is back."""
    source = tmp_path / "data"
    source.write_bytes(random_bytes(28, 1 << 20))
    with ChunkdServer(chunkd_bin) as server, Client(server.address, timeout=RPC_TIMEOUT) as client:
        expected = rows(client.dedup_all(source, namespace="single-clean")[0])
        server.process.send_signal(signal.SIGTERM)
        assert server.process.wait(_WAIT) == 0

        with pytest.raises(ChunkdError) as down:
            client.server_info()
        assert down.value.code() == grpc.StatusCode.UNAVAILABLE
        with pytest.raises(ChunkdError) as down:
            client.chunk_all(source)
        assert down.value.code() == grpc.StatusCode.UNAVAILABLE

        replayed = threading.Event()
        result: Dict[str, object] = {}

        def dedup() -> None:
            try:
                result["rows"] = rows(client.dedup_all(
                    source, namespace="single-restart", retries=10,
                    on_replay=lambda error, delay: replayed.set())[0])
            except Exception as e:  # reported by the assertion below
                result["error"] = e

        thread = threading.Thread(target=dedup)
        thread.start()
        assert replayed.wait(_WAIT), result
        server.restart()
        thread.join(_WAIT)
        assert result.get("rows") == expected, result


class _Workers:
    """Clients calling chunkd in a loop on their own threads until stopped;
    each call's result is checked against a clean run's, and every failure
    is kept."""

    #: Calls at most per worker, whatever happens.
    MAX_CALLS = 10_000

    def __init__(self) -> None:
        self.stop = threading.Event()
        self.calls: Dict[str, int] = {}
        self.failures: List[Tuple[str, str]] = []  # (worker, what failed)
        self._lock = threading.Lock()
        self._threads: List[threading.Thread] = []

    def add(self, name: str, call: Callable[[int], None]) -> None:
        self.calls[name] = 0

        def loop() -> None:
            for i in range(self.MAX_CALLS):
                if self.stop.is_set():
                    return
                try:
                    call(i)
                except Exception as e:  # every failure is reported
                    code = e.code().name if isinstance(e, grpc.RpcError) else type(e).__name__
                    with self._lock:
                        self.failures.append((name, f"call {i}: {code}: {e}"))
                with self._lock:
                    self.calls[name] += 1

        thread = threading.Thread(target=loop, name=name)
        self._threads.append(thread)
        thread.start()

    def snapshot(self) -> Dict[str, int]:
        with self._lock:
            return dict(self.calls)

    def wait_progress(self, calls: int) -> None:
        """Waits until every worker made `calls` more calls."""
        start = self.snapshot()
        assert _wait_for(lambda: all(n >= start[k] + calls for k, n in self.snapshot().items()),
                         timeout=4 * _WAIT), f"the clients stalled: {self.snapshot()}"

    def join(self) -> None:
        self.stop.set()
        for thread in self._threads:
            thread.join(4 * _WAIT)
            assert not thread.is_alive(), f"{thread.name} did not stop"


def _cli_retries(command: Sequence[str]) -> List[str]:
    """`--retries 5` when the CLI's chunk command takes it (replays like
    Dedup's), else nothing."""
    usage = subprocess.run([*command, "chunk", "--help"], stdin=subprocess.DEVNULL,
                           capture_output=True, text=True, timeout=SUBPROCESS_TIMEOUT)
    return ["--retries", "5"] if "--retries" in usage.stdout + usage.stderr else []


def _chunkd_go(target: str) -> Tuple[Optional[str], str]:
    """chunkd-go ($CHUNKD_GO_BIN, default build/tools/bin/chunkd-go) when
    it is built and reaches `target`, a list of addresses, which grpc-go
    resolves only with chunkd-go's own resolver; else None, and why."""
    path = os.environ.get("CHUNKD_GO_BIN") or str(REPO / "build" / "tools" / "bin" / "chunkd-go")
    if not os.access(path, os.X_OK):
        return None, f"{path} is not built"
    info = subprocess.run([path, "info", "--server", target], stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=SUBPROCESS_TIMEOUT)
    if info.returncode != 0:
        return None, f"it cannot reach {target}: {info.stderr.strip()}"
    return path, ""


def test_rolling_restart_under_load(
        chunkd_bin: Path, chunkctl_bin: Path, redis: RedisServer, tmp_path: Path) -> None:
    """Three replicas sharing a Redis index behind one multi-address target:
    each in turn gets SIGTERM, exits, and is started again on its port while
    clients with their default settings call continuously: Python Chunk,
    Dedup (with `retries`) with a Release of what it added, the unary calls,
    chunkctl, and chunkd-go where it resolves the target (its own ipv4:
    resolver). No call fails and every answer equals a clean run's.

    One failure is gRPC's own: a stream the client's balancer gave to a
    connection in the instant it received its GOAWAY is not sent, and ends
    UNAVAILABLE when the call already holds more than gRPC keeps for a
    transparent retry (256 KiB; a Chunk stream's first data message is 1
    MiB). The server never saw it, and a client's replays cover it; a client
    without Chunk replays yet may see it: such failures are counted in the
    report, not failed."""
    python_retries = ({"retries": 5} if "retries" in inspect.signature(Client.chunk).parameters
                      else {})
    source = tmp_path / "data"
    source.write_bytes(random_bytes(29, 3 << 20))
    index = f"redis://{redis.address}"
    servers = [ChunkdServer(chunkd_bin, index=index, extra_args=_LONG_GRACE)
               for _ in range(3)]
    try:
        for server in servers:
            server.start()
        target = "ipv4:" + ",".join(s.address for s in servers)
        with Client(target, timeout=RPC_TIMEOUT) as client:
            expected = rows(client.chunk_all(source)[0])
            known = [bytes.fromhex(r[2]) for r in
                     rows(client.dedup_all(source, namespace="known")[0])]
            unknown = [bytes([i]) * 32 for i in range(4)]
            workers = _Workers()

            def chunk(_: int) -> None:
                assert rows(client.chunk_all(source, **python_retries)[0]) == expected

            def dedup(i: int) -> None:
                records, _ = client.dedup_all(source, namespace=f"rolling-{i}", retries=10)
                assert rows(records) == expected
                assert all(r.is_new for r in records)
                # Exactly one reference each: released, none is left.
                assert client.release(f"rolling-{i}", known) == [0] * len(known)

            def unary(_: int) -> None:
                assert client.find_missing("known", known + unknown) == unknown
                assert client.server_info().index_backend == "redis"

            def cli(command: List[str]) -> Callable[[int], None]:
                argv = [*command, "chunk", "--server", target, *_cli_retries(command),
                        str(source)]

                def call(_: int) -> None:
                    result = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True,
                                            text=True, timeout=SUBPROCESS_TIMEOUT)
                    assert result.returncode == 0, result.stderr
                    assert parse_csv(result.stdout) == expected

                return call

            calls = {"chunk": chunk, "dedup": dedup, "unary": unary,
                     "chunkctl": cli([str(chunkctl_bin)])}
            go, without_go = _chunkd_go(target)
            if go is not None:
                calls["chunkd-go"] = cli([go])
            for name, call in calls.items():
                workers.add(name, call)
            ready_after: List[float] = []
            try:
                workers.wait_progress(2)
                for server in servers:
                    server.process.send_signal(signal.SIGTERM)
                    assert server.process.wait(_WAIT) == 0, server.log()[-4000:]
                    started = time.monotonic()
                    server.restart()
                    ready_after.append(time.monotonic() - started)
                    workers.wait_progress(2)
                # Every replica serves again: the clients reconnected.
                before = [_chunkd_calls(s) for s in servers]
                assert _wait_for(lambda: all(_chunkd_calls(s) > n for s, n in zip(servers, before)))
            finally:
                workers.join()

        # A Chunk stream of a client without Chunk replays, ended UNAVAILABLE
        # by gRPC itself (above).
        replays = {"chunk": bool(python_retries),
                   "chunkctl": bool(_cli_retries([str(chunkctl_bin)])),
                   "chunkd-go": bool(go and _cli_retries([go]))}
        failures = [f for f in workers.failures
                    if replays.get(f[0], True) or ": UNAVAILABLE: " not in f[1]]
        REPORT.parent.mkdir(parents=True, exist_ok=True)
        REPORT.write_text(json.dumps({
            "calls": workers.calls,
            "failures": [f"{name} {what}" for name, what in workers.failures],
            "unreplayed_chunk_failures": len(workers.failures) - len(failures),
            "restart_to_serving_seconds": [round(t, 3) for t in ready_after],
            "chunk_replays": replays,
            "chunkd_go_not_run": without_go,
        }, indent=2) + "\n")
        assert failures == [], "\n".join(f"{name} {what}" for name, what in failures)
    finally:
        for server in servers:
            server.stop()
