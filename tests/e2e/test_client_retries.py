"""The Python client's Dedup ``retries`` across a real server restart.

chunkd keeps its index in a real Redis (redis_util), so the references a
stream committed before the server was killed survive it, as do the write
tokens of its ``stream_id``. The stream is killed mid-way (SIGKILL, after
the client has received records), chunkd restarts on the same port, and the
client replays the source: the caller gets every record once, and the
reference counts Redis holds equal those of one clean run.
"""

from __future__ import annotations

import asyncio
import collections
import random
import re
import threading
import uuid
from pathlib import Path
from typing import List, Tuple

import pytest

from chunkd_client import Client, DedupRecord, DedupSummary
from chunkd_client.aio import AsyncClient
from chunkd_client.testing import ChunkdServer

from e2e_util import RPC_TIMEOUT
from redis_util import RedisServer, read_counts

DATA = random.Random(31337).randbytes(16 << 20)
#: The records the client has received when the server is killed.
KILL_AFTER = 64


def dedups_started(server: ChunkdServer) -> int:
    match = re.search(r'^grpc_server_started_total\{grpc_method="Dedup",[^}]*\} (\S+)$',
                      server.metrics(), re.MULTILINE)
    assert match is not None
    return int(float(match.group(1)))


class Restarter:
    """Kills the server (SIGKILL) and restarts it on the same port in a
    thread, while the client goes on reading its stream."""

    def __init__(self, server: ChunkdServer, redis: RedisServer, namespace: str) -> None:
        self.server = server
        self.redis = redis
        self.namespace = namespace
        self.committed_at_kill = 0
        self._thread = threading.Thread(target=server.restart)

    def kill_and_restart(self) -> None:
        assert self.server.process is not None
        self.server.process.kill()
        self.server.process.wait(30)
        # The killed attempt had committed references: the replay must not
        # count them again.
        self.committed_at_kill = len(read_counts([self.redis.port], self.namespace)[0])
        self._thread.start()

    def join(self) -> None:
        self._thread.join(60)
        assert not self._thread.is_alive() and self.server.alive()


def sync_run(server: ChunkdServer, restarter: Restarter,
             namespace: str) -> Tuple[List[DedupRecord], DedupSummary]:
    with Client(server.address, timeout=RPC_TIMEOUT) as client:
        records: List[DedupRecord] = []
        with client.dedup(DATA, namespace=namespace, retries=3) as stream:
            for record in stream:
                records.append(record)
                if len(records) == KILL_AFTER:
                    restarter.kill_and_restart()
            return records, stream.summary


def async_run(server: ChunkdServer, restarter: Restarter,
              namespace: str) -> Tuple[List[DedupRecord], DedupSummary]:
    async def main() -> Tuple[List[DedupRecord], DedupSummary]:
        async with AsyncClient(server.address, timeout=RPC_TIMEOUT) as client:
            records: List[DedupRecord] = []
            async with client.dedup(DATA, namespace=namespace, retries=3) as stream:
                async for record in stream:
                    records.append(record)
                    if len(records) == KILL_AFTER:
                        restarter.kill_and_restart()
                return records, stream.summary

    return asyncio.run(main())


@pytest.mark.parametrize("run", [sync_run, async_run], ids=["sync", "async"])
def test_dedup_retries_across_a_server_restart(chunkd_bin: Path, redis: RedisServer,
                                               run) -> None:
    reference_ns, namespace = f"once-{uuid.uuid4().hex}", f"replayed-{uuid.uuid4().hex}"
    with ChunkdServer(chunkd_bin, index=f"redis://{redis.address}") as server:
        with Client(server.address, timeout=RPC_TIMEOUT) as client:
            reference = client.dedup_all(DATA, namespace=reference_ns)
        restarter = Restarter(server, redis, namespace)
        try:
            records, summary = run(server, restarter, namespace)
        finally:
            if restarter.committed_at_kill or server.alive():
                restarter.join()
        # Killed mid-stream with references committed, replayed once on the
        # restarted server.
        assert 0 < restarter.committed_at_kill < len(set(r.fingerprint for r in records))
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
