"""However the client splits the stream into messages, the chunks are the
same (docs/design.md, "The reference is the specification")."""

from __future__ import annotations

import random
import uuid
from pathlib import Path
from typing import Iterator, List

import pytest

from chunkd_client import Client
from e2e_util import parse_csv, random_bytes, rows

ALGORITHMS = ["fastcdc", "crc32", "seqcdc", "fixed", "repmaxcdc", "rabin", "buzhash"]
# Small chunks, so that a 64 KiB input has many boundaries.
SMALL = {
    "fastcdc": dict(min_size=1024, avg_size=4096, max_size=16384),
    "crc32": dict(min_size=1024, avg_size=4096, max_size=16384),
    "seqcdc": dict(min_size=1024, max_size=16384),
    "fixed": dict(avg_size=4096),
    "repmaxcdc": dict(min_size=1024, horizon_size=8192),
    "rabin": dict(min_size=1024, avg_size=4096, max_size=16384),
    "buzhash": dict(min_size=1024, avg_size=4096, max_size=16384),
}
SMALL_FLAGS = {
    "fastcdc": ["--min", "1024", "--avg", "4096", "--max", "16384"],
    "crc32": ["--min", "1024", "--avg", "4096", "--max", "16384"],
    "seqcdc": ["--min", "1024", "--max", "16384"],
    "fixed": ["--avg", "4096"],
    "repmaxcdc": ["--min", "1024", "--horizon", "8192"],
    "rabin": ["--min", "1024", "--avg", "4096", "--max", "16384"],
    "buzhash": ["--min", "1024", "--avg", "4096", "--max", "16384"],
}
SMALL_INPUT = random_bytes(11, 64 << 10)
BIG_INPUT = random_bytes(12, (4 << 20) + 777)


def random_pieces(data: bytes, seed: int) -> Iterator[bytes]:
    """`data` in pieces of random sizes: mostly up to 300 KB, some tiny."""
    rng = random.Random(seed)
    offset = 0
    while offset < len(data):
        size = rng.choice([1, 2, 63, 64, 65, rng.randint(1, 4096), rng.randint(1, 300_000)])
        yield data[offset : offset + size]
        offset += size


@pytest.fixture(scope="module")
def big_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("split") / "big"
    path.write_bytes(BIG_INPUT)
    return path


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_one_byte_messages(client: Client, chunkctl, tmp_path: Path, algorithm: str) -> None:
    params = dict(algorithm=algorithm, **SMALL[algorithm])
    whole, _ = client.chunk_all(SMALL_INPUT, message_size=len(SMALL_INPUT), **params)
    assert len(whole) >= 4
    bytewise, summary = client.chunk_all(SMALL_INPUT, message_size=1, **params)
    assert bytewise == whole
    assert summary.total_bytes == len(SMALL_INPUT)

    path = tmp_path / "small"
    path.write_bytes(SMALL_INPUT)
    local = parse_csv(chunkctl("chunk", "--local", "--algorithm", algorithm,
                               *SMALL_FLAGS[algorithm], path).stdout)
    assert rows(whole) == local


#: Algorithms whose default chunks (256 KiB and more) are too few in BIG_INPUT:
#: the message-size tests use their SMALL parameters.
LARGE_DEFAULTS = ("repmaxcdc", "rabin")


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_message_sizes(client: Client, chunkctl, big_file: Path, algorithm: str) -> None:
    small = algorithm in LARGE_DEFAULTS
    flags = SMALL_FLAGS[algorithm] if small else []
    params = dict(algorithm=algorithm, **(SMALL[algorithm] if small else {}))
    local = parse_csv(chunkctl("chunk", "--local", "--algorithm", algorithm, *flags,
                               big_file).stdout)
    assert len(local) > 20
    results = {
        "1000": client.chunk_all(big_file, message_size=1000, **params),
        "1MiB": client.chunk_all(big_file, message_size=1 << 20, **params),
        "random": client.chunk_all(random_pieces(BIG_INPUT, 99), message_size=1 << 20,
                                   **params),
        "odd": client.chunk_all(BIG_INPUT, message_size=65537, **params),
    }
    for split, (records, summary) in results.items():
        assert rows(records) == local, split
        assert (summary.total_bytes, summary.total_chunks) == (len(BIG_INPUT), len(local)), split


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_dedup_message_sizes(client: Client, algorithm: str) -> None:
    reference, _ = client.chunk_all(BIG_INPUT, algorithm=algorithm)
    expected = [(r.offset, r.length, r.fingerprint) for r in reference]
    for split, source, size in [
        ("1000", BIG_INPUT, 1000),
        ("random", random_pieces(BIG_INPUT, 7), 1 << 20),
    ]:
        records, summary = client.dedup_all(
            source, namespace=f"split-{uuid.uuid4().hex}", algorithm=algorithm, message_size=size
        )
        got: List[tuple] = [(r.offset, r.length, r.fingerprint) for r in records]
        assert got == expected, split
        assert summary.total_bytes == len(BIG_INPUT), split
