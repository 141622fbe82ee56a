"""What an acknowledged Dedup survives, per index mode and event: the table
of docs/operations.md ("What an acknowledged Dedup survives"), checked
against the real chunkd and real redis-server processes on loopback.

Per mode, a few cycles. In each, two threads Dedup seeded files
continuously into a namespace of the cycle, each stream with a stream_id
and the client's `retries`. At a seeded point (after a seeded number of
acknowledged streams and a seeded pause; before a kill that may lose the
last seconds, after more seconds than those) the test kills or stops the
process of the event (chunkd, Redis, a cluster master) and starts it again.
No new stream begins meanwhile; every thread then ends one more stream, and
the streams that failed for good are sent again with their stream_id. Then,
from Redis directly and through FindMissing:

- "everything acknowledged": every reference of every acknowledged stream
  is there and the counts are exact, no more and no less than the model of
  what was acknowledged, and each fingerprint was reported new exactly
  once; the namespaces of earlier cycles are checked again;
- "nothing": every fingerprint of the streams acknowledged before the
  event is missing (those of files streamed after it are left out), and
  so is everything of earlier cycles;
- AOF everysec, Redis killed: nothing counted twice or unacknowledged, and
  a reference missing only if its stream was acknowledged within the last
  EVERYSEC_WINDOW seconds before the kill (Redis writes its AOF before it
  replies, except while a background fsync is slow: then it postpones the
  write for up to 2 s and replies anyway).

Two of the cluster's failovers first stop the victim's replica and cut its
replication link, as a partition would: what chunkd acknowledges then
reached the master alone, and is lost with it, unless chunkd waited for
the replica (`WAIT`).

No check depends on how fast anything runs: the kill point is random and
every invariant holds wherever it falls. SEED (environment
CHUNKD_DURABILITY_SEED) picks the points and the data.
"""

from __future__ import annotations

import hashlib
import os
import random
import re
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence, Set

import grpc
import pytest

from chunkd_client import ChunkdError, Client
from chunkd_client.testing import ChunkdServer

from durability_util import (EVERYTHING, NOTHING, SETTLE, assert_table_states,
                             bounded_wait, chunkd_binary, close_after_polling)

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "e2e"))
from redis_util import (FAILOVER_NODE_TIMEOUT_MS, RedisCluster, RedisServer, Resp,  # noqa: E402
                        read_counts)

SEED = int(os.environ.get("CHUNKD_DURABILITY_SEED", "27"))
THREADS = 2
FILES_PER_THREAD = 3  # at least 3: see Workload.lost_before
FILE_SIZES = (192 << 10, 768 << 10)
PARAMS = dict(algorithm="fastcdc", min_size=2048, avg_size=8192, max_size=32768)
MESSAGE_SIZE = 64 << 10
#: Replays per stream by the client (backoff 0.1 s doubling to 2 s): they
#: span a restart or a failover; what is left the test sends again.
RETRIES = 10
#: Deadline of one attempt of a call, seconds.
RPC_TIMEOUT = 60.0
#: Streams one thread may run in one cycle at most (a bound, never reached).
MAX_STREAMS = 500
#: AOF everysec, Redis killed: the loss Redis allows. It postpones the
#: write of its AOF buffer while a background fsync runs, for up to 2 s of
#: its clock, which it reads in whole seconds and refreshes every 100 ms
#: (hz 10), and replies meanwhile: 2 s plus a margin for that clock.
EVERYSEC_WINDOW = 2.5

LAST_2S = "all but the last ~2 s"
FAILOVER_OR_AOF = "a failover, or as the nodes' AOF"

