"""Every client keeps a failed call's status code and the server's message:
Client, AsyncClient and the console script, for streams and unary calls.

The real chunkd produces RESOURCE_EXHAUSTED (past --max_streams),
UNAVAILABLE (nothing listening) and INVALID_ARGUMENT; FakeChunkd
(fake_chunkd.py) fails every RPC with any code and message, e.g. the
DATA_LOSS or UNAVAILABLE a server reports about its index.
"""

from __future__ import annotations

import asyncio
import contextlib
import pickle
import random
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, AsyncIterator, Awaitable, Callable, Dict, Iterator, List

import grpc
import pytest
from google.rpc import error_details_pb2, status_pb2

from chunkd_client import ChunkdError, Client
from chunkd_client.errors import ErrorInfo, error_info_of
from chunkd_client.aio import AsyncClient
from chunkd_client.testing import ChunkdServer, free_port, serving

from conftest import RPC_TIMEOUT
from fake_chunkd import FakeChunkd

DATA = random.Random(1717).randbytes(4 * 65536)
PIECE = 65536
SCRIPT = Path(sys.executable).with_name("chunkd-client")
#: Attempts of a refused stream per source kind: grpc.aio used to report
#: some of them as INTERNAL (see AsyncResponseStream), never all.
ATTEMPTS = 60


@pytest.fixture(scope="module")
def limited_server(chunkd_bin: Path) -> Iterator[ChunkdServer]:
    """chunkd serving one Chunk or Dedup stream at a time."""
    yield from serving(ChunkdServer(chunkd_bin, extra_args=["--max_streams=1"]))


@contextlib.contextmanager
def the_only_stream_held(server: ChunkdServer) -> Iterator[None]:
    """Keeps one stream of ``server`` open (its source stalls after the first
    message) until the block ends; then lets it finish, checks it did and
    waits until the server has let it go."""
    release = threading.Event()

    def stalled() -> Iterator[bytes]:
        yield b"held"
        release.wait(RPC_TIMEOUT)

    server.wait_for_active_streams(0, RPC_TIMEOUT)
    with Client(server.address, timeout=RPC_TIMEOUT) as client:
        stream = client.chunk(stalled())
        try:
            server.wait_for_active_streams(1, RPC_TIMEOUT)
            yield
        finally:
            release.set()
        assert stream.collect()[1].total_bytes == 4
    server.wait_for_active_streams(0, RPC_TIMEOUT)


def refusal(server: ChunkdServer) -> str:
    """The message of the server's RESOURCE_EXHAUSTED, as the sync client
    reports it (checked below to name the flag)."""
    with Client(server.address, timeout=RPC_TIMEOUT) as client:
        with pytest.raises(ChunkdError) as caught:
            client.chunk_all(DATA)
    assert caught.value.code == grpc.StatusCode.RESOURCE_EXHAUSTED
    return caught.value.message


def test_sync_stream_past_max_streams_is_resource_exhausted(
        limited_server: ChunkdServer) -> None:
    with the_only_stream_held(limited_server):
        message = refusal(limited_server)
        assert "--max_streams" in message and "limit of 1 streams" in message
        with Client(limited_server.address, timeout=RPC_TIMEOUT) as client:
            for attempt in range(ATTEMPTS):
                for call in (lambda: client.chunk_all(DATA, message_size=PIECE),
                             lambda: client.dedup_all(DATA, namespace="refused"),
                             lambda: list(client.chunk(iter([DATA[:100], DATA[100:]])))):
                    with pytest.raises(ChunkdError) as caught:
                        call()
                    assert (caught.value.code, caught.value.message) == (
                        grpc.StatusCode.RESOURCE_EXHAUSTED, message), attempt
    # The limit is the only reason: with the stream gone, the same call works.
    with Client(limited_server.address, timeout=RPC_TIMEOUT) as client:
        assert client.chunk_all(DATA)[1].total_bytes == len(DATA)


async def pieces(data: bytes, size: int) -> AsyncIterator[bytes]:
    for start in range(0, len(data), size):
        await asyncio.sleep(0)
        yield data[start : start + size]


