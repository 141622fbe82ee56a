#!/usr/bin/env python3
"""chunkd's fastcdc beside the Rust crate `fastcdc` 5.0.0, whose v2020 cut
points it reproduces, on the same bytes, in the same run.

    crate_bench.py --upstream-fastcdc build/tools/cargo/release/upstream-fastcdc \\
        --chunkctl build/clients/cli/chunkctl --dir build/bench \\
        [--size BYTES] [--seed N] [--repeat N] [--seconds S] [--rounds N] \\
        [--threads 1,2] [--params target,reapi] [--markdown OUT.md]

It writes --size bytes of seeded random data to a file under --dir (the file
of server/bench/upstream_bench.py, shared with `make bench-upstream`), and
for each parameter set (PARAM_SETS: the speed target's 4 / 16 / 64 KiB,
level 2, and REAPI's 128 KiB / 512 KiB / 2 MiB, level 2) runs:

- `upstream-fastcdc -bench` (tests/upstream-rust: the crate's
  `v2020::FastCDC` over the file in memory, one thread);
- `chunkctl bench --input FILE --algorithm fastcdc --threads 1,2` (with
  `--preset` for REAPI's set): chunkd's scalar reference and every backend
  on each thread count, with the memory-read ceiling on as many threads;
- `upstream-fastcdc FILE` and `chunkctl chunk --local --fingerprint none`:
  every cut point of both, compared byte for byte.

The two timings alternate in --rounds windows of --seconds / --rounds per
row (crate, chunkd, chunkd, crate, ...), so that load from other work on
the machine falls on both alike; each row keeps its fastest run.

It prints and writes (--markdown) a summary (the crate, chunkd's fastest
backend per thread count, their ratios, the ceiling) and every row. Cut
points that differ, chunk counts that differ, or chunkd's fast paths
differing from its reference fail the run (exit status 1) after the tables,
which say so, and keep --markdown unwritten. Standard library only.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path
from typing import Dict, List, NamedTuple, Optional, Sequence

sys.path.insert(0, str(Path(__file__).resolve().parent))
import upstream_bench  # noqa: E402  (server/bench/upstream_bench.py)
from upstream_bench import ChunkdResult, fastest, ratio  # noqa: E402

CRATE = "fastcdc 5.0.0"


class ParamSet(NamedTuple):
    label: str
    #: upstream-fastcdc's flags.
    crate: Sequence[str]
    #: chunkctl bench's: none for the benchmark's own fastcdc parameters.
    bench: Sequence[str]
    #: chunkctl chunk's.
    chunk: Sequence[str]


def _sizes(min_size: int, avg: int, max_size: int, level: int) -> List[str]:
    return ["min", str(min_size), "avg", str(avg), "max", str(max_size),
            "level", str(level)]


def _flags(prefix: str, words: Sequence[str]) -> List[str]:
    """["min", "4096", ...] as ["-min", "4096", ...] (prefix "-")."""
    return [prefix + w if i % 2 == 0 else w for i, w in enumerate(words)]


_TARGET = _sizes(4 << 10, 16 << 10, 64 << 10, 2)
_REAPI = _sizes(128 << 10, 512 << 10, 2 << 20, 2)
#: Every size even, as the crate requires.
PARAM_SETS: Dict[str, ParamSet] = {
    # chunkctl bench's fastcdc parameters (workload::BenchOptions): those of
    # the speed targets.
    "target": ParamSet("4 / 16 / 64 KiB, level 2", _flags("-", _TARGET), [],
                       _flags("--", _TARGET)),
    # REAPI's FAST_CDC_2020 defaults (--preset fastcdc-reapi).
    "reapi": ParamSet("128 KiB / 512 KiB / 2 MiB, level 2 (REAPI)", _flags("-", _REAPI),
                      ["--preset", "fastcdc-reapi"], ["--preset", "fastcdc-reapi"]),
}


def run_text(command: Sequence[str]) -> "tuple[Optional[str], str]":
    """(stdout, "") on success, (None, why) on failure."""
    result = subprocess.run(list(command), capture_output=True, text=True,
                            timeout=upstream_bench.TIMEOUT, stdin=subprocess.DEVNULL)
    if result.returncode != 0:
        return None, "%s exited with %d: %s" % (
            os.path.basename(command[0]), result.returncode, result.stderr.strip()[:500])
    return result.stdout, ""


def compare_cut_points(crate_bin: str, chunkctl: str, params: ParamSet,
                       path: Path) -> List[str]:
    """Every "offset,length" line of both sides: [] when they are equal,
    else what differs first."""
    crate, why = run_text([crate_bin, *params.crate, str(path)])
    if crate is None:
        return ["%s: %s" % (params.label, why)]
    chunkd, why = run_text([chunkctl, "chunk", "--local", "--fingerprint", "none",
                            "--algorithm", "fastcdc", *params.chunk, str(path)])
    if chunkd is None:
        return ["%s: %s" % (params.label, why)]
    want, got = crate.splitlines(), chunkd.splitlines()
    if not want:
        return ["%s: the crate printed no chunks" % params.label]
    for i, (w, g) in enumerate(zip(want, got)):
        if w != g:
            return ["%s: cut points differ at chunk %d: the crate %s, chunkd %s "
                    "(offset,length)" % (params.label, i, w, g)]
    if len(want) != len(got):
        return ["%s: the crate cut %d chunks, chunkd --local %d" % (
            params.label, len(want), len(got))]
    return []


class Line(NamedTuple):
    """One parameter set's results, both sides."""
    params: ParamSet
    crate: dict
    chunkd: ChunkdResult
    problems: List[str]


