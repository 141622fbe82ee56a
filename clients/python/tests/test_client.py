"""The client against a real chunkd (see conftest.py)."""

from __future__ import annotations

import hashlib
import io
import random
import threading
import uuid
from pathlib import Path
from typing import Iterator, List

import grpc
import pytest

from chunkd_client import (
    ALGORITHMS,
    ChunkdError,
    ChunkRecord,
    ChunkSummary,
    Client,
    DedupRecord,
    DedupSummary,
    ParamRange,
    ServerInfo,
)
from chunkd_client.testing import ChunkdServer

from conftest import RPC_TIMEOUT

DATA = random.Random(20240601).randbytes(300_000)
PARAMS = dict(algorithm="fastcdc", min_size=2048, avg_size=8192, max_size=32768)


def namespace() -> str:
    return f"pytest-{uuid.uuid4().hex}"


def assert_covering(records: List[ChunkRecord], data: bytes) -> None:
    offset = 0
    for r in records:
        assert r.offset == offset and r.length > 0
        offset += r.length
    assert offset == len(data)


def test_every_source_kind_gives_the_same_chunks(client: Client, tmp_path: Path) -> None:
    path = tmp_path / "data"
    path.write_bytes(DATA)
    expected, summary = client.chunk_all(DATA, **PARAMS)
    assert len(expected) > 10
    assert summary == ChunkSummary(total_bytes=len(DATA), total_chunks=len(expected))
    assert_covering(expected, DATA)
    sources = {
        "path": path,
        "str": str(path),
        "bytearray": bytearray(DATA),
        "memoryview": memoryview(DATA),
        "file": io.BytesIO(DATA),
        "iterator": iter([DATA[:5], DATA[5:70000], DATA[70000:]]),
    }
    for kind, source in sources.items():
        records, summary = client.chunk_all(source, message_size=65536, **PARAMS)
        assert records == expected, kind
        assert summary.total_bytes == len(DATA), kind


def test_open_file_objects_are_streamed(client: Client, tmp_path: Path) -> None:
    path = tmp_path / "data"
    path.write_bytes(DATA)
    with open(path, "rb") as f:
        records, _ = client.chunk_all(f, **PARAMS)
        assert not f.closed
    assert records == client.chunk_all(DATA, **PARAMS)[0]


def test_summary_only_after_the_last_record(client: Client) -> None:
    stream = client.chunk(DATA, **PARAMS)
    assert not stream.done
    with pytest.raises(RuntimeError):
        stream.summary
    records = list(stream)
    assert stream.done
    assert stream.summary.total_chunks == len(records)
    assert list(stream) == []  # exhausted


def test_fingerprints(client: Client) -> None:
    sha, _ = client.chunk_all(DATA, fingerprint="sha256", **PARAMS)
    for r in sha:
        assert r.fingerprint == hashlib.sha256(DATA[r.offset : r.end]).digest()
    xxh, _ = client.chunk_all(DATA, fingerprint="xxh128", **PARAMS)
    assert [(r.offset, r.length) for r in xxh] == [(r.offset, r.length) for r in sha]
    assert all(len(r.fingerprint) == 16 for r in xxh)
    assert len({r.fingerprint for r in xxh}) == len(xxh)
    none, _ = client.chunk_all(DATA, fingerprint="none", **PARAMS)
    assert [(r.offset, r.length, r.fingerprint) for r in none] == [
        (r.offset, r.length, b"") for r in sha
    ]


def test_empty_input(client: Client) -> None:
    assert client.chunk_all(b"", **PARAMS) == ([], ChunkSummary(0, 0))
    records, summary = client.dedup_all(b"", namespace=namespace())
    assert records == [] and summary == DedupSummary(0, 0, 0, 0)


@pytest.mark.parametrize("algorithm", ["fastcdc", "crc32", "seqcdc", "fixed"])
def test_defaults_are_the_advertised_ones(client: Client, algorithm: str) -> None:
    info = client.server_info().algorithm(algorithm)
    records, summary = client.chunk_all(DATA, algorithm=algorithm)
    assert_covering(records, DATA)
    assert summary.total_chunks == len(records)
    # fixed takes only avg_size (every chunk but the last), so the server
    # advertises no min_size or max_size for it.
    low, high = ((info.avg_size.default, info.avg_size.default) if algorithm == "fixed"
                 else (info.min_size.default, info.max_size.default))
    for r in records[:-1]:
        assert low <= r.length <= high
    assert records[-1].length <= high
    if algorithm == "fixed":
        assert {r.length for r in records[:-1]} == {info.avg_size.default}


