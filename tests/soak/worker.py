"""One soak client process: several lanes (threads, or asyncio tasks),
each a tenant's client that runs a seeded mix of operations through one
multi-address target with the client's default settings plus `retries`,
checks every answer against the expected chunks and its tenant's model,
and logs one JSON line per operation.

    python worker.py KIND NAME --target T --expected E --log L --control D
        [--lanes N] [--seed S] [--chunkctl P] [--chunkd-go P]

KIND: "sync" (chunkd_client.Client, a thread per lane), "async"
(chunkd_client.aio.AsyncClient, a task per lane) or "cli" (lanes running
chunkctl and chunkd-go, a process per operation).

Each lane owns one namespace (only it writes there, so its model is exact
and every is_new and Release count is predicted before the answer comes)
and also writes into the namespace every worker shares, where no one
releases: there each fingerprint must be new exactly once over all
clients, which the orchestrator checks from the logs.

The control directory: the file "pause" makes every lane finish its
operation and wait (each lane says so with a file "paused-NAME-LANE");
"stop" makes them finish and exit.
"""

from __future__ import annotations

import argparse
import asyncio
import inspect
import json
import os
import random
import subprocess
import sys
import threading
import time
from collections import Counter, deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Deque, Dict, List, Optional, Sequence, Tuple

sys.path.insert(0, str(Path(__file__).resolve().parent))

from workload import DEDUP_PARAM_SETS, PARAM_SETS, Expected, param_set  # noqa: E402

SHARED_NAMESPACE = "soak-shared"
#: What the clients add to their default settings.
RETRIES = 30
#: A bound on every call, so that the soak ends whatever happens; far
#: above any call's duration (a call that reaches it is a failure).
CALL_TIMEOUT = 300.0
#: The mix of operations (weights).
MIX = (("chunk", 30), ("dedup", 25), ("dedup_shared", 15), ("find_missing", 15),
       ("release", 10), ("info", 5))
CLI_MIX = (("chunk", 40), ("dedup", 35), ("dedup_shared", 15), ("info", 10))
#: Backups a tenant keeps before it releases its oldest.
KEEP_BACKUPS = 2
VERSION = (Path(__file__).resolve().parents[2] / "VERSION").read_text().strip()


@dataclass
class Plan:
    """One operation and what its answer must be."""

    op: str
    ns: str = ""
    file: str = ""
    params: str = ""
    fingerprints: List[str] = field(default_factory=list)  # find_missing, release
    expect: Any = None


@dataclass
class Outcome:
    """A normalized answer."""

    rows: List[Tuple[int, int, str]] = field(default_factory=list)
    is_new: List[bool] = field(default_factory=list)
    summary: Dict[str, int] = field(default_factory=dict)
    values: List[Any] = field(default_factory=list)  # missing fps, counts, version
    replays: int = 0


