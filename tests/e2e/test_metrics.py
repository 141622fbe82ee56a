"""The metrics chunkd exports (docs/operations.md, "Metrics"): what a fresh server
exports, that promtool accepts it, that the Grafana dashboard's every query
parses and uses only exported metrics, and a real Prometheus scraping a real
chunkd whose numbers must equal the traffic sent."""

from __future__ import annotations

import json
import re
import threading
import time
from pathlib import Path
from typing import Iterator

import grpc
import pytest

from chunkd_client import Client, ChunkdError
from chunkd_client.testing import ChunkdServer, serving

from chunkd_client._proto.chunkd.v1 import chunkd_pb2 as pb

from e2e_util import REPO, RPC_TIMEOUT, fastcdc_params, random_bytes
from e2e_util import stub as stub_for
from metrics_util import (
    PROCESS_FAMILIES,
    PrometheusServer,
    dashboard,
    dashboard_expressions,
    dashboard_rows,
    metric_names,
    parse_samples,
    promtool,
    scrape,
    value,
)

ALGORITHMS = ["fastcdc", "crc32", "seqcdc", "fixed", "repmaxcdc", "rabin", "buzhash"]
RPCS = ["Chunk", "Dedup", "Estimate"]
STAGES = ["chunk", "fingerprint", "index"]
HINT_TESTS = ["ff", "ff_mt", "ff_rwt", "ff_rwt_fpt"]
INDEX_OPS = ["lookup", "insert", "release", "hints", "health"]
GRPC_CODES = [
    "OK", "Canceled", "Unknown", "InvalidArgument", "DeadlineExceeded",
    "NotFound", "AlreadyExists", "PermissionDenied", "ResourceExhausted",
    "FailedPrecondition", "Aborted", "OutOfRange", "Unimplemented", "Internal",
    "Unavailable", "DataLoss", "Unauthenticated",
]
#: (grpc_type, grpc_service, grpc_method) of every method chunkd serves.
GRPC_METHODS = [
    ("bidi_stream", "chunkd.v1.ChunkService", "Chunk"),
    ("bidi_stream", "chunkd.v1.ChunkService", "Dedup"),
    ("bidi_stream", "chunkd.v1.ChunkService", "Estimate"),
    ("unary", "chunkd.v1.ChunkService", "FindMissing"),
    ("unary", "chunkd.v1.ChunkService", "GetServerInfo"),
    ("unary", "grpc.health.v1.Health", "Check"),
    ("server_stream", "grpc.health.v1.Health", "Watch"),
    ("bidi_stream", "grpc.reflection.v1alpha.ServerReflection", "ServerReflectionInfo"),
]
#: Every metric family chunkd exports with the memory index, with its type.
FAMILIES = {
    "grpc_server_started_total": "counter",
    "grpc_server_handled_total": "counter",
    "grpc_server_handling_seconds": "histogram",
    "chunkd_ingest_bytes_total": "counter",
    "chunkd_chunks_total": "counter",
    "chunkd_duplicate_bytes_total": "counter",
    "chunkd_duplicate_chunks_total": "counter",
    "chunkd_stage_seconds_total": "counter",
    "chunkd_active_streams": "gauge",
    "chunkd_worker_queue_depth": "gauge",
    "chunkd_stream_memory_bytes": "gauge",
    "chunkd_streams_waiting_for_memory": "gauge",
    "chunkd_index_requests_total": "counter",
    "chunkd_index_request_duration_seconds": "histogram",
    "chunkd_hints_total": "counter",
    "chunkd_hint_skipped_bytes_total": "counter",
    "chunkd_hint_cache_total": "counter",
    "chunkd_build_info": "gauge",
    "chunkd_chunking_backend_info": "gauge",
    "chunkd_streams_rejected_total": "counter",
    "chunkd_connections_closed_total": "counter",
    "chunkd_tls_handshake_failures_total": "counter",
    "chunkd_index_entries": "gauge",
    "chunkd_index_max_entries": "gauge",
}
#: The families chunkd exports with the rocksdb index only (beside
#: FAMILIES), with their type and the label sets of their series.
ROCKSDB_FAMILIES = {
    "chunkd_index_disk_bytes": ("gauge", [{}]),
    "chunkd_index_pending_compaction_bytes": ("gauge", [{}]),
    "chunkd_index_running_compactions": ("gauge", [{}]),
    "chunkd_index_write_stall_seconds_total": ("counter", [{}]),
    "chunkd_index_block_cache_requests_total": ("counter", [{"result": "hit"},
                                                            {"result": "miss"}]),
    "chunkd_index_block_cache_bytes": ("gauge", [{"state": "used"}, {"state": "capacity"}]),
}
#: The dashboard row of the rocksdb index's panels.
ROCKSDB_ROW = "RocksDB index"
#: chunkd_streams_rejected_total{reason}.
REJECT_REASONS = ["limit", "per_token_limit", "per_ip_limit", "per_connection_limit",
                  "rate", "idle",
                  "token", "auth", "shutdown"]


