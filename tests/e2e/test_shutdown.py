"""Graceful shutdown: on SIGTERM chunkd turns NOT_SERVING, refuses new
streams, lets running streams finish within --shutdown_grace, then cancels
the rest with UNAVAILABLE and exits by itself."""

from __future__ import annotations

import signal
import threading
import time
from pathlib import Path

import grpc
import pytest

from chunkd_client.testing import ChunkdServer, health_status

from e2e_util import pb, stub

_NOT_SERVING = 2
_PARAMS = pb.ChunkRequest(params=pb.ChunkParams())


def _slow_stream(stop: threading.Event, sent: threading.Event):
    """Params, then one small piece every 50 ms until `stop` is set."""
    yield _PARAMS
    while not stop.is_set():
        yield pb.ChunkRequest(data=b"x" * 1000)
        sent.set()
        time.sleep(0.05)


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


def _wait_for(predicate, timeout=10.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.02)
    return False


def test_running_stream_finishes_within_grace(chunkd_bin: Path) -> None:
    with ChunkdServer(chunkd_bin, extra_args=["--shutdown_grace=20s"]) as server:
        channel, service = stub(server.address)
        stop, sent = threading.Event(), threading.Event()
        thread, result = _run_in_background(
            service.Chunk(_slow_stream(stop, sent), timeout=30)
        )
        assert sent.wait(10)
        server.process.send_signal(signal.SIGTERM)

        assert _wait_for(lambda: health_status(server.address) == _NOT_SERVING)
        with pytest.raises(grpc.RpcError) as refused:
            list(service.Chunk(iter([_PARAMS, pb.ChunkRequest(data=b"y")]), timeout=10))
        assert refused.value.code() == grpc.StatusCode.UNAVAILABLE
        assert "shutting down" in refused.value.details()

        # The running stream is still served, and completes normally.
        stop.set()
        thread.join(20)
        assert result["code"] == grpc.StatusCode.OK, result
        summary = result["responses"][-1].summary
        assert summary.total_bytes > 0 and summary.total_chunks == 1
        assert server.process.wait(20) == 0
        channel.close()


def test_stream_past_grace_is_cancelled_with_clear_status(chunkd_bin: Path) -> None:
    with ChunkdServer(chunkd_bin, extra_args=["--shutdown_grace=1s"]) as server:
        channel, service = stub(server.address)
        stop, sent = threading.Event(), threading.Event()
        thread, result = _run_in_background(
            service.Chunk(_slow_stream(stop, sent), timeout=60)
        )
        assert sent.wait(10)
        started = time.monotonic()
        server.process.send_signal(signal.SIGTERM)
        thread.join(30)
        stop.set()
        assert result["code"] == grpc.StatusCode.UNAVAILABLE, result
        assert "grace period" in result["details"]
        assert server.process.wait(20) == 0
        assert time.monotonic() - started < 15
        channel.close()
