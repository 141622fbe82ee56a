"""The fleet soak: chunkd as its users run it, for as long as asked.

3 chunkd replicas share a Redis Cluster of 3 masters and 3 replicas (AOF
on), all on loopback; clients of the three languages (Python sync and
asyncio, chunkd-go, chunkctl) dial one multi-address target with their
default settings plus `retries` and run a seeded mix over several tenants
(Chunk, Dedup of versioned files, FindMissing, Release, GetServerInfo)
while faults come on a schedule: rolling restarts (SIGTERM), SIGKILL of a
replica, SIGKILL of a Redis master (failover), SIGSTOP of a master below
the node timeout, client connections reset by a relay, and a restart of
the whole cluster from its AOF. Then it checks every answer and the index
against a model of what was sent and acknowledged, the metrics against
the clients' totals, and each replica's memory, threads and descriptors,
and writes a report (JSON and a picture).

    python tests/soak/soak.py --minutes 30 --out build/soak

`make soak` runs it (SOAK_MINUTES, default 30); `make test` runs a
3-minute slice (tests/soak/test_soak.py). docs/operations.md, "The fleet
soak", shows the latest report. Exit status 0 when every check passed.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Optional

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(HERE))

import checks  # noqa: E402
from faults import KINDS, Faults  # noqa: E402
from fleet import (SETTLE_TIMEOUT, Cluster, RelayProcess, Replica, Sampler,  # noqa: E402
                   SoakError, read_counts)
from workload import Expected, make_dataset  # noqa: E402

#: --shutdown_grace of the replicas.
GRACE_SECONDS = 20
#: Before the first fault, and the quiet window in which metrics are compared.
WARM_UP = 10.0
QUIET_WINDOW = 20.0


@dataclass
class Config:
    minutes: float
    out: Path
    chunkd: Path
    chunkctl: Path
    chunkd_go: Path
    seed: int = 1
    projects: int = 4
    versions: int = 4
    base_size: int = 1 << 20


class Soak:
    def __init__(self, config: Config) -> None:
        self.config = config
        self.out = config.out
        self.rng = random.Random(config.seed)
        self.started = time.time()
        self.faults: List[Dict[str, Any]] = []
        self.windows: List[Dict[str, Any]] = []
        self.sampler = Sampler()
        self.cluster: Optional[Cluster] = None
        self.replicas: List[Replica] = []
        self.relays: List[RelayProcess] = []
        self.workers: List[subprocess.Popen] = []
        self.control = self.out / "control"

    # Set-up.

    def prepare(self) -> Expected:
        if self.out.exists():
            shutil.rmtree(self.out)
        (self.out / "logs").mkdir(parents=True)
        self.control.mkdir()
        files = make_dataset(self.out / "data", self.config.seed, self.config.projects,
                             self.config.versions, self.config.base_size)
        expected = Expected.compute(self.config.chunkctl, files)
        expected.save(self.out / "expected.json")
        return expected

    def start_fleet(self) -> None:
        self.cluster = Cluster(lambda life, pid: self.sampler.watch("redis", life, pid))
        self.cluster.start()
        for i in range(3):
            replica = Replica(i, self.config.chunkd, self.cluster.spec, self.out / "logs",
                              [f"--shutdown_grace={GRACE_SECONDS}s"])
            replica.start()
            self.on_replica_start(replica)
            self.replicas.append(replica)
        self.relays = [RelayProcess(r.port) for r in self.replicas]
        self.sampler.start()

    def on_replica_start(self, replica: Replica) -> None:
        self.sampler.watch("chunkd", replica.life, replica.process.pid)

    def start_workers(self) -> None:
        target = "ipv4:" + ",".join(r.address for r in self.relays)
        common = ["--target", target, "--expected", str(self.out / "expected.json"),
                  "--control", str(self.control), "--seed", str(self.config.seed)]
        for kind, name, extra in (
                ("sync", "py-sync", ["--lanes", "2"]),
                ("async", "py-async", ["--lanes", "2"]),
                ("cli", "cli", ["--chunkctl", str(self.config.chunkctl),
                                "--chunkd-go", str(self.config.chunkd_go)])):
            log = self.out / "logs" / f"{name}.jsonl"
            stderr = (self.out / "logs" / f"{name}.stderr").open("wb")
            process = subprocess.Popen(
                [sys.executable, str(HERE / "worker.py"), kind, name, "--log", str(log),
                 *common, *extra], stdin=subprocess.DEVNULL, stdout=stderr, stderr=stderr,
                start_new_session=True)  # teardown kills its CLI calls with it
            self.workers.append(process)
            self.sampler.watch("client", name, process.pid)

    # The run.

    def schedule(self) -> List[str]:
        """Rounds of every fault kind, each round shuffled (the first in
        KINDS order), a round every 6 minutes (30 minutes: each kind 5
        times), at least one."""
        rounds = max(1, round(self.config.minutes / 6))
        kinds: List[str] = []
        for r in range(rounds):
            batch = list(KINDS)
            if r:
                self.rng.shuffle(batch)
            kinds += batch
        return kinds

    def run_faults(self, faults: Faults, kinds: List[str], end: float) -> None:
        """The faults, spread evenly until `end`, with a quiet window after
        every round."""
        per_round = len(KINDS)
        rounds = len(kinds) // per_round
        slot = (end - time.time()) / (len(kinds) + rounds * 1.5)
        for i, kind in enumerate(kinds):
            self._sleep_until(self.started + WARM_UP + i * slot
                              + (i // per_round) * 1.5 * slot)
            t0 = time.time()
            detail = faults.inject(kind)
            self.faults.append({"kind": kind, "t0": t0, "t1": time.time(), "detail": detail})
            print(f"soak: {t0 - self.started:7.1f} s  {kind}: {detail}", flush=True)
            if (i + 1) % per_round == 0:
                self.quiet_window(len(self.windows))

    @staticmethod
    def _sleep_until(t: float) -> None:
        delay = t - time.time()
        if delay > 0:
            time.sleep(delay)

    def pause(self) -> None:
        (self.control / "pause").touch()
        lanes = 2 + 2 + 2
        deadline = time.monotonic() + SETTLE_TIMEOUT * 5
        while len(list(self.control.glob("paused-*"))) < lanes:
            if time.monotonic() > deadline:
                raise SoakError("the clients did not pause")
            if any(w.poll() is not None for w in self.workers):
                raise SoakError("a client process exited")
            time.sleep(0.05)

    def resume(self) -> None:
        (self.control / "pause").unlink()
        deadline = time.monotonic() + SETTLE_TIMEOUT
        while list(self.control.glob("paused-*")):
            if time.monotonic() > deadline:
                raise SoakError("the clients did not resume")
            time.sleep(0.05)

    def scrape(self) -> Any:
        """The counters of every replica, once each has finished every call
        it started (the clients are paused: a call's status may reach its
        client a moment before the server counts it handled)."""
        deadline = time.monotonic() + SETTLE_TIMEOUT
        while True:
            texts = []
            for r in self.replicas:
                with urllib.request.urlopen(f"http://{r.metrics_address}/metrics",
                                            timeout=10) as response:
                    texts.append(response.read().decode())
            totals = checks.metric_totals(texts)
            started = totals[("grpc_server_started_total", "")]
            if started == totals[("grpc_server_handled_total", "")]:
                return totals
            if time.monotonic() > deadline:
                raise SoakError(f"calls still in flight with every client paused: "
                                f"{started - totals[('grpc_server_handled_total', '')]:.0f}")
            time.sleep(0.05)

    def quiet_window(self, index: int) -> None:
        """Every lane paused, the counters read, QUIET_WINDOW of traffic
        without faults, paused and read again."""
        self.pause()
        before, t0 = self.scrape(), time.time()
        self.resume()
        time.sleep(QUIET_WINDOW)
        self.pause()
        after, t1 = self.scrape(), time.time()
        self.resume()
        self.windows.append({"index": index, "t0": t0, "t1": t1, "before": before,
                             "after": after})

    def stop_workers(self) -> None:
        (self.control / "stop").touch()
        for w in self.workers:
            try:
                w.wait(checks_timeout())
            except subprocess.TimeoutExpired:
                w.kill()
                raise SoakError("a client process did not stop") from None

    def events(self) -> List[Dict[str, Any]]:
        out = []
        for log in sorted((self.out / "logs").glob("*.jsonl")):
            out += [json.loads(line) for line in log.read_text().splitlines()]
        return sorted(out, key=lambda e: e["t0"])

    def run(self) -> Dict[str, Any]:
        expected = self.prepare()
        try:
            self.start_fleet()
            self.start_workers()
            end = self.started + self.config.minutes * 60 - QUIET_WINDOW - 10
            faults = Faults(self.cluster, self.replicas, self.relays, self.on_replica_start,
                            GRACE_SECONDS, self.rng)
            self.run_faults(faults, self.schedule(), end)
            self._sleep_until(self.started + self.config.minutes * 60)
            self.stop_workers()
            return self.verify(expected)
        finally:
            self.teardown()

    # The end.

    def verify(self, expected: Expected) -> Dict[str, Any]:
        events = self.events()
        counts = checks.model(events, expected)
        tainted = {e["ns"] for e in events if not e["ok"] and e["op"] in ("dedup", "release",
                                                                           "dedup_shared")}
        held = {ns: read_counts([m.port for m in self.cluster.masters()], ns)[0]
                for ns in counts}
        for w in self.windows:
            w["clients"] = checks.client_totals(
                e for e in events if w["t0"] <= e["t0"] and e["t1"] <= w["t1"])
        report = {
            "minutes": self.config.minutes,
            "started": self.started,
            "machine": machine(),
            "faults": self.faults,
            "quiet_windows": [{"t0": w["t0"], "t1": w["t1"]} for w in self.windows],
            "fault_counts": dict(sorted(
                {k: sum(f["kind"] == k for f in self.faults) for k in KINDS}.items())),
            "replica_ready_seconds": [round(s, 3) for r in self.replicas
                                      for s in r.ready_seconds],
            "checks": {
                "no_failed_calls": checks.failures(events),
                "counts_exact": checks.counts_exact(held, counts, tainted),
                "new_exactly_once": checks.new_exactly_once(
                    events, counts.get("soak-shared", {})),
                "metrics_equal_clients": checks.metrics_match(self.windows),
                "resources_flat": checks.resources_flat(self.sampler.series),
            },
        }
        report["ok"] = all(c["ok"] for c in report["checks"].values())
        report["throughput"] = throughput(events, self.started)
        report["series"] = {life: {"role": s.role, "samples": s.samples}
                            for life, s in self.sampler.series.items()}
        return report

    def teardown(self) -> None:
        (self.control / "stop").touch()
        self.sampler.stop()
        for w in self.workers:
            try:
                os.killpg(w.pid, signal.SIGKILL)  # the worker and the call it runs
            except ProcessLookupError:
                pass
            w.wait(10)
        for relay in self.relays:
            relay.stop()
        for r in self.replicas:
            if r.running():
                r.kill()
        if self.cluster is not None:
            self.cluster.cleanup()


def checks_timeout() -> float:
    """How long a client may take to finish its last call and exit."""
    return 600.0


def throughput(events: List[Dict[str, Any]], started: float, step: float = 5.0) -> Dict[str, Any]:
    """Client-side bytes per second of Chunk and Dedup, and calls per
    second of the others, in steps of `step` seconds."""
    bins: Dict[str, Dict[int, float]] = {}
    for e in events:
        if not e["ok"]:
            continue
        key = checks.METHODS[e["op"]]
        b = int((e["t1"] - started) // step)
        value = e.get("bytes", 0) if key in ("Chunk", "Dedup") else 1
        bins.setdefault(key, {}).setdefault(b, 0.0)
        bins[key][b] += value / step
    return {"step": step, "series": {k: sorted(v.items()) for k, v in bins.items()}}


def machine() -> str:
    model = ""
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            model = line.split(":", 1)[1].strip()
            break
    return f"{os.cpu_count()} cores, {model}"


def write_report(report: Dict[str, Any], out: Path) -> None:
    (out / "report.json").write_text(json.dumps(report, indent=1, default=str))
    (out / "report.md").write_text(markdown(report))
    try:
        import plot
    except ImportError as e:  # matplotlib missing: the JSON stands alone
        print(f"soak: no picture ({e})", file=sys.stderr)
        return
    plot.draw(report, out / "soak.png")


def markdown(report: Dict[str, Any]) -> str:
    """The report's figures as the table docs/operations.md shows."""
    c = report["checks"]
    calls, counts, new = c["no_failed_calls"], c["counts_exact"], c["new_exactly_once"]
    metrics, res = c["metrics_equal_clients"], c["resources_flat"]
    judged = [life for life in res["lives"] if life["judged"] and life["role"] == "chunkd"]
    others = [life for life in res["lives"] if life["judged"] and life["role"] != "chunkd"]
    worst = max(judged, key=lambda life: life["rss_growth_mib"], default=None)
    ready = report["replica_ready_seconds"]
    when = time.strftime("%Y-%m-%d", time.gmtime(report["started"]))
    faults = ", ".join(f"{k} ×{v}" for k, v in report["fault_counts"].items())
    rows = [
        ("calls (all clients)", f"{calls['calls']:,}, of which failed: {calls['failed']}; "
                                f"wrong answers: {calls['wrong_answers']}; "
                                f"stream replays (each after a failure the client hid): {calls['replays']}"),
        ("faults", faults),
        ("reference counts", f"{counts['fingerprints']:,} fingerprints in "
                             f"{counts['namespaces']} namespaces: {counts['missing']} missing, "
                             f"{counts['extra']} extra, {counts['wrong']} wrong"),
        ("new exactly once (shared namespace)",
         f"{new['distinct_fingerprints']:,} fingerprints, {new['reported_new']:,} reported "
         f"new, {new['reported_new_twice']} twice"),
        ("metrics against the clients", f"{metrics['calls_compared']:,} calls in "
                                        f"{metrics['windows']} quiet windows: "
                                        f"{len(metrics['mismatches'])} mismatches"),
        ("replica resident memory", f"{len(judged)} lives judged; largest growth of the "
                                    f"peak from a life's middle third to its last "
                                    + (f"{max(0.0, worst['rss_growth_mib'])} MiB in "
                                       f"{worst['seconds']:.0f} s "
                                       f"(bound {worst['rss_bound_mib']} MiB), peak "
                                       f"{max(x['peak_rss_mib'] for x in judged)} MiB"
                                       if worst else "–")),
        ("replica threads, open fds", "growth at most "
         + (f"{max(x['threads_growth'] for x in judged):g} threads, "
            f"{max(x['fds_growth'] for x in judged):g} fds (bounds {res['bounds']['threads']}, "
            f"{res['bounds']['fds']})" if judged else "–")),
        ("Redis nodes and clients", f"{len(others)} lives judged: threads and fds grew at most "
         + (f"{max(x['threads_growth'] for x in others):g} and "
            f"{max(x['fds_growth'] for x in others):g}" if others else "–")),
        ("replica start to SERVING", f"{min(ready):.2f}–{max(ready):.2f} s over {len(ready)} starts"),
    ]
    lines = [f"{report['minutes']:g} minutes on {report['machine']}, {when}: "
             f"{'every check passed' if report['ok'] else 'NOT every check passed'}.", "",
             "| check | result |", "|---|---|"]
    lines += [f"| {name} | {value} |" for name, value in rows]
    return "\n".join(lines) + "\n"


