"""What ``chunkd-client`` prints: the progress line, the dedup report lines,
the ``info`` text and JSON and the ``estimate`` tables (docs/cli.md)."""

from __future__ import annotations

import dataclasses
import json
import sys
import time
from typing import IO, Any, Dict, List, Optional, Sequence

from chunkd_client.records import (
    DedupSummary, EstimateResult, ParamRange, ServerInfo, SetEstimate,
)


class Progress:
    """A one-line progress bar on a terminal: bytes done, rate and ETA.

    Redraws at most ten times a second; ``total`` None (stdin) shows bytes
    and rate only. Inactive (prints nothing) when ``stream`` is None.
    """

    WIDTH = 24

    def __init__(
        self,
        stream: Optional[IO[str]],
        label: str,
        total: Optional[int],
        clock: Any = time.monotonic,
    ) -> None:
        self._stream = stream
        self._label = label
        self._total = total
        self._clock = clock
        self._start = clock()
        self._last_draw = float("-inf")
        self._done = 0

    def update(self, done: int) -> None:
        self._done = done
        now = self._clock()
        if now - self._last_draw >= 0.1:
            self._last_draw = now
            self._draw(now)

    def finish(self) -> None:
        if self._stream is not None:
            self._draw(self._clock())
            self._stream.write("\n")
            self._stream.flush()

    def note(self, text: str) -> None:
        """Prints ``text`` on a line of its own on stderr; an active bar is
        cleared first and drawn again below it."""
        if self._stream is None:
            print(text, file=sys.stderr, flush=True)
            return
        self._stream.write("\r\x1b[K" + text + "\n")
        self._draw(self._clock())

    def line(self, now: float) -> str:
        """The text of the bar at time ``now``."""
        elapsed = max(now - self._start, 1e-9)
        rate = self._done / elapsed
        parts = [self._label]
        if self._total:
            fraction = min(self._done / self._total, 1.0)
            filled = int(fraction * self.WIDTH)
            parts.append("[" + "#" * filled + "-" * (self.WIDTH - filled) + "]")
            parts.append(f"{fraction * 100:5.1f}%")
            parts.append(f"{human_bytes(self._done)}/{human_bytes(self._total)}")
        else:
            parts.append(human_bytes(self._done))
        parts.append(f"{human_bytes(rate)}/s")
        if self._total and rate > 0:
            parts.append("ETA " + clock_time(max(self._total - self._done, 0) / rate))
        return " ".join(parts)

    def _draw(self, now: float) -> None:
        if self._stream is None:
            return
        self._stream.write("\r\x1b[K" + self.line(now))
        self._stream.flush()


def human_bytes(n: float) -> str:
    """1536 -> "1.5 KiB"."""
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    raise AssertionError("unreachable")


def clock_time(seconds: float) -> str:
    """75 -> "1:15", 3725 -> "1:02:05"."""
    seconds = int(seconds + 0.5)
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


def compact(obj: Any) -> str:
    return json.dumps(obj, separators=(",", ":"))


def _ratio(total: int, unique: int) -> str:
    return "inf" if unique == 0 else f"{total / unique:.2f}"


def dedup_line(name: Optional[str], s: DedupSummary, running: DedupSummary,
                as_json: bool) -> str:
    """The report of one file (``name``), or of the total (``name`` None);
    ``running`` is the total so far, whose ratio the line shows."""
    if as_json:
        head: Dict[str, Any] = {"file": name} if name is not None else {"total": True}
        return compact({
            **head,
            "bytes": s.total_bytes, "unique_bytes": s.unique_bytes,
            "chunks": s.total_chunks, "unique_chunks": s.unique_chunks,
            "ratio": None if running.unique_bytes == 0
            else round(running.total_bytes / running.unique_bytes, 6),
            "hints_tried": s.hints_tried, "hints_accepted": s.hints_accepted,
            "hints_rejected": s.hints_rejected,
            "hint_skipped_bytes": s.hint_skipped_bytes,
        })
    line = (f"{'total' if name is None else name} bytes={s.total_bytes} "
            f"unique_bytes={s.unique_bytes} "
            f"chunks={s.total_chunks} unique_chunks={s.unique_chunks} "
            f"ratio={_ratio(running.total_bytes, running.unique_bytes)}")
    if s.hints_tried:
        line += (f" hints_tried={s.hints_tried} hints_accepted={s.hints_accepted} "
                 f"hints_rejected={s.hints_rejected} hint_skipped_bytes={s.hint_skipped_bytes}")
    return line


def added(a: DedupSummary, b: DedupSummary) -> DedupSummary:
    return DedupSummary(*(x + y for x, y in zip(dataclasses.astuple(a),
                                                 dataclasses.astuple(b))))