class Lane:
    """One tenant's client: plans operations, predicts and checks answers."""

    def __init__(self, worker: str, index: int, expected: Expected, seed: int,
                 mix: Sequence[Tuple[str, int]]) -> None:
        self.name = f"{worker}-{index}"
        self.ns = f"soak-{self.name}"
        self.expected = expected
        self.rng = random.Random(f"{seed}-{self.name}")
        self.ops, self.weights = zip(*mix)
        self.counts: Counter = Counter()  # this tenant's references
        self.backups: Deque[Tuple[str, str]] = deque()  # (file, params) not released
        self.next_version: Dict[int, int] = {}
        self.shared_known: List[str] = []  # fps this lane acknowledged in the shared ns
        self.projects = sorted({int(n[1:].split("-")[0]) for n in expected.files})
        self.versions = 1 + max(int(n.split("-v")[1]) for n in expected.files)
        self.tainted = False  # the model is unknown after a failed write

    # Planning.

    def plan(self) -> Plan:
        op = self.rng.choices(self.ops, self.weights)[0]
        if op == "release" and len(self.backups) <= KEEP_BACKUPS:
            op = "dedup"
        if op == "find_missing" and not self.counts:
            op = "dedup"
        return getattr(self, f"_plan_{op}")()

    def _random_file(self) -> str:
        return self.rng.choice(sorted(self.expected.files))

    def _plan_chunk(self) -> Plan:
        return Plan("chunk", file=self._random_file(),
                    params=self.rng.choice(PARAM_SETS).name)

    def _plan_dedup(self) -> Plan:
        # Backups of one project, version after version: hints are followed.
        project = self.rng.choice(self.projects)
        version = self.next_version.get(project, 0)
        self.next_version[project] = (version + 1) % self.versions
        params = "fastcdc" if self.rng.random() < 0.8 else DEDUP_PARAM_SETS[1]
        return Plan("dedup", ns=self.ns, file=f"p{project}-v{version}", params=params)

    def _plan_dedup_shared(self) -> Plan:
        return Plan("dedup_shared", ns=SHARED_NAMESPACE, file=self._random_file(),
                    params="fastcdc")

    def _random_fps(self, n: int) -> List[str]:
        return [self.rng.randbytes(32).hex() for _ in range(n)]

    def _plan_find_missing(self) -> Plan:
        if self.shared_known and self.rng.random() < 0.4:
            known = self.rng.sample(self.shared_known, min(100, len(self.shared_known)))
            absent = self._random_fps(10)
            asked = known + absent
            self.rng.shuffle(asked)
            return Plan("find_missing", ns=SHARED_NAMESPACE, fingerprints=asked,
                        expect=[fp for fp in asked if fp in set(absent)])
        known = self.rng.sample(sorted(self.counts), min(100, len(self.counts)))
        asked = known + self._random_fps(10)
        self.rng.shuffle(asked)
        return Plan("find_missing", ns=self.ns, fingerprints=asked,
                    expect=[fp for fp in asked if self.counts[fp] == 0])

    def _plan_release(self) -> Plan:
        file, params = self.backups[0]
        return Plan("release", ns=self.ns, file=file, params=params,
                    fingerprints=self.expected.fingerprints(params, file))

    def _plan_info(self) -> Plan:
        return Plan("info")

    # Checking (the model moves only on success).

    def check(self, plan: Plan, out: Outcome) -> List[str]:
        """What is wrong with the answer; updates the model. Once a write
        of this tenant failed (and may have been applied in part), its
        counts are unknown: answers that depend on them are not judged."""
        problems = getattr(self, f"_check_{plan.op}")(plan, out)
        if self.tainted and plan.ns == self.ns and plan.op != "chunk":
            return [p for p in problems if "first difference" in p]
        return problems

    def _check_rows(self, plan: Plan, out: Outcome) -> List[str]:
        want = self.expected.chunks[plan.params][plan.file]
        if out.rows == want:
            return []
        first = next((i for i, (a, b) in enumerate(zip(out.rows, want)) if a != b),
                     min(len(out.rows), len(want)))
        return [f"{plan.op} {plan.file} {plan.params}: {len(out.rows)} chunks, want "
                f"{len(want)}; first difference at chunk {first}"]

    def _check_chunk(self, plan: Plan, out: Outcome) -> List[str]:
        problems = self._check_rows(plan, out)
        want = self.expected.chunks[plan.params][plan.file]
        if out.summary and out.summary.get("total_chunks") != len(want):
            problems.append(f"chunk summary {out.summary}, want {len(want)} chunks")
        return problems

    def _check_dedup(self, plan: Plan, out: Outcome) -> List[str]:
        problems = self._check_rows(plan, out)
        want_new, new_bytes = [], 0
        for _, length, fp in self.expected.chunks[plan.params][plan.file]:
            want_new.append(self.counts[fp] == 0)
            if self.counts[fp] == 0:
                new_bytes += length
            self.counts[fp] += 1
        self.backups.append((plan.file, plan.params))
        if out.is_new and out.is_new != want_new:
            problems.append(f"dedup {plan.file}: is_new differs from the model at "
                            f"{sum(a != b for a, b in zip(out.is_new, want_new))} chunks")
        summary = {"total_chunks": len(want_new), "unique_chunks": sum(want_new),
                   "unique_bytes": new_bytes}
        for key, value in summary.items():
            if out.summary.get(key, value) != value:
                problems.append(f"dedup {plan.file}: {key} {out.summary[key]}, want {value}")
        return problems

    def _check_dedup_shared(self, plan: Plan, out: Outcome) -> List[str]:
        problems = self._check_rows(plan, out)
        self.shared_known.extend(self.expected.fingerprints(plan.params, plan.file))
        self.shared_known = sorted(set(self.shared_known))
        return problems

    def _check_find_missing(self, plan: Plan, out: Outcome) -> List[str]:
        if out.values == plan.expect:
            return []
        return [f"find_missing in {plan.ns}: {len(out.values)} missing, want "
                f"{len(plan.expect)} (missing but acknowledged: "
                f"{len(set(out.values) - set(plan.expect))})"]

    def _check_release(self, plan: Plan, out: Outcome) -> List[str]:
        want = []
        for fp in plan.fingerprints:
            self.counts[fp] -= 1
            want.append(self.counts[fp])
        self.backups.popleft()
        if out.values == want:
            return []
        return [f"release {plan.file}: counts differ from the model at "
                f"{sum(a != b for a, b in zip(out.values, want))} of {len(want)}"]

    def _check_info(self, plan: Plan, out: Outcome) -> List[str]:
        return [] if out.values == [VERSION] else [f"info: version {out.values}"]