def _family_types(text: str) -> dict:
    types = {}
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split()
            types[name] = kind
    return types


def _check_promtool(text: str) -> None:
    result = promtool("check", "metrics", stdin=text)
    assert result.returncode == 0 and result.stdout.strip() == "" and (
        result.stderr.strip() == ""
    ), f"promtool check metrics:\n{result.stdout}{result.stderr}"


@pytest.fixture
def fresh_server(chunkd_bin: Path, tmp_path: Path) -> Iterator[ChunkdServer]:
    """A chunkd that has served nothing but the health checks of its start,
    without a memory limit whatever the machine's (its defaults would be
    sized to one)."""
    no_limit = tmp_path / "memory.max"
    no_limit.write_text("max\n")
    yield from serving(ChunkdServer(
        chunkd_bin, extra_args=[f"--memory_limit_file={no_limit}"]))


@pytest.fixture(scope="module")
def rocksdb_server(chunkd_bin: Path,
                   tmp_path_factory: pytest.TempPathFactory) -> Iterator[ChunkdServer]:
    """chunkd with the rocksdb index in a directory of its own and an entry
    limit, so that it exports every index family the dashboard and the
    alerts use."""
    directory = tmp_path_factory.mktemp("rocksdb") / "index"
    yield from serving(ChunkdServer(
        chunkd_bin, index=f"rocksdb://{directory}",
        extra_args=["--index_max_entries=1000000", "--index_cache_mib=16"]))


def test_rocksdb_server_exports_its_families(rocksdb_server: ChunkdServer) -> None:
    text = scrape(rocksdb_server.metrics_address)
    _check_promtool(text)
    types = _family_types(text)
    assert {k: v for k, v in types.items() if not k.startswith("exposer_")} == {
        **FAMILIES, **{name: kind for name, (kind, _) in ROCKSDB_FAMILIES.items()},
        **PROCESS_FAMILIES}
    samples = parse_samples(text)
    for name, (_, label_sets) in ROCKSDB_FAMILIES.items():
        found = [labels for n, labels, _ in samples if n == name]
        assert sorted(found, key=str) == sorted(label_sets, key=str), name
    assert value(samples, "chunkd_index_block_cache_bytes", state="capacity") == 16 << 20
    assert value(samples, "chunkd_index_max_entries") == 1000000


