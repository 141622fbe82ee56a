#!/usr/bin/env python3
"""Dedup end to end with the Redis index vs the memory index, side by side.

    dedup_bench.py --chunkd build/server/chunkd \\
        --chunkctl build/clients/cli/chunkctl [--size BYTES] [--repetitions N] \\
        [--markdown OUT.md]

Starts one redis-server and two chunkd processes on free loopback ports (one
with --index memory, one with --index redis://...), writes a file of seeded
random bytes, and times `chunkctl dedup` (a C++ client, so that the client is
not the bottleneck) over loopback gRPC: fastcdc 4/16/64 KiB, sha256. Two
passes per repetition and server into a namespace of their own: "new" (every
chunk inserted) and "duplicate" (the same bytes again: every chunk found).
The servers take turns in a random order per repetition so that load from
other work on the machine spreads over both; the median of the repetitions is
reported, with the ratio redis / memory (the target: >= 70 %).

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


def start_redis(directory):
    port = free_port()
    process = subprocess.Popen(
        ["redis-server", "--port", str(port), "--bind", "127.0.0.1",
         "--save", "", "--appendonly", "no", "--dir", directory,
         "--maxmemory-policy", "noeviction"],
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


def dedup(chunkctl, address, namespace, path):
    """(seconds, bytes, unique bytes) of one chunkctl dedup run."""
    command = [chunkctl, "dedup", "--server", address, "--namespace", namespace,
               "--algorithm", "fastcdc", "--min", "4096", "--avg", "16384",
               "--max", "65536", "--fingerprint", "sha256", path]
    start = time.perf_counter()
    result = subprocess.run(command, capture_output=True, text=True, timeout=600)
    seconds = time.perf_counter() - start
    if result.returncode != 0:
        raise RuntimeError(f"{' '.join(command)}: {result.stderr}")
    for line in result.stdout.splitlines():
        m = TOTAL.match(line)
        if m:
            return seconds, int(m.group(1)), int(m.group(2))
    raise RuntimeError(f"no total line in {result.stdout!r}")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--chunkd", required=True)
    parser.add_argument("--chunkctl", required=True)
    parser.add_argument("--size", type=int, default=256 << 20)
    parser.add_argument("--repetitions", type=int, default=5)
    parser.add_argument("--markdown")
    args = parser.parse_args(argv)

    work = tempfile.mkdtemp(prefix="chunkd-dedup-bench-")
    redis = None
    servers = {}
    try:
        path = os.path.join(work, "data.bin")
        rng = random.Random(20250101)
        with open(path, "wb") as f:
            left = args.size
            while left > 0:
                n = min(left, 8 << 20)
                f.write(rng.randbytes(n))
                left -= n
        redis, port = start_redis(work)
        servers["memory"] = ChunkdServer(args.chunkd, index="memory").start()
        servers["redis"] = ChunkdServer(
            args.chunkd, index=f"redis://127.0.0.1:{port}").start()

        rates = {(name, p): [] for name in servers for p in ("new", "duplicate")}
        order = list(servers)
        for rep in range(args.repetitions):
            random.shuffle(order)
            for name in order:
                namespace = f"bench-{rep}-{name}"
                for p in ("new", "duplicate"):
                    seconds, total, unique = dedup(
                        args.chunkctl, servers[name].address, namespace, path)
                    want_unique = total if p == "new" else 0
                    if total != args.size or unique != want_unique:
                        raise RuntimeError(
                            f"{name} {p}: {total} bytes, {unique} unique; "
                            f"expected {args.size}, {want_unique}")
                    rates[(name, p)].append(total / seconds)
            print(f"repetition {rep + 1}: " + ", ".join(
                f"{n}/{p} {rates[(n, p)][-1] / 1e6:.0f} MB/s"
                for n, p in sorted(rates)), file=sys.stderr)

        lines = [
            f"Dedup end to end over loopback gRPC (chunkctl dedup, "
            f"{args.size >> 20} MiB of random bytes, fastcdc 4/16/64 KiB, "
            f"sha256), median of {args.repetitions}:",
            "",
            "| pass | memory index MB/s | redis index MB/s | redis / memory |",
            "|---|---|---|---|",
        ]
        ok = True
        for p in ("new", "duplicate"):
            memory = statistics.median(rates[("memory", p)])
            redis_rate = statistics.median(rates[("redis", p)])
            ratios = [r / m for r, m in zip(rates[("redis", p)],
                                            rates[("memory", p)])]
            ratio = statistics.median(ratios)
            ok = ok and ratio >= 0.70
            lines.append(f"| {p} | {memory / 1e6:.0f} | {redis_rate / 1e6:.0f} | "
                         f"{100 * ratio:.0f} % |")
        lines += ["", "target: redis >= 70 % of memory: "
                  + ("met" if ok else "NOT met")]
        text = "\n".join(lines) + "\n"
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
