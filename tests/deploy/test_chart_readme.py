"""helm/chunkd/README.md is generated from Chart.yaml and values.yaml by
helm/generate_readme.py: it must be current, and every value must have a
description (a `## @param` line) to be in it."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import yaml

from conftest import CHART, REPO, run

GENERATOR = REPO / "helm" / "generate_readme.py"


def check(chart: Path) -> tuple[int, str]:
    result = run([sys.executable, GENERATOR, "--check", "--chart", chart], check=False)
    return result.returncode, result.stdout + result.stderr


def chart_copy(tmp_path: Path) -> Path:
    copy_ = tmp_path / "chunkd"
    shutil.copytree(CHART, copy_)
    return copy_


def test_readme_is_current() -> None:
    code, output = check(CHART)
    assert code == 0, output


def test_readme_lists_every_value_with_its_default() -> None:
    readme = (CHART / "README.md").read_text()
    values = (CHART / "values.yaml").read_text()
    params = [line.split()[2] for line in values.splitlines() if line.startswith("## @param ")]
    assert len(params) > 100
    for key in params:
        assert f"| `{key}` | " in readme, key
    assert "| `metrics.prometheusRule.enabled` | create a prometheus-operator PrometheusRule" \
        in readme
    assert "| `server.maxStreamRatePerConnection` | --max_stream_rate_per_connection: " \
        "new streams per second one connection may open; twice that closes it (rapid reset); " \
        "0: off | `1000` |" in readme
    assert '| `builtinRedis.image.tag` | Redis image tag | `"7.2-bookworm"` |' in readme
    meta = yaml.safe_load((CHART / "Chart.yaml").read_text())
    assert f"AppVersion: {meta['appVersion']}" in readme and "License: Apache-2.0" in readme


def test_a_stale_readme_fails(tmp_path: Path) -> None:
    copy_ = chart_copy(tmp_path)
    values = copy_ / "values.yaml"
    values.write_text(values.read_text().replace("replicaCount: 1\n", "replicaCount: 2\n"))
    code, output = check(copy_)
    assert code == 1
    assert "README.md is stale: run python3 helm/generate_readme.py" in output
    assert "-| `replicaCount` |" in output and "`2` |" in output


def test_a_value_without_description_fails(tmp_path: Path) -> None:
    copy_ = chart_copy(tmp_path)
    values = copy_ / "values.yaml"
    values.write_text(values.read_text().replace(
        "  podMonitor:\n    enabled: false\n",
        "  podMonitor:\n    enabled: false\n    sampleLimit: 0\n"))
    code, output = check(copy_)
    assert code == 1
    assert ("metrics.podMonitor.sampleLimit has no description: add "
            "'## @param metrics.podMonitor.sampleLimit ...'") in output


def test_a_description_of_no_value_fails(tmp_path: Path) -> None:
    copy_ = chart_copy(tmp_path)
    values = copy_ / "values.yaml"
    values.write_text(values.read_text().replace(
        "## @param podLabels extra pod labels\n",
        "## @param podLabels extra pod labels\n## @param podLabelz typo\n"))
    code, output = check(copy_)
    assert code == 1
    assert "@param podLabelz names no key of values.yaml" in output
