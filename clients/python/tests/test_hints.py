"""RapidCDC hints through the client, against a real chunkd (see conftest.py)."""

from __future__ import annotations

import asyncio
import io
import random
import socket
import uuid
from pathlib import Path
from typing import List, Tuple

import grpc
import pytest

from chunkd_client import ChunkdError, Client, DedupRecord
from chunkd_client.aio import AsyncClient
from chunkd_client.testing import ChunkdServer

from conftest import RPC_TIMEOUT

#: Enough seeded random bytes for a few hundred chunks of the default sizes.
DATA = random.Random(20261121).randbytes(4 << 20)
NAMES = ("off", "ff", "ff_mt", "ff_rwt", "ff_rwt_fpt")


def namespace() -> str:
    return f"hints-{uuid.uuid4().hex}"


def plain(records: List[DedupRecord]) -> List[Tuple[int, int, bytes]]:
    return [(r.offset, r.length, r.fingerprint) for r in records]


def test_second_pass_takes_hints_and_the_same_records(client: Client) -> None:
    ns = namespace()
    first, first_summary = client.dedup_all(DATA, namespace=ns)
    second, summary = client.dedup_all(DATA, namespace=ns)
    assert len(first) > 100
    assert first_summary.unique_chunks == len(first)
    assert summary.unique_chunks == 0
    assert summary.hints_tried > 0
    assert summary.hints_accepted > 0
    assert summary.hint_skipped_bytes > 0
    assert summary.hints_tried == summary.hints_accepted + summary.hints_rejected
    assert summary.hint_skipped_bytes <= summary.total_bytes
    assert plain(second) == plain(first)


def test_off_tries_no_hint(client: Client) -> None:
    ns = namespace()
    first, _ = client.dedup_all(DATA, namespace=ns)
    second, summary = client.dedup_all(DATA, namespace=ns, hints="off")
    assert summary.unique_chunks == 0
    assert (summary.hints_tried, summary.hints_accepted, summary.hint_skipped_bytes) == (0, 0, 0)
    assert plain(second) == plain(first)


@pytest.mark.parametrize("hints", ["ff_rwt_fpt", "FF_RWT_FPT", 5])
def test_ff_rwt_fpt_equals_off_record_for_record(client: Client, hints: object) -> None:
    ns = namespace()
    client.dedup_all(DATA, namespace=ns, hints="off")
    # With the memory index the hint cache takes duplicates only: this pass
    # fills it, the next ones can use it.
    warm, _ = client.dedup_all(DATA, namespace=ns, hints=hints)
    off, off_summary = client.dedup_all(DATA, namespace=ns, hints="off")
    hinted, summary = client.dedup_all(DATA, namespace=ns, hints=hints)
    assert off_summary.hints_tried == 0
    assert summary.hints_accepted > 0 and summary.hint_skipped_bytes > 0
    assert off == hinted == warm


@pytest.mark.parametrize("hints", NAMES)
def test_every_name_is_accepted(client: Client, hints: str) -> None:
    records, summary = client.dedup_all(DATA[: 1 << 20], namespace=namespace(), hints=hints)
    assert summary.total_bytes == 1 << 20 and records


def _unused_address() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{s.getsockname()[1]}"


def test_unknown_name_fails_before_any_call() -> None:
    # Nothing listens at the address: any RPC would end in UNAVAILABLE.
    with Client(_unused_address(), timeout=RPC_TIMEOUT) as nowhere:
        with pytest.raises(ValueError) as caught:
            nowhere.dedup(DATA, namespace=namespace(), hints="ff_fast")
        message = str(caught.value)
        assert "'ff_fast'" in message and "hints" in message
        for name in NAMES:
            assert name in message
        with pytest.raises(ValueError, match="'rapid'"):
            nowhere.dedup_all(DATA, namespace=namespace(), hints="rapid")

    async def aio() -> None:
        async with AsyncClient(_unused_address(), timeout=RPC_TIMEOUT) as anywhere:
            with pytest.raises(ValueError, match="'ff_fast'"):
                anywhere.dedup(DATA, namespace=namespace(), hints="ff_fast")

    asyncio.run(aio())


@pytest.mark.parametrize("algorithm", ["crc32", "seqcdc", "fixed"])
def test_hints_need_fastcdc(client: Client, algorithm: str) -> None:
    with pytest.raises(ChunkdError) as caught:
        client.dedup_all(DATA, namespace=namespace(), algorithm=algorithm, hints="ff")
    assert caught.value.code == grpc.StatusCode.INVALID_ARGUMENT
    assert "hint" in caught.value.message
    # "off" is allowed for every algorithm, and unset ("" or None) is off there.
    for hints in ("off", None, ""):
        _, summary = client.dedup_all(
            DATA[: 1 << 20], namespace=namespace(), algorithm=algorithm, hints=hints
        )
        assert summary.hints_tried == 0


def test_async_client_takes_hints(server: ChunkdServer, client: Client) -> None:
    ns = namespace()
    expected, _ = client.dedup_all(DATA, namespace=ns)

    async def both() -> Tuple[object, object]:
        async with AsyncClient(server.address, timeout=RPC_TIMEOUT) as aclient:
            hinted = await aclient.dedup_all(DATA, namespace=ns, hints="ff_rwt_fpt")
            off = await aclient.dedup_all(DATA, namespace=ns, hints="OFF")
            return hinted, off

    (records, summary), (off_records, off_summary) = asyncio.run(
        asyncio.wait_for(both(), RPC_TIMEOUT)
    )
    assert summary.hints_accepted > 0 and summary.hint_skipped_bytes > 0
    assert off_summary.hints_tried == 0
    assert plain(records) == plain(off_records) == plain(expected)


def test_console_script_takes_hints(
    server: ChunkdServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from chunkd_client.cli import main

    path = tmp_path / "data.bin"
    path.write_bytes(DATA[: 1 << 20])
    out = io.StringIO()
    args = ["dedup", "--server", server.address, "--namespace", namespace()]
    assert main(args + ["--hints", "FF_RWT", str(path)], out=out) == 0
    assert out.getvalue().startswith(f"{path} bytes={1 << 20} ")
    # Hints with crc32: refused before any call, as the server would (exit 2).
    assert main(args + ["--algorithm", "crc32", "--hints", "ff", str(path)], out=out) == 2
    assert "--hints ff needs --algorithm fastcdc, not crc32" in capsys.readouterr().err
    assert main(args + ["--hints", "fast", str(path)], out=out) == 2
    err = capsys.readouterr().err
    assert "'fast'" in err and "ff_rwt_fpt" in err
