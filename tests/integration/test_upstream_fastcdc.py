"""chunkd's fastcdc against the Rust crate `fastcdc` 5.0.0 (v2020), whose
cut points it reproduces, boundary for boundary.

The oracle is `upstream-fastcdc` (tests/upstream-rust, the crate pinned by
Cargo.toml and Cargo.lock; `make test-python` builds it with cargo and passes
$UPSTREAM_FASTCDC_BIN, default <repo>/build/tools/cargo/release/
upstream-fastcdc). Without cargo, and so without the binary, the tests skip
and say so; a binary named by $UPSTREAM_FASTCDC_BIN must exist.

For every parameter set below (chunkd's defaults, every normalization level,
the smallest sizes the crate takes, an average that is not a power of two,
a seeded Gear table, REAPI's sizes, min = avg = max; every size even, as
5.0.0 requires), every dataset of tests/integration/test_upstream_chunkers.py
(seeded random bytes, zeros, low-entropy text, edited versions) and every
size at an edge of the parameters (0, 1, min, avg, max and 2 max, each
-1/0/+1, plus a few times max), EVERY boundary of `chunkctl chunk --local
--fingerprint none` must equal the crate's; the backend and the thread count
(1, 3) rotate through the runs. Then `make bench-crate`'s script
(server/bench/crate_bench.py) runs at a small size, and must fail when the
two sides differ.
"""

from __future__ import annotations

import concurrent.futures
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path
from typing import Dict, Iterator, List, NamedTuple, Optional, Tuple

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_upstream_chunkers import (  # noqa: E402
    BACKENDS, DATASETS, REPORTED, THREADS, WORKERS, Boundaries, first_difference, parse, run)

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "e2e"))
from e2e_util import REPO, SUBPROCESS_TIMEOUT  # noqa: E402

KiB = 1 << 10
MiB = 1 << 20
DEFAULT_BIN = REPO / "build" / "tools" / "cargo" / "release" / "upstream-fastcdc"
#: chunkd's fastcdc defaults, which upstream-fastcdc shares.
DEFAULTS = {"min": 4 * KiB, "avg": 16 * KiB, "max": 64 * KiB, "level": 1, "seed": 0}


class ParamSet(NamedTuple):
    #: Flags given explicitly, as (name, value) pairs; none: both defaults.
    pairs: Tuple[Tuple[str, int], ...] = ()

    @property
    def flags(self) -> Dict[str, int]:
        return dict(self.pairs)

    @property
    def effective(self) -> Dict[str, int]:
        return {**DEFAULTS, **self.flags}

    @property
    def id(self) -> str:
        return "-".join(f"{k}{v}" for k, v in self.pairs) or "defaults"

    def args(self, dash: str) -> List[str]:
        return [word for k, v in self.pairs for word in (dash + k, str(v))]

    def sizes(self) -> List[int]:
        p = self.effective
        sizes = {0, 1, 3 * p["max"] + 12345}
        for edge in (p["min"], p["avg"], p["max"], 2 * p["max"]):
            sizes |= {edge - 1, edge, edge + 1}
        return sorted(sizes)


def P(**flags: int) -> ParamSet:
    return ParamSet(tuple(flags.items()))


PARAM_SETS = [
    P(),
    P(level=0),
    P(level=2),  # chunkctl bench's, the speed target's
    P(level=3),
    P(min=64, avg=256, max=1024),  # the crate's smallest
    P(min=1000, avg=3000, max=10000, level=2),  # round(log2(3000)) = 12
    P(min=4096, avg=16384, max=65536, level=2, seed=666),
    P(min=128 * KiB, avg=512 * KiB, max=2 * MiB, level=2),  # REAPI
    P(min=4096, avg=4096, max=4096),
]
LARGEST = max(max(p.sizes()) for p in PARAM_SETS)


class Case(NamedTuple):
    params: ParamSet
    dataset: str
    size: int


def describe(case: Case, how: str = "") -> str:
    params = ", ".join(f"{k} {v}" for k, v in case.params.effective.items())
    return f"fastcdc ({params}) dataset {case.dataset} size {case.size}{how}"


def cargo_available() -> bool:
    """As the Makefile looks for it: on PATH or in ~/.cargo/bin."""
    home = Path.home() / ".cargo" / "bin" / "cargo"
    return shutil.which("cargo") is not None or os.access(home, os.X_OK)


