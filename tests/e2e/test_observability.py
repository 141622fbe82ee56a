"""What operators and tools see of a running chunkd: the Prometheus
/metrics endpoint and gRPC server reflection."""

from __future__ import annotations

import re
import time
import urllib.request

import grpc

from chunkd_client import Client
from chunkd_client.testing import ChunkdServer

from e2e_util import REPO, RPC_TIMEOUT, random_bytes


def _scrape(server: ChunkdServer) -> str:
    url = f"http://{server.metrics_address}/metrics"
    with urllib.request.urlopen(url, timeout=10) as response:
        assert response.status == 200
        return response.read().decode()


def _value(text: str, name: str, **labels: str) -> float:
    """The sample of `name` whose labels include `labels`; 0 if absent."""
    for line in text.splitlines():
        match = re.fullmatch(r"([a-z_]+)(?:\{(.*)\})? (\S+)", line)
        if not match or match.group(1) != name:
            continue
        have = dict(re.findall(r'(\w+)="([^"]*)"', match.group(2) or ""))
        if all(have.get(k) == v for k, v in labels.items()):
            return float(match.group(3))
    return 0.0


def test_metrics_count_ingested_bytes_and_chunks(server: ChunkdServer) -> None:
    data = random_bytes(seed=42, size=3_000_001)
    before = _scrape(server)
    with Client(server.address, timeout=RPC_TIMEOUT) as client:
        records, summary = client.chunk_all(data, algorithm="crc32")
        dedup, _ = client.dedup_all(data[:1_000_000], namespace="metrics-test",
                                    algorithm="crc32")
    after = _scrape(server)

    def delta(name: str, **labels: str) -> float:
        return _value(after, name, **labels) - _value(before, name, **labels)

    assert delta("chunkd_ingest_bytes_total", rpc="Chunk", algorithm="crc32") == len(data)
    assert delta("chunkd_chunks_total", rpc="Chunk", algorithm="crc32") == len(records)
    assert summary.total_chunks == len(records)
    assert delta("chunkd_ingest_bytes_total", rpc="Dedup", algorithm="crc32") == 1_000_000
    assert delta("chunkd_chunks_total", rpc="Dedup", algorithm="crc32") == len(dedup)
    # Chunks already stored by an earlier test of this session would count as
    # duplicates; this namespace is fresh, so none is.
    assert delta("chunkd_duplicate_chunks_total", algorithm="crc32") == 0
    assert delta("grpc_server_handled_total", grpc_method="Chunk", grpc_code="OK") >= 1
    # A stream leaves the gauge when gRPC calls OnDone, just after the client
    # has its status.
    deadline = time.monotonic() + RPC_TIMEOUT
    while _value(_scrape(server), "chunkd_active_streams") != 0:
        assert time.monotonic() < deadline, "chunkd_active_streams stuck above 0"
        time.sleep(0.05)
    version = (REPO / "VERSION").read_text().strip()
    assert _value(after, "chunkd_build_info", version=version) == 1


def test_reflection_lists_the_service(server: ChunkdServer) -> None:
    # ServerReflectionRequest{list_services: ""} is field 7 (a string); the
    # messages are encoded by hand to avoid a dependency on grpcio-reflection.
    request = b"\x3a\x00"
    with grpc.insecure_channel(server.address) as channel:
        info = channel.stream_stream(
            "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo"
        )
        responses = list(info(iter([request]), timeout=RPC_TIMEOUT))
    assert len(responses) == 1
    assert b"chunkd.v1.ChunkService" in responses[0]
    assert b"grpc.health.v1.Health" in responses[0]
