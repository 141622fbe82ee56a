#!/usr/bin/env python3
"""Turns chunking_bench's JSON output into a Markdown table and a chart.

    report.py RESULTS.json --markdown results.md --png throughput.png

The table gives, per dataset, GB/s (10^9 bytes of input per second, wall
clock) for every algorithm x backend x threads, the ratio to the scalar
reference on one thread measured in the same run, and the fraction of the
memory-read ceiling (the sum64 loop over the same buffer on as many threads).
The chunking targets are checked at the top. The chart plots throughput
against threads, one line per backend, one panel per algorithm and dataset.

With --benchmark_repetitions, each figure is the best repetition (the least
disturbed by other work on the machine); the spread is shown too.

Benchmark names (see chunking_bench.cc):
    chunk/ALG/DATASET/BACKEND/STRATEGY/threads:N[/real_time]
    stage1/ALG/DATASET/BACKEND/block:BYTES/threads:1[/real_time]
    ceiling/KIND/DATASET/threads:N[/real_time]
"""

import argparse
import sys

from report_chart import chart
from report_data import (
    ALGORITHM_ORDER, AUTO, AUTO_TARGET, BACKEND_ORDER, DATASET_ORDER, REFERENCE,
    UNSUPPORTED, Tables, describe, fmt_rate, gbps, load, order)

ALL_STRATEGIES = ("auto", "two-stage", "sequential", "reference")


def target_rows(t, dataset):
    """The chunking targets: (target, fastest text, fastest ratio, auto text,
    required). "Fastest path" is the fastest of every strategy measured;
    the `auto` column is what FastChunks does by default."""
    rows = []

    def ratio(r, base):
        if r is None or base is None:
            return None
        return r.best / base.best

    def shown(r, base):
        value = ratio(r, base)
        return "—" if value is None else "%.2f× (%s)" % (value, describe(r))

    def add(text, best, best_base, auto, auto_base, required):
        rows.append((text, shown(best, best_base), ratio(best, best_base),
                     shown(auto, auto_base), required))

    for algorithm, required1, required2 in (("fastcdc", 3.0, 5.0),
                                            ("seqcdc", 2.5, None)):
        ref = t.reference(algorithm, dataset)
        add("%s fastest path, 1 thread ÷ scalar reference" % algorithm,
            t.fastest(algorithm, dataset, 1, ALL_STRATEGIES), ref,
            t.fastest(algorithm, dataset, 1), ref, required1)
        if required2 is not None:
            add("%s fastest path, 2 threads ÷ scalar reference" % algorithm,
                t.fastest(algorithm, dataset, 2, ALL_STRATEGIES), ref,
                t.fastest(algorithm, dataset, 2), ref, required2)
    ref = t.reference("crc32", dataset)

    def avx512(threads, strategies):
        best = None
        for s in strategies:
            r = t.get("crc32", dataset, "avx512", s, threads)
            if r is not None and (best is None or r.best > best.best):
                best = r
        return best

    one, two = avx512(1, ALL_STRATEGIES), avx512(2, ALL_STRATEGIES)
    auto1, auto2 = avx512(1, ("auto",)), avx512(2, ("auto",))
    add("crc32 avx512, 1 thread ÷ scalar reference", one, ref, auto1, ref, 4.0)
    add("crc32 avx512, 2 threads ÷ avx512 1 thread", two, one, auto2, auto1,
        1.8)
    return rows


def caches_line(caches):
    return "- Caches: " + ", ".join(
        "L%d %s %d KiB%s" % (c.get("level", 0), c.get("type", ""),
                            c.get("size", 0) // 1024,
                            " ×%d" % c["num_sharing"]
                            if c.get("num_sharing", 0) > 1 else "")
        for c in caches) + "."


