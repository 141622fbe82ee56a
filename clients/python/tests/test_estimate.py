"""Estimate in the Python client, without a real server: the set syntax and
its errors, the requests a data set makes (file marks), the text table and
the JSON object byte for byte from a constructed result, the picture, and
the protocol against FakeChunkd. The calls against a real chunkd are in
tests/e2e/test_estimate_clients.py."""

from __future__ import annotations

import asyncio
import dataclasses
import io
import json
import sys
import xml.etree.ElementTree as ElementTree
from pathlib import Path
from typing import Any, AsyncIterator, List

import grpc
import pytest

from chunkd_client import (
    ChunkdError, ChunkingParams, Client, EstimateProgress, EstimateResult, IndexCost,
    SetEstimate, SizeBucket, parse_set,
)
from chunkd_client._cli_output import estimate_json, estimate_text
from chunkd_client._plot import PlotError, draw
from chunkd_client._proto.chunkd.v1 import chunkd_pb2 as pb
from chunkd_client._requests import ESTIMATE, Requests
from chunkd_client._sets import estimate_params, estimate_sets
from chunkd_client._sources import dataset_pieces
from chunkd_client.aio import AsyncClient
from chunkd_client.cli import main

from conftest import RPC_TIMEOUT
from fake_chunkd import FakeChunkd

#: A port nothing listens on: the calls below fail before any is made.
NOWHERE = "127.0.0.1:1"


def _costs(entries: int, memory: int, rocksdb: int, redis: int) -> tuple:
    return (IndexCost("memory", entries, memory, "memory"),
            IndexCost("rocksdb", entries, rocksdb, "disk"),
            IndexCost("redis", entries, redis, "memory"))


FASTCDC = SetEstimate(
    "fastcdc:min=4096,avg=16384,max=65536",
    ChunkingParams("fastcdc", 4096, 16384, 65536, normalization_level=1, seed=0),
    bytes=10485760, chunks=640, unique_chunks=320, unique_bytes=5242880, dedup_ratio=2.0,
    histogram=(SizeBucket(4096, 100, 600000), SizeBucket(8192, 300, 4000000),
               SizeBucket(16384, 240, 5885760)),
    mean_chunk_size=16384.0, min_chunk_size=4096, p50_chunk_size=15000,
    p90_chunk_size=30000, p99_chunk_size=60000, max_chunk_size=65536, sampled=False,
    sampled_unique_chunks=320, ratio_low=0.0, ratio_high=0.0, namespace_bytes=None,
    namespace_chunks=None, index_costs=_costs(320, 32000, 19200, 48000))
FIXED = SetEstimate(
    "fixed:avg=8192", ChunkingParams("fixed", avg_size=8192),
    bytes=10485760, chunks=1280, unique_chunks=1216, unique_bytes=9961472,
    dedup_ratio=10485760 / 9961472, histogram=(SizeBucket(8192, 1280, 10485760),),
    mean_chunk_size=8192.0, min_chunk_size=8192, p50_chunk_size=8192, p90_chunk_size=8192,
    p99_chunk_size=8192, max_chunk_size=8192, sampled=False, sampled_unique_chunks=1216,
    ratio_low=0.0, ratio_high=0.0, namespace_bytes=None, namespace_chunks=None,
    index_costs=_costs(1216, 121600, 72960, 182400))
EXACT = EstimateResult((FASTCDC, FIXED), 10485760, 3, 1, "xxh128")
#: Sampled 1 in 64 with a namespace: an interval for the first set only
#: (the second's sample holds one distinct chunk), a mean of x.5.
SAMPLED = EstimateResult(
    (dataclasses.replace(FASTCDC, sampled=True, sampled_unique_chunks=5,
                         dedup_ratio=2.0000004, ratio_low=1.912345678,
                         ratio_high=2.087654321, mean_chunk_size=16384.5,
                         namespace_bytes=1048576, namespace_chunks=64),
     dataclasses.replace(FIXED, sampled=True, sampled_unique_chunks=1,
                         namespace_bytes=0, namespace_chunks=0)),
    10485760, 3, 64, "sha256")