def run(coroutine: Awaitable[Any]) -> Any:
    return asyncio.run(asyncio.wait_for(coroutine, RPC_TIMEOUT))


def test_async_stream_past_max_streams_is_resource_exhausted(
        limited_server: ChunkdServer) -> None:
    """grpc.aio reports INTERNAL "Internal error from Core" when a write is
    in flight as the server refuses the stream; the client keeps the
    server's status instead."""
    async def main() -> List[tuple]:
        seen = []
        async with AsyncClient(limited_server.address, timeout=RPC_TIMEOUT) as client:
            for attempt in range(ATTEMPTS):
                for call in (lambda: client.chunk_all(DATA, message_size=PIECE),
                             lambda: client.chunk_all(pieces(DATA, PIECE)),
                             lambda: client.dedup_all(pieces(DATA, PIECE), namespace="x"),
                             lambda: client.chunk(b"").collect()):
                    with pytest.raises(ChunkdError) as caught:
                        await call()
                    seen.append((caught.value.code, caught.value.message))
        return seen

    with the_only_stream_held(limited_server):
        message = refusal(limited_server)
        seen = run(main())
    assert len(seen) == 4 * ATTEMPTS
    wrong = [s for s in seen if s != (grpc.StatusCode.RESOURCE_EXHAUSTED, message)]
    assert wrong == [], f"{len(wrong)} of {len(seen)} refusals misreported, e.g. {wrong[0]}"


def script(*args: object, **kwargs: Any) -> subprocess.CompletedProcess:
    return subprocess.run([str(SCRIPT), *map(str, args)], capture_output=True,
                          timeout=120, stdin=subprocess.DEVNULL, **kwargs)


def test_console_script_past_max_streams(limited_server: ChunkdServer,
                                         tmp_path: Path) -> None:
    path = tmp_path / "data.bin"
    path.write_bytes(DATA)
    with the_only_stream_held(limited_server):
        message = refusal(limited_server)
        for command in (["chunk"], ["dedup", "--namespace", "refused"]):
            result = script(*command, "--server", limited_server.address, path)
            assert result.returncode == 1, command
            assert result.stderr.decode() == (
                f"chunkd-client: RESOURCE_EXHAUSTED: {message} [reason: STREAM_LIMIT]\n")


def dead_address() -> str:
    """A loopback port nothing listens on."""
    return f"127.0.0.1:{free_port()}"


def sync_calls(client: Client) -> Dict[str, Callable[[], Any]]:
    """Every RPC of Client, each with valid arguments."""
    fingerprint = bytes(32)
    return {
        "chunk": lambda: list(client.chunk(DATA)),
        "chunk_all": lambda: client.chunk_all(DATA),
        "dedup": lambda: list(client.dedup(DATA, namespace="ns")),
        "dedup_all": lambda: client.dedup_all(DATA, namespace="ns"),
        "find_missing": lambda: client.find_missing("ns", [fingerprint]),
        "release": lambda: client.release("ns", [fingerprint]),
        "server_info": lambda: client.server_info(),
    }


def async_calls(client: AsyncClient) -> Dict[str, Callable[[], Awaitable[Any]]]:
    """Every RPC of AsyncClient, each with valid arguments."""
    fingerprint = bytes(32)
    return {
        "chunk": lambda: client.chunk(DATA).collect(),
        "chunk_all": lambda: client.chunk_all(pieces(DATA, PIECE)),
        "dedup": lambda: client.dedup(DATA, namespace="ns").collect(),
        "dedup_all": lambda: client.dedup_all(DATA, namespace="ns"),
        "find_missing": lambda: client.find_missing("ns", [fingerprint]),
        "release": lambda: client.release("ns", [fingerprint]),
        "server_info": lambda: client.server_info(),
    }


#: The errors tests' channels: without the default service config, whose
#: retries of the unary calls would only make them wait (up to 22 s each)
#: for the same error; test_retries.py tests those.
NO_RETRIES: Dict[str, Any] = {"service_config": {}}


