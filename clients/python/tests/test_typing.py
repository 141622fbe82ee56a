"""The package's type hints hold: mypy finds no error in it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE_DIR = Path(__file__).resolve().parents[1]


def test_mypy_finds_no_errors() -> None:
    pytest.importorskip("mypy", reason="mypy comes with the [test] extra")
    result = subprocess.run(
        [sys.executable, "-m", "mypy", "--config-file", str(PACKAGE_DIR / "pyproject.toml"),
         str(PACKAGE_DIR / "src" / "chunkd_client")],
        capture_output=True, text=True, timeout=600, cwd=PACKAGE_DIR,
    )
    assert result.returncode == 0, result.stdout + result.stderr