def test_server_errors_are_chunkd_errors(client: Client) -> None:
    with pytest.raises(ChunkdError) as caught:
        client.chunk_all(DATA, algorithm="fastcdc", min_size=65536, avg_size=16384, max_size=131072)
    assert caught.value.code == grpc.StatusCode.INVALID_ARGUMENT
    assert "min_size" in caught.value.message
    assert str(caught.value).startswith("INVALID_ARGUMENT: ")
    with pytest.raises(ChunkdError) as caught:
        client.find_missing("bad namespace", [bytes(32)])
    assert caught.value.code == grpc.StatusCode.INVALID_ARGUMENT


def test_bad_names_fail_before_any_call(client: Client) -> None:
    with pytest.raises(ValueError, match="algorithm"):
        client.chunk(DATA, algorithm="gear")
    with pytest.raises(ValueError, match="fingerprint"):
        client.chunk(DATA, fingerprint="md5")
    with pytest.raises(ValueError, match="message_size"):
        client.chunk(DATA, message_size=0)


def test_source_errors_surface_unchanged(client: Client) -> None:
    def failing() -> Iterator[bytes]:
        yield DATA[:100_000]
        raise OSError("disk on fire")

    with pytest.raises(OSError, match="disk on fire"):
        client.chunk_all(failing(), **PARAMS)
    with pytest.raises(FileNotFoundError):
        client.chunk_all(Path("/nonexistent/chunkd/input"), **PARAMS)
    assert client.chunk_all(DATA, **PARAMS)[1].total_bytes == len(DATA)


def test_deadline(client: Client) -> None:
    """The deadline ends the call while the source still stalls: the
    caller does not wait for the source."""
    release, resumed = threading.Event(), threading.Event()

    def stalled() -> Iterator[bytes]:
        yield DATA[:1000]
        release.wait(RPC_TIMEOUT)  # set once the call has failed
        resumed.set()
        yield DATA[1000:2000]

    try:
        with pytest.raises(ChunkdError) as caught:
            client.chunk_all(stalled(), timeout=0.5, **PARAMS)
        assert not resumed.is_set(), "the call waited for its stalled source"
    finally:
        release.set()
    assert caught.value.code == grpc.StatusCode.DEADLINE_EXCEEDED


def test_abandoning_a_stream(client: Client) -> None:
    big = random.Random(7).randbytes(8 << 20)
    with client.chunk(big, **PARAMS) as stream:
        first = next(stream)
        assert first.offset == 0
    with pytest.raises(RuntimeError):
        stream.summary
    assert client.chunk_all(DATA, **PARAMS)[1].total_bytes == len(DATA)


def test_closed_client(server: ChunkdServer) -> None:
    c = Client(server.address, timeout=10)
    c.close()
    c.close()
    with pytest.raises(ValueError, match="closed"):
        c.server_info()


def test_dedup_and_find_missing(client: Client) -> None:
    ns = namespace()
    first, s1 = client.dedup_all(DATA, namespace=ns, **PARAMS)
    assert all(isinstance(r, DedupRecord) and r.is_new for r in first)
    assert s1 == DedupSummary(len(DATA), len(first), len(DATA), len(first))
    assert s1.dedup_ratio == 1.0 and s1.duplicate_bytes == 0
    chunks, _ = client.chunk_all(DATA, **PARAMS)
    assert [(r.offset, r.length, r.fingerprint) for r in first] == [
        (r.offset, r.length, r.fingerprint) for r in chunks
    ]
    second, s2 = client.dedup_all(DATA, namespace=ns, **PARAMS)
    assert not any(r.is_new for r in second)
    assert (s2.unique_bytes, s2.unique_chunks) == (0, 0)
    assert s2.dedup_ratio == float("inf") and s2.duplicate_bytes == len(DATA)

    stored = [r.fingerprint for r in first]
    fakes = [hashlib.sha256(b"fake %d" % i).digest() for i in range(3)]
    query = [fakes[0], *stored[:3], fakes[1], *stored[3:], fakes[2]]
    assert client.find_missing(ns, query) == fakes
    assert client.find_missing(ns, []) == []
    assert client.find_missing(namespace(), stored) == stored


