"""docs/cli.md, the contract of the three command-line clients, held against
all three: chunkctl ($CHUNKCTL_BIN), chunkd-client (the console script next
to the running Python, or $CHUNKD_CLIENT_BIN) and chunkd-go ($CHUNKD_GO_BIN).
One set of argument lists goes through each, against one real chunkd, and
exit codes, standard output and the one line of standard error are compared
with the contract and across the clients: the same version, the same chunk
lines, the same dedup reports and info in one JSON schema
(docs/cli-output.schema.json), the same exit codes for usage errors, the
server's INVALID_ARGUMENT, a server that is down, a deadline, and a closed
standard output.

Flags come before FILE in every argument list, the order all three take."""

from __future__ import annotations

import json
import os
import re
import subprocess
import threading
import uuid
from concurrent import futures
from pathlib import Path
from typing import Dict, Iterator, List, Optional, Sequence

import grpc
import jsonschema
import pytest

from chunkd_client.testing import ChunkdServer, free_port

from clients_util import chunkd_client, chunkd_go
from e2e_util import (REPO, RPC_TIMEOUT, SEKIEN, SUBPROCESS_TIMEOUT, pb, pb_grpc,
                      random_bytes)

CLIS = ["chunkctl", "chunkd-client", "chunkd-go"]
VERSION = (REPO / "VERSION").read_text().strip()
SCHEMA = json.loads((REPO / "docs" / "cli-output.schema.json").read_text())
#: The message of the server that refuses every call (refusing_server).
REFUSAL = "contract test: this server refuses every request"


def binary(cli: str, chunkctl_bin: Path) -> Path:
    if cli == "chunkctl":
        return chunkctl_bin
    return chunkd_client() if cli == "chunkd-client" else chunkd_go()


def run(cli: str, chunkctl_bin: Path, *args: object, stdin: Optional[bytes] = None,
        env: Optional[Dict[str, str]] = None) -> subprocess.CompletedProcess:
    """Runs one client; never fails the test by itself. The environment has
    neither $CHUNKD_SERVER nor $CHUNKD_TOKEN unless `env` sets them."""
    full_env = {k: v for k, v in os.environ.items()
                if k not in ("CHUNKD_SERVER", "CHUNKD_TOKEN")}
    full_env.update(env or {})
    return subprocess.run(
        [str(binary(cli, chunkctl_bin)), *map(str, args)], input=stdin,
        stdin=None if stdin is not None else subprocess.DEVNULL,
        capture_output=True, timeout=SUBPROCESS_TIMEOUT, env=full_env)


def validate(document: object, definition: str) -> None:
    """Fails unless `document` is a valid `definition` of the schema."""
    jsonschema.validate(
        document,
        {"$schema": SCHEMA["$schema"], "$defs": SCHEMA["$defs"], "$ref": f"#/$defs/{definition}"},
        cls=jsonschema.Draft202012Validator)


def json_lines(stdout: bytes) -> List[dict]:
    text = stdout.decode()
    assert text.endswith("\n"), text[-200:]
    return [json.loads(line) for line in text.splitlines()]


def one_error_line(result: subprocess.CompletedProcess, cli: str) -> str:
    """The one line of stderr, which starts with "PROG: "."""
    lines = result.stderr.decode(errors="replace").splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith(f"{cli}: "), lines[0]
    return lines[0]


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> Dict[str, Path]:
    d = tmp_path_factory.mktemp("contract")
    small = d / "small.bin"
    small.write_bytes(random_bytes(2020, 700_000))
    big = d / "big.bin"
    big.write_bytes(random_bytes(2021, 48 << 20))
    return {"sekien": SEKIEN, "small": small, "big": big}


@pytest.fixture(scope="module")
def down_address() -> str:
    return f"127.0.0.1:{free_port()}"  # nothing listens here


# --version and --help.

@pytest.mark.parametrize("cli", CLIS)
def test_version_is_the_repositorys(cli: str, chunkctl_bin: Path) -> None:
    result = run(cli, chunkctl_bin, "--version")
    assert result.returncode == 0, result.stderr
    assert result.stdout.decode() == f"{cli} {VERSION}\n"