#: The cells this file checks, as the table of docs/operations.md states
#: them (row and column headings without their backticks; a cell begins
#: with the words given): (index mode, event) -> what survives. Every cell
#: but the machine-crash column's.
TABLE = {
    ("memory", "chunkd SIGKILL"): NOTHING,
    ("memory", "chunkd SIGTERM"): NOTHING,
    ("redis, no persistence", "chunkd SIGKILL"): EVERYTHING,
    ("redis, no persistence", "chunkd SIGTERM"): EVERYTHING,
    ("redis, no persistence", "Redis SIGKILL"): NOTHING,
    ("redis, no persistence", "Redis SIGTERM"): NOTHING,
    ("redis, AOF everysec", "chunkd SIGKILL"): EVERYTHING,
    ("redis, AOF everysec", "chunkd SIGTERM"): EVERYTHING,
    ("redis, AOF everysec", "Redis SIGKILL"): LAST_2S,
    ("redis, AOF everysec", "Redis SIGTERM"): EVERYTHING,
    ("redis, AOF always", "chunkd SIGKILL"): EVERYTHING,
    ("redis, AOF always", "chunkd SIGTERM"): EVERYTHING,
    ("redis, AOF always", "Redis SIGKILL"): EVERYTHING,
    ("redis, AOF always", "Redis SIGTERM"): EVERYTHING,
    ("redis-cluster", "chunkd SIGKILL"): EVERYTHING,
    ("redis-cluster", "chunkd SIGTERM"): EVERYTHING,
    ("redis-cluster", "Redis SIGKILL"): FAILOVER_OR_AOF,  # its nodes: everysec
    ("redis-cluster", "Redis SIGTERM"): EVERYTHING,
    ("redis-cluster", "master SIGKILL, failover"): EVERYTHING,
}


# --- the workload ---------------------------------------------------------


@dataclass
class Stream:
    """One Dedup stream: its thread and file, when it began and was
    acknowledged (the client's clock), its records once acknowledged, its
    last error."""

    stream_id: str
    thread: int
    file: int
    started: float
    acked: Optional[float] = None
    records: list = field(default_factory=list)
    error: Optional[ChunkdError] = None


class Files:
    """THREADS x FILES_PER_THREAD files of seeded random bytes, distinct
    contents (so no chunk is shared between files), with their chunks."""

    def __init__(self, seed: int) -> None:
        rng = random.Random(seed)
        self.data: List[bytes] = []
        for _ in range(THREADS * FILES_PER_THREAD):
            size = rng.randint(*FILE_SIZES)
            self.data.append(rng.randbytes(size))
        self.fingerprints: Dict[int, List[bytes]] = {}  # from the first stream

    def of_thread(self, thread: int) -> List[int]:
        return list(range(thread * FILES_PER_THREAD, (thread + 1) * FILES_PER_THREAD))

    def check(self, stream: Stream) -> None:
        """The records cover the file, each with the SHA-256 of its bytes,
        and cut it as every other stream of the file did."""
        data = self.data[stream.file]
        offset = 0
        for r in stream.records:
            assert r.offset == offset and r.length > 0, (stream.stream_id, r)
            assert r.fingerprint == hashlib.sha256(data[offset:offset + r.length]).digest()
            offset += r.length
        assert offset == len(data), stream.stream_id
        fps = [r.fingerprint for r in stream.records]
        assert self.fingerprints.setdefault(stream.file, fps) == fps, stream.stream_id