# The Python clients.

def _chunk_kwargs(client_chunk: Any, on_replay: Any) -> Dict[str, Any]:
    """retries for Chunk where the client has them."""
    if "retries" in inspect.signature(client_chunk).parameters:
        return {"retries": RETRIES, "on_replay": on_replay}
    return {}


def _stream_kwargs(plan: Plan, on_replay: Any) -> Dict[str, Any]:
    kwargs: Dict[str, Any] = dict(param_set(plan.params).params(), timeout=CALL_TIMEOUT)
    if plan.op != "chunk":
        kwargs.update(namespace=plan.ns, retries=RETRIES, on_replay=on_replay)
    return kwargs


def _outcome(plan: Plan, records: Sequence[Any], summary: Any, replays: int) -> Outcome:
    out = Outcome(rows=[(r.offset, r.length, r.fingerprint.hex()) for r in records],
                  replays=replays)
    out.summary = {k: getattr(summary, k) for k in
                   ("total_bytes", "total_chunks", "unique_bytes", "unique_chunks")
                   if hasattr(summary, k)}
    if plan.op != "chunk":
        out.is_new = [r.is_new for r in records]
    return out


def run_sync(client: Any, plan: Plan, expected: Expected) -> Outcome:
    replays: List[Any] = []

    def on_replay(error: Any, delay: float) -> None:
        replays.append(error)

    path = expected.files.get(plan.file, "")
    if plan.op == "chunk":
        records, summary = client.chunk_all(
            path, **_stream_kwargs(plan, on_replay), **_chunk_kwargs(client.chunk, on_replay))
        return _outcome(plan, records, summary, len(replays))
    if plan.op in ("dedup", "dedup_shared"):
        records, summary = client.dedup_all(path, **_stream_kwargs(plan, on_replay))
        return _outcome(plan, records, summary, len(replays))
    if plan.op == "find_missing":
        missing = client.find_missing(plan.ns, [bytes.fromhex(f) for f in plan.fingerprints],
                                      timeout=CALL_TIMEOUT)
        return Outcome(values=[m.hex() for m in missing])
    if plan.op == "release":
        return Outcome(values=client.release(
            plan.ns, [bytes.fromhex(f) for f in plan.fingerprints], timeout=CALL_TIMEOUT))
    return Outcome(values=[client.server_info(timeout=CALL_TIMEOUT).version])


