"""The crash test of the RocksDB index: chunkd killed with SIGKILL at
seeded random points of a mixed Dedup/Release workload and started again on
the same directory, for each `sync` mode (always, batch, none);
docs/operations.md ("What an acknowledged Dedup survives") states what it
checks. (CHUNKD_CRASH_MODES=redis runs the same on a redis-server, which a
chunkd kill leaves alone: a check of the harness on another backend.)

WRITERS threads each run a seeded sequence of operations on fingerprints of
their own (blocks of seeded random bytes that no other writer has) in one
namespace: Dedup streams of a few of their blocks (repeats included), each
with a stream_id, and Releases of some of the fingerprints they hold, each
with a request_id. Each writer keeps the model of its fingerprints'
reference counts after its acknowledged operations, each applied once, in
order; as no other writer touches them, every answer is known in advance:
a record's is_new (the count before it was 0) and each count a Release
leaves.

An event is a SIGKILL (now and then a SIGTERM instead) after a seeded
number of records and Release answers since the last event, and a seeded
pause (at most MAX_EVENT_DELAY). Meanwhile no operation starts; the
operations the event cut are sent again, with the same stream_id or
request_id, once chunkd serves again, as often as they are cut. The
writer whose record or answer reached the kill point waits until the
signal is sent, its stream's bytes held back (Pacer): the kill finds that
stream with some batches applied and answered, maybe more applied and not
yet answered, and (unless it was near its end) bytes not yet sent; an
operation answered before the signal is sent again all the same. Checks:

- after each restart, before anything is sent again: every fingerprint the
  model holds is there (FindMissing), but those of a Release in flight, and
  so is every fingerprint of a record that the stream in flight received;
- every answer, replays included, is the model's: a replay counts nothing
  twice and answers as the first run would have;
- at the end: each fingerprint is released as often as the model counts
  it, the counts left must be the model's, count - 1 ... 0, and then none
  is there. A lost reference ends a count early, a doubled one leaves it
  above 0; a batch half applied (its counts without its write tokens, or
  the tokens without the counts) shows as one or the other once its
  stream is sent again.

No check depends on where an event falls or how fast anything runs.
CHUNKD_CRASH_SEED picks the data, each writer's operations and the kill
points (counted in records and answers; which operation of which writer
they fall in depends on the threads' pace);
CHUNKD_CRASH_KILLS is the number of SIGKILLs per mode (`make crash-test
KILLS=n` sets it).
"""

from __future__ import annotations

import functools
import hashlib
import os
import random
import shutil
import sys
import threading
import time
from collections import Counter
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Set, Union

import grpc
import pytest

from chunkd_client import ChunkdError, Client
from chunkd_client.testing import ChunkdServer

from durability_util import (EVERYTHING, SETTLE, assert_table_states, chunkd_binary,
                             close_after_polling)

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "e2e"))
from redis_util import RedisServer  # noqa: E402

SEED = int(os.environ.get("CHUNKD_CRASH_SEED", "29"))
KILLS = int(os.environ.get("CHUNKD_CRASH_KILLS", "20"))
WRITERS = 2
BLOCKS_PER_WRITER = 16
BLOCK_SIZE = 256 << 10
#: Blocks per Dedup stream, least and most.
BLOCKS_PER_STREAM = (4, 16)
PARAMS: Dict[str, Any] = dict(algorithm="fastcdc", min_size=2048, avg_size=8192,
                              max_size=32768)