class Workload:
    """THREADS threads, each sending its files in turn into `namespace`,
    every stream with a new stream_id and `retries`. `hold()` (at the
    event) lets no new stream begin; `finish()` (once the process runs
    again) lets each thread end one more stream begun after that, then
    sends every stream that failed again with its stream_id."""

    def __init__(self, client: Client, files: Files, namespace: str, tag: str) -> None:
        self.client = client
        self.files = files
        self.namespace = namespace
        self.tag = tag
        self.streams: List[Stream] = []
        self._restarted: Optional[float] = None
        self._go = threading.Event()
        self._go.set()
        self._lock = threading.Lock()
        self._failures: List[BaseException] = []
        self._threads = [threading.Thread(target=self._run, args=(t,), daemon=True)
                         for t in range(THREADS)]

    def __enter__(self) -> "Workload":
        for t in self._threads:
            t.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._restarted is None:  # stop, whatever happened
            self._restarted = time.monotonic()
            self._go.set()
        for t in self._threads:
            t.join(SETTLE)
        assert not any(t.is_alive() for t in self._threads), "a workload thread hangs"

    def dedup(self, stream: Stream) -> None:
        """Sends the stream's file; on success sets its records and when it
        was acknowledged, else its error."""
        try:
            records, _ = self.client.dedup_all(
                self.files.data[stream.file], namespace=self.namespace,
                stream_id=stream.stream_id, retries=RETRIES, timeout=RPC_TIMEOUT,
                message_size=MESSAGE_SIZE, **PARAMS)
        except ChunkdError as e:
            assert e.code not in (grpc.StatusCode.DATA_LOSS,
                                  grpc.StatusCode.INVALID_ARGUMENT), e
            stream.error = e
            return
        stream.records, stream.acked, stream.error = records, time.monotonic(), None
        self.files.check(stream)

    def _run(self, thread: int) -> None:
        try:
            mine = self.files.of_thread(thread)
            for n in range(MAX_STREAMS):
                if not self._go.wait(SETTLE):
                    raise TimeoutError("the event did not end")
                stream = Stream(f"{self.tag}-t{thread}-{n}", thread, mine[n % len(mine)],
                                time.monotonic())
                with self._lock:
                    self.streams.append(stream)
                self.dedup(stream)
                if self._restarted is not None and stream.started > self._restarted:
                    return
        except BaseException as e:  # raised again by wait_acked / finish
            self._failures.append(e)

    def wait_acked(self, count: int) -> None:
        """Until `count` streams were acknowledged, at least one per thread."""
        def reached() -> bool:
            if self._failures:
                raise self._failures[0]
            with self._lock:
                acked = [s for s in self.streams if s.acked is not None]
            return len(acked) >= count and len({s.thread for s in acked}) == THREADS
        bounded_wait(reached, f"{count} acknowledged streams")

    def wait_since_first_ack(self, seconds: float) -> None:
        """Until the first acknowledgement is `seconds` old."""
        first = min(s.acked for s in self.streams if s.acked is not None)
        time.sleep(max(0.0, first + seconds - time.monotonic()))

    def hold(self) -> None:
        self._go.clear()

    def finish(self) -> None:
        self._restarted = time.monotonic()
        self._go.set()
        self.__exit__()
        if self._failures:
            raise self._failures[0]
        for stream in self.streams:
            deadline = time.monotonic() + SETTLE
            while stream.acked is None:
                assert time.monotonic() < deadline, f"{stream.stream_id}: {stream.error}"
                self.dedup(stream)

    def lost_before(self, event: float) -> Set[bytes]:
        """The fingerprints of the streams acknowledged before `event`,
        less those of files streamed (or in flight) after it. Never empty:
        each thread had one acknowledged, and after the event ends at most
        two more (the one in flight and one more), of its other files."""
        after = {s.file for s in self.streams if s.acked >= event}
        return {r.fingerprint for s in self.streams
                if s.acked < event and s.file not in after for r in s.records}


# --- what the index holds -------------------------------------------------


class Namespace:
    """One cycle's namespace: the streams sent into it, and the reference
    counts the index must hold (the model of what was acknowledged).
    `lossy` once an event lost some of it (AOF everysec)."""

    def __init__(self, name: str, streams: Sequence[Stream]) -> None:
        self.name = name
        self.streams = list(streams)
        self.expected = Counter(r.fingerprint for s in streams for r in s.records)
        self.lossy = False


