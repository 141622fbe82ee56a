"""Translation between the client's plain values and the protobuf messages,
shared by Client and AsyncClient."""

from __future__ import annotations

import dataclasses
from typing import Any, Dict, Iterable, Iterator, List, Mapping, Optional, Tuple, Union

from chunkd_client import _tables
from chunkd_client._proto.chunkd.v1 import chunkd_pb2 as pb
from chunkd_client.records import (
    AlgorithmInfo, ChunkRecord, ChunkSummary, DedupRecord, DedupSummary, EstimateProgress,
    EstimateResult, IndexCost, ParamRange, ServerInfo, SetEstimate, SizeBucket,
)

#: Chunking algorithms by the names chunkctl and the metrics use: the enum
#: values of chunkd's table (_tables, generated from
#: proto/chunkd/v1/tables.json), which are the proto's.
ALGORITHMS: Dict[str, int] = dict(_tables.ALGORITHM_VALUES)
#: The ChunkingParams fields each algorithm takes, in the API's order. The
#: server refuses any other field that is set (INVALID_ARGUMENT naming it);
#: ``seed`` 0 and an unset ``seq_mode`` count as unset.
ALGORITHM_PARAMETERS: Dict[str, Tuple[str, ...]] = {
    name: tuple(ranges) for name, ranges in _tables.RANGES.items()
}
#: Fingerprint algorithms by name.
FINGERPRINTS = {
    "sha256": pb.FINGERPRINT_ALGORITHM_SHA256,
    "xxh128": pb.FINGERPRINT_ALGORITHM_XXH128,
    "none": pb.FINGERPRINT_ALGORITHM_NONE,
}
#: SeqCDC modes by name.
SEQ_MODES: Dict[str, int] = dict(_tables.PARAMETER_NAMES["seq_mode"])
#: RapidCDC hint acceptance tests of Dedup by name (``DedupParams.hints``).
HINTS = {
    "off": pb.HINT_TEST_OFF,
    "ff": pb.HINT_TEST_FF,
    "ff_mt": pb.HINT_TEST_FF_MT,
    "ff_rwt": pb.HINT_TEST_FF_RWT,
    "ff_rwt_fpt": pb.HINT_TEST_FF_RWT_FPT,
}
#: Most fingerprints FindMissing accepts in one request.
FIND_MISSING_BATCH = 10000
#: Most fingerprints Release accepts in one request.
RELEASE_BATCH = 10000
#: Default size of the data field of one request (the server's default limit
#: is 4 MiB).
DEFAULT_MESSAGE_SIZE = 1 << 20

_NAMES_OF_FINGERPRINTS = {v: k for k, v in FINGERPRINTS.items()}
_NAMES_OF_ALGORITHMS = {v: k for k, v in ALGORITHMS.items()}
_NAMES_OF_SEQ_MODES = {v: k for k, v in SEQ_MODES.items()}


def enum_value(kind: str, value: Union[str, int], names: Mapping[str, int]) -> Any:
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


@dataclasses.dataclass(frozen=True)
class ChunkingParams:
    """How the server cuts a stream into chunks: the fields of chunkd's
    ``ChunkingParams`` message, for ``Client.chunk`` and ``dedup`` (and
    their ``AsyncClient`` twins)::

        params = ChunkingParams("fastcdc", min_size=4096, avg_size=16384,
                                max_size=65536)
        records, summary = client.chunk_all("disk.img", params=params)

    ``algorithm`` and ``seq_mode`` take a name ("fastcdc", "increasing",
    ...; case-insensitive) or the raw enum value; an unknown name raises
    ValueError here. A field left ``None`` is not sent, so the server
    applies the algorithm's default (see ``server_info()``); ``seed`` 0 is
    the same as unset. Each algorithm takes only some fields
    (``ALGORITHM_PARAMETERS``; e.g. fastcdc min/avg/max_size,
    normalization_level and seed, fixed avg_size only). The values are
    passed on as they are: the server validates them and refuses a field the
    algorithm does not take with INVALID_ARGUMENT naming it.
    """

    algorithm: Union[str, int] = "fastcdc"
    min_size: Optional[int] = None
    avg_size: Optional[int] = None
    max_size: Optional[int] = None
    #: fastcdc's normalization level, 0..3.
    normalization_level: Optional[int] = None
    #: fastcdc's Gear table seed.
    seed: int = 0
    #: seqcdc: "increasing" or "decreasing".
    seq_mode: Union[str, int, None] = None
    seq_length: Optional[int] = None
    skip_trigger: Optional[int] = None
    skip_size: Optional[int] = None
    #: repmaxcdc: bytes past min_size searched for the best cut.
    horizon_size: Optional[int] = None
    #: rabin: the irreducible polynomial of degree 53 (e.g. a restic
    #: repository's, from its config).
    polynomial: Optional[int] = None

    def __post_init__(self) -> None:
        enum_value("algorithm", self.algorithm, ALGORITHMS)
        if self.seq_mode is not None:
            enum_value("seq_mode", self.seq_mode, SEQ_MODES)


