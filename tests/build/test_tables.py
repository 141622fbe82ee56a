"""chunkd's tables (proto/chunkd/v1/tables.json) and their generator,
tools/gen_tables.py: the committed Python and Go forms are the table's, the
table says what docs/cli.md promises, and a table that does not hold
together is refused with a message naming the entry."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
GENERATOR = REPO / "tools" / "gen_tables.py"
TABLE = REPO / "proto" / "chunkd" / "v1" / "tables.json"


def generate(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(GENERATOR), *args], capture_output=True,
                          text=True, timeout=120, stdin=subprocess.DEVNULL)


def test_committed_python_and_go_are_the_tables() -> None:
    result = generate("--check")
    assert result.returncode == 0, result.stderr


def test_python_module_is_what_the_client_uses() -> None:
    from chunkd_client import ALGORITHM_PARAMETERS, ALGORITHMS, DEFAULT_SERVICE_CONFIG
    from chunkd_client._proto.chunkd.v1 import chunkd_pb2 as pb

    table = json.loads(TABLE.read_text())
    assert DEFAULT_SERVICE_CONFIG == table["service_config"]
    for row in table["algorithms"]:
        # The table's numbers are the proto's.
        assert ALGORITHMS[row["name"]] == pb.Algorithm.Value(row["proto"]) == row["value"]
        assert set(ALGORITHM_PARAMETERS[row["name"]]) == set(row["parameters"])
    assert len(ALGORITHMS) == len(pb.Algorithm.keys()) - 1  # all but UNSPECIFIED


def test_service_config_is_what_docs_promise() -> None:
    config = json.loads(TABLE.read_text())["service_config"]
    assert config["loadBalancingConfig"] == [{"round_robin": {}}]
    method = config["methodConfig"][0]
    assert {n["method"] for n in method["name"]} == {"GetServerInfo", "FindMissing", "Release"}
    assert method["retryPolicy"] == {
        "maxAttempts": 5, "initialBackoff": "1s", "maxBackoff": "9s",
        "backoffMultiplier": 3, "retryableStatusCodes": ["UNAVAILABLE"]}


def test_cpp_header_has_every_algorithm(tmp_path: Path) -> None:
    out = tmp_path / "tables.h"
    result = generate("--cpp", str(out))
    assert result.returncode == 0, result.stderr
    header = out.read_text()
    for row in json.loads(TABLE.read_text())["algorithms"]:
        assert f"  k{row['id']} = {row['value']}," in header
    assert "kBuzhashMinSizeLowerBound = 48u;" in header


@pytest.mark.parametrize("change, message", [
    (lambda t: t["algorithms"][0]["parameters"]["min_size"].update(default="4 KB"),
     "expected a number such as 4096"),
    (lambda t: t["algorithms"][0]["parameters"].update(speed={"range": [0, 1], "default": 0}),
     "speed is not a parameter"),
    (lambda t: t["algorithms"][1]["parameters"]["min_size"].update(default=1),
     "default 1 outside [64, 1048576]"),
    (lambda t: t["algorithms"][1].update(value=1), "name or value given twice"),
    (lambda t: t["algorithms"][2].update(order=["avg_size"]),
     "order names avg_size, not a parameter of it"),
    (lambda t: t["presets"][0].update(algorithm="nope"), "unknown algorithm 'nope'"),
    (lambda t: t["presets"][1]["parameters"].update(seq_length=300),
     "seq_length 300 outside [1, 255]"),
])
def test_a_bad_table_is_refused_naming_the_entry(tmp_path: Path, change, message) -> None:
    table = json.loads(TABLE.read_text())
    change(table)
    bad = tmp_path / "tables.json"
    bad.write_text(json.dumps(table))
    result = generate("--table", str(bad), "--cpp", str(tmp_path / "out.h"))
    assert result.returncode == 1
    assert message in result.stderr, result.stderr
    assert not (tmp_path / "out.h").exists()