def test_fresh_server_exports_every_series_at_zero(fresh_server: ChunkdServer) -> None:
    # The index health monitor probes on a thread of its own, started with
    # the server: SERVING does not say that its first probe is done.
    _wait_for(fresh_server, lambda s: (value(s, "chunkd_index_requests_total", backend="memory",
                                             op="health", result="ok") or 0) >= 1,
              "the first probe of the index")
    text = scrape(fresh_server.metrics_address)
    _check_promtool(text)
    # prometheus-cpp adds its own exposer_* families (scrapes served).
    types = _family_types(text)
    assert {k: v for k, v in types.items() if not k.startswith("exposer_")} == {
        **FAMILIES, **PROCESS_FAMILIES}
    samples = parse_samples(text)

    for rpc in RPCS:
        for alg in ALGORITHMS:
            assert value(samples, "chunkd_ingest_bytes_total", rpc=rpc, algorithm=alg) == 0
            assert value(samples, "chunkd_chunks_total", rpc=rpc, algorithm=alg) == 0
    for alg in ALGORITHMS:
        assert value(samples, "chunkd_duplicate_bytes_total", algorithm=alg) == 0
        assert value(samples, "chunkd_duplicate_chunks_total", algorithm=alg) == 0
    for stage in STAGES:
        assert value(samples, "chunkd_stage_seconds_total", stage=stage) == 0
    assert value(samples, "chunkd_active_streams") == 0
    assert value(samples, "chunkd_worker_queue_depth") == 0
    assert value(samples, "chunkd_stream_memory_bytes", state="reserved") == 0
    assert value(samples, "chunkd_stream_memory_bytes", state="waiting") == 0
    assert value(samples, "chunkd_stream_memory_bytes", state="limit") > 0
    assert value(samples, "chunkd_streams_waiting_for_memory") == 0
    for reason in REJECT_REASONS:
        assert value(samples, "chunkd_streams_rejected_total", reason=reason) == 0
    assert value(samples, "chunkd_connections_closed_total", reason="stream_rate") == 0
    assert value(samples, "chunkd_tls_handshake_failures_total") == 0
    assert value(samples, "chunkd_index_entries") == 0
    # The default --index_max_entries: half of the 1 GiB --memory_budget at
    # 400 bytes an entry.
    assert value(samples, "chunkd_index_max_entries") == (1 << 30) // 2 // 400
    for test in HINT_TESTS:
        for result in ["accepted", "rejected"]:
            assert value(samples, "chunkd_hints_total", test=test, result=result) == 0
        assert value(samples, "chunkd_hint_skipped_bytes_total", test=test) == 0
    for result in ["hit", "miss"]:
        assert value(samples, "chunkd_hint_cache_total", result=result) == 0
    # The index health monitor probes the index from the start (once a
    # second; waited for above): its series counts; every other one is
    # still at zero.
    for op in INDEX_OPS:
        for result in ["ok", "error"]:
            count = value(samples, "chunkd_index_requests_total",
                          backend="memory", op=op, result=result)
            if op == "health" and result == "ok":
                assert count >= 1
            else:
                assert count == 0, (op, result)
        if op != "health":
            assert value(samples, "chunkd_index_request_duration_seconds_count",
                         backend="memory", op=op) == 0
            assert value(samples, "chunkd_index_request_duration_seconds_bucket",
                         backend="memory", op=op, le="+Inf") == 0
    assert value(samples, "chunkd_build_info", version=(REPO / "VERSION").read_text().strip(),
                 backend=_backend(fresh_server)) == 1
    # One series per algorithm: the kernel its streams run, as GetServerInfo
    # reports it, on the worker pool's thread count.
    with Client(fresh_server.address, timeout=RPC_TIMEOUT) as client:
        info = client.server_info()
    backend_series = [(labels, v) for name, labels, v in samples
                      if name == "chunkd_chunking_backend_info"]
    assert len(backend_series) == len(ALGORITHMS), backend_series
    for a in info.algorithms:
        assert value(samples, "chunkd_chunking_backend_info", algorithm=a.name,
                     threads=str(a.backend_threads), backend=a.backend) == 1, a

    for grpc_type, service, method in GRPC_METHODS:
        labels = dict(grpc_type=grpc_type, grpc_service=service, grpc_method=method)
        # The start-up health checks are the only RPCs so far.
        health = (service, method) == ("grpc.health.v1.Health", "Check")
        started = value(samples, "grpc_server_started_total", **labels)
        assert started is not None and (started >= 1 if health else started == 0), labels
        for code in GRPC_CODES:
            handled = value(samples, "grpc_server_handled_total", **labels, grpc_code=code)
            assert handled is not None, (labels, code)
            if not (health and code == "OK"):
                assert handled == 0, (labels, code)
        count = value(samples, "grpc_server_handling_seconds_count", **labels)
        assert count is not None and (count >= 1 if health else count == 0), labels


def _backend(server: ChunkdServer) -> str:
    with Client(server.address, timeout=RPC_TIMEOUT) as client:
        return client.server_info().chunking_backend


