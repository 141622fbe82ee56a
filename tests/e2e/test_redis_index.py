"""chunkd with the shared Redis index (DESIGN §5): a real redis-server on a
free loopback port, started and stopped by the test."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Iterator

import pytest

from chunkd_client import ChunkdError, Client
from chunkd_client.testing import ChunkdServer, free_port

from e2e_util import RPC_TIMEOUT, random_bytes

import grpc


class RedisServer:
    """One redis-server on 127.0.0.1, persistence off, in a temp dir."""

    def __init__(self) -> None:
        self.port = free_port()
        self.dir = tempfile.mkdtemp(prefix="chunkd-redis-")
        self.process = None

    def start(self) -> "RedisServer":
        binary = shutil.which("redis-server")
        if binary is None:
            pytest.fail("redis-server is not installed (make deps installs it)")
        self.process = subprocess.Popen(
            [binary, "--port", str(self.port), "--bind", "127.0.0.1",
             "--save", "", "--appendonly", "no", "--dir", self.dir],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while self.cli("PING").strip() != "PONG":
            assert time.monotonic() < deadline, "redis-server did not start"
            time.sleep(0.05)
        return self

    def cli(self, *args: str) -> str:
        result = subprocess.run(
            ["redis-cli", "-p", str(self.port), *args],
            capture_output=True, text=True, timeout=10)
        return result.stdout

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(10)

    def cleanup(self) -> None:
        self.kill()
        shutil.rmtree(self.dir, ignore_errors=True)


@pytest.fixture
def redis() -> Iterator[RedisServer]:
    server = RedisServer().start()
    try:
        yield server
    finally:
        server.cleanup()


def test_dedup_through_redis_survives_a_redis_outage(
        chunkd_bin: Path, redis: RedisServer) -> None:
    data = random_bytes(seed=5, size=2_000_000)
    spec = f"redis://127.0.0.1:{redis.port}"
    with ChunkdServer(chunkd_bin, index=spec) as server:
        with Client(server.address, timeout=RPC_TIMEOUT) as client:
            info = client.server_info()
            assert info.index_backend == "redis"

            records, first = client.dedup_all(data, namespace="tenant")
            assert first.unique_bytes == len(data)
            # One key per chunk, namespaced, binary fingerprint, no hash tag.
            assert int(redis.cli("DBSIZE")) == len(records)
            key = b"chunkd:tenant:" + records[0].fingerprint
            got = subprocess.run(
                ["redis-cli", "-p", str(redis.port), "-x", "EXISTS"],
                input=key, capture_output=True, timeout=10).stdout
            assert got.strip() == b"1"
            _, second = client.dedup_all(data, namespace="tenant")
            assert second.unique_bytes == 0

            redis.kill()
            with pytest.raises(ChunkdError) as down:
                client.dedup_all(data, namespace="tenant")
            assert down.value.code == grpc.StatusCode.UNAVAILABLE
            assert f"127.0.0.1:{redis.port}" in down.value.message
            # Everything but Dedup keeps serving.
            chunks, _ = client.chunk_all(data)
            assert len(chunks) == len(records)

            # Redis back (empty: persistence was off): chunkd reconnects by
            # itself, without a restart.
            redis.start()
            deadline = time.monotonic() + 20
            while True:
                try:
                    _, third = client.dedup_all(data, namespace="tenant")
                    break
                except ChunkdError as e:
                    assert e.code == grpc.StatusCode.UNAVAILABLE
                    assert time.monotonic() < deadline, "no recovery"
                    time.sleep(0.2)
            assert third.unique_bytes == len(data)
            assert int(redis.cli("DBSIZE")) == len(records)
