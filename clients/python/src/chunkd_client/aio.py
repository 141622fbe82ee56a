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
and other blocking sources are read on a thread of each stream's own, so a
slow disk never blocks the loop, and a pipe that stalls blocks neither a
call's deadline nor the loop's or the interpreter's exit. Errors are raised
as ``ChunkdError``.
"""

from __future__ import annotations

import asyncio
import queue
import threading
from typing import (
    Any, AsyncIterable, AsyncGenerator, AsyncIterator, Callable, Coroutine, Iterable,
    Iterator, List, Optional, Sequence, Tuple, TypeVar, Union,
)

import grpc
import grpc.aio

from chunkd_client import _convert as convert
from chunkd_client._calls import ClientBase, OnReplay, StreamBase, rpc_errors
from chunkd_client._convert import DEFAULT_MESSAGE_SIZE, ChunkingParams
from chunkd_client._proto.chunkd.v1 import chunkd_pb2 as pb
from chunkd_client._sets import SetSpec
from chunkd_client._sources import (
    END_OF_FILE, Piece, Source, dataset_files, iter_source, source_pieces,
)
from chunkd_client.errors import ChunkdError
from chunkd_client.records import (
    ChunkRecord, ChunkSummary, DedupRecord, DedupSummary, EstimateProgress, EstimateResult,
    ServerInfo,
)

__all__ = ["AsyncClient", "AsyncResponseStream", "AsyncSource"]

R = TypeVar("R")
S = TypeVar("S")
T = TypeVar("T")

#: What ``AsyncClient.chunk`` and ``dedup`` accept: a ``Source`` or an async
#: iterable of bytes.
AsyncSource = Union[Source, AsyncIterable[bytes]]


async def _aiter_source(
    source: AsyncSource, message_size: int
) -> AsyncIterator[bytes]:
    """An async iterable ``source`` split as ``iter_source`` splits sync
    ones."""
    async for item in source:  # type: ignore[union-attr]
        for part in iter_source([item], message_size):
            yield part


async def _aiter_pieces(pieces: Iterator[bytes]) -> AsyncIterator[bytes]:
    """``pieces`` for the event loop: every read runs on the stream's
    reader thread (_Reader)."""
    loop = asyncio.get_running_loop()
    reader = _Reader(pieces)
    try:
        while True:
            piece = await reader.next(loop)
            if piece is None:
                return
            yield piece
    finally:
        reader.stop()


class _Reader:
    """Reads the pieces of one stream's source on a daemon thread, one at a
    time as the stream asks for them.

    Not the loop's default executor: a read that never returns (stdin or a
    pipe whose writer stalls without closing) would hold one of its threads,
    and ``asyncio.run`` and the interpreter's exit wait for those. A stalled
    read here holds only this thread, which nothing waits for; the call
    still ends at its deadline, since grpc.aio cancels the awaiting task.
    """

    def __init__(self, pieces: Iterator[bytes]) -> None:
        self._pieces = pieces
        self._asks: "queue.SimpleQueue[Optional[Tuple[Any, asyncio.Future]]]" = (
            queue.SimpleQueue())
        threading.Thread(target=self._serve, name="chunkd-source-reader",
                         daemon=True).start()

    def next(self, loop: asyncio.AbstractEventLoop) -> "asyncio.Future[Optional[bytes]]":
        """The next piece, None at the end of the source."""
        future: "asyncio.Future[Optional[bytes]]" = loop.create_future()
        self._asks.put((loop, future))
        return future

    def stop(self) -> None:
        """Ends the thread once a read under way returns."""
        self._asks.put(None)

    def _serve(self) -> None:
        while True:
            ask = self._asks.get()
            if ask is None:
                return
            loop, future = ask
            try:
                outcome: Tuple[Optional[bytes], Optional[BaseException]] = (
                    next(self._pieces, None), None)
            except Exception as e:  # the source's: raised in the stream
                outcome = (None, e)
            try:
                loop.call_soon_threadsafe(_settle, future, *outcome)
            except RuntimeError:  # the loop is closed: nobody waits
                return


def _settle(future: "asyncio.Future[Optional[bytes]]", piece: Optional[bytes],
            error: Optional[BaseException]) -> None:
    if future.cancelled():
        return  # the stream ended meanwhile
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(piece)


def _pieces(
    source: AsyncSource, message_size: int, replayable: bool = False
) -> Callable[[], AsyncIterator[bytes]]:
    """``source_pieces`` for the event loop, with the arguments checked now
    rather than at the first read; an async iterable cannot be replayed."""
    if message_size < 1:
        raise ValueError(f"message_size must be at least 1, got {message_size}")
    if isinstance(source, AsyncIterable):
        if replayable:
            raise ValueError(
                "retries need a source that can be read again from its start (a "
                "path, a bytes-like object or a seekable binary file), not an "
                "async iterable"
            )
        pieces = _aiter_source(source, message_size)
        return lambda: pieces
    again = source_pieces(source, message_size, replayable)
    return lambda: _aiter_pieces(again())


def _dataset_pieces(
    sources: Sequence[AsyncSource], message_size: int
) -> Callable[[], AsyncIterator[Piece]]:
    """``dataset_pieces`` for the event loop: each file's pieces (``_pieces``:
    an async iterable, or read on a thread of its own), END_OF_FILE after
    each; the sources checked now."""
    pieces = [_pieces(f, message_size) for f in dataset_files(sources)]

    async def chained() -> AsyncIterator[Piece]:
        for file_pieces in pieces:
            async for piece in file_pieces():
                yield piece
            yield END_OF_FILE

    return chained


def _result_now(coroutine: Coroutine[Any, Any, T]) -> Optional[T]:
    """The result of ``coroutine`` if it finishes without suspending; None
    (and the coroutine closed) if it would wait."""
    try:
        coroutine.send(None)
    except StopIteration as finished:
        return finished.value  # type: ignore[no-any-return]
    coroutine.close()
    return None


class AsyncResponseStream(StreamBase[R, S]):
    """The records of one Chunk or Dedup call; ``async for`` them.

    ``summary`` is set once the iteration has ended; ``collect()`` reads the
    rest and returns ``(records, summary)``; ``cancel()`` (or ``async with``)
    abandons the call. A stream that ends OK but whose summary is missing or
    does not count every byte sent fails with ``DATA_LOSS``. One consumer.
    """

    def _start(self) -> None:
        self._generator: AsyncGenerator[R, None] = self._generate()
        #: True while a task waits in ``__anext__``.
        self._iterating = False

    def _attach(self) -> None:
        self._status: Optional[Tuple[grpc.StatusCode, str, Any]] = None
        call = self._call
        call.add_done_callback(lambda done: self._keep_status(done, call))

    def _keep_status(self, done: Any, call: Any) -> None:
        """Keeps the call's status as it is first set.

        grpc.aio consumes the request iterator in a task of its own; when a
        write is still in flight as the server ends the call (a stream
        refused with RESOURCE_EXHAUSTED, a server that fails early), Core
        fails that write after it delivered the server's status, and
        grpc.aio then replaces the status with INTERNAL "Internal error from
        Core". The call is done when this runs, so ``code()`` and
        ``details()`` return at once, before any such write is processed.
        """
        if self._status is not None or call is not self._call:
            return  # set, or a call replaced by a replay
        code = _result_now(done.code())
        details = _result_now(done.details())
        trailing = _result_now(done.trailing_metadata())
        if isinstance(code, grpc.StatusCode):
            self._status = (code, details or "",
                            tuple(tuple(entry) for entry in trailing or ()))

    def _rpc_error(self, error: grpc.RpcError) -> Optional[ChunkdError]:
        """The ChunkdError for ``error``, with the status the server gave
        (see ``_keep_status``); None when the server ended the call OK."""
        if self._status is None:
            return ChunkdError.from_rpc_error(error)
        code, details, trailing = self._status
        if code == grpc.StatusCode.OK:
            return None
        return ChunkdError(code, details, trailing)

    def __aiter__(self) -> "AsyncResponseStream[R, S]":
        return self

    async def __anext__(self) -> R:
        self._iterating = True
        try:
            return await self._generator.__anext__()
        finally:
            self._iterating = False

    async def __aenter__(self) -> "AsyncResponseStream[R, S]":
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.cancel()

    async def collect(self) -> Tuple[List[R], S]:
        """Reads the remaining records; returns them with the summary."""
        records = [r async for r in self]
        return records, self.summary

    async def cancel(self) -> None:
        """Abandons the call if it is still running (no effect otherwise);
        it is not replayed. From another task than the one iterating, that
        iteration then raises asyncio.CancelledError."""
        self._cancelled = True
        if self._summary is None:
            self._call.cancel()
        if not self._iterating:
            await self._generator.aclose()

    async def _generate(self) -> AsyncGenerator[R, None]:
        while True:
            try:
                async for response in self._call:
                    for record in self._records(response):
                        yield record
            except grpc.RpcError as e:
                delay = self._replay_delay(e)
                if delay is not None:
                    await self._pause(delay)
                    self._replay()
                    continue
            except asyncio.CancelledError:
                if self._requests.error is not None:
                    raise self._requests.error from None
                raise
            if self._requests.error is not None:
                raise self._requests.error
            self._finish()
            return

    async def _pause(self, delay: float) -> None:
        """Waits ``delay`` seconds, then until the channel is ready (bounded,
        see REPLAY_CONNECT_WAIT)."""
        assert self._replays is not None
        await asyncio.sleep(delay)
        try:
            await asyncio.wait_for(
                self._replays.channel.channel_ready(), self._replays.connect_wait
            )
        except asyncio.TimeoutError:
            pass  # the replay fails, or not, on its own


#: What ``AsyncClient.chunk`` returns.
AsyncChunkStream = AsyncResponseStream[ChunkRecord, ChunkSummary]
#: What ``AsyncClient.dedup`` returns.
AsyncDedupStream = AsyncResponseStream[DedupRecord, DedupSummary]


class AsyncClient(ClientBase):
    """``Client`` for asyncio: the same arguments, methods and results, with
    ``await`` / ``async for``. Create it inside a running event loop and use
    it as an async context manager (or ``await close()``).
    """

    _channels = grpc.aio
    _response_stream = AsyncResponseStream
    _source_pieces = staticmethod(_pieces)
    _dataset_pieces = staticmethod(_dataset_pieces)

    async def __aenter__(self) -> "AsyncClient":
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    async def close(self) -> None:
        """Closes the channel; running calls are cancelled. Idempotent."""
        if self._close_once():
            await self._channel.close(None)

    def chunk(self, source: AsyncSource, *, params: Optional[ChunkingParams] = None,
              fingerprint: Union[str, int] = "sha256",
              message_size: int = DEFAULT_MESSAGE_SIZE,
              timeout: Optional[float] = None, retries: int = 0,
              on_replay: Optional[OnReplay] = None,
              **chunking: Any) -> AsyncChunkStream:
        """As ``Client.chunk``; ``async for`` the returned stream. With
        ``retries``, an async iterable source is a ValueError (it cannot be
        read again). ``on_replay(error, delay)`` is a plain function, called
        in the event loop before each replay's wait (it must not block)."""
        return self._chunk(source, params, fingerprint, message_size, timeout,
                           retries, on_replay, chunking)

    async def chunk_all(
        self, source: AsyncSource, **kwargs: Any
    ) -> Tuple[List[ChunkRecord], ChunkSummary]:
        """Every record of ``chunk(source, **kwargs)`` and the summary."""
        async with self.chunk(source, **kwargs) as stream:
            return await stream.collect()

    def dedup(self, source: AsyncSource, *, namespace: str,
              params: Optional[ChunkingParams] = None,
              fingerprint: Union[str, int] = "sha256", stream_id: str = "",
              hints: Union[str, int, None] = None,
              message_size: int = DEFAULT_MESSAGE_SIZE,
              timeout: Optional[float] = None, retries: int = 0,
              on_replay: Optional[OnReplay] = None,
              **chunking: Any) -> AsyncDedupStream:
        """As ``Client.dedup``; ``async for`` the returned stream, with
        ``retries`` and ``on_replay`` as in ``chunk``."""
        return self._dedup(source, namespace, params, fingerprint, stream_id, hints,
                           message_size, timeout, retries, on_replay, chunking)

    async def dedup_all(
        self, source: AsyncSource, *, namespace: str, **kwargs: Any
    ) -> Tuple[List[DedupRecord], DedupSummary]:
        """Every record of ``dedup(...)`` and the summary."""
        async with self.dedup(source, namespace=namespace, **kwargs) as stream:
            return await stream.collect()

    async def estimate(self, *sources: AsyncSource, sets: Sequence[SetSpec],
                       sample_rate: int = 1, namespace: Optional[str] = None,
                       fingerprint: Union[str, int, None] = None,
                       on_progress: Optional[Callable[[EstimateProgress], None]] = None,
                       message_size: int = DEFAULT_MESSAGE_SIZE,
                       timeout: Optional[float] = None) -> EstimateResult:
        """As ``Client.estimate``; a source may also be an async iterable of
        bytes. ``on_progress`` is a plain function, called in the event loop
        (it must not block)."""
        stream = self._estimate(sources, sets, sample_rate, namespace, fingerprint,
                                message_size, timeout, on_progress)
        async with stream:
            async for progress in stream:
                if on_progress is not None:
                    on_progress(progress)
            return stream.summary  # type: ignore[no-any-return]

    async def find_missing(self, namespace: str, fingerprints: Iterable[bytes], *,
                           timeout: Optional[float] = None) -> List[bytes]:
        """As ``Client.find_missing``."""
        deadline = self._deadline(timeout)
        missing: List[bytes] = []
        for request in convert.find_missing_requests(namespace, fingerprints):
            response = await self._unary(self._stub.FindMissing, request, deadline)
            missing.extend(response.missing_fingerprints)
        return missing

    async def release(self, namespace: str, fingerprints: Iterable[bytes], *,
                      fingerprint: Union[str, int] = "sha256", request_id: str = "",
                      timeout: Optional[float] = None) -> List[int]:
        """As ``Client.release``."""
        deadline = self._deadline(timeout)
        counts: List[int] = []
        for request in self._release_requests(
            namespace, fingerprints, fingerprint, request_id
        ):
            response = await self._unary(self._stub.Release, request, deadline)
            counts.extend(response.ref_counts)
        return counts

    async def server_info(self, *, timeout: Optional[float] = None) -> ServerInfo:
        """As ``Client.server_info``."""
        request = pb.GetServerInfoRequest()
        deadline = self._deadline(timeout)
        response = await self._unary(self._stub.GetServerInfo, request, deadline)
        return convert.server_info(response)

    async def _unary(self, method: Any, request: object, deadline: Optional[float]) -> Any:
        """The response of one unary call (ChunkdError when it fails)."""
        with rpc_errors():
            return await method(request, timeout=deadline, metadata=self._metadata)
