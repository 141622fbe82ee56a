#!/usr/bin/env python3
"""Dedup end to end with each index, side by side: memory, rocksdb, redis.

    dedup_bench.py --chunkd build/server/chunkd \\
        --chunkctl build/clients/cli/chunkctl [--size BYTES] [--repetitions N] \\
        [--avg 16384,4096] [--markdown OUT.md] [--baseline-chunkd OLD]

Starts one redis-server and three chunkd processes on free loopback ports
(--index memory, --index rocksdb:///... with its default sync=batch, and
--index redis://...), writes a file of seeded random bytes, and runs
`chunkctl dedup` (a C++ client, so that the client is not the bottleneck)
over loopback gRPC: fastcdc at each --avg (min avg/4, max avg*4), sha256.
Two passes per repetition, server and chunk size into a namespace of their
own: "new" (every chunk inserted) and "duplicate" (the same bytes again:
every chunk found). Measured per pass: MB/s, and the chunkd process's CPU
seconds per GB (user + system from /proc/<pid>/stat, every thread), which
load from other work on the machine does not inflate as it does wall time.
The servers take turns in a random order per repetition; medians of the
repetitions are reported, with the ratios each index is held to: redis
throughput >= 70 % of memory's at 16 KiB chunks; rocksdb server CPU per GB <= 1.3x memory's
for new data at 16 KiB chunks, <= 2x at 4 KiB, <= 1.15x for duplicates.

With --baseline-chunkd, a fourth server, that binary (another build of
chunkd, e.g. the previous release) with a redis index in database 1 of the
same redis-server, takes its turns among the others, and a second table
compares the two on Redis side by side: MB/s, chunkd's CPU per GB and the
redis-server's (whose CPU the index layout decides), each the median of
the per-repetition ratios, against "within 5 %" of the baseline.

Every run checks its output: the new pass must report every byte unique, the
duplicate pass none. Needs chunkd_client (the test virtualenv has it).
"""

import argparse
import os
import random
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

from chunkd_client.testing import ChunkdServer, free_port

TOTAL = re.compile(r"^total bytes=(\d+) unique_bytes=(\d+) chunks=(\d+)")
PASSES = ("new", "duplicate")
# The most a rocksdb index's server CPU per GB may be, as a multiple of the
# memory index's: (average chunk size, pass) -> bound.
ROCKSDB_BOUNDS = {(16384, "new"): 1.3, (4096, "new"): 2.0,
                  (16384, "duplicate"): 1.15, (4096, "duplicate"): 1.15}