class Index:
    """Reads the index of one mode: the counts straight from Redis (None
    for the memory index) and the missing fingerprints through chunkd."""

    def __init__(self, target: str, redis_ports: Optional[Callable[[], List[int]]]) -> None:
        self.target = target
        self.redis_ports = redis_ports

    def counts(self, namespace: str) -> Optional[Dict[bytes, int]]:
        if self.redis_ports is None:
            return None
        return read_counts(self.redis_ports(), namespace)[0]

    def missing(self, namespace: str, fingerprints: Sequence[bytes]) -> Set[bytes]:
        with Client(self.target, timeout=RPC_TIMEOUT) as client:
            return set(client.find_missing(namespace, fingerprints))

    def assert_everything(self, ns: Namespace) -> None:
        """Every acknowledged reference there, the counts exact."""
        assert ns.expected, "nothing was acknowledged"
        counts = self.counts(ns.name)
        if counts is not None:
            wrong = {fp.hex()[:16]: (counts.get(fp), n) for fp, n in ns.expected.items()
                     if counts.get(fp) != n}
            extra = [fp.hex()[:16] for fp in counts if fp not in ns.expected]
            assert not wrong and not extra, (
                f"{ns.name}: (held, acknowledged) {wrong}; not acknowledged {extra}")
        assert not self.missing(ns.name, list(ns.expected)), ns.name
        if not ns.lossy:
            self.assert_new_once(ns)

    @staticmethod
    def assert_new_once(ns: Namespace) -> None:
        """Each fingerprint was reported new exactly once, replays included
        (a replay answers as the first attempt would have)."""
        new = Counter(r.fingerprint for s in ns.streams for r in s.records if r.is_new)
        twice = [fp.hex()[:16] for fp, n in new.items() if n != 1]
        never = [fp.hex()[:16] for fp in ns.expected if fp not in new]
        assert not twice and not never, f"{ns.name}: new twice {twice}, never {never}"

    def assert_nothing(self, namespace: str, lost: Set[bytes]) -> None:
        """None of `lost` is in the index."""
        assert lost, "no stream to check was acknowledged before the event"
        assert self.missing(namespace, list(lost)) == lost, namespace
        counts = self.counts(namespace)
        if counts is not None:
            assert not lost & set(counts), namespace

    def assert_everysec_bound(self, ns: Namespace, killed: float) -> int:
        """Nothing counted twice or unacknowledged; a reference missing
        only when its stream was acknowledged within EVERYSEC_WINDOW
        seconds before the kill (or after it: its writes came before).
        Returns the references lost; what Redis holds becomes the model."""
        counts = self.counts(ns.name)
        assert counts is not None
        may_lose = Counter(r.fingerprint for s in ns.streams
                           if s.acked > killed - EVERYSEC_WINDOW for r in s.records)
        for fp, n in ns.expected.items():
            held = counts.get(fp, 0)
            assert held <= n, f"{ns.name}: {fp.hex()} counted {held} > {n}"
            assert n - held <= may_lose[fp], (
                f"{ns.name}: {fp.hex()} lost {n - held} references acknowledged "
                f"more than {EVERYSEC_WINDOW} s before the kill")
        assert set(counts) <= set(ns.expected), f"{ns.name}: unacknowledged entries"
        lost = sum(ns.expected.values()) - sum(counts.values())
        if lost:
            ns.lossy = True
            ns.expected = Counter(counts)
        else:
            self.assert_everything(ns)
        return lost


# --- the processes and events of each mode --------------------------------


def pause(process: subprocess.Popen, stopped: bool) -> None:
    os.kill(process.pid, signal.SIGSTOP if stopped else signal.SIGCONT)


def terminate(process: subprocess.Popen) -> None:
    """SIGTERM; waits for the exit, which must be clean."""
    process.terminate()
    assert process.wait(SETTLE) == 0, f"exit {process.returncode} after SIGTERM"


class Mode:
    """The processes of one index mode and its events (this class: chunkd
    with the memory index). An event calls `kill_point` just before it
    signals the process, and returns once that runs again (and a cluster
    is healthy)."""

    name = "memory"

    def __init__(self, chunkd_bin: Path) -> None:
        self.chunkd = ChunkdServer(chunkd_bin, index=self.index_spec(),
                                   extra_args=["--shutdown_grace=20s"])

    def index_spec(self) -> str:
        return "memory"

    def redis_ports(self) -> Optional[Callable[[], List[int]]]:
        return None

    def start(self) -> None:
        self.chunkd.start()

    def cleanup(self) -> None:
        self.chunkd.stop()

    def index(self) -> Index:
        return Index(self.chunkd.address, self.redis_ports())

    def event(self, name: str, rng: random.Random, kill_point: Callable[[], None]) -> None:
        process = self.chunkd.process
        kill_point()
        if name == "chunkd SIGKILL":
            process.kill()
            process.wait(SETTLE)
        else:
            assert name == "chunkd SIGTERM", name
            terminate(process)
        self.chunkd.restart()


