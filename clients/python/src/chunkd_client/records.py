"""Plain, immutable values returned by the client (no protobuf types)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Tuple, TypeVar

from chunkd_client import _tables

if TYPE_CHECKING:  # _convert imports this module
    from chunkd_client._convert import ChunkingParams


T = TypeVar("T")


def _find(items: Tuple[T, ...], attribute: str, value: str) -> T:
    """The first of ``items`` whose ``attribute`` is ``value``; KeyError if
    none is."""
    for item in items:
        if getattr(item, attribute) == value:
            return item
    raise KeyError(value)


@dataclass(frozen=True)
class _Span:
    """The place and fingerprint of one chunk, common to both records."""

    offset: int
    length: int
    fingerprint: bytes

    @property
    def end(self) -> int:
        """The offset one past the chunk's last byte."""
        return self.offset + self.length


@dataclass(frozen=True)
class ChunkRecord(_Span):
    """One chunk: bytes ``[offset, offset + length)`` of the stream.

    ``fingerprint`` is the digest of the chunk's bytes (32 bytes for sha256,
    16 for xxh128, empty for ``fingerprint="none"``).
    """


@dataclass(frozen=True)
class DedupRecord(_Span):
    """A chunk of a Dedup stream and whether the namespace had it before.

    ``is_new`` is True when this stream added the fingerprint to the
    namespace's index, False when it was already there (a duplicate).
    """

    is_new: bool


@dataclass(frozen=True)
class ChunkSummary:
    """Totals of a finished Chunk stream, sent by the server last."""

    total_bytes: int
    total_chunks: int


@dataclass(frozen=True)
class DedupSummary:
    """Totals of a finished Dedup stream, sent by the server last.

    The RapidCDC counters (0 when hints were off or the algorithm is not
    fastcdc): ``hints_tried`` counts the next-chunk hints the server tested,
    ``hints_accepted`` those that passed the acceptance test (the chunk was
    taken without scanning), ``hints_rejected`` those that failed (the bytes
    were cut normally), and ``hint_skipped_bytes`` the bytes of the accepted
    hinted chunks, which the chunker did not have to scan.
    """

    total_bytes: int
    total_chunks: int
    unique_bytes: int
    unique_chunks: int
    hints_tried: int = 0
    hints_accepted: int = 0
    hints_rejected: int = 0
    hint_skipped_bytes: int = 0

    @property
    def duplicate_bytes(self) -> int:
        """Bytes of the chunks the namespace already had."""
        return self.total_bytes - self.unique_bytes

    @property
    def dedup_ratio(self) -> float:
        """total_bytes / unique_bytes (``inf`` when nothing was new, 1.0 for
        an empty stream)."""
        if self.total_bytes == 0:
            return 1.0
        if self.unique_bytes == 0:
            return float("inf")
        return self.total_bytes / self.unique_bytes


@dataclass(frozen=True)
class ParamRange:
    """Allowed range and default of one parameter."""

    min: int
    max: int
    default: int


@dataclass(frozen=True)
class AlgorithmInfo:
    """What one chunking algorithm accepts.

    A size the algorithm does not take (seqcdc's ``avg_size``, fixed's
    ``min_size`` and ``max_size``, ...) is ``ParamRange(0, 0, 0)``;
    ``normalization_level`` is set for fastcdc only, ``horizon_size`` for
    repmaxcdc only, ``polynomial`` (its range: degree 53) for rabin only.
    ``backend`` is the stage-1 kernel the server cuts this algorithm with on
    ``backend_threads`` threads (its automatic choice, or the forced one);
    "" and 0 from a server that does not report it.
    """

    name: str
    algorithm: int
    min_size: ParamRange
    avg_size: ParamRange
    max_size: ParamRange
    avg_size_power_of_two: bool
    normalization_level: Optional[ParamRange]
    horizon_size: Optional[ParamRange] = None
    polynomial: Optional[ParamRange] = None
    backend: str = ""
    backend_threads: int = 0


@dataclass(frozen=True)
class ServerInfo:
    """What GetServerInfo reports about a server.

    ``fingerprints`` holds the names of the offered fingerprint algorithms
    ("sha256", "xxh128", "none"; unknown values as "unknown(N)").
    """

    version: str
    algorithms: Tuple[AlgorithmInfo, ...]
    fingerprints: Tuple[str, ...]
    chunking_backend: str
    index_backend: str
    max_message_bytes: int
    max_inflight_bytes: int

    def algorithm(self, name: str) -> AlgorithmInfo:
        """The entry for the algorithm called ``name``; KeyError if absent."""
        return _find(self.algorithms, "name", name)


@dataclass(frozen=True)
class EstimateProgress:
    """How far the server has read an Estimate stream: ``bytes`` received
    and cut so far, ``files`` ended so far."""

    bytes: int
    files: int


@dataclass(frozen=True)
class SizeBucket:
    """The chunks whose length is in ``[lower_bound, 2 * lower_bound)``
    (every copy counted) and their bytes."""

    lower_bound: int
    chunks: int
    bytes: int


