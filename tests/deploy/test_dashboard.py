"""The Grafana dashboard on a shared Prometheus: its datasource, job,
namespace and instance variables, every panel query filtered by all three,
and a real Prometheus scraping two chunkd releases, where the queries with
release 1's variables see release 1 only.

(tests/e2e/test_metrics.py checks the other half: that every query parses and
uses only metrics chunkd exports.)
"""

from __future__ import annotations

import json
import os
import re
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any, Iterator

import pytest

from conftest import BUILD, DEPLOY, Process, free_port, run, tool, which

DASHBOARD = DEPLOY / "grafana" / "dashboards" / "chunkd.json"
FILTERS = ('job=~"$job"', 'namespace=~"$namespace"', 'instance=~"$instance"')
DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}
AGGREGATIONS = {"sum", "min", "max", "avg", "group", "stddev", "stdvar", "count",
                "count_values", "bottomk", "topk", "quantile"}
STRING = re.compile(r'"(?:[^"\\]|\\.)*"')
KEYWORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "bool", "and",
            "or", "unless", "offset", "inf", "nan"}


def dashboard() -> dict:
    return json.loads(DASHBOARD.read_text())


def panels(items: list) -> Iterator[dict]:
    for panel in items:
        yield panel
        yield from panels(panel.get("panels", []))


def targets() -> list[tuple[str, dict]]:
    """(panel title, target) of every query on the dashboard."""
    return [(p["title"], t) for p in panels(dashboard()["panels"]) for t in p.get("targets", [])]


def closing_brace(expr: str, start: int) -> int:
    """The index of the "}" that closes the "{" at `start`, past strings."""
    i = start + 1
    while expr[i] != "}":
        i = STRING.match(expr, i).end() if expr[i] == '"' else i + 1
    return i


def selectors(expr: str) -> list[tuple[str, str]]:
    """(metric name, label matchers) of every vector selector of a PromQL
    expression: identifiers outside strings, braces, brackets and label
    lists that are neither functions, aggregations nor keywords."""
    out = []
    i = 0
    while i < len(expr):
        c = expr[i]
        if c == '"':
            i = STRING.match(expr, i).end()
        elif c == "[":
            i = expr.index("]", i) + 1
        elif c == "{":
            raise AssertionError(f"label matchers without a metric name at {i}: {expr}")
        elif c.isalpha() or c in "_:":
            m = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*").match(expr, i)
            word, i = m.group(0), m.end()
            rest = expr[i:].lstrip()
            if word in ("by", "without", "on", "ignoring", "group_left", "group_right"):
                if rest.startswith("("):
                    i = expr.index(")", i) + 1
            elif word.lower() in KEYWORDS | AGGREGATIONS or rest.startswith("("):
                continue
            elif i > len(word) and (expr[i - len(word) - 1].isdigit()
                                    or expr[i - len(word) - 1] == "."):
                continue  # 1e3
            elif rest.startswith("{"):
                start = expr.index("{", i)
                end = closing_brace(expr, start)
                out.append((word, expr[start + 1:end]))
                i = end + 1
            else:
                out.append((word, ""))
        else:
            i += 1
    return out


def unfiltered(expr: str) -> list[str]:
    """The selectors of `expr` that lack one of the three filters."""
    return [f"{name}{{{matchers}}}" for name, matchers in selectors(expr)
            if not all(f in matchers for f in FILTERS)]


def test_selector_parser() -> None:
    expr = ('histogram_quantile(0.99, sum by (op, le) (rate(a_bucket{x="{y}",le!="b \\" c"}[5m])))'
            ' / on (op) group_left (x) max without (z) (b_total) offset 5m > bool 1e3 - time()')
    assert selectors(expr) == [("a_bucket", 'x="{y}",le!="b \\" c"'), ("b_total", "")]
    assert unfiltered('sum(up{job=~"$job"}) / sum(x{' + ", ".join(FILTERS) + "})") == [
        'up{job=~"$job"}']


