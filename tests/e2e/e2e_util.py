"""Helpers shared by the end-to-end tests."""

from __future__ import annotations

import hashlib
import os
import random
import re
import subprocess
import threading
from pathlib import Path
from typing import FrozenSet, Iterable, List, Sequence, Tuple

import grpc

from chunkd_client._proto.chunkd.v1 import chunkd_pb2 as pb
from chunkd_client._proto.chunkd.v1 import chunkd_pb2_grpc as pb_grpc

REPO = Path(__file__).resolve().parents[2]
DATA_DIR = REPO / "tests" / "data"
SEKIEN = DATA_DIR / "SekienAkashita.jpg"
VECTORS = DATA_DIR / "fastcdc2020_test_vectors.txt"
#: Deadline of every RPC, seconds.
RPC_TIMEOUT = 60.0
#: Deadline of every chunkctl run, seconds.
SUBPROCESS_TIMEOUT = 120.0
#: --max_message_bytes of the `small_server` fixture.
SMALL_LIMIT = 1 << 20

#: (offset, length, fingerprint hex): one chunk as chunkctl prints it.
Row = Tuple[int, int, str]


def random_bytes(seed: int, size: int) -> bytes:
    """Deterministic pseudo-random bytes (never change the generator)."""
    return random.Random(seed).randbytes(size)


_CSV_LINE = re.compile(r"(\d+),(\d+),([0-9a-f]*)")


def parse_csv(text: str) -> List[Row]:
    """chunkctl's csv output, strictly: `offset,length,hex` per line."""
    rows = []
    assert text == "" or text.endswith("\n"), "output must end with a newline"
    for number, line in enumerate(text.splitlines(), 1):
        m = _CSV_LINE.fullmatch(line)
        assert m, f"line {number} is not offset,length,hex: {line!r}"
        rows.append((int(m.group(1)), int(m.group(2)), m.group(3)))
    return rows


def rows(records: Iterable) -> List[Row]:
    """Client records as chunkctl rows."""
    return [(r.offset, r.length, r.fingerprint.hex()) for r in records]


def assert_valid_chunking(
    chunks: Sequence[Row], data: bytes, min_size: int, max_size: int
) -> None:
    """Chunks are contiguous, non-empty, cover every byte once, lie within
    min..max (the last may be shorter) and carry the SHA-256 of their bytes."""
    offset = 0
    for i, (o, length, fingerprint) in enumerate(chunks):
        assert o == offset, f"chunk {i} starts at {o}, expected {offset}"
        assert 0 < length <= max_size, f"chunk {i} has length {length}"
        if i + 1 < len(chunks):
            assert length >= min_size, f"chunk {i} has length {length} < {min_size}"
        assert fingerprint == hashlib.sha256(data[o : o + length]).hexdigest(), i
        offset += length
    assert offset == len(data)


def parse_vectors() -> dict:
    """{seed: [(offset, length, sha256hex), ...]} from the public vectors."""
    vectors: dict = {}
    seed = None
    for line in VECTORS.read_text().splitlines():
        m = re.match(r"#\s*Seed:\s*(\d+)", line)
        if m:
            seed = int(m.group(1))
            vectors[seed] = []
        elif line.strip() and not line.startswith("#"):
            offset, length, sha, _gear = line.split()
            vectors[seed].append((int(offset), int(length), sha))
    return vectors


def stub(target: str) -> Tuple[grpc.Channel, pb_grpc.ChunkServiceStub]:
    channel = grpc.insecure_channel(target)
    return channel, pb_grpc.ChunkServiceStub(channel)


class HealthWatch:
    """grpc.health.v1.Health/Watch of one service name over `channel`, read
    on a thread of its own: `statuses` holds every status received (1
    SERVING, 2 NOT_SERVING), in order, until the stream ends (`ended`).
    Unlike a Check, it goes on over the connection it started on: a server
    that is draining has closed its listener to new ones."""

    def __init__(self, channel: grpc.Channel, service: str = "") -> None:
        name = service.encode()
        assert len(name) < 128, "one length byte"
        request = b"\x0a" + bytes([len(name)]) + name if name else b""
        watch = channel.unary_stream("/grpc.health.v1.Health/Watch",
                                     request_serializer=None, response_deserializer=None)
        self._call = watch(request, timeout=RPC_TIMEOUT)
        self.statuses: List[int] = []
        self.ended = threading.Event()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        try:
            for response in self._call:
                # HealthCheckResponse: field 1 (status) as one varint byte.
                self.statuses.append(response[1] if response[:1] == b"\x08" else 0)
        except grpc.RpcError:
            pass  # the server went away: the statuses so far are the answer
        finally:
            self.ended.set()

    def last(self) -> int:
        """The latest status; 0 before the first."""
        return self.statuses[-1] if self.statuses else 0


def call_stream(method, requests: Sequence[object]):
    """Runs a streaming RPC over `requests`; returns (None, responses) on
    success or (code, details) on failure."""
    try:
        return None, list(method(iter(list(requests)), timeout=RPC_TIMEOUT))
    except grpc.RpcError as e:
        return e.code(), e.details() or ""


def fastcdc_params(**overrides) -> "pb.ChunkingParams":
    values = dict(
        algorithm=pb.ALGORITHM_FASTCDC, min_size=4096, avg_size=16384, max_size=65536
    )
    values.update(overrides)
    return pb.ChunkingParams(**values)


def cpu_flags() -> FrozenSet[str]:
    """The CPU feature flags /proc/cpuinfo lists (empty where it is missing)."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return frozenset()
    for line in text.splitlines():
        if line.startswith("flags"):
            return frozenset(line.split(":", 1)[1].split())
    return frozenset()


def start_with_env(chunkd_bin: Path, **env: str) -> "subprocess.CompletedProcess[str]":
    """Runs chunkd with `env` added to the environment and returns once it
    exits (for settings that must stop it at start-up)."""
    return subprocess.run(
        [str(chunkd_bin), "--listen=127.0.0.1:0", "--metrics_listen="],
        env=dict(os.environ, **env), capture_output=True, text=True,
        timeout=SUBPROCESS_TIMEOUT, stdin=subprocess.DEVNULL,
    )
