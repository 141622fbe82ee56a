"""What Client and AsyncClient share, so that neither is a hand-kept copy
of the other: the channel (with its default service config), the stub and
the options of every call; the checks of the arguments and the requests of
a Chunk or Dedup stream; the protocol of its responses; the replays of
both (when, after what, and which records the caller has already had);
and Release's request ids. Each client adds only its way of waiting: blocking,
or asyncio (reads in the executor, ``await``)."""

from __future__ import annotations

import contextlib
import hashlib
import struct
import threading
import uuid
from dataclasses import dataclass
from typing import (
    Any, AsyncIterator, Callable, Generic, Iterable, Iterator, Optional, Sequence,
    Tuple, TypeVar, Union, overload,
)

import grpc

from chunkd_client import _convert as convert
from chunkd_client._channel import (
    ServiceConfig, Tls, call_metadata, channel_credentials, channel_options,
)
from chunkd_client._proto.chunkd.v1 import chunkd_pb2 as pb
from chunkd_client._proto.chunkd.v1 import chunkd_pb2_grpc as pb_grpc
from chunkd_client.errors import ChunkdError, check_accounted
from chunkd_client.records import ChunkRecord, ChunkSummary, DedupRecord, DedupSummary

R = TypeVar("R")
S = TypeVar("S")


@dataclass(frozen=True)
class StreamMethod(Generic[R, S]):
    """One of the two streaming methods: the stub's attribute, its request
    message and the conversion of its records and summary."""

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