def threads_label(n: int) -> str:
    return "%d thread%s" % (n, "" if n == 1 else "s")


def of_ceiling(gbps: float, ceiling: Dict[int, float], n: int) -> str:
    roof = ceiling.get(n, 0.0)
    return "%.0f%%" % (100 * gbps / roof) if roof > 0 else "-"


def summary(lines: Sequence[Line], thread_counts: Sequence[int]) -> List[str]:
    header = ["parameters", "chunks", "crate GB/s"]
    for n in thread_counts:
        header += ["chunkd %s GB/s" % threads_label(n), "x crate"]
    header += ["ceiling GB/s (%s)" % ", ".join(threads_label(n) for n in thread_counts),
               "cut points"]
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for line in lines:
        crate = line.crate["gb_per_s"]
        cells = [line.params.label, str(line.chunkd.reference.chunks), "%.2f" % crate]
        for n in thread_counts:
            best = fastest(line.chunkd.rows, n)
            cells += (["-", "-"] if best is None else
                      ["%.2f (%s)" % (best.gbps, best.backend), ratio(best.gbps, crate)])
        cells.append(" / ".join("%.2f" % line.chunkd.ceiling.get(n, 0.0)
                                for n in thread_counts))
        cells.append("equal" if not line.problems else "**DIFFER**")
        out.append("| " + " | ".join(cells) + " |")
    return out


def detail(lines: Sequence[Line]) -> List[str]:
    header = ["parameters", "side", "threads", "GB/s", "x crate", "of ceiling"]
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for line in lines:
        crate = line.crate["gb_per_s"]
        ceiling = line.chunkd.ceiling
        rows = [("crate " + CRATE, 1, crate),
                ("chunkd reference", 1, line.chunkd.reference.gbps)]
        rows += [("chunkd " + r.backend, r.threads, r.gbps)
                 for r in sorted(line.chunkd.rows, key=lambda r: r.threads)]
        for side, n, gbps in rows:
            out.append("| %s | %s | %d | %.2f | %s | %s |" % (
                line.params.label, side, n, gbps, ratio(gbps, crate),
                of_ceiling(gbps, ceiling, n)))
    return out


def tables(lines: Sequence[Line], size: int, seed: int, repeat: int,
           seconds: float, rounds: int, thread_counts: Sequence[int]) -> str:
    out = [
        "chunkd's fastcdc vs the Rust crate %s (`v2020::FastCDC::with_level`, "
        "release build with LTO): %d bytes of seeded random data (Python "
        "random.Random(%d)), the same file for both. Each side runs in %d "
        "windows of %g s per row, alternating (crate, chunkd, chunkd, crate, "
        "...), and keeps its fastest run. Crate: over the bytes in memory, one "
        "thread, at least %d runs per window. chunkd: `chunkctl bench --input`, "
        "its fastest "
        "backend per thread count (named; every row below). Cut points: every "
        "boundary of `chunkctl chunk --local` against the crate's, in the same "
        "run. Memory-read ceiling: `chunkctl bench`'s, summing the data's 64-bit "
        "words." % (CRATE, size, seed, rounds, seconds / rounds, repeat),
        "",
    ]
    out += summary(lines, thread_counts)
    out += ["", "Every row:", ""]
    out += detail(lines)
    problems = [p for line in lines for p in line.problems]
    if problems:
        out += ["", "Differences:", ""] + ["- " + p for p in problems]
    return "\n".join(out) + "\n"


