"""The chunkd client: a thin, typed wrapper over the generated gRPC stubs."""

from __future__ import annotations

import time
from typing import (
    Any, Callable, Generator, Iterable, List, Optional, Sequence, Tuple, TypeVar, Union,
)

import grpc

from chunkd_client._proto.chunkd.v1 import chunkd_pb2 as pb
from chunkd_client import _convert as convert
from chunkd_client._calls import ClientBase, OnReplay, StreamBase, rpc_errors
from chunkd_client._channel import DEFAULT_SERVICE_CONFIG, TlsOptions
from chunkd_client._convert import (
    ALGORITHM_PARAMETERS, ALGORITHMS, CHUNKING_FIELDS, DEFAULT_MESSAGE_SIZE,
    FIND_MISSING_BATCH, FINGERPRINTS, HINTS, RELEASE_BATCH, SEQ_MODES, ChunkingParams,
    chunking_params,
)
from chunkd_client._sets import MAX_SAMPLE_RATE, MAX_SETS, SetSpec, parse_set
from chunkd_client._sources import Source, dataset_pieces, source_pieces
from chunkd_client.records import (
    ChunkRecord, ChunkSummary, DedupRecord, DedupSummary, EstimateProgress, EstimateResult,
    ServerInfo,
)

__all__ = [
    "ALGORITHM_PARAMETERS",
    "ALGORITHMS",
    "DEFAULT_MESSAGE_SIZE",
    "DEFAULT_SERVICE_CONFIG",
    "FIND_MISSING_BATCH",
    "FINGERPRINTS",
    "HINTS",
    "MAX_SAMPLE_RATE",
    "MAX_SETS",
    "RELEASE_BATCH",
    "SEQ_MODES",
    "ChunkStream",
    "ChunkingParams",
    "Client",
    "DedupStream",
    "ResponseStream",
    "TlsOptions",
    "chunking_params",
    "parse_set",
]

R = TypeVar("R")
S = TypeVar("S")


class ResponseStream(StreamBase[R, S]):
    """The records of one Chunk or Dedup call, in stream order.

    Iterate it to receive the records as the server makes them final. When the
    iteration ends, ``summary`` holds the server's totals. Any failure is
    raised from the iteration as ``ChunkdError`` (or, when reading the source
    failed, as the original exception). A stream that ends OK but whose
    summary is missing or does not count every byte sent fails with
    ``DATA_LOSS`` instead of passing for success.

    Use it as a context manager (or call ``cancel()``) to abandon a stream
    early; ``collect()`` consumes it and returns ``(records, summary)``.
    Not thread-safe: one consumer.
    """

    def _start(self) -> None:
        self._generator: Generator[R, None, None] = self._generate()

    def __iter__(self) -> "ResponseStream[R, S]":
        return self

    def __next__(self) -> R:
        return next(self._generator)

    def __enter__(self) -> "ResponseStream[R, S]":
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.cancel()

    def collect(self) -> Tuple[List[R], S]:
        """Reads the remaining records; returns them with the summary."""
        records = list(self)
        return records, self.summary

    def cancel(self) -> None:
        """Abandons the call if it is still running (no effect otherwise);
        it is not replayed."""
        self._cancelled = True
        if self._summary is None:
            self._call.cancel()
        self._generator.close()

    def _generate(self) -> Generator[R, None, None]:
        while True:
            try:
                for response in self._call:
                    yield from self._records(response)
            except grpc.RpcError as e:
                delay = self._replay_delay(e)
                if delay is not None:
                    self._pause(delay)
                    self._replay()
                    continue
            self._finish()
            return

    def _pause(self, delay: float) -> None:
        """Waits ``delay`` seconds, then until the channel is ready (bounded,
        see REPLAY_CONNECT_WAIT)."""
        assert self._replays is not None
        time.sleep(delay)
        ready = grpc.channel_ready_future(self._replays.channel)
        try:
            ready.result(timeout=self._replays.connect_wait)
        except grpc.FutureTimeoutError:
            pass  # the replay fails, or not, on its own
        finally:
            ready.cancel()  # else it stays subscribed to the channel