@pytest.mark.parametrize("cli", CLIS)
@pytest.mark.parametrize("command", [[], ["chunk"], ["dedup"], ["info"]], ids=" ".join)
def test_help_exits_zero(cli: str, command: List[str], chunkctl_bin: Path) -> None:
    result = run(cli, chunkctl_bin, *command, "--help")
    assert result.returncode == 0, result.stderr
    usage = result.stdout.decode()
    assert "Usage" in usage or "usage" in usage, usage
    # Help shows the dash spellings.
    if command:
        assert "--server" in usage and "--timeout" in usage and "--tls-ca" in usage, usage


# chunk: the same lines from every client, equal to chunkctl --local's.

CHUNK_ARGS = [
    [],
    ["--format", "csv"],
    ["--format", "text"],
    ["--json"],
    ["--format", "json", "--fingerprint", "xxh128"],
    ["--fingerprint", "none"],
    ["--json", "--fingerprint", "none", "--algorithm", "crc32", "--avg", "8192"],
    ["--algorithm", "seqcdc", "--seq-length", "4", "--message-size", "7777"],
    ["--algorithm", "seqcdc", "--seq_length", "4", "--message_size", "7777"],
    ["--preset", "fastcdc-reapi", "--avg", "8192", "--min", "2048", "--max", "32768"],
]


@pytest.mark.parametrize("cli", CLIS)
@pytest.mark.parametrize("args", CHUNK_ARGS, ids=" ".join)
def test_chunk_prints_the_same_lines(cli: str, args: List[str], server: ChunkdServer,
                                     chunkctl_bin: Path, files: Dict[str, Path]) -> None:
    for name in ("sekien", "small"):
        # --local takes every one of these (--message-size: bytes per read).
        expected = run("chunkctl", chunkctl_bin, "chunk", "--local", *args, files[name])
        assert expected.returncode == 0, expected.stderr
        result = run(cli, chunkctl_bin, "chunk", "--server", server.address, *args, files[name])
        assert result.returncode == 0, result.stderr
        assert result.stderr == b""  # not a terminal: no progress
        assert result.stdout == expected.stdout
    if "--json" in args or "json" in args:
        for record in json_lines(result.stdout):
            validate(record, "chunkRecord")
            assert ("fingerprint" in record) == ("none" not in args)


@pytest.mark.parametrize("cli", CLIS)
def test_server_defaults_to_chunkd_server(cli: str, server: ChunkdServer,
                                          chunkctl_bin: Path) -> None:
    result = run(cli, chunkctl_bin, "chunk", SEKIEN, env={"CHUNKD_SERVER": server.address})
    assert result.returncode == 0, result.stderr
    assert result.stdout == run("chunkctl", chunkctl_bin, "chunk", "--local", SEKIEN).stdout


# dedup: the same report from every client, each in a fresh namespace.

def fresh_namespace(cli: str) -> str:
    return f"contract-{cli}-{uuid.uuid4().hex[:12]}"


@pytest.mark.parametrize("cli", CLIS)
@pytest.mark.parametrize("extra", [[], ["--hints", "off", "--algorithm", "crc32"],
                                   ["--retries", "2"]], ids=" ".join)
def test_dedup_reports_the_same_text(cli: str, extra: List[str], server: ChunkdServer,
                                     chunkctl_bin: Path, files: Dict[str, Path]) -> None:
    paths = [files["small"], files["sekien"], files["small"]]
    expected = run("chunkctl", chunkctl_bin, "dedup", "--server", server.address,
                   "--namespace", fresh_namespace("reference"), *extra, *paths)
    assert expected.returncode == 0, expected.stderr
    lines = expected.stdout.decode().splitlines()
    assert len(lines) == 4 and lines[3].startswith("total bytes="), lines
    small, sekien = files["small"].stat().st_size, files["sekien"].stat().st_size
    running = (2 * small + sekien) / (small + sekien)
    assert " unique_bytes=0 " in lines[2] and f" ratio={running:.2f}" in lines[2], lines
    result = run(cli, chunkctl_bin, "dedup", "--server", server.address,
                 "--namespace", fresh_namespace(cli), *extra, *paths)
    assert result.returncode == 0, result.stderr
    assert result.stderr == b""
    assert result.stdout == expected.stdout