def test_variables_are_chained() -> None:
    variables = {v["name"]: v for v in dashboard()["templating"]["list"]}
    assert list(variables) == ["datasource", "job", "namespace", "instance"]
    assert variables["datasource"]["type"] == "datasource"
    assert variables["datasource"]["query"] == "prometheus"
    chain = {
        "job": "label_values(chunkd_build_info, job)",
        "namespace": 'label_values(chunkd_build_info{job=~"$job"}, namespace)',
        "instance": 'label_values(chunkd_build_info{job=~"$job", namespace=~"$namespace"}, '
                    "instance)",
    }
    for name, query in chain.items():
        v = variables[name]
        assert v["type"] == "query", name
        assert v["datasource"] == DATASOURCE, name
        assert v["definition"] == v["query"]["query"] == query, name
        assert v["multi"] is True and v["includeAll"] is True, name
        # All must also match a series without the label (compose: no namespace).
        assert v["allValue"] == ".*", name
        assert v["refresh"] == 2, f"{name}: refresh on time range change"


def test_every_query_is_filtered_and_uses_the_datasource() -> None:
    board = dashboard()
    found = 0
    for panel in panels(board["panels"]):
        if panel["type"] == "row":
            assert not panel.get("targets"), panel["title"]
            continue
        assert panel["datasource"] == DATASOURCE, panel["title"]
        assert panel["targets"], panel["title"]
        for target in panel["targets"]:
            found += 1
            where = f"{panel['title']} / {target['refId']}"
            assert target["datasource"] == DATASOURCE, where
            assert selectors(target["expr"]), f"{where} selects no metric"
            assert unfiltered(target["expr"]) == [], where
    assert found >= 30
    assert "DS_PROMETHEUS" not in DASHBOARD.read_text()


def test_error_ratio_panel() -> None:
    [(title, target)] = [(t, x) for t, x in targets() if t == "Error ratio by method"]
    expr = target["expr"]
    numerator, denominator = expr.split(" / ")
    assert "sum by (grpc_service, grpc_method)" in numerator
    assert "sum by (grpc_service, grpc_method)" in denominator
    assert [n for n, _ in selectors(numerator)] == ["grpc_server_handled_total"]
    assert [n for n, _ in selectors(denominator)] == ["grpc_server_handled_total"]
    assert 'grpc_code=~"Unknown|Internal|Unavailable|DataLoss|DeadlineExceeded"' in numerator
    assert "grpc_code" not in denominator


#: The families chunkd exports with the rocksdb index only.
ROCKSDB_FAMILIES = {"chunkd_index_disk_bytes", "chunkd_index_pending_compaction_bytes",
                    "chunkd_index_running_compactions",
                    "chunkd_index_write_stall_seconds_total",
                    "chunkd_index_block_cache_requests_total",
                    "chunkd_index_block_cache_bytes"}


def test_rocksdb_row() -> None:
    """A collapsed row of its own (nothing to see with another index), whose
    queries show rocksdb replicas only: each selects the rocksdb index's own
    families, or the entries of the replicas that have one of them."""
    [row] = [p for p in dashboard()["panels"] if p["title"] == "RocksDB index"]
    assert row["type"] == "row" and row["collapsed"] is True
    assert [p["title"] for p in row["panels"]] == [
        "Disk bytes and entries", "Pending compaction bytes and running compactions",
        "Write stall share", "Block cache hit ratio", "Block cache used and capacity"]
    shown = set()
    for panel in row["panels"]:
        assert panel["gridPos"]["y"] > row["gridPos"]["y"], panel["title"]
        for target in panel["targets"]:
            names = [name for name, _ in selectors(target["expr"])]
            shown |= set(names)
            if "chunkd_index_entries" in names:
                assert names == ["chunkd_index_entries", "chunkd_index_disk_bytes"]
                assert " and on (namespace, job, instance) " in target["expr"]
            else:
                assert set(names) <= ROCKSDB_FAMILIES, (panel["title"], names)
    assert shown == ROCKSDB_FAMILIES | {"chunkd_index_entries"}
    # The rows below it start right under it, as Grafana lays out a collapsed row.
    top = dashboard()["panels"]
    below = top[top.index(row) + 1]
    assert below["type"] == "row" and below["gridPos"]["y"] == row["gridPos"]["y"] + 1