#: The names of the ChunkingParams fields, which ``chunk``, ``dedup`` and
#: ``chunking_params`` also take as keywords.
CHUNKING_FIELDS = tuple(f.name for f in dataclasses.fields(ChunkingParams))
#: The fields that are set in the message only when given (not None).
_OPTIONAL_FIELDS = tuple(
    f for f in CHUNKING_FIELDS if f not in ("algorithm", "seed", "seq_mode")
)


def chunking_message(params: ChunkingParams) -> pb.ChunkingParams:
    """The ``ChunkingParams`` message of ``params``: only the fields given are
    set (``seed`` 0 is unset)."""
    message = pb.ChunkingParams(
        algorithm=enum_value("algorithm", params.algorithm, ALGORITHMS),
        seed=params.seed,
    )
    if params.seq_mode is not None:
        message.seq_mode = enum_value("seq_mode", params.seq_mode, SEQ_MODES)
    for field in _OPTIONAL_FIELDS:
        value = getattr(params, field)
        if value is not None:
            setattr(message, field, value)
    return message


def chunking_params(
    algorithm: Union[str, int] = "fastcdc", **fields: Any
) -> pb.ChunkingParams:
    """Builds the ``ChunkingParams`` message; ``fields`` are the other fields
    of the ``ChunkingParams`` dataclass (``min_size=4096``, ...), and ``None``
    leaves a field unset so that the server applies the algorithm's default
    (see ``server_info()``).

    Only the fields given are set (``seed`` 0 is unset). Each algorithm
    takes only some of them (``ALGORITHM_PARAMETERS``): the server validates
    the values and refuses a field the algorithm does not use with
    INVALID_ARGUMENT naming it.
    """
    return chunking_message(ChunkingParams(algorithm, **fields))


def chunking_of(
    params: Optional[ChunkingParams], fields: Mapping[str, Any]
) -> ChunkingParams:
    """The chunking parameters of a call given either ``params`` or the
    ChunkingParams fields as keywords; TypeError when both are given."""
    if params is None:
        return ChunkingParams(**fields)
    if fields:
        raise TypeError(
            f"give params or the chunking keywords ({', '.join(fields)}), not both"
        )
    if not isinstance(params, ChunkingParams):
        raise TypeError(f"params must be a ChunkingParams, not {type(params).__name__}")
    return params


def chunk_params(
    fingerprint: Union[str, int], params: Optional[ChunkingParams] = None, **fields: Any
) -> pb.ChunkParams:
    """The first Chunk request's params: ``params`` or the ChunkingParams
    ``fields`` (see chunking_of)."""
    return pb.ChunkParams(
        chunking=chunking_message(chunking_of(params, fields)),
        fingerprint=enum_value("fingerprint", fingerprint, FINGERPRINTS),
    )


def dedup_params(
    namespace: str,
    fingerprint: Union[str, int],
    stream_id: str = "",
    hints: Union[str, int, None] = None,
    params: Optional[ChunkingParams] = None,
    **fields: Any,
) -> pb.DedupParams:
    """The first Dedup request's params; ``params`` or ``fields`` as for
    chunk_params.

    ``hints`` is a name of HINTS (case-insensitive) or the raw ``HintTest``
    value; ``None`` or "" leaves the field unset (the server's default).
    An unknown name raises ValueError here, before any RPC.
    """
    message = pb.DedupParams(
        chunking=chunking_message(chunking_of(params, fields)),
        fingerprint=enum_value("fingerprint", fingerprint, FINGERPRINTS),
        namespace=namespace,
        stream_id=stream_id,
    )
    if hints is not None and hints != "":
        message.hints = enum_value("hints", hints, HINTS)
    return message


def chunk_record(r: "pb.ChunkRecord") -> ChunkRecord:
    return ChunkRecord(r.offset, r.length, r.fingerprint)


def dedup_record(r: "pb.DedupRecord") -> DedupRecord:
    return DedupRecord(r.offset, r.length, r.fingerprint, r.is_new)


def chunk_summary(s: "pb.ChunkSummary") -> ChunkSummary:
    return ChunkSummary(s.total_bytes, s.total_chunks)


def dedup_summary(s: "pb.DedupSummary") -> DedupSummary:
    return DedupSummary(
        s.total_bytes,
        s.total_chunks,
        s.unique_bytes,
        s.unique_chunks,
        hints_tried=s.hints_tried,
        hints_accepted=s.hints_accepted,
        hints_rejected=s.hints_rejected,
        hint_skipped_bytes=s.hint_skipped_bytes,
    )


