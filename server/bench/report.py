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
import collections
import json
import math
import sys

REFERENCE = "reference"
# How chunking_bench says a kernel cannot run on this CPU (not a failure).
UNSUPPORTED = "not supported by this CPU"
BACKEND_ORDER = ["reference", "scalar", "avx2", "avx512", "auto"]
# The engine's default backend: the automatic kernel (chunking/auto_kernel.h).
AUTO = "auto"
# auto's rows should be within this fraction of the fastest explicit kernel.
AUTO_TARGET = 0.97
ALGORITHM_ORDER = ["fastcdc", "crc32", "seqcdc", "fixed"]
DATASET_ORDER = ["random", "versioned"]
STRATEGY_ORDER = ["reference", "auto", "two-stage", "sequential"]


def order(value, known):
    return (known.index(value), value) if value in known else (len(known), value)


class Result:
    """One benchmark: the best and worst repetition, or the error."""

    def __init__(self, fields):
        self.fields = fields  # parsed from the name
        self.rates = []  # bytes per second, one per repetition
        self.label = ""
        self.error = None
        self.chunks = None

    @property
    def best(self):
        return max(self.rates) if self.rates else None

    @property
    def worst(self):
        return min(self.rates) if self.rates else None

    @property
    def chosen(self):
        """The strategy the engine ran (from the label), e.g. "sequential"."""
        return self.label_value("strategy")

    @property
    def kernel(self):
        """The kernel the engine ran (from the label), e.g. "avx2"."""
        return self.label_value("kernel")

    def label_value(self, key):
        for word in self.label.split():
            if word.startswith(key + "="):
                return word.split("=", 1)[1]
        return ""


def parse_name(name):
    parts = [p for p in name.split("/") if p != "real_time"]
    threads = None
    rest = []
    for p in parts:
        if p.startswith("threads:"):
            threads = int(p.split(":", 1)[1])
        elif not p.startswith("repeats:"):
            rest.append(p)
    if rest[0] == "chunk" and len(rest) == 5:
        _, algorithm, dataset, backend, strategy = rest
        return ("chunk", algorithm, dataset, backend, strategy, threads)
    if rest[0] == "stage1" and len(rest) == 5 and rest[4].startswith("block:"):
        _, algorithm, dataset, backend, block = rest
        return ("stage1", algorithm, dataset, backend,
                int(block.split(":", 1)[1]), threads)
    if rest[0] == "ceiling" and len(rest) == 3:
        _, kind, dataset = rest
        return ("ceiling", kind, dataset, threads)
    return None


def load(path):
    with open(path) as f:
        doc = json.load(f)
    results = collections.OrderedDict()
    for b in doc.get("benchmarks", []):
        if b.get("run_type", "iteration") != "iteration":
            continue  # aggregates: recomputed here from the repetitions
        name = b.get("run_name", b["name"])
        fields = parse_name(name)
        if fields is None:
            continue
        r = results.setdefault(fields, Result(fields))
        if b.get("error_occurred"):
            r.error = b.get("error_message", "error")
            continue
        if "bytes_per_second" in b:
            r.rates.append(float(b["bytes_per_second"]))
        r.label = b.get("label", r.label)
        if "chunks" in b:
            r.chunks = int(b["chunks"])
    return doc.get("context", {}), results


def gbps(rate):
    return rate / 1e9


def fmt_rate(r):
    if r.error is not None or r.best is None:
        return "—"
    text = "%.2f" % gbps(r.best)
    if len(r.rates) > 1 and r.worst < 0.9 * r.best:
        text += " (%.2f)" % gbps(r.worst)
    return text


class Tables:
    def __init__(self, results):
        self.results = results
        self.chunk = {k: v for k, v in results.items() if k[0] == "chunk"}
        self.ceiling = {k: v for k, v in results.items() if k[0] == "ceiling"}
        self.stage1 = {k: v for k, v in results.items() if k[0] == "stage1"}

    def datasets(self):
        found = {k[2] for k in self.chunk} | {k[2] for k in self.ceiling}
        return sorted(found, key=lambda d: order(d, DATASET_ORDER))

    def algorithms(self, dataset):
        found = {k[1] for k in self.chunk if k[2] == dataset}
        return sorted(found, key=lambda a: order(a, ALGORITHM_ORDER))

    def threads(self):
        return sorted({k[-1] for k in self.results})

    def get(self, algorithm, dataset, backend, strategy, threads):
        r = self.chunk.get(("chunk", algorithm, dataset, backend, strategy,
                            threads))
        if r is None or r.error is not None or r.best is None:
            return None
        return r

    def reference(self, algorithm, dataset):
        return self.get(algorithm, dataset, REFERENCE, REFERENCE, 1)

    def ceiling_rate(self, dataset, threads, kind="sum64"):
        r = self.ceiling.get(("ceiling", kind, dataset, threads))
        if r is None or r.best is None:
            return None
        return r.best

    def rows(self, algorithm, dataset, strategies):
        keys = [k for k in self.chunk
                if k[1] == algorithm and k[2] == dataset and k[4] in strategies]
        return sorted(keys, key=lambda k: (order(k[3], BACKEND_ORDER),
                                           order(k[4], STRATEGY_ORDER), k[5]))

    def fastest(self, algorithm, dataset, threads, strategies=("auto",)):
        """The fastest result at `threads` other than the baseline (the
        scalar reference on one thread)."""
        best = None
        for k in self.rows(algorithm, dataset, strategies):
            if k[5] != threads or (k[3] == REFERENCE and threads == 1):
                continue
            r = self.get(*k[1:])
            if r is not None and (best is None or r.best > best.best):
                best = r
        return best


