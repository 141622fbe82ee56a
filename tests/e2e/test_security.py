"""TLS, mutual TLS and bearer tokens , against a real chunkd:
ChunkService needs a known token and, for a namespace, one that grants it;
health stays open; TLS servers refuse plaintext and, with --tls_client_ca,
clients without a certificate."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path
from typing import Iterator, Sequence

import grpc
import pytest

from chunkd_client._proto.chunkd.v1 import chunkd_pb2 as pb
from chunkd_client._proto.chunkd.v1 import chunkd_pb2_grpc as pb_grpc
from chunkd_client.testing import ChunkdServer, free_port, health_status, serving
from e2e_util import RPC_TIMEOUT, SUBPROCESS_TIMEOUT, fastcdc_params, random_bytes

DATA = random_bytes(77, 300_000)
TEAM_A = "team-a-token-0123456789"
ADMIN = "admin-token-0123456789ab"
TOKENS = f"# test tokens\n{TEAM_A} team-a,team-a2\n{ADMIN} *\n"


def bearer(token: str):
    return (("authorization", f"Bearer {token}"),)


def chunk(stub: pb_grpc.ChunkServiceStub, metadata=()) -> "pb.ChunkSummary":
    requests = [pb.ChunkRequest(params=pb.ChunkParams(chunking=fastcdc_params()), data=DATA)]
    responses = list(stub.Chunk(iter(requests), timeout=RPC_TIMEOUT, metadata=metadata))
    return responses[-1].summary


def dedup(stub: pb_grpc.ChunkServiceStub, namespace: str, metadata=()) -> "pb.DedupSummary":
    params = pb.DedupParams(chunking=fastcdc_params(), namespace=namespace)
    requests = [pb.DedupRequest(params=params, data=DATA)]
    responses = list(stub.Dedup(iter(requests), timeout=RPC_TIMEOUT, metadata=metadata))
    return responses[-1].summary


# --- bearer tokens -----------------------------------------------------------


@pytest.fixture(scope="module")
def token_server(chunkd_bin: Path, tmp_path_factory) -> Iterator[ChunkdServer]:
    path = tmp_path_factory.mktemp("auth") / "tokens"
    path.write_text(TOKENS)
    yield from serving(ChunkdServer(chunkd_bin, extra_args=[f"--auth_tokens={path}"]))


@pytest.fixture
def token_stub(token_server: ChunkdServer) -> Iterator[pb_grpc.ChunkServiceStub]:
    with grpc.insecure_channel(token_server.address) as channel:
        yield pb_grpc.ChunkServiceStub(channel)


@pytest.mark.parametrize(
    "metadata,needle",
    [
        ((), "requires a token"),
        ((("authorization", TEAM_A),), "Bearer <token>"),
        (bearer("not-a-known-token-000000"), "not known"),
    ],
    ids=["missing", "no-bearer-scheme", "unknown"],
)
def test_stream_without_a_known_token_is_unauthenticated(token_stub, metadata, needle) -> None:
    requests = [pb.ChunkRequest(params=pb.ChunkParams(chunking=fastcdc_params()), data=DATA)]
    with pytest.raises(grpc.RpcError) as info:
        list(token_stub.Chunk(iter(requests), timeout=RPC_TIMEOUT, metadata=metadata))
    assert info.value.code() == grpc.StatusCode.UNAUTHENTICATED
    assert needle in info.value.details()
    assert "not-a-known" not in info.value.details()


def test_unary_rpcs_need_a_token(token_stub) -> None:
    with pytest.raises(grpc.RpcError) as info:
        token_stub.GetServerInfo(pb.GetServerInfoRequest(), timeout=RPC_TIMEOUT)
    assert info.value.code() == grpc.StatusCode.UNAUTHENTICATED
    with pytest.raises(grpc.RpcError) as info:
        token_stub.FindMissing(
            pb.FindMissingRequest(namespace="team-a", fingerprints=[b"\0" * 32]),
            timeout=RPC_TIMEOUT,
        )
    assert info.value.code() == grpc.StatusCode.UNAUTHENTICATED
    info_ok = token_stub.GetServerInfo(
        pb.GetServerInfoRequest(), timeout=RPC_TIMEOUT, metadata=bearer(TEAM_A)
    )
    assert info_ok.version


def test_token_grants_only_its_namespaces(token_stub) -> None:
    assert chunk(token_stub, bearer(TEAM_A)).total_bytes == len(DATA)
    assert dedup(token_stub, "team-a2", bearer(TEAM_A)).total_bytes == len(DATA)
    with pytest.raises(grpc.RpcError) as info:
        dedup(token_stub, "team-b", bearer(TEAM_A))
    assert info.value.code() == grpc.StatusCode.PERMISSION_DENIED
    assert "'team-b'" in info.value.details()
    with pytest.raises(grpc.RpcError) as info:
        token_stub.FindMissing(
            pb.FindMissingRequest(namespace="team-b", fingerprints=[b"\0" * 32]),
            timeout=RPC_TIMEOUT,
            metadata=bearer(TEAM_A),
        )
    assert info.value.code() == grpc.StatusCode.PERMISSION_DENIED
    # The wildcard token may use any namespace, and sees team-a2's chunks.
    summary = dedup(token_stub, "team-a2", bearer(ADMIN))
    assert summary.unique_bytes == 0


def test_health_stays_open(token_server) -> None:
    assert health_status(token_server.address) == 1


def test_bad_token_file_stops_startup_naming_the_line(chunkd_bin: Path, tmp_path) -> None:
    path = tmp_path / "tokens"
    path.write_text("# ok\nshort team-a\n")
    result = subprocess.run(
        [str(chunkd_bin), f"--listen=127.0.0.1:{free_port()}", "--metrics_listen=",
         f"--auth_tokens={path}"],
        capture_output=True, text=True, timeout=SUBPROCESS_TIMEOUT,
    )
    assert result.returncode == 2
    assert f"--auth_tokens {path}: line 2: the token has 5 characters" in result.stderr


# --- TLS -----------------------------------------------------------------------


def openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True,
                   timeout=SUBPROCESS_TIMEOUT)


@pytest.fixture(scope="module")
def pki(tmp_path_factory) -> Path:
    """A CA, a server certificate for 127.0.0.1/localhost and a client one."""
    d = tmp_path_factory.mktemp("pki")
    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
            "-subj", "/CN=chunkd test CA", "-keyout", "ca.key", "-out", "ca.pem", cwd=d)
    for name, ext in [
        ("server", "subjectAltName=IP:127.0.0.1,DNS:localhost"),
        ("client", "extendedKeyUsage=clientAuth"),
    ]:
        openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", f"/CN=chunkd {name}",
                "-keyout", f"{name}.key", "-out", f"{name}.csr", cwd=d)
        (d / f"{name}.ext").write_text(ext + "\n")
        openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
                "-CAcreateserial", "-days", "2", "-extfile", f"{name}.ext",
                "-out", f"{name}.pem", cwd=d)
    return d


class TlsServer:
    """chunkd with TLS flags; waits for health over a TLS channel."""

    def __init__(self, binary: Path, pki: Path, mutual: bool) -> None:
        self.address = f"127.0.0.1:{free_port()}"
        args = [str(binary), f"--listen={self.address}", "--metrics_listen=",
                f"--tls_cert={pki / 'server.pem'}", f"--tls_key={pki / 'server.key'}"]
        if mutual:
            args.append(f"--tls_client_ca={pki / 'ca.pem'}")
        self.process = subprocess.Popen(args, stdout=subprocess.DEVNULL,
                                        stderr=subprocess.PIPE)

    def stop(self) -> str:
        self.process.terminate()
        _, err = self.process.communicate(timeout=SUBPROCESS_TIMEOUT)
        return err.decode(errors="replace")


def credentials(pki: Path, client_cert: bool) -> grpc.ChannelCredentials:
    kwargs = dict(root_certificates=(pki / "ca.pem").read_bytes())
    if client_cert:
        kwargs.update(private_key=(pki / "client.key").read_bytes(),
                      certificate_chain=(pki / "client.pem").read_bytes())
    return grpc.ssl_channel_credentials(**kwargs)


def wait_for(address: str, creds: grpc.ChannelCredentials, process) -> None:
    deadline = time.monotonic() + 30
    while True:
        assert process.poll() is None, "chunkd exited while starting"
        try:
            with grpc.secure_channel(address, creds) as channel:
                grpc.channel_ready_future(channel).result(timeout=1)
            return
        except grpc.FutureTimeoutError:
            assert time.monotonic() < deadline, f"{address} never became ready"


@pytest.mark.parametrize("mutual", [False, True], ids=["tls", "mutual-tls"])
def test_tls(chunkd_bin: Path, pki: Path, mutual: bool) -> None:
    server = TlsServer(chunkd_bin, pki, mutual)
    try:
        good = credentials(pki, client_cert=mutual)
        wait_for(server.address, good, server.process)
        with grpc.secure_channel(server.address, good) as channel:
            assert chunk(pb_grpc.ChunkServiceStub(channel)).total_bytes == len(DATA)
        # Plaintext to a TLS port never gets through.
        with grpc.insecure_channel(server.address) as channel:
            with pytest.raises(grpc.RpcError) as info:
                chunk(pb_grpc.ChunkServiceStub(channel))
            assert info.value.code() == grpc.StatusCode.UNAVAILABLE
        if mutual:
            # A client without a certificate is refused in the handshake.
            with grpc.secure_channel(server.address, credentials(pki, False)) as channel:
                with pytest.raises(grpc.RpcError) as info:
                    chunk(pb_grpc.ChunkServiceStub(channel))
                assert info.value.code() == grpc.StatusCode.UNAVAILABLE
    finally:
        log = server.stop()
    assert ("with mutual TLS" if mutual else "with TLS") in log


@pytest.mark.parametrize(
    "flags,needle",
    [
        (["--tls_cert=/nonexistent.pem"], "TLS needs both --tls_cert and --tls_key"),
        (["--tls_cert=/nonexistent.pem", "--tls_key=/nonexistent.key"],
         "--tls_cert /nonexistent.pem: cannot read"),
        (["--tls_client_ca=/x.pem"], "--tls_client_ca needs --tls_cert"),
    ],
)
def test_bad_tls_flags_stop_startup(chunkd_bin: Path, flags: Sequence[str], needle: str) -> None:
    result = subprocess.run(
        [str(chunkd_bin), f"--listen=127.0.0.1:{free_port()}", "--metrics_listen=", *flags],
        capture_output=True, text=True, timeout=SUBPROCESS_TIMEOUT,
    )
    assert result.returncode == 2
    assert needle in result.stderr