EXACT_TEXT = """\
set                                      bytes  chunks  unique_chunks  unique_bytes  dedup_ratio  ratio_interval  mean_size    p50    p90    p99
fastcdc:min=4096,avg=16384,max=65536  10485760     640            320       5242880        2.000               -      16384  15000  30000  60000
fixed:avg=8192                        10485760    1280           1216       9961472        1.053               -       8192   8192   8192   8192

set                                   index_entries  memory_bytes  rocksdb_disk_bytes  redis_memory_bytes
fastcdc:min=4096,avg=16384,max=65536            320         32000               19200               48000
fixed:avg=8192                                 1216        121600               72960              182400

10485760 bytes in 3 files; sample 1 in 1; fingerprint xxh128
"""
SAMPLED_TEXT = """\
set                                      bytes  chunks  unique_chunks  unique_bytes  dedup_ratio  ratio_interval  mean_size    p50    p90    p99  namespace_bytes
fastcdc:min=4096,avg=16384,max=65536  10485760     640            320       5242880        2.000     1.912-2.088      16384  15000  30000  60000          1048576
fixed:avg=8192                        10485760    1280           1216       9961472        1.053               -       8192   8192   8192   8192                0

set                                   index_entries  memory_bytes  rocksdb_disk_bytes  redis_memory_bytes
fastcdc:min=4096,avg=16384,max=65536            320         32000               19200               48000
fixed:avg=8192                                 1216        121600               72960              182400

10485760 bytes in 3 files; sample 1 in 64; fingerprint sha256
"""
#: What estimate --json prints for EXACT, byte for byte (a newline ends it).
EXACT_JSON = (
    '{"sets": [{"set": "fastcdc:min=4096,avg=16384,max=65536", "algorithm": "fastcdc", '
    '"parameters": {"min_size": 4096, "avg_size": 16384, "max_size": 65536, '
    '"normalization_level": 1, "seed": 0}, "bytes": 10485760, "chunks": 640, '
    '"unique_bytes": 5242880, "unique_chunks": 320, "dedup_ratio": 2.0, '
    '"ratio_interval": null, "sampled": false, "sampled_unique_chunks": 320, '
    '"histogram": [[4096, 100], [8192, 300], [16384, 240]], "histogram_bytes": [[4096, '
    '600000], [8192, 4000000], [16384, 5885760]], "mean_chunk_size": 16384.0, '
    '"chunk_sizes": {"min": 4096, "p50": 15000, "p90": 30000, "p99": 60000, '
    '"max": 65536}, "namespace_bytes": null, "namespace_chunks": null, '
    '"index": [{"backend": "memory", "medium": "memory", "entries": 320, '
    '"bytes": 32000}, {"backend": "rocksdb", "medium": "disk", "entries": 320, '
    '"bytes": 19200}, {"backend": "redis", "medium": "memory", "entries": 320, '
    '"bytes": 48000}]}, {"set": "fixed:avg=8192", "algorithm": "fixed", '
    '"parameters": {"avg_size": 8192}, "bytes": 10485760, "chunks": 1280, '
    '"unique_bytes": 9961472, "unique_chunks": 1216, "dedup_ratio": 1.052632, '
    '"ratio_interval": null, "sampled": false, "sampled_unique_chunks": 1216, '
    '"histogram": [[8192, 1280]], "histogram_bytes": [[8192, 10485760]], '
    '"mean_chunk_size": 8192.0, "chunk_sizes": {"min": 8192, "p50": 8192, "p90": 8192, '
    '"p99": 8192, "max": 8192}, "namespace_bytes": null, "namespace_chunks": null, '
    '"index": [{"backend": "memory", "medium": "memory", "entries": 1216, '
    '"bytes": 121600}, {"backend": "rocksdb", "medium": "disk", "entries": 1216, '
    '"bytes": 72960}, {"backend": "redis", "medium": "memory", "entries": 1216, '
    '"bytes": 182400}]}], "total_bytes": 10485760, "files": 3, "sample_rate": 1, '
    '"fingerprint": "xxh128"}')


def run_main(*args: object) -> "tuple[int, str]":
    out = io.StringIO()
    code = main([str(a) for a in args], out=out)
    return code, out.getvalue()


# The set syntax.

