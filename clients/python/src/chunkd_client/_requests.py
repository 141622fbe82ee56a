"""The requests of a Chunk, Dedup or Estimate stream, as Client and
AsyncClient send them: the streaming methods (the stub's attribute, the
request message, the conversion of records and summary), and the requests
made from a source's pieces as the gRPC library asks for them, counting the
bytes sent and keeping the source's own error."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import (
    Any, AsyncIterator, Callable, Dict, Generic, Iterator, Optional, TypeVar, Union,
    overload,
)

from chunkd_client import _convert as convert
from chunkd_client._proto.chunkd.v1 import chunkd_pb2 as pb
from chunkd_client._sources import END_OF_FILE, Piece
from chunkd_client.records import (
    ChunkRecord, ChunkSummary, DedupRecord, DedupSummary, EstimateProgress, EstimateResult,
)

R = TypeVar("R")
S = TypeVar("S")


@dataclass(frozen=True)
class StreamMethod(Generic[R, S]):
    """One of the streaming methods: the stub's attribute, its request
    message and the conversion of its records and summary (Estimate's
    records are its progress messages, its summary the result)."""

    name: str
    request: Callable[..., object]
    record: Callable[[Any], R]
    summary: Callable[[Any], S]


CHUNK: StreamMethod[ChunkRecord, ChunkSummary] = StreamMethod(
    "Chunk", pb.ChunkRequest, convert.chunk_record, convert.chunk_summary
)
DEDUP: StreamMethod[DedupRecord, DedupSummary] = StreamMethod(
    "Dedup", pb.DedupRequest, convert.dedup_record, convert.dedup_summary
)
ESTIMATE: StreamMethod[EstimateProgress, EstimateResult] = StreamMethod(
    "Estimate", pb.EstimateRequest, convert.estimate_progress, convert.estimate_result
)


class Requests:
    """The requests of one stream, made from the data pieces of its source
    as the gRPC library asks for them (on a thread or in a task of its own).

    The first request carries ``params`` and the first piece (no data for
    an empty source), each other request one more piece; an END_OF_FILE
    piece (an Estimate's data set) is a request with ``end_of_file`` set. The gRPC library only cancels the call when the source raises; ``error``
    keeps that exception so that the caller sees it instead of a bare
    CANCELLED. ``sent`` counts the data bytes handed over, and ``complete``
    is set once the source is exhausted, which is before the stream is
    half-closed and so before the server can send its summary.
    """

    def __init__(self, message: Callable[..., object], params: object) -> None:
        self._message = message
        self._params: Optional[object] = params
        self.error: Optional[BaseException] = None
        self.sent = 0
        self.complete = False

    @overload
    def over(self, pieces: Iterator[Piece]) -> Iterator[object]: ...
    @overload
    def over(self, pieces: AsyncIterator[Piece]) -> AsyncIterator[object]: ...

    def over(
        self, pieces: Union[Iterator[Piece], AsyncIterator[Piece]]
    ) -> Union[Iterator[object], AsyncIterator[object]]:
        """The requests for ``pieces``: an iterator of them for a blocking
        call, an async iterator for a grpc.aio call when ``pieces`` is one."""
        if isinstance(pieces, AsyncIterator):
            return self._over_async(pieces)
        return self._over(pieces)

    def _over(self, pieces: Iterator[Piece]) -> Iterator[object]:
        with self._reading():
            yield self._request(next(pieces, b""))
            for piece in pieces:
                yield self._request(piece)

    async def _over_async(self, pieces: AsyncIterator[Piece]) -> AsyncIterator[object]:
        with self._reading():
            try:
                first = await pieces.__anext__()
            except StopAsyncIteration:
                first = b""
            yield self._request(first)
            async for piece in pieces:
                yield self._request(piece)

    def _request(self, piece: Piece) -> object:
        if isinstance(piece, bytes):
            self.sent += len(piece)
            fields: Dict[str, Any] = {"data": piece}
        else:
            assert piece is END_OF_FILE
            fields = {"end_of_file": True}
        if self._params is None:
            return self._message(**fields)
        params, self._params = self._params, None
        return self._message(params=params, **fields)

    @contextlib.contextmanager
    def _reading(self) -> Iterator[None]:
        """Around reading the source: keeps its error, marks its end."""
        try:
            yield
        except Exception as e:  # handed to the caller by the response stream
            self.error = e
            raise
        self.complete = True
