"""Plain, immutable values returned by the client (no protobuf types)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Tuple


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
        for info in self.algorithms:
            if info.name == name:
                return info
        raise KeyError(name)