@pytest.mark.parametrize("spec, params", [
    ("fastcdc", ChunkingParams("fastcdc")),
    ("fastcdc:min=4096,avg=16384,max=65536",
     ChunkingParams("fastcdc", min_size=4096, avg_size=16384, max_size=65536)),
    ("fastcdc:level=3,seed=0x10", ChunkingParams("fastcdc", normalization_level=3, seed=16)),
    ("fixed:avg=8192", ChunkingParams("fixed", avg_size=8192)),
    # Decimal with a leading zero, as chunkctl reads it (not octal).
    ("fixed:avg=010", ChunkingParams("fixed", avg_size=10)),
    ("repmaxcdc:min=262144,horizon=2097152",
     ChunkingParams("repmaxcdc", min_size=262144, horizon_size=2097152)),
    ("rabin:polynomial=0x3DA3358B4DC173",
     ChunkingParams("rabin", polynomial=0x3DA3358B4DC173)),
    ("seqcdc:seq-mode=decreasing,seq-length=4,skip-trigger=40,skip-size=256",
     ChunkingParams("seqcdc", seq_mode="decreasing", seq_length=4, skip_trigger=40,
                    skip_size=256)),
    # A preset, and explicit keys over it before or after it.
    ("seqcdc:preset=seqcdc-16k",
     ChunkingParams("seqcdc", min_size=8192, max_size=32768, seq_mode=1, seq_length=5,
                    skip_trigger=50, skip_size=512)),
    ("seqcdc:skip-size=256,preset=seqcdc-16k",
     ChunkingParams("seqcdc", min_size=8192, max_size=32768, seq_mode=1, seq_length=5,
                    skip_trigger=50, skip_size=256)),
    ("fastcdc:preset=fastcdc-reapi,avg=262144",
     ChunkingParams("fastcdc", min_size=131072, avg_size=262144, max_size=2097152,
                    normalization_level=2, seed=0)),
    # Ranges are the server's.
    ("fastcdc:min=1", ChunkingParams("fastcdc", min_size=1)),
])
def test_parse_set(spec: str, params: ChunkingParams) -> None:
    assert parse_set(spec) == (spec, params)


@pytest.mark.parametrize("spec, problem", [
    ("fastcdc2", "unknown algorithm 'fastcdc2' (expected one of fastcdc, crc32, seqcdc, "
     "fixed, repmaxcdc, rabin, buzhash)"),
    ("", "unknown algorithm ''"),
    ("FastCDC:min=4096", "unknown algorithm 'FastCDC'"),
    ("fastcdc:minimum=4096", "unknown key 'minimum' (expected one of min, avg, max, level, "
     "seed, preset)"),
    ("fastcdc:min_size=4096", "unknown key 'min_size'"),
    ("fastcdc:horizon=4096", "fastcdc takes no horizon (it takes min, avg, max, level, "
     "seed, preset)"),
    ("fixed:min=4096", "fixed takes no min (it takes avg, preset)"),
    ("fastcdc:min=4096,min=8192", "min given twice"),
    ("seqcdc:preset=seqcdc-8k,preset=seqcdc-16k", "preset given twice"),
    ("fastcdc:min=4k", "bad value '4k' for min (expected an integer in 0..4294967295"),
    ("fastcdc:min=-1", "bad value '-1' for min"),
    ("fastcdc:min=", "bad value '' for min"),
    ("fastcdc:min=4294967296", "bad value '4294967296' for min"),
    ("fastcdc:seed=18446744073709551616", "bad value '18446744073709551616' for seed "
     "(expected an integer in 0..18446744073709551615"),
    ("fastcdc:min=\u0664\u0660\u0669\u0666", "bad value"),
    # The integers exactly as chunkctl's flags take them: no 0b, 0o, _, sign
    # or spaces.
    ("fastcdc:min=0b101", "bad value '0b101' for min"),
    ("fastcdc:min=0o17", "bad value '0o17' for min"),
    ("fastcdc:min=1_000", "bad value '1_000' for min"),
    ("fastcdc:min=+5", "bad value '+5' for min"),
    ("fastcdc:min= 5", "bad value ' 5' for min"),
    ("seqcdc:seq-mode=up", "bad value 'up' for seq-mode (expected increasing or "
     "decreasing)"),
    ("fastcdc:preset=seqcdc-16k", "preset 'seqcdc-16k' is a seqcdc preset, not fastcdc"),
    ("fastcdc:preset=fastcdc-4k", "unknown preset 'fastcdc-4k' (expected one of "
     "fastcdc-reapi, seqcdc-8k, seqcdc-16k)"),
    ("fastcdc:", "expected KEY=VALUE, got ''"),
    ("fastcdc:min", "expected KEY=VALUE, got 'min'"),
    ("fastcdc:min=4096,,max=65536", "expected KEY=VALUE, got ''"),
    ("fastcdc:=4096", "expected KEY=VALUE, got '=4096'"),
])
def test_parse_set_errors_name_the_set_and_the_problem(spec: str, problem: str) -> None:
    with pytest.raises(ValueError) as raised:
        parse_set(spec)
    message = str(raised.value)
    assert message.startswith(f"set {spec!r}: "), message
    assert problem in message, message


