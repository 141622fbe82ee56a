"""helm/chunkd: lint, render with every value set, validate strictly and
offline with kubeconform, and check what the manifests must say."""

from __future__ import annotations

import copy
import json
import os
import re
import shutil
import tarfile
from pathlib import Path

import pytest
import yaml

from conftest import (CHART, DEPLOY, KUBE_VERSION, NAMESPACE, RELEASE, REPO, Chart, find,
                      flagfile, one, run, secret_data, workload)

CI_VALUES = sorted((CHART / "ci").glob("*.yaml"))
BAD_VALUES = sorted((Path(__file__).parent / "bad-values").glob("*.yaml"))
VALUE_SETS = [None, *CI_VALUES]


def ids(path: Path | None) -> str:
    return "default" if path is None else path.stem


def values_args(path: Path | None) -> list[str]:
    return [] if path is None else ["-f", str(path)]


def kubeconform(kubeconform_bin: Path, schema_dir: Path, manifest: Path,
                check: bool = True):
    """kubeconform -strict against the prepared schemas only: no default
    (remote) location, and proxies that lead nowhere, so a schema it would
    have to download makes it fail instead."""
    env = dict(os.environ)
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"):
        env[name] = "http://127.0.0.1:9"
    env["NO_PROXY"] = env["no_proxy"] = ""
    command = [
        kubeconform_bin, "-strict", "-summary", "-output", "json",
        "-kubernetes-version", KUBE_VERSION,
        "-schema-location",
        f"{schema_dir}/kubernetes/{{{{ .NormalizedKubernetesVersion }}}}-local"
        "{{ .StrictSuffix }}/{{ .ResourceKind }}{{ .KindSuffix }}.json",
        "-schema-location",
        f"{schema_dir}/crds/{{{{ .Group }}}}/{{{{ .ResourceKind }}}}_{{{{ .ResourceAPIVersion }}}}.json",
        manifest,
    ]
    result = run(command, env=env, check=False)
    if check and result.returncode != 0:
        pytest.fail(f"kubeconform rejected {manifest.name}:\n{result.stdout}\n{result.stderr}",
                    pytrace=False)
    return result


def summary(result) -> dict:
    return json.loads(result.stdout)["summary"]


# What each value set must produce (kind -> count); a gate that renders too
# much or too little shows here.
BASE = {"ServiceAccount": 1, "ConfigMap": 2, "Service": 1, "Deployment": 1, "Pod": 1}
EXPECTED_KINDS = {
    "default": BASE,
    "redis-external-values": {**BASE, "Secret": 1},
    "redis-cluster-values": {**BASE, "Service": 2, "NetworkPolicy": 1},
    "builtin-redis-values": {**BASE, "Secret": 1, "Service": 2, "StatefulSet": 1,
                             "NetworkPolicy": 2},
    "builtin-redis-ephemeral-values": {**BASE, "ConfigMap": 1, "Pod": 0, "Service": 2,
                                       "StatefulSet": 1},
    "tls-tokens-existing-secret-values": BASE,
    "tokens-inline-values": {**BASE, "Secret": 1},
    "production-values": {**BASE, "HorizontalPodAutoscaler": 1, "PodDisruptionBudget": 1,
                          "NetworkPolicy": 1, "ServiceMonitor": 1, "PrometheusRule": 1},
    "podmonitor-extras-values": {**BASE, "PodMonitor": 1, "PrometheusRule": 1},
    "metrics-off-values": {"ConfigMap": 1, "Service": 1, "Deployment": 1, "Pod": 1},
    "rocksdb-values": {**BASE, "Deployment": 0, "StatefulSet": 1, "Service": 2},
    "rocksdb-existing-claim-values": {**BASE, "Deployment": 0, "StatefulSet": 1,
                                      "NetworkPolicy": 1, "PodDisruptionBudget": 1},
}


def test_every_ci_values_file_has_expectations() -> None:
    assert CI_VALUES, "helm/chunkd/ci/ holds no values files"
    assert {p.stem for p in CI_VALUES} == set(EXPECTED_KINDS) - {"default"}


@pytest.mark.parametrize("values", VALUE_SETS, ids=ids)
def test_helm_lint(chart: Chart, values: Path | None) -> None:
    """helm lint --strict prints nothing but its summary: no [INFO] (icon,
    maintainers ...) or [WARNING] lines."""
    result = run([chart.helm, "lint", "--strict", CHART, "--kube-version", KUBE_VERSION,
                  *values_args(values)], env=chart.env)
    lines = [line for line in (result.stdout + result.stderr).splitlines() if line.strip()]
    assert lines == [f"==> Linting {CHART}", "1 chart(s) linted, 0 chart(s) failed"], lines


def test_helm_lint_reports_a_missing_icon(chart: Chart, tmp_path: Path) -> None:
    """The silence above means something: without the icon, lint says so."""
    copy_ = tmp_path / "chunkd"
    shutil.copytree(CHART, copy_)
    meta = yaml.safe_load((copy_ / "Chart.yaml").read_text())
    del meta["icon"]
    (copy_ / "Chart.yaml").write_text(yaml.safe_dump(meta))
    result = run([chart.helm, "lint", "--strict", copy_, "--kube-version", KUBE_VERSION],
                 env=chart.env, check=False)
    assert "[INFO] Chart.yaml: icon is recommended" in result.stdout


