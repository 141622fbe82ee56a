"""chunkctl's channel against real chunkd servers (docs/cli.md, "Channel
defaults"): GetServerInfo outlasts a refused first connection (the retry
policy of the default service config), round_robin spreads the streams of
one run over every address of the target, and `dedup --retries` sends a file
again after its server was killed and restarted, with reference counts in
Redis equal to a single run's; --tls-server-name names the certificate's
host."""

from __future__ import annotations

import errno
import json
import os
import re
import subprocess
import time
from pathlib import Path
from typing import Iterator, List, Optional

import grpc
import pytest

from chunkd_client.testing import ChunkdServer, Relay, free_port, serving, wait_until_serving

from e2e_util import SUBPROCESS_TIMEOUT, random_bytes
from metrics_util import parse_samples, scrape, value
from redis_util import RedisServer, read_counts
from test_security import pki  # noqa: F401 (pki: a fixture)


def run(chunkctl_bin: Path, *args: object) -> subprocess.CompletedProcess:
    return subprocess.run([str(chunkctl_bin), *map(str, args)], stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=SUBPROCESS_TIMEOUT)


def test_info_outlasts_a_refused_first_connection(server: ChunkdServer, chunkctl_bin: Path) -> None:
    relay = Relay(server.address, refuse=1)
    try:
        result = run(chunkctl_bin, "info", "--server", relay.address, "--json")
    finally:
        relay.close()
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["version"]
    # The first connection was refused; GetServerInfo was attempted again.
    assert relay.refused == 1


def dedup_bytes(server: ChunkdServer) -> float:
    samples = parse_samples(scrape(server.metrics_address))
    return value(samples, "chunkd_ingest_bytes_total", algorithm="fastcdc", rpc="Dedup") or 0.0


@pytest.fixture(scope="module")
def two_servers(chunkd_bin: Path) -> Iterator[List[ChunkdServer]]:
    first, second = ChunkdServer(chunkd_bin), ChunkdServer(chunkd_bin)
    for _ in serving(first):
        for _ in serving(second):
            yield [first, second]


def open_fifo_writer(fifo: Path, process: subprocess.Popen) -> int:
    """Opens `fifo` for writing once `process` has opened it for reading;
    returns a blocking descriptor."""
    deadline = time.monotonic() + SUBPROCESS_TIMEOUT
    while True:
        try:
            fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
            os.set_blocking(fd, True)
            return fd
        except OSError as e:  # ENXIO: no reader yet
            if e.errno != errno.ENXIO:
                raise
        assert process.poll() is None, process.communicate()
        assert time.monotonic() < deadline, f"nothing opened {fifo}"
        time.sleep(0.01)


