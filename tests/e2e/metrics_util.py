"""Helpers of the metrics tests: scraping chunkd, the Grafana dashboard's
expressions, promtool and a real Prometheus server on loopback."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Dict, Iterator, List, Optional, Tuple

import pytest

from chunkd_client.testing import free_port

from e2e_util import REPO

DASHBOARD = REPO / "deploy" / "grafana" / "dashboards" / "chunkd.json"
#: The process_* families chunkd exports, name -> type, as client_golang
#: and client_python export them (test_process_metrics.py checks their
#: values, test_metrics.py that they are all there).
PROCESS_FAMILIES = {
    "process_cpu_seconds_total": "counter",
    "process_open_fds": "gauge",
    "process_max_fds": "gauge",
    "process_virtual_memory_bytes": "gauge",
    "process_resident_memory_bytes": "gauge",
    "process_start_time_seconds": "gauge",
}
#: What the dashboard's variables stand for when an expression is checked.
VARIABLES = {"$__rate_interval": "1m", "$job": ".*", "$namespace": ".*", "$instance": ".*"}

#: (name, labels, value): one sample of the text exposition format.
Sample = Tuple[str, Dict[str, str], float]

_SAMPLE = re.compile(r"([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)(?: \d+)?")
_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


def scrape(metrics_address: str) -> str:
    with urllib.request.urlopen(f"http://{metrics_address}/metrics", timeout=10) as r:
        assert r.status == 200
        return r.read().decode()


def parse_samples(text: str) -> List[Sample]:
    """Every sample line; fails on a line that is neither a sample nor a
    comment."""
    samples = []
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = _SAMPLE.fullmatch(line)
        assert m, f"not a sample line: {line!r}"
        labels = dict(_LABEL.findall(m.group(2) or ""))
        samples.append((m.group(1), labels, float(m.group(3))))
    return samples


def value(samples: List[Sample], name: str, **labels: str) -> Optional[float]:
    """The value of the one sample of `name` with exactly `labels`, or None."""
    found = [v for n, l, v in samples if n == name and l == labels]
    assert len(found) <= 1, f"{name}{labels} appears {len(found)} times"
    return found[0] if found else None


def tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        pytest.fail(
            f"{name} not found: install the Debian package prometheus "
            "(make test does)",
            pytrace=False,
        )
    return path


def promtool(*args: str, stdin: Optional[str] = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [tool("promtool"), *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
    )


def _panels(panels: list) -> Iterator[dict]:
    for panel in panels:
        yield panel
        yield from _panels(panel.get("panels", []))


def dashboard() -> dict:
    return json.loads(DASHBOARD.read_text())


def dashboard_expressions() -> List[Tuple[str, str]]:
    """(where, expression) of every panel query, with the dashboard's
    variables substituted; fails on an unknown variable."""
    out = []
    for panel in _panels(dashboard()["panels"]):
        for target in panel.get("targets", []):
            expr = target["expr"]
            for name, replacement in VARIABLES.items():
                expr = expr.replace(name, replacement)
            assert "$" not in expr, f"unknown variable in {panel['title']!r}: {expr}"
            out.append((f"{panel['title']} / {target['refId']}", expr))
    return out


def dashboard_rows() -> Dict[str, str]:
    """The title of the row every panel is in, by panel title (a collapsed
    row holds its panels; an open one is followed by them)."""
    rows: Dict[str, str] = {}
    row = ""
    for panel in dashboard()["panels"]:
        if panel["type"] == "row":
            row = panel["title"]
            for inner in panel.get("panels", []):
                rows[inner["title"]] = row
        else:
            rows[panel["title"]] = row
    return rows


_KEYWORDS = {"by", "without", "on", "ignoring", "group_left", "group_right",
             "bool", "and", "or", "unless", "offset", "inf", "nan"}


def metric_names(expr: str) -> set:
    """The metric names a PromQL expression selects: identifiers that are not
    functions, aggregations, keywords, label names or inside strings."""
    s = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)           # strings
    s = re.sub(r"\{[^}]*\}", "", s)                          # label matchers
    s = re.sub(r"\[[^\]]*\]", "", s)                         # range selectors
    s = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)",
               "", s)                                        # label lists
    names = set()
    for m in re.finditer(r"[a-zA-Z_:][a-zA-Z0-9_:]*", s):
        word = m.group(0)
        if word.lower() in _KEYWORDS:
            continue
        if s[m.end():].lstrip().startswith("("):
            continue                                         # a function
        if m.start() > 0 and (s[m.start() - 1].isdigit() or s[m.start() - 1] == "."):
            continue                                         # 1e3, 0.5
        names.add(word)
    return names


class PrometheusServer:
    """The Debian prometheus binary on a free loopback port, scraping
    `targets` every second, with its own storage in a temporary directory."""

    def __init__(self, targets: List[str], *, startup_timeout: float = 60.0) -> None:
        self.targets = targets
        self.startup_timeout = startup_timeout
        self.address = ""
        self.process: Optional[subprocess.Popen] = None
        self._dir = tempfile.TemporaryDirectory(prefix="chunkd-prometheus-")
        self._log = Path(self._dir.name) / "prometheus.log"

    def start(self, attempts: int = 3) -> "PrometheusServer":
        config = Path(self._dir.name) / "prometheus.yml"
        # JSON is YAML.
        config.write_text(json.dumps({
            "global": {"scrape_interval": "1s", "scrape_timeout": "1s",
                       "evaluation_interval": "1s"},
            "scrape_configs": [{"job_name": "chunkd",
                                "static_configs": [{"targets": self.targets}]}],
        }))
        for attempt in range(attempts):
            self.address = f"127.0.0.1:{free_port()}"
            with open(self._log, "ab") as log:
                self.process = subprocess.Popen(
                    [tool("prometheus"),
                     f"--config.file={config}",
                     f"--storage.tsdb.path={Path(self._dir.name) / 'data'}",
                     f"--web.listen-address={self.address}",
                     "--storage.tsdb.retention.time=1h",
                     "--log.level=warn"],
                    stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                )
            deadline = time.monotonic() + self.startup_timeout
            while time.monotonic() < deadline and self.process.poll() is None:
                try:
                    with urllib.request.urlopen(
                        f"http://{self.address}/-/ready", timeout=2
                    ) as r:
                        if r.status == 200:
                            return self
                except (urllib.error.URLError, OSError):
                    pass
                time.sleep(0.1)
            self.stop()
        raise RuntimeError(f"prometheus did not become ready:\n{self.log()}")

    def query(self, expr: str) -> list:
        """The result vector of an instant query at the current time; fails
        the test when Prometheus rejects the expression."""
        url = f"http://{self.address}/api/v1/query?" + urllib.parse.urlencode(
            {"query": expr})
        try:
            with urllib.request.urlopen(url, timeout=10) as r:
                body = json.loads(r.read())
        except urllib.error.HTTPError as e:
            body = json.loads(e.read())
        assert body["status"] == "success", f"{expr}: {body.get('error')}"
        return body["data"]["result"]

    def wait_for_scrape_after(self, when: float, timeout: float = 60.0) -> None:
        """Polls until Prometheus has a scrape of every target that started
        after the Unix time `when`."""
        deadline = time.monotonic() + timeout
        last: list = []
        while time.monotonic() < deadline:
            # timestamp() of a plain selector: the time of the last scrape.
            last = self.query('timestamp(up{job="chunkd"})')
            up = self.query('up{job="chunkd"}')
            if (len(last) == len(self.targets)
                    and all(float(s["value"][1]) > when for s in last)
                    and all(s["value"][1] == "1" for s in up)):
                return
            time.sleep(0.2)
        raise AssertionError(
            f"no scrape after {when} within {timeout}s (last: {last})\n{self.log()}")

    def log(self) -> str:
        return self._log.read_text(errors="replace") if self._log.exists() else ""

    def stop(self, timeout: float = 10.0) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout)

    def __enter__(self) -> "PrometheusServer":
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()
        self._dir.cleanup()
