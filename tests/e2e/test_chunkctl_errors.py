"""chunkctl against a real chunkd: the server's errors keep their code and
message (RESOURCE_EXHAUSTED past --max_streams, UNAVAILABLE with no server),
with exit status 1; and chunkctl sends only the chunking fields the algorithm
reads, so the strict server accepts every preset, while a flag the algorithm
does not take is a usage error (exit status 2) before any RPC."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Iterator

import grpc
import pytest

from chunkd_client._proto.chunkd.v1 import chunkd_pb2 as pb
from chunkd_client._proto.chunkd.v1 import chunkd_pb2_grpc as pb_grpc
from chunkd_client.testing import ChunkdServer, free_port, serving
from e2e_util import RPC_TIMEOUT, SEKIEN, fastcdc_params, parse_csv


@pytest.fixture(scope="module")
def one_stream_server(chunkd_bin: Path) -> Iterator[ChunkdServer]:
    yield from serving(ChunkdServer(chunkd_bin, extra_args=["--max_streams=1"]))


def _held(release: threading.Event) -> Iterator[pb.ChunkRequest]:
    yield pb.ChunkRequest(params=pb.ChunkParams(chunking=fastcdc_params()), data=b"x" * 1000)
    release.wait(RPC_TIMEOUT)


def test_chunkctl_past_max_streams_is_resource_exhausted(one_stream_server, chunkctl) -> None:
    server = one_stream_server
    release = threading.Event()
    with grpc.insecure_channel(server.address) as channel:
        held = pb_grpc.ChunkServiceStub(channel).Chunk(_held(release), timeout=RPC_TIMEOUT)
        try:
            deadline = time.monotonic() + 30
            while server.active_streams() != 1:
                assert time.monotonic() < deadline, "the held stream never started"
                time.sleep(0.05)
            for command in (["chunk", "--server", server.address],
                            ["dedup", "--server", server.address, "--namespace", "ns"]):
                result = chunkctl(*command, SEKIEN, check=False)
                assert result.returncode == 1, result.stderr
                assert result.stderr.startswith("chunkctl: RESOURCE_EXHAUSTED: "), result.stderr
                assert "--max_streams" in result.stderr, result.stderr
                assert result.stdout == ""
        finally:
            release.set()
        assert list(held)[-1].summary.total_bytes == 1000
    # The slot is free again: the same command line succeeds.
    deadline = time.monotonic() + 30
    while server.active_streams() != 0:
        assert time.monotonic() < deadline, "the held stream never ended"
        time.sleep(0.05)
    assert parse_csv(chunkctl("chunk", "--server", server.address, SEKIEN).stdout)


def test_chunkctl_without_a_server_is_unavailable(chunkctl) -> None:
    address = f"127.0.0.1:{free_port()}"  # nothing listens here
    for command in (["chunk", "--server", address],
                    ["dedup", "--server", address, "--namespace", "ns"],
                    ["info", "--server", address]):
        result = chunkctl(*command, *([] if command[0] == "info" else [SEKIEN]), check=False)
        assert result.returncode == 1, result.stderr
        assert result.stderr.startswith("chunkctl: UNAVAILABLE: "), result.stderr
        assert result.stdout == ""


@pytest.mark.parametrize(
    "flags",
    [
        ["--preset", "seqcdc-8k"],
        ["--preset", "seqcdc-16k", "--max", "20000"],
        ["--preset", "fastcdc-reapi", "--avg", "8192", "--min", "2048", "--max", "32768"],
        ["--algorithm", "seqcdc", "--min", "4096", "--max", "16384", "--seq-mode", "decreasing"],
        ["--algorithm", "crc32", "--min", "2048", "--avg", "8192", "--max", "65536"],
        ["--algorithm", "fixed", "--avg", "10000"],
    ],
    ids=lambda flags: " ".join(flags),
)
def test_chunkctl_sends_only_the_fields_the_algorithm_reads(server, chunkctl, flags) -> None:
    local = chunkctl("chunk", "--local", *flags, SEKIEN).stdout
    remote = chunkctl("chunk", "--server", server.address, *flags, SEKIEN).stdout
    assert len(parse_csv(local)) > 1
    assert remote == local
    dedup = chunkctl("dedup", "--server", server.address, "--namespace", "strict", *flags, SEKIEN)
    assert dedup.stdout.startswith(f"{SEKIEN} bytes={SEKIEN.stat().st_size} ")


@pytest.mark.parametrize(
    "flags,message",
    [
        (["--level", "2", "--algorithm", "crc32"],
         "--level does not apply to crc32; crc32 takes --min, --avg and --max"),
        (["--min", "8192", "--algorithm", "fixed"],
         "--min does not apply to fixed; fixed takes only --avg"),
        (["--algorithm", "seqcdc", "--avg", "8192"], "--avg does not apply to seqcdc; "),
        (["--preset", "seqcdc-8k", "--avg", "8192"],
         "--avg does not apply to seqcdc (the algorithm of --preset seqcdc-8k)"),
    ],
)
def test_chunkctl_refuses_a_flag_the_algorithm_does_not_take(chunkctl, flags, message) -> None:
    # Nothing listens at this address: a usage error must come before any RPC.
    address = f"127.0.0.1:{free_port()}"
    for command in (["chunk", "--local"],
                    ["chunk", "--server", address],
                    ["dedup", "--server", address, "--namespace", "ns"]):
        result = chunkctl(*command, *flags, SEKIEN, check=False)
        assert result.returncode == 2, result.stderr
        assert result.stderr.startswith(f"chunkctl: {message}"), result.stderr
        assert result.stdout == ""