def test_round_robin_spreads_the_streams_over_every_address(
        two_servers: List[ChunkdServer], chunkctl_bin: Path, tmp_path: Path) -> None:
    size = 300_000
    contents = [random_bytes(700 + i, size) for i in range(6)]
    # The first file is a FIFO: its stream waits for its bytes while the
    # channel connects to both servers (round_robin sends streams only to
    # servers already connected, and a second connection may come up after
    # every stream of a fast run).
    files = [tmp_path / "f0.fifo"]
    os.mkfifo(files[0])
    for i in range(1, len(contents)):
        files.append(tmp_path / f"f{i}.bin")
        files[i].write_bytes(contents[i])
    # Through a relay each, which tells when the server's side of a
    # connection reached chunkctl.
    relays = [Relay(s.address, refuse=0) for s in two_servers]
    before = [dedup_bytes(s) for s in two_servers]
    try:
        process = subprocess.Popen(
            [str(chunkctl_bin), "dedup", "--server", "ipv4:" + ",".join(r.address for r in relays),
             "--namespace", "rr", *map(str, files)],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            with os.fdopen(open_fifo_writer(files[0], process), "wb") as fifo:
                deadline = time.monotonic() + SUBPROCESS_TIMEOUT
                while not all(r.answered.wait(0.05) for r in relays):
                    assert process.poll() is None, process.communicate()
                    assert time.monotonic() < deadline, "chunkctl never connected to both servers"
                fifo.write(contents[0])
            _, stderr = process.communicate(timeout=SUBPROCESS_TIMEOUT)
        finally:
            if process.poll() is None:
                process.kill()
                process.wait(10)
    finally:
        for relay in relays:
            relay.close()
    assert process.returncode == 0, stderr
    streams = [(dedup_bytes(s) - b) / size for s, b in zip(two_servers, before)]
    # One stream per file, each whole on one server, and every server got
    # some: pick_first would have sent all six to one.
    assert sum(streams) == len(files)
    assert all(n == int(n) and n >= 1 for n in streams), streams
    target = "ipv4:" + ",".join(s.address for s in two_servers)
    info = run(chunkctl_bin, "info", "--server", target)
    assert info.returncode == 0, info.stderr


class RestartableChunkd(ChunkdServer):
    """A ChunkdServer that keeps its ports across kill() and start()."""

    def start(self, attempts: int = 3) -> "RestartableChunkd":
        if not self.address:
            self.address = f"127.0.0.1:{free_port()}"
            self.metrics_address = f"127.0.0.1:{free_port()}"
        self.process = subprocess.Popen(self.command(), stdin=subprocess.DEVNULL,
                                        stdout=self._log, stderr=subprocess.STDOUT)
        wait_until_serving(self.address, timeout=self.startup_timeout, process=self.process)
        return self

    def kill(self) -> None:
        assert self.process is not None
        self.process.kill()
        self.process.wait(10)


def test_dedup_retries_across_a_restart_count_exactly(
        chunkd_bin: Path, chunkctl_bin: Path, tmp_path: Path) -> None:
    # Two halves, each twice: every chunk but those at the seams is counted
    # twice, so a replay that counted again would show as a 3.
    a, b = random_bytes(91, 12 << 20), random_bytes(92, 12 << 20)
    data = tmp_path / "data.bin"
    data.write_bytes(a + b + a + b)
    flags = ["--min", "1024", "--avg", "4096", "--max", "16384", "--message-size", "65536"]
    redis = RedisServer().start()
    chunkd = RestartableChunkd(chunkd_bin, index=f"redis://{redis.address}")
    relay: Optional[Relay] = None
    try:
        chunkd.start()
        clean = run(chunkctl_bin, "dedup", "--server", chunkd.address, "--namespace", "clean",
                    *flags, data)
        assert clean.returncode == 0, clean.stderr
        # The relay holds the stream after 8 MiB of its 48: chunkd is killed
        # and back before the client can send more (or reconnect), whatever
        # the speed of either.
        relay = Relay(chunkd.address, refuse=0, hold_upload_after=8 << 20)
        process = subprocess.Popen(
            [str(chunkctl_bin), "dedup", "--server", relay.address, "--namespace", "retried",
             "--retries", "8", *flags, str(data)],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            deadline = time.monotonic() + SUBPROCESS_TIMEOUT
            while not relay.held.wait(0.05):
                assert process.poll() is None, process.communicate()
                assert time.monotonic() < deadline, "the stream never reached 8 MiB"
            chunkd.kill()
            chunkd.start()
            relay.release()
            stdout, stderr = process.communicate(timeout=SUBPROCESS_TIMEOUT)
        finally:
            if process.poll() is None:
                process.kill()
                process.wait(10)
        assert process.returncode == 0, stderr
        assert re.search(r"^chunkctl: .*data\.bin: UNAVAILABLE: .*; sending it again in "
                         r"[0-9.]+ s \(retry 1 of 8\)$", stderr, re.M), stderr
        # What the run printed, and what the index holds, equal a single run's.
        assert stdout == clean.stdout
        clean_counts, _ = read_counts([redis.port], "clean")
        retried_counts, _ = read_counts([redis.port], "retried")
        assert retried_counts == clean_counts
        assert max(clean_counts.values()) == 2
    finally:
        if relay is not None:
            relay.close()
        chunkd.stop()
        redis.cleanup()


def test_tls_server_name_is_the_name_verified(chunkd_bin: Path, chunkctl_bin: Path,
                                              pki: Path) -> None:  # noqa: F811
    creds = grpc.ssl_channel_credentials(root_certificates=(pki / "ca.pem").read_bytes())
    tls_server = ChunkdServer(chunkd_bin, health_credentials=creds, extra_args=[
        f"--tls_cert={pki / 'server.pem'}", f"--tls_key={pki / 'server.key'}"])
    for _ in serving(tls_server):
        # The certificate names 127.0.0.1 and localhost, not chunkd.example.
        for flag, name, code in (("--tls-server-name", "localhost", 0),
                                 ("--tls_server_name", "localhost", 0),
                                 ("--tls-server-name", "chunkd.example", 1)):
            result = run(chunkctl_bin, "info", "--server", tls_server.address,
                         "--tls-ca", pki / "ca.pem", flag, name, "--json")
            assert result.returncode == code, result.stderr
            if code:
                assert "chunkctl: UNAVAILABLE: " in result.stderr