def sync_errors(address: str) -> Dict[str, ChunkdError]:
    errors = {}
    with Client(address, timeout=RPC_TIMEOUT, **NO_RETRIES) as client:
        for name, call in sync_calls(client).items():
            with pytest.raises(ChunkdError) as caught:
                call()
            errors[name] = caught.value
    return errors


def async_errors(address: str) -> Dict[str, ChunkdError]:
    async def main() -> Dict[str, ChunkdError]:
        errors = {}
        async with AsyncClient(address, timeout=RPC_TIMEOUT, **NO_RETRIES) as client:
            for name, call in async_calls(client).items():
                with pytest.raises(ChunkdError) as caught:
                    await call()
                errors[name] = caught.value
        return errors

    return run(main())


@pytest.mark.parametrize("errors", [sync_errors, async_errors], ids=["sync", "async"])
def test_nothing_listening_is_unavailable(errors: Callable[[str], Dict[str, ChunkdError]]
                                          ) -> None:
    caught = errors(dead_address())
    assert set(caught) == {"chunk", "chunk_all", "dedup", "dedup_all", "find_missing",
                           "release", "server_info"}
    for name, error in caught.items():
        assert error.code == grpc.StatusCode.UNAVAILABLE, (name, error)
        assert error.message, name


def test_console_script_nothing_listening(tmp_path: Path) -> None:
    path = tmp_path / "data.bin"
    path.write_bytes(DATA)
    address = dead_address()
    for command in (["chunk", path], ["dedup", "--namespace", "ns", path], ["info"]):
        # No --timeout: info's attempts take up to 22 s (docs/cli.md,
        # "Channel defaults"), and a deadline would end them first.
        result = script(*command, "--server", address)
        assert result.returncode == 1, command
        assert result.stderr.startswith(b"chunkd-client: UNAVAILABLE: "), result.stderr
        assert len(result.stderr.splitlines()) == 1 and result.stdout == b"", command


#: Statuses a server may end any call with, and made-up messages to follow.
STATUSES = [
    (grpc.StatusCode.RESOURCE_EXHAUSTED, "fake: over the memory budget, retry later"),
    (grpc.StatusCode.UNAVAILABLE, "fake: the index (redis) cannot be reached"),
    (grpc.StatusCode.DATA_LOSS, "fake: an index entry is corrupt"),
    (grpc.StatusCode.INVALID_ARGUMENT, "fake: params.namespace is too long"),
    (grpc.StatusCode.PERMISSION_DENIED, "fake: the token may not use namespace ns"),
]


@pytest.mark.parametrize("status", STATUSES, ids=[s[0].name for s in STATUSES])
@pytest.mark.parametrize("errors", [sync_errors, async_errors], ids=["sync", "async"])
def test_every_call_keeps_code_and_message(
        errors: Callable[[str], Dict[str, ChunkdError]], status: tuple) -> None:
    with FakeChunkd(abort=status) as fake:
        for attempt in range(5):  # the streams race the refusal as above
            for name, error in errors(fake.address).items():
                assert (error.code, error.message) == status, (attempt, name)
                assert str(error) == f"{status[0].name}: {status[1]}"


@pytest.mark.parametrize("status", STATUSES, ids=[s[0].name for s in STATUSES])
def test_console_script_keeps_code_and_message(tmp_path: Path, status: tuple) -> None:
    path = tmp_path / "data.bin"
    path.write_bytes(DATA)
    with FakeChunkd(abort=status) as fake:
        for command in (["chunk", path], ["dedup", "--namespace", "ns", path], ["info"]):
            result = script(*command, "--server", fake.address)
            # A bad parameter (the server's INVALID_ARGUMENT) is a usage error.
            expected = 2 if status[0] == grpc.StatusCode.INVALID_ARGUMENT else 1
            assert result.returncode == expected, command
            assert result.stderr.decode() == f"chunkd-client: {status[0].name}: {status[1]}\n"