DOCS = REPO / "docs" / "operations.md"
DOCS_PICTURE = REPO / "docs" / "images" / "soak.png"
BEGIN, END = "<!-- soak report: begin -->", "<!-- soak report: end -->"


def update_docs(out: Path) -> None:
    """Puts the report's table between the markers of docs/operations.md
    and its picture at docs/images/soak.png."""
    text = DOCS.read_text()
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    picture = "\n![The latest soak: throughput, calls and memory, with the faults]" \
              "(images/soak.png)\n"
    DOCS.write_text(f"{head}{BEGIN}\n{(out / 'report.md').read_text()}{picture}{END}{tail}")
    DOCS_PICTURE.parent.mkdir(exist_ok=True)
    shutil.copyfile(out / "soak.png", DOCS_PICTURE)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=30)
    parser.add_argument("--out", type=Path, default=REPO / "build" / "soak")
    parser.add_argument("--chunkd", type=Path, default=REPO / "build/server/chunkd")
    parser.add_argument("--chunkctl", type=Path, default=REPO / "build/clients/cli/chunkctl")
    parser.add_argument("--chunkd-go", type=Path, default=REPO / "build/tools/bin/chunkd-go")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--docs", action="store_true",
                        help="also show the report in docs/operations.md")
    args = parser.parse_args()
    # A SIGTERM (a CI job cancelled, `kill`) tears the fleet down as Ctrl-C does.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(128 + signal.SIGTERM))
    config = Config(args.minutes, args.out, args.chunkd, args.chunkctl, args.chunkd_go,
                    seed=args.seed)
    report = Soak(config).run()
    write_report(report, args.out)
    if args.docs:
        update_docs(args.out)
    summary = {name: c["ok"] for name, c in report["checks"].items()}
    print(json.dumps({"ok": report["ok"], "checks": summary,
                      "faults": report["fault_counts"]}, indent=1))
    print(f"soak: report in {args.out / 'report.json'}")
    return 0 if report["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