def test_interceptor_counts_every_rpc_by_code(fresh_server: ChunkdServer) -> None:
    data = random_bytes(seed=7, size=200_000)
    with Client(fresh_server.address, timeout=RPC_TIMEOUT) as client:
        client.chunk_all(data, algorithm="fixed", avg_size=65536)
        client.dedup_all(data, namespace="interceptor", algorithm="seqcdc")
        client.find_missing("interceptor", [b"\0" * 32])
        client.server_info()
        with pytest.raises(ChunkdError) as error:
            client.chunk_all(data, algorithm="fastcdc", avg_size=3)
        assert error.value.code == grpc.StatusCode.INVALID_ARGUMENT
        with pytest.raises(ChunkdError) as error:
            client.find_missing("no spaces allowed", [])
        assert error.value.code == grpc.StatusCode.INVALID_ARGUMENT
    # A method no service has: counted, but not under a name a client chose.
    with grpc.insecure_channel(fresh_server.address) as channel:
        bogus = channel.unary_unary("/chunkd.v1.ChunkService/NoSuchMethod")
        with pytest.raises(grpc.RpcError) as error:
            bogus(b"", timeout=RPC_TIMEOUT)
        assert error.value.code() == grpc.StatusCode.UNIMPLEMENTED

    text = scrape(fresh_server.metrics_address)
    _check_promtool(text)
    samples = parse_samples(text)
    service = "chunkd.v1.ChunkService"

    def handled(method: str, kind: str, code: str) -> float:
        return value(samples, "grpc_server_handled_total", grpc_type=kind,
                     grpc_service=service, grpc_method=method, grpc_code=code)

    assert handled("Chunk", "bidi_stream", "OK") == 1
    assert handled("Chunk", "bidi_stream", "InvalidArgument") == 1
    assert handled("Dedup", "bidi_stream", "OK") == 1
    assert handled("FindMissing", "unary", "OK") == 1
    assert handled("FindMissing", "unary", "InvalidArgument") == 1
    assert handled("GetServerInfo", "unary", "OK") == 1
    for method, kind in [("Chunk", "bidi_stream"), ("Dedup", "bidi_stream"),
                         ("FindMissing", "unary")]:
        labels = dict(grpc_type=kind, grpc_service=service, grpc_method=method)
        started = value(samples, "grpc_server_started_total", **labels)
        total = sum(handled(method, kind, code) for code in GRPC_CODES)
        assert started == total, (method, started, total)
        assert value(samples, "grpc_server_handling_seconds_count", **labels) == total
        assert value(samples, "grpc_server_handling_seconds_bucket", **labels,
                     le="+Inf") == total
    names = {(l.get("grpc_service"), l.get("grpc_method"))
             for n, l, _ in samples if n == "grpc_server_handled_total"}
    assert (service, "NoSuchMethod") not in names
    unknown = [v for n, l, v in samples if n == "grpc_server_handled_total"
               and l["grpc_method"] == "unknown" and l["grpc_code"] == "Unimplemented"]
    assert unknown == [1]

    # Stage time and index calls of that traffic.
    for stage in STAGES:
        assert value(samples, "chunkd_stage_seconds_total", stage=stage) > 0, stage
    assert value(samples, "chunkd_index_requests_total", backend="memory",
                 op="lookup", result="ok") == 1
    assert value(samples, "chunkd_index_requests_total", backend="memory",
                 op="insert", result="ok") >= 1
    assert value(samples, "chunkd_index_requests_total", backend="memory",
                 op="insert", result="error") == 0


