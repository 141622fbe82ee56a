"""The Makefile's Go for fresh machines: with a Go older than the newest
`go` line of the repository's Go modules (a fake one printing Debian bookworm's
`go version go1.19.8 linux/amd64`) it says so in one line, installs the
pinned Go from the Go module proxy (tools/fetch_go.py) and runs every Go
step with it; with a Go new enough it downloads nothing. Skips, saying why,
when the proxy cannot be reached."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import urllib.error
import urllib.request
from pathlib import Path
from typing import Dict, List

import pytest

REPO = Path(__file__).resolve().parents[2]
#: Bounds the download (about 80 MB) and unpacking.
FETCH_TIMEOUT = 600


def makefile_variable(name: str) -> str:
    m = re.search(rf"^{name}\s*:?=\s*(\S+)\s*$", (REPO / "Makefile").read_text(), re.M)
    assert m, f"{name} in the Makefile"
    return m.group(1)


def go_needed() -> str:
    """The newest `go` line of the repository's Go modules."""
    versions = []
    for module in ("clients/go", "deploy/probe", "tests/upstream"):
        m = re.search(r"^go (\d[\d.]*)$", (REPO / module / "go.mod").read_text(), re.M)
        assert m, f"a go line in {module}/go.mod"
        versions.append(m.group(1))
    return max(versions, key=lambda v: tuple(int(p) for p in v.split(".")))


def make(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    """make in the repository, without the make flags of a make running the
    tests."""
    env: Dict[str, str] = {k: v for k, v in os.environ.items()
                           if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL", "GO")}
    make_bin = shutil.which("make")
    if make_bin is None:
        pytest.fail("make is missing: make deps", pytrace=False)
    result = subprocess.run([make_bin, "--no-print-directory", "-C", str(REPO), *args],
                            capture_output=True, text=True, timeout=timeout, env=env,
                            stdin=subprocess.DEVNULL)
    assert result.returncode == 0, f"make {' '.join(args)}:\n{result.stdout}{result.stderr}"
    return result


def lines(result: subprocess.CompletedProcess) -> List[str]:
    return result.stdout.splitlines()


@pytest.fixture(scope="module")
def old_go(tmp_path_factory: pytest.TempPathFactory) -> Path:
    fake = tmp_path_factory.mktemp("old-go") / "go"
    fake.write_text("#!/bin/sh\necho 'go version go1.19.8 linux/amd64'\n")
    fake.chmod(0o755)
    return fake


@pytest.fixture(scope="module")
def proxy_reachable() -> None:
    version = makefile_variable("GO_FETCH_VERSION")
    url = (f"https://proxy.golang.org/golang.org/toolchain/@v/"
           f"v0.0.1-go{version}.linux-amd64.info")
    try:
        with urllib.request.urlopen(url, timeout=15) as r:
            r.read()
    except (urllib.error.URLError, OSError) as e:
        pytest.skip(f"the Go module proxy is unreachable ({url}: {e})")


def test_old_go_gets_the_pinned_go_from_the_proxy(
        old_go: Path, proxy_reachable: None, tmp_path: Path) -> None:
    version = makefile_variable("GO_FETCH_VERSION")
    dest = tmp_path / "go"
    args = [f"GO={old_go}", f"GO_FETCH_DIR={dest}", "-s", "go-toolchain"]
    first = make(*args, timeout=FETCH_TIMEOUT)
    assert lines(first) == [
        f"make: Go 1.19.8 is too old for the Go modules (needs {go_needed()}); installing Go "
        f"{version} from the Go module proxy into {dest}",
        f"make: using Go {version} ({dest}/bin/go); the Go modules need {go_needed()}",
    ], first.stderr
    installed = subprocess.run([dest / "bin" / "go", "version"], capture_output=True,
                               text=True, timeout=60, check=True)
    assert installed.stdout.startswith(f"go version go{version} ")
    goroot = subprocess.run([dest / "bin" / "go", "env", "GOROOT"], capture_output=True,
                            text=True, timeout=60, check=True)
    assert Path(goroot.stdout.strip()).resolve() == dest.resolve()

    # Installed once: the next make uses it without a word about installing,
    # and leaves it alone (an install replaces the whole directory).
    marker = dest / "left-alone"
    marker.write_text("")
    again = make(*args)
    assert lines(again) == [lines(first)[1]]
    assert marker.exists()

    # And every Go step runs the fetched go, never the old one.
    dry = make(f"GO={old_go}", f"GO_FETCH_DIR={dest}", "-n", "test-go")
    assert f"{dest}/bin/go vet ./..." in dry.stdout
    assert f"{dest}/bin/go test -count=1 ./..." in dry.stdout
    assert str(old_go) not in dry.stdout


def test_missing_go_is_named(tmp_path: Path) -> None:
    """No download here: make -n prints what it would do."""
    missing = tmp_path / "no" / "go"
    dry = make(f"GO={missing}", f"GO_FETCH_DIR={tmp_path / 'go'}", "-n", "go-toolchain")
    assert (f"make: no Go at {missing} for the Go modules (needs {go_needed()}); installing Go "
            f"{makefile_variable('GO_FETCH_VERSION')} from the Go module proxy into "
            f"{tmp_path / 'go'}") in dry.stdout
    assert not (tmp_path / "go").exists()


def test_go_new_enough_is_used_as_it_is(tmp_path: Path) -> None:
    new = tmp_path / "go"
    new.write_text("#!/bin/sh\necho 'go version go1.26.8 linux/amd64'\n")
    new.chmod(0o755)
    result = make(f"GO={new}", f"GO_FETCH_DIR={tmp_path / 'fetched'}", "-s", "go-toolchain")
    assert lines(result) == [f"make: using Go 1.26.8 ({new}); the Go modules need {go_needed()}"]
    assert not (tmp_path / "fetched").exists()
    dry = make(f"GO={new}", f"GO_FETCH_DIR={tmp_path / 'fetched'}", "-n", "test-go")
    assert f"{new} vet ./..." in dry.stdout and "fetched" not in dry.stdout


def test_the_pin_is_new_enough_for_go_mod() -> None:
    pinned = tuple(int(p) for p in makefile_variable("GO_FETCH_VERSION").split("."))
    assert pinned >= tuple(int(p) for p in go_needed().split("."))
