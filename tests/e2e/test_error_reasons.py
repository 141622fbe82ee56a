"""Refusals say why in a google.rpc.ErrorInfo (docs/clients.md, "Error
reasons"), against a real chunkd: read from the refused call's
grpc-status-details-bin trailer with grpcio and googleapis-common-protos
alone, as ChunkdError.reason of the Python clients (sync and asyncio), and
in the error line of chunkctl, chunkd-client and chunkd-go.

Every refusal is provoked without timing: a limit of 1 with one stream held
open (its source stalls until the test lets it go), a bad token, a foreign
namespace, an index of 10 entries, a message one byte too large, parameters
larger than the whole stream memory budget, and an idle timeout of one
second against a client that sends nothing more under a deadline sixty
times as long. (The call rate's reason is checked by the connection guard's
unit test: provoking it here would race the clock.)"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from pathlib import Path
from typing import Dict, Iterator, Sequence

import grpc
import pytest
from google.rpc import error_details_pb2, status_pb2

from chunkd_client import ChunkdError, Client
from chunkd_client.aio import AsyncClient
from chunkd_client.testing import ChunkdServer, serving
from clients_util import chunkd_client, chunkd_go, run
from e2e_util import RPC_TIMEOUT, SMALL_LIMIT, fastcdc_params, pb, pb_grpc, random_bytes

DATA = random_bytes(2828, 200_000)
TOKEN_A = "team-a-token-0123456789"
TOKEN_B = "team-b-token-0123456789"
TOKENS = f"{TOKEN_A} team-a\n{TOKEN_B} team-b\n"


def bearer(token: str) -> Sequence[tuple]:
    return (("authorization", f"Bearer {token}"),)


def error_info(error: grpc.RpcError) -> error_details_pb2.ErrorInfo:
    """The one ErrorInfo of a failed call, from its trailers only; the
    google.rpc.Status there agrees with the call's code and message."""
    trailers: Dict[str, object] = dict(error.trailing_metadata() or ())
    assert "grpc-status-details-bin" in trailers, trailers
    status = status_pb2.Status.FromString(trailers["grpc-status-details-bin"])
    assert status.code == error.code().value[0]
    assert status.message == error.details()
    infos = [d for d in status.details if d.Is(error_details_pb2.ErrorInfo.DESCRIPTOR)]
    assert len(infos) == 1, status
    info = error_details_pb2.ErrorInfo()
    assert infos[0].Unpack(info)
    assert info.domain == "chunkd.dev"
    return info


def chunk_requests(release: threading.Event, data: bytes = DATA) -> Iterator[pb.ChunkRequest]:
    """A Chunk stream's requests: parameters and data, then a stall until
    `release` is set (or RPC_TIMEOUT passed)."""
    yield pb.ChunkRequest(params=pb.ChunkParams(chunking=fastcdc_params()), data=data)
    release.wait(RPC_TIMEOUT)


@contextlib.contextmanager
def one_stream_held(server: ChunkdServer, metadata: Sequence[tuple] = ()) -> Iterator[None]:
    """Holds one Chunk stream of `server` open until the block ends, then
    lets it finish and waits until the server has let it go."""
    release = threading.Event()
    with grpc.insecure_channel(server.address) as channel:
        call = pb_grpc.ChunkServiceStub(channel).Chunk(
            chunk_requests(release), timeout=RPC_TIMEOUT, metadata=metadata)
        try:
            server.wait_for_active_streams(1, RPC_TIMEOUT)
            yield
        finally:
            release.set()
        assert list(call)[-1].summary.total_bytes == len(DATA)
    server.wait_for_active_streams(0, RPC_TIMEOUT)


def refused_chunk(server: ChunkdServer, metadata: Sequence[tuple] = ()) -> grpc.RpcError:
    with grpc.insecure_channel(server.address) as channel:
        stub = pb_grpc.ChunkServiceStub(channel)
        with pytest.raises(grpc.RpcError) as raised:
            list(stub.Chunk(iter([pb.ChunkRequest(params=pb.ChunkParams(
                chunking=fastcdc_params()), data=DATA)]), timeout=RPC_TIMEOUT,
                metadata=metadata))
    return raised.value


# --- the stream limit: every reader of the reason ----------------------------


@pytest.fixture(scope="module")
def one_stream_server(chunkd_bin: Path) -> Iterator[ChunkdServer]:
    yield from serving(ChunkdServer(chunkd_bin, extra_args=["--max_streams=1"]))


def test_stream_limit_in_the_trailers(one_stream_server) -> None:
    with one_stream_held(one_stream_server):
        error = refused_chunk(one_stream_server)
    assert error.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    info = error_info(error)
    assert info.reason == "STREAM_LIMIT"
    assert dict(info.metadata) == {"flag": "--max_streams", "limit": "1"}


