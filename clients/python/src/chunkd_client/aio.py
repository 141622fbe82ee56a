"""The asyncio client: ``AsyncClient``, the same surface as ``Client`` on
``grpc.aio``.

    from chunkd_client import ChunkingParams
    from chunkd_client.aio import AsyncClient

    async with AsyncClient("localhost:50051", timeout=60) as client:
        stream = client.chunk("disk.img", params=ChunkingParams(avg_size=16384))
        async for record in stream:
            ...
        print(stream.summary)

Sources are those ``Client`` accepts, plus async iterables of bytes. Files
are read in the event loop's default executor, so a slow disk never blocks
the loop. Errors are raised as ``ChunkdError``.
"""

from __future__ import annotations

import asyncio
from typing import (
    Any,
    AsyncIterable,
    AsyncGenerator,
    AsyncIterator,
    Callable,
    Coroutine,
    Generic,
    Iterable,
    Iterator,
    List,
    Optional,
    Sequence,
    Tuple,
    TypeVar,
    Union,
)

import grpc
import grpc.aio

from chunkd_client import _convert as convert
from chunkd_client._channel import (
    Tls,
    call_metadata,
    channel_credentials,
    channel_options,
)
from chunkd_client._convert import DEFAULT_MESSAGE_SIZE, ChunkingParams
from chunkd_client._proto.chunkd.v1 import chunkd_pb2 as pb
from chunkd_client._proto.chunkd.v1 import chunkd_pb2_grpc as pb_grpc
from chunkd_client._sources import Source, iter_source
from chunkd_client.errors import ChunkdError, check_accounted
from chunkd_client.records import (
    ChunkRecord,
    ChunkSummary,
    DedupRecord,
    DedupSummary,
    ServerInfo,
)

__all__ = ["AsyncClient", "AsyncResponseStream", "AsyncSource"]

R = TypeVar("R")
S = TypeVar("S")
T = TypeVar("T")

#: What ``AsyncClient.chunk`` and ``dedup`` accept: a ``Source`` or an async
#: iterable of bytes.
AsyncSource = Union[Source, AsyncIterable[bytes]]


async def _aiter_source(source: AsyncSource, message_size: int) -> AsyncIterator[bytes]:
    """``iter_source`` for the event loop: blocking reads run in the default
    executor; async iterables are split like sync ones."""
    if isinstance(source, AsyncIterable):
        async for item in source:
            for part in iter_source([item], message_size):
                yield part
        return
    pieces = iter_source(source, message_size)  # type: ignore[arg-type]
    loop = asyncio.get_running_loop()
    while True:
        piece: Optional[bytes] = await loop.run_in_executor(None, _next_or_none, pieces)
        if piece is None:
            return
        yield piece


def _next_or_none(pieces: Iterator[bytes]) -> Optional[bytes]:
    return next(pieces, None)


class _AsyncRequests:
    """The request iterator; keeps a source error for the caller (grpc.aio
    would only cancel the call), counts the data bytes it hands over
    (``sent``) and sets ``complete`` once the source is exhausted (before
    grpc.aio half-closes the stream)."""

    def __init__(
        self,
        first: Callable[[bytes], object],
        rest: Callable[[bytes], object],
        pieces: AsyncIterator[bytes],
    ) -> None:
        self._first = first
        self._rest = rest
        self._pieces = pieces
        self.error: Optional[BaseException] = None
        self.sent = 0
        self.complete = False

    async def __aiter__(self) -> AsyncIterator[object]:
        try:
            first = b""
            async for piece in self._pieces:
                first = piece
                break
            self.sent += len(first)
            yield self._first(first)
            async for piece in self._pieces:
                self.sent += len(piece)
                yield self._rest(piece)
        except Exception as e:
            self.error = e
            raise
        self.complete = True


def _result_now(coroutine: Coroutine[Any, Any, T]) -> Optional[T]:
    """The result of ``coroutine`` if it finishes without suspending; None
    (and the coroutine closed) if it would wait."""
    try:
        coroutine.send(None)
    except StopIteration as finished:
        return finished.value  # type: ignore[no-any-return]
    coroutine.close()
    return None


