"""The process_* families a real chunkd exports (docs/operations.md,
"Metrics"): the names, types and meaning of the Prometheus client
libraries' process collectors, each checked against what /proc says of the
chunkd process and against what the test does to it."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Dict, Iterator, List

import grpc
import pytest

from chunkd_client import Client
from chunkd_client.testing import ChunkdServer, serving

from e2e_util import RPC_TIMEOUT, random_bytes
from metrics_util import PROCESS_FAMILIES, parse_samples, scrape, value

#: Connections the open-fds check opens (one socket each in chunkd).
CONNECTIONS = 24


@pytest.fixture
def started() -> Dict[str, float]:
    return {}


@pytest.fixture
def fresh(chunkd_bin: Path, started: Dict[str, float]) -> Iterator[ChunkdServer]:
    started["before"] = time.time()
    for server in serving(ChunkdServer(chunkd_bin)):
        started["after"] = time.time()
        yield server


def metrics(server: ChunkdServer) -> Dict[str, float]:
    samples = parse_samples(scrape(server.metrics_address))
    found = {}
    for name in PROCESS_FAMILIES:
        v = value(samples, name)
        assert v is not None, f"{name} missing"
        found[name] = v
    return found


def proc(server: ChunkdServer, name: str) -> str:
    assert server.process is not None
    return Path(f"/proc/{server.process.pid}/{name}").read_text()


def stat_fields(server: ChunkdServer) -> List[str]:
    text = proc(server, "stat")
    return text[text.rindex(")") + 2:].split()


def test_families_and_types(fresh: ChunkdServer) -> None:
    text = scrape(fresh.metrics_address)
    for name, kind in PROCESS_FAMILIES.items():
        assert f"# TYPE {name} {kind}\n" in text
        assert f"# HELP {name} " in text


def test_values_match_proc(fresh: ChunkdServer, started: Dict[str, float]) -> None:
    m = metrics(fresh)
    ticks = os.sysconf("SC_CLK_TCK")
    # Started between the test's start of the process and its SERVING.
    assert started["before"] - 2 <= m["process_start_time_seconds"] <= started["after"] + 2
    btime = next(int(line.split()[1]) for line in Path("/proc/stat").read_text().splitlines()
                 if line.startswith("btime "))
    assert m["process_start_time_seconds"] == pytest.approx(
        btime + int(stat_fields(fresh)[19]) / ticks, abs=0.01)
    # The memory: resident more than a few MiB (gRPC, the index, the
    # calibration's buffers), virtual at least that, both near /proc's.
    rss = m["process_resident_memory_bytes"]
    assert rss > 4 << 20
    assert m["process_virtual_memory_bytes"] >= rss
    assert rss == pytest.approx(fresh.vm_kib("VmRSS") * 1024, rel=0.25)
    assert m["process_virtual_memory_bytes"] == pytest.approx(
        int(stat_fields(fresh)[20]), rel=0.1)
    # The start-up calibration alone takes CPU; no more than /proc says now.
    fields = stat_fields(fresh)
    assert 0 < m["process_cpu_seconds_total"] <= (int(fields[11]) + int(fields[12])) / ticks
    limit = next(line for line in proc(fresh, "limits").splitlines()
                 if line.startswith("Max open files"))
    assert m["process_max_fds"] == float(limit.split()[3])
    assert 0 < m["process_open_fds"] < m["process_max_fds"]


def test_cpu_grows_with_work(fresh: ChunkdServer) -> None:
    before = metrics(fresh)["process_cpu_seconds_total"]
    data = random_bytes(seed=5, size=64 << 20)
    after = before
    # Dedup of 64 MiB (SHA-256 of every byte) takes tens of milliseconds on
    # today's CPUs; repeated until it shows, so a faster one passes too, and
    # a counter that does not move still fails.
    with Client(fresh.address, timeout=RPC_TIMEOUT) as client:
        for _ in range(20):
            client.dedup_all(data, namespace="process-cpu")
            after = metrics(fresh)["process_cpu_seconds_total"]
            if after >= before + 0.02:
                break
    assert after >= before + 0.02, (before, after)


def test_open_fds_follow_connections(fresh: ChunkdServer) -> None:
    before = metrics(fresh)["process_open_fds"]
    # A local subchannel pool each: channels to one address would otherwise
    # share a connection.
    channels = [grpc.insecure_channel(fresh.address,
                                      options=[("grpc.use_local_subchannel_pool", 1)])
                for _ in range(CONNECTIONS)]
    try:
        for channel in channels:
            grpc.channel_ready_future(channel).result(timeout=RPC_TIMEOUT)
        during = metrics(fresh)["process_open_fds"]
        # A connection of an earlier test, or a scrape's, may close meanwhile:
        # a few descriptors of slack, far fewer than the connections opened.
        assert during >= before + CONNECTIONS - 4
        assert during == pytest.approx(len(os.listdir(f"/proc/{fresh.process.pid}/fd")),
                                       abs=4)
    finally:
        for channel in channels:
            channel.close()
    # chunkd closes its side once the clients' are closed.
    deadline = time.monotonic() + RPC_TIMEOUT
    while metrics(fresh)["process_open_fds"] >= before + CONNECTIONS:
        assert time.monotonic() < deadline, "connections still open in chunkd"
        time.sleep(0.1)