def test_dashboard_uses_the_datasource_variable() -> None:
    board = dashboard()
    variables = {v["name"]: v for v in board["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource"
    assert variables["datasource"]["query"] == "prometheus"
    ids = []

    def walk(panels: list) -> None:
        for panel in panels:
            ids.append(panel["id"])
            if panel["type"] != "row":
                assert panel["datasource"]["uid"] == "${datasource}", panel["title"]
                assert panel["targets"], panel["title"]
                for target in panel["targets"]:
                    assert target["datasource"]["uid"] == "${datasource}"
            walk(panel.get("panels", []))

    walk(board["panels"])
    assert len(ids) == len(set(ids)), "panel ids must be unique"


def test_dashboard_expressions_parse(tmp_path: Path) -> None:
    expressions = dashboard_expressions()
    assert len(expressions) >= 15
    rules = {"groups": [{"name": "dashboard", "rules": [
        {"record": f"chunkd_dashboard:query_{i}", "expr": expr}
        for i, (_, expr) in enumerate(expressions)]}]}
    path = tmp_path / "dashboard_rules.yml"
    path.write_text(json.dumps(rules, indent=1))  # JSON is YAML
    result = promtool("check", "rules", str(path))
    assert result.returncode == 0, f"{result.stdout}{result.stderr}"
    assert f"SUCCESS: {len(expressions)} rules found" in result.stdout, result.stdout

    # promtool really parses: a broken expression fails the same check.
    broken = tmp_path / "broken.yml"
    broken.write_text(json.dumps({"groups": [{"name": "b", "rules": [
        {"record": "x:y", "expr": "sum by (rpc (rate(chunkd_chunks_total[1m]))"}]}]}))
    assert promtool("check", "rules", str(broken)).returncode != 0


def test_metric_name_extraction() -> None:
    assert metric_names(
        'histogram_quantile(0.99, sum by (op, le) (rate(a_bucket{result="x",le!="b c"}[5m])))'
        ' / on (op) group_left (x) b_total offset 5m > bool 1e3'
    ) == {"a_bucket", "b_total"}


def _exported(*servers: ChunkdServer) -> set:
    """The metric names the servers export, together."""
    return {name for server in servers
            for name, _, _ in parse_samples(scrape(server.metrics_address))}


def test_dashboard_uses_only_exported_metrics(server: ChunkdServer,
                                              rocksdb_server: ChunkdServer) -> None:
    with Client(server.address, timeout=RPC_TIMEOUT) as client:
        client.dedup_all(random_bytes(seed=9, size=100_000), namespace="dashboard")
    # The memory index's and the rocksdb index's (its own row).
    exported = _exported(server, rocksdb_server)
    used = set()
    for where, expr in dashboard_expressions():
        names = metric_names(expr)
        assert names, f"{where} selects no metric: {expr}"
        missing = names - exported
        assert not missing, f"{where} uses {sorted(missing)}, not exported: {expr}"
        used |= names
    # Every family is on the dashboard.
    kinds = {**FAMILIES, **{name: kind for name, (kind, _) in ROCKSDB_FAMILIES.items()}}
    for family, kind in kinds.items():
        wanted = family + "_bucket" if kind == "histogram" else family
        assert wanted in used, f"the dashboard does not show {wanted}"


def test_alert_rules_use_only_exported_metrics(server: ChunkdServer,
                                               rocksdb_server: ChunkdServer) -> None:
    """Every metric deploy/prometheus/chunkd-alerts.yml selects is one chunkd
    exports, with the memory or the rocksdb index (a renamed metric would
    leave an alert that never fires)."""
    exported = _exported(server, rocksdb_server)
    # up: Prometheus' own series of each target (ChunkdDown, ChunkdTargetMissing).
    exported.add("up")
    text = (REPO / "deploy" / "prometheus" / "chunkd-alerts.yml").read_text()
    # Each rule is "- alert: NAME" followed by its one-line "expr:".
    alerts = re.findall(r"- alert: (\w+)\n\s+expr: (.+)\n", text)
    assert len(alerts) == text.count("- alert:") >= 17
    for alert, expr in alerts:
        names = metric_names(expr)
        assert names, alert
        assert names <= exported, f"{alert} uses {sorted(names - exported)}"


# --- a real Prometheus ------------------------------------------------------


@pytest.fixture
def scraped(chunkd_bin: Path) -> Iterator[tuple]:
    """A fresh chunkd and a Prometheus scraping it every second (fresh per
    test, so that each test knows every RPC the server has seen)."""
    for chunkd in serving(ChunkdServer(chunkd_bin)):
        with PrometheusServer([chunkd.metrics_address]) as prometheus:
            yield chunkd, prometheus


def _by(result: list, *labels: str) -> dict:
    out = {}
    for sample in result:
        key = tuple(sample["metric"].get(label, "") for label in labels)
        assert key not in out, f"duplicate series {key}"
        out[key] = float(sample["value"][1])
    return out


def test_prometheus_sees_the_traffic_sent(scraped: tuple) -> None:
    chunkd, prometheus = scraped
    a = random_bytes(seed=101, size=2_000_000)
    b = random_bytes(seed=102, size=1_000_001)
    c = random_bytes(seed=103, size=1_500_000)
    with Client(chunkd.address, timeout=RPC_TIMEOUT) as client:
        a_records, _ = client.chunk_all(a, algorithm="fastcdc", message_size=300_000)
        b_records, _ = client.chunk_all(b, algorithm="crc32")
        first, _ = client.dedup_all(c, namespace="scrape", algorithm="fastcdc")
        second, summary = client.dedup_all(c, namespace="scrape", algorithm="fastcdc")
        assert summary.unique_bytes == 0 and all(not r.is_new for r in second)
        assert client.find_missing("scrape", [r.fingerprint for r in first[:3]]) == []
        with pytest.raises(ChunkdError) as error:
            client.chunk_all(a, algorithm="fastcdc", min_size=1)
        assert error.value.code == grpc.StatusCode.INVALID_ARGUMENT
    sent = time.time()
    prometheus.wait_for_scrape_after(sent)

    ingest = _by(prometheus.query(
        'sum by (rpc, algorithm) (chunkd_ingest_bytes_total{instance=~".*"})'),
        "rpc", "algorithm")
    chunks = _by(prometheus.query(
        'sum by (rpc, algorithm) (chunkd_chunks_total{instance=~".*"})'),
        "rpc", "algorithm")
    expected_bytes = {(rpc, alg): 0.0 for rpc in RPCS for alg in ALGORITHMS}
    expected_bytes.update({("Chunk", "fastcdc"): len(a), ("Chunk", "crc32"): len(b),
                           ("Dedup", "fastcdc"): 2 * len(c)})
    expected_chunks = {(rpc, alg): 0.0 for rpc in RPCS for alg in ALGORITHMS}
    expected_chunks.update({("Chunk", "fastcdc"): len(a_records),
                            ("Chunk", "crc32"): len(b_records),
                            ("Dedup", "fastcdc"): len(first) + len(second)})
    assert ingest == expected_bytes
    assert chunks == expected_chunks
    duplicate = _by(prometheus.query(
        'sum by (algorithm) (chunkd_duplicate_bytes_total{instance=~".*"})'), "algorithm")
    assert duplicate == {(alg,): (len(c) if alg == "fastcdc" else 0.0)
                         for alg in ALGORITHMS}
    duplicate_chunks = _by(prometheus.query(
        "sum by (algorithm) (chunkd_duplicate_chunks_total)"), "algorithm")
    assert duplicate_chunks[("fastcdc",)] == len(second)

    # The "Dedup ratio since start" panel: every byte was sent twice.
    [ratio] = [expr for where, expr in dashboard_expressions()
               if where.startswith("Dedup ratio since start")]
    assert _by(prometheus.query(ratio)) == {(): 2.0}

    handled = _by(prometheus.query(
        'sum by (grpc_service, grpc_method, grpc_code) '
        '(grpc_server_handled_total{instance=~".*"}) > 0'),
        "grpc_service", "grpc_method", "grpc_code")
    ours = {k[1:]: v for k, v in handled.items() if k[0] == "chunkd.v1.ChunkService"}
    assert ours == {("Chunk", "OK"): 2, ("Chunk", "InvalidArgument"): 1,
                    ("Dedup", "OK"): 2, ("FindMissing", "OK"): 1}
    assert handled[("grpc.health.v1.Health", "Check", "OK")] >= 1
    latency_count = _by(prometheus.query(
        'sum by (grpc_method) (grpc_server_handling_seconds_count'
        '{grpc_service="chunkd.v1.ChunkService"})'), "grpc_method")
    assert latency_count == {("Chunk",): 3, ("Dedup",): 2, ("FindMissing",): 1,
                             ("GetServerInfo",): 0, ("Release",): 0,
                             ("Estimate",): 0}
    lookups = _by(prometheus.query(
        'chunkd_index_requests_total{op="lookup"}'), "backend", "result")
    assert lookups == {("memory", "ok"): 1, ("memory", "error"): 0}
    stages = _by(prometheus.query("sum by (stage) (chunkd_stage_seconds_total)"), "stage")
    assert set(stages) == {(s,) for s in STAGES} and all(v > 0 for v in stages.values())


def test_prometheus_evaluates_every_dashboard_query(scraped: tuple) -> None:
    chunkd, prometheus = scraped
    # A scrape before the traffic, with every series at zero, so that rate()
    # sees the increase.
    prometheus.wait_for_scrape_after(time.time())
    with Client(chunkd.address, timeout=RPC_TIMEOUT) as client:
        client.dedup_all(random_bytes(seed=104, size=500_000), namespace="evaluate",
                         algorithm="seqcdc")
    prometheus.wait_for_scrape_after(time.time())
    rows = dashboard_rows()
    in_rocksdb_row = 0
    for where, expr in dashboard_expressions():
        result = prometheus.query(expr)
        if rows[where.rsplit(" / ", 1)[0]] == ROCKSDB_ROW:
            # The memory index has none of the rocksdb index's series (nor
            # does the entries query, which takes the rocksdb replicas only).
            assert result == [], f"{where}: series without a rocksdb index: {result}"
            in_rocksdb_row += 1
        else:
            assert result, f"{where}: no series from {expr}"
    assert in_rocksdb_row >= 5
    # Rates over the window are positive where traffic went, zero elsewhere.
    rates = _by(prometheus.query(
        'sum by (rpc, algorithm) (rate(chunkd_ingest_bytes_total{instance=~".*"}[1m]))'),
        "rpc", "algorithm")
    assert rates[("Dedup", "seqcdc")] > 0
    assert rates[("Chunk", "fixed")] == 0 and rates[("Dedup", "crc32")] == 0


@pytest.fixture
def scraped_rocksdb(chunkd_bin: Path, tmp_path: Path) -> Iterator[tuple]:
    """A chunkd on a rocksdb index that already holds table files (data
    written before a restart, so that lookups go through the block cache),
    its unique chunk count, and a Prometheus scraping it every second."""
    server = ChunkdServer(chunkd_bin, index=f"rocksdb://{tmp_path / 'index'}",
                          extra_args=["--index_max_entries=1000000", "--index_cache_mib=16"])
    data = random_bytes(seed=105, size=1_000_000)
    for chunkd in serving(server):
        with Client(chunkd.address, timeout=RPC_TIMEOUT) as client:
            records, _ = client.dedup_all(data, namespace="evaluate")
        chunkd.restart()
        with PrometheusServer([chunkd.metrics_address]) as prometheus:
            yield chunkd, prometheus, data, len({r.fingerprint for r in records})


def test_prometheus_evaluates_every_dashboard_query_on_rocksdb(scraped_rocksdb: tuple) -> None:
    chunkd, prometheus, data, unique = scraped_rocksdb
    prometheus.wait_for_scrape_after(time.time())
    # The same data again: every chunk a duplicate, looked up in the tables.
    with Client(chunkd.address, timeout=RPC_TIMEOUT) as client:
        _, summary = client.dedup_all(data, namespace="evaluate")
    assert summary.unique_chunks == 0
    prometheus.wait_for_scrape_after(time.time())
    rows = dashboard_rows()
    panels = {}
    for where, expr in dashboard_expressions():
        result = prometheus.query(expr)
        assert result, f"{where}: no series from {expr}"
        title, ref = where.rsplit(" / ", 1)
        if rows[title] == ROCKSDB_ROW:
            # One replica: one series per query (the cache's: one per state).
            panels[(title, ref)] = {s["metric"].get("state", ""): float(s["value"][1])
                                    for s in result}
    assert panels[("Disk bytes and entries", "A")][""] > 0
    assert panels[("Disk bytes and entries", "B")] == {"": unique}
    assert panels[("Pending compaction bytes and running compactions", "A")][""] >= 0
    assert panels[("Write stall share", "A")][""] >= 0
    # The lookups of the second pass went through the block cache: a ratio,
    # not 0/0.
    assert 0 <= panels[("Block cache hit ratio", "A")][""] <= 1
    cache = panels[("Block cache used and capacity", "A")]
    assert cache["capacity"] == 16 << 20 and 0 < cache["used"] <= cache["capacity"]


# --- paths that end RPCs early, and a remote index ---------------------------


def _wait_for(server: ChunkdServer, predicate, what: str, timeout: float = RPC_TIMEOUT):
    """Scrapes until `predicate(samples)` holds; the interceptor counts an
    RPC that ends without a status when gRPC lets go of it, shortly after
    the client saw the end."""
    deadline = time.monotonic() + timeout
    while True:
        samples = parse_samples(scrape(server.metrics_address))
        if predicate(samples):
            return samples
        assert time.monotonic() < deadline, f"{what}: not seen within {timeout}s"
        time.sleep(0.05)


def test_a_cancelled_stream_is_handled_as_canceled(fresh_server: ChunkdServer) -> None:
    labels = dict(grpc_type="bidi_stream", grpc_service="chunkd.v1.ChunkService",
                  grpc_method="Chunk")
    stop = threading.Event()

    piece = random_bytes(seed=1, size=1 << 20)

    def requests():
        # Endless: the stream ends only by the cancel.
        yield pb.ChunkRequest(params=pb.ChunkParams(chunking=fastcdc_params()))
        while not stop.is_set():
            yield pb.ChunkRequest(data=piece)
            time.sleep(0.01)

    channel, stub = stub_for(fresh_server.address)
    with channel:
        call = stub.Chunk(requests(), timeout=RPC_TIMEOUT)
        next(call)  # the stream is running: a first batch came back
        call.cancel()
        stop.set()
        with pytest.raises(grpc.RpcError) as error:
            list(call)
        assert error.value.code() == grpc.StatusCode.CANCELLED

    samples = _wait_for(
        fresh_server,
        lambda s: value(s, "grpc_server_handled_total", **labels, grpc_code="Canceled") == 1,
        "Chunk handled as Canceled")
    assert value(samples, "grpc_server_started_total", **labels) == 1
    assert sum(value(samples, "grpc_server_handled_total", **labels, grpc_code=code)
               for code in GRPC_CODES) == 1
    assert value(samples, "grpc_server_handling_seconds_count", **labels) == 1
    samples = _wait_for(fresh_server, lambda s: value(s, "chunkd_active_streams") == 0,
                        "chunkd_active_streams back to 0")
    assert value(samples, "chunkd_ingest_bytes_total", rpc="Chunk", algorithm="fastcdc") > 0


def test_redis_index_calls_and_errors_are_counted(chunkd_bin: Path) -> None:
    from test_redis_index import RedisServer  # a real redis-server

    redis = RedisServer().start()
    try:
        spec = f"redis://127.0.0.1:{redis.port}"
        with ChunkdServer(chunkd_bin, index=spec) as server:
            samples = parse_samples(scrape(server.metrics_address))
            for op in INDEX_OPS:
                for result in ["ok", "error"]:
                    if op == "health":
                        continue  # probed once a second from the start
                    assert value(samples, "chunkd_index_requests_total", backend="redis",
                                 op=op, result=result) == 0, (op, result)
            assert not [l for n, l, _ in samples if n == "chunkd_index_requests_total"
                        and l["backend"] != "redis"]

            data = random_bytes(seed=11, size=500_000)
            # Without the default service config's retries, so that each call
            # is one index request (gRPC would try FindMissing 4 times).
            with Client(server.address, timeout=RPC_TIMEOUT, service_config={}) as client:
                client.dedup_all(data, namespace="metrics")
                assert client.find_missing("metrics", [b"\1" * 32]) == [b"\1" * 32]
                redis.kill()
                with pytest.raises(ChunkdError) as down:
                    client.dedup_all(data, namespace="metrics")
                assert down.value.code == grpc.StatusCode.UNAVAILABLE
                with pytest.raises(ChunkdError) as down:
                    client.find_missing("metrics", [b"\1" * 32])
                assert down.value.code == grpc.StatusCode.UNAVAILABLE

            samples = parse_samples(scrape(server.metrics_address))

            def requests(op: str, result: str) -> float:
                return value(samples, "chunkd_index_requests_total", backend="redis",
                             op=op, result=result)

            assert requests("insert", "ok") >= 1
            assert requests("insert", "error") == 1  # the stream ends at the first
            assert requests("lookup", "ok") == 1
            assert requests("lookup", "error") == 1
            assert value(samples, "chunkd_index_request_duration_seconds_count",
                         backend="redis", op="lookup") == 2
            assert value(samples, "grpc_server_handled_total", grpc_type="bidi_stream",
                         grpc_service="chunkd.v1.ChunkService", grpc_method="Dedup",
                         grpc_code="Unavailable") == 1
            _check_promtool(scrape(server.metrics_address))
    finally:
        redis.cleanup()
