"""chunkd's alert rules in both places they ship: deploy/prometheus/
chunkd-alerts.yml (compose) and the chart's PrometheusRule, generated from a
copy of it. Each is run through `promtool test rules` with
tests/deploy/chunkd-alerts-test.yml; the chart's memory rule (kube-state-
metrics' container limit) has its own test here."""

from __future__ import annotations

import copy
import re
import shutil
from pathlib import Path

import pytest
import yaml

from conftest import CHART, DEPLOY, NAMESPACE, RELEASE, Chart, one, run

RULES = DEPLOY / "prometheus" / "chunkd-alerts.yml"
UNIT_TEST = Path(__file__).with_name("chunkd-alerts-test.yml")
COMPOSE_LIKE = ["--set", "metrics.prometheusRule.enabled=true",
                "--set-string", 'metrics.prometheusRule.selector=job="chunkd"',
                "--set", "metrics.prometheusRule.memoryLimitBytes=2147483648"]
ALERTS = {"ChunkdDown", "ChunkdTargetMissing", "ChunkdHighErrorRatio", "ChunkdLatencyHigh",
          "ChunkdMemoryNearLimit", "ChunkdAtStreamLimit", "ChunkdTenantAtItsLimit",
          "ChunkdIdleStreams", "ChunkdAuthFailures", "ChunkdAbusiveConnections",
          "ChunkdTlsHandshakeFailures", "ChunkdIndexUnavailable", "ChunkdIndexNearlyFull",
          "ChunkdIndexWritesFailing", "ChunkdIndexLatencyHigh", "ChunkdIndexWriteStalls",
          "ChunkdIndexCompactionBehind"}


def promtool() -> str:
    path = shutil.which("promtool")
    if path is None:
        pytest.fail("promtool is missing: make deps (Debian package prometheus)", pytrace=False)
    return path


def alerts(groups: list[dict]) -> dict[str, dict]:
    return {r["alert"]: r for g in groups for r in g["rules"]}


def rendered_groups(chart: Chart, *args: str) -> list[dict]:
    rule = one(chart.render(*args), "PrometheusRule")
    return rule["spec"]["groups"]


def unit_test(rules: Path, tmp_path: Path, test: dict | None = None) -> str:
    """promtool test rules: `test` (default: chunkd-alerts-test.yml) run on
    the rules file `rules`; returns promtool's output."""
    test = copy.deepcopy(test or yaml.safe_load(UNIT_TEST.read_text()))
    test["rule_files"] = [str(rules)]
    path = tmp_path / f"{rules.stem}-test.yml"
    path.write_text(yaml.safe_dump(test, sort_keys=False))
    result = run([promtool(), "test", "rules", path], check=False)
    return result.stdout + result.stderr + f"\nexit {result.returncode}"


def test_compose_rules_pass_their_unit_test(tmp_path: Path) -> None:
    check = run([promtool(), "check", "rules", RULES])
    assert f"SUCCESS: {len(ALERTS)} rules found" in check.stdout
    assert set(alerts(yaml.safe_load(RULES.read_text())["groups"])) == ALERTS
    assert "SUCCESS" in unit_test(RULES, tmp_path)
    # Every alert of the file has a case that fires it.
    test = yaml.safe_load(UNIT_TEST.read_text())
    fired = {case["alertname"] for t in test["tests"] for case in t["alert_rule_test"]
             if case["exp_alerts"]}
    assert fired == ALERTS


def with_rule_changed(text: str, alert: str, old: str, new: str) -> str:
    """The rules file `text` with `old` replaced by `new` in the rule of
    `alert` only (`old` must occur there once)."""
    start = text.index(f"- alert: {alert}\n")
    end = text.find("- alert: ", start + 1)
    end = len(text) if end < 0 else end
    rule = text[start:end]
    assert rule.count(old) == 1, (alert, old)
    return text[:start] + rule.replace(old, new) + text[end:]


@pytest.mark.parametrize("alert, old, new", [
    ("ChunkdHighErrorRatio", ") > 0.05\n", ") > 0.5\n"),
    ("ChunkdIndexWriteStalls", ") > 0.1\n", ") > 0.05\n"),
    ("ChunkdIndexWriteStalls", "for: 10m", "for: 5m"),
    ("ChunkdIndexCompactionBehind", ") > 34359738368\n", ") > 68719476736\n"),
    ("ChunkdIndexCompactionBehind", "for: 15m", "for: 10m"),
])
def test_unit_test_catches_a_broken_rule(alert: str, old: str, new: str, tmp_path: Path) -> None:
    """A threshold or a `for` moved fails the unit test, naming the alert."""
    broken = tmp_path / "broken.yml"
    broken.write_text(with_rule_changed(RULES.read_text(), alert, old, new))
    output = unit_test(broken, tmp_path)
    assert "FAILED" in output and f"alertname: {alert}," in output, output