def info_text(info: ServerInfo) -> str:
    """The readable form of ``info``."""
    lines = [
        f"version: {info.version}",
        f"chunking backend: {info.chunking_backend}",
        f"index backend: {info.index_backend}",
        f"max message bytes: {info.max_message_bytes}",
        f"max in-flight bytes: {info.max_inflight_bytes}",
        f"fingerprints: {', '.join(info.fingerprints)}",
        "algorithms:",
    ]
    for a in info.algorithms:
        # A range with max 0 is a parameter the algorithm does not take.
        ranges = ", ".join(
            f"{name} {r.min}..{r.max} (default {r.default})"
            for name, r in (("min", a.min_size), ("avg", a.avg_size), ("max", a.max_size),
                            ("level", a.normalization_level), ("horizon", a.horizon_size))
            if r is not None and r.max != 0
        )
        if a.avg_size_power_of_two:
            ranges += ", avg a power of two"
        if a.polynomial is not None:
            r = a.polynomial
            ranges += (f", polynomial {r.min:#x}..{r.max:#x} (default {r.default:#x}),"
                       " irreducible")
        if a.backend:
            threads = "thread" if a.backend_threads == 1 else "threads"
            ranges += f"; backend {a.backend} ({a.backend_threads} {threads})"
        lines.append(f"  {a.name}: {ranges}")
    return "\n".join(lines) + "\n"


def _range(r: Optional[ParamRange]) -> Optional[Dict[str, int]]:
    return None if r is None else {"min": r.min, "max": r.max, "default": r.default}


def info_json(info: ServerInfo) -> Dict[str, Any]:
    """The JSON object of ``info`` (docs/cli.md, "info"): the keys of every
    client, a range the algorithm does not take as null (level, horizon,
    polynomial) or zeros (the sizes)."""
    return {
        "version": info.version,
        "chunking_backend": info.chunking_backend,
        "index_backend": info.index_backend,
        "max_message_bytes": info.max_message_bytes,
        "max_inflight_bytes": info.max_inflight_bytes,
        "fingerprints": list(info.fingerprints),
        "algorithms": [
            {"name": a.name, "backend": a.backend, "backend_threads": a.backend_threads,
             "min_size": _range(a.min_size), "avg_size": _range(a.avg_size),
             "max_size": _range(a.max_size),
             "avg_size_power_of_two": a.avg_size_power_of_two,
             "normalization_level": _range(a.normalization_level),
             "horizon_size": _range(a.horizon_size),
             "polynomial": _range(a.polynomial)}
            for a in info.algorithms
        ],
    }


#: The columns of estimate's first table; namespace_bytes is added with a
#: namespace.
ESTIMATE_COLUMNS = ("set", "bytes", "chunks", "unique_chunks", "unique_bytes",
                    "dedup_ratio", "ratio_interval", "mean_size", "p50", "p90", "p99")
#: The columns of estimate's second table, the index costs.
INDEX_COLUMNS = ("set", "index_entries", "memory_bytes", "rocksdb_disk_bytes",
                 "redis_memory_bytes")
#: The backends of INDEX_COLUMNS' byte columns, in their order.
_INDEX_BACKENDS = ("memory", "rocksdb", "redis")


def table(rows: Sequence[Sequence[str]]) -> List[str]:
    """``rows`` (the header first) as lines: columns two spaces apart, each
    as wide as its widest cell, the first left-aligned and the others
    right-aligned. Widths count UTF-8 bytes, as chunkctl and chunkd-go do."""
    widths = [max(len(row[i].encode()) for row in rows) for i in range(len(rows[0]))]

    def pad(cell: str, width: int) -> str:
        return " " * (width - len(cell.encode()))

    return ["  ".join([row[0] + pad(row[0], widths[0]),
                       *(pad(cell, w) + cell for cell, w in zip(row[1:], widths[1:]))])
            for row in rows]


def _estimate_row(s: SetEstimate, with_namespace: bool) -> List[str]:
    interval = s.ratio_interval
    row = [s.label, str(s.bytes), str(s.chunks), str(s.unique_chunks),
           str(s.unique_bytes), f"{s.dedup_ratio:.3f}",
           "-" if interval is None else f"{interval[0]:.3f}-{interval[1]:.3f}",
           f"{s.mean_chunk_size:.0f}", str(s.p50_chunk_size), str(s.p90_chunk_size),
           str(s.p99_chunk_size)]
    if with_namespace:
        row.append("-" if s.namespace_bytes is None else str(s.namespace_bytes))
    return row


def _index_row(s: SetEstimate) -> List[str]:
    costs = {c.backend: str(c.bytes) for c in s.index_costs}
    return [s.label, str(s.unique_chunks), *(costs.get(b, "-") for b in _INDEX_BACKENDS)]


def estimate_text(result: EstimateResult) -> str:
    """What ``estimate`` prints without --json (docs/cli.md): the table of
    the sets, the table of their index costs and the totals line."""
    with_namespace = any(s.namespace_bytes is not None for s in result.sets)
    header = [*ESTIMATE_COLUMNS, *(("namespace_bytes",) if with_namespace else ())]
    lines = table([header, *(_estimate_row(s, with_namespace) for s in result.sets)])
    lines.append("")
    lines += table([INDEX_COLUMNS, *(_index_row(s) for s in result.sets)])
    lines.append("")
    lines.append(f"{result.total_bytes} bytes in {result.files} files; sample 1 in "
                 f"{result.sample_rate}; fingerprint {result.fingerprint}")
    return "\n".join(lines) + "\n"


def estimate_json(result: EstimateResult) -> str:
    """What ``estimate --json`` prints (docs/cli.md): the object on one
    line, keys in their order, ", " and ": " between items, as chunkctl
    and chunkd-go print it."""
    return json.dumps(result.to_json()) + "\n"
