"""chunkd's repmaxcdc, rabin and buzhash against the upstream Go modules they
reimplement, boundary for boundary.

The oracle is `upstream-chunk` (tests/upstream, pinned go-cdc, restic/chunker
and desync; `make test-python` builds it and passes $UPSTREAM_CHUNK_BIN,
default <repo>/build/tools/bin/upstream-chunk). For every parameter set below
(each algorithm's defaults and small ones that give small files many chunks),
every dataset (seeded random bytes, zeros, low-entropy text, and 'versions':
a base and edited copies of it, concatenated) and every size at an edge of
the parameters (0, 1, the hash window, min, 2 min, max and, for repmaxcdc,
2 min + horizon, each -1/0/+1, plus a few MiB), EVERY boundary of `chunkctl
chunk --fingerprint none` must equal the upstream one:

- with --local, on every backend this CPU supports, on 1 and 3 threads;
- through a running chunkd (`chunkctl chunk --server`).

Each file is also cut with a rotating --message-size (the default, 4093,
65537), since the output must not depend on how the input arrives. Data
files are written once per session; the runs go through a small pool of
worker threads, every subprocess with a deadline. A failure lists the first
differences: algorithm, parameters, dataset, size, backend, threads and the
first differing boundary.
"""

from __future__ import annotations

import concurrent.futures
import importlib.util
import os
import random
import subprocess
import sys
import threading
from pathlib import Path
from typing import Dict, Iterator, List, NamedTuple, Optional, Sequence, Tuple

import pytest

from chunkd_client.testing import ChunkdServer, serving

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "e2e"))
from e2e_util import REPO, SUBPROCESS_TIMEOUT, random_bytes  # noqa: E402

KiB = 1 << 10
MiB = 1 << 20
#: restic's test polynomial, chunkd's default.
POLY_RESTIC = 0x3DA3358B4DC173
#: Another irreducible polynomial of degree 53: chunker.RandomPolynomial()
#: once, pinned.
POLY_OTHER = 0x3D8F561D1A6FF5
#: The hash window of each algorithm, in bytes.
WINDOW = {"repmaxcdc": 64, "rabin": 64, "buzhash": 48}
#: chunkd's defaults, which upstream-chunk shares.
DEFAULTS: Dict[str, Dict[str, int]] = {
    "repmaxcdc": {"min": 256 * KiB, "horizon": 2 * MiB},
    "rabin": {"min": 512 * KiB, "avg": 1 * MiB, "max": 8 * MiB,
              "polynomial": POLY_RESTIC},
    "buzhash": {"min": 16 * KiB, "avg": 64 * KiB, "max": 256 * KiB},
}
#: "A few MiB": every parameter set is also cut at this size.
BIG = 3 * MiB + 12345
#: --message-size values, taken in turn by successive runs (None: default).
MESSAGE_SIZES = (None, 4093, 65537)
BACKENDS = ("scalar", "avx2", "avx512")
THREADS = (1, 3)
WORKERS = max(2, os.cpu_count() or 2)
#: At most this many differences are listed in a failure.
REPORTED = 12

#: (offset, length) per chunk.
Boundaries = List[Tuple[int, int]]


class ParamSet(NamedTuple):
    algorithm: str
    #: Flags given explicitly, as (name, value) pairs (hashable, so that a
    #: case can key the session's cache); none: both sides' defaults.
    pairs: Tuple[Tuple[str, int], ...] = ()

    @property
    def flags(self) -> Dict[str, int]:
        return dict(self.pairs)

    @property
    def id(self) -> str:
        if not self.flags:
            return f"{self.algorithm}-defaults"
        return self.algorithm + "-" + "-".join(
            f"{k}{v:#x}" if k == "polynomial" else f"{k}{v}"
            for k, v in self.flags.items())

    @property
    def effective(self) -> Dict[str, int]:
        return {**DEFAULTS[self.algorithm], **self.flags}

    def chunkctl_args(self) -> List[str]:
        args = ["--algorithm", self.algorithm]
        for key, value in self.flags.items():
            # The other polynomial in decimal: chunkctl reads both spellings.
            spelled = (f"{value:#x}" if key == "polynomial" and value == POLY_RESTIC
                       else str(value))
            args += [f"--{key}", spelled]
        return args

    def upstream_args(self) -> List[str]:
        args = ["-algorithm", self.algorithm]
        for key, value in self.flags.items():
            args += [f"-{key}", f"{value:#x}" if key == "polynomial" else str(value)]
        return args

    def sizes(self) -> List[int]:
        p = self.effective
        edges = [WINDOW[self.algorithm], p["min"], 2 * p["min"]]
        if "max" in p:
            edges.append(p["max"])
        if "horizon" in p:
            edges.append(2 * p["min"] + p["horizon"])
        sizes = {0, 1, BIG}
        for edge in edges:
            sizes |= {edge - 1, edge, edge + 1}
        return sorted(sizes)


