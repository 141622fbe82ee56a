"""$CHUNKD_SHA256 picks how chunkd and `chunkctl chunk --local` compute sha256
fingerprints (several chunks at once with the SHA extensions, or OpenSSL one
at a time). The fingerprints never depend on it, every record matches
hashlib, and a bad value is an error at start-up naming the variable."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Iterator

import pytest

from chunkd_client import Client
from chunkd_client.testing import ChunkdServer
from e2e_util import RPC_TIMEOUT, cpu_flags, parse_csv, random_bytes, start_with_env

DATA = random_bytes(11, (5 << 20) + 777)


def _cpu_has_sha() -> bool:
    return {"sha_ni", "sse4_1", "ssse3"} <= cpu_flags()


def _assert_matches_hashlib(records) -> None:
    assert len(records) > 100
    for offset, length, digest in records:
        assert digest == hashlib.sha256(DATA[offset:offset + length]).hexdigest()


@pytest.fixture(scope="module")
def data_file(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("sha256") / "data.bin"
    path.write_bytes(DATA)
    return path


@pytest.fixture(params=["openssl", "shani", "shani-x1", "shani-x2", "shani-x4", ""])
def forced(request, monkeypatch) -> Iterator[str]:
    name = request.param
    if name.startswith("shani") and not _cpu_has_sha():
        pytest.skip("this CPU lacks the SHA extensions (sha_ni, sse4_1, ssse3)")
    if name:
        monkeypatch.setenv("CHUNKD_SHA256", name)
    else:
        monkeypatch.delenv("CHUNKD_SHA256", raising=False)
    yield name


def test_server_fingerprints_do_not_depend_on_the_backend(chunkd_bin, forced) -> None:
    with ChunkdServer(chunkd_bin) as server:
        if forced in ("openssl", "shani-x1", "shani-x2", "shani-x4"):
            assert f"sha256 {forced}," in server.log()
        elif _cpu_has_sha():
            assert "sha256 shani-x" in server.log()
        with Client(server.address, timeout=RPC_TIMEOUT) as client:
            records = [(c.offset, c.length, c.fingerprint.hex())
                       for c in client.chunk(DATA, avg_size=16384)]
        _assert_matches_hashlib(records)


def test_local_fingerprints_do_not_depend_on_the_backend(chunkctl, data_file, forced) -> None:
    result = chunkctl("chunk", "--local", "--avg", 8192, data_file)
    _assert_matches_hashlib(parse_csv(result.stdout))


def test_unknown_backend_stops_the_server(chunkd_bin) -> None:
    result = start_with_env(chunkd_bin, CHUNKD_SHA256="sha3")
    assert result.returncode != 0
    assert "CHUNKD_SHA256" in result.stderr and "'sha3'" in result.stderr, result.stderr
    assert "openssl" in result.stderr


def test_unknown_backend_is_a_chunkctl_usage_error(chunkctl, data_file, monkeypatch) -> None:
    monkeypatch.setenv("CHUNKD_SHA256", "sha3")
    result = chunkctl("chunk", "--local", data_file, check=False)
    assert result.returncode == 2, result.stderr
    assert "CHUNKD_SHA256" in result.stderr and "'sha3'" in result.stderr
    assert result.stdout == ""