@dataclass(frozen=True)
class IndexCost:
    """What an index of a set's unique chunks would take in one backend
    ("memory", "rocksdb" or "redis"): ``entries`` and the ``bytes`` they
    take on ``medium`` ("memory" or "disk")."""

    backend: str
    entries: int
    bytes: int
    medium: str


@dataclass(frozen=True)
class SetEstimate:
    """The estimate of one parameter set: the fields of the proto's
    ``SetEstimate`` (docs/estimate.md says how to read them).

    ``chunking`` is the chunking as run, every default filled in, with the
    algorithm and ``seq_mode`` by name. ``dedup_ratio`` is ``bytes /
    unique_bytes``. When ``sampled``, ``unique_chunks``, ``unique_bytes``
    (and so the ratio) and the namespace's holdings are estimates;
    ``bytes``, ``chunks``, the histogram and the sizes always count every
    chunk. ``namespace_bytes`` and
    ``namespace_chunks`` are None without a namespace.
    """

    label: str
    chunking: "ChunkingParams"
    bytes: int
    chunks: int
    unique_chunks: int
    unique_bytes: int
    dedup_ratio: float
    histogram: Tuple[SizeBucket, ...]
    mean_chunk_size: float
    min_chunk_size: int
    p50_chunk_size: int
    p90_chunk_size: int
    p99_chunk_size: int
    max_chunk_size: int
    sampled: bool
    sampled_unique_chunks: int
    ratio_low: float
    ratio_high: float
    namespace_bytes: Optional[int]
    namespace_chunks: Optional[int]
    index_costs: Tuple[IndexCost, ...]

    @property
    def ratio_interval(self) -> Optional[Tuple[float, float]]:
        """The 95 % confidence interval of ``dedup_ratio``, ``(low, high)``;
        None unless sampled with at least two distinct chunks in the sample."""
        if not self.sampled or self.ratio_high <= 0:
            return None
        return (self.ratio_low, self.ratio_high)

    def index_cost(self, backend: str) -> IndexCost:
        """The cost in ``backend``; KeyError when the server sent none."""
        return _find(self.index_costs, "backend", backend)

    def parameters(self) -> Dict[str, Any]:
        """The parameters of ``chunking`` the algorithm takes, by their proto
        names, as ``estimate --json`` shows them (``seq_mode`` by name)."""
        algorithm = self.chunking.algorithm
        taken = _tables.RANGES.get(algorithm, {}) if isinstance(algorithm, str) else {}
        values = {field: getattr(self.chunking, field) for field in taken}
        return {field: 0 if value is None else value for field, value in values.items()}

    def to_json(self) -> Dict[str, Any]:
        """The set's object of ``estimate --json`` (docs/cli.md), keys in
        their order, floats rounded to 6 decimals."""
        interval = self.ratio_interval
        return {
            "set": self.label,
            "algorithm": self.chunking.algorithm,
            "parameters": self.parameters(),
            "bytes": self.bytes, "chunks": self.chunks,
            "unique_bytes": self.unique_bytes, "unique_chunks": self.unique_chunks,
            "dedup_ratio": round(self.dedup_ratio, 6),
            "ratio_interval": None if interval is None
            else [round(interval[0], 6), round(interval[1], 6)],
            "sampled": self.sampled,
            "sampled_unique_chunks": self.sampled_unique_chunks,
            "histogram": [[b.lower_bound, b.chunks] for b in self.histogram],
            "histogram_bytes": [[b.lower_bound, b.bytes] for b in self.histogram],
            "mean_chunk_size": round(self.mean_chunk_size, 6),
            "chunk_sizes": {"min": self.min_chunk_size, "p50": self.p50_chunk_size,
                            "p90": self.p90_chunk_size, "p99": self.p99_chunk_size,
                            "max": self.max_chunk_size},
            "namespace_bytes": self.namespace_bytes,
            "namespace_chunks": self.namespace_chunks,
            "index": [{"backend": c.backend, "medium": c.medium, "entries": c.entries,
                       "bytes": c.bytes} for c in self.index_costs],
        }


@dataclass(frozen=True)
class EstimateResult:
    """The answer of a finished Estimate: one ``SetEstimate`` per parameter
    set in the request's order, the bytes and files of the data set (a file
    with no byte counts as none), the sampling rate used (1: exact) and the
    fingerprint ("xxh128" or "sha256")."""

    sets: Tuple[SetEstimate, ...]
    total_bytes: int
    files: int
    sample_rate: int
    fingerprint: str

    def set(self, label: str) -> SetEstimate:
        """The estimate of the set labelled ``label``; KeyError if absent."""
        return _find(self.sets, "label", label)

    def to_json(self) -> Dict[str, Any]:
        """The object ``estimate --json`` prints (docs/cli.md), keys in their
        order; ``json.dumps`` it, as ``chunkd-client plot`` reads it back."""
        sets: List[Dict[str, Any]] = [s.to_json() for s in self.sets]
        return {"sets": sets, "total_bytes": self.total_bytes, "files": self.files,
                "sample_rate": self.sample_rate, "fingerprint": self.fingerprint}
