"""The chunkd client: a thin, typed wrapper over the generated gRPC stubs."""

from __future__ import annotations

import threading
from typing import (
    Any,
    Callable,
    Generator,
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

from chunkd_client._proto.chunkd.v1 import chunkd_pb2 as pb
from chunkd_client._proto.chunkd.v1 import chunkd_pb2_grpc as pb_grpc
from chunkd_client._sources import Source, iter_source
from chunkd_client.errors import ChunkdError
from chunkd_client.records import (
    AlgorithmInfo,
    ChunkRecord,
    ChunkSummary,
    DedupRecord,
    DedupSummary,
    ParamRange,
    ServerInfo,
)

#: Chunking algorithms by the names chunkctl and the metrics use.
ALGORITHMS = {
    "fastcdc": pb.ALGORITHM_FASTCDC,
    "crc32": pb.ALGORITHM_CRC32,
    "seqcdc": pb.ALGORITHM_SEQCDC,
    "fixed": pb.ALGORITHM_FIXED,
}
#: Fingerprint algorithms by name.
FINGERPRINTS = {
    "sha256": pb.FINGERPRINT_ALGORITHM_SHA256,
    "xxh128": pb.FINGERPRINT_ALGORITHM_XXH128,
    "none": pb.FINGERPRINT_ALGORITHM_NONE,
}
#: SeqCDC modes by name.
SEQ_MODES = {
    "increasing": pb.SEQ_CDC_MODE_INCREASING,
    "decreasing": pb.SEQ_CDC_MODE_DECREASING,
}
#: Most fingerprints FindMissing accepts in one request.
FIND_MISSING_BATCH = 10000
#: Most fingerprints Release accepts in one request.
RELEASE_BATCH = 10000
#: Default size of the data field of one request (the server's default limit
#: is 4 MiB).
DEFAULT_MESSAGE_SIZE = 1 << 20

_NAMES_OF_FINGERPRINTS = {v: k for k, v in FINGERPRINTS.items()}

R = TypeVar("R")
S = TypeVar("S")


def _enum_value(kind: str, value: Union[str, int], names: dict) -> Any:
    """The enum value for a name (case-insensitive) or a raw int, unchecked."""
    if isinstance(value, bool):
        raise TypeError(f"{kind} must be a name or an int, not bool")
    if isinstance(value, int):
        return value
    if isinstance(value, str):
        try:
            return names[value.lower()]
        except KeyError:
            raise ValueError(
                f"unknown {kind} {value!r}; expected one of {', '.join(names)}"
            ) from None
    raise TypeError(f"{kind} must be a name or an int, not {type(value).__name__}")


def chunking_params(
    algorithm: Union[str, int] = "fastcdc",
    *,
    min_size: Optional[int] = None,
    avg_size: Optional[int] = None,
    max_size: Optional[int] = None,
    normalization_level: Optional[int] = None,
    seed: int = 0,
    seq_mode: Union[str, int, None] = None,
    seq_length: Optional[int] = None,
    skip_trigger: Optional[int] = None,
    skip_size: Optional[int] = None,
) -> pb.ChunkingParams:
    """Builds the ``ChunkingParams`` message; ``None`` leaves a field unset so
    that the server applies the algorithm's default (see ``server_info()``).

    ``algorithm`` and ``seq_mode`` take a name ("fastcdc", "increasing", ...)
    or the raw enum value. The server validates the values.
    """
    params = pb.ChunkingParams(
        algorithm=_enum_value("algorithm", algorithm, ALGORITHMS), seed=seed
    )
    if seq_mode is not None:
        params.seq_mode = _enum_value("seq_mode", seq_mode, SEQ_MODES)
    for field, value in (
        ("min_size", min_size),
        ("avg_size", avg_size),
        ("max_size", max_size),
        ("normalization_level", normalization_level),
        ("seq_length", seq_length),
        ("skip_trigger", skip_trigger),
        ("skip_size", skip_size),
    ):
        if value is not None:
            setattr(params, field, value)
    return params


class _Requests:
    """The request iterator handed to grpcio.

    grpcio consumes it on its own thread and, when it raises, only cancels the
    call; the exception is kept here so that the caller sees it instead of a
    bare CANCELLED.
    """

    def __init__(
        self, first: Callable[[bytes], object], rest: Callable[[bytes], object],
        pieces: Iterator[bytes],
    ) -> None:
        self._first = first
        self._rest = rest
        self._pieces = pieces
        self.error: Optional[BaseException] = None

    def __iter__(self) -> Iterator[object]:
        try:
            first = next(self._pieces, b"")
            yield self._first(first)
            for piece in self._pieces:
                yield self._rest(piece)
        except Exception as e:  # handed to the caller by ResponseStream
            self.error = e
            raise


class ResponseStream(Generic[R, S]):
    """The records of one Chunk or Dedup call, in stream order.

    Iterate it to receive the records as the server makes them final. When the
    iteration ends, ``summary`` holds the server's totals. Any failure is
    raised from the iteration as ``ChunkdError`` (or, when reading the source
    failed, as the original exception).

    Use it as a context manager (or call ``cancel()``) to abandon a stream
    early; ``collect()`` consumes it and returns ``(records, summary)``.
    Not thread-safe: one consumer.
    """

    def __init__(
        self,
        call: grpc.Call,
        requests: _Requests,
        record: Callable[[Any], R],
        summary: Callable[[Any], S],
    ) -> None:
        self._call = call
        self._requests = requests
        self._make_record = record
        self._make_summary = summary
        self._summary: Optional[S] = None
        self._records: Generator[R, None, None] = self._generate()

    def __iter__(self) -> "ResponseStream[R, S]":
        return self

    def __next__(self) -> R:
        return next(self._records)

    def __enter__(self) -> "ResponseStream[R, S]":
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.cancel()

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

    def collect(self) -> Tuple[List[R], S]:
        """Reads the remaining records; returns them with the summary."""
        records = list(self)
        return records, self.summary

    def cancel(self) -> None:
        """Abandons the call if it is still running (no effect otherwise)."""
        if self._summary is None:
            self._call.cancel()
        self._records.close()

    def _generate(self) -> Generator[R, None, None]:
        try:
            for response in self._call:  # type: ignore[attr-defined]
                body = response.WhichOneof("body")
                if self._summary is not None:
                    raise self._protocol_error(f"{body} after the summary")
                if body == "batch":
                    for record in response.batch.chunks:
                        yield self._make_record(record)
                elif body == "summary":
                    self._summary = self._make_summary(response.summary)
                else:
                    raise self._protocol_error("a response without a body")
        except grpc.RpcError as e:
            if self._requests.error is not None:
                raise self._requests.error from None
            raise ChunkdError.from_rpc_error(e) from None
        if self._summary is None:
            raise self._protocol_error("the stream ended without a summary")

    def _protocol_error(self, what: str) -> ChunkdError:
        self._call.cancel()
        return ChunkdError(
            grpc.StatusCode.INTERNAL, f"protocol violation by the server: {what}"
        )


#: The iterator returned by ``Client.chunk``.
ChunkStream = ResponseStream[ChunkRecord, ChunkSummary]
#: The iterator returned by ``Client.dedup``.
DedupStream = ResponseStream[DedupRecord, DedupSummary]


def _chunk_record(r: "pb.ChunkRecord") -> ChunkRecord:
    return ChunkRecord(r.offset, r.length, r.fingerprint)


def _dedup_record(r: "pb.DedupRecord") -> DedupRecord:
    return DedupRecord(r.offset, r.length, r.fingerprint, r.is_new)


def _chunk_summary(s: "pb.ChunkSummary") -> ChunkSummary:
    return ChunkSummary(s.total_bytes, s.total_chunks)


def _dedup_summary(s: "pb.DedupSummary") -> DedupSummary:
    return DedupSummary(s.total_bytes, s.total_chunks, s.unique_bytes, s.unique_chunks)


def _param_range(r: "pb.ParamRange") -> ParamRange:
    return ParamRange(r.min, r.max, r.default_value)


class Client:
    """A connection to one chunkd server.

    ``Client("localhost:50051")`` opens an insecure channel; pass
    ``credentials`` for TLS. ``timeout`` (seconds) is the default deadline of
    every call, including whole streams; ``None`` means no deadline. Every
    method also takes its own ``timeout``. ``metadata`` is sent with every
    call (e.g. an auth token).

    Thread-safe: calls may run concurrently from several threads. Use it as a
    context manager or call ``close()``.
    """

    def __init__(
        self,
        target: str,
        *,
        credentials: Optional[grpc.ChannelCredentials] = None,
        timeout: Optional[float] = None,
        metadata: Sequence[Tuple[str, str]] = (),
        options: Sequence[Tuple[str, object]] = (),
    ) -> None:
        self.target = target
        self.timeout = timeout
        self._metadata = tuple(metadata)
        if credentials is None:
            self._channel = grpc.insecure_channel(target, options=list(options))
        else:
            self._channel = grpc.secure_channel(target, credentials, options=list(options))
        self._stub = pb_grpc.ChunkServiceStub(self._channel)
        self._closed = False
        self._lock = threading.Lock()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        """Closes the channel; running calls are cancelled. Idempotent."""
        with self._lock:
            if not self._closed:
                self._closed = True
                self._channel.close()

    @property
    def stub(self) -> pb_grpc.ChunkServiceStub:
        """The raw generated stub, for what the wrapper does not cover."""
        return self._stub

    def _deadline(self, timeout: Optional[float]) -> Optional[float]:
        if self._closed:
            raise ValueError("the client is closed")
        return self.timeout if timeout is None else timeout

    def chunk(
        self,
        source: Source,
        *,
        algorithm: Union[str, int] = "fastcdc",
        min_size: Optional[int] = None,
        avg_size: Optional[int] = None,
        max_size: Optional[int] = None,
        normalization_level: Optional[int] = None,
        seed: int = 0,
        seq_mode: Union[str, int, None] = None,
        seq_length: Optional[int] = None,
        skip_trigger: Optional[int] = None,
        skip_size: Optional[int] = None,
        fingerprint: Union[str, int] = "sha256",
        message_size: int = DEFAULT_MESSAGE_SIZE,
        timeout: Optional[float] = None,
    ) -> ChunkStream:
        """Cuts ``source`` into chunks on the server.

        ``source`` is a path, a bytes-like object, a binary file object or an
        iterable of bytes; it is streamed in messages of at most
        ``message_size`` bytes, never loaded whole (an iterable's pieces are
        sent as they come, split only when too long). Parameters left ``None``
        take the algorithm's defaults; ``fingerprint`` is "sha256", "xxh128"
        or "none".

        Returns an iterator over ``ChunkRecord`` in stream order whose
        ``summary`` (a ``ChunkSummary``) is set once it is exhausted::

            stream = client.chunk("big.iso", algorithm="fastcdc")
            for record in stream:
                ...
            print(stream.summary.total_chunks)

        Errors are raised from the iteration as ``ChunkdError``.
        """
        pieces = iter_source(source, message_size)
        params = pb.ChunkParams(
            chunking=chunking_params(
                algorithm,
                min_size=min_size,
                avg_size=avg_size,
                max_size=max_size,
                normalization_level=normalization_level,
                seed=seed,
                seq_mode=seq_mode,
                seq_length=seq_length,
                skip_trigger=skip_trigger,
                skip_size=skip_size,
            ),
            fingerprint=_enum_value("fingerprint", fingerprint, FINGERPRINTS),
        )
        requests = _Requests(
            lambda data: pb.ChunkRequest(params=params, data=data),
            lambda data: pb.ChunkRequest(data=data),
            pieces,
        )
        call = self._stub.Chunk(
            iter(requests), timeout=self._deadline(timeout), metadata=self._metadata
        )
        return ResponseStream(call, requests, _chunk_record, _chunk_summary)

    def chunk_all(
        self, source: Source, **kwargs: object
    ) -> Tuple[List[ChunkRecord], ChunkSummary]:
        """``chunk(source, **kwargs).collect()``: every record and the summary."""
        with self.chunk(source, **kwargs) as stream:  # type: ignore[arg-type]
            return stream.collect()

    def dedup(
        self,
        source: Source,
        *,
        namespace: str,
        algorithm: Union[str, int] = "fastcdc",
        min_size: Optional[int] = None,
        avg_size: Optional[int] = None,
        max_size: Optional[int] = None,
        normalization_level: Optional[int] = None,
        seed: int = 0,
        seq_mode: Union[str, int, None] = None,
        seq_length: Optional[int] = None,
        skip_trigger: Optional[int] = None,
        skip_size: Optional[int] = None,
        fingerprint: Union[str, int] = "sha256",
        stream_id: str = "",
        message_size: int = DEFAULT_MESSAGE_SIZE,
        timeout: Optional[float] = None,
    ) -> DedupStream:
        """Cuts ``source`` into chunks and records them in ``namespace``'s index.

        Like ``chunk``; the records are ``DedupRecord`` (with ``is_new``) and
        the summary a ``DedupSummary`` (total and unique bytes and chunks).
        ``namespace`` is 1..128 characters of ``[A-Za-z0-9._-]``; namespaces
        never share entries. ``fingerprint`` "none" is rejected by the server.

        ``stream_id`` (1..64 characters of ``[A-Za-z0-9._-]``, unique per
        logical stream, e.g. a UUID) makes the stream safe to retry: after a
        failure, sending the same bytes again with the same ``stream_id``
        (within 10 minutes) counts every reference exactly once and answers
        as a first successful run would have.
        """
        pieces = iter_source(source, message_size)
        params = pb.DedupParams(
            chunking=chunking_params(
                algorithm,
                min_size=min_size,
                avg_size=avg_size,
                max_size=max_size,
                normalization_level=normalization_level,
                seed=seed,
                seq_mode=seq_mode,
                seq_length=seq_length,
                skip_trigger=skip_trigger,
                skip_size=skip_size,
            ),
            fingerprint=_enum_value("fingerprint", fingerprint, FINGERPRINTS),
            namespace=namespace,
            stream_id=stream_id,
        )
        requests = _Requests(
            lambda data: pb.DedupRequest(params=params, data=data),
            lambda data: pb.DedupRequest(data=data),
            pieces,
        )
        call = self._stub.Dedup(
            iter(requests), timeout=self._deadline(timeout), metadata=self._metadata
        )
        return ResponseStream(call, requests, _dedup_record, _dedup_summary)

    def dedup_all(
        self, source: Source, *, namespace: str, **kwargs: object
    ) -> Tuple[List[DedupRecord], DedupSummary]:
        """``dedup(...).collect()``: every record and the summary."""
        with self.dedup(source, namespace=namespace, **kwargs) as stream:  # type: ignore[arg-type]
            return stream.collect()

    def find_missing(
        self,
        namespace: str,
        fingerprints: Iterable[bytes],
        *,
        timeout: Optional[float] = None,
    ) -> List[bytes]:
        """The given fingerprints that ``namespace`` does not have, in order.

        Longer lists are sent in requests of FIND_MISSING_BATCH fingerprints;
        ``timeout`` applies to each request.
        """
        deadline = self._deadline(timeout)
        fingerprints = [bytes(f) for f in fingerprints]
        missing: List[bytes] = []
        # One request even for an empty list, so that the namespace is checked.
        starts = range(0, max(len(fingerprints), 1), FIND_MISSING_BATCH)
        for start in starts:
            request = pb.FindMissingRequest(
                namespace=namespace,
                fingerprints=fingerprints[start : start + FIND_MISSING_BATCH],
            )
            try:
                response = self._stub.FindMissing(
                    request, timeout=deadline, metadata=self._metadata
                )
            except grpc.RpcError as e:
                raise ChunkdError.from_rpc_error(e) from None
            missing.extend(response.missing_fingerprints)
        return missing

    def release(
        self,
        namespace: str,
        fingerprints: Iterable[bytes],
        *,
        fingerprint: Union[str, int] = "sha256",
        request_id: str = "",
        timeout: Optional[float] = None,
    ) -> List[int]:
        """Drops one reference per fingerprint from ``namespace``'s index
        (an entry whose count reaches zero is removed) and returns the count
        left per fingerprint, in order (0: removed or absent).

        ``fingerprint`` names the algorithm the fingerprints come from. With
        ``request_id`` (1..64 characters of ``[A-Za-z0-9._-]``) a request that
        is sent again after a failure is applied once; longer lists are sent
        in requests of RELEASE_BATCH fingerprints, each with its own id
        derived from ``request_id``.
        """
        deadline = self._deadline(timeout)
        fingerprints = [bytes(f) for f in fingerprints]
        kind = _enum_value("fingerprint", fingerprint, FINGERPRINTS)
        counts: List[int] = []
        starts = range(0, max(len(fingerprints), 1), RELEASE_BATCH)
        for n, start in enumerate(starts):
            rid = request_id if not request_id or n == 0 else f"{request_id}.{n}"
            request = pb.ReleaseRequest(
                namespace=namespace,
                fingerprints=fingerprints[start : start + RELEASE_BATCH],
                fingerprint=kind,
                request_id=rid,
            )
            try:
                response = self._stub.Release(
                    request, timeout=deadline, metadata=self._metadata
                )
            except grpc.RpcError as e:
                raise ChunkdError.from_rpc_error(e) from None
            counts.extend(response.ref_counts)
        return counts

    def server_info(self, *, timeout: Optional[float] = None) -> ServerInfo:
        """The server's version, algorithms with their limits, and limits."""
        try:
            r = self._stub.GetServerInfo(
                pb.GetServerInfoRequest(),
                timeout=self._deadline(timeout),
                metadata=self._metadata,
            )
        except grpc.RpcError as e:
            raise ChunkdError.from_rpc_error(e) from None
        algorithms = []
        for a in r.algorithms:
            level: Optional[ParamRange] = None
            if a.HasField("normalization_level"):
                level = _param_range(a.normalization_level)
                if level == ParamRange(0, 0, 0):
                    level = None
            algorithms.append(
                AlgorithmInfo(
                    name=a.name,
                    algorithm=a.algorithm,
                    min_size=_param_range(a.min_size),
                    avg_size=_param_range(a.avg_size),
                    max_size=_param_range(a.max_size),
                    avg_size_power_of_two=a.avg_size_power_of_two,
                    normalization_level=level,
                )
            )
        return ServerInfo(
            version=r.version,
            algorithms=tuple(algorithms),
            fingerprints=tuple(
                _NAMES_OF_FINGERPRINTS.get(f, f"unknown({f})") for f in r.fingerprints
            ),
            chunking_backend=r.chunking_backend,
            index_backend=r.index_backend,
            max_message_bytes=r.max_message_bytes,
            max_inflight_bytes=r.max_inflight_bytes,
        )
