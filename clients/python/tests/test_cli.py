"""The chunkd-client console script against a real chunkd."""

from __future__ import annotations

import io
import json
import os
import pty
import random
import re
import subprocess
import sys
import uuid
from pathlib import Path
from typing import List

import pytest

from chunkd_client import ALGORITHMS, Client
from chunkd_client.cli import Progress, clock_time, human_bytes, main
from chunkd_client.testing import ChunkdServer, free_port

DATA = random.Random(99).randbytes(600_000)
SCRIPT = Path(sys.executable).with_name("chunkd-client")


def run_main(*args: str) -> "tuple[int, str]":
    out = io.StringIO()
    code = main([str(a) for a in args], out=out)
    return code, out.getvalue()


@pytest.fixture
def data_file(tmp_path: Path) -> Path:
    path = tmp_path / "data.bin"
    path.write_bytes(DATA)
    return path


def test_chunk_csv_and_json_match_the_api(server: ChunkdServer, client: Client,
                                          data_file: Path) -> None:
    records, _ = client.chunk_all(DATA, algorithm="crc32", avg_size=8192)
    code, csv = run_main("chunk", "--server", server.address, "--algorithm", "crc32",
                         "--avg", "8192", data_file)
    assert code == 0
    assert csv == "".join(f"{r.offset},{r.length},{r.fingerprint.hex()}\n" for r in records)
    code, text = run_main("chunk", "--server", server.address, "--algorithm", "crc32",
                          "--avg", "8192", "--json", data_file)
    assert code == 0
    assert [json.loads(line) for line in text.splitlines()] == [
        {"offset": r.offset, "length": r.length, "fingerprint": r.fingerprint.hex()}
        for r in records
    ]
    code, bare = run_main("chunk", "--server", server.address, "--algorithm", "crc32",
                          "--avg", "8192", "--fingerprint", "none", data_file)
    assert bare == "".join(f"{r.offset},{r.length}\n" for r in records)


def test_dedup_lines_and_json(server: ChunkdServer, data_file: Path) -> None:
    ns = f"cli-{uuid.uuid4().hex}"
    code, text = run_main("dedup", "--server", server.address, "--namespace", ns,
                          data_file, data_file)
    assert code == 0
    lines = text.splitlines()
    assert lines[0].startswith(f"{data_file} bytes={len(DATA)} unique_bytes={len(DATA)} ")
    assert lines[1].startswith(f"{data_file} bytes={len(DATA)} unique_bytes=0 ")
    assert lines[2].startswith(f"total bytes={2 * len(DATA)} unique_bytes={len(DATA)} ")
    # The second pass follows the server's default hints: its line and the
    # total end with the counters, the first's does not.
    assert lines[0].endswith("ratio=1.00")
    assert " ratio=2.00 hints_tried=" in lines[1] and " ratio=2.00 hints_tried=" in lines[2]
    assert lines[1][lines[1].index(" hints_tried="):] == lines[2][lines[2].index(" hints_tried="):]
    code, text = run_main("dedup", "--json", "--server", server.address, "--namespace", ns,
                          data_file)
    objects = [json.loads(line) for line in text.splitlines()]
    assert objects[0]["file"] == str(data_file) and objects[0]["unique_bytes"] == 0
    assert objects[0]["hints_accepted"] > 0 and objects[0]["hint_skipped_bytes"] > 0
    assert objects[0]["ratio"] is None  # nothing unique so far
    assert objects[-1]["total"] is True and "file" not in objects[-1]
    assert objects[-1]["bytes"] == len(DATA) and "total" not in objects[0]
    keys = ["bytes", "unique_bytes", "chunks", "unique_chunks", "ratio", "hints_tried",
            "hints_accepted", "hints_rejected", "hint_skipped_bytes"]
    assert list(objects[0]) == ["file", *keys] and list(objects[-1]) == ["total", *keys]
    code, text = run_main("dedup", "--json", "--hints", "off", "--server", server.address,
                          "--namespace", ns, data_file)
    assert json.loads(text.splitlines()[0])["hints_tried"] == 0


