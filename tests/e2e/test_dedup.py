"""Dedup and FindMissing through the Python client, and `chunkctl dedup`."""

from __future__ import annotations

import hashlib
import re
import urllib.request
import uuid
from pathlib import Path
from typing import Dict, Optional

import pytest

from chunkd_client import Client
from chunkd_client.testing import ChunkdServer
from e2e_util import random_bytes

DATA = random_bytes(31, (3 << 20) + 4321)


def new_namespace(tag: str) -> str:
    return f"e2e-{tag}-{uuid.uuid4().hex[:12]}"


@pytest.fixture(scope="module")
def data_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("dedup") / "data"
    path.write_bytes(DATA)
    return path


#: Each algorithm, with parameters that give over 20 chunks in DATA (the
#: defaults of repmaxcdc and rabin make chunks of 256 KiB and more).
PARAMS = {
    "fastcdc": {}, "crc32": {}, "seqcdc": {}, "fixed": {},
    "repmaxcdc": dict(min_size=16384, horizon_size=65536),
    "rabin": dict(min_size=16384, avg_size=65536, max_size=262144),
    "buzhash": {},
}


@pytest.mark.parametrize("algorithm", list(PARAMS))
def test_second_pass_is_all_duplicate(client: Client, data_file: Path, algorithm: str) -> None:
    ns = new_namespace("twice")
    first, s1 = client.dedup_all(data_file, namespace=ns, algorithm=algorithm,
                                 **PARAMS[algorithm])
    assert len(first) > 20
    assert all(r.is_new for r in first), "random data: every chunk is new"
    assert s1.total_bytes == s1.unique_bytes == len(DATA)
    assert s1.total_chunks == s1.unique_chunks == len(first)
    for r in first:
        assert r.fingerprint == hashlib.sha256(DATA[r.offset : r.end]).digest()
    # Dedup cuts exactly like Chunk.
    chunks, _ = client.chunk_all(data_file, algorithm=algorithm, **PARAMS[algorithm])
    assert [(r.offset, r.length, r.fingerprint) for r in first] == [
        (r.offset, r.length, r.fingerprint) for r in chunks
    ]

    second, s2 = client.dedup_all(data_file, namespace=ns, algorithm=algorithm,
                                  **PARAMS[algorithm])
    assert [(r.offset, r.length, r.fingerprint) for r in second] == [
        (r.offset, r.length, r.fingerprint) for r in first
    ]
    assert not any(r.is_new for r in second)
    assert s2.unique_bytes == 0 and s2.unique_chunks == 0
    assert s2.total_bytes == len(DATA) and s2.total_chunks == len(second)


def test_duplicates_within_one_stream(client: Client) -> None:
    half = random_bytes(32, 1 << 20)
    records, summary = client.dedup_all(
        half + half, namespace=new_namespace("within"), algorithm="fixed", avg_size=4096
    )
    assert len(records) == 512
    assert [r.is_new for r in records] == [True] * 256 + [False] * 256
    assert summary.unique_bytes == 1 << 20 and summary.unique_chunks == 256
    assert summary.total_bytes == 2 << 20


def test_namespaces_do_not_share_entries(client: Client, data_file: Path) -> None:
    a, b = new_namespace("a"), new_namespace("b")
    records, _ = client.dedup_all(data_file, namespace=a)
    fingerprints = [r.fingerprint for r in records]
    assert client.find_missing(a, fingerprints) == []
    assert client.find_missing(b, fingerprints) == fingerprints
    in_b, summary = client.dedup_all(data_file, namespace=b)
    assert all(r.is_new for r in in_b)
    assert summary.unique_bytes == len(DATA)
    assert client.find_missing(b, fingerprints) == []


@pytest.mark.parametrize("fingerprint,size", [("sha256", 32), ("xxh128", 16)])
def test_find_missing_reports_exactly_the_absent(client: Client, fingerprint: str, size: int) -> None:
    ns = new_namespace("missing")
    stored_data = random_bytes(33, 1 << 20)
    records, _ = client.dedup_all(stored_data, namespace=ns, fingerprint=fingerprint,
                                  algorithm="fixed", avg_size=8192)
    stored = [r.fingerprint for r in records]
    assert len(stored) == 128 and all(len(f) == size for f in stored)
    # Fingerprints of chunks that were never sent.
    absent = [r.fingerprint for r in client.chunk_all(
        random_bytes(34, 40 * 8192), fingerprint=fingerprint, algorithm="fixed", avg_size=8192)[0]]
    query = []
    for i, f in enumerate(stored):
        query.append(f)
        if i % 4 == 0 and absent:
            query.append(absent.pop())
    query += absent
    expected = [f for f in query if f not in set(stored)]
    assert len(expected) == 40
    assert client.find_missing(ns, query) == expected
    assert client.find_missing(ns, stored) == []
    assert client.find_missing(new_namespace("empty"), stored) == stored


