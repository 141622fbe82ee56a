"""No broken stream passes for success: a Chunk or Dedup stream that ends OK
with a summary that does not count the bytes sent, or without a summary,
fails with DATA_LOSS in every client.

A real chunkd never does this, so these tests use FakeChunkd (fake_chunkd.py),
a gRPC server in this process on 127.0.0.1.
"""

from __future__ import annotations

import asyncio
import io
import random
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any, AsyncIterator, Callable, Dict, Iterator, List

import grpc
import pytest

from chunkd_client import ChunkdError, Client
from chunkd_client.aio import AsyncClient

from conftest import RPC_TIMEOUT
from fake_chunkd import FakeChunkd

DATA = random.Random(4242).randbytes(300_000)
PIECE = 65536
SCRIPT = Path(sys.executable).with_name("chunkd-client")


def expected_message(summary: str, sent: int = len(DATA)) -> str:
    if summary == "none":
        return f"the stream ended without a summary; {sent} bytes were sent"
    total = {"short": sent // 2, "long": sent + 1}[summary]
    return f"server summary reports total_bytes={total} but {sent} bytes were sent"


def sync_sources(tmp_path: Path) -> Dict[str, Callable[[], Any]]:
    """Every kind of source Client takes, each holding DATA (made afresh per
    call: files and iterators are used up)."""
    path = tmp_path / "data.bin"
    path.write_bytes(DATA)
    return {
        "bytes": lambda: DATA,
        "bytearray": lambda: bytearray(DATA),
        "memoryview": lambda: memoryview(DATA),
        "path": lambda: path,
        "str": lambda: str(path),
        "file": lambda: io.BytesIO(DATA),
        "iterator": lambda: iter([DATA[:5], DATA[5:100_000], DATA[100_000:]]),
    }


async def pieces(data: bytes, size: int) -> AsyncIterator[bytes]:
    for start in range(0, len(data), size):
        await asyncio.sleep(0)
        yield data[start : start + size]


def run_sync(client: Client, entry: str, source: Any) -> Any:
    """Runs one of Client's four stream entry points to its end."""
    kwargs: Dict[str, Any] = dict(message_size=PIECE)
    if entry.startswith("dedup"):
        kwargs["namespace"] = "fake"
    if entry.endswith("_all"):
        return getattr(client, entry)(source, **kwargs)
    stream = getattr(client, entry)(source, **kwargs)
    records = list(stream)
    return records, stream.summary


ENTRIES = ("chunk", "chunk_all", "dedup", "dedup_all")


@pytest.mark.parametrize("entry", ENTRIES)
def test_sync_control_an_exact_summary_passes(tmp_path: Path, entry: str) -> None:
    with FakeChunkd("exact") as fake, Client(fake.address, timeout=RPC_TIMEOUT) as client:
        for kind, make in sync_sources(tmp_path).items():
            records, summary = run_sync(client, entry, make())
            assert summary.total_bytes == len(DATA) == fake.received, kind
            assert [(r.offset, r.length) for r in records] == [(0, len(DATA))], kind


@pytest.mark.parametrize("summary", ["short", "long", "none"])
@pytest.mark.parametrize("entry", ENTRIES)
def test_sync_unaccounted_bytes_are_data_loss(tmp_path: Path, entry: str,
                                              summary: str) -> None:
    with FakeChunkd(summary) as fake, Client(fake.address, timeout=RPC_TIMEOUT) as client:
        for kind, make in sync_sources(tmp_path).items():
            with pytest.raises(ChunkdError) as caught:
                run_sync(client, entry, make())
            assert caught.value.code == grpc.StatusCode.DATA_LOSS, kind
            assert caught.value.message == expected_message(summary), kind
            assert fake.received == len(DATA), kind


@pytest.mark.parametrize("summary", ["long", "none"])
def test_sync_empty_stream_is_checked_too(summary: str) -> None:
    with FakeChunkd(summary) as fake, Client(fake.address, timeout=RPC_TIMEOUT) as client:
        for entry in ENTRIES:
            with pytest.raises(ChunkdError) as caught:
                run_sync(client, entry, b"")
            assert caught.value.code == grpc.StatusCode.DATA_LOSS
            assert caught.value.message == expected_message(summary, sent=0), entry


def test_sync_a_failed_stream_has_no_summary() -> None:
    with FakeChunkd("short") as fake, Client(fake.address, timeout=RPC_TIMEOUT) as client:
        stream = client.chunk(DATA)
        with pytest.raises(ChunkdError):
            list(stream)
        assert not stream.done
        with pytest.raises(RuntimeError):
            stream.summary


EARLY_END = (f"server summary reports total_bytes={PIECE} but the stream ended before "
             f"all data was sent; {PIECE} bytes were sent")


@pytest.mark.parametrize("entry", ENTRIES)
def test_sync_stream_ended_before_all_data_was_sent(entry: str) -> None:
    """The server ends OK after the first message with a summary counting
    just that message, while the source still holds more."""
    release = threading.Event()

    def stalled() -> Iterator[bytes]:
        yield DATA[:PIECE]
        release.wait(RPC_TIMEOUT)  # set once the call has failed
        yield DATA[PIECE:]

    with FakeChunkd("early") as fake, Client(fake.address, timeout=RPC_TIMEOUT) as client:
        try:
            with pytest.raises(ChunkdError) as caught:
                run_sync(client, entry, stalled())
        finally:
            release.set()
    assert fake.received == PIECE
    assert caught.value.code == grpc.StatusCode.DATA_LOSS
    assert caught.value.message == EARLY_END


def run(coroutine: Any) -> Any:
    return asyncio.run(asyncio.wait_for(coroutine, RPC_TIMEOUT))


async def run_async(client: AsyncClient, entry: str, source: Any) -> Any:
    """Runs one of AsyncClient's four stream entry points to its end."""
    kwargs: Dict[str, Any] = dict(message_size=PIECE)
    if entry.startswith("dedup"):
        kwargs["namespace"] = "fake"
    if entry.endswith("_all"):
        return await getattr(client, entry)(source, **kwargs)
    stream = getattr(client, entry)(source, **kwargs)
    records = [r async for r in stream]
    return records, stream.summary


def async_sources(tmp_path: Path) -> Dict[str, Callable[[], Any]]:
    sources = sync_sources(tmp_path)
    sources["async iterable"] = lambda: pieces(DATA, 10_007)
    return sources


@pytest.mark.parametrize("entry", ENTRIES)
def test_async_control_an_exact_summary_passes(tmp_path: Path, entry: str) -> None:
    async def main() -> List[Any]:
        async with AsyncClient(fake.address, timeout=RPC_TIMEOUT) as client:
            return [await run_async(client, entry, make())
                    for make in async_sources(tmp_path).values()]

    with FakeChunkd("exact") as fake:
        results = run(main())
    assert len(results) == len(async_sources(tmp_path))
    for records, summary in results:
        assert summary.total_bytes == len(DATA)
        assert [(r.offset, r.length) for r in records] == [(0, len(DATA))]


@pytest.mark.parametrize("summary", ["short", "long", "none"])
@pytest.mark.parametrize("entry", ENTRIES)
def test_async_unaccounted_bytes_are_data_loss(tmp_path: Path, entry: str,
                                               summary: str) -> None:
    async def main() -> Dict[str, ChunkdError]:
        errors = {}
        async with AsyncClient(fake.address, timeout=RPC_TIMEOUT) as client:
            for kind, make in async_sources(tmp_path).items():
                with pytest.raises(ChunkdError) as caught:
                    await run_async(client, entry, make())
                errors[kind] = caught.value
            stream = client.chunk(DATA)
            with pytest.raises(ChunkdError):
                await stream.collect()
            assert not stream.done
        return errors

    with FakeChunkd(summary) as fake:
        errors = run(main())
    assert set(errors) == set(async_sources(tmp_path))
    for kind, error in errors.items():
        assert error.code == grpc.StatusCode.DATA_LOSS, kind
        assert error.message == expected_message(summary), kind


@pytest.mark.parametrize("entry", ENTRIES)
def test_async_stream_ended_before_all_data_was_sent(entry: str) -> None:
    async def main() -> ChunkdError:
        release = asyncio.Event()

        async def stalled() -> AsyncIterator[bytes]:
            yield DATA[:PIECE]
            await asyncio.wait_for(release.wait(), RPC_TIMEOUT)
            yield DATA[PIECE:]

        async with AsyncClient(fake.address, timeout=RPC_TIMEOUT) as client:
            with pytest.raises(ChunkdError) as caught:
                await run_async(client, entry, stalled())
            release.set()
            return caught.value

    with FakeChunkd("early") as fake:
        error = run(main())
    assert fake.received == PIECE
    assert error.code == grpc.StatusCode.DATA_LOSS
    assert error.message == EARLY_END


def script(*args: object, **kwargs: Any) -> subprocess.CompletedProcess:
    return subprocess.run([str(SCRIPT), *map(str, args)], capture_output=True,
                          timeout=120, stdin=subprocess.DEVNULL, **kwargs)


@pytest.mark.parametrize("summary", ["short", "long", "none"])
def test_console_script_reports_data_loss(tmp_path: Path, summary: str) -> None:
    path = tmp_path / "data.bin"
    path.write_bytes(DATA)
    with FakeChunkd(summary) as fake:
        for command in (["chunk"], ["dedup", "--namespace", "fake"]):
            result = script(*command, "--server", fake.address, path)
            assert result.returncode == 1, command
            assert result.stderr.decode() == (
                f"chunkd-client: DATA_LOSS: {expected_message(summary)}\n"), command
        piped = subprocess.run([str(SCRIPT), "chunk", "--server", fake.address, "-"],
                               input=DATA, capture_output=True, timeout=120)
    assert piped.returncode == 1
    assert piped.stderr.decode() == f"chunkd-client: DATA_LOSS: {expected_message(summary)}\n"


def test_console_script_control_exact_summary(tmp_path: Path) -> None:
    path = tmp_path / "data.bin"
    path.write_bytes(DATA)
    with FakeChunkd("exact") as fake:
        result = script("chunk", "--server", fake.address, path)
    assert result.returncode == 0 and result.stderr == b""
    assert result.stdout.decode().startswith(f"0,{len(DATA)},")