@pytest.mark.parametrize("cli", CLIS)
@pytest.mark.parametrize("flag", [["--json"], ["--format", "json"]], ids=" ".join)
def test_dedup_reports_the_same_json(cli: str, flag: List[str], server: ChunkdServer,
                                     chunkctl_bin: Path, files: Dict[str, Path]) -> None:
    paths = [files["small"], files["small"]]
    ns = fresh_namespace(cli)
    result = run(cli, chunkctl_bin, "dedup", "--server", server.address, "--namespace", ns,
                 *flag, *paths)
    assert result.returncode == 0, result.stderr
    lines = json_lines(result.stdout)
    assert len(lines) == 3
    for line in lines[:2]:
        validate(line, "dedupFileLine")
    validate(lines[2], "dedupTotalLine")
    size = files["small"].stat().st_size
    assert [line.get("file") for line in lines] == [str(p) for p in paths] + [None]
    assert lines[0]["bytes"] == lines[0]["unique_bytes"] == size and lines[0]["ratio"] == 1
    assert lines[1]["unique_bytes"] == 0 and lines[1]["ratio"] == 2
    assert lines[2]["bytes"] == 2 * size and lines[2]["unique_bytes"] == size
    # The same file a third time: nothing unique, so no ratio.
    again = run(cli, chunkctl_bin, "dedup", "--server", server.address, "--namespace", ns,
                *flag, files["small"])
    assert again.returncode == 0, again.stderr
    assert [line["ratio"] for line in json_lines(again.stdout)] == [None, None]
    # And what chunkctl says in its own fresh namespace.
    reference = run("chunkctl", chunkctl_bin, "dedup", "--server", server.address,
                    "--namespace", fresh_namespace("reference"), "--json", *paths)
    assert json_lines(reference.stdout) == lines


# info: one JSON object, the server's answer in the schema's shape.

def expected_info(server: ChunkdServer) -> dict:
    """GetServerInfo's answer as docs/cli.md's JSON, built here from the
    proto (independently of every client)."""
    with grpc.insecure_channel(server.address) as channel:
        info = pb_grpc.ChunkServiceStub(channel).GetServerInfo(
            pb.GetServerInfoRequest(), timeout=RPC_TIMEOUT)

    def range_of(r) -> dict:
        return {"min": r.min, "max": r.max, "default": r.default_value}

    def optional(r) -> Optional[dict]:
        return None if r.max == 0 else range_of(r)

    names = {pb.FINGERPRINT_ALGORITHM_SHA256: "sha256", pb.FINGERPRINT_ALGORITHM_XXH128: "xxh128",
             pb.FINGERPRINT_ALGORITHM_NONE: "none"}
    return {
        "version": info.version, "chunking_backend": info.chunking_backend,
        "index_backend": info.index_backend, "max_message_bytes": info.max_message_bytes,
        "max_inflight_bytes": info.max_inflight_bytes,
        "fingerprints": [names[f] for f in info.fingerprints],
        "algorithms": [
            {"name": a.name, "backend": a.backend, "backend_threads": a.backend_threads,
             "min_size": range_of(a.min_size), "avg_size": range_of(a.avg_size),
             "max_size": range_of(a.max_size), "avg_size_power_of_two": a.avg_size_power_of_two,
             "normalization_level": optional(a.normalization_level),
             "horizon_size": optional(a.horizon_size), "polynomial": optional(a.polynomial)}
            for a in info.algorithms],
    }


@pytest.mark.parametrize("cli", CLIS)
@pytest.mark.parametrize("flag", [["--json"], ["--format", "json"], ["--json", "--timeout", "30"]],
                         ids=" ".join)
def test_info_json(cli: str, flag: List[str], server: ChunkdServer, chunkctl_bin: Path) -> None:
    result = run(cli, chunkctl_bin, "info", "--server", server.address, *flag)
    assert result.returncode == 0, result.stderr
    info = json.loads(result.stdout)
    validate(info, "info")
    assert info == expected_info(server)
    assert {a["name"] for a in info["algorithms"]} >= {"fastcdc", "rabin", "repmaxcdc"}


# Usage errors: exit 2 before any call (nothing listens at the address).

