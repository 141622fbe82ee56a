"""Interop: every client produces the same chunk list for the same file and
parameters, equal to `chunkctl --local`; grpcurl lists the service through
reflection and calls GetServerInfo."""

from __future__ import annotations

import base64
import json
import re
import socket
from pathlib import Path
from typing import Dict, List

import pytest

from chunkd_client import Client
from chunkd_client.aio import AsyncClient
from chunkd_client.testing import ChunkdServer

from clients_util import chunk_flags, chunkd_client, chunkd_go, grpcurl, run
from e2e_util import RPC_TIMEOUT, SEKIEN, random_bytes

ALGORITHMS: Dict[str, Dict[str, object]] = {
    "fastcdc-reapi": {"algorithm": "fastcdc", "min": 4096, "avg": 16384, "max": 65535, "level": 2},
    "fastcdc-small": {"algorithm": "fastcdc", "min": 1024, "avg": 4096, "max": 16384, "seed": 7},
    "crc32": {"algorithm": "crc32", "min": 2048, "avg": 8192, "max": 32768},
    "seqcdc": {"algorithm": "seqcdc"},
    "fixed": {"algorithm": "fixed", "avg": 10000},
    "repmaxcdc": {"algorithm": "repmaxcdc", "min": 2048, "horizon": 16384},
    "rabin": {"algorithm": "rabin", "min": 2048, "avg": 8192, "max": 65536,
              "polynomial": 0x3DA3358B4DC173},
    "buzhash": {"algorithm": "buzhash", "min": 2048, "avg": 8192, "max": 32768},
}

# The end of a dedup line when RapidCDC hints were tried.
HINT_COUNTERS = re.compile(
    r" hints_tried=(\d+) hints_accepted=(\d+) hints_rejected=(\d+) hint_skipped_bytes=(\d+)$",
    re.M)

API_NAMES = {"min": "min_size", "avg": "avg_size", "max": "max_size",
             "level": "normalization_level", "algorithm": "algorithm", "seed": "seed",
             "horizon": "horizon_size", "polynomial": "polynomial"}


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> List[Path]:
    d = tmp_path_factory.mktemp("interop")
    random_file = d / "random.bin"
    random_file.write_bytes(random_bytes(4242, 3_000_000))
    # Versions of one file: a shared base with edits, so that CDC matters.
    base = random_bytes(17, 400_000)
    edited = d / "edited.bin"
    edited.write_bytes(base[:100_000] + b"inserted" * 999 + base[100_000:] + base[:50_000])
    empty = d / "empty.bin"
    empty.write_bytes(b"")
    return [SEKIEN, random_file, edited, empty]


def api_csv(records) -> str:
    return "".join(f"{r.offset},{r.length},{r.fingerprint.hex()}\n" for r in records)


@pytest.mark.parametrize("name", list(ALGORITHMS))
def test_every_client_gives_the_same_chunks(
    name: str, files: List[Path], server: ChunkdServer, chunkctl_bin: Path
) -> None:
    params = ALGORITHMS[name]
    kwargs = {API_NAMES[k]: v for k, v in params.items()}
    flags = chunk_flags("double", params)
    with Client(server.address, timeout=RPC_TIMEOUT) as client:
        for path in files:
            local = run([chunkctl_bin, "chunk", "--local", *flags, path]).stdout.decode()
            assert path.stat().st_size == 0 or local.count("\n") >= 1
            outputs = {
                "chunkctl --server": run(
                    [chunkctl_bin, "chunk", "--server", server.address, *flags, path]).stdout,
                "chunkd-client": run(
                    [chunkd_client(), "chunk", "--server", server.address, *flags, path]).stdout,
                "chunkd-go": run(
                    [chunkd_go(), "chunk", "-server", server.address,
                     *chunk_flags("single", params), path]).stdout,
                "chunkd-go stdin": run(
                    [chunkd_go(), "chunk", "-server", server.address,
                     *chunk_flags("single", params), "-"], stdin=path.read_bytes()).stdout,
            }
            outputs = {k: v.decode() for k, v in outputs.items()}
            outputs["python api"] = api_csv(client.chunk_all(path, **kwargs)[0])
            for client_name, text in outputs.items():
                assert text == local, f"{client_name} differs from chunkctl --local on {path.name}"


def test_async_client_and_json_agree(files: List[Path], server: ChunkdServer,
                                     chunkctl_bin: Path) -> None:
    import asyncio

    params = ALGORITHMS["fastcdc-reapi"]
    path = files[1]
    local = run([chunkctl_bin, "chunk", "--local", "--format", "json",
                 *chunk_flags("double", params), path]).stdout.decode()

    async def chunks():
        async with AsyncClient(server.address, timeout=RPC_TIMEOUT) as client:
            return (await client.chunk_all(
                path, **{API_NAMES[k]: v for k, v in params.items()}))[0]

    records = asyncio.run(chunks())
    expected = [json.loads(line) for line in local.splitlines()]
    assert [{"offset": r.offset, "length": r.length, "fingerprint": r.fingerprint.hex()}
            for r in records] == expected
    for command in (
        [chunkd_client(), "chunk", "--json", "--server", server.address,
         *chunk_flags("double", params), path],
        [chunkd_go(), "chunk", "-format", "json", "-server", server.address,
         *chunk_flags("single", params), path],
    ):
        assert run(command).stdout.decode() == local