def P(algorithm: str, **flags: int) -> ParamSet:
    """A parameter set: P("rabin", min=64, avg=256, max=1024)."""
    return ParamSet(algorithm, tuple(flags.items()))


PARAM_SETS = [
    P("repmaxcdc"),
    P("repmaxcdc", min=64, horizon=0),
    P("repmaxcdc", min=64, horizon=512),
    P("repmaxcdc", min=1000, horizon=300),  # horizon < min
    P("repmaxcdc", min=4096, horizon=32768),
    P("rabin"),
    P("rabin", min=64, avg=256, max=1024),
    P("rabin", min=64, avg=128, max=64, polynomial=POLY_OTHER),
    P("rabin", min=1000, avg=512, max=4000, polynomial=POLY_OTHER),
    P("rabin", min=777, avg=1024, max=777),
    P("rabin", min=4096, avg=16384, max=65536, polynomial=POLY_OTHER),
    P("rabin", min=2048, avg=1024, max=100000, polynomial=POLY_RESTIC),
    P("rabin", min=100, avg=2, max=300),  # SetAverageBits(1)
    P("buzhash"),
    P("buzhash", min=48, avg=64, max=64),
    P("buzhash", min=48, avg=100, max=200),
    P("buzhash", min=1000, avg=4000, max=16000),
    P("buzhash", min=16384, avg=65536, max=262144),
]
LARGEST = max(max(p.sizes()) for p in PARAM_SETS)


