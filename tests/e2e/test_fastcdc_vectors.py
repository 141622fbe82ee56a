"""The public FastCDC 2020 vectors (tests/data/fastcdc2020_test_vectors.txt)
through the server: via the Python client and via `chunkctl chunk --server`."""

from __future__ import annotations

import pytest

from chunkd_client import Client
from chunkd_client.testing import ChunkdServer
from e2e_util import SEKIEN, VECTORS, parse_vectors, rows

VECTOR_PARAMS = dict(algorithm="fastcdc", min_size=4096, avg_size=16384, max_size=65535, normalization_level=2)
CLI_FLAGS = ["--algorithm", "fastcdc", "--min", "4096", "--avg", "16384", "--max", "65535", "--level", "2"]
SEEDS = [0, 666]


def expected_output(seed: int) -> str:
    return "".join(f"{o},{n},{sha}\n" for o, n, sha in parse_vectors()[seed])


def test_vector_file_is_intact() -> None:
    vectors = parse_vectors()
    assert sorted(vectors) == SEEDS
    assert all(len(v) == 6 for v in vectors.values())
    assert SEKIEN.stat().st_size == 109466 == sum(n for _, n, _ in vectors[0])
    assert "d9e749d9367fc908876749d6502eb212fee88c9a94892fb07da5ef3ba8bc39ed" in VECTORS.read_text()


@pytest.mark.parametrize("message_size", [1000, 1 << 20])
@pytest.mark.parametrize("seed", SEEDS)
def test_client(client: Client, seed: int, message_size: int) -> None:
    records, summary = client.chunk_all(SEKIEN, seed=seed, message_size=message_size, **VECTOR_PARAMS)
    assert rows(records) == parse_vectors()[seed]
    assert (summary.total_bytes, summary.total_chunks) == (109466, 6)


@pytest.mark.parametrize("seed", SEEDS)
def test_chunkctl_server(server: ChunkdServer, chunkctl, seed: int) -> None:
    out = chunkctl("chunk", "--server", server.address, *CLI_FLAGS, "--seed", seed,
                   "--fingerprint", "sha256", "--format", "csv", SEKIEN).stdout
    assert out == expected_output(seed)


@pytest.mark.parametrize("seed", SEEDS)
def test_chunkctl_server_stdin(server: ChunkdServer, chunkctl, seed: int) -> None:
    out = chunkctl("chunk", "--server", server.address, *CLI_FLAGS, "--seed", seed,
                   "--message-size", "777", "-", stdin=SEKIEN.read_bytes()).stdout
    assert out == expected_output(seed)


@pytest.mark.parametrize("seed", SEEDS)
def test_chunkctl_local(chunkctl, seed: int) -> None:
    out = chunkctl("chunk", "--local", *CLI_FLAGS, "--seed", seed, SEKIEN).stdout
    assert out == expected_output(seed)