class AsyncResponseStream(Generic[R, S]):
    """The records of one Chunk or Dedup call; ``async for`` them.

    ``summary`` is set once the iteration has ended; ``collect()`` reads the
    rest and returns ``(records, summary)``; ``cancel()`` (or ``async with``)
    abandons the call. A stream that ends OK but whose summary is missing or
    does not count every byte sent fails with ``DATA_LOSS``. One consumer.
    """

    def __init__(
        self,
        call: Any,
        requests: _AsyncRequests,
        record: Callable[[Any], R],
        summary: Callable[[Any], S],
    ) -> None:
        self._call = call
        self._requests = requests
        self._make_record = record
        self._make_summary = summary
        self._summary: Optional[S] = None
        self._records: AsyncGenerator[R, None] = self._generate()
        self._status: Optional[Tuple[grpc.StatusCode, str]] = None
        call.add_done_callback(self._keep_status)

    def _keep_status(self, call: Any) -> None:
        """Keeps the call's status as it is first set.

        grpc.aio consumes the request iterator in a task of its own; when a
        write is still in flight as the server ends the call (a stream
        refused with RESOURCE_EXHAUSTED, a server that fails early), Core
        fails that write after it delivered the server's status, and
        grpc.aio then replaces the status with INTERNAL "Internal error from
        Core". The call is done when this runs, so ``code()`` and
        ``details()`` return at once, before any such write is processed.
        """
        if self._status is not None:
            return
        code = _result_now(call.code())
        details = _result_now(call.details())
        if isinstance(code, grpc.StatusCode):
            self._status = (code, details or "")

    def _rpc_error(self, error: grpc.RpcError) -> Optional[ChunkdError]:
        """The ChunkdError for ``error``, with the status the server gave
        (see ``_keep_status``); None when the server ended the call OK."""
        if self._status is None:
            return ChunkdError.from_rpc_error(error)
        code, details = self._status
        if code == grpc.StatusCode.OK:
            return None
        return ChunkdError(code, details)

    def __aiter__(self) -> "AsyncResponseStream[R, S]":
        return self

    async def __anext__(self) -> R:
        return await self._records.__anext__()

    async def __aenter__(self) -> "AsyncResponseStream[R, S]":
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.cancel()

    @property
    def done(self) -> bool:
        """True once the summary has been received."""
        return self._summary is not None

    @property
    def summary(self) -> S:
        """The server's totals; RuntimeError before the iteration ended."""
        if self._summary is None:
            raise RuntimeError("the summary is available only after all records were read")
        return self._summary

    async def collect(self) -> Tuple[List[R], S]:
        """Reads the remaining records; returns them with the summary."""
        records = [r async for r in self]
        return records, self.summary

    async def cancel(self) -> None:
        """Abandons the call if it is still running (no effect otherwise)."""
        if self._summary is None:
            self._call.cancel()
        await self._records.aclose()

    async def _generate(self) -> AsyncGenerator[R, None]:
        summary: Any = None
        try:
            async for response in self._call:
                body = response.WhichOneof("body")
                if summary is not None:
                    raise self._protocol_error(f"{body} after the summary")
                if body == "batch":
                    for record in response.batch.chunks:
                        yield self._make_record(record)
                elif body == "summary":
                    summary = response.summary
                else:
                    raise self._protocol_error("a response without a body")
        except grpc.RpcError as e:
            if self._requests.error is not None:
                raise self._requests.error from None
            error = self._rpc_error(e)
            if error is not None:
                raise error from None
        except asyncio.CancelledError:
            if self._requests.error is not None:
                raise self._requests.error from None
            raise
        if self._requests.error is not None:
            raise self._requests.error
        check_accounted(summary, self._requests)
        self._summary = self._make_summary(summary)

    def _protocol_error(self, what: str) -> ChunkdError:
        self._call.cancel()
        return ChunkdError(
            grpc.StatusCode.INTERNAL, f"protocol violation by the server: {what}"
        )


#: What ``AsyncClient.chunk`` returns.
AsyncChunkStream = AsyncResponseStream[ChunkRecord, ChunkSummary]
#: What ``AsyncClient.dedup`` returns.
AsyncDedupStream = AsyncResponseStream[DedupRecord, DedupSummary]