class Requests:
    """The requests of one Chunk or Dedup stream, made from the data pieces
    of its source as the gRPC library asks for them (on a thread or in a
    task of its own).

    The first request carries ``params`` and the first piece (no data for
    an empty source), each other request one more piece. The gRPC library only cancels the call when the source raises; ``error``
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
    def over(self, pieces: Iterator[bytes]) -> Iterator[object]: ...
    @overload
    def over(self, pieces: AsyncIterator[bytes]) -> AsyncIterator[object]: ...

    def over(
        self, pieces: Union[Iterator[bytes], AsyncIterator[bytes]]
    ) -> Union[Iterator[object], AsyncIterator[object]]:
        """The requests for ``pieces``: an iterator of them for a blocking
        call, an async iterator for a grpc.aio call when ``pieces`` is one."""
        if isinstance(pieces, AsyncIterator):
            return self._over_async(pieces)
        return self._over(pieces)

    def _over(self, pieces: Iterator[bytes]) -> Iterator[object]:
        with self._reading():
            yield self._request(next(pieces, b""))
            for piece in pieces:
                yield self._request(piece)

    async def _over_async(self, pieces: AsyncIterator[bytes]) -> AsyncIterator[object]:
        with self._reading():
            try:
                first = await pieces.__anext__()
            except StopAsyncIteration:
                first = b""
            yield self._request(first)
            async for piece in pieces:
                yield self._request(piece)

    def _request(self, piece: bytes) -> object:
        self.sent += len(piece)
        if self._params is None:
            return self._message(data=piece)
        params, self._params = self._params, None
        return self._message(params=params, data=piece)

    @contextlib.contextmanager
    def _reading(self) -> Iterator[None]:
        """Around reading the source: keeps its error, marks its end."""
        try:
            yield
        except Exception as e:  # handed to the caller by the response stream
            self.error = e
            raise
        self.complete = True


#: The status codes after which a stream with ``retries`` sends its source
#: again: the server or its index was unreachable, the server went away
#: mid-stream, was over a limit, or failed. DEADLINE_EXCEEDED joins them when
#: the call has a timeout (each attempt gets the whole timeout again), and
#: CANCELLED when the caller did not cancel: a server that stops past its
#: shutdown deadline, or a proxy that drops the stream, resets it with
#: RST_STREAM CANCEL, which the client reports as CANCELLED
#: (docs/clients.md, "Replaying streams").
REPLAYED_CODES = frozenset({
    grpc.StatusCode.UNAVAILABLE,
    grpc.StatusCode.ABORTED,
    grpc.StatusCode.RESOURCE_EXHAUSTED,
    grpc.StatusCode.INTERNAL,
    grpc.StatusCode.CANCELLED,
})
#: The wait before the first replay, in seconds; it doubles for each next
#: one, up to REPLAY_MAX_BACKOFF (the numbers of the channel's retry policy).
REPLAY_INITIAL_BACKOFF = 0.1
REPLAY_MAX_BACKOFF = 2.0
#: After that wait a replay also waits, at most this long (gRPC's connect
#: timeout) or the call's timeout, for the channel to (re)connect: gRPC
#: backs off reconnecting to a server that went away (20 ms, growing to at
#: most 2 s: DEFAULT_CHANNEL_OPTIONS), and a replay sent before would fail
#: at once and waste an attempt.
REPLAY_CONNECT_WAIT = 20.0


#: ``on_replay(error, delay)``: told of each replay before its wait (see
#: ``Client.dedup``).
OnReplay = Callable[[ChunkdError, float], object]


class Replays:
    """When a Chunk or Dedup stream with ``retries`` is sent again.

    ``delay`` answers, for each failure in turn, how long to wait before
    the replay, or None when the failure is final: a code not in
    REPLAYED_CODES, a CANCELLED of the caller's (``cancelled_here``, or a
    client ``closed()`` since), or no replay left. ``on_replay``, when
    given, is called with the failure and that wait for each replay, before
    the wait.
    """

    def __init__(self, retries: int, timeout: Optional[float], channel: Any,
                 on_replay: Optional[OnReplay] = None,
                 closed: Callable[[], bool] = lambda: False) -> None:
        check_replay_arguments(retries, on_replay)
        self.left = retries
        self.timeout = timeout
        self.channel = channel
        self.on_replay = on_replay
        self.closed = closed
        self._backoff = REPLAY_INITIAL_BACKOFF

    def delay(self, failure: ChunkdError, cancelled_here: bool = False) -> Optional[float]:
        code = failure.code()
        replayed = code in REPLAYED_CODES or (
            code == grpc.StatusCode.DEADLINE_EXCEEDED and self.timeout is not None
        )
        if code == grpc.StatusCode.CANCELLED and (cancelled_here or self.closed()):
            replayed = False
        if not replayed or self.left == 0:
            return None
        self.left -= 1
        delay, self._backoff = self._backoff, min(self._backoff * 2, REPLAY_MAX_BACKOFF)
        return delay

    @property
    def connect_wait(self) -> float:
        """How long a replay may wait for the channel to be ready."""
        if self.timeout is None:
            return REPLAY_CONNECT_WAIT
        return min(REPLAY_CONNECT_WAIT, self.timeout)


class Delivered:
    """The records a stream with ``retries`` has handed to its caller, as
    every replay must repeat them: where they end, how many there are, and
    a SHA-256 over their offsets, lengths and fingerprints (a few dozen
    bytes of state, however long the stream).

    ``take`` says of each record of the current attempt whether it is new
    to the caller; after ``replaying()`` the records before the end of
    those handed out are repeats, checked against them once the replay
    reaches that end. A replay that does not repeat them exactly (a record
    across that end, a gap, other offsets, lengths or fingerprints before
    it) means the source, or the index the hints learn from, changed under
    the replay: ``take`` raises DATA_LOSS, as it does for records that do
    not follow each other, and ``check_summary`` for a summary that does
    not add up to the records handed out.
    """

    def __init__(self) -> None:
        self.end = 0
        self.count = 0
        self._digest = hashlib.sha256()
        #: The digest and count of the repeats while a replay is before end.
        self._repeat: Optional[Tuple[Any, int]] = None
        self._replayed = False

    def replaying(self) -> None:
        """A new attempt starts from the source's start."""
        self._repeat = (hashlib.sha256(), 0) if self.end else None
        self._replayed = True

    def take(self, offset: int, length: int, fingerprint: bytes) -> bool:
        """True for a record to hand out (and counts it), False for a
        repeat; raises DATA_LOSS for a replay that cuts otherwise."""
        key = struct.pack("<QQ", offset, length) + bytes(fingerprint)
        if self._repeat is None:
            if offset != self.end:
                raise self._gap(offset)
            self._digest.update(key)
            self.end, self.count = offset + length, self.count + 1
            return True
        digest, count = self._repeat
        if offset >= self.end:
            raise self._gap(offset)
        if offset + length > self.end:
            raise _changed(f"has a chunk [{offset}, {offset + length}) across offset "
                           f"{self.end}, where the chunks already returned end")
        digest.update(key)
        self._repeat = (digest, count + 1)
        if offset + length == self.end:
            if count + 1 != self.count or digest.digest() != self._digest.digest():
                raise _changed(
                    f"has {count + 1} chunks before offset {self.end} that differ from "
                    f"the {self.count} already returned (in offsets, lengths or "
                    "fingerprints)")
            self._repeat = None
        return False

    def _gap(self, offset: int) -> ChunkdError:
        what = (f"goes on at offset {offset}, not at offset {self.end}, where the "
                "chunks already returned end")
        if self._replayed:
            return _changed(what)
        return ChunkdError(grpc.StatusCode.DATA_LOSS, f"the stream {what}")

    def check_summary(self, total_bytes: int, total_chunks: int) -> None:
        """DATA_LOSS unless the summary of the attempt that ended OK counts
        the records handed out, no more and no less."""
        if self._repeat is not None:
            raise _changed(f"ended at offset {total_bytes}, before offset {self.end}, "
                           "where the chunks already returned end")
        if (total_bytes, total_chunks) != (self.end, self.count):
            raise ChunkdError(
                grpc.StatusCode.DATA_LOSS,
                f"the stream's summary counts {total_bytes} bytes in {total_chunks} "
                f"chunks, but the chunks returned cover {self.end} bytes in "
                f"{self.count}")