USAGE_ERRORS = {
    "unknown flag": ["chunk", "--bogus", "1", "FILE"],
    "unknown command": ["frobnicate"],
    "bad value": ["chunk", "--min", "4k", "FILE"],
    "out of range": ["chunk", "--min", "1", "FILE"],
    "flag the algorithm does not take": ["chunk", "--algorithm", "fixed", "--min", "8192", "FILE"],
    "flag the preset's algorithm does not take": ["chunk", "--preset", "seqcdc-8k", "--avg", "8192",
                                                  "FILE"],
    "bad format": ["chunk", "--format", "xml", "FILE"],
    "bad progress": ["chunk", "--progress", "sometimes", "FILE"],
    "negative timeout": ["info", "--timeout", "-1"],
    "dedup without a fingerprint": ["dedup", "--namespace", "ns", "--fingerprint", "none", "FILE"],
    "dedup with a bad namespace": ["dedup", "--namespace", "a/b", "FILE"],
    "dedup retries of stdin": ["dedup", "--namespace", "ns", "--retries", "1", "-"],
    "dedup retries above 100": ["dedup", "--namespace", "ns", "--retries", "101", "FILE"],
    "chunk retries of stdin": ["chunk", "--retries", "1", "-"],
    "chunk retries of a device": ["chunk", "--retries", "1", "/dev/null"],
    "chunk retries above 100": ["chunk", "--retries", "101", "FILE"],
    "hints with crc32": ["dedup", "--namespace", "ns", "--algorithm", "crc32", "--hints", "ff",
                         "FILE"],
}


@pytest.mark.parametrize("cli", CLIS)
@pytest.mark.parametrize("case", list(USAGE_ERRORS))
def test_usage_errors_exit_2(cli: str, case: str, chunkctl_bin: Path, down_address: str) -> None:
    args = [str(SEKIEN) if a == "FILE" else a for a in USAGE_ERRORS[case]]
    if args[0] != "frobnicate":
        args[1:1] = ["--server", down_address]
    result = run(cli, chunkctl_bin, *args, stdin=b"x")
    assert result.returncode == 2, result.stderr
    assert result.stdout == b""
    line = one_error_line(result, cli)
    assert "UNAVAILABLE" not in line  # found before any call
    assert line.endswith(f"(see {cli} {args[0] + ' ' if args[0] != 'frobnicate' else ''}--help)"), line


# The server's INVALID_ARGUMENT is a bad parameter: exit 2 too.

class _Refuse(grpc.GenericRpcHandler):
    """Answers every ChunkService call with INVALID_ARGUMENT."""

    UNARY = ("GetServerInfo", "FindMissing", "Release")

    def service(self, details):
        service, _, method = details.method.strip("/").partition("/")
        if service != "chunkd.v1.ChunkService":
            return None

        def refuse(_request, context):
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, REFUSAL)

        if method in self.UNARY:
            return grpc.unary_unary_rpc_method_handler(refuse)
        return grpc.stream_stream_rpc_method_handler(refuse)


@pytest.fixture(scope="module")
def refusing_server() -> Iterator[str]:
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    server.add_generic_rpc_handlers((_Refuse(),))
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        yield f"127.0.0.1:{port}"
    finally:
        server.stop(0)


@pytest.mark.parametrize("cli", CLIS)
@pytest.mark.parametrize("command", [["info"], ["chunk", "FILE"],
                                     ["dedup", "--namespace", "ns", "--retries", "2", "FILE"]],
                         ids=lambda c: c[0])
def test_the_servers_invalid_argument_exits_2(cli: str, command: List[str], refusing_server: str,
                                              chunkctl_bin: Path) -> None:
    args = [str(SEKIEN) if a == "FILE" else a for a in command]
    result = run(cli, chunkctl_bin, args[0], "--server", refusing_server, *args[1:])
    assert result.returncode == 2, result.stderr
    assert result.stdout == b""
    # Never retried: INVALID_ARGUMENT is final.
    assert one_error_line(result, cli) == f"{cli}: INVALID_ARGUMENT: {REFUSAL}"


# Failures while running: exit 1 with the server's code.

@pytest.mark.parametrize("cli", CLIS)
@pytest.mark.parametrize("command", [["info"], ["chunk", "FILE"], ["dedup", "--namespace", "ns",
                                                                   "FILE"]],
                         ids=lambda c: c[0])
def test_a_server_that_is_down_exits_1_unavailable(cli: str, command: List[str],
                                                  chunkctl_bin: Path, down_address: str) -> None:
    args = [str(SEKIEN) if a == "FILE" else a for a in command]
    result = run(cli, chunkctl_bin, args[0], "--server", down_address, *args[1:])
    assert result.returncode == 1, result.stderr
    assert result.stdout == b""
    assert one_error_line(result, cli).startswith(f"{cli}: UNAVAILABLE: ")


