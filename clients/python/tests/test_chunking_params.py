"""ChunkingParams: the chunking parameters of chunk and dedup as one value.

``params=ChunkingParams(...)`` and the same fields given as keywords send the
same request and get the same records, in Client and AsyncClient alike;
giving both is a TypeError and an unknown name a ValueError, before any call.
Against a real chunkd (see conftest.py).
"""

from __future__ import annotations

import asyncio
import dataclasses
import random
import socket
from typing import Any, List, Tuple

import pytest

import chunkd_client
from chunkd_client import ALGORITHM_PARAMETERS, ChunkingParams, Client, chunking_params
from chunkd_client._convert import chunk_params, dedup_params
from chunkd_client.aio import AsyncClient
from chunkd_client.testing import ChunkdServer

from conftest import RPC_TIMEOUT

DATA = random.Random(4242).randbytes(300_000)
PARAMS = ChunkingParams("fastcdc", min_size=2048, avg_size=8192, max_size=32768,
                        normalization_level=1, seed=9)
KEYWORDS = {f.name: getattr(PARAMS, f.name) for f in dataclasses.fields(PARAMS)}


def namespace() -> str:
    return f"cparams-{random.getrandbits(64):016x}"


def unused_address() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{s.getsockname()[1]}"


def test_exported_and_immutable() -> None:
    assert chunkd_client.ChunkingParams is ChunkingParams
    assert "ChunkingParams" in chunkd_client.__all__
    with pytest.raises(dataclasses.FrozenInstanceError):
        PARAMS.avg_size = 4096  # type: ignore[misc]
    assert ChunkingParams() == ChunkingParams("fastcdc", seed=0)
    # Every field is a parameter of some algorithm, and every such parameter
    # is a field.
    fields = {f.name for f in dataclasses.fields(ChunkingParams)} - {"algorithm"}
    assert fields == {p for takes in ALGORITHM_PARAMETERS.values() for p in takes}


def test_params_and_keywords_build_the_same_messages() -> None:
    assert chunk_params("xxh128", PARAMS) == chunk_params("xxh128", **KEYWORDS)
    assert (dedup_params("ns", "sha256", "s-1", "ff", PARAMS)
            == dedup_params("ns", "sha256", "s-1", "ff", **KEYWORDS))
    assert chunking_params(**KEYWORDS) == chunk_params("sha256", PARAMS).chunking
    seqcdc = ChunkingParams("SeqCDC", seq_mode="Decreasing", seq_length=4)
    message = chunk_params("sha256", seqcdc).chunking
    assert [f.name for f, _ in message.ListFields()] == ["algorithm", "seq_mode", "seq_length"]


def test_bad_names_and_mixed_forms_fail_before_any_call() -> None:
    with pytest.raises(ValueError, match="'gear'"):
        ChunkingParams("gear")
    with pytest.raises(ValueError, match="seq_mode"):
        ChunkingParams("seqcdc", seq_mode="sideways")
    # Nothing listens at the address: any RPC would end in UNAVAILABLE.
    with Client(unused_address(), timeout=RPC_TIMEOUT) as nowhere:
        with pytest.raises(TypeError, match="not both"):
            nowhere.chunk(DATA, params=PARAMS, avg_size=4096)
        with pytest.raises(TypeError, match="not both"):
            nowhere.dedup(DATA, namespace="ns", params=PARAMS, algorithm="crc32")
        with pytest.raises(TypeError, match="ChunkingParams"):
            nowhere.chunk(DATA, params={"avg_size": 4096})  # type: ignore[arg-type]
        with pytest.raises(TypeError):
            nowhere.chunk(DATA, avg_sise=4096)


def test_params_give_the_records_of_the_keywords(client: Client) -> None:
    expected, summary = client.chunk_all(DATA, **KEYWORDS)
    assert summary.total_bytes == len(DATA) and len(expected) > 10
    assert client.chunk_all(DATA, params=PARAMS) == (expected, summary)
    deduped, _ = client.dedup_all(DATA, namespace=namespace(), params=PARAMS)
    assert [(r.offset, r.length, r.fingerprint) for r in deduped] == [
        (r.offset, r.length, r.fingerprint) for r in expected]


def test_async_client_takes_params(server: ChunkdServer, client: Client) -> None:
    expected, _ = client.chunk_all(DATA, **KEYWORDS)

    async def main() -> Tuple[List[Any], List[Any]]:
        async with AsyncClient(server.address, timeout=RPC_TIMEOUT) as aclient:
            chunked, _ = await aclient.chunk_all(DATA, params=PARAMS)
            deduped, _ = await aclient.dedup_all(DATA, namespace=namespace(),
                                                 params=PARAMS)
            with pytest.raises(TypeError, match="not both"):
                aclient.chunk(DATA, params=PARAMS, seed=1)
            return chunked, deduped

    chunked, deduped = asyncio.run(asyncio.wait_for(main(), RPC_TIMEOUT))
    assert chunked == expected
    assert [r.fingerprint for r in deduped] == [r.fingerprint for r in expected]
