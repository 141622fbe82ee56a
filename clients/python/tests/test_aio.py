"""AsyncClient against a real chunkd: the same results as Client."""

from __future__ import annotations

import asyncio
import io
import random
import uuid
from pathlib import Path
from typing import AsyncIterator

import grpc
import pytest

from chunkd_client import ChunkdError, Client
from chunkd_client.aio import AsyncClient
from chunkd_client.testing import ChunkdServer

from conftest import RPC_TIMEOUT

DATA = random.Random(515).randbytes(250_000)
PARAMS = dict(algorithm="fastcdc", min_size=2048, avg_size=8192, max_size=32768)


def run(coroutine):
    return asyncio.run(asyncio.wait_for(coroutine, RPC_TIMEOUT))


async def pieces(data: bytes, size: int) -> AsyncIterator[bytes]:
    for start in range(0, len(data), size):
        await asyncio.sleep(0)
        yield data[start : start + size]


def test_every_source_kind_matches_the_sync_client(
    server: ChunkdServer, client: Client, tmp_path: Path
) -> None:
    expected, expected_summary = client.chunk_all(DATA, **PARAMS)
    path = tmp_path / "data.bin"
    path.write_bytes(DATA)

    async def main():
        async with AsyncClient(server.address, timeout=RPC_TIMEOUT) as aclient:
            results = []
            for source in (DATA, path, str(path), io.BytesIO(DATA),
                           pieces(DATA, 10_007), iter([DATA[:5], DATA[5:]])):
                results.append(await aclient.chunk_all(source, message_size=65536, **PARAMS))
            return results

    for records, summary in run(main()):
        assert records == expected
        assert summary == expected_summary
    assert expected_summary.total_bytes == len(DATA)


def test_streaming_iteration_and_summary(server: ChunkdServer) -> None:
    async def main():
        async with AsyncClient(server.address, timeout=RPC_TIMEOUT) as aclient:
            stream = aclient.chunk(DATA, fingerprint="xxh128", **PARAMS)
            with pytest.raises(RuntimeError):
                stream.summary
            offset = 0
            async for record in stream:
                assert record.offset == offset and len(record.fingerprint) == 16
                offset = record.end
            return offset, stream.summary

    end, summary = run(main())
    assert end == len(DATA) == summary.total_bytes


def test_dedup_find_missing_and_info(server: ChunkdServer) -> None:
    namespace = f"aio-{uuid.uuid4().hex}"

    async def main():
        async with AsyncClient(server.address, timeout=RPC_TIMEOUT) as aclient:
            first, s1 = await aclient.dedup_all(DATA, namespace=namespace, **PARAMS)
            _, s2 = await aclient.dedup_all(DATA, namespace=namespace, **PARAMS)
            unknown = bytes(32)
            missing = await aclient.find_missing(
                namespace, [first[0].fingerprint, unknown])
            info = await aclient.server_info()
            return first, s1, s2, missing, info

    first, s1, s2, missing, info = run(main())
    assert all(r.is_new for r in first) and s1.unique_bytes == len(DATA)
    assert s2.unique_bytes == 0 and s2.total_bytes == len(DATA)
    assert missing == [bytes(32)]
    assert info.algorithm("fastcdc").min_size.default == 4096


def test_errors(server: ChunkdServer) -> None:
    class Boom(Exception):
        pass

    async def failing() -> AsyncIterator[bytes]:
        yield DATA[:1000]
        raise Boom("source failed")

    async def main():
        async with AsyncClient(server.address, timeout=RPC_TIMEOUT) as aclient:
            with pytest.raises(ChunkdError) as bad:
                await aclient.chunk_all(DATA, algorithm="fastcdc", min_size=4)
            with pytest.raises(Boom):
                await aclient.chunk_all(failing(), **PARAMS)
            with pytest.raises(ChunkdError) as ns:
                await aclient.find_missing("bad namespace!", [])
            return bad.value, ns.value

    bad, ns = run(main())
    assert bad.code == grpc.StatusCode.INVALID_ARGUMENT and "min_size" in bad.message
    assert ns.code == grpc.StatusCode.INVALID_ARGUMENT