def test_invalid_argument_message_is_the_servers(server: ChunkdServer, tmp_path: Path) -> None:
    """The same refusal reads the same in all three clients."""
    expected = ("chunking.normalization_level is not a parameter of crc32 (it takes "
                "min_size, avg_size, max_size); leave normalization_level unset")
    with Client(server.address, timeout=RPC_TIMEOUT) as client:
        for call in (lambda: client.chunk_all(DATA, algorithm="crc32", normalization_level=2),
                     lambda: client.dedup_all(DATA, namespace="ns", algorithm="crc32",
                                              normalization_level=2)):
            with pytest.raises(ChunkdError) as caught:
                call()
            assert (caught.value.code, caught.value.message) == (
                grpc.StatusCode.INVALID_ARGUMENT, expected)
        with pytest.raises(ChunkdError) as caught:
            client.find_missing("bad namespace!", [])
        unary = caught.value
    assert unary.code == grpc.StatusCode.INVALID_ARGUMENT and "namespace" in unary.message

    async def main() -> List[ChunkdError]:
        errors = []
        async with AsyncClient(server.address, timeout=RPC_TIMEOUT) as client:
            for call in (lambda: client.chunk_all(pieces(DATA, PIECE), algorithm="crc32",
                                                  normalization_level=2),
                         lambda: client.dedup_all(DATA, namespace="ns", algorithm="crc32",
                                                  normalization_level=2),
                         lambda: client.find_missing("bad namespace!", [])):
                with pytest.raises(ChunkdError) as caught:
                    await call()
                errors.append(caught.value)
        return errors

    stream_errors = run(main())
    assert [(e.code, e.message) for e in stream_errors] == [
        (grpc.StatusCode.INVALID_ARGUMENT, expected)] * 2 + [(unary.code, unary.message)]

    path = tmp_path / "data.bin"
    path.write_bytes(DATA)
    # Each value in range, min above avg: a rule between fields, which only
    # the server checks (chunkd-client refuses values out of range itself).
    result = script("chunk", "--server", server.address, "--algorithm", "fastcdc",
                    "--min", "8192", "--avg", "4096", path)
    assert result.returncode == 2
    with Client(server.address, timeout=RPC_TIMEOUT) as client:
        with pytest.raises(ChunkdError) as caught:
            client.chunk_all(DATA, algorithm="fastcdc", min_size=8192, avg_size=4096)
    assert result.stderr.decode() == f"chunkd-client: INVALID_ARGUMENT: {caught.value.message}\n"


def details(*infos: "error_details_pb2.ErrorInfo", code: int = 8) -> bytes:
    """A grpc-status-details-bin value holding ``infos`` (and one detail of
    another type first)."""
    status = status_pb2.Status(code=code, message="m")
    status.details.add().Pack(status_pb2.Status(code=1))
    for info in infos:
        status.details.add().Pack(info)
    return status.SerializeToString()


def test_reason_is_read_from_the_status_details() -> None:
    info = error_details_pb2.ErrorInfo(reason="PER_IP_STREAM_LIMIT", domain="chunkd.dev",
                                       metadata={"flag": "--max_streams_per_ip", "limit": "4"})
    trailing = (("other", "x"), ("grpc-status-details-bin", details(info)))
    error = ChunkdError(grpc.StatusCode.RESOURCE_EXHAUSTED, "m", trailing)
    assert error.reason == "PER_IP_STREAM_LIMIT"
    assert error.domain == "chunkd.dev"
    assert error.metadata == {"flag": "--max_streams_per_ip", "limit": "4"}
    assert error_info_of(trailing) == ErrorInfo(
        "PER_IP_STREAM_LIMIT", "chunkd.dev", {"flag": "--max_streams_per_ip", "limit": "4"})
    copy = pickle.loads(pickle.dumps(error))
    assert (copy.code(), copy.message, copy.reason) == (error.code(), "m", error.reason)


@pytest.mark.parametrize("trailing", [
    None, (), (("grpc-status-details-bin", details()),),
    (("grpc-status-details-bin", b"\xff\xff not a status"),),
], ids=["none", "empty", "no-error-info", "garbage"])
def test_no_reason_without_an_error_info(trailing) -> None:
    error = ChunkdError(grpc.StatusCode.UNAVAILABLE, "m", trailing)
    assert (error.reason, error.domain, error.metadata) == (None, None, {})
    assert error_info_of(trailing) is None
