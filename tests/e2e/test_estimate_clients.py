"""Estimate through the Python client and the three command-line clients,
against a real chunkd.

- Client.estimate (sync) and AsyncClient.estimate give equal results for
  one data set of several files, exact and sampled, whatever the message
  size, and those results are what the chunk listings of the same files
  say: in exact mode the counts, the unique chunks and bytes (distinct
  XXH3-128 fingerprints over every file), the histogram and the sizes;
  sampled, the chunks a fingerprint in the sampled 1/N of the hash space
  keeps, the sketches' distinct chunks and bytes near the exact ones, and
  the ratio and interval bounds of docs/estimate.md. With a namespace, the bytes it holds. Past the server's
  --estimate_max_entries the refusal's reason is STREAM_MEMORY.
- `chunkd-client estimate` prints the text table and the JSON object of
  that result (docs/cli.md), draws --plot, reads stdin, draws its progress
  line, and exits 2 on the server's INVALID_ARGUMENT naming the set.
- chunkctl ($CHUNKCTL_BIN), chunkd-client and chunkd-go ($CHUNKD_GO_BIN)
  print the same table and the same JSON line, byte for byte, for the
  same files and sets. A CLI whose binary is missing or has no `estimate`
  command is skipped, with the reason.
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import subprocess
import uuid
from collections import Counter
from pathlib import Path
from typing import AsyncIterator, Dict, Iterator, List, Optional, Sequence, Tuple

import pytest

from chunkd_client import (
    ChunkdError, ChunkingParams, Client, EstimateProgress, EstimateResult, SetEstimate,
    parse_set,
)
from chunkd_client._cli_output import estimate_json, estimate_text
from chunkd_client.aio import AsyncClient
from chunkd_client._cli_output import human_bytes
from chunkd_client.testing import ChunkdServer, serving

from clients_util import TOOLS_BIN, chunkd_client
from e2e_util import RPC_TIMEOUT, SUBPROCESS_TIMEOUT, random_bytes

#: Sets of several algorithms, a preset among them.
SETS = [
    "fastcdc:min=2048,avg=8192,max=32768",
    "fastcdc:min=4096,avg=16384,max=65536,level=2",
    "seqcdc:preset=seqcdc-8k",
    "crc32:avg=8192",
    "fixed:avg=4096",
    "buzhash:min=2048,avg=8192,max=32768",
]
SAMPLE = 4
UINT64_MAX = (1 << 64) - 1
#: --estimate_max_entries of the `limited` server: less than the distinct
#: 4 KiB chunks of the data set, more than a 1-in-64 sample of them.
MAX_ENTRIES = 100


def _versions() -> Dict[str, bytes]:
    """A small versioned data set: a base, an edited version, a copy, a
    tiny file and an empty one (which adds no file)."""
    base = random_bytes(3101, 600_000)
    edited = base[:200_000] + random_bytes(3102, 3_000) + base[200_000:550_000] \
        + random_bytes(3103, 80_000)
    return {"a/v1.bin": base, "a/v2.bin": edited, "b/copy.bin": base,
            "b/tiny": b"tiny file", "empty": b""}


FILES = _versions()


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("dataset")
    for name, data in FILES.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(data)
    return root


def _file_list(root: Path) -> List[Path]:
    """The files of the data set in sorted path order."""
    return sorted(root / name for name in FILES)


# What the chunk listings say.

Listing = List[Tuple[int, bytes]]  # (length, fingerprint) per chunk


def _listings(client: Client, params: ChunkingParams, fingerprint: str) -> List[Listing]:
    return [[(r.length, r.fingerprint)
             for r in client.chunk_all(data, params=params, fingerprint=fingerprint)[0]]
            for data in FILES.values()]


def _nearest_rank(sizes: List[int], percent: int) -> int:
    return sizes[max(math.ceil(percent / 100 * len(sizes)), 1) - 1]


def _kept(fingerprint: bytes, rate: int) -> bool:
    return int.from_bytes(fingerprint[:8], "big") <= UINT64_MAX // rate


def check_against_listings(estimate: SetEstimate, listings: List[Listing],
                           rate: int) -> None:
    """``estimate`` is what the listings of the data set's files say."""
    chunks = [c for listing in listings for c in listing]
    sizes = sorted(length for length, _ in chunks)
    total = sum(sizes)
    assert (estimate.bytes, estimate.chunks) == (total, len(chunks))
    buckets: Counter = Counter()
    bucket_bytes: Counter = Counter()
    for length in sizes:
        buckets[1 << (length.bit_length() - 1)] += 1
        bucket_bytes[1 << (length.bit_length() - 1)] += length
    assert [(b.lower_bound, b.chunks, b.bytes) for b in estimate.histogram] == [
        (bound, buckets[bound], bucket_bytes[bound]) for bound in sorted(buckets)]
    assert (estimate.min_chunk_size, estimate.max_chunk_size) == (sizes[0], sizes[-1])
    assert (estimate.p50_chunk_size, estimate.p90_chunk_size, estimate.p99_chunk_size) == (
        _nearest_rank(sizes, 50), _nearest_rank(sizes, 90), _nearest_rank(sizes, 99))
    assert estimate.mean_chunk_size == pytest.approx(total / len(chunks))
    copies = Counter(fingerprint for _, fingerprint in chunks)
    length_of = dict((fingerprint, length) for length, fingerprint in chunks)
    kept = [f for f in copies if _kept(f, rate)]
    kept_bytes = sum(length_of[f] for f in kept)
    assert estimate.sampled == (rate > 1)
    assert estimate.sampled_unique_chunks == len(kept)
    if rate == 1:
        assert (estimate.unique_chunks, estimate.unique_bytes) == (len(copies), kept_bytes)
        assert estimate.dedup_ratio == pytest.approx(total / kept_bytes)
        assert estimate.ratio_interval is None
    else:
        # docs/estimate.md, "The interval": the distinct chunks and their
        # bytes from sketches of every chunk, near the exact counts on data
        # this small; the interval between the kept bytes and every byte.
        exact_bytes = sum(length_of.values())
        assert estimate.unique_chunks == pytest.approx(len(copies), rel=0.03)
        assert estimate.unique_bytes == pytest.approx(exact_bytes, rel=0.03)
        assert estimate.dedup_ratio == pytest.approx(total / estimate.unique_bytes,
                                                     rel=1e-6)
        low, high = estimate.ratio_interval  # type: ignore[misc]
        assert 1 <= low <= estimate.dedup_ratio <= high <= total / kept_bytes
    assert [(c.backend, c.medium, c.entries) for c in estimate.index_costs] == [
        ("memory", "memory", estimate.unique_chunks), ("rocksdb", "disk", estimate.unique_chunks),
        ("redis", "memory", estimate.unique_chunks)]