def test_chart_metadata() -> None:
    meta = yaml.safe_load((CHART / "Chart.yaml").read_text())
    assert meta["appVersion"] == (REPO / "VERSION").read_text().strip()
    assert re.fullmatch(r"\d+\.\d+\.\d+", meta["version"]) and meta["version"] != "0.2.0"
    assert meta["annotations"]["artifacthub.io/license"] == "Apache-2.0"
    assert (CHART / "LICENSE").read_bytes() == (REPO / "LICENSE").read_bytes(), (
        "helm/chunkd/LICENSE differs from LICENSE: cp LICENSE helm/chunkd/LICENSE")
    home = meta["home"]
    assert home.startswith("https://") and meta["sources"] == [home]
    assert meta["maintainers"] and all(m["name"] and m["url"] == home
                                       for m in meta["maintainers"])
    # The icon is a file of this repository, on the host `sources` names.
    owner_repo = home.removeprefix("https://github.com/")
    prefix = f"https://raw.githubusercontent.com/{owner_repo}/main/"
    assert meta["icon"].startswith(prefix)
    assert (REPO / meta["icon"].removeprefix(prefix)).is_file()
    assert meta["kubeVersion"] == ">=1.27.0-0"


@pytest.mark.parametrize("values", VALUE_SETS, ids=ids)
def test_renders_valid_manifests(chart: Chart, kubeconform_bin: Path, schema_dir: Path,
                                 values: Path | None, tmp_path: Path) -> None:
    text = chart.template(*values_args(values)).stdout
    manifest = tmp_path / "manifest.yaml"
    manifest.write_text(text)
    objects = [d for d in yaml.safe_load_all(text) if d]

    kinds: dict[str, int] = {}
    for o in objects:
        kinds[o["kind"]] = kinds.get(o["kind"], 0) + 1
    expected = {k: n for k, n in EXPECTED_KINDS[ids(values)].items() if n}
    assert kinds == expected

    result = kubeconform(kubeconform_bin, schema_dir, manifest)
    counts = summary(result)
    assert counts == {"valid": len(objects), "invalid": 0, "errors": 0, "skipped": 0}


def test_kubeconform_rejects_unknown_fields(chart: Chart, kubeconform_bin: Path,
                                            schema_dir: Path, tmp_path: Path) -> None:
    """The validation bites: a misspelt field in a built-in kind and in the
    ServiceMonitor (the converted CRD schema) are both errors."""
    objects = chart.render("-f", CHART / "ci" / "production-values.yaml")
    deployment = copy.deepcopy(one(objects, "Deployment"))
    deployment["spec"]["template"]["spec"]["containers"][0]["readinessProbe"]["grpc"]["servce"] = "x"
    monitor = copy.deepcopy(one(objects, "ServiceMonitor"))
    monitor["spec"]["endpoints"][0]["intervall"] = "5s"
    typed = copy.deepcopy(one(objects, "HorizontalPodAutoscaler"))
    typed["spec"]["maxReplicas"] = "ten"
    rule = copy.deepcopy(one(objects, "PrometheusRule"))
    rule["spec"]["groups"][0]["rules"][0]["fore"] = "5m"
    pod_monitor = copy.deepcopy(one(chart.render("-f", CHART / "ci" / "podmonitor-extras-values.yaml"),
                                    "PodMonitor"))
    pod_monitor["spec"]["podMetricsEndpoints"][0]["relabellings"] = []
    for broken, needle in ((deployment, "servce"), (monitor, "intervall"), (typed, "maxReplicas"),
                           (rule, "fore"), (pod_monitor, "relabellings")):
        manifest = tmp_path / f"{broken['kind']}.yaml"
        manifest.write_text(yaml.safe_dump(broken))
        result = kubeconform(kubeconform_bin, schema_dir, manifest, check=False)
        assert result.returncode != 0, broken["kind"]
        assert summary(result)["invalid"] == 1
        assert needle in result.stdout


def test_servicemonitor_schema_is_the_operator_crd(schema_dir: Path) -> None:
    schema = json.loads((schema_dir / "crds" / "monitoring.coreos.com" /
                         "servicemonitor_v1.json").read_text())
    endpoint = schema["properties"]["spec"]["properties"]["endpoints"]["items"]
    assert endpoint["additionalProperties"] is False
    assert "metricRelabelings" in endpoint["properties"]
    # x-kubernetes-int-or-string became integer-or-string.
    target_port = endpoint["properties"]["targetPort"]
    assert {"type": "integer"} in target_port["anyOf"] and {"type": "string"} in target_port["anyOf"]


@pytest.mark.parametrize("bad", BAD_VALUES, ids=lambda p: p.stem)
def test_schema_rejects_bad_values(chart: Chart, bad: Path) -> None:
    """Each file under bad-values/ breaks values.schema.json; its first line
    names what the error must mention."""
    expected = bad.read_text().splitlines()[0].removeprefix("# expect:").strip()
    result = chart.template("-f", bad, check=False)
    assert result.returncode != 0, f"{bad.name} rendered"
    assert "values don't meet the specifications of the schema" in result.stderr
    assert expected in result.stderr, result.stderr


def test_bad_values_exist() -> None:
    assert len(BAD_VALUES) >= 5


def test_validate_values_reports_every_problem_at_once(chart: Chart) -> None:
    result = chart.template("--set", "replicaCount=3", "--set", "tls.enabled=true",
                            "--set", "terminationGracePeriodSeconds=20", check=False)
    assert result.returncode != 0
    assert "index.type=memory keeps one index per pod" in result.stderr
    assert "tls.enabled needs tls.existingSecret" in result.stderr
    assert "terminationGracePeriodSeconds (20) must be at least" in result.stderr