def describe(r):
    _, _, _, backend, strategy, threads = r.fields
    chosen = r.chosen
    if strategy == "auto" and chosen:
        return "%s %s→%s, %d thr" % (backend, strategy, chosen, threads)
    return "%s %s, %d thr" % (backend, strategy, threads)


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


def minor_label(value, _):
    """Labels the minor ticks at 2 and 5 times a power of ten."""
    if value <= 0:
        return ""
    mantissa = value / 10 ** math.floor(math.log10(value) + 1e-9)
    return "%g" % value if round(mantissa) in (2, 5) else ""


def chart(t, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter

    datasets = t.datasets()
    algorithms = sorted({a for d in datasets for a in t.algorithms(d)},
                        key=lambda a: order(a, ALGORITHM_ORDER))
    threads = t.threads()
    fig, axes = plt.subplots(len(datasets), len(algorithms),
                             figsize=(4.2 * len(algorithms),
                                      3.6 * len(datasets)),
                             squeeze=False)
    colors = {"scalar": "tab:blue", "avx2": "tab:orange",
              "avx512": "tab:green", "auto": "tab:red"}
    legend = {}
    for row, dataset in enumerate(datasets):
        for col, algorithm in enumerate(algorithms):
            ax = axes[row][col]
            backends = sorted({k[3] for k in t.rows(algorithm, dataset,
                                                     ("auto",))},
                              key=lambda b: order(b, BACKEND_ORDER))
            for backend in backends:
                xs, ys = [], []
                for n in threads:
                    r = t.get(algorithm, dataset, backend, "auto", n)
                    if r is not None:
                        xs.append(n)
                        ys.append(gbps(r.best))
                if xs:
                    ax.plot(xs, ys, marker="o", label=backend,
                            color=colors.get(backend))
            ref = t.reference(algorithm, dataset)
            if ref is not None:
                ax.axhline(gbps(ref.best), color="black", linestyle="--",
                           linewidth=1, label="scalar reference")
            cx, cy = [], []
            for n in threads:
                c = t.ceiling_rate(dataset, n)
                if c is not None:
                    cx.append(n)
                    cy.append(gbps(c))
            if cx:
                ax.plot(cx, cy, color="gray", linestyle=":", marker="s",
                        label="memory read")
            ax.set_title("%s — %s" % (algorithm, dataset))
            ax.set_xticks(threads)
            ax.set_xlim(min(threads) - 0.3, max(threads) + 0.3)
            ax.set_xlabel("threads")
            ax.set_ylabel("GB/s (log scale)")
            # Log scale: the memory ceiling and the chunkers differ by an
            # order of magnitude, and equal ratios look equally far apart.
            ax.set_yscale("log")
            ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: "%g" % v))
            ax.yaxis.set_minor_formatter(FuncFormatter(minor_label))
            ax.tick_params(axis="y", which="minor", labelsize="x-small")
            ax.grid(True, which="both", alpha=0.3)
            if algorithm == "fixed":
                ax.text(0.5, 0.5, "fixed reads no data:\nonly the chunk list "
                        "is built", transform=ax.transAxes, ha="center",
                        va="center", fontsize="small", color="dimgray")
            for handle, label in zip(*ax.get_legend_handles_labels()):
                legend.setdefault(label, handle)
    # One legend for all panels: the same backends everywhere.
    order_labels = [b for b in BACKEND_ORDER if b in legend] + [
        b for b in legend if b not in BACKEND_ORDER]
    fig.legend([legend[b] for b in order_labels], order_labels,
               loc="lower center", ncol=len(order_labels), frameon=False)
    fig.suptitle("chunkd: chunking throughput vs threads (engine strategy "
                 "auto; GB/s = 10^9 input bytes/s, best repetition)")
    fig.tight_layout(rect=(0, 0.05, 1, 1))
    fig.savefig(path, dpi=110)


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