def test_info(server: ChunkdServer) -> None:
    code, text = run_main("info", "--server", server.address)
    assert code == 0 and "fastcdc: min 64.." in text and "index backend: memory" in text
    code, text = run_main("info", "--json", "--server", server.address)
    info = json.loads(text)
    assert info["index_backend"] == "memory"
    assert list(info) == ["version", "chunking_backend", "index_backend",
                          "max_message_bytes", "max_inflight_bytes", "fingerprints",
                          "algorithms"]
    assert [a["name"] for a in info["algorithms"]] == list(ALGORITHMS)
    by_name = {a["name"]: a for a in info["algorithms"]}
    assert list(by_name["fastcdc"]) == [
        "name", "backend", "backend_threads", "min_size", "avg_size", "max_size",
        "avg_size_power_of_two", "normalization_level", "horizon_size", "polynomial"]
    assert by_name["fastcdc"]["normalization_level"]["max"] == 3
    assert by_name["fastcdc"]["horizon_size"] is None
    assert by_name["fastcdc"]["polynomial"] is None
    assert by_name["crc32"]["normalization_level"] is None
    assert by_name["repmaxcdc"]["avg_size"] == {"min": 0, "max": 0, "default": 0}
    assert by_name["rabin"]["polynomial"]["default"] > 0
    assert by_name["repmaxcdc"]["horizon_size"] is not None
    # Each algorithm's stage-1 kernel, on the server's worker threads.
    assert all(a["backend"] in ("scalar", "avx2", "avx512") and a["backend_threads"] >= 1
               for a in info["algorithms"]), info["algorithms"]
    assert text.count("; backend ") == 0  # JSON, not the text form
    code, text = run_main("info", "--server", server.address)
    assert len(re.findall(r"; backend (scalar|avx2|avx512) \(\d+ threads?\)$", text,
                          re.MULTILINE)) == len(ALGORITHMS), text


