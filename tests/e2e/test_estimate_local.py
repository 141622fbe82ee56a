"""`chunkctl estimate --local`: exact mode gives what `chunkctl chunk --local`
gives for the same parameter set (docs/cli.md, "chunkctl estimate"); and
`chunkctl estimate --server` gives what --local gives.

For every algorithm, two parameter sets (a preset among them where the
algorithm has one), the data set's files are cut one by one with `chunkctl
chunk --local`; the bytes, chunks, distinct fingerprints over all files, their
bytes and the size histogram counted from those listings must be what one
`chunkctl estimate --local --json` run with all the sets prints, on every
kernel set this CPU runs and on 1, 2 and 4 threads. Then sampling, the usage
errors and --plot; and against a real chunkd, the same JSON, a namespace
compared with, and the server's errors as chunkctl prints them.
"""

from __future__ import annotations

import json
import math
import subprocess
from pathlib import Path
from typing import Callable, Dict, Iterator, List, Tuple

import pytest

from chunkd_client.testing import ChunkdServer, serving

from e2e_util import random_bytes
from test_progress import run_on_terminal

Run = Callable[..., subprocess.CompletedProcess]

#: Two sets per algorithm, in the syntax of --set.
SETS = [
    "fastcdc:min=2048,avg=8192,max=32768,level=2",
    "fastcdc:avg=65536,preset=fastcdc-reapi,min=16384,max=262144",
    "crc32",
    "crc32:min=1024,avg=4096,max=16384",
    "seqcdc:preset=seqcdc-8k",
    "seqcdc:seq-mode=decreasing,min=4096,max=16384",
    "fixed:avg=8192",
    "fixed:avg=100000",
    "repmaxcdc:min=16384,horizon=65536",
    "repmaxcdc:min=8192,horizon=0",
    "rabin:min=16384,avg=65536,max=262144",
    "rabin:min=32768,avg=131072,max=524288,polynomial=0x3DA3358B4DC173",
    "buzhash",
    "buzhash:min=4096,avg=16384,max=65536",
]
KERNELS = ("scalar", "avx2", "avx512")
THREADS = (1, 2, 4)
#: Exit status of a usage error (docs/cli.md, "Exit status").
USAGE = 2


def chunk_flags(spec: str) -> List[str]:
    """The `chunkctl chunk` flags of a --set SPEC."""
    algorithm, _, rest = spec.partition(":")
    flags = ["--algorithm", algorithm]
    for item in filter(None, rest.split(",")):
        key, value = item.split("=", 1)
        flags += ["--" + key, value]
    return flags