def test_chart_carries_the_compose_rules() -> None:
    """Helm reads files only inside the chart: its copy is identical."""
    copy_ = CHART / "files" / "chunkd-alerts.yml"
    assert copy_.read_bytes() == RULES.read_bytes(), (
        "helm/chunkd/files/chunkd-alerts.yml differs from deploy/prometheus/chunkd-alerts.yml: "
        "cp deploy/prometheus/chunkd-alerts.yml helm/chunkd/files/chunkd-alerts.yml")


def test_prometheus_rule_is_off_by_default(chart: Chart) -> None:
    assert not [o for o in chart.render() if o["kind"] == "PrometheusRule"]


def test_chart_rules_with_compose_settings_are_the_compose_rules(chart: Chart,
                                                                 tmp_path: Path) -> None:
    groups = rendered_groups(chart, *COMPOSE_LIKE)
    assert groups == yaml.safe_load(RULES.read_text())["groups"]
    rules = tmp_path / "chart-compose-like.yml"
    rules.write_text(yaml.safe_dump({"groups": groups}))
    assert "SUCCESS" in unit_test(rules, tmp_path)


def expand(template: str, labels: dict[str, str]) -> str:
    """An annotation as Prometheus renders it ({{ $labels.x }} only)."""
    return re.sub(r"\{\{ \$labels\.(\w+) \}\}", lambda m: labels.get(m.group(1), ""), template)


def release_test() -> dict:
    """chunkd-alerts-test.yml for the chart's default selector: every input
    series and expected alert of job "chunkd" moves to the release's job and
    namespace; the memory cases go (the chart's rule differs, tested below)."""
    test = yaml.safe_load(UNIT_TEST.read_text())
    templates = alerts(yaml.safe_load(RULES.read_text())["groups"])
    job = f'job="{RELEASE}-chunkd",namespace="{NAMESPACE}"'
    for t in test["tests"]:
        for series in t["input_series"]:
            series["series"] = series["series"].replace('job="chunkd"', job)
        t["alert_rule_test"] = [c for c in t["alert_rule_test"]
                                if c["alertname"] != "ChunkdMemoryNearLimit"]
        for case in t["alert_rule_test"]:
            for alert in case["exp_alerts"]:
                labels = alert["exp_labels"]
                if labels.get("job") == "chunkd":
                    labels.update(job=f"{RELEASE}-chunkd", namespace=NAMESPACE)
                alert["exp_annotations"] = {
                    k: expand(v, labels)
                    for k, v in templates[case["alertname"]]["annotations"].items()}
    test["tests"] = [t for t in test["tests"] if t["alert_rule_test"]]
    return test


def test_chart_rules_select_the_release(chart: Chart, tmp_path: Path) -> None:
    groups = rendered_groups(chart, "--set", "metrics.prometheusRule.enabled=true")
    compose = alerts(yaml.safe_load(RULES.read_text())["groups"])
    selector = f'job="{RELEASE}-chunkd", namespace="{NAMESPACE}"'
    for name, rule in alerts(groups).items():
        assert 'job="chunkd"' not in rule["expr"], name
        assert selector in rule["expr"], name
        if name != "ChunkdMemoryNearLimit":
            assert rule["expr"] == compose[name]["expr"].replace('job="chunkd"', selector)
            assert rule == {**compose[name], "expr": rule["expr"]}
    rules = tmp_path / "chart-default.yml"
    rules.write_text(yaml.safe_dump({"groups": groups}))
    assert "SUCCESS" in unit_test(rules, tmp_path, release_test())
    # The compose test's own series (job "chunkd") fire nothing here: the
    # rules select this release only.
    output = unit_test(rules, tmp_path)
    assert "FAILED" in output