class SingleRedis(Mode):
    """One redis-server started with `redis_args` (none: no persistence,
    `appendonly no`, `save ""`), chunkd on it."""

    def __init__(self, chunkd_bin: Path, name: str, redis_args: Sequence[str]) -> None:
        self.name = name
        self.redis = RedisServer(persistent=bool(redis_args), extra_args=redis_args)
        super().__init__(chunkd_bin)

    def index_spec(self) -> str:
        return f"redis://{self.redis.address}"

    def redis_ports(self) -> Optional[Callable[[], List[int]]]:
        return lambda: [self.redis.port]

    def start(self) -> None:
        self.redis.start()
        super().start()

    def cleanup(self) -> None:
        super().cleanup()
        self.redis.cleanup()

    def event(self, name: str, rng: random.Random, kill_point: Callable[[], None]) -> None:
        if not name.startswith("Redis"):
            return super().event(name, rng, kill_point)
        kill_point()
        if name == "Redis SIGKILL":
            self.redis.kill()
        else:
            assert name == "Redis SIGTERM", name
            terminate(self.redis.process)
        self.redis.restart()


class Cluster(Mode):
    """3 masters with a replica each (RedisCluster: AOF on every node, node
    timeout 1 s); chunkd WAITs for the replica."""

    name = "redis-cluster"

    def __init__(self, chunkd_bin: Path) -> None:
        self.cluster = RedisCluster(3, node_timeout_ms=FAILOVER_NODE_TIMEOUT_MS)
        for node in self.cluster.nodes:
            # A replica's full resynchronisation starts at once, not after
            # the default 5 s wait for more replicas.
            node.extra_args += ["--appendfsync", "everysec",
                                "--repl-diskless-sync-delay", "0"]
        self.promoted: Optional[int] = None  # the master of the last failover
        super().__init__(chunkd_bin)

    def index_spec(self) -> str:
        return self.cluster.spec

    def redis_ports(self) -> Optional[Callable[[], List[int]]]:
        return self.cluster.master_ports

    def start(self) -> None:
        self.cluster.start()
        self.wait_settled()
        super().start()

    def cleanup(self) -> None:
        super().cleanup()
        self.cluster.cleanup()

    @staticmethod
    def replicas(master_port: int) -> List[int]:
        """The ports of the replicas that master serves (state online)."""
        with Resp(master_port) as r:
            info = r.call("INFO", "replication").decode()
        return [int(p) for p in
                re.findall(r"^slave\d+:ip=[^,]*,port=(\d+),state=online", info, re.M)]

    def replica_of(self, master_port: int) -> RedisServer:
        ports = self.replicas(master_port)
        assert len(ports) == 1, (master_port, ports)
        return self.cluster.node(ports[0])

    def wait_settled(self) -> None:
        """Until the cluster is healthy and every master serves one
        replica again."""
        self.cluster.wait_healthy(SETTLE)
        bounded_wait(lambda: all(len(self.replicas(p)) == 1
                                 for p in self.cluster.master_ports()),
                     "a replica for every master")

    def event(self, name: str, rng: random.Random, kill_point: Callable[[], None]) -> None:
        """chunkd's events; "Redis ..." a master killed or stopped and
        started again at once; "master SIGKILL, failover" a master killed,
        started again once its replica took over."""
        if name.startswith("chunkd"):
            return super().event(name, rng, kill_point)
        masters = self.cluster.master_ports()
        # A master promoted by the previous failover first: its replica
        # joined it after chunkd had last read the cluster's map.
        port = self.promoted if self.promoted in masters else rng.choice(masters)
        victim = self.cluster.node(port)
        if name.startswith("Redis"):
            kill_point()
            if name == "Redis SIGKILL":
                victim.kill()
            else:
                assert name == "Redis SIGTERM", name
                terminate(victim.process)
            victim.restart()
            self.promoted = None
        else:
            self.fail_over(victim, name.endswith("replica stalled"), rng, kill_point)
        self.wait_settled()

    def fail_over(self, victim: RedisServer, stall: bool, rng: random.Random,
                  kill_point: Callable[[], None]) -> None:
        """Kills `victim` (after stopping its replica and cutting their
        link, if `stall`), waits for its replica to take over, starts it
        again as the new master's replica."""
        replica = self.replica_of(victim.port)
        if stall:
            pause(replica.process, True)
            self.cut_replication(victim.port)
            time.sleep(rng.uniform(0.1, 0.6))
        kill_point()
        victim.kill()
        pause(replica.process, False)
        self.cluster.wait_healthy(SETTLE)
        assert replica.port in self.cluster.master_ports()
        self.promoted = replica.port
        victim.restart()

    @staticmethod
    def cut_replication(port: int) -> None:
        """Closes the master's link to its (stopped) replica, as a network
        partition would: what the master writes from now on stays in its
        memory and dies with it, unless chunkd waited for the replica."""
        with Resp(port) as r:
            assert r.call("CLIENT", "KILL", "TYPE", "replica") == 1