#: Messages of at least 4 * (256 + max_size) bytes: the chunker runs on
#: each (server/include/chunkd/chunker.h), and with RapidCDC hints (the
#: default) each is one index batch, so a stream is many batches.
MESSAGE_SIZE = 160 << 10
#: How far the bytes sent may run ahead of the records (Pacer).
PACING_LAG = 2 * MESSAGE_SIZE
#: The share of Releases among the operations, while the writer has a
#: stream to release and fewer than MAX_BACKUPS; and of the events that are
#: a SIGTERM.
RELEASE_SHARE = 0.4
MAX_BACKUPS = 6
TERM_SHARE = 0.1
#: Records and Release answers between two events, at most (at least 1),
#: then a pause of at most MAX_EVENT_DELAY seconds.
MAX_PROGRESS_BETWEEN_EVENTS = 1000
MAX_EVENT_DELAY = 0.02
#: Deadline of one attempt of a call, seconds.
RPC_TIMEOUT = 60.0
#: Bounds, never reached: attempts of one operation, operations of one
#: writer, events per SIGKILL asked for.
MAX_ATTEMPTS = 1000
MAX_OPS = 100_000
MAX_EVENTS_PER_KILL = 10


class Aborted(Exception):
    """Raised in a writer when another thread failed."""


@dataclass
class Op:
    """One operation of a writer: a Dedup stream of `data` or a Release of
    `fingerprints`; `id` is its stream_id or request_id."""

    id: str
    data: bytes = b""
    fingerprints: List[bytes] = field(default_factory=list)

    @property
    def is_release(self) -> bool:
        return bool(self.fingerprints)


@dataclass
class Figures:
    """What a run did and found."""

    kills: int = 0
    terms: int = 0
    cut_streams: int = 0  # Dedup attempts an event cut
    cut_after_records: int = 0  # ... after the stream had received records
    cut_releases: int = 0
    #: Operations sent again although acknowledged: the event came before
    #: the writer took the answer in (as a client that lost it would).
    replayed_streams: int = 0
    replayed_releases: int = 0
    acknowledged: int = 0  # references the acknowledged Dedup streams added
    released: int = 0  # ... and Releases dropped, both as the model counts them
    checked_after_restarts: int = 0  # fingerprints looked for after restarts
    missing_after_restarts: int = 0
    references: int = 0  # acknowledged references released at the end
    lost: int = 0
    doubled: int = 0
    wrong_answers: int = 0  # answers, during the run and at the end, not the model's
    left_over: int = 0  # fingerprints still there after the end's releases

    def add(self, other: "Figures") -> None:
        for f in fields(self):
            setattr(self, f.name, getattr(self, f.name) + getattr(other, f.name))


class Gate:
    """chunkd as the writers see it: open while it serves. The generation
    counts the events and is raised before the signal, so that an attempt
    knows whether an event cut it. Progress counts the records and Release
    answers received; the writer whose record or answer reaches the kill
    point waits there until the signal is sent, so that the event finds
    its call in flight. Holds the first failure of a writer."""

    def __init__(self, writers: int) -> None:
        self._cond = threading.Condition()
        self.generation = 0
        self.progress = 0
        self.kill_at: Optional[int] = None
        self.signals = 0
        self.is_open = True
        self.stopping = False
        self.parked = 0
        self.running = writers
        self.failure: Optional[BaseException] = None

    def _wait(self, predicate: Callable[[], bool], what: str) -> None:
        """Waits (holding the lock) for `predicate` or a failure."""
        ok = self._cond.wait_for(lambda: predicate() or self.failure is not None, SETTLE)
        if self.failure is not None:
            raise Aborted() from self.failure
        assert ok, f"timed out waiting for {what}"

    # The writers' side.

    def enter(self) -> int:
        """Waits until chunkd serves; returns the generation."""
        with self._cond:
            if not self.is_open:
                self.parked += 1
                self._cond.notify_all()
                try:
                    self._wait(lambda: self.is_open, "chunkd to serve again")
                finally:
                    self.parked -= 1
            return self.generation

    def cut(self, generation: int) -> bool:
        with self._cond:
            return self.generation != generation

    def advance(self, n: int) -> None:
        """Counts `n` records or answers; at the kill point, waits for the
        signal."""
        with self._cond:
            self.progress += n
            if self.kill_at is not None and self.progress >= self.kill_at:
                self.kill_at = None
                self._cond.notify_all()
                signals = self.signals
                self._wait(lambda: self.signals > signals, "the signal")

    def exit(self, failure: Optional[BaseException]) -> None:
        with self._cond:
            self.running -= 1
            if failure is not None and self.failure is None:
                self.failure = failure
            self._cond.notify_all()

    # The test's side.

    def wait_progress(self, more: int) -> None:
        """Until a writer received `more` records or answers; it then waits
        for the signal."""
        with self._cond:
            self.kill_at = self.progress + more
            self._wait(lambda: self.kill_at is None, f"progress {self.kill_at}")

    def close(self) -> None:
        with self._cond:
            self.is_open = False
            self.generation += 1

    def signalled(self) -> None:
        with self._cond:
            self.signals += 1
            self._cond.notify_all()

    def wait_parked(self) -> None:
        """Until every writer waits for chunkd (none is in a call)."""
        with self._cond:
            self._wait(lambda: self.parked == self.running, "the writers to park")

    def reopen(self) -> None:
        with self._cond:
            self.is_open = True
            self._cond.notify_all()

    def stop(self) -> None:
        """Lets every writer end its operation in flight, and waits for
        them to end."""
        with self._cond:
            self.stopping = True
            self._wait(lambda: self.running == 0, "the writers to end")

    def abort(self) -> None:
        with self._cond:
            if self.failure is None:
                self.failure = Aborted("the test ended")
            self._cond.notify_all()


