"""The replays of Chunk and Dedup streams (``retries``, ``--retries``)
against a real chunkd killed and restarted mid-stream, or whose streams a
relay resets, by the Python client and the three command-line clients.

For Dedup, chunkd keeps its index in a real Redis (redis_util), so the
references a stream committed before the server was killed survive it, as
do the write tokens of its ``stream_id``. The stream is killed mid-way
(SIGKILL, after the client has received records), chunkd restarts on the
same port, and the client replays the source: the caller gets every record
once, and the reference counts Redis holds equal those of one clean run.
Chunk replays give the records of one clean run, each once, in order; a
source whose bytes change before the replay ends with DATA_LOSS.

Every stream goes through a relay (chunkd_client.testing.Relay) that holds
its upload after the first megabytes, so the stream is still open when the
test acts, whatever the machine's speed (a fast server would otherwise
have chunked and answered all of it before the client read its first
records). For a restart the relay freezes the connection while chunkd is
killed and restarted, then cuts it: the client replays once, on the
restarted chunkd. A relay that resets the streams with RST_STREAM CANCEL,
as a proxy dropping them does, makes the clients see a CANCELLED they did
not cause, which they replay too.
"""

from __future__ import annotations

import asyncio
import collections
import os
import random
import re
import signal
import subprocess
import threading
import time
import uuid
from pathlib import Path
from typing import Any, Callable, Iterator, List, Optional, Tuple

import grpc
import pytest

from chunkd_client import ChunkdError, Client
from chunkd_client.aio import AsyncClient
from chunkd_client.testing import ChunkdServer, Relay, serving

from clients_util import chunkd_client, chunkd_go
from e2e_util import RPC_TIMEOUT, SUBPROCESS_TIMEOUT
from redis_util import RedisServer, read_counts

DATA = random.Random(31337).randbytes(16 << 20)
#: The records the client has received when the server is killed.
KILL_AFTER = 64
#: Seconds any wait of these tests may take.
WAIT = 60.0


def dedups_started(server: ChunkdServer) -> int:
    match = re.search(r'^grpc_server_started_total\{grpc_method="Dedup",[^}]*\} (\S+)$',
                      server.metrics(), re.MULTILINE)
    assert match is not None
    return int(float(match.group(1)))


#: ``open_stream(client, on_replay)``: a stream of ``client`` with retries.
OpenStream = Callable[[Any, Callable[[ChunkdError, float], None]], Any]
#: What a run of a stream gives: the records yielded, the summary or the
#: error that ended it, and the failures replayed.
Outcome = Tuple[List[Any], Any, List[ChunkdError]]


def sync_run(address: str, open_stream: OpenStream, each: Callable[[int], None]) -> Outcome:
    """Iterates the stream ``open_stream`` makes on a Client, calling
    ``each`` with the count of records so far."""
    heard: List[ChunkdError] = []
    records: List[Any] = []
    with Client(address, timeout=RPC_TIMEOUT) as client:
        try:
            with open_stream(client, lambda e, _: heard.append(e)) as stream:
                for record in stream:
                    records.append(record)
                    each(len(records))
                return records, stream.summary, heard
        except ChunkdError as e:
            return records, e, heard


def async_run(address: str, open_stream: OpenStream, each: Callable[[int], None]) -> Outcome:
    """sync_run on an AsyncClient."""
    async def main() -> Outcome:
        heard: List[ChunkdError] = []
        records: List[Any] = []
        async with AsyncClient(address, timeout=RPC_TIMEOUT) as client:
            try:
                async with open_stream(client, lambda e, _: heard.append(e)) as stream:
                    async for record in stream:
                        records.append(record)
                        each(len(records))
                    return records, stream.summary, heard
            except ChunkdError as e:
                return records, e, heard

    return asyncio.run(main())


def chunked(source: Any) -> OpenStream:
    return lambda client, on_replay: client.chunk(source, retries=3, on_replay=on_replay)