def _changed(what: str) -> ChunkdError:
    return ChunkdError(grpc.StatusCode.DATA_LOSS,
                       f"the replayed stream {what}: the source or the index changed "
                       "under the replay")


class StreamBase(Generic[R, S]):
    """What ResponseStream and AsyncResponseStream share: the protocol of
    the responses (batches of records, then exactly one summary that counts
    every byte sent), their conversion, and the summary."""

    def __init__(
        self,
        begin: Callable[[], Tuple[Any, Requests]],
        record: Callable[[Any], R],
        summary: Callable[[Any], S],
        replays: Optional[Replays] = None,
    ) -> None:
        self._begin = begin
        self._replays = replays
        self._make_record = record
        self._make_summary = summary
        self._received: Any = None  # the summary message, once it arrived
        self._summary: Optional[S] = None
        #: The records handed to the caller, which a replay skips.
        self._delivered = Delivered()
        #: Set by ``cancel()``: a CANCELLED is then the caller's, never replayed.
        self._cancelled = False
        self._call, self._requests = begin()
        self._start()
        self._attach()

    def _start(self) -> None:
        """Sets up the iteration over the records; called once, in
        ``__init__``."""
        raise NotImplementedError

    def _attach(self) -> None:
        """Called for every call the stream makes, its replays included."""

    @property
    def done(self) -> bool:
        """True once the summary has been received."""
        return self._summary is not None

    @property
    def summary(self) -> S:
        """The server's totals; available once the iteration has ended.

        Raises RuntimeError before that.
        """
        if self._summary is None:
            raise RuntimeError(
                "the summary is available only after all records were read"
            )
        return self._summary

    def _records_in(self, response: Any) -> Iterator[R]:
        """The records of one response, once its place in the stream is
        checked; keeps the summary."""
        body = response.WhichOneof("body")
        if self._received is not None:
            raise self._protocol_error(f"{body} after the summary")
        if body == "batch":
            return map(self._make_record, response.batch.chunks)
        if body != "summary":
            raise self._protocol_error("a response without a body")
        self._received = response.summary
        return iter(())

    def _records(self, response: Any) -> Iterable[R]:
        """The records of one response to hand to the caller: after a
        replay, only those past the records already handed out."""
        records = self._records_in(response)
        return records if self._replays is None else self._fresh(records)

    def _fresh(self, records: Iterator[R]) -> Iterator[R]:
        """The records not handed out before (after a replay, those past the
        ones handed out); DATA_LOSS, with the call cancelled, for a replay
        that cuts otherwise (Delivered)."""
        for record in records:
            try:
                fresh = self._delivered.take(
                    record.offset, record.length, record.fingerprint)  # type: ignore[attr-defined]
            except ChunkdError:
                self._call.cancel()
                raise
            if fresh:
                yield record

    def _replay_delay(self, error: grpc.RpcError) -> Optional[float]:
        """What the failed call means: raises the source's exception when
        reading it failed, else the call's ChunkdError unless the stream is
        replayed after it; then returns the seconds to wait first. Returns
        None when there is no failure (the server ended the call OK)."""
        if isinstance(error, ChunkdError):
            raise error  # the client's own finding (a protocol error): final
        if self._requests.error is not None:
            raise self._requests.error from None
        failure = self._rpc_error(error)
        if failure is None:
            return None
        delay = (None if self._replays is None
                 else self._replays.delay(failure, self._cancelled))
        if delay is None:
            raise failure from None
        assert self._replays is not None
        if self._replays.on_replay is not None:
            self._replays.on_replay(failure, delay)
        return delay

    def _replay(self) -> None:
        """Starts the stream again from the start of its source."""
        self._call, self._requests = self._begin()
        self._received = None
        self._delivered.replaying()
        self._attach()

    def _rpc_error(self, error: grpc.RpcError) -> Optional[ChunkdError]:
        """The ChunkdError of a failed call; None when it ended OK."""
        return ChunkdError.from_rpc_error(error)

    def _finish(self) -> None:
        """Sets the summary once the stream ended OK; DATA_LOSS when the
        summary is missing or does not count every byte sent."""
        check_accounted(self._received, self._requests)
        if self._replays is not None:
            self._delivered.check_summary(self._received.total_bytes,
                                          self._received.total_chunks)
        self._summary = self._make_summary(self._received)

    def _protocol_error(self, what: str) -> ChunkdError:
        self._call.cancel()
        return ChunkdError(grpc.StatusCode.INTERNAL,
                           f"protocol violation by the server: {what}")