class Pacer:
    """Holds a Dedup stream's bytes back until the records cover all but
    the last PACING_LAG bytes sent, so that a kill always finds batches of
    the stream applied and bytes of it not yet sent. The records never stay
    that far behind: every message of MESSAGE_SIZE bytes makes the chunker
    run, and a chunk is final once max_size bytes after its start have
    arrived (server/include/chunkd/chunker.h, StreamChunker)."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._covered = 0

    def messages(self, data: bytes) -> Iterator[bytes]:
        for offset in range(0, len(data), MESSAGE_SIZE):
            with self._cond:
                assert self._cond.wait_for(
                    lambda: self._covered >= offset - PACING_LAG, SETTLE), (
                    f"the records stopped at byte {self._covered}, {offset} sent")
            yield data[offset:offset + MESSAGE_SIZE]

    def cover(self, end: int) -> None:
        with self._cond:
            self._covered = end
            self._cond.notify_all()


class Writer:
    """One thread of seeded operations on fingerprints of its own, and
    their model: the reference counts after its acknowledged operations.
    A Release drops the references of one earlier Dedup stream, as a
    client that deletes a backup would."""

    def __init__(self, number: int, seed: int, namespace: str, address: str,
                 gate: Gate) -> None:
        self.rng = random.Random(seed)
        self.blocks = [self.rng.randbytes(BLOCK_SIZE) for _ in range(BLOCKS_PER_WRITER)]
        self.name = f"{namespace}-w{number}"
        self.namespace = namespace
        self.address = address
        self.gate = gate
        self.lock = threading.Lock()  # the model, inflight and received
        self.counts: Counter = Counter()
        self.known: Set[bytes] = set()  # every fingerprint it ever sent
        self.backups: List[List[bytes]] = []  # streams acknowledged, not released
        self.inflight: Optional[Op] = None
        self.received: Set[bytes] = set()  # records the stream in flight received
        self.figures = Figures()
        self.wrong: List[str] = []
        self._client: Optional[Client] = None
        self._client_generation = -1
        self.thread = threading.Thread(target=self._run, name=self.name, daemon=True)

    def _run(self) -> None:
        failure: Optional[BaseException] = None
        try:
            for n in range(MAX_OPS):
                if self.gate.stopping:
                    break
                self.perform(self.next_op(n))
        except Aborted:
            pass
        except BaseException as e:  # raised again in the test's thread
            failure = e
        finally:
            if self._client is not None:
                self._client.close()
            self.gate.exit(failure)

    def next_op(self, n: int) -> Op:
        """The n-th operation: depends on the seed and the model only."""
        op_id = f"{self.name}-{n}"
        if self.backups and (len(self.backups) >= MAX_BACKUPS
                             or self.rng.random() < RELEASE_SHARE):
            fingerprints = self.backups.pop(self.rng.randrange(len(self.backups)))
            gone = sorted(fp for fp in self.known if self.counts[fp] == 0)
            if gone and self.rng.random() < 0.5:  # one not there: answered 0
                fingerprints = fingerprints + [self.rng.choice(gone)]
            return Op(op_id, fingerprints=fingerprints)
        count = self.rng.randint(*BLOCKS_PER_STREAM)
        return Op(op_id, data=b"".join(self.rng.choice(self.blocks) for _ in range(count)))

    def client(self, generation: int) -> Client:
        """A client per generation: no channel waits out a reconnection
        backoff begun while chunkd was down."""
        if self._client_generation != generation:
            if self._client is not None:
                self._client.close()
            self._client = Client(self.address, timeout=RPC_TIMEOUT)
            self._client_generation = generation
        assert self._client is not None
        return self._client

    def perform(self, op: Op) -> None:
        """Sends `op` until it is acknowledged, again with its id after
        each event that cuts it, or that comes before the writer takes the
        answer in; then checks the answers against the model and applies
        it."""
        with self.lock:
            self.inflight = op
        for _ in range(MAX_ATTEMPTS):
            generation = self.gate.enter()
            try:
                answers = self.attempt(op, self.client(generation))
            except ChunkdError as e:
                if (e.code in (grpc.StatusCode.DATA_LOSS, grpc.StatusCode.INVALID_ARGUMENT)
                        or not self.gate.cut(generation)):
                    raise
                self.count_cut(op)
                continue
            if self.gate.cut(generation):
                with self.lock:
                    if op.is_release:
                        self.figures.replayed_releases += 1
                    else:
                        self.figures.replayed_streams += 1
                continue  # sent again: it must count nothing twice
            self.apply(op, answers)
            return
        raise AssertionError(f"{op.id}: cut {MAX_ATTEMPTS} times")

    def attempt(self, op: Op, client: Client) -> list:
        if op.is_release:
            counts = client.release(self.namespace, op.fingerprints, request_id=op.id,
                                    timeout=RPC_TIMEOUT)
            self.gate.advance(len(counts))
            return counts
        records = []
        pacer = Pacer()
        try:
            with client.dedup(pacer.messages(op.data), namespace=self.namespace,
                              stream_id=op.id, message_size=MESSAGE_SIZE,
                              timeout=RPC_TIMEOUT, **PARAMS) as stream:
                for record in stream:
                    records.append(record)
                    pacer.cover(record.offset + record.length)
                    with self.lock:
                        self.received.add(record.fingerprint)
                    self.gate.advance(1)
        finally:
            pacer.cover(len(op.data))  # lets a sender still waiting go
        return records

    def count_cut(self, op: Op) -> None:
        with self.lock:
            if op.is_release:
                self.figures.cut_releases += 1
            else:
                self.figures.cut_streams += 1
                self.figures.cut_after_records += bool(self.received)

    def apply(self, op: Op, answers: list) -> None:
        with self.lock:
            if op.is_release:
                for fp, left in zip(op.fingerprints, answers):
                    self.figures.released += self.counts[fp] > 0
                    self.counts[fp] = max(0, self.counts[fp] - 1)
                    self.expect(left == self.counts[fp], op, fp, f"left {left}")
            else:
                check_records(op, answers)
                for r in answers:
                    self.expect(r.is_new == (self.counts[r.fingerprint] == 0), op,
                                r.fingerprint, f"is_new {r.is_new}")
                    self.counts[r.fingerprint] += 1
                    self.known.add(r.fingerprint)
                self.figures.acknowledged += len(answers)
                self.backups.append([r.fingerprint for r in answers])
            self.inflight = None
            self.received = set()

    def expect(self, ok: bool, op: Op, fp: bytes, what: str) -> None:
        if not ok:
            self.figures.wrong_answers += 1
            self.wrong.append(f"{op.id} {fp.hex()[:16]}: {what}, model "
                              f"{self.counts[fp]}")

    def must_be_there(self) -> Set[bytes]:
        """What the index must hold now, at a restart: every fingerprint
        the model holds, but those of a Release in flight, and those of the
        records the stream in flight received."""
        with self.lock:
            held = {fp for fp, count in self.counts.items() if count > 0}
            if self.inflight is not None and self.inflight.is_release:
                held.difference_update(self.inflight.fingerprints)
            return held | self.received


def check_records(op: Op, records: Sequence) -> None:
    """The records cover the stream's bytes, each with its SHA-256."""
    offset = 0
    for r in records:
        assert r.offset == offset and r.length > 0, (op.id, r)
        assert r.fingerprint == hashlib.sha256(op.data[offset:offset + r.length]).digest()
        offset += r.length
    assert offset == len(op.data), op.id