def merge(results: Sequence[ChunkdResult]) -> ChunkdResult:
    """Several runs of the same `chunkctl bench` as one: each row, the
    reference and each ceiling at its fastest; a row's check is "ok" only
    if every run's was."""
    reference = max((r.reference for r in results), key=lambda row: row.gbps)
    rows: Dict["tuple[str, int]", upstream_bench.Row] = {}
    for result in results:
        for row in result.rows:
            key = (row.backend, row.threads)
            best = rows.get(key)
            if best is None:
                rows[key] = row
                continue
            check = best.check if not best.check.startswith("ok") else row.check
            rows[key] = (row if row.gbps > best.gbps else best)._replace(check=check)
    ceiling: Dict[int, float] = {}
    for result in results:
        for n, gbps in result.ceiling.items():
            ceiling[n] = max(ceiling.get(n, 0.0), gbps)
    return ChunkdResult(reference, list(rows.values()), ceiling)


def measure(args: argparse.Namespace, params: ParamSet, path: Path) -> Line:
    # Side by side, per parameter set: --rounds windows of each side, in the
    # order crate, chunkd, chunkd, crate, crate, ... so that load from other
    # work on the machine falls on both alike; each side keeps its fastest.
    problems = compare_cut_points(args.upstream_fastcdc, args.chunkctl, params, path)
    window = "%.6f" % (args.seconds / args.rounds)
    crate_runs: List[dict] = []
    chunkd_runs: List[ChunkdResult] = []
    status, stderr = 0, ""
    for round_number in range(args.rounds):
        for side in ("crate", "chunkd") if round_number % 2 == 0 else ("chunkd", "crate"):
            if side == "crate":
                crate_runs.append(upstream_bench.run_upstream(
                    args.upstream_fastcdc, "fastcdc", path, args.repeat,
                    [*params.crate, "-seconds", window]))
                continue
            result, code, err = upstream_bench.run_chunkd(
                args.chunkctl, "fastcdc", path, args.threads, float(window), params.bench)
            chunkd_runs.append(result)
            if code != 0 and status == 0:
                status, stderr = code, err
    counts = sorted({run["chunks"] for run in crate_runs})
    if len(counts) > 1:
        problems.append("%s: the crate's runs cut %s chunks" % (
            params.label, " and ".join(map(str, counts))))
    crate = max(crate_runs, key=lambda run: run["gb_per_s"])
    chunkd = merge(chunkd_runs)
    problems += upstream_bench.check(params.label, crate, chunkd, status, stderr,
                                     upstream_name="the crate")
    print("%s: crate %.2f GB/s, chunkd reference %.2f GB/s" % (
        params.label, crate["gb_per_s"], chunkd.reference.gbps), file=sys.stderr)
    return Line(params, crate, chunkd, problems)


def main(argv: Optional[List[str]] = None) -> int:
    parser = upstream_bench.bench_arguments(
        __doc__.splitlines()[0], "--upstream-fastcdc",
        "crate runs at least per window; the fastest counts",
        "time per row of each side, over all rounds")
    parser.add_argument("--rounds", type=int, default=4,
                        help="windows per side, alternating")
    parser.add_argument("--params", default=",".join(PARAM_SETS),
                        help="parameter sets: %s" % ", ".join(PARAM_SETS))
    args = parser.parse_args(argv)
    if upstream_bench.missing("crate_bench", args.upstream_fastcdc, "cargo", "bench-crate"):
        return 0
    if args.size <= 0 or args.repeat <= 0 or args.rounds <= 0:
        parser.error("--size, --repeat and --rounds must be positive")
    if args.seconds / args.rounds < 1e-3:
        parser.error("--seconds: at least 1 ms per round")
    names = args.params.split(",")
    unknown = [n for n in names if n not in PARAM_SETS]
    if unknown:
        parser.error("--params: unknown %s; expected some of %s" % (
            ", ".join(unknown), ", ".join(PARAM_SETS)))
    thread_counts = [int(t) for t in args.threads.split(",")]
    args.dir.mkdir(parents=True, exist_ok=True)
    path = upstream_bench.write_data(args.dir, args.size, args.seed)
    lines = [measure(args, PARAM_SETS[name], path) for name in names]
    text = tables(lines, args.size, args.seed, args.repeat, args.seconds, args.rounds,
                  thread_counts)
    return upstream_bench.publish("crate_bench", text, lines, args.markdown,
                                  "chunkd and the crate differ")

if __name__ == "__main__":
    sys.exit(main())
