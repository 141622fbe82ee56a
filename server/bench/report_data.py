"""chunking_bench's JSON read into tables: benchmark names parsed into
results (best and spread of the repetitions), indexed by algorithm, dataset,
backend, strategy and threads. report.py writes them as Markdown,
report_chart.py draws them."""

import collections
import json

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