class AsyncClient:
    """``Client`` for asyncio: the same arguments, methods and results, with
    ``await`` / ``async for``. Create it inside a running event loop and use
    it as an async context manager (or ``await close()``).
    """

    def __init__(
        self,
        target: str,
        *,
        tls: Tls = None,
        token: Optional[str] = None,
        timeout: Optional[float] = None,
        metadata: Sequence[Tuple[str, str]] = (),
        options: Sequence[Tuple[str, object]] = (),
    ) -> None:
        self.target = target
        self.timeout = timeout
        self._metadata = call_metadata(token, metadata)
        credentials = channel_credentials(tls)
        opts = channel_options(tls, options)
        if credentials is None:
            self._channel = grpc.aio.insecure_channel(target, options=opts)
        else:
            self._channel = grpc.aio.secure_channel(target, credentials, options=opts)
        self._stub = pb_grpc.ChunkServiceStub(self._channel)
        self._closed = False

    async def __aenter__(self) -> "AsyncClient":
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    async def close(self) -> None:
        """Closes the channel; running calls are cancelled. Idempotent."""
        if not self._closed:
            self._closed = True
            await self._channel.close(None)

    @property
    def stub(self) -> pb_grpc.ChunkServiceStub:
        """The raw generated stub (on the aio channel)."""
        return self._stub

    def _deadline(self, timeout: Optional[float]) -> Optional[float]:
        if self._closed:
            raise ValueError("the client is closed")
        return self.timeout if timeout is None else timeout

    def chunk(
        self,
        source: AsyncSource,
        *,
        params: Optional[ChunkingParams] = None,
        fingerprint: Union[str, int] = "sha256",
        message_size: int = DEFAULT_MESSAGE_SIZE,
        timeout: Optional[float] = None,
        **chunking: Any,
    ) -> AsyncChunkStream:
        """As ``Client.chunk``; ``async for`` the returned stream."""
        if message_size < 1:
            raise ValueError(f"message_size must be at least 1, got {message_size}")
        request = convert.chunk_params(fingerprint, params, **chunking)
        requests = _AsyncRequests(
            lambda data: pb.ChunkRequest(params=request, data=data),
            lambda data: pb.ChunkRequest(data=data),
            _aiter_source(source, message_size),
        )
        call = self._stub.Chunk(
            requests.__aiter__(), timeout=self._deadline(timeout), metadata=self._metadata
        )
        return AsyncResponseStream(
            call, requests, convert.chunk_record, convert.chunk_summary
        )

    async def chunk_all(
        self, source: AsyncSource, **kwargs: Any
    ) -> Tuple[List[ChunkRecord], ChunkSummary]:
        """Every record of ``chunk(source, **kwargs)`` and the summary."""
        async with self.chunk(source, **kwargs) as stream:
            return await stream.collect()

    def dedup(
        self,
        source: AsyncSource,
        *,
        namespace: str,
        params: Optional[ChunkingParams] = None,
        fingerprint: Union[str, int] = "sha256",
        stream_id: str = "",
        hints: Union[str, int, None] = None,
        message_size: int = DEFAULT_MESSAGE_SIZE,
        timeout: Optional[float] = None,
        **chunking: Any,
    ) -> AsyncDedupStream:
        """As ``Client.dedup``; ``async for`` the returned stream."""
        if message_size < 1:
            raise ValueError(f"message_size must be at least 1, got {message_size}")
        request = convert.dedup_params(
            namespace, fingerprint, stream_id, hints, params, **chunking
        )
        requests = _AsyncRequests(
            lambda data: pb.DedupRequest(params=request, data=data),
            lambda data: pb.DedupRequest(data=data),
            _aiter_source(source, message_size),
        )
        call = self._stub.Dedup(
            requests.__aiter__(), timeout=self._deadline(timeout), metadata=self._metadata
        )
        return AsyncResponseStream(
            call, requests, convert.dedup_record, convert.dedup_summary
        )

    async def dedup_all(
        self, source: AsyncSource, *, namespace: str, **kwargs: Any
    ) -> Tuple[List[DedupRecord], DedupSummary]:
        """Every record of ``dedup(...)`` and the summary."""
        async with self.dedup(source, namespace=namespace, **kwargs) as stream:
            return await stream.collect()

    async def find_missing(
        self,
        namespace: str,
        fingerprints: Iterable[bytes],
        *,
        timeout: Optional[float] = None,
    ) -> List[bytes]:
        """As ``Client.find_missing``."""
        deadline = self._deadline(timeout)
        missing: List[bytes] = []
        for batch in convert.batches([bytes(f) for f in fingerprints]):
            request = pb.FindMissingRequest(namespace=namespace, fingerprints=batch)
            try:
                response = await self._stub.FindMissing(
                    request, timeout=deadline, metadata=self._metadata
                )
            except grpc.RpcError as e:
                raise ChunkdError.from_rpc_error(e) from None
            missing.extend(response.missing_fingerprints)
        return missing

    async def release(
        self,
        namespace: str,
        fingerprints: Iterable[bytes],
        *,
        fingerprint: Union[str, int] = "sha256",
        request_id: str = "",
        timeout: Optional[float] = None,
    ) -> List[int]:
        """As ``Client.release``."""
        deadline = self._deadline(timeout)
        counts: List[int] = []
        for request in convert.release_requests(
            namespace, [bytes(f) for f in fingerprints], fingerprint, request_id
        ):
            try:
                response = await self._stub.Release(
                    request, timeout=deadline, metadata=self._metadata
                )
            except grpc.RpcError as e:
                raise ChunkdError.from_rpc_error(e) from None
            counts.extend(response.ref_counts)
        return counts

    async def server_info(self, *, timeout: Optional[float] = None) -> ServerInfo:
        """As ``Client.server_info``."""
        try:
            r = await self._stub.GetServerInfo(
                pb.GetServerInfoRequest(),
                timeout=self._deadline(timeout),
                metadata=self._metadata,
            )
        except grpc.RpcError as e:
            raise ChunkdError.from_rpc_error(e) from None
        return convert.server_info(r)
