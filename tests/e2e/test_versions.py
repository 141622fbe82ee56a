"""One version everywhere, from the repository's VERSION file, and the
Apache-2.0 license in every artefact that carries one (README.md, "Versions
and license"): the Python package (its _version.py, the installed package's
metadata and a freshly built wheel), the Go module, the Helm chart's
appVersion, chunkd --version, chunkctl --version and chunkd_build_info."""

from __future__ import annotations

import importlib.metadata
import re
import subprocess
import sys
import zipfile
from email.parser import Parser
from pathlib import Path

import pytest

from chunkd_client.testing import ChunkdServer

from e2e_util import REPO, SUBPROCESS_TIMEOUT
from metrics_util import parse_samples, scrape

VERSION = (REPO / "VERSION").read_text().strip()
LICENSE = (REPO / "LICENSE").read_text()
PYTHON_PACKAGE = REPO / "clients" / "python"


def test_version_file_is_semver() -> None:
    assert re.fullmatch(r"\d+\.\d+\.\d+", VERSION), VERSION
    assert (REPO / "VERSION").read_text() == VERSION + "\n"


def test_license_is_apache_2() -> None:
    assert "Apache License" in LICENSE[:300] and "Version 2.0" in LICENSE[:300]
    assert "END OF TERMS AND CONDITIONS" in LICENSE
    # The copies the Python and Go packaging need in their own roots.
    assert (PYTHON_PACKAGE / "LICENSE").read_text() == LICENSE
    assert (REPO / "clients" / "go" / "LICENSE").read_text() == LICENSE


def test_python_version_module() -> None:
    text = (PYTHON_PACKAGE / "src" / "chunkd_client" / "_version.py").read_text()
    assert re.findall(r'^__version__ = "([^"]*)"$', text, re.M) == [VERSION]


def test_installed_python_package() -> None:
    """The venv's chunkd-client (make test re-installs it when the package's
    sources change)."""
    metadata = importlib.metadata.metadata("chunkd-client")
    assert metadata["Version"] == VERSION
    assert metadata["License-Expression"] == "Apache-2.0"
    import chunkd_client

    assert chunkd_client.__version__ == VERSION


def test_built_wheel_declares_version_and_license(tmp_path: Path) -> None:
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp_path),
                    str(PYTHON_PACKAGE)], check=True, capture_output=True, timeout=600,
                   stdin=subprocess.DEVNULL)
    [wheel] = list(tmp_path.glob("chunkd_client-*.whl"))
    assert wheel.name.startswith(f"chunkd_client-{VERSION}-")
    with zipfile.ZipFile(wheel) as archive:
        info = f"chunkd_client-{VERSION}.dist-info"
        metadata = Parser().parsestr(archive.read(f"{info}/METADATA").decode())
        assert metadata["Version"] == VERSION
        assert metadata["License-Expression"] == "Apache-2.0"
        assert metadata.get_all("License-File") == ["LICENSE"]
        assert archive.read(f"{info}/licenses/LICENSE").decode() == LICENSE


def test_go_module_version() -> None:
    text = (REPO / "clients" / "go" / "version.go").read_text()
    assert re.findall(r'^const Version = "([^"]*)"$', text, re.M) == [VERSION]


def test_chart_app_version() -> None:
    yaml = pytest.importorskip("yaml")
    chart = yaml.safe_load((REPO / "helm" / "chunkd" / "Chart.yaml").read_text())
    assert chart["appVersion"] == VERSION


def first_line(binary: Path, *args: str) -> str:
    result = subprocess.run([str(binary), *args], capture_output=True, text=True,
                            timeout=SUBPROCESS_TIMEOUT, stdin=subprocess.DEVNULL)
    assert result.returncode == 0, result.stderr
    return result.stdout.splitlines()[0]


def test_chunkd_version(chunkd_bin: Path) -> None:
    assert first_line(chunkd_bin, "--version") == f"chunkd {VERSION}"


def test_chunkctl_version(chunkctl_bin: Path) -> None:
    assert first_line(chunkctl_bin, "--version") == f"chunkctl {VERSION}"


def test_build_info_label(server: ChunkdServer) -> None:
    info = [labels for name, labels, value in parse_samples(scrape(server.metrics_address))
            if name == "chunkd_build_info" and value == 1]
    assert [labels["version"] for labels in info] == [VERSION]