#: The bytes of a stream the relays pass before they hold its upload.
HOLD_AFTER = 4 << 20


def through_a_holding_relay(server: ChunkdServer, run, open_stream: OpenStream,
                            fault: Callable[[Relay], None]) -> Outcome:
    """``run``s the stream through a relay that holds its upload after
    HOLD_AFTER bytes; at the KILL_AFTER-th record, a thread calls
    ``fault(relay)`` while the client goes on reading: the stream is
    certainly under way then (about 250 records are held back)."""
    relay = Relay(server.address, refuse=0, hold_upload_after=HOLD_AFTER, timeout=WAIT)
    faults: List[threading.Thread] = []
    failed: List[BaseException] = []

    def run_fault() -> None:
        try:
            fault(relay)
        except BaseException as e:  # reported below
            failed.append(e)
            relay.cut()  # the client must not wait on a frozen relay

    def each(count: int) -> None:
        if count == KILL_AFTER:
            faults.append(threading.Thread(target=run_fault, daemon=True))
            faults[0].start()

    try:
        outcome = run(relay.address, open_stream, each)
    finally:
        for thread in faults:
            thread.join(WAIT)
        relay.close()
    assert faults, f"the stream ended before its record {KILL_AFTER}: {outcome[1]}"
    assert not faults[0].is_alive(), f"the fault did not end within {WAIT} s"
    if failed:
        raise failed[0]
    return outcome


def assert_cut_once(run, replayed: List[ChunkdError]) -> None:
    """The relay's cut was replayed, once: UNAVAILABLE, or with grpc.aio
    INTERNAL ("Internal error from Core") when the cut fails the write it
    has in flight."""
    codes = ({grpc.StatusCode.UNAVAILABLE} if run is sync_run else
             {grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.INTERNAL})
    assert len(replayed) == 1 and replayed[0].code() in codes, replayed


@pytest.mark.parametrize("run", [sync_run, async_run], ids=["sync", "async"])
def test_dedup_retries_across_a_server_restart(chunkd_bin: Path, redis: RedisServer,
                                               run) -> None:
    reference_ns, namespace = f"once-{uuid.uuid4().hex}", f"replayed-{uuid.uuid4().hex}"
    with ChunkdServer(chunkd_bin, index=f"redis://{redis.address}") as server:
        with Client(server.address, timeout=RPC_TIMEOUT) as client:
            reference = client.dedup_all(DATA, namespace=reference_ns)
        # The references the killed attempt committed: the replay must not
        # count them again.
        committed_at_kill: List[int] = []
        records, summary, replayed = through_a_holding_relay(
            server, run,
            lambda client, on_replay: client.dedup(DATA, namespace=namespace, retries=3,
                                                   on_replay=on_replay),
            restart_and_cut(server, lambda: committed_at_kill.append(
                len(read_counts([redis.port], namespace)[0]))))
        # Killed mid-stream with references committed (the records received
        # were), replayed once on the restarted server.
        assert_cut_once(run, replayed)
        assert 0 < committed_at_kill[0] < len(set(r.fingerprint for r in records))
        assert dedups_started(server) == 1

    # Every record once, in order, as one clean run returns them (is_new
    # included: the stream_id makes the server answer as the first attempt
    # would have); the summary is the replay's, the same as a clean run's.
    assert records == reference[0] and summary == reference[1]
    # The counts in Redis: those of one run.
    counts, _ = read_counts([redis.port], namespace)
    reference_counts, _ = read_counts([redis.port], reference_ns)
    assert counts == reference_counts
    assert counts == dict(collections.Counter(r.fingerprint for r in records))


# --- Chunk across a server restart (the Python client) -----------------------


@pytest.fixture
def restartable(chunkd_bin: Path) -> Iterator[ChunkdServer]:
    """A chunkd of the test's own, to kill and restart."""
    yield from serving(ChunkdServer(chunkd_bin))