DEDUP_LINE = re.compile(
    r"(?P<name>.+) bytes=(?P<bytes>\d+) unique_bytes=(?P<unique_bytes>\d+) "
    r"chunks=(?P<chunks>\d+) unique_chunks=(?P<unique_chunks>\d+) ratio=(?P<ratio>\S+)"
    r"( hints_tried=(?P<hints_tried>\d+) hints_accepted=(?P<hints_accepted>\d+) "
    r"hints_rejected=(?P<hints_rejected>\d+) hint_skipped_bytes=(?P<hint_skipped_bytes>\d+))?"
)


def hint_results(server: ChunkdServer) -> Dict[str, float]:
    """chunkd_hints_total summed over the tests, per result (accepted, rejected)."""
    url = f"http://{server.metrics_address}/metrics"
    with urllib.request.urlopen(url, timeout=10) as response:
        text = response.read().decode()
    totals: Dict[str, float] = {}
    for match in re.finditer(r"^chunkd_hints_total\{([^}]*)\} (\S+)$", text, re.MULTILINE):
        labels = dict(re.findall(r'(\w+)="([^"]*)"', match.group(1)))
        totals[labels["result"]] = totals.get(labels["result"], 0.0) + float(match.group(2))
    return totals


@pytest.mark.parametrize("hints", [None, "ff_rwt_fpt", "OFF"])
def test_chunkctl_dedup_hints(
    server: ChunkdServer, chunkctl, data_file: Path, hints: Optional[str]
) -> None:
    """--hints reaches the server: the second pass over a file follows the
    hints of the first unless --hints off; the exact tests find every chunk."""
    ns = new_namespace("hints")
    flags = [] if hints is None else ["--hints", hints]
    chunkctl("dedup", "--server", server.address, "--namespace", ns, *flags, data_file)
    before = hint_results(server)
    out = chunkctl("dedup", "--server", server.address, "--namespace", ns, *flags, data_file).stdout
    after = hint_results(server)
    second = DEDUP_LINE.fullmatch(out.splitlines()[0])
    assert second is not None, out
    assert int(second["unique_bytes"]) == 0 and int(second["bytes"]) == len(DATA)
    accepted = after.get("accepted", 0.0) - before.get("accepted", 0.0)
    if hints == "OFF":
        assert after == before
        assert second["hints_tried"] is None, out  # no counters printed
    else:
        assert accepted > 0
        # The line ends with the stream's own counters.
        assert int(second["hints_accepted"]) == accepted
        assert 0 < int(second["hint_skipped_bytes"]) <= len(DATA)


def test_chunkctl_dedup_same_file_twice(
    client: Client, server: ChunkdServer, chunkctl, data_file: Path
) -> None:
    ns = new_namespace("cli")
    out = chunkctl("dedup", "--server", server.address, "--namespace", ns, data_file, data_file).stdout
    lines = out.splitlines()
    assert len(lines) == 3, out
    parsed = [DEDUP_LINE.fullmatch(line) for line in lines]
    assert all(parsed), out
    first, second, total = (m.groupdict() for m in parsed)
    assert first["name"] == second["name"] == str(data_file)
    assert int(first["bytes"]) == int(first["unique_bytes"]) == len(DATA)
    assert int(second["bytes"]) == len(DATA)
    assert int(second["unique_bytes"]) == 0 and int(second["unique_chunks"]) == 0
    assert float(first["ratio"]) == pytest.approx(1.0)
    assert float(second["ratio"]) == pytest.approx(2.0)
    assert int(total["bytes"]) == 2 * len(DATA) and int(total["unique_bytes"]) == len(DATA)

    # What chunkctl stored is what the Python client sees.
    records, summary = client.dedup_all(data_file, namespace=ns)
    assert summary.unique_bytes == 0
    assert client.find_missing(ns, [r.fingerprint for r in records]) == []