# --- the cycles -----------------------------------------------------------

#: Per mode: how to make its processes, and the events of its cycles, in
#: order. The cluster's stalled-replica kills stop the victim's replica
#: first, so that what chunkd acknowledges before the kill reached the
#: master alone unless chunkd waited for the replica.
MODES = {
    "memory": (Mode, ["chunkd SIGKILL", "chunkd SIGTERM", "chunkd SIGKILL"]),
    "redis": (lambda b: SingleRedis(b, "redis, no persistence", []),
              ["chunkd SIGKILL", "Redis SIGKILL", "chunkd SIGTERM", "Redis SIGTERM"]),
    "everysec": (lambda b: SingleRedis(b, "redis, AOF everysec",
                                       ["--appendfsync", "everysec"]),
                 ["Redis SIGKILL", "chunkd SIGKILL", "Redis SIGTERM", "Redis SIGKILL",
                  "chunkd SIGTERM"]),
    "always": (lambda b: SingleRedis(b, "redis, AOF always", ["--appendfsync", "always"]),
               ["Redis SIGKILL", "chunkd SIGKILL", "Redis SIGTERM", "Redis SIGKILL",
                "chunkd SIGTERM"]),
    "cluster": (Cluster, ["master SIGKILL, failover",
                          "master SIGKILL, failover, replica stalled",
                          "chunkd SIGKILL", "Redis SIGTERM", "Redis SIGKILL",
                          "master SIGKILL, failover, replica stalled", "chunkd SIGTERM"]),
}


def cell(mode: Mode, event: str) -> str:
    return TABLE[(mode.name, event.replace(", replica stalled", ""))]


def run_cycle(mode: Mode, client: Client, files: Files, event: str, namespace: str,
              rng: random.Random) -> "tuple[Workload, float]":
    """One cycle: the workload, the event at a seeded point, the workload's
    end. Returns the workload and when the event began. Before an event
    that may lose the last seconds, the workload runs longer than those,
    so that the check has older acknowledgements to find."""
    with Workload(client, files, namespace, namespace) as workload:
        workload.wait_acked(rng.randint(THREADS, 3 * THREADS))
        if cell(mode, event) in (LAST_2S, FAILOVER_OR_AOF):
            workload.wait_since_first_ack(EVERYSEC_WINDOW + rng.uniform(0.0, 1.0))
        time.sleep(rng.uniform(0.0, 0.25))
        began: List[float] = []

        def kill_point() -> None:
            workload.hold()
            began.append(time.monotonic())

        mode.event(event, rng, kill_point)
        workload.finish()
    return workload, began[0]