@contextlib.contextmanager
def rpc_errors() -> Iterator[None]:
    """Raises the ``grpc.RpcError`` of a unary call as ChunkdError."""
    try:
        yield
    except grpc.RpcError as e:
        raise ChunkdError.from_rpc_error(e) from None


class ClientBase:
    """The connection of Client and AsyncClient (see Client for the
    arguments): the channel, the stub, the deadline and metadata of every
    call."""

    #: The module whose ``insecure_channel`` and ``secure_channel`` make the
    #: channel: grpc, or grpc.aio.
    _channels: Any = grpc
    #: The class of the streams ``_stream`` returns (a StreamBase).
    _response_stream: Any
    #: ``(source, message_size, replayable) -> pieces``: the function that
    #: turns a source into the data pieces of a stream (see source_pieces),
    #: in blocking reads or in the event loop's executor.
    _source_pieces: Callable[..., Callable[[], Any]]

    def __init__(
        self,
        target: str,
        *,
        tls: Tls = None,
        token: Optional[str] = None,
        timeout: Optional[float] = None,
        metadata: Sequence[Tuple[str, str]] = (),
        options: Sequence[Tuple[str, object]] = (),
        service_config: ServiceConfig = None,
    ) -> None:
        self.target = target
        self.timeout = timeout
        self._metadata = call_metadata(token, metadata)
        credentials = channel_credentials(tls)
        opts = channel_options(tls, options, service_config)
        if credentials is None:
            self._channel = self._channels.insecure_channel(target, options=opts)
        else:
            self._channel = self._channels.secure_channel(
                target, credentials, options=opts
            )
        self._stub = pb_grpc.ChunkServiceStub(self._channel)
        self._closed = False
        self._lock = threading.Lock()

    @property
    def stub(self) -> pb_grpc.ChunkServiceStub:
        """The raw generated stub (on the client's channel), for what the
        wrapper does not cover."""
        return self._stub

    def _close_once(self) -> bool:
        """Marks the client closed; True only the first time."""
        with self._lock:
            if self._closed:
                return False
            self._closed = True
            return True

    def _deadline(self, timeout: Optional[float]) -> Optional[float]:
        if self._closed:
            raise ValueError("the client is closed")
        return self.timeout if timeout is None else timeout

    def _stream(
        self,
        method: StreamMethod[R, S],
        params: object,
        pieces: Callable[[], Union[Iterator[bytes], AsyncIterator[bytes]]],
        timeout: Optional[float],
        retries: int = 0,
        on_replay: Optional[OnReplay] = None,
    ) -> Any:
        """Starts a ``method`` stream that sends ``params`` and the data
        pieces ``pieces()`` returns (an async iterator for grpc.aio); returns
        its ``_response_stream``. With ``retries``, a failed stream is sent
        again, ``pieces()`` giving the source from its start each time, and
        ``on_replay`` is told of each replay."""
        deadline = self._deadline(timeout)
        replays = (Replays(retries, deadline, self._channel, on_replay,
                           closed=lambda: self._closed)
                   if retries else None)

        def begin() -> Tuple[Any, Requests]:
            requests = Requests(method.request, params)
            call = getattr(self._stub, method.name)(
                requests.over(pieces()), timeout=deadline, metadata=self._metadata
            )
            return call, requests

        return self._response_stream(begin, method.record, method.summary, replays)

    def _chunk(
        self,
        source: Any,
        params: Any,
        fingerprint: Union[str, int],
        message_size: int,
        timeout: Optional[float],
        retries: int,
        on_replay: Optional[OnReplay],
        chunking: Any,
    ) -> Any:
        """``chunk`` of both clients: checks the arguments now (a source
        that cannot be replayed with ``retries``: ValueError), then starts
        the stream."""
        return self._replayable(
            CHUNK, lambda: convert.chunk_params(fingerprint, params, **chunking),
            source, message_size, timeout, retries, on_replay)

    def _dedup(
        self,
        source: Any,
        namespace: str,
        params: Any,
        fingerprint: Union[str, int],
        stream_id: str,
        hints: Union[str, int, None],
        message_size: int,
        timeout: Optional[float],
        retries: int,
        on_replay: Optional[OnReplay],
        chunking: Any,
    ) -> Any:
        """``dedup`` of both clients: as ``_chunk``, with a stream_id when
        the stream may be replayed."""
        return self._replayable(
            DEDUP, lambda: convert.dedup_params(
                namespace, fingerprint, stream_id_for(stream_id, retries), hints,
                params, **chunking),
            source, message_size, timeout, retries, on_replay)

    def _replayable(
        self,
        method: StreamMethod[R, S],
        request: Callable[[], object],
        source: Any,
        message_size: int,
        timeout: Optional[float],
        retries: int,
        on_replay: Optional[OnReplay],
    ) -> Any:
        """Checks the replay arguments, the source (which must be
        replayable with ``retries``) and the parameters ``request()``
        converts, in that order and before any call; then starts the
        stream."""
        check_replay_arguments(retries, on_replay)
        pieces = self._source_pieces(source, message_size, bool(retries))
        return self._stream(method, request(), pieces, timeout, retries, on_replay)

    def _release_requests(
        self,
        namespace: str,
        fingerprints: Iterable[bytes],
        fingerprint: Union[str, int],
        request_id: str,
    ) -> Iterator[object]:
        """The Release requests of one ``release`` call; a random request_id
        when none is given, so that gRPC may safely send a request again."""
        return convert.release_requests(
            namespace, [bytes(f) for f in fingerprints], fingerprint,
            request_id or uuid.uuid4().hex,
        )


#: The most replays a Dedup call may ask for (as chunkctl and the Go client).
MAX_RETRIES = 100


def check_replay_arguments(retries: int, on_replay: Optional[OnReplay]) -> None:
    """ValueError for a ``retries`` that is not an int in 0..MAX_RETRIES,
    TypeError for an ``on_replay`` that is neither None nor callable."""
    if (isinstance(retries, bool) or not isinstance(retries, int)
            or not 0 <= retries <= MAX_RETRIES):
        raise ValueError(f"retries must be an int in 0..{MAX_RETRIES}, got {retries!r}")
    if on_replay is not None and not callable(on_replay):
        raise TypeError(f"on_replay must be callable or None, not "
                        f"{type(on_replay).__name__}")


def stream_id_for(stream_id: str, retries: int) -> str:
    """The stream_id of a Dedup stream: the caller's, else a random one when
    the stream may be replayed (so that a replay counts nothing twice)."""
    if stream_id or not retries:
        return stream_id
    return uuid.uuid4().hex
