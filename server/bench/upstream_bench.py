#!/usr/bin/env python3
"""chunkd's algorithms that match an upstream Go module (the table's
"upstream" rows, proto/chunkd/v1/tables.json) beside those modules, on the
same bytes, in the same run.

    upstream_bench.py --upstream-chunk build/tools/bin/upstream-chunk \\
        --chunkctl build/clients/cli/chunkctl --dir build/bench \\
        [--size BYTES] [--seed N] [--repeat N] [--seconds S] [--threads 1,2] \\
        [--algorithms A,B] [--markdown OUT.md]

Writes --size bytes of seeded random data (Python's random.Random(seed), 16
MiB at a time) to a file under --dir, once per size and seed, then per
algorithm, at its defaults (the upstream modules' own, as the table declares
them):

- `upstream-chunk -bench -repeat N FILE`: the Go module chunking the file
  from memory, the fastest of N runs (one thread: the modules are serial);
- `chunkctl bench --input FILE --algorithm A --threads 1,2`: chunkd's scalar
  reference and every backend on each thread count, fastest runs within
  --seconds, with the memory-read ceiling on as many threads.

It prints and writes (--markdown) one table: upstream GB/s; chunkd's
reference and its fastest backend on each thread count; their ratios to
upstream; the ceiling. The chunk counts of both sides must agree, and chunkd's
fast paths must equal its reference (chunkctl bench fails otherwise): any
difference fails the run (exit status 1) after the table, which marks it,
and keeps --markdown unwritten, so that a fast wrong answer never passes for
a result. Standard library only.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import subprocess
import sys
from pathlib import Path
from typing import Dict, List, NamedTuple, Optional, Sequence

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tools"))
import gen_tables  # noqa: E402  (tools/gen_tables.py: reads the table)


def human(n: int) -> str:
    """262144 -> "256 KiB"."""
    for unit, size in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size and n % size == 0:
            return f"{n // size} {unit}"
    return str(n)


def describe(row: dict) -> str:
    """An algorithm's defaults as the report shows them: "min 256 KiB,
    horizon 2 MiB"."""
    parts = []
    for name, (_, _, default) in row["parameters"].items():
        value = f"0x{default:X}" if name == "polynomial" else human(default)
        parts.append(f"{name.replace('_size', '')} {value}")
    return ", ".join(parts)


_TABLE = gen_tables.load()
ALGORITHMS = tuple(a["name"] for a in _TABLE["algorithms"] if "upstream" in a)
#: The defaults both sides use, as the table shows them.
PARAMETERS = {a["name"]: describe(a) for a in _TABLE["algorithms"] if "upstream" in a}
PIECE = 16 << 20
#: Generous: the scalar reference on 4 GiB of data takes a while.
TIMEOUT = 3600

# "memory read (sum of 64-bit words): 1 thread 31.30 GB/s, 2 threads 54.90 GB/s"
CEILING_LINE = re.compile(r"^memory read \(sum of 64-bit words\): (.*)$", re.M)
CEILING_ITEM = re.compile(r"(\d+) threads? ([0-9.]+) GB/s")


class Row(NamedTuple):
    """One measurement row of `chunkctl bench`."""
    algorithm: str
    backend: str
    threads: int
    gbps: float
    chunks: int
    check: str


class ChunkdResult(NamedTuple):
    reference: Row
    rows: List[Row]
    ceiling: Dict[int, float]  # threads -> GB/s


def parse_chunkctl_bench(text: str) -> ChunkdResult:
    """The rows and the ceilings of `chunkctl bench` output. ValueError when
    a part is missing."""
    ceiling: Dict[int, float] = {}
    found = CEILING_LINE.search(text)
    if not found:
        raise ValueError("no memory-read line in chunkctl bench output")
    for threads, gbps in CEILING_ITEM.findall(found.group(1)):
        ceiling[int(threads)] = float(gbps)
    reference: Optional[Row] = None
    rows: List[Row] = []
    for line in text.splitlines():
        fields = line.split(None, 8)
        if len(fields) < 9 or fields[0] == "algorithm" or not fields[2].isdigit():
            continue
        try:
            row = Row(fields[0], fields[1], int(fields[2]), float(fields[4]),
                      int(fields[7]), fields[8])
        except ValueError:
            continue
        if row.backend == "reference":
            reference = row
        else:
            rows.append(row)
    if reference is None:
        raise ValueError("no reference row in chunkctl bench output")
    return ChunkdResult(reference, rows, ceiling)