def test_block_cache_hit_ratio_panel() -> None:
    [(title, target)] = [(t, x) for t, x in targets() if t == "Block cache hit ratio"]
    numerator, denominator = target["expr"].split(" / ")
    for part in (numerator, denominator):
        assert part.startswith("sum by (job, instance) (rate("), part
        assert [n for n, _ in selectors(part)] == ["chunkd_index_block_cache_requests_total"]
    assert 'result="hit"' in numerator
    assert "result" not in denominator, "hits divided by every lookup, hits and misses"


# --- two releases on one Prometheus ------------------------------------------

RELEASES = {"r1": "team-a", "r2": "team-b"}  # job -> namespace
SCRAPE_SECONDS = 1


class Prometheus:
    """prometheus (the Debian binary) on a loopback port with its own
    storage, scraping each chunkd as its own job with a namespace label (as
    the operator's ServiceMonitor would)."""

    def __init__(self, targets: dict[str, str], tmp: Path, processes: list[Process]) -> None:
        binary = which("prometheus")
        if binary is None:
            pytest.fail("prometheus is missing: make deps (Debian package prometheus)",
                        pytrace=False)
        config = tmp / "prometheus.yml"
        config.write_text(json.dumps({  # JSON is YAML
            "global": {"scrape_interval": f"{SCRAPE_SECONDS}s", "scrape_timeout": "1s",
                       "evaluation_interval": "1s"},
            "scrape_configs": [{
                "job_name": job,
                "static_configs": [{"targets": [address],
                                    "labels": {"namespace": RELEASES[job]}}],
            } for job, address in targets.items()],
        }))
        self.port = free_port()
        self.process = Process([binary, f"--config.file={config}",
                                f"--storage.tsdb.path={tmp / 'tsdb'}",
                                f"--web.listen-address=127.0.0.1:{self.port}",
                                "--log.level=warn"], tmp / "prometheus.log")
        processes.append(self.process)
        self.process.wait_for_port(self.port, timeout=60)

    def api(self, path: str, **params: Any) -> Any:
        query = urllib.parse.urlencode(params, doseq=True)
        url = f"http://127.0.0.1:{self.port}/api/v1/{path}?{query}"
        try:
            with urllib.request.urlopen(url, timeout=30) as response:
                body = json.load(response)
        except urllib.error.HTTPError as e:
            pytest.fail(f"{path} {params}: {e.code} {e.read().decode()}", pytrace=False)
        assert body["status"] == "success", body
        return body["data"]

    def query(self, expr: str) -> list[dict]:
        data = self.api("query", query=expr)
        assert data["resultType"] in ("vector", "scalar"), (expr, data["resultType"])
        return data["result"] if data["resultType"] == "vector" else []

    def wait_until(self, predicate, what: str, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if predicate():
                return
            time.sleep(0.5)
        pytest.fail(f"Prometheus: {what} after {timeout}s", pytrace=False)


def substitute(expr: str, variables: dict[str, str]) -> str:
    expr = expr.replace("$__rate_interval", "1m")
    for name, value in variables.items():
        expr = expr.replace(f"${name}", value)
    assert "$" not in expr, expr
    return expr


@pytest.fixture
def chunkctl_bin() -> Path:
    return tool("CHUNKCTL_BIN", BUILD / "clients" / "cli" / "chunkctl", "make build")


def test_queries_see_only_the_selected_release(chunkd_bin: Path, chunkctl_bin: Path,
                                               processes: list, tmp_path: Path) -> None:
    addresses, metrics = {}, {}
    for job in RELEASES:
        port, metrics_port = free_port(), free_port()
        # The rocksdb index (with a limit) exports every index family the
        # dashboard shows, its own row's too.
        server = Process([chunkd_bin, f"--listen=127.0.0.1:{port}",
                          f"--metrics_listen=127.0.0.1:{metrics_port}",
                          f"--index=rocksdb://{tmp_path / job / 'index'}",
                          "--index_max_entries=1000000", "--index_cache_mib=16",
                          "--threads=1"], tmp_path / f"chunkd-{job}.log")
        processes.append(server)
        server.wait_for_port(port)
        server.wait_for_port(metrics_port)
        addresses[job], metrics[job] = f"127.0.0.1:{port}", f"127.0.0.1:{metrics_port}"
    prometheus = Prometheus(metrics, tmp_path, processes)

    # Traffic on release 1 only: the same file twice, so half of it is duplicate.
    data = tmp_path / "data.bin"
    data.write_bytes(os.urandom(300_000))
    run([chunkctl_bin, "dedup", "--server", addresses["r1"], "--namespace", "dash", data, data])
    sent = 2 * data.stat().st_size
    ingest = 'sum(chunkd_ingest_bytes_total{job="r1", rpc="Dedup"})'
    prometheus.wait_until(
        lambda: [float(s["value"][1]) for s in prometheus.query(ingest)] == [sent],
        f"{ingest} is not {sent}")
    prometheus.wait_until(lambda: len(prometheus.query("chunkd_build_info")) == 2,
                          "not both releases scraped")
    # Enough samples for rate() over 1m: two scrapes of each release.
    rate = 'rate(chunkd_build_info[1m])'
    prometheus.wait_until(lambda: len(prometheus.query(rate)) == 2, f"{rate} has no value")

    # The chained variables, as Grafana asks for them (series API).
    def label_values(selector: str, label: str) -> set[str]:
        series = prometheus.api("series", **{"match[]": selector})
        return {s.get(label, "") for s in series}

    assert label_values("chunkd_build_info", "job") == {"r1", "r2"}
    assert label_values('chunkd_build_info{job=~"r1"}', "namespace") == {"team-a"}
    assert label_values('chunkd_build_info{job=~"r1", namespace=~"team-a"}', "instance") == {
        metrics["r1"]}

    # Each variable alone picks release 1 (the others at All).
    everything = {"job": ".*", "namespace": ".*", "instance": ".*"}
    choices = [{**everything, "job": "r1"}, {**everything, "namespace": "team-a"},
               {**everything, "instance": metrics["r1"]},
               {"job": "r1", "namespace": "team-a", "instance": metrics["r1"]}]
    release1 = {"job": "r1", "namespace": "team-a", "instance": metrics["r1"]}
    nonempty = set()
    for variables in choices:
        for title, target in targets():
            expr = substitute(target["expr"], variables)
            # Every selector of the query, alone, returns release 1's series only.
            for name, matchers in selectors(expr):
                for series in prometheus.query(f"{name}{{{matchers}}}"):
                    labels = series["metric"]
                    assert {k: labels.get(k) for k in release1} == release1, (title, labels)
                    nonempty.add(name)
            # And what the query returns names no other release.
            for series in prometheus.query(expr):
                for label, value in release1.items():
                    assert series["metric"].get(label, value) == value, (title, series)
    # The selectors did return data (an empty answer would pass the loop above).
    assert {"chunkd_build_info", "chunkd_ingest_bytes_total", "grpc_server_handled_total",
            "chunkd_index_requests_total", "chunkd_index_request_duration_seconds_bucket",
            "grpc_server_handling_seconds_bucket", "chunkd_index_entries",
            "chunkd_index_max_entries"} | ROCKSDB_FAMILIES <= nonempty

    # Release 1's totals are what was sent to it; release 2's are zero, and the
    # same query with All counts release 1's bytes once.
    [(title, totals)] = [(t, x) for t, x in targets()
                         if t == "Totals since start by rpc and algorithm" and x["refId"] == "A"]

    def dedup_bytes(variables: dict[str, str]) -> float:
        result = prometheus.query(substitute(totals["expr"], variables))
        return sum(float(s["value"][1]) for s in result
                   if s["metric"] == {"rpc": "Dedup", "algorithm": "fastcdc"})

    assert dedup_bytes(release1) == sent
    assert dedup_bytes({"job": "r2", "namespace": ".*", "instance": ".*"}) == 0
    assert dedup_bytes(everything) == sent
    [(title, ratio)] = [(t, x) for t, x in targets() if t == "Dedup ratio since start"]
    assert [float(s["value"][1]) for s in prometheus.query(substitute(ratio["expr"], release1))] \
        == [2.0]
