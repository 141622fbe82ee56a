#!/usr/bin/env python3
"""Tests of report.py on a hand-made chunking_bench JSON (stdlib only; the
chart is tested only where matplotlib is installed)."""

import io
import json
import os
import sys
import tempfile
import unittest
from contextlib import redirect_stderr

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import report  # noqa: E402

GB = 1e9


def bench(name, rate=None, label="", error=None, rep=0, chunks=4096):
    entry = {"name": name + "/real_time", "run_name": name + "/real_time",
             "run_type": "iteration", "repetition_index": rep,
             "label": label, "chunks": chunks}
    if error is not None:
        entry["error_occurred"] = True
        entry["error_message"] = error
    else:
        entry["bytes_per_second"] = rate
    return entry


def document(extra=()):
    chunk = "chunk/%s/random/%s/%s/threads:%d"
    benchmarks = [
        bench("ceiling/sum64/random/threads:1", 10 * GB),
        bench("ceiling/sum64/random/threads:2", 16 * GB),
        bench("ceiling/memcpy/random/threads:1", 8 * GB),
        bench(chunk % ("fastcdc", "reference", "reference", 1), 1 * GB,
              "strategy=reference"),
        # Two repetitions: the best counts, the worst is shown.
        bench(chunk % ("fastcdc", "avx512", "auto", 1), 3.5 * GB,
              "strategy=sequential segment=262144 parallelism=1"),
        bench(chunk % ("fastcdc", "avx512", "auto", 1), 2.5 * GB,
              "strategy=sequential segment=262144 parallelism=1", rep=1),
        bench(chunk % ("fastcdc", "avx512", "auto", 2), 4.5 * GB,
              "strategy=two-stage segment=262144 parallelism=2"),
        bench(chunk % ("fastcdc", "avx512", "two-stage", 1), 3.0 * GB,
              "strategy=two-stage segment=262144 parallelism=1"),
        bench(chunk % ("fastcdc", "avx512", "sequential", 1), 3.5 * GB,
              "strategy=sequential segment=262144 parallelism=1"),
        bench(chunk % ("crc32", "reference", "reference", 1), 0.25 * GB),
        bench(chunk % ("crc32", "avx512", "auto", 1), 1.25 * GB,
              "strategy=two-stage"),
        bench(chunk % ("crc32", "avx512", "auto", 2), 2.0 * GB,
              "strategy=two-stage"),
        bench(chunk % ("seqcdc", "reference", "reference", 1), 2 * GB),
        bench(chunk % ("seqcdc", "avx2", "auto", 1), 4 * GB,
              "strategy=sequential"),
        bench(chunk % ("seqcdc", "avx512", "auto", 1),
              error="avx512: not supported by this CPU or OS"),
        bench("stage1/fastcdc/random/scalar/block:262144/threads:1",
              0.5 * GB),
        bench("stage1/fastcdc/random/scalar/block:266240/threads:1",
              0.4 * GB),
        bench("stage1/fastcdc/random/avx512/block:262144/threads:1", 3 * GB),
        bench("stage1/fastcdc/random/avx512/block:266240/threads:1", 5 * GB),
    ]
    benchmarks.extend(extra)
    # An aggregate, which the report recomputes itself and must ignore.
    agg = bench(chunk % ("fastcdc", "avx512", "auto", 1), 100 * GB)
    agg["run_type"] = "aggregate"
    benchmarks.append(agg)
    return {"context": {"num_cpus": 2, "mhz_per_cpu": 2600,
                        "chunkd_kernels_supported": "avx2,scalar",
                        "chunkd_best_kernel": "avx2",
                        "chunkd_bytes_per_dataset": str(64 << 20),
                        "chunkd_seed": "42", "load_avg": [0.5, 0.25, 0.1]},
            "benchmarks": benchmarks}