def header(w, context):
    """The title, the machine and what the columns mean."""
    w("# chunkd chunking benchmarks")
    w("")
    w("Written by `server/bench/report.py` from the JSON of "
      "`server/bench/chunking_bench` (`make bench`).")
    w("")
    cpus = context.get("num_cpus", "?")
    mhz = context.get("mhz_per_cpu", "?")
    w("- Machine: %s CPUs at %s MHz; kernels this CPU supports: %s "
      "(best: %s); host %s, %s." % (
          cpus, mhz, context.get("chunkd_kernels_supported", "?"),
          context.get("chunkd_best_kernel", "?"),
          context.get("host_name", "?"), context.get("date", "?")))
    caches = context.get("caches", [])
    if caches:
        w(caches_line(caches))
    load = context.get("load_avg")
    if load:
        w("- Load average when the run started: %s." %
          ", ".join("%.2f" % x for x in load))
    size = context.get("chunkd_bytes_per_dataset")
    if size:
        w("- Input: %.0f MiB per dataset, seed %s. `random`: seeded random "
          "bytes; `versioned`: a base file and 7 versions with 100 "
          "inserts/deletes/overwrites of ~100 bytes each, concatenated." %
          (int(size) / 2**20, context.get("chunkd_seed", "?")))
    w("- Parameters: fastcdc min 4 KiB / avg 16 KiB / max 64 KiB, level 2; "
      "crc32 2 / 16 / 64 KiB; seqcdc the 16 KiB profile (`seqcdc-16k`); "
      "fixed 16 KiB.")
    w("- GB/s = 10^9 bytes of input per second of wall-clock time; the best "
      "of the repetitions, the worst in parentheses when it is more than 10 % "
      "lower. Every run's chunks were compared with the reference's; a "
      "mismatch shows as an error below, never as a number.")
    w("- `× ref` is the ratio to the scalar reference (`ReferenceChunks`) on "
      "one thread, `of ceiling` the fraction of the memory-read loop (sum of "
      "64-bit words) over the same buffer on as many threads.")
    w("- `fixed` reads no data (its cut points follow from the length "
      "alone), so its rows time only building the chunk list; they are "
      "there as a check, not as a speed.")
    w("")


def targets(w, t, dataset):
    w("## Targets — `%s`" % dataset)
    w("")
    w("| target | fastest path measured | required | | with `auto` |")
    w("|---|---|---|---|---|")
    for text, best, value, auto, required in target_rows(t, dataset):
        verdict = "—" if value is None else (
            "met" if value >= required else
            "**missed** (%.0f %% short)" % (100 * (1 - value / required)))
        w("| %s | %s | ≥ %.1f× | %s | %s |" % (text, best, required,
                                              verdict, auto))
    w("")


def ceilings_line(t, dataset):
    """The memory ceilings of `dataset` per thread count, or None."""
    ceilings = []
    for threads in t.threads():
        s = t.ceiling_rate(dataset, threads, "sum64")
        c = t.ceiling_rate(dataset, threads, "memcpy")
        if s is not None:
            ceilings.append("%d thread%s: read %.2f GB/s%s" % (
                threads, "" if threads == 1 else "s", gbps(s),
                "" if c is None else ", memcpy %.2f GB/s" % gbps(c)))
    if not ceilings:
        return None
    return "Memory ceiling — " + "; ".join(ceilings) + "."


def throughput_row(t, key, ref):
    r = t.chunk[key]
    _, algorithm, dataset, backend, strategy, threads = key
    strat = r.chosen or strategy
    if strategy == "auto" and r.chosen:
        strat = "auto → %s" % r.chosen
    if r.error is not None:
        return "| %s | %s | %s | %d | error | | | |" % (
            algorithm, backend, strat, threads)
    x_ref = "%.2f×" % (r.best / ref.best) if ref else "—"
    ceil = t.ceiling_rate(dataset, threads)
    frac = "%.0f %%" % (100 * r.best / ceil) if ceil else "—"
    return "| %s | %s | %s | %d | %s | %s | %s | %s |" % (
        algorithm, backend, strat, threads, fmt_rate(r), x_ref,
        frac, r.chunks if r.chunks is not None else "")


def throughput(w, t, dataset):
    w("## Throughput — `%s`" % dataset)
    w("")
    ceilings = ceilings_line(t, dataset)
    if ceilings:
        w(ceilings)
        w("")
    w("| algorithm | backend | strategy | threads | GB/s | × ref | "
      "of ceiling | chunks |")
    w("|---|---|---|---:|---:|---:|---:|---:|")
    for algorithm in t.algorithms(dataset):
        ref = t.reference(algorithm, dataset)
        for key in t.rows(algorithm, dataset, ("reference", "auto")):
            w(throughput_row(t, key, ref))
    w("")


def stage1_best(t, blocks, algorithm, dataset, backend):
    """The best stage-1 rate over the call lengths, or None."""
    rates = [r.best for b in blocks
             for r in [t.stage1.get(("stage1", algorithm, dataset,
                                     backend, b, 1))]
             if r is not None and r.error is None and r.best]
    return max(rates) if rates else None