def script(*args: object, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run([str(SCRIPT), *map(str, args)], capture_output=True,
                          timeout=120, stdin=subprocess.DEVNULL, **kwargs)


def test_exit_codes_and_messages(server: ChunkdServer, data_file: Path) -> None:
    # Each value in range, but min above avg: a rule between fields, which
    # the server checks.
    bad = script("chunk", "--server", server.address, "--min", "8192", "--avg", "4096",
                 data_file)
    assert bad.returncode == 2  # the server's INVALID_ARGUMENT: a bad parameter
    assert bad.stderr.decode().startswith("chunkd-client: INVALID_ARGUMENT: min_size 8192")
    assert bad.stderr.count(b"\n") == 1
    down = script("chunk", "--server", f"127.0.0.1:{free_port()}", "--timeout", "20",
                  data_file)
    assert down.returncode == 1 and b"chunkd-client: UNAVAILABLE: " in down.stderr
    missing = script("chunk", "--server", server.address, data_file.with_name("nope"))
    assert missing.returncode == 1 and b"nope: No such file or directory" in missing.stderr
    usage = script("chunk", "--server", server.address, "--algorithm", "bogus", data_file)
    assert usage.returncode == 2 and b"invalid choice: 'bogus'" in usage.stderr
    assert usage.stderr.endswith(b" (see chunkd-client chunk --help)\n")
    assert usage.stderr.count(b"\n") == 1 and usage.stdout == b""
    stdin_twice = script("dedup", "--server", server.address, "--namespace", "x", "-", "-")
    assert stdin_twice.returncode == 2 and b"read only once" in stdin_twice.stderr
    for unknown in (["chunk", "--bogus", data_file], ["chunk", "--tim", "3", data_file],
                    ["nope"], []):
        refused = script(*unknown)
        assert refused.returncode == 2 and refused.stderr.startswith(b"chunkd-client: ")
        assert refused.stderr.count(b"\n") == 1, refused.stderr
    assert script("chunk", "--bogus", data_file).stderr.endswith(
        b"(see chunkd-client chunk --help)\n")
    not_taken = script("chunk", "--server", server.address, "--algorithm", "crc32",
                       "--level", "2", data_file)
    assert not_taken.returncode == 2 and not_taken.stderr == (
        b"chunkd-client: --level is not a parameter of crc32 (it takes --min, --avg, "
        b"--max) (see chunkd-client chunk --help)\n")
    ok = subprocess.run([str(SCRIPT), "chunk", "--server", server.address, "-"],
                        input=DATA, capture_output=True, timeout=120)
    assert ok.returncode == 0 and ok.stdout.count(b"\n") > 10


def test_progress_only_on_a_terminal(server: ChunkdServer, data_file: Path) -> None:
    piped = script("chunk", "--server", server.address, data_file)
    assert piped.returncode == 0 and piped.stderr == b""

    leader, follower = pty.openpty()
    try:
        result = subprocess.run(
            [str(SCRIPT), "chunk", "--server", server.address, str(data_file)],
            stdout=subprocess.PIPE, stderr=follower, stdin=subprocess.DEVNULL, timeout=120)
        os.close(follower)
        follower = -1
        drawn = b""
        while True:
            try:
                piece = os.read(leader, 65536)
            except OSError:  # EIO: the terminal's other end is closed
                break
            if not piece:
                break
            drawn += piece
    finally:
        if follower >= 0:
            os.close(follower)
        os.close(leader)
    assert result.returncode == 0 and result.stdout == piped.stdout
    text = drawn.decode()
    assert "100.0%" in text and "585.9 KiB/585.9 KiB" in text and "/s" in text


def test_progress_line() -> None:
    clock = iter([0.0, 2.0]).__next__
    progress = Progress(None, "in.bin", 4 << 20, clock=clock)
    progress.update(1 << 20)
    assert progress.line(2.0) == (
        "in.bin [######------------------]  25.0% 1.0 MiB/4.0 MiB 512.0 KiB/s ETA 0:06")
    assert human_bytes(1536) == "1.5 KiB" and human_bytes(3) == "3 B"
    assert clock_time(3725) == "1:02:05" and clock_time(75) == "1:15"
    unknown = Progress(None, "-", None, clock=iter([0.0, 1.0]).__next__)
    unknown.update(3000)
    assert unknown.line(1.0) == "- 2.9 KiB 2.9 KiB/s"


def test_a_note_goes_above_the_progress_bar(capsys: pytest.CaptureFixture[str]) -> None:
    stream = io.StringIO()
    progress = Progress(stream, "in.bin", None, clock=iter([0.0, 1.0, 1.0]).__next__)
    progress.update(1024)
    progress.note("chunkd-client: in.bin: UNAVAILABLE: gone; sending it again")
    assert stream.getvalue() == (
        "\r\x1b[Kin.bin 1.0 KiB 1.0 KiB/s"
        "\r\x1b[Kchunkd-client: in.bin: UNAVAILABLE: gone; sending it again\n"
        "\r\x1b[Kin.bin 1.0 KiB 1.0 KiB/s")
    Progress(None, "in.bin", None).note("a line of its own")
    assert capsys.readouterr().err == "a line of its own\n"


def test_version_and_help() -> None:
    version = script("--version")
    assert version.returncode == 0 and version.stdout == b"chunkd-client 0.4.0\n"
    from chunkd_client import __version__
    assert version.stdout.decode().split()[1] == __version__
    for args in (["--help"], ["chunk", "--help"], ["dedup", "--help"], ["info", "--help"]):
        shown = script(*args)
        assert shown.returncode == 0 and shown.stdout.startswith(b"usage: chunkd-client")
        assert shown.stderr == b""
    help_text = script("dedup", "--help").stdout.decode()
    # Dash spellings only, every flag of the contract.
    assert "--tls_ca" not in help_text and "--message_size" not in help_text
    for flag in ("--server", "--tls", "--tls-ca", "--tls-cert", "--tls-key",
                 "--tls-server-name", "--token", "--token-file", "--timeout", "--format",
                 "--json", "--progress", "--algorithm", "--preset", "--min", "--avg",
                 "--max", "--level", "--seed", "--seq-mode", "--seq-length",
                 "--skip-trigger", "--skip-size", "--horizon", "--polynomial",
                 "--fingerprint", "--message-size", "--namespace", "--hints",
                 "--retries"):
        assert f"{flag} " in help_text or f"{flag}\n" in help_text, flag


def test_underscore_spellings_and_formats(server: ChunkdServer, data_file: Path) -> None:
    dashes = run_main("chunk", "--server", server.address, "--algorithm", "seqcdc",
                      "--seq-mode", "decreasing", "--seq-length", "6", "--skip-trigger",
                      "40", "--skip-size", "300", "--message-size", "70000", data_file)
    underscores = run_main("chunk", "--server", server.address, "--algorithm", "seqcdc",
                           "--seq_mode", "decreasing", "--seq_length=6",
                           "--skip_trigger", "40", "--skip_size", "300",
                           "--message_size", "70000", data_file)
    assert dashes == underscores and dashes[0] == 0 and dashes[1].count("\n") > 10
    text = run_main("chunk", "--server", server.address, "--format", "text", data_file)
    csv = run_main("chunk", "--server", server.address, "--format=csv", data_file)
    as_json = run_main("chunk", "--server", server.address, "--format", "json", data_file)
    assert text == csv and as_json == run_main("chunk", "--server", server.address,
                                               "--json", data_file)
    assert [json.loads(line)["offset"] for line in as_json[1].splitlines()] == [
        int(line.split(",")[0]) for line in text[1].splitlines()]
    # --timeout: seconds with decimals (long enough for any machine); 0 is no
    # deadline.
    assert run_main("info", "--server", server.address, "--timeout", "90.5")[0] == 0
    assert run_main("info", "--server", server.address, "--timeout", "0",
                    "--progress", "never")[0] == 0


def test_presets(server: ChunkdServer, client: Client, data_file: Path) -> None:
    reapi, _ = client.chunk_all(DATA * 8, algorithm="fastcdc", min_size=128 << 10,
                                avg_size=512 << 10, max_size=2 << 20,
                                normalization_level=2)
    big = data_file.with_name("big.bin")
    big.write_bytes(DATA * 8)
    code, text = run_main("chunk", "--server", server.address, "--preset",
                          "fastcdc-reapi", big)
    assert code == 0 and text == "".join(
        f"{r.offset},{r.length},{r.fingerprint.hex()}\n" for r in reapi)
    seq8k, _ = client.chunk_all(DATA, algorithm="seqcdc", seq_mode="increasing",
                                min_size=4096, max_size=20000, seq_length=5,
                                skip_trigger=50, skip_size=256)
    code, text = run_main("chunk", "--server", server.address, "--preset", "seqcdc-8k",
                          "--max", "20000", data_file)  # a flag overrides the preset
    assert code == 0 and text == "".join(
        f"{r.offset},{r.length},{r.fingerprint.hex()}\n" for r in seq8k)
    assert run_main("chunk", "--server", server.address, "--preset", "seqcdc-8k",
                    "--algorithm", "fastcdc", data_file)[0] == 2
    assert run_main("chunk", "--server", server.address, "--preset", "seqcdc-16k",
                    "--avg", "8192", data_file)[0] == 2  # seqcdc takes no --avg


def test_closed_output_exits_141_without_a_traceback(server: ChunkdServer,
                                                     data_file: Path) -> None:
    """chunkd-client ... | head -1: a real pipe whose reader goes away."""
    command = (f"{SCRIPT} chunk --server {server.address} --algorithm fixed --avg 64 "
               f"{data_file} | head -1; echo \"status=${{PIPESTATUS[0]}}\"")
    result = subprocess.run(["bash", "-c", command], capture_output=True, timeout=120,
                            stdin=subprocess.DEVNULL)
    lines = result.stdout.decode().splitlines()
    assert lines == ["0,64," + lines[0].split(",")[2], "status=141"], lines
    assert result.stderr == b""


@pytest.mark.parametrize("command", [["chunk"], ["dedup", "--namespace", "NS"]],
                         ids=lambda c: c[0])
def test_retries_flag(server: ChunkdServer, data_file: Path, command: List[str]) -> None:
    ns = f"cli-retries-{uuid.uuid4().hex}"
    command = [ns if word == "NS" else word for word in command]
    files = [data_file] if command[0] == "chunk" else [data_file, data_file]
    code, text = run_main(*command, "--server", server.address, "--retries", "2",
                          "--json", *files)
    objects = [json.loads(line) for line in text.splitlines()]
    assert code == 0
    if command[0] == "dedup":
        assert [o.get("unique_bytes") for o in objects] == [len(DATA), 0, len(DATA)]
    else:
        assert sum(o["length"] for o in objects) == len(DATA)
    stdin = subprocess.run([str(SCRIPT), *command, "--server", server.address,
                            "--retries", "1", "-"],
                           input=DATA, capture_output=True, timeout=120)
    assert stdin.returncode == 2 and b"--retries" in stdin.stderr
    read, write = os.pipe()
    try:
        fifo = script(*command, "--server", server.address, "--retries", "1",
                      f"/dev/fd/{read}", pass_fds=(read,))
    finally:
        os.close(read)
        os.close(write)
    assert fifo.returncode == 2 and b"is not a regular file" in fifo.stderr
    assert run_main(*command, "--server", server.address, "--retries", "-1",
                    data_file)[0] == 2
    assert run_main(*command, "--server", server.address, "--retries", "101",
                    data_file)[0] == 2


@pytest.mark.parametrize("args, message", [
    (["chunk", "--min", "1", "-"], "--min 1 is out of range for fastcdc: 64..1048576"),
    (["chunk", "--algorithm", "buzhash", "--max", "47", "-"],
     "--max 47 is out of range for buzhash: 48..16777216"),
    (["dedup", "--namespace", "a/b", "-"], "--namespace 'a/b': 1..128 characters"),
    (["dedup", "--namespace", "ns", "--algorithm", "crc32", "--hints", "ff", "-"],
     "--hints ff needs --algorithm fastcdc, not crc32"),
])
def test_parameters_the_server_would_refuse_are_usage_errors(
        args: List[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    # No server listens there: the check comes before any call.
    assert main([args[0], "--server", f"127.0.0.1:{free_port()}", *args[1:]]) == 2
    assert message in capsys.readouterr().err