async def run_async(client: Any, plan: Plan, expected: Expected) -> Outcome:
    replays: List[Any] = []

    def on_replay(error: Any, delay: float) -> None:
        replays.append(error)

    path = expected.files.get(plan.file, "")
    if plan.op == "chunk":
        records, summary = await client.chunk_all(
            path, **_stream_kwargs(plan, on_replay), **_chunk_kwargs(client.chunk, on_replay))
        return _outcome(plan, records, summary, len(replays))
    if plan.op in ("dedup", "dedup_shared"):
        records, summary = await client.dedup_all(path, **_stream_kwargs(plan, on_replay))
        return _outcome(plan, records, summary, len(replays))
    if plan.op == "find_missing":
        missing = await client.find_missing(
            plan.ns, [bytes.fromhex(f) for f in plan.fingerprints], timeout=CALL_TIMEOUT)
        return Outcome(values=[m.hex() for m in missing])
    if plan.op == "release":
        return Outcome(values=await client.release(
            plan.ns, [bytes.fromhex(f) for f in plan.fingerprints], timeout=CALL_TIMEOUT))
    return Outcome(values=[(await client.server_info(timeout=CALL_TIMEOUT)).version])


# The command-line clients.

class CliRunner:
    """Runs one CLI (chunkctl or chunkd-go) per operation."""

    def __init__(self, binary: str, target: str) -> None:
        self.binary = binary
        self.target = target
        help_text = subprocess.run([binary, "chunk", "--help"], capture_output=True,
                                   timeout=60).stdout.decode()
        self.chunk_retries = "--retries" in help_text

    def __call__(self, plan: Plan, expected: Expected) -> Outcome:
        base = [self.binary, plan.op.split("_")[0], "--server", self.target,
                "--timeout", str(int(CALL_TIMEOUT))]
        if plan.op == "info":
            return Outcome(values=[json.loads(self._run(base + ["--json"]))["version"]])
        flags = list(param_set(plan.params).flags)
        if plan.op == "chunk":
            retries = ["--retries", str(RETRIES)] if self.chunk_retries else []
            text = self._run(base + flags + retries + [expected.files[plan.file]])
            return Outcome(rows=[_row(line) for line in text.splitlines()],
                           replays=self.replays())
        text = self._run(base + flags + ["--namespace", plan.ns, "--retries", str(RETRIES),
                                         "--json", expected.files[plan.file]])
        first = json.loads(text.splitlines()[0])
        rows = expected.chunks[plan.params][plan.file]  # the CLI prints no records
        return Outcome(rows=rows, replays=self.replays(), summary={
            "total_bytes": first["bytes"], "total_chunks": first["chunks"],
            "unique_bytes": first["unique_bytes"], "unique_chunks": first["unique_chunks"]})

    def replays(self) -> int:
        """The replays the last command announced on stderr."""
        return self.last_stderr.count("; sending it again in ")

    def _run(self, command: List[str]) -> str:
        result = subprocess.run(command, capture_output=True, stdin=subprocess.DEVNULL,
                                timeout=CALL_TIMEOUT + 60)
        self.last_stderr = result.stderr.decode(errors="replace")
        if result.returncode != 0:
            raise CliError(self.last_stderr.strip().splitlines()[-1:] or
                           [f"exit {result.returncode}"])
        return result.stdout.decode()


class CliError(Exception):
    pass


def _row(line: str) -> Tuple[int, int, str]:
    offset, length, fp = line.split(",")
    return int(offset), int(length), fp


# The loop of a lane.

class Log:
    def __init__(self, path: Path) -> None:
        self._file = path.open("a")
        self._lock = threading.Lock()

    def write(self, entry: Dict[str, Any]) -> None:
        with self._lock:
            self._file.write(json.dumps(entry, separators=(",", ":")) + "\n")
            self._file.flush()


class Control:
    def __init__(self, directory: Path) -> None:
        self.dir = directory

    def stopping(self) -> bool:
        return (self.dir / "stop").exists()

    def paused(self) -> bool:
        return (self.dir / "pause").exists() and not self.stopping()

    def mark(self, lane: str, paused: bool) -> None:
        marker = self.dir / f"paused-{lane}"
        if paused:
            marker.touch()
        else:
            marker.unlink(missing_ok=True)


