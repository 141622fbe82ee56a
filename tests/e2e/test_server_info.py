"""GetServerInfo: algorithms with their ranges, fingerprints, version, limits."""

from __future__ import annotations

import re

from chunkd_client import Client
from chunkd_client._proto.chunkd.v1 import chunkd_pb2 as pb
from chunkd_client.testing import ChunkdServer, health_status
from e2e_util import REPO

EXPECTED = {
    "fastcdc": pb.ALGORITHM_FASTCDC,
    "crc32": pb.ALGORITHM_CRC32,
    "seqcdc": pb.ALGORITHM_SEQCDC,
    "fixed": pb.ALGORITHM_FIXED,
    "repmaxcdc": pb.ALGORITHM_REP_MAX_CDC,
    "rabin": pb.ALGORITHM_RABIN,
    "buzhash": pb.ALGORITHM_BUZHASH,
}
#: The algorithms whose chunk sizes are not bounded by min/avg/max fields:
#: fixed (avg only) and repmaxcdc (min and horizon; chunks in [min, 2 min)).
NOT_MIN_AVG_MAX = ("fixed", "repmaxcdc")


def project_version() -> str:
    m = re.search(r"project\(chunkd\s+VERSION\s+([\d.]+)", (REPO / "CMakeLists.txt").read_text())
    assert m
    return m.group(1)


def test_version(client: Client) -> None:
    assert client.server_info().version == project_version()


def test_algorithms_and_ranges(client: Client) -> None:
    info = client.server_info()
    assert {a.name: a.algorithm for a in info.algorithms} == EXPECTED
    assert len(info.algorithms) == 7
    for a in info.algorithms:
        for name in ("min_size",) if a.name == "repmaxcdc" else ("min_size", "avg_size", "max_size"):
            r = getattr(a, name)
            assert 0 < r.max, (a.name, name, r)
            assert r.min <= r.default <= r.max, (a.name, name, r)
        if a.name not in NOT_MIN_AVG_MAX:
            assert a.min_size.default <= a.avg_size.default <= a.max_size.default, a
        assert (a.horizon_size is not None) == (a.name == "repmaxcdc"), a
        assert (a.polynomial is not None) == (a.name == "rabin"), a
    crc32 = info.algorithm("crc32")
    assert crc32.avg_size_power_of_two
    assert (crc32.min_size.default, crc32.avg_size.default, crc32.max_size.default) == (2048, 16384, 65536)
    fastcdc = info.algorithm("fastcdc")
    assert fastcdc.normalization_level is not None
    level = fastcdc.normalization_level
    assert (level.min, level.max, level.default) == (0, 3, 1)
    assert (fastcdc.min_size.default, fastcdc.avg_size.default, fastcdc.max_size.default) == (4096, 16384, 65536)
    seqcdc = info.algorithm("seqcdc")
    assert (seqcdc.min_size.default, seqcdc.max_size.default) == (8192, 32768)
    assert info.algorithm("fixed").avg_size.default == 16384
    repmax = info.algorithm("repmaxcdc")
    assert repmax.min_size.default == 256 << 10
    assert repmax.horizon_size.default == 8 * (256 << 10)
    rabin = info.algorithm("rabin")
    assert (rabin.min_size.default, rabin.avg_size.default, rabin.max_size.default) == (
        512 << 10, 1 << 20, 8 << 20)
    assert rabin.avg_size_power_of_two
    assert rabin.polynomial.default == 0x3DA3358B4DC173
    buzhash = info.algorithm("buzhash")
    assert (buzhash.min_size.default, buzhash.avg_size.default, buzhash.max_size.default) == (
        16 << 10, 64 << 10, 256 << 10)


def test_fingerprints_backends_and_limits(client: Client) -> None:
    info = client.server_info()
    assert {"sha256", "xxh128"} <= set(info.fingerprints)
    assert info.chunking_backend in ("scalar", "avx2", "avx512")
    assert info.index_backend == "memory"
    assert info.max_message_bytes == 4 << 20
    assert info.max_inflight_bytes >= info.max_message_bytes


def test_health(server: ChunkdServer) -> None:
    assert health_status(server.address) == 1


def test_chunkctl_info_and_version(server: ChunkdServer, chunkctl, client: Client) -> None:
    out = chunkctl("info", "--server", server.address).stdout
    assert project_version() in out
    for name in EXPECTED:
        assert name in out
    assert chunkctl("--version").stdout.strip() == f"chunkctl {project_version()}"