@pytest.mark.parametrize("args,message", [
    (["--set", "index.type=redis"], "index.type=redis needs index.redis.address"),
    (["--set", "builtinRedis.enabled=true"], "builtinRedis.enabled needs index.type=redis"),
    (["--set", "index.type=redis-cluster"], "needs at least one seed node"),
    (["--set", "auth.enabled=true"], "auth.enabled needs auth.tokens or auth.existingSecret"),
    (["--set", "server.maxInflightBytes=2048"], "must be at least server.maxMessageBytes"),
    (["--set", "autoscaling.enabled=true", "--set", "index.type=redis",
      "--set", "index.redis.address=r:6379", "--set", "autoscaling.minReplicas=5",
      "--set", "autoscaling.maxReplicas=2"], "minReplicas must not exceed"),
    (["--set", "podDisruptionBudget.enabled=true", "--set", "podDisruptionBudget.minAvailable=1"],
     "exactly one of minAvailable and maxUnavailable"),
    (["--set", "metrics.serviceMonitor.enabled=true", "--set", "metrics.podMonitor.enabled=true"],
     "metrics.serviceMonitor.enabled and metrics.podMonitor.enabled are both true: enable one"),
    (["--set", "metrics.enabled=false", "--set", "metrics.prometheusRule.enabled=true"],
     "metrics.prometheusRule need metrics.enabled"),
    (["--set", "index.type=rocksdb", "--set", "replicaCount=2"],
     "index.type=rocksdb keeps its database on one pod's volume, which a second pod cannot "
     "open: use replicaCount 1 (it is 2), or index.type redis / redis-cluster for more pods"),
    (["--set", "index.type=rocksdb", "--set", "autoscaling.enabled=true"],
     "index.type=rocksdb runs exactly one pod (a StatefulSet, which the "
     "HorizontalPodAutoscaler does not scale): set autoscaling.enabled=false"),
    # Not even an autoscaler held at one pod: it would scale a Deployment there is not.
    (["--set", "index.type=rocksdb", "--set", "autoscaling.enabled=true",
      "--set", "autoscaling.minReplicas=1", "--set", "autoscaling.maxReplicas=1"],
     "index.type=rocksdb runs exactly one pod"),
    (["--set", "index.type=rocksdb", "--set", "podSecurityContext.fsGroup=null"],
     "index.type=rocksdb needs podSecurityContext.fsGroup"),
    (["--set", "index.type=rocksdb", "--set", "index.existingSecret=chunkd-redis"],
     "index.password / index.existingSecret are set but index.type is rocksdb, which uses "
     "no password"),
])
def test_validate_values(chart: Chart, args: list[str], message: str) -> None:
    result = chart.template(*args, check=False)
    assert result.returncode != 0
    assert message in result.stderr


def pod_spec(objects: list[dict]) -> dict:
    return workload(objects)["spec"]["template"]["spec"]


def test_default_probes_are_native_grpc(chart: Chart) -> None:
    container = pod_spec(chart.render())["containers"][0]
    assert container["livenessProbe"]["grpc"] == {"port": 50051, "service": ""}
    assert container["readinessProbe"]["grpc"] == {"port": 50051, "service": ""}
    assert container["startupProbe"]["grpc"]["port"] == 50051
    assert [p["name"] for p in container["ports"]] == ["grpc", "metrics"]
    assert container["command"] == ["chunkd"]
    assert container["args"] == ["--flagfile=/etc/chunkd/config/chunkd.flags"]


def test_tls_probes_use_grpc_health_probe(chart: Chart) -> None:
    objects = chart.render("-f", CHART / "ci" / "tls-tokens-existing-secret-values.yaml")
    container = pod_spec(objects)["containers"][0]
    command = container["readinessProbe"]["exec"]["command"]
    assert command[0] == "grpc_health_probe"
    assert "-tls" in command and "-service=chunkd.v1.ChunkService" in command
    assert "-tls-client-cert=/etc/chunkd/tls/tls.crt" in command
    assert "grpc" not in container["livenessProbe"]
    flags = flagfile(objects)
    assert "--tls_cert=/etc/chunkd/tls/tls.crt" in flags
    assert "--tls_client_ca=/etc/chunkd/tls/ca.crt" in flags
    assert "--auth_tokens=/etc/chunkd/secrets/auth-tokens" in flags
    assert "--redis_password_file=/etc/chunkd/secrets/redis-password" in flags
    volumes = {v["name"]: v for v in pod_spec(objects)["volumes"]}
    sources = volumes["secrets"]["projected"]["sources"]
    assert {"name": "chunkd-redis", "items": [{"key": "redis-password",
                                              "path": "redis-password"}]} in [s["secret"] for s in sources]
    assert {"name": "chunkd-tokens", "items": [{"key": "tokens.txt",
                                               "path": "auth-tokens"}]} in [s["secret"] for s in sources]
    assert volumes["tls"]["secret"]["secretName"] == "chunkd-tls"
    assert one(objects, "Deployment")["spec"]["template"]["spec"]["containers"][0]["image"] == (
        "registry.example.com/chunkd@sha256:" + "0123456789abcdef" * 4)
    assert not find(objects, "Secret"), "existing Secrets only: the chart must not render one"


def test_flagfile_carries_the_values(chart: Chart) -> None:
    objects = chart.render("-f", CHART / "ci" / "redis-external-values.yaml")
    flags = flagfile(objects)
    assert flags == [
        "--listen=0.0.0.0:50051",
        "--metrics_listen=0.0.0.0:9464",
        "--index=redis://redis-master.data.svc.cluster.local:6379/2",
        "--redis_password_file=/etc/chunkd/secrets/redis-password",
        "--max_message_bytes=4194304",
        "--max_inflight_bytes=16777216",
        "--threads=4",
        "--max_streams=24",
        "--memory_budget=536870912",
        "--stream_memory_budget=1073741824",
        "--shutdown_grace=30s",
        "--max_streams_per_ip=0",
        "--max_streams_per_connection=32",
        "--max_stream_rate_per_connection=1000",
        "--stream_idle_timeout=60s",
        "--max_connection_idle=300s",
    ]
    assert secret_data(one(objects, "Secret")) == {"redis-password": "not-a-real-password"}
    # The password is in the Secret only.
    for o in objects:
        if o["kind"] != "Secret":
            assert "not-a-real-password" not in yaml.safe_dump(o)