@pytest.fixture(scope="module")
def data_set(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory of versioned files (about 3.5 MiB): a base, two edited
    versions of it, an unrelated file, a file that repeats one block, and an
    empty file (which adds no file to the data set)."""
    root = tmp_path_factory.mktemp("estimate-data")
    base = bytearray(random_bytes(31, 1 << 20))
    (root / "a-base").write_bytes(bytes(base))
    edited = bytearray(base)
    for at in range(5000, len(edited), 180_000):
        edited[at:at + 100] = random_bytes(at, 100)
    (root / "b-edited").write_bytes(bytes(edited))
    inserted = bytes(edited[:300_000]) + random_bytes(7, 12_345) + bytes(edited[300_000:])
    (root / "c-inserted").write_bytes(inserted)
    sub = root / "d-sub"
    sub.mkdir()
    (sub / "other").write_bytes(random_bytes(32, 300_000))
    (sub / "repeated").write_bytes(random_bytes(33, 40_000) * 6)
    (sub / "empty").write_bytes(b"")
    return root


def files_of(root: Path) -> List[Path]:
    """The data set's files in the order chunkctl reads a directory."""
    return sorted((p for p in root.rglob("*") if p.is_file()), key=str)


def nearest_rank(sizes: List[int], percent: int) -> int:
    return sizes[max(1, math.ceil(percent * len(sizes) / 100)) - 1]


def expected_set(chunkctl: Run, spec: str, files: List[Path]) -> Dict[str, object]:
    """What the estimate of `spec` must say, from `chunk --local` listings."""
    lengths: List[int] = []
    distinct: Dict[str, int] = {}
    for path in files:
        out = chunkctl("chunk", "--local", *chunk_flags(spec), "--fingerprint", "xxh128",
                       path).stdout
        for line in out.splitlines():
            _, length, fingerprint = line.split(",")
            lengths.append(int(length))
            distinct[fingerprint] = int(length)
    histogram: Dict[int, Tuple[int, int]] = {}
    for length in lengths:
        bound = 1 << (length.bit_length() - 1)
        chunks, total = histogram.get(bound, (0, 0))
        histogram[bound] = (chunks + 1, total + length)
    sizes = sorted(lengths)
    total, unique = sum(lengths), sum(distinct.values())
    return {
        "set": spec,
        "bytes": total,
        "chunks": len(lengths),
        "unique_bytes": unique,
        "unique_chunks": len(distinct),
        "dedup_ratio": round(total / unique, 6),
        "ratio_interval": None,
        "sampled": False,
        "sampled_unique_chunks": len(distinct),
        "histogram": [[b, histogram[b][0]] for b in sorted(histogram)],
        "histogram_bytes": [[b, histogram[b][1]] for b in sorted(histogram)],
        "mean_chunk_size": round(total / len(lengths), 6),
        "chunk_sizes": {"min": sizes[0], "p50": nearest_rank(sizes, 50),
                        "p90": nearest_rank(sizes, 90), "p99": nearest_rank(sizes, 99),
                        "max": sizes[-1]},
    }


@pytest.fixture(scope="module")
def expected(chunkctl_bin: Path, data_set: Path) -> List[Dict[str, object]]:
    def run(*args: object) -> subprocess.CompletedProcess:
        return subprocess.run([str(chunkctl_bin), *map(str, args)], check=True,
                              capture_output=True, text=True, timeout=120)

    return [expected_set(run, spec, files_of(data_set)) for spec in SETS]


def estimate_json(chunkctl: Run, *args: object) -> Dict[str, object]:
    out = chunkctl("estimate", "--local", "--json", *args).stdout
    assert out.endswith("\n") and out.count("\n") == 1, "one object on one line"
    return json.loads(out)


def set_flags(specs: List[str] = SETS) -> List[str]:
    return [word for spec in specs for word in ("--set", spec)]


def runnable(chunkctl: Run, kernel: str, tmp_path: Path) -> None:
    """Skips the test, saying why, when this CPU lacks `kernel`."""
    tiny = tmp_path / "tiny"
    tiny.write_bytes(b"x" * 100)
    probe = chunkctl("chunk", "--local", "--backend", kernel, "--fingerprint", "none", tiny,
                     check=False)
    if probe.returncode != 0:
        pytest.skip(f"kernel set {kernel} does not run here: {probe.stderr.strip()}")


@pytest.mark.parametrize("threads", THREADS)
@pytest.mark.parametrize("kernel", KERNELS)
def test_exact_estimate_equals_chunk_listings(chunkctl: Run, data_set: Path,
                                              expected: List[Dict[str, object]],
                                              kernel: str, threads: int,
                                              tmp_path: Path) -> None:
    runnable(chunkctl, kernel, tmp_path)
    got = estimate_json(chunkctl, "--backend", kernel, "--threads", threads, *set_flags(),
                        data_set)
    files = files_of(data_set)
    assert got["total_bytes"] == sum(p.stat().st_size for p in files)
    assert got["files"] == sum(1 for p in files if p.stat().st_size > 0)
    assert (got["sample_rate"], got["fingerprint"]) == (1, "xxh128")
    assert [s["set"] for s in got["sets"]] == SETS
    for want, have in zip(expected, got["sets"]):
        assert {k: have[k] for k in want} == want, want["set"]
        assert have["algorithm"] == want["set"].split(":")[0]
        assert (have["namespace_bytes"], have["namespace_chunks"]) == (None, None)
        assert [i["backend"] for i in have["index"]] == ["memory", "rocksdb", "redis"]
        assert all(i["entries"] == have["unique_chunks"] for i in have["index"])


def test_parameters_are_resolved(chunkctl: Run, data_set: Path) -> None:
    got = estimate_json(chunkctl, *set_flags([SETS[1], SETS[4], SETS[7]]), data_set)
    reapi, seqcdc, fixed = (s["parameters"] for s in got["sets"])
    assert reapi == {"min_size": 16384, "avg_size": 65536, "max_size": 262144,
                     "normalization_level": 2, "seed": 0}
    assert seqcdc == {"min_size": 4096, "max_size": 16384, "seq_mode": "increasing",
                      "seq_length": 5, "skip_trigger": 50, "skip_size": 256}
    assert fixed == {"avg_size": 100000}


def test_the_files_are_the_data_set_whatever_the_arguments(chunkctl: Run,
                                                          data_set: Path) -> None:
    """A directory is its files in sorted path order; "-" (stdin) is a file."""
    files = files_of(data_set)
    by_dir = estimate_json(chunkctl, "--set", SETS[0], data_set)
    out = chunkctl("estimate", "--local", "--json", "--set", SETS[0], *files[1:], "-",
                   stdin=files[0].read_bytes()).stdout
    assert json.loads(out) == by_dir
    # Each file is cut on its own: fixed-size chunks restart at every file,
    # so the same bytes as one file make fewer chunks.
    fixed = estimate_json(chunkctl, "--set", "fixed:avg=8192", data_set)["sets"][0]
    assert fixed["chunks"] == sum(-(-p.stat().st_size // 8192) for p in files)
    joined = b"".join(p.read_bytes() for p in files)
    out = chunkctl("estimate", "--local", "--json", "--set", "fixed:avg=8192", "-",
                   stdin=joined).stdout
    assert json.loads(out)["files"] == 1
    assert json.loads(out)["sets"][0]["chunks"] == -(-len(joined) // 8192)


def test_sampling_is_deterministic_and_gives_an_interval(chunkctl: Run, data_set: Path,
                                                         expected: List[Dict[str, object]]
                                                         ) -> None:
    specs = [SETS[0], SETS[3]]
    first = estimate_json(chunkctl, "--sample", 64, *set_flags(specs), data_set)
    again = estimate_json(chunkctl, "--sample", 64, "--threads", 2, *set_flags(specs),
                          data_set)
    assert first == again
    assert first["sample_rate"] == 64
    exact = {e["set"]: e for e in expected}
    for got in first["sets"]:
        want = exact[got["set"]]
        assert got["sampled"] is True
        for key in ("bytes", "chunks", "histogram", "histogram_bytes", "chunk_sizes",
                    "mean_chunk_size"):
            assert got[key] == want[key], (got["set"], key)
        # The distinct chunks come from the sketch of every fingerprint: on a
        # few hundred of them it is exact or off by one.
        assert abs(got["unique_chunks"] - want["unique_chunks"]) <= 1, got["set"]
        assert 2 <= got["sampled_unique_chunks"] < want["unique_chunks"]
        low, high = got["ratio_interval"]
        assert 1 <= low <= got["dedup_ratio"] <= high, got


def test_text_output(chunkctl: Run, data_set: Path) -> None:
    out = chunkctl("estimate", "--local", *set_flags(SETS[:2]), data_set).stdout
    lines = out.split("\n")
    assert lines[0].split() == ["set", "bytes", "chunks", "unique_chunks", "unique_bytes",
                                "dedup_ratio", "ratio_interval", "mean_size", "p50", "p90",
                                "p99"]
    assert [line.split()[0] for line in lines[1:3]] == SETS[:2]
    assert lines[3] == ""
    assert lines[4].split() == ["set", "index_entries", "memory_bytes", "rocksdb_disk_bytes",
                                "redis_memory_bytes"]
    files = files_of(data_set)
    total = sum(p.stat().st_size for p in files)
    assert lines[7:] == ["", f"{total} bytes in 5 files; sample 1 in 1; fingerprint xxh128",
                         ""]
    assert all(line == line.rstrip() for line in lines)


@pytest.mark.parametrize("args, problem", [
    ([], "missing --set SPEC"),
    (["--set", "nope"], '--set "nope": unknown algorithm "nope"'),
    (["--set", "fixed:min=4096"], "fixed does not take min"),
    (["--set", "fastcdc:size=1"], 'unknown key "size"'),
    (["--set", "fastcdc:min=1,min=2"], "key min given twice"),
    (["--set", "fastcdc:min=x"], 'min: expected an integer'),
    (["--set", "fastcdc:preset=seqcdc-16k"], "is a seqcdc preset, not fastcdc"),
    (["--set", "fastcdc"] * 17, "at most 16 sets"),
    (["--set", "fastcdc", "--sample", "0"], "--sample: expected an integer in 1..1048576"),
    (["--set", "fastcdc", "--fingerprint", "none"], "--fingerprint: expected xxh128 or sha256"),
    (["--set", "fastcdc", "--namespace", "ns"], "--namespace applies to a server"),
    (["--set", "fastcdc", "--threads", "0"], "--threads: expected an integer in 1..256"),
    # Ranges are the Estimator's: it names the set.
    (["--set", "fastcdc:min=65536,max=4096"], "fastcdc:min=65536,max=4096"),
])
def test_usage_errors_name_the_problem(chunkctl: Run, data_set: Path, args: List[str],
                                       problem: str) -> None:
    result = chunkctl("estimate", "--local", *args, data_set, check=False)
    assert result.returncode == USAGE, result.stderr
    assert problem in result.stderr
    assert result.stdout == ""


def test_missing_file_fails_naming_it(chunkctl: Run, tmp_path: Path) -> None:
    result = chunkctl("estimate", "--local", "--set", "fastcdc", tmp_path / "absent",
                      check=False)
    assert result.returncode == 1
    assert "absent" in result.stderr


def test_plot_writes_the_json(chunkctl: Run, data_set: Path, tmp_path: Path) -> None:
    plot = tmp_path / "sets.png"
    result = chunkctl("estimate", "--local", "--json", "--plot", plot, *set_flags(SETS[:3]),
                      data_set)
    written = tmp_path / "sets.json"
    assert written.read_text() == result.stdout
    assert not plot.exists()
    assert result.stderr == (f"wrote {written}; draw {plot} with: chunkd-client plot "
                             f"{written} {plot}\n")


@pytest.mark.parametrize("where", ["--local", "--server"])
def test_a_progress_line_per_file_on_a_terminal_only(chunkctl: Run, chunkctl_bin: Path,
                                                     server: ChunkdServer, data_set: Path,
                                                     where: str) -> None:
    args = [chunkctl_bin, "estimate", where, *([server.address] if where == "--server" else []),
            "--set", SETS[0], data_set]
    piped = chunkctl(*args[1:])
    assert piped.stderr == ""
    code, stdout, drawn = run_on_terminal(args)
    assert code == 0 and stdout.decode() == piped.stdout
    for path in files_of(data_set):
        if path.stat().st_size > 0:
            assert f"{path} [" in drawn and "100.0%" in drawn, drawn
    assert drawn.endswith("\n"), drawn
    always = chunkctl(*args[1:], "--progress", "always")
    assert "100.0%" in always.stderr and always.stdout == piped.stdout


# ---------------------------------------------------------------- --server


def test_the_server_gives_what_local_gives(chunkctl: Run, server: ChunkdServer,
                                           data_set: Path) -> None:
    files = files_of(data_set)
    for extra in ([], ["--sample", "64"]):
        local = estimate_json(chunkctl, *extra, *set_flags(), data_set)
        out = chunkctl("estimate", "--server", server.address, "--json",
                       "--message-size", 100_000, *extra, *set_flags(), *files[1:], "-",
                       stdin=files[0].read_bytes()).stdout
        assert json.loads(out) == local, extra
        text = chunkctl("estimate", "--server", server.address, *extra, *set_flags(),
                        data_set).stdout
        assert text == chunkctl("estimate", "--local", *extra, *set_flags(), data_set).stdout


def test_a_namespace_is_compared(chunkctl: Run, server: ChunkdServer, data_set: Path) -> None:
    """After a Dedup of the base file, its chunks are what the namespace holds
    of the data set's, for the same chunking and fingerprint."""
    base = files_of(data_set)[0]
    chunkctl("dedup", "--server", server.address, "--namespace", "estimate-ns", base)
    at = ("--server", server.address, "--set", "fastcdc")
    alone = estimate_json_remote(chunkctl, *at, "--fingerprint", "sha256", base)["sets"][0]
    got = estimate_json_remote(chunkctl, *at, "--namespace", "estimate-ns", data_set)
    assert got["fingerprint"] == "sha256"
    held = got["sets"][0]
    assert (held["namespace_bytes"], held["namespace_chunks"]) == (
        alone["unique_bytes"], alone["unique_chunks"])
    assert held["unique_bytes"] > held["namespace_bytes"]
    text = chunkctl("estimate", *at, "--namespace", "estimate-ns", data_set).stdout
    header, row = text.split("\n")[:2]
    assert header.split()[-1] == "namespace_bytes"
    assert row.split()[-1] == str(held["namespace_bytes"])
    # Read only: the namespace still holds the base file alone.
    again = estimate_json_remote(chunkctl, *at, "--namespace", "estimate-ns", data_set)
    assert again == got


def estimate_json_remote(chunkctl: Run, *args: object) -> Dict[str, object]:
    return json.loads(chunkctl("estimate", "--json", *args).stdout)


@pytest.fixture
def small_estimate_server(chunkd_bin: Path) -> Iterator[ChunkdServer]:
    """chunkd with room for 100 distinct chunks per estimate."""
    yield from serving(ChunkdServer(chunkd_bin, extra_args=["--estimate_max_entries=100"]))


def test_the_servers_errors_are_printed_with_their_reason(
        chunkctl: Run, small_estimate_server: ChunkdServer, data_set: Path) -> None:
    at = ("estimate", "--server", small_estimate_server.address)
    refused = chunkctl(*at, "--set", "fixed:avg=64", data_set, check=False)
    assert refused.returncode == 1, refused.stderr
    assert refused.stderr.startswith("chunkctl: RESOURCE_EXHAUSTED: ")
    assert refused.stderr.endswith(" [reason: STREAM_MEMORY]\n")
    assert refused.stdout == ""
    bad = chunkctl(*at, "--set", "fastcdc", "--set", "fastcdc:avg=7", data_set, check=False)
    assert bad.returncode == USAGE, bad.stderr
    assert bad.stderr.startswith("chunkctl: INVALID_ARGUMENT: ")
    assert "fastcdc:avg=7" in bad.stderr
