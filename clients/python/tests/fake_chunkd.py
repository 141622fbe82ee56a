"""A fake chunkd, in process on 127.0.0.1, for what a real one never does.

A real chunkd always ends a Chunk or Dedup stream with a summary that counts
every byte it received, and the codes it fails with depend on its state. To
test how the clients handle a broken summary, or a status with any code and
message, ``FakeChunkd`` serves the chunkd service with one fixed behaviour:

* ``summary="exact"``: reads the whole stream, answers one record covering
  it and a summary with the right total (a well-behaved server);
* ``"short"``: the same with ``total_bytes`` half the bytes received;
* ``"long"``: the same with ``total_bytes`` one more than received;
* ``"none"``: reads the whole stream, answers the record, no summary;
* ``"early"``: reads only the first request and ends the stream OK with a
  summary counting that request's bytes;
* ``abort=(code, message)``: every RPC fails with that status; with
  ``fail_first=N`` only the first N calls do (``calls`` counts them all),
  and the others behave as ``summary`` says.

``received`` is the number of data bytes the last stream delivered. An
Estimate stream gets a progress message per file mark and a result with
one set per set asked for, its ``total_bytes`` as ``summary`` says.
"""

from __future__ import annotations

import hashlib
import threading
from concurrent import futures
from typing import Any, Iterator, Optional, Tuple

import grpc

from chunkd_client._proto.chunkd.v1 import chunkd_pb2 as pb
from chunkd_client._proto.chunkd.v1 import chunkd_pb2_grpc as pb_grpc

SUMMARIES = ("exact", "short", "long", "none", "early")


class FakeChunkd(pb_grpc.ChunkServiceServicer):
    def __init__(
        self,
        summary: str = "exact",
        abort: Optional[Tuple[grpc.StatusCode, str]] = None,
        fail_first: Optional[int] = None,
    ) -> None:
        assert summary in SUMMARIES, summary
        self.summary = summary
        self.abort = abort
        self.fail_first = fail_first
        self.calls = 0
        self.received = 0
        self.address = ""
        self._lock = threading.Lock()
        self._server: Any = None

    def __enter__(self) -> "FakeChunkd":
        self._server = grpc.server(futures.ThreadPoolExecutor(max_workers=8))
        pb_grpc.add_ChunkServiceServicer_to_server(self, self._server)
        port = self._server.add_insecure_port("127.0.0.1:0")
        assert port > 0
        self.address = f"127.0.0.1:{port}"
        self._server.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._server.stop(grace=2).wait(10)

    def _fail_if_told(self, context: grpc.ServicerContext) -> None:
        with self._lock:
            self.calls += 1
            fail = self.fail_first is None or self.calls <= self.fail_first
        if self.abort is not None and fail:
            context.abort(*self.abort)

    def _read(self, requests: Iterator[Any]) -> int:
        received = 0
        for request in requests:
            received += len(request.data)
            if self.summary == "early":
                break
        with self._lock:
            self.received = received
        return received

    def _total(self, received: int) -> int:
        if self.summary == "short":
            return received // 2
        if self.summary == "long":
            return received + 1
        return received

    def _record(self, received: int, **extra: Any) -> dict:
        return dict(offset=0, length=received,
                    fingerprint=hashlib.sha256(b"fake").digest(), **extra)

    def Chunk(self, request_iterator, context):  # noqa: N802 (gRPC's name)
        self._fail_if_told(context)
        received = self._read(request_iterator)
        if received:
            yield pb.ChunkResponse(
                batch=pb.ChunkBatch(chunks=[pb.ChunkRecord(**self._record(received))]))
        if self.summary != "none":
            yield pb.ChunkResponse(summary=pb.ChunkSummary(
                total_bytes=self._total(received), total_chunks=1 if received else 0))

    def Dedup(self, request_iterator, context):  # noqa: N802
        self._fail_if_told(context)
        received = self._read(request_iterator)
        if received:
            yield pb.DedupResponse(batch=pb.DedupBatch(
                chunks=[pb.DedupRecord(**self._record(received, is_new=True))]))
        if self.summary != "none":
            total = self._total(received)
            chunks = 1 if received else 0
            yield pb.DedupResponse(summary=pb.DedupSummary(
                total_bytes=total, total_chunks=chunks,
                unique_bytes=total, unique_chunks=chunks))

    def Estimate(self, request_iterator, context):  # noqa: N802
        self._fail_if_told(context)
        received = files = 0
        labels = []
        for request in request_iterator:
            if request.HasField("params"):
                labels = [s.label for s in request.params.sets]
            received += len(request.data)
            if request.end_of_file:
                files += 1
                yield pb.EstimateResponse(
                    progress=pb.EstimateProgress(bytes=received, files=files))
            if self.summary == "early":
                break
        with self._lock:
            self.received = received
        if self.summary != "none":
            yield pb.EstimateResponse(result=pb.EstimateResult(
                sets=[pb.SetEstimate(label=label, bytes=received) for label in labels],
                total_bytes=self._total(received), files=files, sample_rate=1,
                fingerprint=pb.FINGERPRINT_ALGORITHM_XXH128))

    def FindMissing(self, request, context):  # noqa: N802
        self._fail_if_told(context)
        return pb.FindMissingResponse(missing_fingerprints=list(request.fingerprints))

    def Release(self, request, context):  # noqa: N802
        self._fail_if_told(context)
        return pb.ReleaseResponse(ref_counts=[0] * len(request.fingerprints))

    def GetServerInfo(self, request, context):  # noqa: N802
        self._fail_if_told(context)
        return pb.GetServerInfoResponse(version="fake")