def test_redis_cluster_index_and_egress(chart: Chart) -> None:
    objects = chart.render("-f", CHART / "ci" / "redis-cluster-values.yaml")
    assert ("--index=redis-cluster://redis-cluster-0.redis-cluster.data.svc:6379,"
            "redis-cluster-1.redis-cluster.data.svc:6379,"
            "redis-cluster-2.redis-cluster.data.svc:6380") in flagfile(objects)
    assert "--redis_failover_wait=20s" in flagfile(objects)
    policy = one(objects, "NetworkPolicy")
    egress_ports = [p["port"] for rule in policy["spec"]["egress"] for p in rule["ports"]]
    assert egress_ports == [53, 53, 6379, 6380]
    headless = one(objects, "Service", "-headless")
    assert headless["spec"]["clusterIP"] == "None"


def test_failover_wait_only_with_redis(chart: Chart) -> None:
    def waits(*args: object) -> list[str]:
        return [f for f in flagfile(chart.render(*args))
                if f.startswith("--redis_failover_wait")]

    assert waits() == []  # the server's default
    assert waits("--set", "index.failoverWaitSeconds=5") == []  # memory
    assert waits("-f", CHART / "ci" / "redis-external-values.yaml",
                 "--set", "index.failoverWaitSeconds=0") == ["--redis_failover_wait=0s"]


def test_builtin_redis(chart: Chart) -> None:
    objects = chart.render("-f", CHART / "ci" / "builtin-redis-values.yaml")
    assert f"--index=redis://{RELEASE}-chunkd-redis:6379/0" in flagfile(objects)
    redis = one(objects, "StatefulSet")
    container = redis["spec"]["template"]["spec"]["containers"][0]
    command = " ".join(container["args"])
    assert "--maxmemory-policy noeviction" in command and "--appendonly yes" in command
    assert "--maxmemory 512mb" in command
    # The index's buckets stay listpacks (the chart's README, "Redis settings").
    assert "--hash-max-listpack-entries 512 --hash-max-listpack-value 64" in command
    assert {e["name"] for e in container["env"]} == {"REDIS_PASSWORD", "REDISCLI_AUTH"}
    claim = redis["spec"]["volumeClaimTemplates"][0]["spec"]
    assert claim["resources"]["requests"]["storage"] == "2Gi"
    assert claim["storageClassName"] == "standard"
    # Only chunkd may reach Redis; only labelled clients may reach chunkd.
    redis_policy = one(objects, "NetworkPolicy", "-redis")
    peer = redis_policy["spec"]["ingress"][0]["from"][0]["podSelector"]["matchLabels"]
    assert peer["app.kubernetes.io/component"] == "server"
    chunkd_policy = one(objects, "NetworkPolicy", f"{RELEASE}-chunkd")
    grpc_rule = chunkd_policy["spec"]["ingress"][0]
    assert grpc_rule["from"] == [{"podSelector": {"matchLabels": {f"{RELEASE}-chunkd-client": "true"}}}]
    test_pod = one(objects, "Pod")
    assert test_pod["metadata"]["labels"][f"{RELEASE}-chunkd-client"] == "true"


def test_builtin_redis_listpack_settings_are_values(chart: Chart) -> None:
    """Higher listpack limits render as given, whole numbers even when large."""
    objects = chart.render("-f", CHART / "ci" / "builtin-redis-ephemeral-values.yaml",
                           "--set", "builtinRedis.hashMaxListpackEntries=2000000",
                           "--set", "builtinRedis.hashMaxListpackValue=128")
    command = one(objects, "StatefulSet")["spec"]["template"]["spec"]["containers"][0]["args"][0]
    assert "--hash-max-listpack-entries 2000000 --hash-max-listpack-value 128" in command


@pytest.mark.parametrize("key,low,least", [("hashMaxListpackEntries", 128, 512),
                                           ("hashMaxListpackValue", 32, 64)])
def test_schema_refuses_lower_listpack_limits(chart: Chart, key: str, low: int,
                                              least: int) -> None:
    """Below what the index's buckets need, the chart does not render, and
    says which value and the least it takes."""
    result = chart.template("-f", CHART / "ci" / "builtin-redis-ephemeral-values.yaml",
                            "--set", f"builtinRedis.{key}={low}", check=False)
    assert result.returncode != 0
    assert f"at '/builtinRedis/{key}': minimum: got {low}, want {least}" in result.stderr, \
        result.stderr
    assert chart.template("-f", CHART / "ci" / "builtin-redis-ephemeral-values.yaml",
                          "--set", f"builtinRedis.{key}={least}", check=False).returncode == 0


ROCKSDB_VALUES = CHART / "ci" / "rocksdb-values.yaml"
ROCKSDB_CLAIM_VALUES = CHART / "ci" / "rocksdb-existing-claim-values.yaml"
#: Where the chart mounts the RocksDB index's volume.
ROCKSDB_MOUNT = "/var/lib/chunkd"
DEFAULTS = yaml.safe_load((CHART / "values.yaml").read_text())


def index_url(objects: list[dict]) -> str:
    [flag] = [f for f in flagfile(objects) if f.startswith("--index=")]
    return flag.removeprefix("--index=")


def index_mount(objects: list[dict]) -> dict | None:
    mounts = pod_spec(objects)["containers"][0]["volumeMounts"]
    found = [m for m in mounts if m["name"] == "index"]
    return found[0] if found else None


def test_rocksdb_index_is_a_statefulset_on_a_claim(chart: Chart) -> None:
    objects = chart.render("-f", ROCKSDB_VALUES)
    assert not find(objects, "Deployment")
    sts = workload(objects)
    assert (sts["kind"], sts["metadata"]["name"]) == ("StatefulSet", f"{RELEASE}-chunkd")
    spec = sts["spec"]
    # One pod, replaced old before new; no Deployment strategy.
    assert spec["replicas"] == 1
    assert spec["updateStrategy"] == {"type": "RollingUpdate"}
    assert spec["podManagementPolicy"] == "Parallel"
    assert "strategy" not in spec
    assert spec["serviceName"] == one(objects, "Service", "-headless")["metadata"]["name"]
    assert spec["selector"]["matchLabels"] == one(objects, "Service", f"{RELEASE}-chunkd")[
        "spec"]["selector"]
    [claim] = spec["volumeClaimTemplates"]
    assert claim["metadata"]["name"] == "index"
    assert claim["spec"] == {"accessModes": ["ReadWriteOncePod"],
                             "storageClassName": "fast-ssd",
                             "resources": {"requests": {"storage": "20Gi"}}}
    # The claim comes from the template; the pod mounts it, writable.
    assert "index" not in {v["name"] for v in pod_spec(objects)["volumes"]}
    assert index_mount(objects) == {"name": "index", "mountPath": ROCKSDB_MOUNT}
    assert index_url(objects) == f"rocksdb://{ROCKSDB_MOUNT}/index?sync=always"
    assert "--index_cache_mib=256" in flagfile(objects)
    security = pod_spec(objects)["securityContext"]
    assert (security["fsGroup"], security["fsGroupChangePolicy"]) == (10001, "OnRootMismatch")


