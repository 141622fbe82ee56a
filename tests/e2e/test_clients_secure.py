"""Every client against a chunkd with mutual TLS and bearer tokens: the same
chunks as `chunkctl --local`, and the errors a caller gets without a token
or outside its namespaces, named by their gRPC code."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path
from typing import Dict, Iterator, List

import grpc
import pytest

from chunkd_client import ChunkdError, Client, TlsOptions
from chunkd_client.aio import AsyncClient
from chunkd_client.testing import ChunkdServer, serving

from clients_util import chunk_flags, chunkd_client, chunkd_go, grpcurl, run
from e2e_util import RPC_TIMEOUT, random_bytes
from test_security import ADMIN, TEAM_A, TOKENS, pki  # noqa: F401 (pki: a fixture)

PARAMS = {"algorithm": "fastcdc", "min": 2048, "avg": 8192, "max": 32768}
KWARGS = {"algorithm": "fastcdc", "min_size": 2048, "avg_size": 8192, "max_size": 32768}


@pytest.fixture(scope="module")
def secure_server(chunkd_bin: Path, pki: Path, tmp_path_factory) -> Iterator[ChunkdServer]:  # noqa: F811
    tokens = tmp_path_factory.mktemp("tokens") / "tokens"
    tokens.write_text(TOKENS)
    creds = grpc.ssl_channel_credentials(
        root_certificates=(pki / "ca.pem").read_bytes(),
        private_key=(pki / "client.key").read_bytes(),
        certificate_chain=(pki / "client.pem").read_bytes())
    yield from serving(ChunkdServer(
        chunkd_bin,
        extra_args=[f"--tls_cert={pki / 'server.pem'}", f"--tls_key={pki / 'server.key'}",
                    f"--tls_client_ca={pki / 'ca.pem'}", f"--auth_tokens={tokens}"],
        health_credentials=creds))


@pytest.fixture(scope="module")
def token_files(tmp_path_factory) -> Dict[str, Path]:
    d = tmp_path_factory.mktemp("token-files")
    files = {}
    for name, token in (("admin", ADMIN), ("team-a", TEAM_A)):
        files[name] = d / name
        files[name].write_text(token + "\n")
    return files


@pytest.fixture(scope="module")
def data_file(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("secure-data") / "data.bin"
    path.write_bytes(random_bytes(808, 500_000))
    return path


def tls_flags(style: str, pki: Path) -> List[str]:  # noqa: F811
    if style == "chunkctl":
        return [f"--tls_ca={pki / 'ca.pem'}", f"--tls_cert={pki / 'client.pem'}",
                f"--tls_key={pki / 'client.key'}"]
    dash = "--" if style == "python" else "-"
    return [f"{dash}tls-ca={pki / 'ca.pem'}", f"{dash}tls-cert={pki / 'client.pem'}",
            f"{dash}tls-key={pki / 'client.key'}"]


def commands(server: ChunkdServer, chunkctl_bin: Path, pki: Path) -> Dict[str, List[object]]:  # noqa: F811
    """`chunk` of every command-line client, before the token flags and FILE."""
    return {
        "chunkctl": [chunkctl_bin, "chunk", "--server", server.address,
                     *tls_flags("chunkctl", pki), *chunk_flags("double", PARAMS)],
        "chunkd-client": [chunkd_client(), "chunk", "--server", server.address,
                          *tls_flags("python", pki), *chunk_flags("double", PARAMS)],
        "chunkd-go": [chunkd_go(), "chunk", "-server", server.address,
                      *tls_flags("go", pki), *chunk_flags("single", PARAMS)],
    }


def token_flag(client: str, path: Path) -> List[str]:
    return {"chunkctl": [f"--token_file={path}"], "chunkd-client": [f"--token-file={path}"],
            "chunkd-go": [f"-token-file={path}"]}[client]


def test_every_client_over_mutual_tls_with_a_token(
    secure_server: ChunkdServer, chunkctl_bin: Path, pki: Path,  # noqa: F811
    token_files: Dict[str, Path], data_file: Path,
) -> None:
    local = run([chunkctl_bin, "chunk", "--local", *chunk_flags("double", PARAMS),
                 data_file]).stdout.decode()
    assert local.count("\n") > 20
    for name, command in commands(secure_server, chunkctl_bin, pki).items():
        out = run([*command, *token_flag(name, token_files["admin"]), data_file])
        assert out.stdout.decode() == local, name
        # The token may also come from $CHUNKD_TOKEN.
        out = run([*command, data_file], env={"CHUNKD_TOKEN": ADMIN})
        assert out.stdout.decode() == local, f"{name} with $CHUNKD_TOKEN"

    tls = TlsOptions(ca=pki / "ca.pem", cert=pki / "client.pem", key=pki / "client.key")
    with Client(secure_server.address, tls=tls, token=ADMIN, timeout=RPC_TIMEOUT) as client:
        records, _ = client.chunk_all(data_file, **KWARGS)
    assert "".join(f"{r.offset},{r.length},{r.fingerprint.hex()}\n" for r in records) == local

    async def chunk_async():
        async with AsyncClient(secure_server.address, tls=tls, token=ADMIN,
                               timeout=RPC_TIMEOUT) as client:
            return (await client.chunk_all(data_file, **KWARGS))[0]

    assert asyncio.run(chunk_async()) == records


def test_without_a_token_every_client_says_unauthenticated(
    secure_server: ChunkdServer, chunkctl_bin: Path, pki: Path, data_file: Path,  # noqa: F811
) -> None:
    for name, command in commands(secure_server, chunkctl_bin, pki).items():
        result = run([*command, data_file], check=False)
        assert result.returncode == 1, name
        assert b": UNAUTHENTICATED: " in result.stderr, (name, result.stderr)
        assert result.stdout == b"", name
    tls = TlsOptions(ca=pki / "ca.pem", cert=pki / "client.pem", key=pki / "client.key")
    with Client(secure_server.address, tls=tls, timeout=RPC_TIMEOUT) as client:
        with pytest.raises(ChunkdError) as info:
            client.server_info()
    assert info.value.code == grpc.StatusCode.UNAUTHENTICATED


def test_namespace_outside_the_token_is_permission_denied(
    secure_server: ChunkdServer, chunkctl_bin: Path, pki: Path,  # noqa: F811
    token_files: Dict[str, Path], data_file: Path,
) -> None:
    team_a = token_files["team-a"]
    dedup = {
        "chunkctl": [chunkctl_bin, "dedup", "--server", secure_server.address,
                     *tls_flags("chunkctl", pki), f"--token_file={team_a}", "--namespace"],
        "chunkd-client": [chunkd_client(), "dedup", "--server", secure_server.address,
                          *tls_flags("python", pki), f"--token-file={team_a}", "--namespace"],
        "chunkd-go": [chunkd_go(), "dedup", "-server", secure_server.address,
                      *tls_flags("go", pki), f"-token-file={team_a}", "-namespace"],
    }
    for name, command in dedup.items():
        denied = run([*command, "team-b", data_file], check=False)
        assert denied.returncode == 1 and b": PERMISSION_DENIED: " in denied.stderr, name
        allowed = run([*command, "team-a", data_file])
        assert allowed.stdout.decode().startswith(f"{data_file} bytes=500000 "), name
    tls = TlsOptions(ca=pki / "ca.pem", cert=pki / "client.pem", key=pki / "client.key")
    with Client(secure_server.address, tls=tls, token=TEAM_A, timeout=RPC_TIMEOUT) as client:
        with pytest.raises(ChunkdError) as info:
            client.find_missing(f"other-{uuid.uuid4().hex[:8]}", [bytes(32)])
        assert info.value.code == grpc.StatusCode.PERMISSION_DENIED
        assert client.find_missing("team-a2", [bytes(32)]) == [bytes(32)]


def test_tls_errors_are_unavailable(secure_server: ChunkdServer, chunkctl_bin: Path,
                                    pki: Path) -> None:  # noqa: F811
    # The system's roots do not know the test CA; no client certificate.
    result = run([chunkctl_bin, "info", "--server", secure_server.address, "--tls",
                  f"--token={ADMIN}"], check=False)
    assert result.returncode == 1 and b"chunkctl: UNAVAILABLE: " in result.stderr
    # A certificate without its key is a usage error, found before connecting.
    result = run([chunkctl_bin, "info", "--server", secure_server.address,
                  f"--tls_cert={pki / 'client.pem'}"], check=False)
    assert result.returncode == 2 and b"--tls-cert and --tls-key go together" in result.stderr
    result = run([chunkctl_bin, "info", "--server", secure_server.address,
                  "--tls_ca=/nonexistent/ca.pem"], check=False)
    # A file that cannot be read is a failure to run (1), not a usage error.
    assert result.returncode == 1 and b"--tls-ca: /nonexistent/ca.pem" in result.stderr


def test_grpcurl_with_tls_and_a_token(secure_server: ChunkdServer, pki: Path) -> None:  # noqa: F811
    tls = ["-cacert", pki / "ca.pem", "-cert", pki / "client.pem", "-key", pki / "client.key"]
    # Reflection stays open without a token.
    listed = run([grpcurl(), *tls, secure_server.address, "list"]).stdout.decode().split()
    assert "chunkd.v1.ChunkService" in listed
    info = run([grpcurl(), *tls, "-H", f"authorization: Bearer {ADMIN}", "-d", "{}",
                secure_server.address, "chunkd.v1.ChunkService/GetServerInfo"])
    assert b'"fastcdc"' in info.stdout
    denied = run([grpcurl(), *tls, "-d", "{}", secure_server.address,
                  "chunkd.v1.ChunkService/GetServerInfo"], check=False)
    assert denied.returncode != 0 and b"Unauthenticated" in denied.stderr
