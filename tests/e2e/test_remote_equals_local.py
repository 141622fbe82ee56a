"""The server (through the Python client) and `chunkctl chunk --local` (the
chunking library in-process) cut the same bytes identically, for every
algorithm, with default and explicit parameters."""

from __future__ import annotations

from pathlib import Path
from typing import Dict

import pytest

from chunkd_client import Client
from chunkd_client._tables import PARAMETER_FLAGS
from chunkd_client.testing import ChunkdServer
from e2e_util import SEKIEN, assert_valid_chunking, parse_csv, random_bytes, rows

# Explicit parameters per algorithm, as client keyword arguments.
EXPLICIT: Dict[str, dict] = {
    "fastcdc": dict(min_size=2048, avg_size=8192, max_size=32768, normalization_level=2, seed=7),
    "crc32": dict(min_size=2048, avg_size=8192, max_size=65536),
    "seqcdc": dict(
        min_size=4096, max_size=16384,
        seq_mode="decreasing", seq_length=4, skip_trigger=40, skip_size=256,
    ),
    "fixed": dict(avg_size=10000),
    "repmaxcdc": dict(min_size=2048, horizon_size=16384),
    "rabin": dict(min_size=2048, avg_size=8192, max_size=65536, polynomial=0x3DA3358B4DC173),
    "buzhash": dict(min_size=2048, avg_size=8192, max_size=32768),
}
# chunkctl's flag for each client keyword argument: the table's.
FLAGS = PARAMETER_FLAGS


def _log_like(size: int) -> bytes:
    out = bytearray()
    rng = random_bytes(5, size)
    i = 0
    while len(out) < size:
        out += b"2024-06-01T12:%02d:%02d level=info req=%d status=%d\n" % (
            rng[i] % 60, rng[i + 1] % 60, i, 200 + rng[i + 2] % 5,
        )
        i += 3
    return bytes(out[:size])


DATASETS = {
    "random-3MiB": lambda: random_bytes(1, (3 << 20) + 12345),
    "sekien": lambda: SEKIEN.read_bytes(),
    "zeros": lambda: bytes(300_000),
    "log-like": lambda: _log_like(700_000),
}


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> Dict[str, Path]:
    directory = tmp_path_factory.mktemp("remote_local")
    paths = {}
    for name, make in DATASETS.items():
        paths[name] = directory / name
        paths[name].write_bytes(make())
    return paths


def cli_flags(algorithm: str, params: dict) -> list:
    flags = ["--algorithm", algorithm]
    for key, value in params.items():
        flags += [FLAGS[key], value]
    return flags


@pytest.mark.parametrize("dataset", list(DATASETS))
@pytest.mark.parametrize("explicit", [False, True], ids=["defaults", "explicit"])
@pytest.mark.parametrize("algorithm", list(EXPLICIT))
def test_remote_equals_local(
    client: Client, server: ChunkdServer, chunkctl, files: Dict[str, Path],
    algorithm: str, explicit: bool, dataset: str,
) -> None:
    path = files[dataset]
    data = path.read_bytes()
    params = EXPLICIT[algorithm] if explicit else {}

    remote, summary = client.chunk_all(path, algorithm=algorithm, **params)
    local = parse_csv(
        chunkctl("chunk", "--local", *cli_flags(algorithm, params),
                 "--fingerprint", "sha256", "--format", "csv", path).stdout
    )
    assert rows(remote) == local
    assert summary.total_bytes == len(data) and summary.total_chunks == len(remote)

    # The same through chunkctl's remote path.
    via_cli = parse_csv(
        chunkctl("chunk", "--server", server.address, *cli_flags(algorithm, params),
                 "--format", "csv", path).stdout
    )
    assert via_cli == local

    defaults = client.server_info().algorithm(algorithm)
    if algorithm == "fixed":
        size = params.get("avg_size", defaults.avg_size.default)
        assert_valid_chunking(local, data, size, size)
    elif algorithm == "repmaxcdc":
        low = params.get("min_size", defaults.min_size.default)
        assert_valid_chunking(local, data, low, 2 * low - 1)
    else:
        assert_valid_chunking(
            local, data,
            params.get("min_size", defaults.min_size.default),
            params.get("max_size", defaults.max_size.default),
        )


@pytest.mark.parametrize("algorithm", list(EXPLICIT))
def test_xxh128_remote_equals_local(client: Client, chunkctl, files: Dict[str, Path], algorithm: str) -> None:
    path = files["random-3MiB"]
    remote, _ = client.chunk_all(path, algorithm=algorithm, fingerprint="xxh128")
    local = parse_csv(
        chunkctl("chunk", "--local", "--algorithm", algorithm, "--fingerprint", "xxh128", path).stdout
    )
    assert rows(remote) == local
    assert all(len(fp) == 32 for _, _, fp in local)
