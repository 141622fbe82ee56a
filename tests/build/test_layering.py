"""The build's layering, read from `cmake --graphviz` (docs/design.md,
"Build layering"):

    platform <- kernels <- chunking <- pipeline <- service <- app <- chunkd
    fingerprint and index (on platform) and metrics are leaves beside chunking
    estimate (on chunking, fingerprint and index) is used by service, app and cli
    tables (the header generated from proto/chunkd/v1/tables.json) is a leaf
    under chunking, index and metrics

Nothing below service links gRPC, chunkctl links no benchmark code, and no
library links one above it. The test configures the tree into a temporary
directory (no build) and checks every edge between the project's libraries.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from typing import Dict, Set

import pytest

REPO = Path(__file__).resolve().parents[2]

#: What each of the project's libraries may link directly, of the project's
#: own libraries. A library missing here may not exist.
ALLOWED: Dict[str, Set[str]] = {
    "chunkd_platform": set(),
    "chunkd_tables": set(),
    "chunkd_kernels": {"chunkd_platform"},
    "chunkd_chunking": {"chunkd_kernels", "chunkd_platform", "chunkd_tables"},
    "chunkd_fingerprint": {"chunkd_platform"},
    "chunkd_index": {"chunkd_platform", "chunkd_tables"},
    "chunkd_metrics": {"chunkd_tables"},
    "chunkd_estimate": {"chunkd_chunking", "chunkd_fingerprint", "chunkd_index"},
    "chunkd_pipeline": {"chunkd_chunking", "chunkd_fingerprint", "chunkd_index",
                        "chunkd_metrics"},
    "chunkd_proto": set(),
    "chunkd_service": {"chunkd_pipeline", "chunkd_chunking", "chunkd_fingerprint",
                       "chunkd_index", "chunkd_metrics", "chunkd_proto",
                       "chunkd_estimate"},
    "chunkd_app": {"chunkd_service", "chunkd_pipeline", "chunkd_chunking",
                   "chunkd_fingerprint", "chunkd_index", "chunkd_metrics",
                   "chunkd_estimate"},
    "chunkd_workload": {"chunkd_chunking"},
    "chunkd_cli": {"chunkd_chunking", "chunkd_fingerprint", "chunkd_index",
                   "chunkd_proto", "chunkd_workload", "chunkd_estimate"},
    "chunkd_redis_process": {"chunkd_index"},
}
#: Libraries below the service: none may reach gRPC, even transitively.
BELOW_SERVICE = ["chunkd_platform", "chunkd_kernels", "chunkd_chunking",
                 "chunkd_fingerprint", "chunkd_index", "chunkd_metrics",
                 "chunkd_pipeline", "chunkd_estimate"]
GRPC = re.compile(r"^gRPC::|grpc")
BENCHMARK = re.compile(r"^benchmark::|^chunkd_bench")


@pytest.fixture(scope="module")
def edges(tmp_path_factory) -> Dict[str, Set[str]]:
    cmake = shutil.which("cmake")
    if cmake is None:
        pytest.fail("cmake is missing: make deps", pytrace=False)
    out = tmp_path_factory.mktemp("graph")
    result = subprocess.run(
        [cmake, "-S", str(REPO), "-B", str(out), "-G", "Ninja",
         "-DCMAKE_BUILD_TYPE=Release", f"--graphviz={out / 'graph.dot'}"],
        capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)
    assert result.returncode == 0, result.stdout + result.stderr
    graph: Dict[str, Set[str]] = {}
    for line in (out / "graph.dot").read_text().splitlines():
        m = re.search(r"-> \"node\d+\".*// (\S+) -> (\S+)$", line)
        if m:
            graph.setdefault(m.group(1), set()).add(m.group(2))
    assert graph, "cmake --graphviz wrote no edges"
    return graph


def reachable(graph: Dict[str, Set[str]], start: str) -> Set[str]:
    seen: Set[str] = set()
    todo = [start]
    while todo:
        for nxt in graph.get(todo.pop(), ()):
            if nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return seen


def test_every_library_links_only_what_its_layer_may(edges) -> None:
    ours = {name for name in edges if name.startswith("chunkd_")} | {
        n for targets in edges.values() for n in targets if n.startswith("chunkd_")}
    libraries = {n for n in ours if n in ALLOWED or n.startswith("chunkd_") and
                 not n.endswith("_test")}
    unknown = {n for n in libraries if n not in ALLOWED}
    assert not unknown, f"libraries without a layer: {sorted(unknown)}"
    for library, allowed in ALLOWED.items():
        assert library in ours, f"{library} is not in the build"
        linked = {n for n in edges.get(library, ()) if n in ALLOWED}
        assert linked <= allowed, f"{library} links {sorted(linked - allowed)}"


def test_nothing_below_the_service_reaches_grpc(edges) -> None:
    for library in BELOW_SERVICE:
        grpc = {n for n in reachable(edges, library) if GRPC.search(n)}
        assert not grpc, f"{library} reaches {sorted(grpc)}"


def test_chunkctl_links_no_benchmark_code(edges) -> None:
    reached = reachable(edges, "chunkctl")
    assert "chunkd_cli" in reached
    assert not {n for n in reached if BENCHMARK.search(n)}
    # The server binary neither.
    assert not {n for n in reachable(edges, "chunkd") if BENCHMARK.search(n)}