def test_the_number_of_sets() -> None:
    sets = [f"fixed:avg={4096 + i}" for i in range(17)]
    assert [s.label for s in estimate_sets(sets[:16])] == sets[:16]
    with pytest.raises(ValueError, match=r"1 to 16 parameter sets, got 17"):
        estimate_sets(sets)
    with pytest.raises(ValueError, match=r"1 to 16 parameter sets, got 0"):
        estimate_sets([])
    with pytest.raises(TypeError, match="sequence of set strings"):
        estimate_sets("fastcdc")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="a set is a set string or a"):
        estimate_sets([("label", {"algorithm": "fastcdc"})])  # type: ignore[list-item]


def test_sets_by_syntax_or_by_label_and_params() -> None:
    params = estimate_params(
        ["crc32:avg=8192", ("mine", ChunkingParams("fixed", avg_size=4096))],
        sample_rate=8, namespace="ns", fingerprint="sha256")
    assert [s.label for s in params.sets] == ["crc32:avg=8192", "mine"]
    assert params.sets[0].chunking == pb.ChunkingParams(
        algorithm=pb.ALGORITHM_CRC32, avg_size=8192)
    assert params.sets[1].chunking == pb.ChunkingParams(
        algorithm=pb.ALGORITHM_FIXED, avg_size=4096)
    assert (params.sample_rate, params.namespace) == (8, "ns")
    assert params.fingerprint == pb.FINGERPRINT_ALGORITHM_SHA256
    # Unset: the server picks (xxh128, or sha256 with a namespace).
    unset = estimate_params(["fastcdc"], 1, None, None)
    assert unset.fingerprint == pb.FINGERPRINT_ALGORITHM_UNSPECIFIED
    assert (unset.sample_rate, unset.namespace) == (1, "")


@pytest.mark.parametrize("rate", [0, -1, 1048577])
def test_sample_rate_out_of_range(rate: int) -> None:
    with pytest.raises(ValueError, match=r"sample_rate must be in 1\.\.1048576"):
        estimate_params(["fastcdc"], rate, None, None)