def check_cycle(index: Index, what: str, ns: Namespace, workload: Workload,
                began: float, earlier: List[Namespace]) -> List[Namespace]:
    """Checks this cycle's namespace and the earlier ones that must still
    be there; returns the namespaces that must be there from now on."""
    if what == NOTHING:
        index.assert_nothing(ns.name, workload.lost_before(began))
        for old in earlier:
            index.assert_nothing(old.name, set(old.expected))
        return []
    for old in earlier + [ns]:
        if what == EVERYTHING:
            index.assert_everything(old)
        else:  # LAST_2S, or FAILOVER_OR_AOF of nodes with AOF everysec
            index.assert_everysec_bound(old, began)
    return earlier + [ns]


@pytest.mark.parametrize("mode_name", list(MODES))
def test_what_an_acknowledged_dedup_survives(mode_name: str) -> None:
    make, events = MODES[mode_name]
    rng = random.Random(f"{SEED}:{mode_name}")
    files = Files(rng.randrange(1 << 32))
    mode = make(chunkd_binary())
    try:
        mode.start()
        index = mode.index()
        live: List[Namespace] = []
        client = Client(mode.chunkd.address, timeout=RPC_TIMEOUT)
        try:
            for k, event in enumerate(events):
                namespace = f"{mode_name}-{SEED}-{k}"
                workload, began = run_cycle(mode, client, files, event, namespace, rng)
                ns = Namespace(namespace, workload.streams)
                live = check_cycle(index, cell(mode, event), ns, workload, began, live)
        finally:
            close_after_polling(client)
    finally:
        mode.cleanup()


def test_a_replica_back_after_a_failover_is_waited_for() -> None:
    """After a failover chunkd's slot map gives the new master no replica
    (it was read while the old master was down); the old master then
    rejoins as its replica, which causes no MOVED. What chunkd acknowledges
    from then on must be on that replica too: stopped and cut off, it makes
    writes fail, and the master's death loses nothing acknowledged: with
    the failed stream replayed, the counts are exact."""
    mode = Cluster(chunkd_binary())
    files = Files(SEED)
    acknowledged: List[list] = []

    def dedup(client: Client, n: int, retries: int = RETRIES) -> None:
        records, _ = client.dedup_all(
            files.data[n], namespace="back", stream_id=f"back-{n}", retries=retries,
            timeout=RPC_TIMEOUT, message_size=MESSAGE_SIZE, **PARAMS)
        acknowledged.append(records)

    try:
        mode.start()
        client = Client(mode.chunkd.address, timeout=RPC_TIMEOUT)
        try:
            victim = mode.cluster.node(mode.cluster.master_ports()[0])
            promoted = mode.replica_of(victim.port)
            victim.kill()
            mode.cluster.wait_healthy(SETTLE)  # failed over, the victim down
            dedup(client, 0)  # chunkd reads the map again
            victim.restart()
            mode.wait_settled()  # the victim is the new master's replica
            dedup(client, 1)
            dedup(client, 2)
            pause(victim.process, True)
            Cluster.cut_replication(promoted.port)
            try:
                dedup(client, 3, retries=0)
            except ChunkdError as e:
                assert e.code == grpc.StatusCode.UNAVAILABLE, e
                assert "not confirmed" in e.message, e
            promoted.kill()
            pause(victim.process, False)
            mode.cluster.wait_healthy(SETTLE)  # the victim is master again
            if len(acknowledged) == 3:
                dedup(client, 3)  # the failed stream, replayed
        finally:
            close_after_polling(client)
        counts, _ = read_counts(mode.cluster.master_ports(), "back")
        assert counts == Counter(r.fingerprint for rs in acknowledged for r in rs)
    finally:
        mode.cleanup()


def test_the_table_in_the_docs_is_the_one_tested() -> None:
    """docs/operations.md states each cell this file checks."""
    assert_table_states(TABLE)
