"""AsyncClient.release and AsyncClient.dedup(stream_id=...) against a real
chunkd (Client's are in test_client.py)."""

from __future__ import annotations

import asyncio
import random
import uuid

import grpc
import pytest

from chunkd_client import ChunkdError
from chunkd_client.aio import AsyncClient
from chunkd_client.testing import ChunkdServer

from conftest import RPC_TIMEOUT

DATA = random.Random(4711).randbytes(200_000)


def test_async_release_and_stream_id(server: ChunkdServer) -> None:
    namespace = f"release-aio-{uuid.uuid4().hex}"

    async def main():
        async with AsyncClient(server.address, timeout=RPC_TIMEOUT) as client:
            first, s1 = await client.dedup_all(DATA, namespace=namespace, fingerprint="xxh128",
                                               stream_id="aio-1")
            # A retry with the same stream_id counts every reference once.
            again, s2 = await client.dedup_all(DATA, namespace=namespace, fingerprint="xxh128",
                                               stream_id="aio-1", message_size=7777)
            assert again == first and s2 == s1
            fingerprints = [r.fingerprint for r in first]
            counts = await client.release(namespace, fingerprints, fingerprint="xxh128",
                                          request_id="aio-release-1")
            retried = await client.release(namespace, fingerprints, fingerprint="xxh128",
                                           request_id="aio-release-1")
            missing = await client.find_missing(namespace, fingerprints)
            with pytest.raises(ChunkdError) as bad:
                await client.release(namespace, fingerprints, request_id="no spaces")
            return fingerprints, counts, retried, missing, bad.value

    fingerprints, counts, retried, missing, bad = asyncio.run(main())
    assert len(fingerprints) > 5
    assert counts == retried == [0] * len(fingerprints)
    assert missing == fingerprints
    assert bad.code == grpc.StatusCode.INVALID_ARGUMENT