def fastest(rows: Sequence[Row], threads: int) -> Optional[Row]:
    candidates = [r for r in rows if r.threads == threads]
    return max(candidates, key=lambda r: r.gbps) if candidates else None


def ratio(a: float, b: float) -> str:
    return "%.2fx" % (a / b) if b > 0 else "-"


def write_data(directory: Path, size: int, seed: int) -> Path:
    """The data file, written unless a file of that size is there."""
    path = directory / ("upstream-data-%d-seed%d.bin" % (size, seed))
    if path.is_file() and path.stat().st_size == size:
        return path
    rng = random.Random(seed)
    tmp = path.with_suffix(".tmp")
    with open(tmp, "wb") as f:
        left = size
        while left > 0:
            n = min(PIECE, left)
            f.write(rng.randbytes(n))
            left -= n
    os.replace(tmp, path)
    return path


def run_upstream(binary: str, algorithm: str, path: Path, repeat: int,
                 extra: Sequence[str] = ()) -> dict:
    """The JSON line of `BINARY -algorithm A [extra] -bench -repeat N FILE`:
    upstream-chunk's, or upstream-fastcdc's (tests/upstream-rust), which
    takes the same form."""
    out = subprocess.run(
        [binary, "-algorithm", algorithm, *extra, "-bench", "-repeat", str(repeat),
         str(path)],
        capture_output=True, text=True, check=True, timeout=TIMEOUT,
        stdin=subprocess.DEVNULL).stdout
    return json.loads(out)


def run_chunkd(chunkctl: str, algorithm: str, path: Path, threads: str,
               seconds: float, extra: Sequence[str] = ()) -> "tuple[ChunkdResult, int, str]":
    """The parsed output, chunkctl's exit status and its stderr. `extra`:
    more flags of chunkctl bench (e.g. --preset NAME)."""
    result = subprocess.run(
        [chunkctl, "bench", "--input", str(path), "--algorithm", algorithm,
         "--threads", threads, "--seconds", str(seconds), *extra],
        capture_output=True, text=True, timeout=TIMEOUT, stdin=subprocess.DEVNULL)
    try:
        return parse_chunkctl_bench(result.stdout), result.returncode, result.stderr
    except ValueError as e:
        raise RuntimeError("chunkctl bench --algorithm %s exited with %d: %s (%s)" % (
            algorithm, result.returncode, result.stderr.strip(), e)) from None


class Line(NamedTuple):
    """One algorithm's results, both sides."""
    algorithm: str
    upstream: dict
    chunkd: ChunkdResult
    problems: List[str]


def check(algorithm: str, upstream: dict, chunkd: ChunkdResult, status: int,
          stderr: str, upstream_name: str = "upstream") -> List[str]:
    """What is wrong with one algorithm's results, if anything: differing
    chunk counts (`upstream_name` names the other side), a failed chunkctl
    bench, fast paths that differ from chunkd's reference."""
    problems = []
    if upstream["chunks"] != chunkd.reference.chunks:
        problems.append("%s: %s cut %d chunks, chunkd %d" % (
            algorithm, upstream_name, upstream["chunks"], chunkd.reference.chunks))
    if status != 0:
        problems.append("%s: chunkctl bench failed: %s" % (
            algorithm, stderr.strip() or "exit %d" % status))
    for row in chunkd.rows:
        if row.check != "ok" and not row.check.startswith("ok;"):
            problems.append("%s %s %d thread%s: %s" % (
                algorithm, row.backend, row.threads,
                "" if row.threads == 1 else "s", row.check))
    return problems


