"""GetServerInfo: algorithms with their ranges, fingerprints, version, limits."""

from __future__ import annotations

import os
import re
from pathlib import Path

import grpc
import pytest

from chunkd_client import ChunkdError, ChunkingParams, Client
from chunkd_client._proto.chunkd.v1 import chunkd_pb2 as pb
from chunkd_client.testing import ChunkdServer, health_status
from e2e_util import REPO, RPC_TIMEOUT

EXPECTED = {
    "fastcdc": pb.ALGORITHM_FASTCDC,
    "crc32": pb.ALGORITHM_CRC32,
    "seqcdc": pb.ALGORITHM_SEQCDC,
    "fixed": pb.ALGORITHM_FIXED,
    "repmaxcdc": pb.ALGORITHM_REP_MAX_CDC,
    "rabin": pb.ALGORITHM_RABIN,
    "buzhash": pb.ALGORITHM_BUZHASH,
}
#: The stage-1 kernels a server may report.
KERNELS = ("scalar", "avx2", "avx512")
#: The ChunkingParams fields AlgorithmInfo has a range for.
RANGED_FIELDS = ("min_size", "avg_size", "max_size", "normalization_level",
                 "horizon_size", "polynomial")
#: A value of each field that its own algorithm accepts, to set where
#: GetServerInfo lists no range (the server must refuse the field).
SOME_VALUE = {"min_size": 4096, "avg_size": 16384, "max_size": 65536,
              "normalization_level": 1, "horizon_size": 0,
              "polynomial": 0x3DA3358B4DC173}


def project_version() -> str:
    """The release: the VERSION file, which CMake reads."""
    version = (REPO / "VERSION").read_text().strip()
    assert re.fullmatch(r"\d+\.\d+\.\d+", version), version
    return version


def test_version(client: Client) -> None:
    assert client.server_info().version == project_version()


def test_algorithms_and_ranges(client: Client) -> None:
    info = client.server_info()
    assert {a.name: a.algorithm for a in info.algorithms} == EXPECTED
    assert len(info.algorithms) == 7
    for a in info.algorithms:
        for name in listed(a):
            r = getattr(a, name)
            assert r.min <= r.default <= r.max, (a.name, name, r)
        if {"min_size", "avg_size", "max_size"} <= listed(a):
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


def listed(a) -> set:
    """The fields GetServerInfo gives `a` a range for: a size left zero, or
    another range absent, is a field `a` does not take."""
    return {name for name in RANGED_FIELDS
            if getattr(a, name) is not None and getattr(a, name).max != 0}


def test_listed_parameters_are_exactly_the_accepted_ones(client: Client) -> None:
    """Every field GetServerInfo lists for an algorithm is accepted by a
    Chunk call (at its default), every one it omits is refused with
    INVALID_ARGUMENT naming it: seqcdc lists no avg_size, fixed only
    avg_size."""
    info = client.server_info()
    data = bytes(range(256)) * 256
    for a in info.algorithms:
        for name in RANGED_FIELDS:
            if name in listed(a):
                records, summary = client.chunk_all(
                    data, params=ChunkingParams(a.name, **{name: getattr(a, name).default}))
                assert summary.total_bytes == len(data), (a.name, name)
                continue
            with pytest.raises(ChunkdError) as refused:
                client.chunk_all(data, params=ChunkingParams(a.name, **{name: SOME_VALUE[name]}))
            assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT, (a.name, name)
            assert f"{name} is not a parameter of {a.name}" in refused.value.details()
    assert "avg_size" not in listed(info.algorithm("seqcdc"))
    assert listed(info.algorithm("fixed")) == {"avg_size"}


def test_fingerprints_backends_and_limits(client: Client) -> None:
    info = client.server_info()
    assert {"sha256", "xxh128"} <= set(info.fingerprints)
    # "auto" unless the environment forces one kernel for all.
    assert info.chunking_backend == (os.environ.get("CHUNKD_BACKEND") or "auto")
    assert info.index_backend == "memory"
    assert info.max_message_bytes == 4 << 20
    assert info.max_inflight_bytes >= info.max_message_bytes


def test_every_algorithm_reports_its_backend(client: Client) -> None:
    """Each algorithm names the kernel its streams run (auto: as calibrated
    at start-up) and the worker pool's thread count it was chosen for."""
    info = client.server_info()
    threads = {a.backend_threads for a in info.algorithms}
    assert len(threads) == 1 and min(threads) >= 1, info.algorithms
    for a in info.algorithms:
        assert a.backend in KERNELS, a
        if info.chunking_backend != "auto":
            assert a.backend == info.chunking_backend, a


def test_forced_backend_applies_to_every_algorithm(chunkd_bin: Path) -> None:
    """--backend wins over the calibration, for every algorithm, and the
    thread count reported is --threads."""
    with ChunkdServer(chunkd_bin, extra_args=["--backend=scalar", "--threads=3"]) as running:
        with Client(running.address, timeout=RPC_TIMEOUT) as c:
            info = c.server_info()
        assert info.chunking_backend == "scalar"
        for a in info.algorithms:
            assert (a.backend, a.backend_threads) == ("scalar", 3), a
        assert "calibrated" not in running.log()


def test_auto_backend_logs_its_calibration(chunkd_bin: Path) -> None:
    """Without a forced backend chunkd calibrates at start-up within its
    budget and logs each algorithm's choice; GetServerInfo agrees."""
    env_backup = os.environ.pop("CHUNKD_BACKEND", None)
    try:
        with ChunkdServer(chunkd_bin, extra_args=["--threads=2"]) as running:
            with Client(running.address, timeout=RPC_TIMEOUT) as c:
                info = c.server_info()
            log = running.log()
    finally:
        if env_backup is not None:
            os.environ["CHUNKD_BACKEND"] = env_backup
    assert info.chunking_backend == "auto"
    m = re.search(r"chunking backend auto: calibrated in (\d+) ms "
                  r"\(budget (\d+) ms per algorithm, (\d+) ms in all\)", log)
    assert m, log
    for a in info.algorithms:
        assert a.backend_threads == 2, a
        assert re.search(rf"chunkd:   {a.name}, 2 threads: {a.backend}\b", log), (a, log)


def test_health(server: ChunkdServer) -> None:
    assert health_status(server.address) == 1


def test_chunkctl_info_and_version(server: ChunkdServer, chunkctl, client: Client) -> None:
    out = chunkctl("info", "--server", server.address).stdout
    assert project_version() in out
    for name in EXPECTED:
        assert name in out
    # Each algorithm's backend line: "    backend   avx2 (2 threads)".
    backends = re.findall(r"^    backend +(\w+) \((\d+) threads?\)$", out, re.MULTILINE)
    assert len(backends) == len(EXPECTED), out
    assert all(kernel in KERNELS for kernel, _ in backends), out
    assert chunkctl("--version").stdout.strip() == f"chunkctl {project_version()}"