@pytest.mark.parametrize("run", [sync_run, async_run], ids=["sync", "async"])
def test_chunk_retries_across_a_server_restart(restartable: ChunkdServer, run) -> None:
    with Client(restartable.address, timeout=RPC_TIMEOUT) as client:
        reference = client.chunk_all(DATA)
    records, summary, replayed = through_a_holding_relay(
        restartable, run, chunked(DATA), restart_and_cut(restartable))
    assert_cut_once(run, replayed)
    # Every record once, in order, as one clean run gives them.
    assert records == reference[0] and summary == reference[1]


@pytest.mark.parametrize("run", [sync_run, async_run], ids=["sync", "async"])
def test_a_replay_of_a_changed_source_is_data_loss(restartable: ChunkdServer,
                                                   tmp_path: Path, run) -> None:
    """The file changes while chunkd is down: its replay cuts otherwise
    before the end of the records returned, and the stream ends DATA_LOSS
    (not replayed again) after the records of the first attempt only."""
    path = tmp_path / "changing.bin"
    path.write_bytes(DATA)
    with Client(restartable.address, timeout=RPC_TIMEOUT) as client:
        reference, _ = client.chunk_all(DATA)

    def change() -> None:
        with open(path, "r+b") as f:  # the same file, other first bytes
            f.write(bytes(b ^ 0xFF for b in DATA[:1 << 16]))

    records, error, replayed = through_a_holding_relay(
        restartable, run, chunked(path), restart_and_cut(restartable, change))
    assert isinstance(error, ChunkdError), error
    assert error.code() is grpc.StatusCode.DATA_LOSS, error
    assert "the replayed stream has " in error.details()
    assert "the source or the index changed under the replay" in error.details()
    assert_cut_once(run, replayed)
    assert records == reference[:len(records)] and len(records) >= KILL_AFTER


# --- A stream reset with RST_STREAM CANCEL (the Python client) ---------------


@pytest.mark.parametrize("method", ["chunk", "dedup"])
@pytest.mark.parametrize("style", ["sync", "async"])
def test_a_reset_stream_is_replayed(server: ChunkdServer, method: str, style: str) -> None:
    """A relay resets the stream after the first records (RST_STREAM
    CANCEL): the client sees CANCELLED, which it did not cause, and replays
    it on the same connection: every record once, as a clean run; without
    retries the CANCELLED is the caller's error."""
    namespace = f"reset-{uuid.uuid4().hex}"
    with Client(server.address, timeout=RPC_TIMEOUT) as client:
        reference = (client.chunk_all(DATA) if method == "chunk" else
                     client.dedup_all(DATA, namespace=f"ref-{uuid.uuid4().hex}"))

    def stream_of(retries: int) -> OpenStream:
        def open_stream(client: Any, on_replay: Callable[[ChunkdError, float], None]) -> Any:
            kwargs = dict(retries=retries, on_replay=on_replay)
            if method == "chunk":
                return client.chunk(DATA, **kwargs)
            return client.dedup(DATA, namespace=f"{namespace}-{retries}", **kwargs)
        return open_stream

    run = sync_run if style == "sync" else async_run
    for retries in (3, 0):
        # The upload is held after 4 MiB: the stream is still open, however
        # fast chunkd answers, when the records arrive and the relay resets.
        relay = Relay(server.address, refuse=0, hold_upload_after=HOLD_AFTER)

        def reset(count: int) -> None:
            if count == KILL_AFTER:
                assert relay.reset_streams() == 1

        try:
            records, outcome, heard = run(relay.address, stream_of(retries), reset)
        finally:
            relay.close()
        # grpc.aio may report INTERNAL ("Internal error from Core") instead,
        # when the reset fails the write it has in flight: replayed as well.
        codes = ({grpc.StatusCode.CANCELLED} if style == "sync" else
                 {grpc.StatusCode.CANCELLED, grpc.StatusCode.INTERNAL})
        if retries:
            assert len(heard) == 1 and heard[0].code() in codes, heard
            assert (records, outcome) == reference
        else:
            assert isinstance(outcome, ChunkdError), outcome
            assert outcome.code() in codes and heard == [], outcome
            assert records == reference[0][:len(records)]


