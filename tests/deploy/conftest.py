"""Fixtures for the deployment tests (tests/deploy): the chart, the image
recipe and the compose stack, checked with the real tools.

Tools come from the environment (the Makefile's test-chart and test-deploy
targets set them): $HELM, $KUBECONFORM, $KUBECONFORM_SCHEMAS (the directory
tests/deploy/kubeconform_schemas.py writes), $KUBE_VERSION, $GRPC_HEALTH_PROBE;
the defaults are those under build/. A missing tool fails the test with the
command that provides it. Every subprocess has a timeout.
"""

from __future__ import annotations

import base64
import os
import shutil
import socket
import subprocess
import time
from pathlib import Path
from typing import Any, Iterator

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
CHART = REPO / "helm" / "chunkd"
DEPLOY = REPO / "deploy"
BUILD = REPO / "build"
TOOLS_BIN = BUILD / "tools" / "bin"
KUBE_VERSION = os.environ.get("KUBE_VERSION", "1.30.0")
TIMEOUT = 120
RELEASE = "demo"
NAMESPACE = "chunkd"


def tool(env: str, default: Path, provider: str) -> Path:
    path = Path(os.environ.get(env) or default)
    if not (path.is_file() and os.access(path, os.X_OK)):
        pytest.fail(f"{path} is not an executable (${env}): run `{provider}`", pytrace=False)
    return path


@pytest.fixture(scope="session")
def helm_bin() -> Path:
    return tool("HELM", TOOLS_BIN / "helm", "make test-chart")


@pytest.fixture(scope="session")
def kubeconform_bin() -> Path:
    return tool("KUBECONFORM", TOOLS_BIN / "kubeconform", "make test-chart")


@pytest.fixture(scope="session")
def schema_dir() -> Path:
    path = Path(os.environ.get("KUBECONFORM_SCHEMAS") or BUILD / "kubeconform-schemas")
    strict = path / "kubernetes" / f"v{KUBE_VERSION}-local-strict" / "deployment-apps-v1.json"
    crds = [path / "crds" / "monitoring.coreos.com" / f"{kind}_v1.json"
            for kind in ("servicemonitor", "podmonitor", "prometheusrule")]
    if not (strict.is_file() and all(crd.is_file() for crd in crds)):
        pytest.fail(f"{path} lacks the kubeconform schemas: run `make test-chart`", pytrace=False)
    return path


@pytest.fixture(scope="session")
def health_probe_bin() -> Path:
    return tool("GRPC_HEALTH_PROBE", TOOLS_BIN / "grpc_health_probe", "make test-deploy")


@pytest.fixture(scope="session")
def chunkd_bin() -> Path:
    return tool("CHUNKD_BIN", BUILD / "server" / "chunkd", "make build")


@pytest.fixture(scope="session")
def helm_env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """Helm's cache, config and data in a temporary directory, not ~."""
    home = tmp_path_factory.mktemp("helm-home")
    env = dict(os.environ)
    for name in ("HELM_CACHE_HOME", "HELM_CONFIG_HOME", "HELM_DATA_HOME"):
        env[name] = str(home / name.lower())
    return env


def run(command: list[Any], *, env: dict[str, str] | None = None, check: bool = True,
        timeout: float = TIMEOUT) -> subprocess.CompletedProcess:
    result = subprocess.run([str(c) for c in command], capture_output=True, text=True,
                            env=env, timeout=timeout, stdin=subprocess.DEVNULL)
    if check and result.returncode != 0:
        pytest.fail(f"{' '.join(map(str, command))} exited {result.returncode}:\n"
                    f"{result.stdout}\n{result.stderr}", pytrace=False)
    return result


class Chart:
    """helm template of helm/chunkd, and the rendered objects."""

    def __init__(self, helm: Path, env: dict[str, str]) -> None:
        self.helm = helm
        self.env = env

    def template(self, *args: Any, check: bool = True) -> subprocess.CompletedProcess:
        return run([self.helm, "template", RELEASE, CHART, "--namespace", NAMESPACE,
                    "--kube-version", KUBE_VERSION, *args], env=self.env, check=check)

    def render(self, *args: Any) -> list[dict]:
        docs = yaml.safe_load_all(self.template(*args).stdout)
        return [d for d in docs if d]


@pytest.fixture(scope="session")
def chart(helm_bin: Path, helm_env: dict[str, str]) -> Chart:
    return Chart(helm_bin, helm_env)


def find(objects: list[dict], kind: str, name_suffix: str = "") -> list[dict]:
    return [o for o in objects
            if o["kind"] == kind and o["metadata"]["name"].endswith(name_suffix)]


def one(objects: list[dict], kind: str, name_suffix: str = "") -> dict:
    found = find(objects, kind, name_suffix)
    assert len(found) == 1, f"expected one {kind} *{name_suffix}, got {len(found)}"
    return found[0]


def workload(objects: list[dict]) -> dict:
    """chunkd's Deployment or, with index.type=rocksdb, its StatefulSet (the
    built-in Redis is a StatefulSet too, of another component)."""
    found = [o for o in objects if o["kind"] in ("Deployment", "StatefulSet")
             and o["metadata"]["labels"].get("app.kubernetes.io/component") == "server"]
    assert len(found) == 1, f"expected one chunkd workload, got {len(found)}"
    return found[0]


def flagfile(objects: list[dict]) -> list[str]:
    """The chunkd flags of the rendered ConfigMap, one per line."""
    config = one(objects, "ConfigMap", f"{RELEASE}-chunkd")
    return [line for line in config["data"]["chunkd.flags"].splitlines() if line]


def secret_data(secret: dict) -> dict[str, str]:
    return {k: base64.b64decode(v).decode() for k, v in secret.get("data", {}).items()}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Process:
    """A server started by a test, stopped (SIGTERM, then SIGKILL) at the end."""

    def __init__(self, command: list[Any], log: Path) -> None:
        self.log = log
        self._file = open(log, "wb")
        self.proc = subprocess.Popen([str(c) for c in command], stdout=self._file,
                                     stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)

    def wait_for_port(self, port: int, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                pytest.fail(f"exited {self.proc.returncode}: {self.log.read_text()}", pytrace=False)
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1):
                    return
            except OSError:
                time.sleep(0.1)
        pytest.fail(f"nothing listens on {port} after {timeout}s: {self.log.read_text()}",
                    pytrace=False)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        self._file.close()


@pytest.fixture
def processes() -> Iterator[list[Process]]:
    started: list[Process] = []
    yield started
    for p in reversed(started):
        p.stop()


def which(name: str) -> str | None:
    return shutil.which(name)