def stage1_row(t, blocks, algorithm, dataset, backend):
    cells = []
    for b in blocks:
        r = t.stage1.get(("stage1", algorithm, dataset, backend, b, 1))
        cells.append("error" if r is None or r.error is not None
                     else fmt_rate(r))
    best = stage1_best(t, blocks, algorithm, dataset, backend)
    scalar = stage1_best(t, blocks, algorithm, dataset, "scalar")
    ref = t.reference(algorithm, dataset)
    ceil = t.ceiling_rate(dataset, 1)
    e2e = t.get(algorithm, dataset, backend, "auto", 1)
    return "| %s | %s | %s | %s | %s | %s | %s | %s |" % (
        dataset, algorithm, backend, " | ".join(cells),
        "%.2f×" % (best / scalar) if best and scalar else "—",
        "%.2f×" % (best / ref.best) if best and ref else "—",
        "%.0f %%" % (100 * best / ceil) if best and ceil else "—",
        fmt_rate(e2e) if e2e else "—")


def stage1(w, t):
    blocks = sorted({k[4] for k in t.stage1})
    w("## Stage 1 alone (one thread)")
    w("")
    w("The kernel's bitmaps for every byte of the buffer in calls of the "
      "given length, checked against the scalar kernel's; no stage 2. "
      "`× ref` sets the best call length against the whole reference "
      "chunker; `end to end` is the `auto` engine with the same kernel "
      "on one thread. End to end far below stage 1: stage 2 or the "
      "engine dominates; close to it: the kernel does; above it: the "
      "engine skips bytes (the sequential scan). A power-of-two call "
      "length much slower than the other points at cache-set aliasing "
      "between lanes spaced length / lanes apart.")
    w("")
    w("| dataset | algorithm | backend | " + " | ".join(
        "stage 1 GB/s, %s KiB calls" % (b // 1024) for b in blocks) +
      " | × scalar | × ref | of ceiling | end to end GB/s |")
    w("|---|---|---|" + "---:|" * (len(blocks) + 4))
    combos = sorted({k[1:4] for k in t.stage1}, key=lambda c: (
        order(c[1], DATASET_ORDER), order(c[0], ALGORITHM_ORDER),
        order(c[2], BACKEND_ORDER)))
    for algorithm, dataset, backend in combos:
        w(stage1_row(t, blocks, algorithm, dataset, backend))
    w("")


def forced_row(t, algorithm, dataset, backend, threads):
    two = t.chunk.get(("chunk", algorithm, dataset, backend,
                       "two-stage", threads))
    seq = t.chunk.get(("chunk", algorithm, dataset, backend,
                       "sequential", threads))
    ref = t.chunk.get(("chunk", algorithm, dataset,
                       REFERENCE, REFERENCE, threads))
    auto = t.chunk.get(("chunk", algorithm, dataset, backend,
                        "auto", threads))
    return "| %s | %s | %s | %d | %s | %s | %s | %s |" % (
        dataset, algorithm, backend, threads,
        fmt_rate(two) if two else "",
        fmt_rate(seq) if seq else "",
        fmt_rate(ref) if ref and ref.best else "",
        auto.chosen if auto else "")


def forced_strategies(w, t):
    w("## Each strategy forced (what `auto` chooses from)")
    w("")
    w("The reference strategy (the reference cutter, in speculative "
      "segments with several threads) uses no kernel; its column repeats "
      "on every backend's row.")
    w("")
    w("| dataset | algorithm | backend | threads | two-stage GB/s | "
      "sequential GB/s | reference GB/s | auto ran |")
    w("|---|---|---|---:|---:|---:|---:|---|")
    for dataset in t.datasets():
        for algorithm in t.algorithms(dataset):
            seen = set()
            for key in t.rows(algorithm, dataset,
                              ("two-stage", "sequential")):
                _, _, _, backend, _, threads = key
                if (backend, threads) in seen:
                    continue
                seen.add((backend, threads))
                w(forced_row(t, algorithm, dataset, backend, threads))
    w("")


def stream_chunker(w, t, streams):
    w("## StreamChunker (1 MiB pieces) against FastChunks (whole buffer)")
    w("")
    w("| dataset | algorithm | backend | threads | stream GB/s | "
      "FastChunks auto GB/s | stream ÷ FastChunks |")
    w("|---|---|---|---:|---:|---:|---:|")
    for key in sorted(streams, key=lambda k: (
            order(k[2], DATASET_ORDER), order(k[1], ALGORITHM_ORDER),
            order(k[3], BACKEND_ORDER), k[5])):
        _, algorithm, dataset, backend, _, threads = key
        st = t.get(algorithm, dataset, backend, "stream", threads)
        fa = t.get(algorithm, dataset, backend, "auto", threads)
        if st is None:
            continue
        w("| %s | %s | %s | %d | %s | %s | %s |" % (
            dataset, algorithm, backend, threads, fmt_rate(st),
            fmt_rate(fa) if fa else "—",
            "%.2f" % (st.best / fa.best) if fa else "—"))
    w("")


def auto_rows(t, dataset):
    """(algorithm, threads, auto, fastest explicit) for every auto row of
    `dataset`: the engine's default against every kernel's automatic
    strategy on as many threads."""
    rows = []
    for algorithm in t.algorithms(dataset):
        for threads in t.threads():
            auto = t.get(algorithm, dataset, AUTO, "auto", threads)
            if auto is None:
                continue
            best = None
            for backend in BACKEND_ORDER:
                if backend in (REFERENCE, AUTO):
                    continue
                r = t.get(algorithm, dataset, backend, "auto", threads)
                if r is not None and (best is None or r.best > best.best):
                    best = r
            rows.append((algorithm, threads, auto, best))
    return rows


def automatic_kernel(w, t):
    w("## Automatic kernel")
    w("")
    w("The engine's default backend (`auto`: no kernel given, so the "
      "kernel its start-up calibration found fastest for the algorithm and "
      "thread count) against the fastest explicit kernel, each with its "
      "automatic strategy, same run. Target: at least %.2f× everywhere."
      % AUTO_TARGET)
    w("")
    w("| dataset | algorithm | threads | auto chose | auto GB/s | "
      "fastest kernel | its GB/s | auto ÷ fastest |")
    w("|---|---|---:|---|---:|---|---:|---:|")
    for dataset in t.datasets():
        for algorithm, threads, auto, best in auto_rows(t, dataset):
            if best is None:
                ratio, name, rate = "—", "—", "—"
            else:
                value = auto.best / best.best
                ratio = "%.2f×%s" % (value, "" if value >= AUTO_TARGET else " ⚠")
                name = "%s (%s)" % (best.fields[3], best.chosen or "auto")
                rate = fmt_rate(best)
            w("| %s | %s | %d | %s (%s) | %s | %s | %s | %s |" % (
                dataset, algorithm, threads, auto.kernel or "?",
                auto.chosen or "auto", fmt_rate(auto), name, rate, ratio))
    w("")


def error_list(w, errors):
    w("## Errors and skipped backends")
    w("")
    for r in errors:
        w("- `%s`: %s" % ("/".join(str(f) for f in r.fields[1:]), r.error))
    w("")


def markdown(context, t):
    out = []
    w = out.append
    header(w, context)
    for dataset in t.datasets():
        targets(w, t, dataset)
    for dataset in t.datasets():
        throughput(w, t, dataset)
    if any(k[3] == AUTO for k in t.chunk):
        automatic_kernel(w, t)
    if t.stage1:
        stage1(w, t)
    if any(k[4] in ("two-stage", "sequential") for k in t.chunk):
        forced_strategies(w, t)
    streams = [k for k in t.chunk if k[4] == "stream"]
    if streams:
        stream_chunker(w, t, streams)
    errors = [r for r in t.results.values() if r.error is not None]
    if errors:
        error_list(w, errors)
    return "\n".join(out)



def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results", help="chunking_bench --benchmark_out JSON")
    parser.add_argument("--markdown", help="write the table here")
    parser.add_argument("--png", help="write the chart here")
    args = parser.parse_args(argv)
    context, results = load(args.results)
    if not results:
        print("report.py: no chunkd benchmarks in %s" % args.results,
              file=sys.stderr)
        return 1
    tables = Tables(results)
    text = markdown(context, tables)
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(text + "\n")
    else:
        print(text)
    if args.png:
        chart(tables, args.png)
    # A kernel this CPU lacks is skipped with a reason; any other error (a
    # wrong chunk list above all) fails `make bench`.
    failed = [r for r in results.values()
              if r.error is not None and UNSUPPORTED not in r.error]
    for r in failed:
        print("report.py: %s failed: %s" % ("/".join(
            str(f) for f in r.fields), r.error), file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