def text_like(size: int) -> bytes:
    """Low-entropy text: log lines from a small vocabulary."""
    rng = random.Random(3)
    words = [b"GET", b"POST", b"/api/v1/items", b"/health", b"ok", b"error",
             b"user", b"cache", b"miss", b"hit", b"200", b"404", b"500"]
    out = bytearray()
    line = 0
    while len(out) < size:
        picked = b" ".join(rng.choice(words) for _ in range(rng.randint(3, 9)))
        out += b"2026-11-25T10:%02d:%02d line=%d %s\n" % (
            line // 60 % 60, line % 60, line, picked)
        line += 1
    return bytes(out[:size])


def versions(size: int) -> bytes:
    """A 1 MiB base and edited copies of it, concatenated: each copy
    replaces, inserts and deletes a few short spans of the one before."""
    rng = random.Random(4)
    current = bytearray(random_bytes(40, MiB))
    out = bytearray(current)
    while len(out) < size:
        for _ in range(20):
            at = rng.randrange(len(current))
            span = rng.randint(1, 200)
            kind = rng.choice(("replace", "insert", "delete"))
            if kind == "replace":
                current[at:at + span] = rng.randbytes(span)
            elif kind == "insert":
                current[at:at] = rng.randbytes(span)
            else:
                del current[at:at + span]
        out += current
    return bytes(out[:size])


DATASETS = {
    "random": lambda size: random_bytes(41, size),
    "zeros": bytes,
    "text": text_like,
    "versions": versions,
}


def binary(env: str, default: Path) -> Path:
    path = Path(os.environ.get(env) or default)
    if not (path.is_file() and os.access(path, os.X_OK)):
        pytest.fail(f"{path} is not an executable: build it (make test-python "
                    f"builds every binary) or point ${env} at it", pytrace=False)
    return path


class Files:
    """Each dataset's first `size` bytes as a file, written once."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.data = {name: make(LARGEST) for name, make in DATASETS.items()}
        self.lock = threading.Lock()

    def path(self, dataset: str, size: int) -> Path:
        path = self.directory / f"{dataset}-{size}"
        with self.lock:
            if not path.exists():
                path.write_bytes(self.data[dataset][:size])
        return path


class Case(NamedTuple):
    params: ParamSet
    dataset: str
    size: int


def cases(params: ParamSet) -> List[Case]:
    return [Case(params, dataset, size)
            for dataset in DATASETS for size in params.sizes()]


def parse(text: str, what: str, size: int) -> Boundaries:
    """`offset,length` lines, strictly, tiling the `size` bytes from 0."""
    out: Boundaries = []
    offset = 0
    for number, line in enumerate(text.splitlines(), 1):
        fields = line.split(",")
        assert len(fields) == 2 and all(f.isdigit() for f in fields), (
            f"{what}: line {number} is not offset,length: {line!r}")
        o, length = int(fields[0]), int(fields[1])
        assert o == offset and length > 0, f"{what}: line {number}: {line!r} after {offset} bytes"
        out.append((o, length))
        offset += length
    assert offset == size, f"{what}: the chunks cover {offset} of {size} bytes"
    return out


def run(command: Sequence[object]) -> Tuple[Optional[str], str]:
    """(stdout, "") on success, (None, why) on failure."""
    try:
        result = subprocess.run([str(c) for c in command], capture_output=True, text=True,
                                stdin=subprocess.DEVNULL, timeout=SUBPROCESS_TIMEOUT)
    except subprocess.TimeoutExpired:
        return None, f"no answer within {SUBPROCESS_TIMEOUT} s"
    if result.returncode != 0:
        return None, f"exit {result.returncode}: {result.stderr.strip()[:500]}"
    return result.stdout, ""


def first_difference(want: Boundaries, got: Boundaries) -> Optional[str]:
    for i, (w, g) in enumerate(zip(want, got)):
        if w != g:
            return (f"chunk {i}: chunkd (offset, length) {g}, upstream {w} "
                    f"(chunkd {len(got)} chunks, upstream {len(want)})")
    if len(want) != len(got):
        extra = (f"chunkd's extra {got[len(want)]}" if len(got) > len(want)
                 else f"upstream's extra {want[len(got)]}")
        return f"chunkd {len(got)} chunks, upstream {len(want)}; first {extra}"
    return None


class Upstream:
    """upstream-chunk's boundaries per case, computed once per session."""

    def __init__(self, binary_path: Path, files: Files) -> None:
        self.binary = binary_path
        self.files = files
        self.results: Dict[Case, Boundaries] = {}

    def fill(self, pool: concurrent.futures.Executor, wanted: Sequence[Case]) -> None:
        missing = [c for c in wanted if c not in self.results]
        for case, (out, why) in zip(missing, pool.map(self.cut, missing)):
            assert out is not None, f"upstream-chunk failed on {describe(case)}: {why}"
            self.results[case] = parse(out, f"upstream-chunk on {describe(case)}", case.size)

    def cut(self, case: Case) -> Tuple[Optional[str], str]:
        return run([self.binary, *case.params.upstream_args(),
                    self.files.path(case.dataset, case.size)])


def describe(case: Case, how: str = "") -> str:
    params = ", ".join(f"{k} {v:#x}" if k == "polynomial" else f"{k} {v}"
                       for k, v in case.params.effective.items())
    return (f"{case.params.algorithm} ({params}{'' if case.params.flags else '; defaults'})"
            f" dataset {case.dataset} size {case.size}{how}")


@pytest.fixture(scope="session")
def pool() -> Iterator[concurrent.futures.ThreadPoolExecutor]:
    with concurrent.futures.ThreadPoolExecutor(max_workers=WORKERS) as executor:
        yield executor


@pytest.fixture(scope="session")
def files(tmp_path_factory: pytest.TempPathFactory) -> Files:
    return Files(tmp_path_factory.mktemp("upstream_chunkers"))


@pytest.fixture(scope="session")
def upstream(files: Files) -> Upstream:
    return Upstream(binary("UPSTREAM_CHUNK_BIN", REPO / "build" / "tools" / "bin" / "upstream-chunk"),
                    files)


@pytest.fixture(scope="session")
def chunkctl_bin() -> Path:
    return binary("CHUNKCTL_BIN", REPO / "build" / "clients" / "cli" / "chunkctl")


@pytest.fixture(scope="session")
def backends(chunkctl_bin: Path, files: Files) -> List[str]:
    """The backends this CPU runs: chunkctl refuses the others by name."""
    supported = []
    empty = files.path("zeros", 0)
    for backend in BACKENDS:
        out, why = run([chunkctl_bin, "chunk", "--local", "--backend", backend, empty])
        if out is not None:
            supported.append(backend)
        else:
            assert "support" in why, f"--backend {backend}: {why}"
    assert "scalar" in supported
    return supported


@pytest.fixture(scope="session")
def server() -> Iterator[ChunkdServer]:
    yield from serving(ChunkdServer(binary("CHUNKD_BIN", REPO / "build" / "server" / "chunkd")))


def compare(pool: concurrent.futures.Executor, upstream: Upstream,
            runs: Sequence[Tuple[Case, str, List[object]]]) -> None:
    """Runs every (case, label, command) and fails listing the first
    differences from upstream."""
    upstream.fill(pool, [case for case, _, _ in runs])

    def check(item: Tuple[Case, str, List[object]]) -> Optional[str]:
        case, label, command = item
        out, why = run([*command, upstream.files.path(case.dataset, case.size)])
        if out is None:
            return f"{describe(case, label)}: chunkctl failed: {why}"
        try:
            got = parse(out, "chunkctl", case.size)
        except AssertionError as e:
            return f"{describe(case, label)}: {e}"
        difference = first_difference(upstream.results[case], got)
        return None if difference is None else f"{describe(case, label)}: {difference}"

    failures = [f for f in pool.map(check, runs) if f is not None]
    assert not failures, (
        f"{len(failures)} of {len(runs)} runs differ from upstream; the first:\n"
        + "\n".join(failures[:REPORTED]))


def message_size_args(i: int) -> Tuple[List[str], str]:
    size = MESSAGE_SIZES[i % len(MESSAGE_SIZES)]
    return ([], "") if size is None else (["--message-size", str(size)], f", message size {size}")


@pytest.mark.parametrize("params", PARAM_SETS, ids=lambda p: p.id)
def test_local_equals_upstream(params: ParamSet, pool, upstream: Upstream,
                               chunkctl_bin: Path, backends: List[str]) -> None:
    runs = []
    for case in cases(params):
        for backend in backends:
            for threads in THREADS:
                extra, label = message_size_args(len(runs))
                runs.append((case, f", --local backend {backend} threads {threads}{label}",
                             [chunkctl_bin, "chunk", "--local", "--fingerprint", "none",
                              "--backend", backend, "--threads", threads,
                              *extra, *params.chunkctl_args()]))
    compare(pool, upstream, runs)
    # Not vacuous: the largest random file makes several chunks upstream
    # (at least two: it is longer than any chunk can be).
    assert len(upstream.results[Case(params, "random", max(params.sizes()))]) >= 2


@pytest.mark.parametrize("params", PARAM_SETS, ids=lambda p: p.id)
def test_server_equals_upstream(params: ParamSet, pool, upstream: Upstream,
                                chunkctl_bin: Path, server: ChunkdServer) -> None:
    runs = []
    for i, case in enumerate(cases(params)):
        extra, label = message_size_args(i)
        runs.append((case, f", --server{label}",
                     [chunkctl_bin, "chunk", "--server", server.address,
                      "--fingerprint", "none", *extra, *params.chunkctl_args()]))
    compare(pool, upstream, runs)


def test_the_oracle_tells_parameters_apart(pool, upstream: Upstream) -> None:
    """upstream-chunk really takes the parameters: other values, other
    boundaries (else every comparison above would prove little)."""
    pairs = [
        (P("rabin", min=64, avg=256, max=1024),
         P("rabin", min=64, avg=256, max=1024, polynomial=POLY_OTHER)),
        (P("repmaxcdc", min=64, horizon=512),
         P("repmaxcdc", min=64, horizon=0)),
        (P("buzhash", min=48, avg=100, max=200),
         P("buzhash", min=48, avg=64, max=64)),
    ]
    wanted = [Case(p, "random", BIG) for pair in pairs for p in pair]
    upstream.fill(pool, wanted)
    for a, b in pairs:
        assert upstream.results[Case(a, "random", BIG)] != upstream.results[Case(b, "random", BIG)], (
            f"{a.id} and {b.id}")


def _upstream_bench():
    """server/bench/upstream_bench.py as a module."""
    spec = importlib.util.spec_from_file_location(
        "upstream_bench", REPO / "server" / "bench" / "upstream_bench.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_upstream_bench_runs_both_sides_and_checks_them(
        tmp_path: Path, upstream: Upstream, chunkctl_bin: Path) -> None:
    """`make bench-upstream` at a small size: a row per algorithm, the chunk
    counts of both sides equal, the table written."""
    markdown = tmp_path / "upstream.md"
    result = subprocess.run(
        [sys.executable, str(REPO / "server" / "bench" / "upstream_bench.py"),
         "--upstream-chunk", str(upstream.binary), "--chunkctl", str(chunkctl_bin),
         "--dir", str(tmp_path), "--size", str(9 * MiB), "--repeat", "1",
         "--seconds", "0.01", "--threads", "1,2", "--markdown", str(markdown)],
        capture_output=True, text=True, timeout=SUBPROCESS_TIMEOUT, stdin=subprocess.DEVNULL)
    assert result.returncode == 0, result.stdout + result.stderr
    table = markdown.read_text()
    assert table == result.stdout
    rows = [line for line in table.splitlines() if line.startswith("| ") and "GB/s" not in line]
    assert [row.split(" | ")[0] for row in rows] == ["| repmaxcdc", "| rabin", "| buzhash"]
    for row in rows:
        cells = row.strip("| ").split(" | ")
        assert cells[-1] == "ok" and int(cells[2]) >= 2, row
    assert (tmp_path / f"upstream-data-{9 * MiB}-seed42.bin").stat().st_size == 9 * MiB


def test_upstream_bench_refuses_differing_counts() -> None:
    bench = _upstream_bench()
    text = (
        "chunkctl bench: 100 bytes of the file f; backends scalar; strategy auto\n"
        "memory read (sum of 64-bit words): 1 thread 30.00 GB/s, 2 threads 50.00 GB/s\n\n"
        "algorithm  backend    threads  strategy       GB/s    x ref  of ceiling   chunks  check\n"
        "rabin      reference        1  reference      0.50    1.00x          2%       12  (the reference)\n"
        "rabin      scalar           1  two-stage      0.60    1.20x          2%       12  ok\n"
        "rabin      scalar           2  two-stage      1.10    2.20x          2%       12  MISMATCH: chunk 3 of 12\n")
    chunkd = bench.parse_chunkctl_bench(text)
    assert chunkd.ceiling == {1: 30.0, 2: 50.0}
    assert chunkd.reference.chunks == 12 and chunkd.reference.gbps == 0.5
    assert [(r.threads, r.gbps, r.check) for r in chunkd.rows] == [
        (1, 0.6, "ok"), (2, 1.1, "MISMATCH: chunk 3 of 12")]
    upstream = {"algorithm": "rabin", "bytes": 100, "chunks": 11,
                "best_seconds": 1.0, "gb_per_s": 0.25}
    problems = bench.check("rabin", upstream, chunkd, 1, "chunks differ")
    assert problems == ["rabin: upstream cut 11 chunks, chunkd 12",
                        "rabin: chunkctl bench failed: chunks differ",
                        "rabin scalar 2 threads: MISMATCH: chunk 3 of 12"]
    table = bench.table([bench.Line("rabin", upstream, chunkd, problems)],
                        100, 42, 3, 1.0, [1, 2])
    assert "| rabin | " in table and "| 0.25 | 0.50 | 2.00x | 0.60 (scalar) | 2.40x | 2% |" in table
    assert "**MISMATCH**" in table and "upstream cut 11 chunks, chunkd 12" in table