def start_redis(directory):
    port = free_port()
    process = subprocess.Popen(
        ["redis-server", "--port", str(port), "--bind", "127.0.0.1",
         "--save", "", "--appendonly", "no", "--dir", directory,
         "--maxmemory-policy", "noeviction",
         # What chunkd's bucket layout needs (docs/operations.md).
         "--hash-max-listpack-entries", "512"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 30
    while True:
        ping = subprocess.run(["redis-cli", "-p", str(port), "PING"],
                              capture_output=True, text=True, timeout=10)
        if ping.stdout.strip() == "PONG":
            return process, port
        if process.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError("redis-server did not start")
        time.sleep(0.05)


def cpu_seconds(pid):
    """User + system CPU seconds of process `pid`, every thread."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def dedup(chunkctl, server, namespace, path, avg):
    """(seconds, server CPU seconds, bytes, unique bytes) of one run."""
    command = [chunkctl, "dedup", "--server", server.address,
               "--namespace", namespace, "--algorithm", "fastcdc",
               "--min", str(avg // 4), "--avg", str(avg), "--max",
               str(avg * 4), "--fingerprint", "sha256", path]
    cpu_before = cpu_seconds(server.process.pid)
    start = time.perf_counter()
    result = subprocess.run(command, capture_output=True, text=True,
                            timeout=600)
    seconds = time.perf_counter() - start
    cpu = cpu_seconds(server.process.pid) - cpu_before
    if result.returncode != 0:
        raise RuntimeError(f"{' '.join(command)}: {result.stderr}")
    for line in result.stdout.splitlines():
        m = TOTAL.match(line)
        if m:
            return seconds, cpu, int(m.group(1)), int(m.group(2))
    raise RuntimeError(f"no total line in {result.stdout!r}")


def write_data(path, size):
    rng = random.Random(20250101)
    with open(path, "wb") as f:
        left = size
        while left > 0:
            n = min(left, 8 << 20)
            f.write(rng.randbytes(n))
            left -= n


def measure(args, servers, path, sizes, redis_pid):
    """{(server, avg, pass): [(bytes/s, CPU s/GB, redis CPU s/GB), ...]}"""
    samples = {(name, avg, p): [] for name in servers for avg in sizes
               for p in PASSES}
    order = [(name, avg) for name in servers for avg in sizes]
    for rep in range(args.repetitions):
        random.shuffle(order)
        for name, avg in order:
            namespace = f"bench-{rep}-{name}-{avg}"
            for p in PASSES:
                redis_before = cpu_seconds(redis_pid)
                seconds, cpu, total, unique = dedup(
                    args.chunkctl, servers[name], namespace, path, avg)
                redis_cpu = cpu_seconds(redis_pid) - redis_before
                want_unique = total if p == "new" else 0
                if total != args.size or unique != want_unique:
                    raise RuntimeError(
                        f"{name} {avg} {p}: {total} bytes, {unique} unique; "
                        f"expected {args.size}, {want_unique}")
                samples[(name, avg, p)].append(
                    (total / seconds, cpu / (total / 1e9),
                     redis_cpu / (total / 1e9)))
        print(f"repetition {rep + 1}: " + ", ".join(
            f"{n}/{a}/{p} {v[-1][0] / 1e6:.0f} MB/s {v[-1][1]:.2f} s/GB"
            for (n, a, p), v in sorted(samples.items())), file=sys.stderr)
    return samples


def median_ratio(a, b, k):
    """The median over repetitions of a[i][k] / b[i][k]."""
    return statistics.median(x[k] / y[k] for x, y in zip(a, b))


def report(args, samples, sizes):
    lines = [
        f"Dedup end to end over loopback gRPC (chunkctl dedup, "
        f"{args.size >> 20} MiB of random bytes, fastcdc avg/4, avg, avg*4, "
        f"sha256; rocksdb with sync=batch), medians of {args.repetitions}:",
        "",
        "| avg | pass | memory MB/s | rocksdb MB/s | redis MB/s | "
        "memory CPU s/GB | rocksdb CPU s/GB | redis CPU s/GB | "
        "rocksdb ÷ memory, CPU | redis ÷ memory, MB/s |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    verdicts = []
    for avg in sizes:
        for p in PASSES:
            m, r, d = (samples[(n, avg, p)] for n in ("memory", "rocksdb",
                                                      "redis"))
            cpu_ratio = median_ratio(r, m, 1)
            redis_ratio = median_ratio(d, m, 0)
            cells = [statistics.median(x[0] for x in v) / 1e6
                     for v in (m, r, d)]
            cpus = [statistics.median(x[1] for x in v) for v in (m, r, d)]
            lines.append(
                f"| {avg >> 10} KiB | {p} | " +
                " | ".join(f"{c:.0f}" for c in cells) + " | " +
                " | ".join(f"{c:.2f}" for c in cpus) +
                f" | {cpu_ratio:.2f}× | {100 * redis_ratio:.0f} % |")
            bound = ROCKSDB_BOUNDS.get((avg, p))
            if bound is not None:
                verdicts.append(
                    f"rocksdb ÷ memory CPU, {avg >> 10} KiB {p}: "
                    f"{cpu_ratio:.2f}× (target ≤ {bound}×: "
                    f"{'met' if cpu_ratio <= bound else 'NOT met'})")
            if avg == 16384:  # redis's target is set at 16 KiB chunks
                verdicts.append(
                    f"redis ÷ memory MB/s, {avg >> 10} KiB {p}: "
                    f"{100 * redis_ratio:.0f} % (target ≥ 70 %: "
                    f"{'met' if redis_ratio >= 0.70 else 'NOT met'})")
    return "\n".join(lines + [""] + verdicts) + "\n"


def report_baseline(args, samples, sizes):
    """This chunkd against --baseline-chunkd, both on Redis."""
    lines = [
        f"Dedup on Redis, this chunkd ({args.chunkd}) against "
        f"{args.baseline_chunkd} on the same redis-server, taking turns; "
        f"medians of {args.repetitions}, ratios the median of the "
        f"per-repetition ratios:",
        "",
        "| avg | pass | MB/s | baseline MB/s | ratio | chunkd CPU s/GB | "
        "baseline | ratio | redis-server CPU s/GB | baseline | ratio |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    verdicts = []
    for avg in sizes:
        for p in PASSES:
            d, b = samples[("redis", avg, p)], samples[("redis-baseline",
                                                         avg, p)]
            cells = []
            for k, form in ((0, "{:.0f}"), (1, "{:.2f}"), (2, "{:.2f}")):
                scale = 1e6 if k == 0 else 1
                cells += [form.format(statistics.median(x[k] for x in d)
                                      / scale),
                          form.format(statistics.median(x[k] for x in b)
                                      / scale),
                          f"{median_ratio(d, b, k):.3f}×"]
            lines.append(f"| {avg >> 10} KiB | {p} | " + " | ".join(cells)
                         + " |")
            speed, cpu = median_ratio(d, b, 0), median_ratio(d, b, 1)
            met = speed >= 0.95 and cpu <= 1.05
            verdicts.append(
                f"this ÷ baseline on Redis, {avg >> 10} KiB {p}: MB/s "
                f"{speed:.3f}×, chunkd CPU {cpu:.3f}× (target within 5 %: "
                f"{'met' if met else 'NOT met'})")
    return "\n".join(lines + [""] + verdicts) + "\n"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--chunkd", required=True)
    parser.add_argument("--chunkctl", required=True)
    parser.add_argument("--size", type=int, default=256 << 20)
    parser.add_argument("--repetitions", type=int, default=5)
    parser.add_argument("--avg", default="16384,4096",
                        help="average chunk sizes, comma-separated")
    parser.add_argument("--markdown")
    parser.add_argument("--baseline-chunkd",
                        help="another chunkd binary to compare on Redis")
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.avg.split(",")]

    work = tempfile.mkdtemp(prefix="chunkd-dedup-bench-")
    redis = None
    servers = {}
    try:
        path = os.path.join(work, "data.bin")
        write_data(path, args.size)
        redis, port = start_redis(work)
        servers["memory"] = ChunkdServer(args.chunkd, index="memory").start()
        servers["rocksdb"] = ChunkdServer(
            args.chunkd,
            index=f"rocksdb://{os.path.join(work, 'index')}").start()
        servers["redis"] = ChunkdServer(
            args.chunkd, index=f"redis://127.0.0.1:{port}").start()
        if args.baseline_chunkd:
            servers["redis-baseline"] = ChunkdServer(
                args.baseline_chunkd,
                index=f"redis://127.0.0.1:{port}/1").start()
        samples = measure(args, servers, path, sizes, redis.pid)
        text = report(args, samples, sizes)
        if args.baseline_chunkd:
            text += "\n" + report_baseline(args, samples, sizes)
        print(text)
        if args.markdown:
            with open(args.markdown, "w") as f:
                f.write(text)
        return 0
    finally:
        for s in servers.values():
            s.stop()
        if redis is not None:
            redis.kill()
            redis.wait(10)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