# --- The command-line clients ------------------------------------------------

CLIS = ["chunkctl", "chunkd-client", "chunkd-go"]
#: What a replay prints on stderr, in every client (docs/cli.md, "Replays").
ANNOUNCEMENT = (r"{cli}: {file}: {code}: .+; sending it again in [0-9]+\.[0-9]{{2}} s "
                r"\(retry {k} of {n}\)")


def cli_binary(cli: str, chunkctl_bin: Path) -> Path:
    if cli == "chunkctl":
        return chunkctl_bin
    return chunkd_client() if cli == "chunkd-client" else chunkd_go()


class Running:
    """A command-line client running in the background, its output in
    files (so that nothing it writes can block it)."""

    def __init__(self, command: List[object], directory: Path) -> None:
        self.out = (directory / f"out-{uuid.uuid4().hex}").open("w+b")
        self.err = (directory / f"err-{uuid.uuid4().hex}").open("w+b")
        env = {k: v for k, v in os.environ.items() if k not in ("CHUNKD_SERVER", "CHUNKD_TOKEN")}
        self.process = subprocess.Popen([str(c) for c in command], stdin=subprocess.DEVNULL,
                                        stdout=self.out, stderr=self.err, env=env)

    def finish(self) -> Tuple[int, bytes, str]:
        """Waits (bounded) for the exit; returns status, stdout, stderr."""
        try:
            code = self.process.wait(SUBPROCESS_TIMEOUT)
        finally:
            if self.process.poll() is None:
                self.process.kill()
                self.process.wait(10)
        self.out.seek(0)
        self.err.seek(0)
        return code, self.out.read(), self.err.read().decode(errors="replace")


def wait_for(condition: Callable[[], bool], what: str, process: subprocess.Popen) -> None:
    deadline = time.monotonic() + WAIT
    while not condition():
        assert process.poll() is None, f"the client exited before {what}"
        assert time.monotonic() < deadline, f"no {what} within {WAIT} s"
        time.sleep(0.01)