class ReportTest(unittest.TestCase):

    def run_report(self, doc, *flags):
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "results.json")
            with open(path, "w") as f:
                json.dump(doc, f)
            md = os.path.join(tmp, "results.md")
            err = io.StringIO()
            with redirect_stderr(err):
                code = report.main([path, "--markdown", md] + list(flags))
            with open(md) as f:
                return code, f.read(), err.getvalue()

    def test_targets(self):
        code, text, _ = self.run_report(document())
        self.assertEqual(code, 0)
        self.assertIn(
            "| fastcdc fastest path, 1 thread ÷ scalar reference | 3.50× "
            "(avx512 auto→sequential, 1 thr) | ≥ 3.0× | met | 3.50× (avx512 "
            "auto→sequential, 1 thr) |", text)
        self.assertIn(
            "| fastcdc fastest path, 2 threads ÷ scalar reference | 4.50× "
            "(avx512 auto→two-stage, 2 thr) | ≥ 5.0× | **missed** (10 % "
            "short) |", text)
        self.assertIn("| crc32 avx512, 1 thread ÷ scalar reference | 5.00×", text)
        self.assertIn(
            "| crc32 avx512, 2 threads ÷ avx512 1 thread | 1.60× (avx512 "
            "auto→two-stage, 2 thr) | ≥ 1.8× | **missed** (11 % short) |", text)
        self.assertIn("| seqcdc fastest path, 1 thread ÷ scalar reference | "
                      "2.00× (avx2 auto→sequential, 1 thr) | ≥ 2.5× | "
                      "**missed** (20 % short) |", text)

    def test_fastest_path_counts_every_strategy(self):
        faster = bench("chunk/fastcdc/random/avx512/two-stage/threads:2",
                       5.5 * GB, "strategy=two-stage")
        _, text, _ = self.run_report(document([faster]))
        self.assertIn(
            "| fastcdc fastest path, 2 threads ÷ scalar reference | 5.50× "
            "(avx512 two-stage, 2 thr) | ≥ 5.0× | met | 4.50× (avx512 "
            "auto→two-stage, 2 thr) |", text)

    def test_table(self):
        _, text, _ = self.run_report(document())
        self.assertIn("Memory ceiling — 1 thread: read 10.00 GB/s, memcpy "
                      "8.00 GB/s; 2 threads: read 16.00 GB/s.", text)
        # Best of the repetitions, the worst in parentheses, ratio to the
        # reference, fraction of the 1-thread ceiling.
        self.assertIn("| fastcdc | avx512 | auto → sequential | 1 | 3.50 "
                      "(2.50) | 3.50× | 35 % | 4096 |", text)
        self.assertIn("| fastcdc | avx512 | auto → two-stage | 2 | 4.50 | "
                      "4.50× | 28 % | 4096 |", text)
        self.assertIn("| fastcdc | reference | reference | 1 | 1.00 | 1.00× | "
                      "10 % | 4096 |", text)
        self.assertIn("| random | fastcdc | avx512 | 1 | 3.00 | 3.50 | 1.00 | "
                      "sequential |", text)
        self.assertIn("Load average when the run started: 0.50, 0.25, 0.10.",
                      text)
        # An unsupported kernel is listed, not counted as a failure.
        self.assertIn("| seqcdc | avx512 | auto | 1 | error |", text)
        self.assertIn("not supported by this CPU or OS", text)

    def test_automatic_kernel(self):
        auto = "chunk/fastcdc/random/auto/auto/threads:%d"
        rows = [bench(auto % 1, 3.4 * GB,
                      "strategy=sequential parallelism=1 kernel=avx512"),
                bench(auto % 2, 4.0 * GB,
                      "strategy=two-stage parallelism=2 kernel=avx512")]
        code, text, _ = self.run_report(document(rows))
        self.assertEqual(code, 0)
        self.assertIn("## Automatic kernel", text)
        # Against the fastest explicit kernel with the automatic strategy.
        self.assertIn("| random | fastcdc | 1 | avx512 (sequential) | 3.40 | "
                      "avx512 (sequential) | 3.50 (2.50) | 0.97× |", text)
        # Short of the target: flagged.
        self.assertIn("| random | fastcdc | 2 | avx512 (two-stage) | 4.00 | "
                      "avx512 (two-stage) | 4.50 | 0.89× ⚠ |", text)
        # Without auto rows, no such section.
        _, plain, _ = self.run_report(document())
        self.assertNotIn("## Automatic kernel", plain)

    def test_stage1(self):
        _, text, _ = self.run_report(document())
        self.assertIn("| dataset | algorithm | backend | stage 1 GB/s, 256 KiB "
                      "calls | stage 1 GB/s, 260 KiB calls | × scalar |", text)
        # The best call length counts for the ratios.
        self.assertIn("| random | fastcdc | avx512 | 3.00 | 5.00 | 10.00× | "
                      "5.00× | 50 % | 3.50 (2.50) |", text)
        self.assertIn("| random | fastcdc | scalar | 0.50 | 0.40 | 1.00× | "
                      "0.50× | 5 % | — |", text)

    def test_a_wrong_kernel_fails_the_report(self):
        wrong = bench("chunk/crc32/random/avx2/auto/threads:1",
                      error="avx2 differs from the reference: chunk 3 of 9")
        code, text, err = self.run_report(document([wrong]))
        self.assertEqual(code, 1)
        self.assertIn("differs from the reference: chunk 3 of 9", text)
        self.assertIn("differs from the reference", err)

    def test_chart(self):
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            self.skipTest("matplotlib is not installed (make bench installs "
                          "it into the venv)")
        with tempfile.TemporaryDirectory() as tmp:
            png = os.path.join(tmp, "chart.png")
            self.run_report(document(), "--png", png)
            with open(png, "rb") as f:
                self.assertEqual(f.read(8), b"\x89PNG\r\n\x1a\n")


if __name__ == "__main__":
    unittest.main()