def entry(lane: Lane, plan: Plan, t0: float, t1: float, out: Optional[Outcome],
          error: str, problems: List[str]) -> Dict[str, Any]:
    e: Dict[str, Any] = {"t0": t0, "t1": t1, "lane": lane.name, "op": plan.op,
                         "ns": plan.ns, "file": plan.file, "params": plan.params,
                         "ok": not error, "error": error, "problems": problems}
    if out is not None:
        e["bytes"] = sum(length for _, length, _ in out.rows)
        e["chunks"] = len(out.rows)
        e["replays"] = out.replays
        if plan.op == "dedup_shared":
            if out.is_new:
                e["new_fps"] = [fp for (_, _, fp), new in zip(out.rows, out.is_new) if new]
            else:
                e["unique_chunks"] = out.summary.get("unique_chunks", 0)
        if plan.op in ("dedup", "dedup_shared"):
            e["dup_chunks"] = len(out.rows) - (
                sum(out.is_new) if out.is_new else out.summary.get("unique_chunks", 0))
        if plan.op in ("find_missing", "release"):
            e["fingerprints"] = len(plan.fingerprints)
    return e


def finish(lane: Lane, plan: Plan, t0: float, out: Optional[Outcome], error: str,
           log: Log) -> None:
    problems = lane.check(plan, out) if out is not None else []
    if error and plan.op in ("dedup", "release"):
        lane.tainted = True  # partly applied, perhaps: the model is unknown now
    log.write(entry(lane, plan, t0, time.time(), out, error, problems))


def describe(e: BaseException) -> str:
    code = getattr(e, "code", None)
    name = code().name if callable(code) else type(e).__name__
    return f"{name}: {e}"


def sync_lane(lane: Lane, run: Any, control: Control, log: Log) -> None:
    while not control.stopping():
        if control.paused():
            control.mark(lane.name, True)
            time.sleep(0.05)
            continue
        control.mark(lane.name, False)
        plan, t0 = lane.plan(), time.time()
        out, error = None, ""
        try:
            out = run(plan)
        except Exception as e:  # every failure is logged, then the lane goes on
            error = describe(e)
        finish(lane, plan, t0, out, error, log)


async def async_lane(lane: Lane, client: Any, expected: Expected, control: Control,
                     log: Log) -> None:
    while not control.stopping():
        if control.paused():
            control.mark(lane.name, True)
            await asyncio.sleep(0.05)
            continue
        control.mark(lane.name, False)
        plan, t0 = lane.plan(), time.time()
        out, error = None, ""
        try:
            out = await run_async(client, plan, expected)
        except Exception as e:
            error = describe(e)
        finish(lane, plan, t0, out, error, log)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("kind", choices=["sync", "async", "cli"])
    parser.add_argument("name")
    parser.add_argument("--target", required=True)
    parser.add_argument("--expected", type=Path, required=True)
    parser.add_argument("--log", type=Path, required=True)
    parser.add_argument("--control", type=Path, required=True)
    parser.add_argument("--lanes", type=int, default=2)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--chunkctl", default="")
    parser.add_argument("--chunkd-go", default="")
    args = parser.parse_args()
    expected = Expected.load(args.expected)
    control, log = Control(args.control), Log(args.log)
    if args.kind == "async":
        asyncio.run(_async_main(args, expected, control, log))
        return
    threads = []
    if args.kind == "sync":
        from chunkd_client import Client
        client = Client(args.target)
        for i in range(args.lanes):
            lane = Lane(args.name, i, expected, args.seed, MIX)
            threads.append(threading.Thread(target=sync_lane, args=(
                lane, lambda plan: run_sync(client, plan, expected), control, log)))
    else:
        for i, binary in enumerate([args.chunkctl, args.chunkd_go]):
            runner = CliRunner(binary, args.target)
            lane = Lane(f"{args.name}-{Path(binary).name}", i, expected, args.seed, CLI_MIX)
            threads.append(threading.Thread(target=sync_lane, args=(
                lane, lambda plan, r=runner: r(plan, expected), control, log)))
    for t in threads:
        t.start()
    for t in threads:
        t.join()


async def _async_main(args: argparse.Namespace, expected: Expected, control: Control,
                      log: Log) -> None:
    from chunkd_client.aio import AsyncClient
    async with AsyncClient(args.target) as client:
        await asyncio.gather(*[
            async_lane(Lane(args.name, i, expected, args.seed, MIX), client, expected,
                       control, log)
            for i in range(args.lanes)])


if __name__ == "__main__":
    os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "0")
    main()