def test_release_drops_references_and_removes_at_zero(client: Client) -> None:
    ns = namespace()
    records, _ = client.dedup_all(DATA, namespace=ns, **PARAMS)
    client.dedup_all(DATA, namespace=ns, **PARAMS)
    stored = [r.fingerprint for r in records]
    absent = hashlib.sha256(b"never stored").digest()
    assert client.release(ns, stored + [absent]) == [1] * len(stored) + [0]
    assert client.find_missing(ns, stored) == []
    # A retried request with the same id is applied once.
    assert client.release(ns, stored[:2], request_id="rel-1") == [0, 0]
    assert client.release(ns, stored[:2], request_id="rel-1") == [0, 0]
    assert client.find_missing(ns, stored) == stored[:2]
    assert client.release(ns, stored[2:]) == [0] * (len(stored) - 2)
    assert client.find_missing(ns, stored) == stored


def test_release_errors_name_the_bad_entry(client: Client) -> None:
    good = hashlib.sha256(b"x").digest()
    with pytest.raises(ChunkdError) as caught:
        client.release(namespace(), [good, good, b"short"])
    assert caught.value.code == grpc.StatusCode.INVALID_ARGUMENT
    assert "fingerprints[2] has 5 bytes" in caught.value.message
    assert "sha256" in caught.value.message
    with pytest.raises(ChunkdError) as caught:
        client.release(namespace(), [good], fingerprint="xxh128")
    assert "fingerprints[0] has 32 bytes" in caught.value.message
    with pytest.raises(ChunkdError) as caught:
        client.release(namespace(), [good], fingerprint="none")
    assert caught.value.code == grpc.StatusCode.INVALID_ARGUMENT
    with pytest.raises(ChunkdError) as caught:
        client.release(namespace(), [good], request_id="no spaces")
    assert caught.value.code == grpc.StatusCode.INVALID_ARGUMENT
    assert caught.value.message.startswith("request_id")
    with pytest.raises(ChunkdError) as caught:
        client.release("bad namespace", [good])
    assert "namespace" in caught.value.message


def test_dedup_retried_with_a_stream_id_counts_once(client: Client) -> None:
    ns = namespace()
    data = DATA + DATA[:100_000]  # duplicates within the stream, too
    first, s1 = client.dedup_all(data, namespace=ns, stream_id="s-1", **PARAMS)
    again, s2 = client.dedup_all(
        data, namespace=ns, stream_id="s-1", message_size=7777, **PARAMS
    )
    # The retry answers with the first run's records and totals; the hint
    # counters describe the work of each run (the retry learned from the first).
    assert again == first
    assert (s2.total_bytes, s2.total_chunks, s2.unique_bytes, s2.unique_chunks) == (
        s1.total_bytes, s1.total_chunks, s1.unique_bytes, s1.unique_chunks)
    assert any(r.is_new for r in first) and not all(r.is_new for r in first)
    # Each fingerprint was counted as often as it occurs in the stream: that
    # many releases remove it.
    occurrences: dict = {}
    for r in first:
        occurrences[r.fingerprint] = occurrences.get(r.fingerprint, 0) + 1
    fps = list(occurrences)
    left = client.release(ns, fps)
    assert left == [occurrences[f] - 1 for f in fps]
    with pytest.raises(ChunkdError) as caught:
        client.dedup_all(data, namespace=ns, stream_id="x" * 65, **PARAMS)
    assert caught.value.code == grpc.StatusCode.INVALID_ARGUMENT
    assert "params.stream_id" in caught.value.message


def test_find_missing_splits_long_lists(client: Client) -> None:
    rng = random.Random(3)
    many = [rng.randbytes(32) for _ in range(25_000)]
    assert client.find_missing(namespace(), many) == many


def test_server_info(client: Client, server: ChunkdServer) -> None:
    info = client.server_info()
    assert isinstance(info, ServerInfo)
    assert info.version
    assert {a.name for a in info.algorithms} == set(ALGORITHMS)
    assert {"sha256", "xxh128"} <= set(info.fingerprints)
    assert info.index_backend == "memory"
    assert info.algorithm("fastcdc").normalization_level is not None
    assert info.algorithm("crc32").horizon_size is None
    assert info.algorithm("repmaxcdc").horizon_size == ParamRange(0, 16 << 20, 2 << 20)
    assert info.algorithm("rabin").polynomial == ParamRange(
        1 << 53, (1 << 54) - 1, 0x3DA3358B4DC173)
    assert info.algorithm("buzhash").polynomial is None
    for a in info.algorithms:
        assert a.backend in ("scalar", "avx2", "avx512") and a.backend_threads >= 1, a
    with pytest.raises(KeyError):
        info.algorithm("gear")