@pytest.mark.parametrize("cli", CLIS)
@pytest.mark.parametrize("command", [["chunk"], ["dedup", "--namespace", "deadline"]],
                         ids=lambda c: c[0])
def test_a_timeout_while_stdin_stalls_exits_1_deadline_exceeded(
        cli: str, command: List[str], server: ChunkdServer, chunkctl_bin: Path,
        tmp_path: Path) -> None:
    """stdin gives 100 KB and then stalls, open, without EOF: the stream
    cannot end, whatever the speed of the machine, and the client must exit
    at its --timeout rather than wait for the input."""
    with open(tmp_path / "stderr", "w+b") as err:
        process = subprocess.Popen(
            [str(binary(cli, chunkctl_bin)), command[0], "--server", server.address,
             *command[1:], "--timeout", "0.5", "-"],
            stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=err)
        assert process.stdin is not None
        writer = threading.Thread(target=process.stdin.write,
                                  args=(random_bytes(7, 100_000),), daemon=True)
        writer.start()
        try:
            code = process.wait(timeout=SUBPROCESS_TIMEOUT / 4)
        except subprocess.TimeoutExpired:
            code = None
        finally:
            try:
                process.stdin.close()  # held open until now: ends a waiting client
            except OSError:
                pass
            if process.poll() is None:
                process.kill()
            process.wait(SUBPROCESS_TIMEOUT)
            writer.join(SUBPROCESS_TIMEOUT)
        err.seek(0)
        stderr = err.read()
    assert code is not None, f"{cli} waited for its stalled stdin past --timeout 0.5"
    assert code == 1, stderr
    line = stderr.decode(errors="replace").splitlines()[-1]
    assert line.startswith(f"{cli}: DEADLINE_EXCEEDED: "), stderr


@pytest.mark.parametrize("cli", CLIS)
@pytest.mark.parametrize("command", [["chunk"], ["dedup", "--namespace", "ns"]],
                         ids=lambda c: c[0])
def test_retries_stop_at_the_cap(cli: str, command: List[str], chunkctl_bin: Path,
                                 down_address: str) -> None:
    """--retries 2 with a server that is down: two replays, each announced
    on stderr in the common format, then the last attempt's error."""
    result = run(cli, chunkctl_bin, command[0], "--server", down_address, *command[1:],
                 "--retries", "2", "--timeout", "5", SEKIEN)
    assert result.returncode == 1, result.stderr
    assert result.stdout == b""
    lines = result.stderr.decode(errors="replace").splitlines()
    assert len(lines) == 3, lines
    for k, line in enumerate(lines[:2], 1):
        assert re.fullmatch(rf"{cli}: {re.escape(str(SEKIEN))}: UNAVAILABLE: .+; sending it "
                            rf"again in [0-9]+\.[0-9]{{2}} s \(retry {k} of 2\)", line), line
    assert lines[2].startswith(f"{cli}: UNAVAILABLE: "), lines


@pytest.mark.parametrize("cli", CLIS)
def test_a_closed_stdout_exits_141_silently(cli: str, server: ChunkdServer, chunkctl_bin: Path,
                                           files: Dict[str, Path]) -> None:
    """`CLI chunk ... | head -1`: many lines, of which the reader takes one."""
    process = subprocess.Popen(
        [str(binary(cli, chunkctl_bin)), "chunk", "--server", server.address,
         "--min", "256", "--avg", "1024", "--max", "4096", str(files["big"])],
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        first = process.stdout.readline()
        process.stdout.close()
        _, stderr = process.communicate(timeout=SUBPROCESS_TIMEOUT)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(10)
    assert first.startswith(b"0,")
    assert process.returncode == 141, stderr
    assert stderr == b""


@pytest.mark.parametrize("cli", CLIS)
def test_token_file_in_either_spelling(cli: str, server: ChunkdServer, chunkctl_bin: Path,
                                       tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("contract-token-0123456789\n")
    outputs = []
    for flag in ("--token-file", "--token_file"):
        result = run(cli, chunkctl_bin, "info", "--server", server.address, flag, token, "--json")
        assert result.returncode == 0, result.stderr
        outputs.append(json.loads(result.stdout))
    assert outputs[0] == outputs[1]