def table(lines: Sequence[Line], size: int, seed: int, repeat: int,
          seconds: float, thread_counts: Sequence[int]) -> str:
    ceiling = lines[0].chunkd.ceiling if lines else {}
    out = [
        "chunkd vs the upstream Go modules: %d bytes of seeded random data "
        "(Python random.Random(%d)), the same file for both, each algorithm "
        "at its defaults. Upstream: the fastest of %d runs from memory, one "
        "thread. chunkd: the fastest run within %g s, its scalar reference "
        "and its fastest backend per thread count (named). Memory-read "
        "ceiling: %s." % (
            size, seed, repeat, seconds,
            ", ".join("%d thread%s %.2f GB/s" % (n, "" if n == 1 else "s", g)
                      for n, g in sorted(ceiling.items())) or "-"),
        "",
    ]
    header = ["algorithm", "parameters", "chunks", "upstream GB/s",
              "chunkd reference GB/s", "x upstream"]
    for n in thread_counts:
        header += ["chunkd %d thread%s GB/s" % (n, "" if n == 1 else "s"),
                   "x upstream", "of ceiling"]
    header.append("check")
    out.append("| " + " | ".join(header) + " |")
    out.append("|" + "---|" * len(header))
    for line in lines:
        up = line.upstream["gb_per_s"]
        ref = line.chunkd.reference.gbps
        cells = [line.algorithm, PARAMETERS.get(line.algorithm, "defaults"),
                 str(line.chunkd.reference.chunks), "%.2f" % up, "%.2f" % ref,
                 ratio(ref, up)]
        for n in thread_counts:
            best = fastest(line.chunkd.rows, n)
            if best is None:
                cells += ["-", "-", "-"]
                continue
            roof = line.chunkd.ceiling.get(n, 0.0)
            cells += ["%.2f (%s)" % (best.gbps, best.backend), ratio(best.gbps, up),
                      "%.0f%%" % (100 * best.gbps / roof) if roof > 0 else "-"]
        cells.append("ok" if not line.problems else "**MISMATCH**")
        out.append("| " + " | ".join(cells) + " |")
    problems = [p for line in lines for p in line.problems]
    if problems:
        out += ["", "Differences:", ""] + ["- " + p for p in problems]
    return "\n".join(out) + "\n"


def bench_arguments(description: str, binary_flag: str,
                    repeat_help: str, seconds_help: str) -> argparse.ArgumentParser:
    """The options upstream_bench and crate_bench share: the upstream
    binary (`binary_flag`), chunkctl, the data file's place, size and seed,
    the repetitions and seconds, the thread counts and --markdown."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument(binary_flag, required=True)
    parser.add_argument("--chunkctl", required=True)
    parser.add_argument("--dir", type=Path, required=True,
                        help="where the data file goes")
    parser.add_argument("--size", type=int, default=256 << 20)
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--repeat", type=int, default=3, help=repeat_help)
    parser.add_argument("--seconds", type=float, default=2.0, help=seconds_help)
    parser.add_argument("--threads", default="1,2")
    parser.add_argument("--markdown")
    return parser


def missing(prog: str, binary: str, needs: str, target: str) -> bool:
    """Whether `binary` is not built; if so says that `prog` skips."""
    if os.path.isfile(binary) and os.access(binary, os.X_OK):
        return False
    print("%s: skipped: %s is not built (it needs %s; `make %s` builds it)"
          % (prog, binary, needs, target))
    return True


def publish(prog: str, text: str, lines: Sequence, markdown: Optional[str],
            differ: str) -> int:
    """Prints `text` and writes it to `markdown` unless a line has problems
    (then 1: no table of wrong answers goes to the documentation)."""
    sys.stdout.write(text)
    if any(line.problems for line in lines):
        print("%s: %s; %s not written" % (prog, differ, markdown or "no table"),
              file=sys.stderr)
        return 1
    if markdown:
        with open(markdown, "w", encoding="utf-8") as f:
            f.write(text)
    return 0


def main(argv: Optional[List[str]] = None) -> int:
    parser = bench_arguments(__doc__.splitlines()[0], "--upstream-chunk",
                             "upstream runs; the fastest counts",
                             "chunkctl bench --seconds")
    parser.add_argument("--algorithms", default=",".join(ALGORITHMS))
    args = parser.parse_args(argv)
    if missing("upstream_bench", args.upstream_chunk, "Go", "bench-upstream"):
        return 0
    if args.size <= 0 or args.repeat <= 0:
        parser.error("--size and --repeat must be positive")
    thread_counts = [int(t) for t in args.threads.split(",")]
    args.dir.mkdir(parents=True, exist_ok=True)
    path = write_data(args.dir, args.size, args.seed)
    lines = []
    for algorithm in args.algorithms.split(","):
        # Side by side: upstream, then chunkd, per algorithm, so that load
        # from other work on the machine falls on both alike.
        upstream = run_upstream(args.upstream_chunk, algorithm, path, args.repeat)
        chunkd, status, stderr = run_chunkd(args.chunkctl, algorithm, path,
                                            args.threads, args.seconds)
        lines.append(Line(algorithm, upstream, chunkd,
                          check(algorithm, upstream, chunkd, status, stderr)))
        print("%s: upstream %.2f GB/s, chunkd reference %.2f GB/s" % (
            algorithm, upstream["gb_per_s"], chunkd.reference.gbps), file=sys.stderr)
    text = table(lines, args.size, args.seed, args.repeat, args.seconds, thread_counts)
    return publish("upstream_bench", text, lines, args.markdown, "the two sides differ")

if __name__ == "__main__":
    sys.exit(main())