def release_to_zero(client: Client, writer: Writer) -> Figures:
    """The end's check of one writer's fingerprints: released as often as
    the model counts them, the counts left the model's (count - 1 ... 0);
    the references held found from the first Release's answers."""
    found = Figures()
    known = sorted(writer.known)
    absent = set(client.find_missing(writer.namespace, known))
    present = [fp for fp in known if fp not in absent]
    held = dict.fromkeys(known, 0)
    model = writer.counts
    rounds = max([model[fp] for fp in known] + [1])
    for j in range(1, rounds + 1):
        batch = [fp for fp in present if model[fp] >= j or j == 1]
        left = client.release(writer.namespace, batch, request_id=f"{writer.name}-end-{j}",
                              timeout=RPC_TIMEOUT)
        for fp, count in zip(batch, left):
            if j == 1:
                held[fp] = count + 1
            found.wrong_answers += count != max(0, model[fp] - j)
    found.references = sum(model[fp] for fp in known)
    found.lost = sum(max(0, model[fp] - held[fp]) for fp in known)
    found.doubled = sum(max(0, held[fp] - model[fp]) for fp in known)
    found.left_over = len(known) - len(client.find_missing(writer.namespace, known))
    return found


class Run:
    """chunkd on one index, the writers, the events and the checks."""

    def __init__(self, server: ChunkdServer, namespace: str, rng: random.Random) -> None:
        self.server = server
        self.namespace = namespace
        self.rng = rng
        self.gate = Gate(WRITERS)
        self.figures = Figures()
        self.writers = [Writer(n, rng.randrange(1 << 32), namespace, server.address,
                               self.gate) for n in range(WRITERS)]

    def go(self, kills: int) -> Figures:
        for w in self.writers:
            w.thread.start()
        try:
            for _ in range(MAX_EVENTS_PER_KILL * kills):
                if self.figures.kills >= kills:
                    break
                self.event()
            self.gate.stop()
        except Aborted:
            pass  # a writer failed: raised below
        finally:
            self.gate.abort()
            for w in self.writers:
                w.thread.join(SETTLE)
        assert not any(w.thread.is_alive() for w in self.writers), "a writer hangs"
        failure = self.gate.failure
        if failure is not None and not isinstance(failure, Aborted):
            raise failure
        with Client(self.server.address, timeout=RPC_TIMEOUT) as client:
            for w in self.writers:
                self.figures.add(w.figures)
                self.figures.add(release_to_zero(client, w))
        return self.figures

    def event(self) -> None:
        """Waits for a seeded progress and pause; kills (or terminates)
        chunkd, starts it again on the same index, checks what must be
        there before any writer goes on."""
        self.gate.wait_progress(self.rng.randint(1, MAX_PROGRESS_BETWEEN_EVENTS))
        time.sleep(self.rng.uniform(0.0, MAX_EVENT_DELAY))
        term = self.rng.random() < TERM_SHARE
        process = self.server.process
        assert process is not None
        self.gate.close()
        if term:
            process.terminate()
            self.gate.signalled()
            assert process.wait(SETTLE) == 0, f"exit {process.returncode} after SIGTERM"
            self.figures.terms += 1
        else:
            process.kill()
            self.gate.signalled()
            process.wait(SETTLE)  # reaped: its files and locks are let go
            self.figures.kills += 1
        self.server.restart()
        self.gate.wait_parked()
        self.check_after_restart()
        self.gate.reopen()

    def check_after_restart(self) -> None:
        client = Client(self.server.address, timeout=RPC_TIMEOUT)
        try:
            for w in self.writers:
                there = sorted(w.must_be_there())
                missing = client.find_missing(self.namespace, there)
                self.figures.checked_after_restarts += len(there)
                self.figures.missing_after_restarts += len(missing)
        finally:
            close_after_polling(client)