# The library.

async def _estimate_async(address: str, sources: Sequence[object], **kwargs: object
                          ) -> Tuple[EstimateResult, List[EstimateProgress]]:
    seen: List[EstimateProgress] = []
    async with AsyncClient(address, timeout=RPC_TIMEOUT) as client:
        result = await client.estimate(*sources, on_progress=seen.append,  # type: ignore[arg-type]
                                       **kwargs)  # type: ignore[arg-type]
    return result, seen


async def _pieces(data: bytes) -> AsyncIterator[bytes]:
    for start in range(0, len(data), 100_000):
        yield data[start:start + 100_000]


@pytest.mark.parametrize("rate", [1, SAMPLE])
def test_sync_and_async_agree_with_the_chunk_listings(
        server: ChunkdServer, client: Client, dataset: Path, rate: int) -> None:
    seen: List[EstimateProgress] = []
    result = client.estimate(dataset, sets=SETS, sample_rate=rate, on_progress=seen.append)
    assert [s.label for s in result.sets] == SETS
    assert (result.total_bytes, result.files, result.sample_rate, result.fingerprint) == (
        sum(map(len, FILES.values())), 4, rate, "xxh128")
    assert [p.bytes for p in seen] == sorted(p.bytes for p in seen)
    assert all(p.bytes <= result.total_bytes and p.files <= 4 for p in seen)
    for label, estimate in zip(SETS, result.sets):
        params = parse_set(label)[1]
        check_against_listings(estimate, _listings(client, params, "xxh128"), rate)
        for field in ("min_size", "avg_size", "max_size", "normalization_level"):
            if getattr(params, field) is not None:
                assert getattr(estimate.chunking, field) == getattr(params, field), label

    # The same data set as other sources, split otherwise, asynchronously.
    files = _file_list(dataset)
    sources: List[object] = [*files[:-1], _pieces(files[-1].read_bytes())]
    again, _ = asyncio.run(_estimate_async(server.address, sources, sets=SETS,
                                           sample_rate=rate, message_size=65536))
    assert again == result


def test_sets_by_label_and_params(client: Client, dataset: Path) -> None:
    pairs = [("small", ChunkingParams("fastcdc", 2048, 8192, 32768)),
             ("fixed", ChunkingParams("fixed", avg_size=4096))]
    by_pairs = client.estimate(dataset, sets=pairs)
    by_syntax = client.estimate(dataset, sets=[SETS[0], "fixed:avg=4096"])
    assert [s.label for s in by_pairs.sets] == ["small", "fixed"]
    for a, b in zip(by_pairs.sets, by_syntax.sets):
        assert (a.unique_bytes, a.histogram, a.chunking) == (b.unique_bytes, b.histogram,
                                                            b.chunking)


