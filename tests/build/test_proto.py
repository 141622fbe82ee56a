"""The proto is an API reference that only grows: `buf lint` (proto/buf.yaml:
the STANDARD rules plus COMMENTS) reports nothing, and `buf breaking` finds
no change that breaks the last release's clients (the release's proto is
kept in $RELEASED_PROTO). Both checks are shown to catch what they are for
on altered copies: a field left undocumented, a field renumbered.

Needs buf (pinned in the Makefile, `make test-proto`): BUF_BIN names it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PROTO_ROOT = REPO / "proto"
PROTO = PROTO_ROOT / "chunkd" / "v1" / "chunkd.proto"
BUF = os.environ.get("BUF_BIN", "")
RELEASED = REPO / os.environ.get("RELEASED_PROTO", "tests/build/released-proto/0.4.0")

pytestmark = pytest.mark.skipif(
    not BUF or not os.access(BUF, os.X_OK),
    reason="BUF_BIN is not set to buf (make test-proto / make test-python set it)")


def _buf(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "BUF_CACHE_DIR": str(REPO / "build" / "buf-cache")}
    return subprocess.run([BUF, *args], cwd=cwd, capture_output=True, text=True,
                          timeout=300, env=env)


def _copy(tmp_path: Path, edit) -> Path:
    """A copy of the proto module with `edit` applied to chunkd.proto's text."""
    root = tmp_path / "proto"
    shutil.copytree(PROTO_ROOT, root)
    target = root / "chunkd" / "v1" / "chunkd.proto"
    text = target.read_text()
    changed = edit(text)
    assert changed != text, "the edit did not apply"
    target.write_text(changed)
    return root


def test_lint_reports_nothing():
    result = _buf("lint", cwd=PROTO_ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.strip() == ""


def test_no_breaking_change_since_the_last_release():
    assert (RELEASED / "chunkd" / "v1" / "chunkd.proto").is_file(), RELEASED
    result = _buf("breaking", "--against", str(RELEASED), cwd=PROTO_ROOT)
    assert result.returncode == 0, result.stdout + result.stderr


def test_lint_catches_an_undocumented_field(tmp_path: Path):
    root = _copy(tmp_path, lambda t: t.replace(
        "  // Bytes received.\n  uint64 total_bytes = 1;", "  uint64 total_bytes = 1;", 1))
    result = _buf("lint", cwd=root)
    assert result.returncode != 0
    assert 'Field "total_bytes" should have a non-empty comment' in result.stdout


def test_breaking_catches_a_renumbered_field(tmp_path: Path):
    root = _copy(tmp_path, lambda t: t.replace(
        "uint64 total_chunks = 2;", "uint64 total_chunks = 9;", 1))
    result = _buf("breaking", "--against", str(RELEASED), cwd=root)
    assert result.returncode != 0
    assert 'field "2" with name "total_chunks"' in result.stdout

