"""Small rooms: no source file under server/ or clients/ is longer than 600
lines, tests and generated code apart, so that each file does one job and
can be read at once (docs/contributing.md says where each job lives).

Checks the files git tracks (a fresh clone's tree). Standard library only.
"""

from __future__ import annotations

import subprocess
from pathlib import Path, PurePosixPath

REPO = Path(__file__).resolve().parents[2]
MAX_LINES = 600
SOURCE_SUFFIXES = {".cc", ".h", ".py", ".go"}
# Generated: the Go stubs protoc makes (clients/go/chunkdpb) and files that
# say so in their first lines, as generators do.
GENERATED_DIRS = ("clients/go/chunkdpb/",)


def _is_test(path: PurePosixPath) -> bool:
    name = path.name
    return (name.endswith("_test.cc") or name.endswith("_test.go")
            or name.endswith("_test.py") or name.startswith("test_")
            or "tests" in path.parts or name == "conftest.py")


def _is_generated(path: PurePosixPath, text: str) -> bool:
    if str(path).startswith(GENERATED_DIRS):
        return True
    head = "\n".join(text.splitlines()[:5]).lower()
    return "generated" in head and ("do not edit" in head or "code generated" in head)


def _sources():
    listed = subprocess.run(["git", "ls-files", "server", "clients"], cwd=REPO,
                            capture_output=True, text=True, check=True).stdout
    for line in listed.splitlines():
        path = PurePosixPath(line)
        if path.suffix in SOURCE_SUFFIXES and not _is_test(path):
            yield path


def test_no_source_file_is_longer_than_600_lines():
    long_files = []
    for path in _sources():
        file = REPO / path
        if not file.exists():
            continue
        text = file.read_text(errors="replace")
        lines = text.count("\n")
        if lines > MAX_LINES and not _is_generated(path, text):
            long_files.append(f"{path}: {lines} lines")
    assert not long_files, (f"longer than {MAX_LINES} lines (split by job): "
                            + "; ".join(long_files))


def test_the_check_sees_the_sources():
    """The walk finds the server's and the clients' code (a check that
    looked at nothing would pass)."""
    found = {str(p) for p in _sources()}
    assert "server/main.cc" in found
    assert any(p.startswith("clients/python/src/") for p in found)
    assert any(p.startswith("clients/go/") for p in found)
    assert not any(p.endswith("_test.cc") for p in found)


def test_an_algorithm_lives_in_at_most_12_source_files():
    """Adding an algorithm touches at most 12 source files (tests and docs
    apart; docs/contributing.md walks through them). buzhash, the last one
    added and one that takes no parameter of its own, is the yardstick: the
    files that name it are the files a new algorithm of its kind needs."""
    listed = subprocess.run(
        ["git", "grep", "-il", "buzhash", "--", ".", ":!*test*", ":!docs",
         ":!*.md", ":!tests"],
        cwd=REPO, capture_output=True, text=True, check=True).stdout.split()
    assert "server/chunking/buzhash.cc" in listed, listed
    assert len(listed) <= 12, listed