def test_a_namespace_counts_what_it_holds(client: Client, dataset: Path) -> None:
    namespace = f"estimate-{uuid.uuid4().hex}"
    params = parse_set(SETS[0])[1]
    client.dedup_all(FILES["a/v1.bin"], namespace=namespace, params=params)
    result = client.estimate(dataset, sets=SETS[:2], namespace=namespace)
    assert result.fingerprint == "sha256"
    held = {f for _, f in _listings(client, params, "sha256")[0]}
    chunks = {f: length for listing in _listings(client, params, "sha256")
              for length, f in listing}
    estimate = result.sets[0]
    assert estimate.namespace_chunks == len(held)
    assert estimate.namespace_bytes == sum(chunks[f] for f in held)
    assert result.sets[1].namespace_bytes is not None
    # Read only: nothing was added to the namespace.
    assert client.find_missing(namespace, list(chunks)) == [
        f for f in chunks if f not in held]
    # And without one, the columns are None.
    assert client.estimate(dataset, sets=SETS[:1]).sets[0].namespace_bytes is None


def test_out_of_range_is_invalid_argument_naming_the_set(client: Client,
                                                         dataset: Path) -> None:
    with pytest.raises(ChunkdError) as raised:
        client.estimate(dataset, sets=["fixed:avg=4096", "fastcdc:min=1"])
    assert raised.value.code().name == "INVALID_ARGUMENT"
    assert "fastcdc:min=1" in raised.value.details()


@pytest.fixture(scope="module")
def limited(chunkd_bin: Path) -> Iterator[ChunkdServer]:
    yield from serving(ChunkdServer(
        chunkd_bin, extra_args=[f"--estimate_max_entries={MAX_ENTRIES}"]))


def test_past_the_entry_limit_the_reason_is_stream_memory(limited: ChunkdServer,
                                                          dataset: Path) -> None:
    with Client(limited.address, timeout=RPC_TIMEOUT) as client:
        with pytest.raises(ChunkdError) as refused:
            client.estimate(dataset, sets=["fixed:avg=4096"])
        assert refused.value.code().name == "RESOURCE_EXHAUSTED"
        assert refused.value.reason == "STREAM_MEMORY"
        sampled = client.estimate(dataset, sets=["fixed:avg=4096"], sample_rate=64)
        assert sampled.sets[0].sampled_unique_chunks <= MAX_ENTRIES
    run = _cli(chunkd_client(), "estimate", "--server", limited.address, "--set",
               "fixed:avg=4096", dataset)
    assert (run.returncode, run.stdout) == (1, b"")
    assert run.stderr.decode().startswith("chunkd-client: RESOURCE_EXHAUSTED: ")
    assert run.stderr.decode().rstrip().endswith("[reason: STREAM_MEMORY]")


# chunkd-client.

def _cli(binary: Path, *args: object, stdin: Optional[bytes] = None
         ) -> subprocess.CompletedProcess:
    return subprocess.run([str(binary), *map(str, args)], input=stdin,
                          stdin=None if stdin is not None else subprocess.DEVNULL,
                          capture_output=True, timeout=SUBPROCESS_TIMEOUT)


def _set_flags(sets: Sequence[str]) -> List[str]:
    return [item for spec in sets for item in ("--set", spec)]


@pytest.mark.parametrize("rate", [1, SAMPLE])
def test_chunkd_client_prints_the_table_and_the_json(
        server: ChunkdServer, client: Client, dataset: Path, rate: int) -> None:
    result = client.estimate(dataset, sets=SETS, sample_rate=rate)
    args = ["estimate", "--server", server.address, *_set_flags(SETS), "--sample", rate,
            dataset]
    text = _cli(chunkd_client(), *args)
    assert (text.returncode, text.stderr) == (0, b"")
    assert text.stdout.decode() == estimate_text(result)
    as_json = _cli(chunkd_client(), *args[:1], "--json", *args[1:])
    assert as_json.returncode == 0, as_json.stderr
    assert as_json.stdout.decode() == estimate_json(result)


