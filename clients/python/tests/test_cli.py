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
    assert objects[-1]["file"] == "total" and objects[-1]["bytes"] == len(DATA)
    code, text = run_main("dedup", "--json", "--hints", "off", "--server", server.address,
                          "--namespace", ns, data_file)
    assert json.loads(text.splitlines()[0])["hints_tried"] == 0


def test_info(server: ChunkdServer) -> None:
    code, text = run_main("info", "--server", server.address)
    assert code == 0 and "fastcdc: min 64.." in text and "index backend: memory" in text
    code, text = run_main("info", "--json", "--server", server.address)
    info = json.loads(text)
    assert info["index_backend"] == "memory"
    assert {a["name"] for a in info["algorithms"]} == set(ALGORITHMS)
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
    bad = script("chunk", "--server", server.address, "--min", "4", data_file)
    assert bad.returncode == 1
    assert bad.stderr.decode().startswith("chunkd-client: INVALID_ARGUMENT: min_size")
    down = script("chunk", "--server", f"127.0.0.1:{free_port()}", "--timeout", "20",
                  data_file)
    assert down.returncode == 1 and b"chunkd-client: UNAVAILABLE: " in down.stderr
    missing = script("chunk", "--server", server.address, data_file.with_name("nope"))
    assert missing.returncode == 1 and b"nope: No such file or directory" in missing.stderr
    usage = script("chunk", "--server", server.address, "--algorithm", "bogus", data_file)
    assert usage.returncode == 2 and b"invalid choice: 'bogus'" in usage.stderr
    stdin_twice = script("dedup", "--server", server.address, "--namespace", "x", "-", "-")
    assert stdin_twice.returncode == 2 and b"read only once" in stdin_twice.stderr
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