def test_stream_limit_in_the_python_clients_errors(one_stream_server) -> None:
    async def refused_async() -> ChunkdError:
        async with AsyncClient(one_stream_server.address, timeout=RPC_TIMEOUT) as client:
            with pytest.raises(ChunkdError) as raised:
                await client.chunk_all(DATA)
        return raised.value

    with one_stream_held(one_stream_server):
        with Client(one_stream_server.address, timeout=RPC_TIMEOUT) as client:
            with pytest.raises(ChunkdError) as raised:
                client.chunk_all(DATA)
            with pytest.raises(ChunkdError) as raised_dedup:
                client.dedup_all(DATA, namespace="ns")
        raised_async = asyncio.run(refused_async())
    for error in (raised.value, raised_dedup.value, raised_async):
        assert error.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert error.reason == "STREAM_LIMIT", error
        assert error.domain == "chunkd.dev"
        assert error.metadata == {"flag": "--max_streams", "limit": "1"}


@pytest.mark.parametrize("cli", ["chunkctl", "chunkd-client", "chunkd-go"])
def test_stream_limit_in_the_clis_error_line(one_stream_server, chunkctl_bin, cli,
                                             tmp_path) -> None:
    path = tmp_path / "data.bin"
    path.write_bytes(DATA)
    binary = {"chunkctl": chunkctl_bin, "chunkd-client": None, "chunkd-go": None}[cli]
    binary = binary or (chunkd_client() if cli == "chunkd-client" else chunkd_go())
    with one_stream_held(one_stream_server):
        result = run([binary, "chunk", "--server", one_stream_server.address, path],
                     check=False)
    lines = result.stderr.decode(errors="replace").splitlines()
    assert result.returncode == 1, lines
    assert len(lines) == 1, lines
    assert lines[0].startswith(f"{cli}: RESOURCE_EXHAUSTED: "), lines[0]
    assert lines[0].endswith(" [reason: STREAM_LIMIT]"), lines[0]


def test_a_status_without_a_reason_has_no_error_info(one_stream_server) -> None:
    with grpc.insecure_channel(one_stream_server.address) as channel:
        stub = pb_grpc.ChunkServiceStub(channel)
        with pytest.raises(grpc.RpcError) as raised:
            stub.FindMissing(pb.FindMissingRequest(namespace="bad ns",
                                                   fingerprints=[b"\0" * 32]),
                             timeout=RPC_TIMEOUT)
    assert raised.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "grpc-status-details-bin" not in dict(raised.value.trailing_metadata() or ())
    with Client(one_stream_server.address, timeout=RPC_TIMEOUT) as client:
        with pytest.raises(ChunkdError) as error:
            client.find_missing("bad ns", [b"\0" * 32])
    assert error.value.reason is None and error.value.metadata == {}


# --- tokens: the per-token limit, authentication, permission -----------------


@pytest.fixture(scope="module")
def token_server(chunkd_bin: Path, tmp_path_factory) -> Iterator[ChunkdServer]:
    path = tmp_path_factory.mktemp("reasons") / "tokens"
    path.write_text(TOKENS)
    yield from serving(ChunkdServer(chunkd_bin, extra_args=[
        f"--auth_tokens={path}", "--max_streams_per_token=1"]))


def test_per_token_stream_limit(token_server) -> None:
    with one_stream_held(token_server, bearer(TOKEN_A)):
        error = refused_chunk(token_server, bearer(TOKEN_A))
        # Another token still has its slot.
        with Client(token_server.address, token=TOKEN_B, timeout=RPC_TIMEOUT) as client:
            assert client.chunk_all(DATA)[1].total_bytes == len(DATA)
        with Client(token_server.address, token=TOKEN_A, timeout=RPC_TIMEOUT) as client:
            with pytest.raises(ChunkdError) as raised:
                client.chunk_all(DATA)
    assert error.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    info = error_info(error)
    assert info.reason == "PER_TOKEN_STREAM_LIMIT"
    assert dict(info.metadata) == {"flag": "--max_streams_per_token", "limit": "1"}
    assert raised.value.reason == "PER_TOKEN_STREAM_LIMIT"


@pytest.mark.parametrize("metadata", [(), bearer("not-a-known-token-00000")],
                         ids=["missing", "unknown"])