def test_chunkd_client_namespace_column_stdin_and_plot(
        server: ChunkdServer, client: Client, dataset: Path, tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    namespace = f"estimate-{uuid.uuid4().hex}"
    client.dedup_all(FILES["a/v1.bin"], namespace=namespace, params=parse_set(SETS[0])[1])
    data = FILES["a/v2.bin"]
    result = client.estimate(data, sets=SETS[:1], namespace=namespace)
    picture = tmp_path / "estimate.svg"
    run = _cli(chunkd_client(), "estimate", "--server", server.address, "--set", SETS[0],
               "--namespace", namespace, "--plot", picture, "-", stdin=data)
    assert run.returncode == 0, run.stderr
    assert run.stdout.decode() == estimate_text(result)
    assert run.stdout.decode().splitlines()[0].endswith("  namespace_bytes")
    assert picture.read_text().lstrip().startswith(("<?xml", "<svg"))


def test_chunkd_client_progress_line(server: ChunkdServer, dataset: Path) -> None:
    total = sum(map(len, FILES.values()))
    run = _cli(chunkd_client(), "estimate", "--server", server.address, "--set", SETS[0],
               "--progress", "always", dataset)
    assert run.returncode == 0, run.stderr
    stderr = run.stderr.decode()
    # Redrawn in place, the last drawing at the whole data set, then a newline.
    last = stderr.split("\r\x1b[K")[-1]
    assert last.startswith(f"{len(FILES)} files [{'#' * 24}] 100.0% ")
    assert f" {human_bytes(total)}/{human_bytes(total)} " in last
    assert last.endswith("\n") and last.count("\n") == 1


def test_chunkd_client_invalid_argument_exits_2(server: ChunkdServer, dataset: Path) -> None:
    run = _cli(chunkd_client(), "estimate", "--server", server.address, "--set",
               "fastcdc:min=1", dataset)
    assert (run.returncode, run.stdout) == (2, b"")
    assert run.stderr.decode().startswith("chunkd-client: INVALID_ARGUMENT: ")
    assert "fastcdc:min=1" in run.stderr.decode()


# The three command-line clients.

def test_chunkd_client_draws_the_json_chunkctl_writes(
        server: ChunkdServer, chunkctl_bin: Path, dataset: Path, tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    if _cli(chunkctl_bin, "estimate", "--help").returncode != 0:
        pytest.skip(f"{chunkctl_bin} has no estimate command")
    picture = tmp_path / "estimate.png"
    run = _cli(chunkctl_bin, "estimate", "--server", server.address, *_set_flags(SETS),
               "--sample", SAMPLE, "--plot", picture, dataset)
    assert run.returncode == 0, run.stderr
    saved = tmp_path / "estimate.json"
    assert saved.is_file() and not picture.exists()
    drawn = _cli(chunkd_client(), "plot", saved, picture)
    assert (drawn.returncode, drawn.stdout, drawn.stderr) == (0, b"", b"")
    assert picture.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def _estimate_binaries(chunkctl_bin: Path) -> Dict[str, Path]:
    """The three CLIs; pytest.skip naming those whose binary is missing or
    has no estimate command (not built from this tree yet)."""
    candidates = {"chunkctl": chunkctl_bin, "chunkd-client": chunkd_client(),
                  "chunkd-go": Path(os.environ.get("CHUNKD_GO_BIN")
                                    or TOOLS_BIN / "chunkd-go")}
    found: Dict[str, Path] = {}
    missing = []
    for name, path in candidates.items():
        if not path.is_file():
            missing.append(f"{name} ({path} is not built)")
        elif _cli(path, "estimate", "--help").returncode != 0:
            missing.append(f"{name} ({path} has no estimate command)")
        else:
            found[name] = path
    if missing:
        pytest.skip("not comparing: " + "; ".join(missing))
    return found


@pytest.mark.parametrize("rate", [1, SAMPLE])
def test_the_three_clis_print_the_same(server: ChunkdServer, chunkctl_bin: Path,
                                       dataset: Path, rate: int) -> None:
    binaries = _estimate_binaries(chunkctl_bin)
    args = ["estimate", "--server", server.address, *_set_flags(SETS), "--sample", rate,
            dataset]
    texts, jsons = {}, {}
    for name, binary in binaries.items():
        text = _cli(binary, *args)
        assert text.returncode == 0, (name, text.stderr)
        texts[name] = text.stdout.decode()
        as_json = _cli(binary, *args[:1], "--json", *args[1:])
        assert as_json.returncode == 0, (name, as_json.stderr)
        jsons[name] = as_json.stdout.decode()
        assert jsons[name].endswith("\n") and jsons[name].count("\n") == 1, name
        json.loads(jsons[name])
    for name in binaries:
        assert texts[name] == texts["chunkd-client"], name
        assert jsons[name] == jsons["chunkd-client"], name