#: The iterator returned by ``Client.chunk``.
ChunkStream = ResponseStream[ChunkRecord, ChunkSummary]
#: The iterator returned by ``Client.dedup``.
DedupStream = ResponseStream[DedupRecord, DedupSummary]


#: The chunking parameters ``chunk`` and ``dedup`` take as keywords: the
#: fields of ``ChunkingParams``.
CHUNKING_KEYWORDS = CHUNKING_FIELDS


class Client(ClientBase):
    """A connection to one chunkd server.

    Args:
        target: "host:port" or any gRPC target ("unix:/path", "dns:///h:p").
        tls: None or False for a plaintext channel; True for TLS verified
            against the system's roots; a ``TlsOptions`` for a private CA, a
            client certificate (mutual TLS) or a server name override; or
            ready-made ``grpc.ChannelCredentials``.
        token: a bearer token, sent as ``authorization: Bearer TOKEN`` with
            every call (servers started with ``--auth_tokens``).
        timeout: default deadline of every call in seconds, whole streams
            included; None means no deadline. Every method takes its own too.
        metadata: more metadata sent with every call.
        options: more grpc channel options; one named as a default replaces
            it (``grpc.service_config`` replaces ``service_config``).
        service_config: the gRPC service config of the channel, a mapping or
            a JSON string. None: ``DEFAULT_SERVICE_CONFIG``, round_robin
            over every address of the target (a ``dns:///`` name of several
            servers spreads the streams over them) and up to 5 attempts of
            GetServerInfo, FindMissing and Release on UNAVAILABLE (waits of
            up to 1, 3, 9 and 9 s, drawn at random: 11 s on average). ``{}``
            dials without one.

    Thread-safe: calls may run concurrently from several threads. Use it as a
    context manager or call ``close()``.
    """

    _channels = grpc
    _response_stream = ResponseStream
    _source_pieces = staticmethod(source_pieces)
    _dataset_pieces = staticmethod(dataset_pieces)

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        """Closes the channel; running calls are cancelled. Idempotent."""
        if self._close_once():
            self._channel.close()

    def chunk(self, source: Source, *, params: Optional[ChunkingParams] = None,
              fingerprint: Union[str, int] = "sha256",
              message_size: int = DEFAULT_MESSAGE_SIZE,
              timeout: Optional[float] = None, retries: int = 0,
              on_replay: Optional[OnReplay] = None,
              **chunking: Any) -> ChunkStream:
        """Cuts ``source`` into chunks on the server.

        ``source`` is a path, a bytes-like object, a binary file object or an
        iterable of bytes; it is streamed in messages of at most
        ``message_size`` bytes, never loaded whole (an iterable's pieces are
        sent as they come, split only when too long). ``params`` says how to
        cut it (a ``ChunkingParams``; fastcdc with the server's defaults when
        omitted); the fields of ``ChunkingParams`` may be given as keywords
        instead (``algorithm="crc32", avg_size=8192``), but not both.
        ``fingerprint`` is "sha256", "xxh128" or "none".

        Returns an iterator over ``ChunkRecord`` in stream order whose
        ``summary`` (a ``ChunkSummary``) is set once it is exhausted::

            stream = client.chunk("big.iso", params=ChunkingParams("fastcdc"))
            for record in stream:
                ...
            print(stream.summary.total_chunks)

        Errors are raised from the iteration as ``ChunkdError`` (a parameter
        the algorithm does not take: INVALID_ARGUMENT naming it). A
        ``timeout`` ends the call at its deadline even while ``source``
        blocks (a pipe that stalls): the read goes on in the background.

        ``retries`` (default 0, at most 100) sends the stream again, from the
        start of ``source``, up to that many more times when it fails with
        UNAVAILABLE, ABORTED, RESOURCE_EXHAUSTED, INTERNAL, CANCELLED (unless
        the caller cancelled: ``cancel()``, ``close()``) or, when there is a
        timeout, DEADLINE_EXCEEDED (each attempt gets the whole timeout):
        after 0.1 s, 0.2 s, 0.4 s ... (at most 2 s) and once the channel has
        reconnected (at most 20 s). ``source`` must be readable again: a
        path, a bytes-like object or a seekable file (seeked back to where it
        was when the call was made); anything else is a ValueError. The
        records arrive as they are made, each once: a replay yields only the
        records past the last one already yielded, after checking that it
        repeats those exactly (offsets, lengths, fingerprints); the summary
        is the replay's. A replay that cuts the source otherwise (the file
        changed) fails with DATA_LOSS, as does a summary that does not count
        the records yielded. ``on_replay(error, delay)``, when given, is
        called for each replay before its wait, from the iteration:
        ``error`` is the failure (a ``ChunkdError``) and ``delay`` the
        seconds of backoff about to be waited (e.g. to log "sending it again
        in 0.10 s"). An exception it raises ends the iteration. TypeError
        when it is not callable.
        """
        return self._chunk(source, params, fingerprint, message_size, timeout,
                           retries, on_replay, chunking)

    def chunk_all(
        self, source: Source, **kwargs: Any
    ) -> Tuple[List[ChunkRecord], ChunkSummary]:
        """``chunk(source, **kwargs).collect()``: every record and the summary."""
        with self.chunk(source, **kwargs) as stream:
            return stream.collect()

    def dedup(self, source: Source, *, namespace: str,
              params: Optional[ChunkingParams] = None,
              fingerprint: Union[str, int] = "sha256", stream_id: str = "",
              hints: Union[str, int, None] = None,
              message_size: int = DEFAULT_MESSAGE_SIZE,
              timeout: Optional[float] = None, retries: int = 0,
              on_replay: Optional[OnReplay] = None,
              **chunking: Any) -> DedupStream:
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

        ``hints`` picks the RapidCDC next-chunk acceptance test: "off",
        "ff", "ff_mt", "ff_rwt" or "ff_rwt_fpt" (case-insensitive), or the
        raw ``HintTest`` enum value. ``None`` or "" leaves it unset: the
        server then uses "ff_rwt_fpt" for fastcdc and "off" otherwise. An
        unknown name raises ValueError naming it before any RPC; a test other
        than "off" with a non-fastcdc algorithm is rejected by the server
        (ChunkdError, INVALID_ARGUMENT). "off" and "ff_rwt_fpt" give exactly
        the records of normal chunking. The summary reports ``hints_tried``,
        ``hints_accepted``, ``hints_rejected`` and ``hint_skipped_bytes``.

        ``retries`` and ``on_replay`` replay the stream as in ``chunk``;
        the stream then carries a ``stream_id`` (a random one unless given),
        so the reference counts end as after one clean run, and the server
        answers a replay as the first attempt was answered, ``is_new``
        included.
        """
        return self._dedup(source, namespace, params, fingerprint, stream_id, hints,
                           message_size, timeout, retries, on_replay, chunking)

    def dedup_all(
        self, source: Source, *, namespace: str, **kwargs: Any
    ) -> Tuple[List[DedupRecord], DedupSummary]:
        """``dedup(...).collect()``: every record and the summary."""
        with self.dedup(source, namespace=namespace, **kwargs) as stream:
            return stream.collect()

    def estimate(self, *sources: Source, sets: Sequence[SetSpec], sample_rate: int = 1,
                 namespace: Optional[str] = None,
                 fingerprint: Union[str, int, None] = None,
                 on_progress: Optional[Callable[[EstimateProgress], None]] = None,
                 message_size: int = DEFAULT_MESSAGE_SIZE,
                 timeout: Optional[float] = None) -> EstimateResult:
        """Estimates how the data set ``sources`` would deduplicate under each
        of ``sets``, in one pass over its bytes (docs/estimate.md); nothing
        is written to any index::

            result = client.estimate("a.tar", "b.tar", sets=[
                "fastcdc:min=4096,avg=16384,max=65536", "seqcdc:preset=seqcdc-16k"])
            for s in result.sets:
                print(s.label, s.dedup_ratio, s.unique_bytes)

        Each source is one file of the data set (a path, bytes-like object,
        binary file or iterable of bytes, as ``chunk`` takes); a path to a
        directory stands for every file under it, in sorted path order.
        Every set cuts each file on its own; the distinct chunks are counted
        over the whole data set. ``sets`` holds 1..MAX_SETS sets, each a
        string of the set syntax (``parse_set``, the labels as given) or a
        ``(label, ChunkingParams)`` pair; a bad one is a ValueError naming
        it, before any call.

        ``sample_rate`` N (1..MAX_SAMPLE_RATE) keeps 1 in N distinct chunks
        (those whose fingerprint falls in 1/N of the hash space), which
        bounds the server's memory; the unique counts are then estimates
        (sketches of every chunk, docs/estimate.md),
        with a 95 % interval of the ratio. ``namespace`` compares with that
        namespace's holdings, read only. ``fingerprint`` ("xxh128" or
        "sha256") defaults to xxh128, and to sha256 with a namespace.
        ``on_progress(EstimateProgress)`` is called, from this thread, for
        each progress message the server sends while it reads.
        ``message_size`` and ``timeout`` (the whole call's deadline) are as
        for ``chunk``; an estimate is not replayed.

        Returns an ``EstimateResult``. Errors as for ``chunk``, as
        ChunkdError: INVALID_ARGUMENT names the set and its parameter;
        RESOURCE_EXHAUSTED with reason STREAM_MEMORY when an exact estimate
        would keep more distinct chunks than the server allows a stream
        (sample). A result that does not count every byte sent fails with
        DATA_LOSS. An exception ``on_progress`` raises ends the call.
        """
        with self._estimate(sources, sets, sample_rate, namespace, fingerprint,
                            message_size, timeout, on_progress) as stream:
            for progress in stream:
                if on_progress is not None:
                    on_progress(progress)
            return stream.summary  # type: ignore[no-any-return]

    def find_missing(self, namespace: str, fingerprints: Iterable[bytes], *,
                     timeout: Optional[float] = None) -> List[bytes]:
        """The given fingerprints that ``namespace`` does not have, in order.

        Longer lists are sent in requests of FIND_MISSING_BATCH fingerprints;
        ``timeout`` applies to each request.
        """
        deadline = self._deadline(timeout)
        missing: List[bytes] = []
        for request in convert.find_missing_requests(namespace, fingerprints):
            response = self._unary(self._stub.FindMissing, request, deadline)
            missing.extend(response.missing_fingerprints)
        return missing

    def release(self, namespace: str, fingerprints: Iterable[bytes], *,
                fingerprint: Union[str, int] = "sha256", request_id: str = "",
                timeout: Optional[float] = None) -> List[int]:
        """Drops one reference per listed fingerprint from ``namespace``
        (e.g. when a backup that referenced the chunks is deleted); an entry
        whose count reaches zero is removed. Returns, in order, the count left
        per fingerprint (0: removed or absent).

        ``fingerprint`` names the algorithm the fingerprints were made with.
        ``request_id`` (1..64 characters of ``[A-Za-z0-9._-]``) makes a retry
        after a timeout or UNAVAILABLE apply once; without one the client
        makes a random one (gRPC retries Release on UNAVAILABLE). Longer
        lists are sent in requests of RELEASE_BATCH fingerprints, numbered
        ``request_id.0``, ``request_id.1``, ... (one request: ``request_id``).
        """
        deadline = self._deadline(timeout)
        counts: List[int] = []
        for request in self._release_requests(
            namespace, fingerprints, fingerprint, request_id
        ):
            response = self._unary(self._stub.Release, request, deadline)
            counts.extend(response.ref_counts)
        return counts

    def server_info(self, *, timeout: Optional[float] = None) -> ServerInfo:
        """The server's version, algorithms with their limits, and limits."""
        request = pb.GetServerInfoRequest()
        deadline = self._deadline(timeout)
        response = self._unary(self._stub.GetServerInfo, request, deadline)
        return convert.server_info(response)

    def _unary(self, method: Any, request: object, deadline: Optional[float]) -> Any:
        """The response of one unary call (ChunkdError when it fails)."""
        with rpc_errors():
            return method(request, timeout=deadline, metadata=self._metadata)