def test_dedup_lines_agree(files: List[Path], server: ChunkdServer, chunkctl_bin: Path) -> None:
    """The three command-line clients print the same dedup report."""
    reports = {}
    for name, command in {
        "chunkctl": [chunkctl_bin, "dedup", "--server", server.address, "--namespace"],
        "chunkd-client": [chunkd_client(), "dedup", "--server", server.address, "--namespace"],
        "chunkd-go": [chunkd_go(), "dedup", "-server", server.address, "-namespace"],
    }.items():
        reports[name] = run([*command, f"interop-{name}", files[2], files[2]]).stdout.decode()
    assert reports["chunkd-client"] == reports["chunkctl"] == reports["chunkd-go"]
    # The second pass follows hints (the server's default): its line and the
    # total end with the counters, the first pass's line does not.
    lines = reports["chunkctl"].splitlines()
    assert [bool(HINT_COUNTERS.search(line)) for line in lines] == [False, True, True], lines
    assert HINT_COUNTERS.sub("", lines[-1]).endswith("ratio=2.00")


def test_chunkd_go_dedup_hints(files: List[Path], server: ChunkdServer) -> None:
    """chunkd-go dedup -hints: the counters end a line when hints were tried;
    off tries none; bad names, and a hint test with crc32, fail before any
    call: bad parameters, exit status 2 (docs/cli.md)."""
    data = files[1]  # 3 MB of random bytes: about 180 chunks
    dedup = [chunkd_go(), "dedup", "-server", server.address, "-namespace", "go-hints"]
    default = run([*dedup, data, data]).stdout.decode().splitlines()
    assert not HINT_COUNTERS.search(default[0]), default  # all new: nothing to hint
    tried, accepted, rejected, skipped = map(int, HINT_COUNTERS.search(default[1]).groups())
    assert accepted > 0 and skipped > 0 and accepted + rejected <= tried, default
    # The total sums the files' counters (the first file had none).
    assert HINT_COUNTERS.search(default[2]).groups() == HINT_COUNTERS.search(default[1]).groups()
    for name in ("off", "OFF", "HINT_TEST_OFF", "1"):
        line = run([*dedup, "--hints", name, data]).stdout.decode().splitlines()[0]
        assert line.endswith("unique_chunks=0 ratio=inf") and not HINT_COUNTERS.search(line), line
    line = run([*dedup, "-hints", "ff_rwt_fpt", data]).stdout.decode().splitlines()[0]
    assert int(HINT_COUNTERS.search(line).group(2)) > 0, line
    # Nothing listens on this port: a call would fail with UNAVAILABLE.
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        dead = f"127.0.0.1:{sock.getsockname()[1]}"
    bad = run([chunkd_go(), "dedup", "-server", dead, "-namespace", "x", "--hints", "fastest",
               data], check=False)
    assert bad.returncode == 2 and b"UNAVAILABLE" not in bad.stderr, bad.stderr
    assert b'"fastest"' in bad.stderr and b"off, ff, ff_mt, ff_rwt, ff_rwt_fpt" in bad.stderr
    refused = run([chunkd_go(), "dedup", "-server", dead, "-namespace", "x", "-algorithm", "crc32",
                   "--hints", "ff", data], check=False)
    assert refused.returncode == 2 and b"UNAVAILABLE" not in refused.stderr, refused.stderr
    assert b"--hints ff needs --algorithm fastcdc, not crc32" in refused.stderr, refused.stderr


def test_grpcurl_lists_the_service_and_calls_get_server_info(server: ChunkdServer) -> None:
    services = run([grpcurl(), "-plaintext", server.address, "list"]).stdout.decode().split()
    assert "chunkd.v1.ChunkService" in services
    assert "grpc.health.v1.Health" in services
    methods = run([grpcurl(), "-plaintext", server.address, "list",
                   "chunkd.v1.ChunkService"]).stdout.decode().split()
    assert {"chunkd.v1.ChunkService.Chunk", "chunkd.v1.ChunkService.Dedup",
            "chunkd.v1.ChunkService.FindMissing",
            "chunkd.v1.ChunkService.GetServerInfo"} <= set(methods)
    info = json.loads(run([grpcurl(), "-plaintext", "-d", "{}", server.address,
                           "chunkd.v1.ChunkService/GetServerInfo"]).stdout)
    with Client(server.address, timeout=RPC_TIMEOUT) as client:
        expected = client.server_info()
    assert info["version"] == expected.version
    assert info["index_backend"] == expected.index_backend
    assert [a["name"] for a in info["algorithms"]] == [a.name for a in expected.algorithms]
    # Unary calls with parameters, as a shell script would make them (bytes
    # are base64 in grpcurl's JSON).
    unknown = base64.b64encode(bytes(range(32))).decode()
    missing = json.loads(run([grpcurl(), "-plaintext", "-d",
                              json.dumps({"namespace": "grpcurl", "fingerprints": [unknown]}),
                              server.address, "chunkd.v1.ChunkService/FindMissing"]).stdout)
    assert missing == {"missing_fingerprints": [unknown]}
    bad = run([grpcurl(), "-plaintext", "-d", '{"namespace": "bad namespace!"}',
               server.address, "chunkd.v1.ChunkService/FindMissing"], check=False)
    assert bad.returncode != 0 and b"InvalidArgument" in bad.stderr