@pytest.fixture(scope="module")
def big_file(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("replays") / "big.bin"
    path.write_bytes(DATA)
    return path


def replayed_through_a_relay(cli: str, chunkctl_bin: Path, server: ChunkdServer,
                             command: List[str], path: Path, tmp_path: Path,
                             fault: Callable[[Relay], None]) -> Tuple[int, bytes, str]:
    """Runs ``CLI COMMAND --retries 3 PATH`` through a relay that holds the
    upload after 4 MiB; once records have come back, ``fault(relay)``."""
    # Its waits (a freeze while chunkd restarts) are bounded by WAIT.
    relay = Relay(server.address, refuse=0, hold_upload_after=HOLD_AFTER, timeout=WAIT)
    try:
        running = Running([cli_binary(cli, chunkctl_bin), *command, "--server", relay.address,
                           "--retries", "3", "--progress", "never", path], tmp_path)
        # Records came back: past the connection's own frames (a few
        # hundred bytes); the held 4 MiB give about 250 records, 7 to 10 KB.
        wait_for(lambda: relay.downstream > 2048, "records", running.process)
        fault(relay)
        return running.finish()
    finally:
        relay.close()


def restart_and_cut(server: ChunkdServer, before_cut: Callable[[], None] = lambda: None
                    ) -> Callable[[Relay], None]:
    """The fault of a restart: the relay freezes the connection, chunkd is
    killed (SIGKILL) and restarted on its port, then the relay cuts the
    connection, so the client replays once, on the restarted chunkd."""
    def fault(relay: Relay) -> None:
        relay.freeze()
        assert server.process is not None
        server.process.send_signal(signal.SIGKILL)
        server.process.wait(30)
        server.restart()
        before_cut()
        relay.cut()
    return fault


def clean_run(chunkctl_bin: Path, *args: object, stdin: Optional[bytes] = None) -> bytes:
    """What chunkctl prints for ``args`` in one clean run."""
    return subprocess.run([str(chunkctl_bin), *map(str, args)], input=stdin,
                          capture_output=True, timeout=SUBPROCESS_TIMEOUT, check=True).stdout


def replayed_once(err: str, cli: str, path: Path, code: str, more: int = 0) -> List[str]:
    """The stderr lines of a run that replayed ``path`` once after ``code``:
    the replay's announcement, then ``more`` lines."""
    lines = err.splitlines()
    assert len(lines) == 1 + more, err
    assert re.fullmatch(ANNOUNCEMENT.format(cli=cli, file=re.escape(str(path)),
                                            code=code, k=1, n=3), lines[0]), err
    return lines


@pytest.mark.parametrize("cli", CLIS)
def test_cli_chunk_replays_across_a_server_restart(cli: str, chunkctl_bin: Path,
                                                   restartable: ChunkdServer, big_file: Path,
                                                   tmp_path: Path) -> None:
    code, out, err = replayed_through_a_relay(
        cli, chunkctl_bin, restartable, ["chunk"], big_file, tmp_path,
        restart_and_cut(restartable))
    assert code == 0, err
    # Every chunk once, in order: the output of one clean run.
    assert out == clean_run(chunkctl_bin, "chunk", "--local", big_file)
    replayed_once(err, cli, big_file, "UNAVAILABLE")


@pytest.mark.parametrize("cli", CLIS)
def test_cli_chunk_of_a_changed_file_is_data_loss(cli: str, chunkctl_bin: Path,
                                                  restartable: ChunkdServer,
                                                  tmp_path: Path) -> None:
    path = tmp_path / "changing.bin"
    path.write_bytes(DATA)

    def change() -> None:
        with open(path, "r+b") as f:  # the same file, other first bytes
            f.write(bytes(b ^ 0xFF for b in DATA[:1 << 16]))

    code, out, err = replayed_through_a_relay(
        cli, chunkctl_bin, restartable, ["chunk"], path, tmp_path,
        restart_and_cut(restartable, change))
    assert code == 1, err
    lines = replayed_once(err, cli, path, "UNAVAILABLE", more=1)
    assert re.match(f"{cli}: DATA_LOSS: (chunkd: )?the replayed stream ", lines[1]), err
    # What was printed is the start of the original file's chunks.
    assert clean_run(chunkctl_bin, "chunk", "--local", "-", stdin=DATA).startswith(out)


@pytest.mark.parametrize("cli", CLIS)
@pytest.mark.parametrize("command", [["chunk"], ["dedup", "--namespace", "NS"]],
                         ids=lambda c: c[0])
def test_cli_replays_a_reset_stream(cli: str, command: List[str], chunkctl_bin: Path,
                                    server: ChunkdServer, big_file: Path,
                                    tmp_path: Path) -> None:
    """RST_STREAM CANCEL from a relay: each client replays the CANCELLED it
    did not cause, announces it, and prints what a clean run prints."""
    def fresh(words: List[str]) -> List[str]:
        return [f"reset-{cli}-{uuid.uuid4().hex}" if w == "NS" else w for w in words]

    clean = clean_run(chunkctl_bin, *fresh(command), "--server", server.address, big_file)
    code, out, err = replayed_through_a_relay(
        cli, chunkctl_bin, server, fresh(command), big_file, tmp_path,
        lambda relay: assert_reset(relay))
    assert code == 0, err
    assert out == clean
    replayed_once(err, cli, big_file, "CANCELLED")


def assert_reset(relay: Relay) -> None:
    assert relay.reset_streams() == 1