def chunking_of_message(m: "pb.ChunkingParams") -> ChunkingParams:
    """The ChunkingParams of a message, with the algorithm and seq_mode by
    name (their raw values when unknown) and the unset fields None."""
    fields = {f: getattr(m, f) for f in _OPTIONAL_FIELDS if m.HasField(f)}
    seq_mode: Union[str, int, None] = None
    if m.seq_mode:
        seq_mode = _NAMES_OF_SEQ_MODES.get(m.seq_mode, m.seq_mode)
    return ChunkingParams(_NAMES_OF_ALGORITHMS.get(m.algorithm, m.algorithm),
                          seed=m.seed, seq_mode=seq_mode, **fields)


def estimate_progress(p: "pb.EstimateProgress") -> EstimateProgress:
    return EstimateProgress(p.bytes, p.files)


def set_estimate(s: "pb.SetEstimate") -> SetEstimate:
    """The plain form of one set's estimate."""
    return SetEstimate(
        label=s.label, chunking=chunking_of_message(s.chunking), bytes=s.bytes,
        chunks=s.chunks, unique_chunks=s.unique_chunks, unique_bytes=s.unique_bytes,
        dedup_ratio=s.dedup_ratio,
        histogram=tuple(SizeBucket(b.lower_bound, b.chunks, b.bytes) for b in s.histogram),
        mean_chunk_size=s.mean_chunk_size, min_chunk_size=s.min_chunk_size,
        p50_chunk_size=s.p50_chunk_size, p90_chunk_size=s.p90_chunk_size,
        p99_chunk_size=s.p99_chunk_size, max_chunk_size=s.max_chunk_size,
        sampled=s.sampled, sampled_unique_chunks=s.sampled_unique_chunks,
        ratio_low=s.ratio_low, ratio_high=s.ratio_high,
        namespace_bytes=s.namespace_bytes if s.HasField("namespace_bytes") else None,
        namespace_chunks=s.namespace_chunks if s.HasField("namespace_chunks") else None,
        index_costs=tuple(IndexCost(c.backend, c.entries, c.bytes, c.medium)
                          for c in s.index_costs),
    )


def estimate_result(r: "pb.EstimateResult") -> EstimateResult:
    """The plain form of an Estimate's result."""
    return EstimateResult(
        sets=tuple(set_estimate(s) for s in r.sets), total_bytes=r.total_bytes,
        files=r.files, sample_rate=r.sample_rate,
        fingerprint=_NAMES_OF_FINGERPRINTS.get(r.fingerprint, f"unknown({r.fingerprint})"),
    )


def _param_range(r: "pb.ParamRange") -> ParamRange:
    return ParamRange(r.min, r.max, r.default_value)


def _param_range_if_set(info: "pb.AlgorithmInfo", field: str) -> Optional[ParamRange]:
    """The range of an algorithm-specific parameter, None where the
    algorithm does not take it (the server sends it empty)."""
    if not info.HasField(field):
        return None
    r = _param_range(getattr(info, field))
    return None if r == ParamRange(0, 0, 0) else r


def server_info(r: "pb.GetServerInfoResponse") -> ServerInfo:
    """The plain form of a GetServerInfo response."""
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
                horizon_size=_param_range_if_set(a, "horizon_size"),
                polynomial=_param_range_if_set(a, "polynomial"),
                backend=a.backend,
                backend_threads=a.backend_threads,
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


def find_missing_requests(
    namespace: str, fingerprints: Iterable[bytes]
) -> Iterator["pb.FindMissingRequest"]:
    """The FindMissing requests for ``fingerprints``, FIND_MISSING_BATCH at a
    time."""
    for part in batches([bytes(f) for f in fingerprints]):
        yield pb.FindMissingRequest(namespace=namespace, fingerprints=part)


def release_requests(
    namespace: str,
    fingerprints: List[bytes],
    fingerprint: Union[str, int],
    request_id: str,
) -> Iterator["pb.ReleaseRequest"]:
    """The Release requests for ``fingerprints``, RELEASE_BATCH at a time.

    One request carries ``request_id`` itself; a release split over several
    numbers them ``request_id.0``, ``request_id.1``, ... (as the Go client
    does), so that each is applied once however often it is sent.
    """
    algorithm = enum_value("fingerprint", fingerprint, FINGERPRINTS)
    parts = list(batches(fingerprints, RELEASE_BATCH))
    for number, part in enumerate(parts):
        yield pb.ReleaseRequest(
            namespace=namespace,
            fingerprints=part,
            fingerprint=algorithm,
            request_id=request_id if not request_id or len(parts) == 1
            else f"{request_id}.{number}",
        )


def batches(items: List[bytes], size: int = FIND_MISSING_BATCH) -> Iterator[List[bytes]]:
    """``items`` in slices of ``size``; one empty slice for an empty list, so
    that the namespace is still checked by the server."""
    for start in range(0, max(len(items), 1), size):
        yield items[start : start + size]