@pytest.fixture(scope="session")
def crate_bin() -> Path:
    given = os.environ.get("UPSTREAM_FASTCDC_BIN")
    path = Path(given) if given else DEFAULT_BIN
    if path.is_file() and os.access(path, os.X_OK):
        return path
    if not given and not cargo_available():
        pytest.skip("no cargo to build upstream-fastcdc (tests/upstream-rust): "
                    "chunkd's fastcdc is not compared with the Rust crate")
    pytest.fail(f"{path} is not an executable: build it (make test-python builds it "
                f"with cargo) or point $UPSTREAM_FASTCDC_BIN at it", pytrace=False)


@pytest.fixture(scope="session")
def chunkctl_bin() -> Path:
    path = Path(os.environ.get("CHUNKCTL_BIN") or REPO / "build" / "clients" / "cli" / "chunkctl")
    if not (path.is_file() and os.access(path, os.X_OK)):
        pytest.fail(f"{path} is not an executable: build it or point $CHUNKCTL_BIN at it",
                    pytrace=False)
    return path


class Files:
    """Each dataset's first `size` bytes as a file, written when first asked
    for; only the tests' own thread asks (never the pool's workers)."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.data = {name: make(LARGEST) for name, make in DATASETS.items()}

    def path(self, dataset: str, size: int) -> Path:
        path = self.directory / f"{dataset}-{size}"
        if not path.exists():
            path.write_bytes(self.data[dataset][:size])
        return path


@pytest.fixture(scope="session")
def files(tmp_path_factory: pytest.TempPathFactory) -> Files:
    return Files(tmp_path_factory.mktemp("upstream_fastcdc"))


@pytest.fixture(scope="session")
def pool() -> Iterator[concurrent.futures.ThreadPoolExecutor]:
    with concurrent.futures.ThreadPoolExecutor(max_workers=WORKERS) as executor:
        yield executor


@pytest.fixture(scope="session")
def backends(chunkctl_bin: Path, files: Files) -> List[str]:
    """The backends this CPU runs: chunkctl refuses the others by name."""
    supported = []
    for backend in BACKENDS:
        out, why = run([chunkctl_bin, "chunk", "--local", "--backend", backend,
                        files.path("zeros", 0)])
        if out is not None:
            supported.append(backend)
        else:
            assert "support" in why, f"--backend {backend}: {why}"
    assert "scalar" in supported
    return supported


def crate_boundaries(crate_bin: Path, case: Case, path: Path) -> Boundaries:
    out, why = run([crate_bin, *case.params.args("-"), path])
    assert out is not None, f"upstream-fastcdc failed on {describe(case)}: {why}"
    return parse(out, f"upstream-fastcdc on {describe(case)}", case.size)


@pytest.mark.parametrize("params", PARAM_SETS, ids=lambda p: p.id)
def test_local_equals_the_crate(params: ParamSet, pool, files: Files, crate_bin: Path,
                                chunkctl_bin: Path, backends: List[str]) -> None:
    cases = [Case(params, d, s) for d in DATASETS for s in params.sizes()]
    paths = [files.path(c.dataset, c.size) for c in cases]
    want = list(pool.map(lambda cp: crate_boundaries(crate_bin, *cp), zip(cases, paths)))

    def check(i: int) -> Optional[str]:
        backend = backends[i % len(backends)]
        threads = THREADS[i // len(backends) % len(THREADS)]
        label = describe(cases[i], f", --local backend {backend} threads {threads}")
        out, why = run([chunkctl_bin, "chunk", "--local", "--fingerprint", "none",
                        "--backend", backend, "--threads", threads, "--algorithm", "fastcdc",
                        *params.args("--"), paths[i]])
        if out is None:
            return f"{label}: chunkctl failed: {why}"
        try:
            got = parse(out, "chunkctl", cases[i].size)
        except AssertionError as e:
            return f"{label}: {e}"
        difference = first_difference(want[i], got)
        return None if difference is None else f"{label}: {difference}"

    failures = [f for f in pool.map(check, range(len(cases))) if f is not None]
    assert not failures, (
        f"{len(failures)} of {len(cases)} runs differ from the crate; the first:\n"
        + "\n".join(failures[:REPORTED]))
    # Not vacuous: the largest random file is several chunks for the crate.
    largest = max(params.sizes())
    assert len(want[cases.index(Case(params, "random", largest))]) >= 3


def test_the_crate_tells_parameters_apart(files: Files, crate_bin: Path) -> None:
    """upstream-fastcdc really takes the level and the seed (else the
    comparisons above would prove little), and refuses odd sizes."""
    path = files.path("random", 1 * MiB)
    cuts = {}
    for flags in ((), ("-level", "2"), ("-seed", "666"), ("-avg", "8192")):
        out, why = run([crate_bin, *flags, path])
        assert out is not None, why
        cuts[flags] = out
    assert len(set(cuts.values())) == len(cuts)
    result = subprocess.run([str(crate_bin), "-max", "65535", str(path)], capture_output=True,
                            text=True, timeout=SUBPROCESS_TIMEOUT, stdin=subprocess.DEVNULL)
    assert result.returncode == 2 and "even" in result.stderr, result.stderr


def crate_bench(tmp_path: Path, crate: Path, chunkctl: Path,
                markdown: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(REPO / "server" / "bench" / "crate_bench.py"),
         "--upstream-fastcdc", str(crate), "--chunkctl", str(chunkctl),
         "--dir", str(tmp_path), "--size", str(5 * MiB), "--repeat", "1",
         "--seconds", "0.01", "--threads", "1,2", "--markdown", str(markdown)],
        capture_output=True, text=True, timeout=SUBPROCESS_TIMEOUT, stdin=subprocess.DEVNULL)


def test_crate_bench_runs_both_sides_and_checks_them(
        tmp_path: Path, crate_bin: Path, chunkctl_bin: Path) -> None:
    """`make bench-crate` at a small size: a summary row per parameter set,
    the cut points equal, the table written."""
    markdown = tmp_path / "crate.md"
    result = crate_bench(tmp_path, crate_bin, chunkctl_bin, markdown)
    assert result.returncode == 0, result.stdout + result.stderr
    table = markdown.read_text()
    assert table == result.stdout
    summary = [line for line in table.splitlines() if line.endswith("| equal |")]
    assert [row.split(" | ")[0] for row in summary] == [
        "| 4 / 16 / 64 KiB, level 2", "| 128 KiB / 512 KiB / 2 MiB, level 2 (REAPI)"]
    for row in summary:
        assert int(row.split(" | ")[1]) >= 2, row
    assert "| crate fastcdc 5.0.0 | 1 | " in table and "| chunkd scalar | 2 | " in table
    assert (tmp_path / f"upstream-data-{5 * MiB}-seed42.bin").stat().st_size == 5 * MiB


def test_crate_bench_fails_when_the_cut_points_differ(
        tmp_path: Path, crate_bin: Path, chunkctl_bin: Path) -> None:
    """An oracle that cuts elsewhere (level 3 whatever it is asked: the same
    chunk count is unlikely, the same cut points impossible) fails the run,
    says where, and writes no table."""
    wrong = tmp_path / "wrong-fastcdc"
    wrong.write_text(f'#!/bin/sh\nexec "{crate_bin}" "$@" -level 3\n')
    wrong.chmod(wrong.stat().st_mode | stat.S_IXUSR)
    markdown = tmp_path / "crate.md"
    result = crate_bench(tmp_path, wrong, chunkctl_bin, markdown)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "**DIFFER**" in result.stdout
    assert "cut points differ at chunk " in result.stdout
    assert "not written" in result.stderr
    assert not markdown.exists()


def test_crate_bench_keeps_each_rows_fastest_window() -> None:
    """Rounds of chunkctl bench merge row by row: the fastest run of each
    row, reference and ceiling; a mismatch in any round stays a mismatch."""
    sys.path.insert(0, str(REPO / "server" / "bench"))
    import crate_bench  # server/bench/crate_bench.py

    def output(ceiling: str, ref: str, scalar: str, avx2: str, check: str) -> str:
        return (
            "chunkctl bench: 100 bytes of the file f; backends scalar, avx2; strategy auto\n"
            f"memory read (sum of 64-bit words): 1 thread {ceiling} GB/s, 2 threads 9.00 GB/s\n\n"
            "algorithm  backend    threads  strategy       GB/s    x ref  of ceiling   chunks  check\n"
            f"fastcdc    reference        1  reference   {ref}    1.00x          2%       12  (the reference)\n"
            f"fastcdc    scalar           1  two-stage   {scalar}    1.20x          2%       12  ok\n"
            f"fastcdc    avx2             2  two-stage   {avx2}    2.20x          2%       12  {check}\n")

    parse = crate_bench.upstream_bench.parse_chunkctl_bench
    merged = crate_bench.merge([
        parse(output("5.00", "1.50", "2.00", "3.00", "MISMATCH: chunk 3 of 12")),
        parse(output("7.00", "1.00", "2.50", "2.90", "ok")),
    ])
    assert merged.ceiling == {1: 7.0, 2: 9.0}
    assert merged.reference.gbps == 1.5
    assert sorted((r.backend, r.threads, r.gbps, r.check) for r in merged.rows) == [
        ("avx2", 2, 3.0, "MISMATCH: chunk 3 of 12"), ("scalar", 1, 2.5, "ok")]