def test_rocksdb_database_and_checkpoints_are_on_the_volume(chart: Chart) -> None:
    """The database is a directory below the mount point: chunkd writes its
    checkpoints beside it (<database>.checkpoints/), which must be on the
    volume too, not on the read-only root filesystem."""
    database = Path(index_url(chart.render("--set", "index.type=rocksdb"))
                    .removeprefix("rocksdb://").split("?")[0])
    for path in (database, database.with_name(database.name + ".checkpoints")):
        assert path.is_relative_to(ROCKSDB_MOUNT) and path != Path(ROCKSDB_MOUNT), path


def test_rocksdb_defaults(chart: Chart) -> None:
    objects = chart.render("--set", "index.type=rocksdb")
    assert index_url(objects) == f"rocksdb://{ROCKSDB_MOUNT}/index?sync=batch"
    flags = flagfile(objects)
    for flag in ("--index_cache_mib=", "--index_max_entries=", "--redis_"):
        assert not any(f.startswith(flag) for f in flags), flags
    [claim] = workload(objects)["spec"]["volumeClaimTemplates"]
    assert claim["spec"] == {"accessModes": ["ReadWriteOnce"],
                             "resources": {"requests": {"storage": "8Gi"}}}
    assert pod_spec(objects)["securityContext"] == {
        **DEFAULTS["podSecurityContext"], "fsGroupChangePolicy": "OnRootMismatch"}
    # A policy of the user's own is kept; 0 replicas stops the pod.
    objects = chart.render("--set", "index.type=rocksdb", "--set", "replicaCount=0",
                           "--set", "podSecurityContext.fsGroupChangePolicy=Always")
    assert pod_spec(objects)["securityContext"]["fsGroupChangePolicy"] == "Always"
    assert workload(objects)["spec"]["replicas"] == 0


def test_rocksdb_existing_claim(chart: Chart) -> None:
    objects = chart.render("-f", ROCKSDB_CLAIM_VALUES)
    spec = workload(objects)["spec"]
    assert "volumeClaimTemplates" not in spec
    volumes = {v["name"]: v for v in pod_spec(objects)["volumes"]}
    assert volumes["index"] == {"name": "index",
                                "persistentVolumeClaim": {"claimName": "chunkd-index"}}
    assert index_mount(objects) == {"name": "index", "mountPath": ROCKSDB_MOUNT}
    assert "--index_max_entries=50000000" in flagfile(objects)
    # The index is local: egress to DNS only, no Redis port.
    policy = one(objects, "NetworkPolicy")
    assert policy["spec"]["egress"] == [{"ports": [{"port": 53, "protocol": "UDP"},
                                                   {"port": 53, "protocol": "TCP"}]}]
    assert one(objects, "PodDisruptionBudget")["spec"]["selector"] == spec["selector"]


def test_rocksdb_statefulset_stays_updatable(chart: Chart, tmp_path: Path) -> None:
    """Kubernetes refuses a change to a StatefulSet's selector, serviceName,
    podManagementPolicy or volumeClaimTemplates: a new chart version or a
    changed value must leave them as they were, or helm upgrade fails."""
    copy_ = tmp_path / "chunkd"
    shutil.copytree(CHART, copy_)
    meta = yaml.safe_load((copy_ / "Chart.yaml").read_text())
    meta["version"] = meta["appVersion"] = "9.8.7"
    (copy_ / "Chart.yaml").write_text(yaml.safe_dump(meta))
    fixed = ("selector", "serviceName", "podManagementPolicy", "volumeClaimTemplates")

    def render(chart_dir: Path, *args: str) -> dict:
        text = run([chart.helm, "template", RELEASE, chart_dir, "--namespace", NAMESPACE,
                    "--kube-version", KUBE_VERSION, "-f", ROCKSDB_VALUES, *args],
                   env=chart.env).stdout
        return workload([d for d in yaml.safe_load_all(text) if d])["spec"]

    before = render(CHART)
    for after in (render(copy_), render(CHART, "--set", "server.threads=3",
                                        "--set", "service.headless.enabled=false")):
        assert before["template"] != after["template"]  # the upgrade changes the pod
        assert {k: after[k] for k in fixed} == {k: before[k] for k in fixed}


@pytest.mark.parametrize("values", [v for v in VALUE_SETS if "rocksdb" not in ids(v)], ids=ids)
def test_other_indexes_keep_their_deployment(chart: Chart, values: Path | None) -> None:
    """index.type memory, redis and redis-cluster render as before: a
    Deployment with the values' strategy, no volume of an index, the pod
    security context as given."""
    objects = chart.render(*values_args(values))
    deployment = workload(objects)
    assert deployment["kind"] == "Deployment"
    assert deployment["spec"]["strategy"] == DEFAULTS["updateStrategy"]
    assert index_mount(objects) is None
    assert "index" not in {v["name"] for v in pod_spec(objects)["volumes"]}
    assert pod_spec(objects)["securityContext"] == DEFAULTS["podSecurityContext"]
    assert not index_url(objects).startswith("rocksdb:")
    assert not find(objects, "PersistentVolumeClaim")