def test_client_refuses_bad_arguments_before_any_call(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.write_bytes(b"x")
    with Client(NOWHERE, timeout=5) as client:
        with pytest.raises(ValueError, match="set 'fastcdc:min=x': bad value"):
            client.estimate(data, sets=["fastcdc:min=x"])
        with pytest.raises(ValueError, match="sample_rate"):
            client.estimate(data, sets=["fastcdc"], sample_rate=0)
        with pytest.raises(ValueError, match="unknown fingerprint 'md5'"):
            client.estimate(data, sets=["fastcdc"], fingerprint="md5")
        with pytest.raises(ValueError, match="no source"):
            client.estimate(sets=["fastcdc"])
        with pytest.raises(TypeError, match="on_progress must be callable"):
            client.estimate(data, sets=["fastcdc"], on_progress=3)  # type: ignore[arg-type]
        with pytest.raises(TypeError, match="source must be a path"):
            client.estimate(3, sets=["fastcdc"])  # type: ignore[arg-type]


# The requests of a data set.

def _requests(*sources: Any, message_size: int = 4) -> List[Any]:
    params = estimate_params(["fastcdc"], 1, None, None)
    requests = Requests(ESTIMATE.request, params)
    messages = list(requests.over(dataset_pieces(sources, message_size)()))
    assert requests.complete
    return messages


def test_every_file_ends_with_a_mark(tmp_path: Path) -> None:
    a = tmp_path / "a"
    a.write_bytes(b"0123456789")
    empty = tmp_path / "empty"
    empty.write_bytes(b"")
    messages = _requests(a, b"xyz", empty, [b"pq", b"r"])
    assert messages[0].HasField("params")
    assert not any(m.HasField("params") for m in messages[1:])
    assert [(m.data, m.end_of_file) for m in messages] == [
        (b"0123", False), (b"4567", False), (b"89", False), (b"", True),
        (b"xyz", False), (b"", True),
        (b"", True),  # the empty file
        (b"pq", False), (b"r", False), (b"", True),
    ]


def test_a_directory_is_its_files_in_sorted_path_order(tmp_path: Path) -> None:
    for name, data in [("b/2", b"B2"), ("a-c", b"AC"), ("a/b", b"AB"), ("a/a/z", b"AAZ")]:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_bytes(data)
    messages = _requests(tmp_path, b"last")
    assert [m.data for m in messages if not m.end_of_file] == [
        b"AC", b"AAZ", b"AB", b"B2", b"last"]
    assert sum(m.end_of_file for m in messages) == 5


def test_an_empty_data_set_sends_the_params_only(tmp_path: Path) -> None:
    messages = _requests(tmp_path)  # an empty directory
    assert len(messages) == 1 and messages[0].HasField("params")
    assert messages[0].data == b"" and not messages[0].end_of_file


# What the command line prints.

def test_text_table_byte_for_byte() -> None:
    assert estimate_text(EXACT) == EXACT_TEXT
    assert estimate_text(SAMPLED) == SAMPLED_TEXT


def test_json_byte_for_byte() -> None:
    assert estimate_json(EXACT) == EXACT_JSON + "\n"
    sampled = SAMPLED.to_json()
    assert sampled["sets"][0]["ratio_interval"] == [1.912346, 2.087654]
    assert sampled["sets"][0]["dedup_ratio"] == 2.0
    assert sampled["sets"][0]["mean_chunk_size"] == 16384.5
    assert sampled["sets"][0]["namespace_bytes"] == 1048576
    assert sampled["sets"][1]["ratio_interval"] is None
    assert (sampled["sample_rate"], sampled["fingerprint"]) == (64, "sha256")
    assert list(sampled) == ["sets", "total_bytes", "files", "sample_rate", "fingerprint"]


def test_json_follows_the_schema() -> None:
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads((Path(__file__).resolve().parents[3] / "docs"
                         / "cli-output.schema.json").read_text(encoding="utf-8"))
    for result in (EXACT, SAMPLED):
        jsonschema.validate(
            json.loads(estimate_json(result)),
            {"$schema": schema["$schema"], "$defs": schema["$defs"],
             "$ref": "#/$defs/estimate"},
            cls=jsonschema.Draft202012Validator)


def test_seq_mode_by_name_in_the_json() -> None:
    seqcdc = dataclasses.replace(
        FIXED, label="seqcdc", chunking=ChunkingParams(
            "seqcdc", min_size=8192, max_size=32768, seq_mode="increasing", seq_length=5,
            skip_trigger=50, skip_size=512))
    assert seqcdc.to_json()["parameters"] == {
        "min_size": 8192, "max_size": 32768, "seq_mode": "increasing", "seq_length": 5,
        "skip_trigger": 50, "skip_size": 512}


@pytest.mark.parametrize("args, problem", [
    ([], "give at least one --set"),
    ([f"--set=fixed:avg={4096 + i}" for i in range(17)], "at most 16 --set, got 17"),
    (["--set", "fastcdc:avg=1,avg=2"], "--set: set 'fastcdc:avg=1,avg=2': avg given twice"),
    (["--set", "fastcdc", "--sample", "0"], "expected an integer in 1..1048576"),
    (["--set", "fastcdc", "--fingerprint", "none"], "invalid choice: 'none'"),
    (["--set", "fastcdc", "--namespace", "a b"], "--namespace 'a b'"),
    (["--set", "fastcdc", "--plot", "out.pdf"], "not '.pdf'"),
])
def test_estimate_usage_errors(args: List[str], problem: str,
                               capsys: pytest.CaptureFixture[str]) -> None:
    code, out = run_main("estimate", "--server", NOWHERE, *args, "file")
    assert (code, out) == (2, "")
    err = capsys.readouterr().err
    assert err.startswith("chunkd-client: ") and problem in err, err
    assert err.endswith("(see chunkd-client estimate --help)\n"), err


def test_stdin_only_once(capsys: pytest.CaptureFixture[str]) -> None:
    assert run_main("estimate", "--server", NOWHERE, "--set", "fastcdc", "-", "-")[0] == 2
    assert 'stdin ("-") can be read only once' in capsys.readouterr().err


# The picture.

def test_plot_png_and_svg(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    for result in (EXACT, SAMPLED):
        png, svg = tmp_path / "e.png", tmp_path / "e.svg"
        draw(result.to_json(), str(png))
        draw(result.to_json(), str(svg))
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        root = ElementTree.fromstring(svg.read_bytes())
        assert root.tag == "{http://www.w3.org/2000/svg}svg"
        # The labels are text in the SVG: every set's, and the title.
        text = svg.read_text()
        assert "avg=16384" in text and "fixed:avg=8192" in text
        assert "Estimate of 10.0 MiB in 3 files" in text


def test_plot_odd_estimates(tmp_path: Path) -> None:
    """An empty data set (no chunks, ratio 0) and a ratio outside its
    interval are drawn too, not refused by matplotlib."""
    pytest.importorskip("matplotlib")
    empty = dataclasses.replace(
        FIXED, bytes=0, chunks=0, unique_chunks=0, unique_bytes=0, dedup_ratio=0.0,
        histogram=(), mean_chunk_size=0.0, min_chunk_size=0, p50_chunk_size=0,
        p90_chunk_size=0, p99_chunk_size=0, max_chunk_size=0)
    outside = dataclasses.replace(FASTCDC, sampled=True, dedup_ratio=0.5, ratio_low=1.0,
                                  ratio_high=1.5)
    for sets in ((empty,), (outside, empty)):
        picture = tmp_path / f"odd{len(sets)}.png"
        draw(EstimateResult(sets, 0, 0, 64, "xxh128").to_json(), str(picture))
        assert picture.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_plot_command_draws_saved_json(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    saved = tmp_path / "saved.json"
    saved.write_text(estimate_json(SAMPLED))
    code, out = run_main("plot", saved, tmp_path / "out.PNG")
    assert (code, out) == (0, "")
    assert (tmp_path / "out.PNG").read_bytes()[:4] == b"\x89PNG"


def test_plot_command_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("matplotlib")
    saved = tmp_path / "saved.json"
    for content, problem in [
        ("not json", "saved.json: not JSON"),
        ("[1, 2]", "saved.json: not the JSON object of estimate --json"),
        ('{"sets": []}', "no 'total_bytes'"),
        ('{"sets": [{"set": "x"}], "total_bytes": 0, "files": 0, "sample_rate": 1}',
         "set 1 has no 'algorithm'"),
    ]:
        saved.write_text(content)
        assert run_main("plot", saved, tmp_path / "out.svg") == (1, "")
        assert problem in capsys.readouterr().err
    assert run_main("plot", tmp_path / "absent.json", tmp_path / "out.svg")[0] == 1
    assert "absent.json: No such file or directory" in capsys.readouterr().err
    assert run_main("plot", saved, tmp_path / "out.jpg")[0] == 2
    assert not (tmp_path / "out.svg").exists()


def test_without_matplotlib_the_error_names_the_extra(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    # None in sys.modules makes `import matplotlib` raise ImportError.
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    with pytest.raises(PlotError, match=r"pip install 'chunkd-client\[plot\]'"):
        draw(EXACT.to_json(), str(tmp_path / "e.png"))
    saved = tmp_path / "saved.json"
    saved.write_text(json.dumps(EXACT.to_json()))
    assert run_main("plot", saved, tmp_path / "e.png") == (1, "")
    assert ("chunkd-client: saved.json: drawing needs matplotlib: pip install "
            "'chunkd-client[plot]'") in capsys.readouterr().err.replace(str(tmp_path) + "/", "")
    # estimate refuses before any call (NOWHERE would fail otherwise).
    assert run_main("estimate", "--server", NOWHERE, "--set", "fastcdc", "--plot",
                    tmp_path / "e.png", saved)[0] == 1
    assert "pip install 'chunkd-client[plot]'" in capsys.readouterr().err
    assert not (tmp_path / "e.png").exists()


# The protocol, against FakeChunkd (a result that does not count the bytes,
# a progress callback that fails: what a real chunkd never provokes).

def test_progress_then_result(tmp_path: Path) -> None:
    a = tmp_path / "a"
    a.write_bytes(b"a" * 1000)
    seen: List[EstimateProgress] = []
    with FakeChunkd("exact") as fake, Client(fake.address, timeout=RPC_TIMEOUT) as client:
        result = client.estimate(a, b"b" * 500, sets=["fastcdc", ("x", ChunkingParams())],
                                 on_progress=seen.append, message_size=100)
    assert seen == [EstimateProgress(1000, 1), EstimateProgress(1500, 2)]
    assert [s.label for s in result.sets] == ["fastcdc", "x"]
    assert (result.total_bytes, result.files, result.fingerprint) == (1500, 2, "xxh128")


def test_async_progress_then_result() -> None:
    async def run(address: str) -> "tuple[EstimateResult, List[EstimateProgress]]":
        async def pieces() -> AsyncIterator[bytes]:
            yield b"c" * 300
            yield b"d" * 200

        seen: List[EstimateProgress] = []
        async with AsyncClient(address, timeout=RPC_TIMEOUT) as client:
            result = await client.estimate(b"a" * 100, pieces(), sets=["crc32"],
                                           on_progress=seen.append)
        return result, seen

    with FakeChunkd("exact") as fake:
        result, seen = asyncio.run(run(fake.address))
    assert seen == [EstimateProgress(100, 1), EstimateProgress(600, 2)]
    assert (result.total_bytes, result.files, result.sets[0].label) == (600, 2, "crc32")


@pytest.mark.parametrize("summary, message", [
    ("short", "server summary reports total_bytes=750 but 1500 bytes were sent"),
    ("long", "server summary reports total_bytes=1501 but 1500 bytes were sent"),
    ("none", "the stream ended without a summary; 1500 bytes were sent"),
])
def test_a_result_that_does_not_count_every_byte_is_data_loss(summary: str,
                                                               message: str) -> None:
    with FakeChunkd(summary) as fake, Client(fake.address, timeout=RPC_TIMEOUT) as client:
        with pytest.raises(ChunkdError) as raised:
            client.estimate(b"a" * 1000, b"b" * 500, sets=["fastcdc"])
    assert raised.value.code() == grpc.StatusCode.DATA_LOSS
    assert raised.value.details() == message


def test_an_error_of_the_server_keeps_its_code() -> None:
    abort = (grpc.StatusCode.INVALID_ARGUMENT, "sets[0] (\"fastcdc\"): min_size 1 is out of range")
    with FakeChunkd(abort=abort) as fake, Client(fake.address, timeout=RPC_TIMEOUT) as client:
        with pytest.raises(ChunkdError) as raised:
            client.estimate(b"abc", sets=["fastcdc:min=1"])
    assert (raised.value.code(), raised.value.details()) == abort


def test_an_exception_of_on_progress_ends_the_call() -> None:
    def fail(progress: EstimateProgress) -> None:
        raise RuntimeError(f"stop at {progress.bytes}")

    with FakeChunkd("exact") as fake, Client(fake.address, timeout=RPC_TIMEOUT) as client:
        with pytest.raises(RuntimeError, match="stop at 3"):
            client.estimate(b"abc", b"def", sets=["fastcdc"], on_progress=fail)
        # The client goes on working.
        assert client.estimate(b"abc", sets=["fastcdc"]).total_bytes == 3


def test_a_source_that_cannot_be_read_fails_with_its_own_error(tmp_path: Path) -> None:
    with FakeChunkd("exact") as fake, Client(fake.address, timeout=RPC_TIMEOUT) as client:
        with pytest.raises(FileNotFoundError):
            client.estimate(b"abc", tmp_path / "absent", sets=["fastcdc"])