def memory_test(limit_series: bool) -> dict:
    job = f'job="{RELEASE}-chunkd",namespace="{NAMESPACE}"'
    series = [
        {"series": f'process_resident_memory_bytes{{{job},instance="10.0.0.1:9464",pod="p1"}}',
         "values": "1000000000x30"},
        {"series": f'process_resident_memory_bytes{{{job},instance="10.0.0.2:9464",pod="p2"}}',
         "values": "900000000x30"},
        # Another release's pod of the same name in another namespace.
        {"series": 'process_resident_memory_bytes{job="x",namespace="other",instance="i",'
                   'pod="p1"}', "values": "1000000000x30"},
    ]
    if limit_series:
        for pod in ("p1", "p2"):
            series.append({
                "series": 'kube_pod_container_resource_limits{job="kube-state-metrics",'
                          f'namespace="{NAMESPACE}",pod="{pod}",container="chunkd",'
                          'resource="memory",unit="byte"}', "values": "1073741824x30"})
        series.append({
            "series": 'kube_pod_container_resource_limits{job="kube-state-metrics",'
                      f'namespace="{NAMESPACE}",pod="p1",container="chunkd",'
                      'resource="cpu",unit="core"}', "values": "2x30"})
    rules = yaml.safe_load(RULES.read_text())
    annotations = alerts(rules["groups"])["ChunkdMemoryNearLimit"]["annotations"]
    fired = {"exp_labels": {"severity": "warning", "job": f"{RELEASE}-chunkd",
                            "namespace": NAMESPACE, "instance": "10.0.0.1:9464", "pod": "p1"},
             "exp_annotations": {**annotations, "summary": annotations["summary"].replace(
                 "{{ $labels.instance }}", "10.0.0.1:9464")}}
    return {"evaluation_interval": "1m", "tests": [{"interval": "1m", "input_series": series,
            "alert_rule_test": [
                {"eval_time": "10m", "alertname": "ChunkdMemoryNearLimit", "exp_alerts": []},
                {"eval_time": "20m", "alertname": "ChunkdMemoryNearLimit",
                 "exp_alerts": [fired] if limit_series else []}]}]}


def test_chart_memory_rule_uses_the_container_limit(chart: Chart, tmp_path: Path) -> None:
    """By default ChunkdMemoryNearLimit divides by kube-state-metrics' memory
    limit of the chunkd container of the same pod (p1: 1e9 of 1 GiB fires,
    p2: 0.9e9 does not); without kube-state-metrics it cannot fire (the
    values say to set memoryLimitBytes then)."""
    groups = rendered_groups(chart, "--set", "metrics.prometheusRule.enabled=true")
    expr = alerts(groups)["ChunkdMemoryNearLimit"]["expr"]
    assert "kube_pod_container_resource_limits" in expr and 'container="chunkd"' in expr
    rules = tmp_path / "chart-memory.yml"
    rules.write_text(yaml.safe_dump({"groups": groups}))
    assert "SUCCESS" in unit_test(rules, tmp_path, memory_test(limit_series=True))
    assert "SUCCESS" in unit_test(rules, tmp_path, memory_test(limit_series=False))


def test_chart_memory_rule_with_a_fixed_limit(chart: Chart) -> None:
    groups = rendered_groups(chart, "--set", "metrics.prometheusRule.enabled=true",
                             "--set", "metrics.prometheusRule.memoryLimitBytes=3000000000")
    expr = alerts(groups)["ChunkdMemoryNearLimit"]["expr"]
    assert expr == ("max by (namespace, job, instance) (process_resident_memory_bytes"
                    f'{{job="{RELEASE}-chunkd", namespace="{NAMESPACE}"}}) / 3000000000 > 0.9')


def test_chart_rule_metadata_and_labels(chart: Chart) -> None:
    objects = chart.render("-f", CHART / "ci" / "production-values.yaml")
    rule = one(objects, "PrometheusRule")
    assert rule["metadata"]["namespace"] == NAMESPACE
    assert rule["metadata"]["labels"]["release"] == "kube-prometheus-stack"
    for alert in alerts(rule["spec"]["groups"]).values():
        assert alert["labels"]["team"] == "storage"
        assert alert["labels"]["severity"] in ("critical", "warning", "info")
    custom = rendered_groups(chart, "--set", "metrics.prometheusRule.enabled=true",
                             "--set-string", 'metrics.prometheusRule.selector=app="chunkd"',
                             "--set", "metrics.prometheusRule.additionalRuleLabels.severity=page")
    down = alerts(custom)["ChunkdDown"]
    assert down["expr"] == 'up{app="chunkd"} == 0'
    assert down["labels"]["severity"] == "critical", "a rule's own labels win"
