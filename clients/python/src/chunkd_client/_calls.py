"""What Client and AsyncClient share, so that neither is a hand-kept copy
of the other: the channel (with its default service config), the stub and
the options of every call; the protocol of a Chunk or Dedup stream's
responses; and Release's request ids. The requests of a stream are in
_requests, its replays in _replays. Each client adds only its way of
waiting: blocking, or asyncio (reads in the executor, ``await``)."""

from __future__ import annotations

import contextlib
import threading
import uuid
from typing import (
    Any, AsyncIterator, Callable, Generic, Iterable, Iterator, Optional, Sequence, Tuple,
    TypeVar, Union,
)

import grpc

from chunkd_client import _convert as convert
from chunkd_client._channel import (
    ServiceConfig, Tls, call_metadata, channel_credentials, channel_options,
)
from chunkd_client._proto.chunkd.v1 import chunkd_pb2_grpc as pb_grpc
from chunkd_client._replays import (  # noqa: F401 (MAX_RETRIES, OnReplay: the clients')
    MAX_RETRIES, Delivered, OnReplay, Replays, check_replay_arguments, stream_id_for,
)
from chunkd_client._requests import CHUNK, DEDUP, ESTIMATE, Requests, StreamMethod
from chunkd_client._sets import SetSpec, estimate_params
from chunkd_client.errors import ChunkdError, check_accounted

R = TypeVar("R")
S = TypeVar("S")


class StreamBase(Generic[R, S]):
    """What ResponseStream and AsyncResponseStream share: the protocol of
    the responses (batches of records, or an Estimate's progress messages,
    then exactly one summary, or an Estimate's result, that counts every
    byte sent), their conversion, and the summary."""

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
            final = self._received.DESCRIPTOR.name  # DedupSummary, EstimateResult...
            raise self._protocol_error(f"{body} after the {final}")
        if body == "batch":
            return map(self._make_record, response.batch.chunks)
        if body == "progress":  # an Estimate's: one record
            return iter((self._make_record(response.progress),))
        if body not in ("summary", "result"):
            raise self._protocol_error("a response without a body")
        self._received = getattr(response, body)
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
    #: ``(sources, message_size) -> pieces``: the same for the files of a
    #: data set, END_OF_FILE after each (see dataset_pieces).
    _dataset_pieces: Callable[..., Callable[[], Any]]

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

    def _estimate(
        self,
        sources: Sequence[Any],
        sets: Sequence[SetSpec],
        sample_rate: int,
        namespace: Optional[str],
        fingerprint: Union[str, int, None],
        message_size: int,
        timeout: Optional[float],
        on_progress: Optional[Callable[[Any], None]],
    ) -> Any:
        """``estimate`` of both clients: checks the arguments now (the
        parameters first, then the sources), then starts the stream, whose
        records are the progress messages and whose summary is the
        result."""
        if on_progress is not None and not callable(on_progress):
            raise TypeError(f"on_progress must be callable, not "
                            f"{type(on_progress).__name__}")
        params = estimate_params(sets, sample_rate, namespace, fingerprint)
        pieces = self._dataset_pieces(sources, message_size)
        return self._stream(ESTIMATE, params, pieces, timeout)

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