def test_tokens_file_format(chart: Chart) -> None:
    objects = chart.render("-f", CHART / "ci" / "tokens-inline-values.yaml")
    tokens = secret_data(one(objects, "Secret"))["auth-tokens"]
    lines = [line for line in tokens.splitlines() if line and not line.startswith("#")]
    assert lines == ["backup-team-0123456789abcdef backups,backups-staging",
                     "admin-0123456789abcdef0123 *"]
    for line in lines:
        assert re.fullmatch(r"[^\s#]+ (\*|[A-Za-z0-9._-]{1,128}(,[A-Za-z0-9._-]{1,128})*)", line)
    spec = pod_spec(objects)
    assert spec["terminationGracePeriodSeconds"] == 90
    container = spec["containers"][0]
    assert container["args"][1:] == ["--threads=2"]
    assert container["lifecycle"]["preStop"]["exec"]["command"] == ["sleep", "10"]
    assert "--backend=avx2" in flagfile(objects)


@pytest.mark.parametrize("values", VALUE_SETS, ids=ids)
def test_pods_are_locked_down(chart: Chart, values: Path | None) -> None:
    objects = chart.render(*values_args(values))
    pods = [o["spec"]["template"]["spec"] for o in objects
            if o["kind"] in ("Deployment", "StatefulSet")]
    pods += [o["spec"] for o in objects if o["kind"] == "Pod"]
    assert pods
    for spec in pods:
        assert spec["securityContext"]["runAsNonRoot"] is True
        assert spec["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
        assert spec["automountServiceAccountToken"] is False
        for container in spec["containers"]:
            sc = container["securityContext"]
            assert sc["readOnlyRootFilesystem"] is True
            assert sc["allowPrivilegeEscalation"] is False
            assert sc["capabilities"] == {"drop": ["ALL"]}
            assert container["resources"]["limits"]["memory"]


#: Kubernetes memory quantities the value sets use.
_QUANTITY = re.compile(r"(\d+)(Ki|Mi|Gi|Ti|k|M|G|T|)")
_UNITS = {"Ki": 1 << 10, "Mi": 1 << 20, "Gi": 1 << 30, "Ti": 1 << 40, "k": 10**3,
          "M": 10**6, "G": 10**9, "T": 10**12, "": 1}


def quantity_bytes(quantity: str | int) -> int:
    match = _QUANTITY.fullmatch(str(quantity))
    assert match, f"a new form of memory quantity: {quantity}"
    return int(match.group(1)) * _UNITS[match.group(2)]


def test_default_memory_is_sized_by_chunkd(chart: Chart) -> None:
    """The chart leaves the memory flags to chunkd, which sizes them to the
    container's limit, and requests what it may use."""
    objects = chart.render()
    flags = flagfile(objects)
    for flag in ("--max_streams=", "--memory_budget=", "--stream_memory_budget=",
                 "--index_max_entries=", "--hint_cache_mib="):
        assert not any(f.startswith(flag) for f in flags), flags
    resources = one(objects, "Deployment")["spec"]["template"]["spec"]["containers"][0][
        "resources"]
    assert resources["limits"]["memory"] == "1Gi"
    assert resources["requests"]["memory"] == resources["limits"]["memory"]
    flags = flagfile(chart.render("--set", "server.hintCacheMib=0"))
    assert "--hint_cache_mib=0" in flags
    flags = flagfile(chart.render("--set", "server.streamMemoryBudget=268435456"))
    assert "--stream_memory_budget=268435456" in flags


#: How long chunkd may take past --shutdown_grace to exit (Drain in
#: server/main.cc: cancelled streams 3 s, the server's shutdown 2 s, an index
#: probe under way up to Redis' 2 s command timeout).
DRAIN_AFTER_GRACE = 7


def grace_and_pre_stop(objects: list) -> tuple[int, int, int]:
    """--shutdown_grace, the preStop sleep (0: none) and the pod's
    terminationGracePeriodSeconds, in seconds."""
    grace = next(int(f.split("=")[1].removesuffix("s")) for f in flagfile(objects)
                 if f.startswith("--shutdown_grace="))
    spec = pod_spec(objects)
    pre_stop = spec["containers"][0].get("lifecycle", {}).get("preStop")
    sleep = 0
    if pre_stop is not None:
        command = pre_stop["exec"]["command"]
        assert command[0] == "sleep" and len(command) == 2, command
        sleep = int(command[1])
    return grace, sleep, spec["terminationGracePeriodSeconds"]


@pytest.mark.parametrize("values", VALUE_SETS, ids=ids)
def test_grace_period_outlasts_the_drain(chart: Chart, values: Path | None) -> None:
    grace, sleep, period = grace_and_pre_stop(chart.render(*values_args(values)))
    assert period >= sleep + grace + DRAIN_AFTER_GRACE


@pytest.mark.parametrize("sleep,grace", [(5, 30), (0, 30), (12, 45)])
def test_default_grace_period_follows_pre_stop_and_shutdown_grace(
        chart: Chart, sleep: int, grace: int) -> None:
    objects = chart.render("--set", f"preStopSleepSeconds={sleep}",
                           "--set", f"server.shutdownGraceSeconds={grace}")
    assert grace_and_pre_stop(objects) == (grace, sleep, sleep + grace + 10)


def test_pre_stop_zero_has_no_hook(chart: Chart) -> None:
    container = pod_spec(chart.render("--set", "preStopSleepSeconds=0"))["containers"][0]
    assert "lifecycle" not in container


@pytest.mark.parametrize("period,ok", [
    (5 + 30 + DRAIN_AFTER_GRACE - 1, False), (5 + 30 + DRAIN_AFTER_GRACE, True)])
def test_a_grace_period_shorter_than_the_drain_is_refused(
        chart: Chart, period: int, ok: bool) -> None:
    result = chart.template("--set", f"terminationGracePeriodSeconds={period}", check=False)
    assert (result.returncode == 0) == ok, result.stderr
    if not ok:
        assert (f"terminationGracePeriodSeconds ({period}) must be at least "
                f"preStopSleepSeconds + server.shutdownGraceSeconds + 7 ({period + 1})"
                in result.stderr)


def test_config_checksum_rolls_pods(chart: Chart) -> None:
    def checksums(*args: str) -> dict:
        annotations = one(chart.render(*args), "Deployment")["spec"]["template"]["metadata"]["annotations"]
        return {k: v for k, v in annotations.items() if k.startswith("checksum/")}

    base = checksums()
    assert base == checksums(), "the checksum must be deterministic"
    assert checksums("--set", "server.threads=3")["checksum/config"] != base["checksum/config"]
    assert checksums("--set", "server.threads=3")["checksum/secret"] == base["checksum/secret"]
    tokens = ["--set", "auth.enabled=true", "--set", "auth.tokens[0].token=0123456789abcdefXYZ",
              "--set", "auth.tokens[0].namespaces[0]=a"]
    other = ["--set", "auth.enabled=true", "--set", "auth.tokens[0].token=0123456789abcdefABC",
             "--set", "auth.tokens[0].namespaces[0]=a"]
    assert checksums(*tokens)["checksum/secret"] != checksums(*other)["checksum/secret"]


def test_dashboard_configmap_is_the_dashboard(chart: Chart) -> None:
    objects = chart.render()
    config = one(objects, "ConfigMap", "-dashboard")
    assert config["metadata"]["labels"]["grafana_dashboard"] == "1"
    shipped = (CHART / "dashboards" / "chunkd.json").read_text()
    assert config["data"]["chunkd.json"] == shipped
    json.loads(config["data"]["chunkd.json"])


def test_dashboard_copies_are_identical() -> None:
    """Helm reads files only inside the chart, so the chart carries a copy of
    deploy/grafana/dashboards/chunkd.json; after editing one: cp it over."""
    source = DEPLOY / "grafana" / "dashboards" / "chunkd.json"
    copy_ = CHART / "dashboards" / "chunkd.json"
    assert source.read_bytes() == copy_.read_bytes(), (
        f"{copy_.relative_to(REPO)} differs from {source.relative_to(REPO)}: cp {source.relative_to(REPO)} "
        f"{copy_.relative_to(REPO)}")
    dashboard = json.loads(source.read_text())
    assert dashboard["uid"] and dashboard["title"] and isinstance(dashboard["panels"], list)


def test_service_monitor_scrapes_the_metrics_port(chart: Chart) -> None:
    objects = chart.render("-f", CHART / "ci" / "production-values.yaml")
    monitor = one(objects, "ServiceMonitor")
    assert monitor["metadata"]["labels"]["release"] == "kube-prometheus-stack"
    endpoint = monitor["spec"]["endpoints"][0]
    assert (endpoint["port"], endpoint["path"], endpoint["interval"]) == ("metrics", "/metrics", "15s")
    service = one(objects, "Service")
    assert "metrics" in [p["name"] for p in service["spec"]["ports"]]
    selector = monitor["spec"]["selector"]["matchLabels"]
    assert selector.items() <= service["metadata"]["labels"].items()
    hpa = one(objects, "HorizontalPodAutoscaler")
    assert (hpa["spec"]["minReplicas"], hpa["spec"]["maxReplicas"]) == (3, 12)
    assert "replicas" not in one(objects, "Deployment")["spec"]
    assert one(objects, "PodDisruptionBudget")["spec"] == {
        "selector": {"matchLabels": one(objects, "Deployment")["spec"]["selector"]["matchLabels"]},
        "maxUnavailable": 1}
    assert one(objects, "ConfigMap", "-dashboard")["metadata"]["namespace"] == "monitoring"


def test_metrics_off(chart: Chart) -> None:
    objects = chart.render("-f", CHART / "ci" / "metrics-off-values.yaml")
    assert "--metrics_listen=" in flagfile(objects)
    service = one(objects, "Service")
    assert [p["name"] for p in service["spec"]["ports"]] == ["grpc"]
    assert pod_spec(objects)["serviceAccountName"] == "default"


def render_notes(chart: Chart, tmp_path: Path, *args: object) -> str:
    """NOTES.txt rendered (helm template skips it, helm install --dry-run
    needs a cluster): a copy of the chart renders it through tpl into a
    ConfigMap."""
    copy_ = tmp_path / "chunkd"
    shutil.copytree(CHART, copy_)
    shutil.copy(copy_ / "templates" / "NOTES.txt", copy_ / "notes.txt")
    (copy_ / "templates" / "zz-notes.yaml").write_text(
        'apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: notes\n'
        'data:\n  notes: {{ tpl (.Files.Get "notes.txt") . | toJson }}\n')
    objects = [d for d in yaml.safe_load_all(run(
        [chart.helm, "template", RELEASE, copy_, "--namespace", NAMESPACE, "--kube-version",
         KUBE_VERSION, *args], env=chart.env).stdout) if d]
    return one(objects, "ConfigMap", "notes")["data"]["notes"]


def test_notes_render(chart: Chart, tmp_path: Path) -> None:
    notes = render_notes(chart, tmp_path, "-f", CHART / "ci" / "builtin-redis-values.yaml")
    assert f"{RELEASE}-chunkd.{NAMESPACE}.svc:50051" in notes
    assert "built-in single Redis" in notes
    assert f"helm test {RELEASE}" in notes
    assert f"{RELEASE}-chunkd-client=true" in notes
    assert "hash-max-listpack" not in notes  # the chart configures its own Redis


@pytest.mark.parametrize("values,server", [
    ("redis-external-values.yaml", "The Redis at redis-master.data.svc.cluster.local:6379"),
    ("redis-cluster-values.yaml", "Every node of the Redis Cluster")])
def test_notes_name_the_settings_an_external_redis_needs(chart: Chart, tmp_path: Path,
                                                         values: str, server: str) -> None:
    notes = " ".join(render_notes(chart, tmp_path, "-f", CHART / "ci" / values).split())
    assert (f"{server} needs, in its redis.conf: maxmemory-policy noeviction, "
            "hash-max-listpack-entries 512 (or more) and hash-max-listpack-value 64 (or more)"
            ) in notes


@pytest.mark.parametrize("args,claim", [
    (["--set", "index.type=rocksdb"], f"index-{RELEASE}-chunkd-0"),
    (["-f", ROCKSDB_CLAIM_VALUES], "chunkd-index")])
def test_notes_say_where_the_rocksdb_index_is(chart: Chart, tmp_path: Path,
                                              args: list, claim: str) -> None:
    notes = render_notes(chart, tmp_path, *args)
    assert f"on the claim {claim}, at {ROCKSDB_MOUNT}/index in the" in notes
    # The backup commands name the StatefulSet's pod and chunkd as its PID 1.
    assert (f"kubectl -n {NAMESPACE} exec {RELEASE}-chunkd-0 -c chunkd -- sh -c 'kill -USR1 1'"
            in notes)
    assert f"-- ls {ROCKSDB_MOUNT}/index.checkpoints" in notes
    objects = chart.render(*args)
    pod = pod_spec(objects)
    assert pod["containers"][0]["command"] == ["chunkd"] and "shareProcessNamespace" not in pod
    assert "index.type=rocksdb" in render_notes(chart, tmp_path / "memory")


def test_pod_monitor_scrapes_the_metrics_port(chart: Chart) -> None:
    objects = chart.render("-f", CHART / "ci" / "podmonitor-extras-values.yaml")
    monitor = one(objects, "PodMonitor")
    assert not find(objects, "ServiceMonitor")
    assert monitor["metadata"]["labels"]["release"] == "kube-prometheus-stack"
    endpoint = monitor["spec"]["podMetricsEndpoints"][0]
    assert (endpoint["port"], endpoint["path"], endpoint["interval"]) == ("metrics", "/metrics", "20s")
    # job is the Service's name, as the ServiceMonitor would set it (the
    # dashboard's job variable and the PrometheusRule's selector), then the
    # user's relabelings.
    assert endpoint["relabelings"][0] == {"action": "replace", "targetLabel": "job",
                                          "replacement": f"{RELEASE}-chunkd"}
    assert endpoint["relabelings"][1]["targetLabel"] == "node"
    assert one(objects, "Service")["metadata"]["name"] == f"{RELEASE}-chunkd"
    selector = monitor["spec"]["selector"]["matchLabels"]
    assert selector.items() <= pod_spec_labels(objects).items()
    ports = [p["name"] for p in pod_spec(objects)["containers"][0]["ports"]]
    assert "metrics" in ports


def pod_spec_labels(objects: list[dict]) -> dict:
    return one(objects, "Deployment")["spec"]["template"]["metadata"]["labels"]


def test_default_topology_spread_is_soft(chart: Chart) -> None:
    objects = chart.render()
    constraints = pod_spec(objects)["topologySpreadConstraints"]
    selector = one(objects, "Deployment")["spec"]["selector"]
    assert [(c["topologyKey"], c["whenUnsatisfiable"], c["maxSkew"]) for c in constraints] == [
        ("topology.kubernetes.io/zone", "ScheduleAnyway", 1),
        ("kubernetes.io/hostname", "ScheduleAnyway", 1)]
    for c in constraints:
        assert c["labelSelector"] == selector
    # Overridden: the user's list replaces it; the user's own selector stays.
    production = pod_spec(chart.render("-f", CHART / "ci" / "production-values.yaml"))
    [zone] = production["topologySpreadConstraints"]
    assert zone["labelSelector"]["matchLabels"] == {"app.kubernetes.io/name": "chunkd",
                                                    "app.kubernetes.io/component": "server"}
    extras = pod_spec(chart.render("-f", CHART / "ci" / "podmonitor-extras-values.yaml"))
    [host] = extras["topologySpreadConstraints"]
    assert (host["whenUnsatisfiable"], host["labelSelector"]) == ("DoNotSchedule", selector)
    # Off.
    off = pod_spec(chart.render("--set-json", "topologySpreadConstraints=[]"))
    assert "topologySpreadConstraints" not in off


def test_extra_volumes_sidecars_and_init_containers(chart: Chart) -> None:
    spec = pod_spec(chart.render("-f", CHART / "ci" / "podmonitor-extras-values.yaml"))
    assert [c["name"] for c in spec["containers"]] == ["chunkd", "log-shipper"]
    assert [c["name"] for c in spec["initContainers"]] == ["wait-for-config"]
    volumes = {v["name"]: v for v in spec["volumes"]}
    assert volumes["ca-bundle"] == {"name": "ca-bundle", "configMap": {"name": "corporate-ca"}}
    assert {"config", "tmp"} <= set(volumes)
    mounts = spec["containers"][0]["volumeMounts"]
    assert mounts[-1] == {"name": "ca-bundle", "mountPath": "/etc/ssl/corporate", "readOnly": True}
    assert [m["name"] for m in mounts[:-1]] == ["config", "tmp"]
    default = pod_spec(chart.render())
    assert [c["name"] for c in default["containers"]] == ["chunkd"]
    assert "initContainers" not in default


def test_packaged_chart_carries_license_and_readme(chart: Chart, tmp_path: Path) -> None:
    result = run([chart.helm, "package", CHART, "--destination", tmp_path], env=chart.env)
    [package] = tmp_path.glob("chunkd-*.tgz")
    assert package.name in result.stdout
    with tarfile.open(package) as archive:
        names = set(archive.getnames())
        license_ = archive.extractfile("chunkd/LICENSE").read()
    assert {"chunkd/LICENSE", "chunkd/README.md", "chunkd/files/chunkd-alerts.yml",
            "chunkd/dashboards/chunkd.json", "chunkd/values.schema.json"} <= names
    assert license_ == (REPO / "LICENSE").read_bytes()