# --- the index modes ------------------------------------------------------


class RocksDbIndex:
    """The RocksDB index in `directory`, with the given sync mode."""

    def __init__(self, directory: Path, sync: str) -> None:
        self.directory = directory
        self.sync = sync

    def start(self) -> None:
        pass  # chunkd creates the directory

    def index_spec(self) -> str:
        return f"rocksdb://{self.directory}?sync={self.sync}"

    def cleanup(self) -> None:
        shutil.rmtree(self.directory, ignore_errors=True)


class RedisIndex:
    """A redis-server without persistence, which a chunkd kill leaves
    alone: the harness's check on another backend (not run by default)."""

    def __init__(self, directory: Path) -> None:
        self.redis = RedisServer()

    def start(self) -> None:
        self.redis.start()

    def index_spec(self) -> str:
        return f"redis://{self.redis.address}"

    def cleanup(self) -> None:
        self.redis.cleanup()


IndexMode = Union[RocksDbIndex, RedisIndex]

#: Per index mode: its row in the docs' table, and how to make it.
MODES: Dict[str, "tuple[str, Callable[[Path], IndexMode]]"] = {
    sync: (f"rocksdb, sync={sync}", functools.partial(RocksDbIndex, sync=sync))
    for sync in ("always", "batch", "none")
}
MODES["redis"] = ("redis, no persistence", RedisIndex)
#: The modes a run tests (CHUNKD_CRASH_MODES, comma-separated).
RUN_MODES = os.environ.get("CHUNKD_CRASH_MODES", "always,batch,none").split(",")

#: The cells this file checks, as docs/operations.md states them.
TABLE = {(MODES[mode][0], event): EVERYTHING for mode in MODES
         for event in ("chunkd SIGKILL", "chunkd SIGTERM")}


@pytest.mark.parametrize("mode", RUN_MODES)
def test_acknowledged_references_survive_kills(mode: str, tmp_path: Path) -> None:
    _, make = MODES[mode]
    index = make(tmp_path / "index")
    try:
        index.start()
        server = ChunkdServer(chunkd_binary(), index=index.index_spec(),
                              extra_args=["--shutdown_grace=10s"])
        try:
            server.start()
            run = Run(server, f"crash-{mode}-{SEED}", random.Random(f"{SEED}:{mode}"))
            figures = run.go(KILLS)
        finally:
            server.stop()
    finally:
        index.cleanup()
    print(f"\n{mode}: {figures}")
    wrong = [line for w in run.writers for line in w.wrong]
    assert figures.kills == KILLS, figures
    assert (figures.lost, figures.doubled, figures.wrong_answers, figures.left_over,
            figures.missing_after_restarts) == (0, 0, 0, 0, 0), (figures, wrong[:10])


def test_the_table_in_the_docs_states_what_this_checks() -> None:
    assert_table_states(TABLE)