def test_bad_token_is_unauthenticated(token_server, metadata) -> None:
    error = refused_chunk(token_server, metadata)
    assert error.code() == grpc.StatusCode.UNAUTHENTICATED
    assert error_info(error).reason == "UNAUTHENTICATED"
    with grpc.insecure_channel(token_server.address) as channel:
        with pytest.raises(grpc.RpcError) as unary:
            pb_grpc.ChunkServiceStub(channel).GetServerInfo(
                pb.GetServerInfoRequest(), timeout=RPC_TIMEOUT, metadata=metadata)
    assert unary.value.code() == grpc.StatusCode.UNAUTHENTICATED
    assert error_info(unary.value).reason == "UNAUTHENTICATED"


def test_foreign_namespace_is_permission_denied(token_server) -> None:
    with Client(token_server.address, token=TOKEN_A, timeout=RPC_TIMEOUT) as client:
        with pytest.raises(ChunkdError) as raised:
            client.dedup_all(DATA, namespace="team-b")
        with pytest.raises(ChunkdError) as unary:
            client.find_missing("team-b", [b"\0" * 32])
    for error in (raised.value, unary.value):
        assert error.code() == grpc.StatusCode.PERMISSION_DENIED
        assert error.reason == "PERMISSION_DENIED"


# --- a full index ------------------------------------------------------------


def test_full_memory_index(chunkd_bin: Path) -> None:
    """An index of 10 entries takes the first Dedup's chunks up to its
    limit; new chunks past it are INDEX_FULL."""
    with ChunkdServer(chunkd_bin, extra_args=["--index_max_entries=10"]) as server:
        data = random_bytes(2829, 2 << 20)  # about 128 chunks of 16 KiB
        with grpc.insecure_channel(server.address) as channel:
            stub = pb_grpc.ChunkServiceStub(channel)
            params = pb.DedupParams(chunking=fastcdc_params(), namespace="full")
            with pytest.raises(grpc.RpcError) as raised:
                list(stub.Dedup(iter([pb.DedupRequest(params=params, data=data)]),
                                timeout=RPC_TIMEOUT))
        assert raised.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert "--index_max_entries" in raised.value.details()
        assert error_info(raised.value).reason == "INDEX_FULL"
        with Client(server.address, timeout=RPC_TIMEOUT) as client:
            with pytest.raises(ChunkdError) as error:
                client.dedup_all(data, namespace="full")
        assert error.value.reason == "INDEX_FULL"


# --- the idle timeout --------------------------------------------------------


def test_idle_stream_is_ended_with_idle_timeout(chunkd_bin: Path) -> None:
    """A stream that sent its first request and then nothing is ended by
    the server after --stream_idle_timeout (1 s) while the client's own
    deadline (RPC_TIMEOUT) is far off: DEADLINE_EXCEEDED, and the reason
    tells it from the client's deadline."""
    with ChunkdServer(chunkd_bin, extra_args=["--stream_idle_timeout=1s"]) as server:
        release = threading.Event()
        try:
            with grpc.insecure_channel(server.address) as channel:
                stub = pb_grpc.ChunkServiceStub(channel)
                with pytest.raises(grpc.RpcError) as raised:
                    list(stub.Chunk(chunk_requests(release, b""), timeout=RPC_TIMEOUT))
        finally:
            release.set()
    assert raised.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
    assert "--stream_idle_timeout" in raised.value.details()
    assert error_info(raised.value).reason == "IDLE_TIMEOUT"


# --- a message too large, parameters that never fit ---------------------------


def test_message_too_large(small_server) -> None:
    """A data message one byte over --max_message_bytes (1 MiB here, under
    gRPC's own receive limit)."""
    with grpc.insecure_channel(small_server.address) as channel:
        stub = pb_grpc.ChunkServiceStub(channel)
        with pytest.raises(grpc.RpcError) as raised:
            list(stub.Chunk(iter([pb.ChunkRequest(
                params=pb.ChunkParams(chunking=fastcdc_params()),
                data=random_bytes(2830, SMALL_LIMIT + 1))]), timeout=RPC_TIMEOUT))
    assert raised.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert error_info(raised.value).reason == "MESSAGE_TOO_LARGE"


def test_parameters_that_never_fit_the_stream_memory(chunkd_bin: Path) -> None:
    huge = pb.ChunkingParams(algorithm=pb.ALGORITHM_REP_MAX_CDC, min_size=4 << 20,
                             horizon_size=16 << 20)
    with ChunkdServer(chunkd_bin, extra_args=["--stream_memory_budget=16777216"]) as server:
        with grpc.insecure_channel(server.address) as channel:
            stub = pb_grpc.ChunkServiceStub(channel)
            with pytest.raises(grpc.RpcError) as raised:
                list(stub.Chunk(iter([pb.ChunkRequest(params=pb.ChunkParams(chunking=huge))]),
                                timeout=RPC_TIMEOUT))
    assert raised.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert "--stream_memory_budget" in raised.value.details()
    assert error_info(raised.value).reason == "STREAM_MEMORY"
