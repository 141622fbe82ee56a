"""deploy/compose.yaml and its Prometheus and Grafana files, checked without
a Docker engine: structure, every referenced file, the ports and addresses
the services use to reach each other, and `promtool check config`."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
import yaml

from conftest import DEPLOY, REPO, Process, free_port, run

COMPOSE = DEPLOY / "compose.yaml"


@pytest.fixture(scope="module")
def compose() -> dict:
    return yaml.safe_load(COMPOSE.read_text())


def service(compose: dict, name: str) -> dict:
    return compose["services"][name]


def bind_mounts(svc: dict) -> list[tuple[Path, str]]:
    mounts = []
    for volume in svc.get("volumes", []):
        source, target = volume.split(":")[:2]
        if source.startswith("."):
            mounts.append(((DEPLOY / source).resolve(), target))
    return mounts


def test_services(compose: dict) -> None:
    assert set(compose["services"]) == {"chunkd", "redis", "prometheus", "grafana"}
    for name, svc in compose["services"].items():
        assert "image" in svc, name
        assert not re.search(r":latest$|^[^:]+$", svc["image"]), f"{name}: pin the image tag"
    named = {v.split(":")[0] for svc in compose["services"].values()
             for v in svc.get("volumes", []) if not v.startswith(".")}
    assert named == set(compose["volumes"])


def test_chunkd_builds_from_the_dockerfile_and_uses_redis(compose: dict) -> None:
    chunkd = service(compose, "chunkd")
    context = (DEPLOY / chunkd["build"]["context"]).resolve()
    assert context == REPO
    assert (context / chunkd["build"]["dockerfile"]).resolve() == DEPLOY / "Dockerfile"
    assert "--index=redis://redis:6379" in chunkd["command"]
    assert chunkd["depends_on"]["redis"]["condition"] == "service_healthy"
    assert chunkd["read_only"] is True and chunkd["cap_drop"] == ["ALL"]
    # The published ports are the ones the image listens on (its ENTRYPOINT).
    entrypoint = (DEPLOY / "Dockerfile").read_text()
    for published in chunkd["ports"]:
        container_port = published.rsplit(":", 1)[1]
        assert f"0.0.0.0:{container_port}" in entrypoint
    grace = int(re.search(r"--shutdown_grace=(\d+)s", " ".join(chunkd["command"])).group(1))
    assert int(chunkd["stop_grace_period"].removesuffix("s")) > grace


def test_redis_keeps_every_key(compose: dict) -> None:
    redis = service(compose, "redis")
    command = " ".join(redis["command"])
    assert "--maxmemory-policy noeviction" in command
    assert "--appendonly yes" in command
    # The index's buckets stay listpacks (docs/operations.md).
    assert "--hash-max-listpack-entries 512 --hash-max-listpack-value 64" in command
    assert any(v.endswith(":/data") for v in redis["volumes"])
    assert "redis-cli ping" in " ".join(redis["healthcheck"]["test"])


def test_redis_command_runs(compose: dict, processes: list, tmp_path: Path) -> None:
    """The compose file's redis command, run by a real redis-server (its
    port and data directory moved): it starts (a misspelt or out-of-range
    setting stops redis-server) with the settings chunkd needs."""
    redis_server, redis_cli = shutil.which("redis-server"), shutil.which("redis-cli")
    if redis_server is None or redis_cli is None:
        pytest.fail("redis-server is missing: make deps", pytrace=False)
    command = service(compose, "redis")["command"]
    assert command[0] == "redis-server"
    port = free_port()
    server = Process([redis_server, *command[1:], "--port", str(port), "--bind", "127.0.0.1",
                      "--dir", tmp_path], tmp_path / "redis.log")
    processes.append(server)
    server.wait_for_port(port)
    for setting, value in (("maxmemory-policy", "noeviction"), ("appendonly", "yes"),
                           ("hash-max-listpack-entries", "512"),
                           ("hash-max-listpack-value", "64")):
        got = run([redis_cli, "-p", str(port), "config", "get", setting], timeout=30).stdout
        assert got.split() == [setting, value]


def test_referenced_files_exist(compose: dict) -> None:
    mounts = [m for svc in compose["services"].values() for m in bind_mounts(svc)]
    assert len(mounts) == 4
    for source, _ in mounts:
        assert source.exists(), source


def test_prometheus_scrapes_chunkd(compose: dict, tmp_path: Path) -> None:
    prometheus = service(compose, "prometheus")
    config, target = next(m for m in bind_mounts(prometheus) if m[0].name == "prometheus.yml")
    assert f"--config.file={target}" in prometheus["command"]
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.fail("promtool is missing: make deps (Debian package prometheus)", pytrace=False)
    result = run([promtool, "check", "config", config])
    assert "SUCCESS" in result.stdout + result.stderr
    scrape = yaml.safe_load(config.read_text())["scrape_configs"]
    chunkd = next(job for job in scrape if job["job_name"] == "chunkd")
    assert chunkd.get("metrics_path", "/metrics") == "/metrics"
    metrics_port = next(p.rsplit(":", 1)[1] for p in service(compose, "chunkd")["ports"]
                        if p.endswith("9464"))
    assert chunkd["static_configs"][0]["targets"] == [f"chunkd:{metrics_port}"]


def test_alert_rules_load_and_fire(compose: dict) -> None:
    """The alert rules are mounted beside the config that loads them, pass
    `promtool check rules`, and fire as their unit test says."""
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.fail("promtool is missing: make deps (Debian package prometheus)", pytrace=False)
    mounts = dict((source.name, target) for source, target in
                  bind_mounts(service(compose, "prometheus")))
    assert mounts["chunkd-alerts.yml"] == "/etc/prometheus/chunkd-alerts.yml"
    config = yaml.safe_load((DEPLOY / "prometheus" / "prometheus.yml").read_text())
    assert config["rule_files"] == ["chunkd-alerts.yml"]
    rules = DEPLOY / "prometheus" / "chunkd-alerts.yml"
    assert "SUCCESS: 17 rules found" in run([promtool, "check", "rules", rules]).stdout
    test = Path(__file__).with_name("chunkd-alerts-test.yml")
    result = run([promtool, "test", "rules", test])
    assert "SUCCESS" in result.stdout + result.stderr


def test_memory_alert_uses_the_container_limit(compose: dict) -> None:
    """ChunkdMemoryNearLimit's fixed limit is chunkd's mem_limit."""
    limit = service(compose, "chunkd")["mem_limit"]
    units = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30}
    limit_bytes = int(limit[:-1]) * units[limit[-1]]
    rules = yaml.safe_load((DEPLOY / "prometheus" / "chunkd-alerts.yml").read_text())
    [expr] = [r["expr"] for g in rules["groups"] for r in g["rules"]
              if r.get("alert") == "ChunkdMemoryNearLimit"]
    assert f") / {limit_bytes} > 0.9" in expr


def test_chunkd_image_is_the_version(compose: dict) -> None:
    version = (REPO / "VERSION").read_text().strip()
    assert service(compose, "chunkd")["image"] == f"chunkd:{version}"


def test_promtool_rejects_a_broken_config(tmp_path: Path) -> None:
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.fail("promtool is missing: make deps (Debian package prometheus)", pytrace=False)
    broken = tmp_path / "prometheus.yml"
    broken.write_text((DEPLOY / "prometheus" / "prometheus.yml").read_text()
                      .replace("scrape_interval: 15s", "scrape_interval: fast"))
    assert run([promtool, "check", "config", broken], check=False).returncode != 0


def test_grafana_provisioning(compose: dict) -> None:
    grafana = service(compose, "grafana")
    mounts = dict((target, source) for source, target in bind_mounts(grafana))
    provisioning = mounts["/etc/grafana/provisioning"]
    assert provisioning == DEPLOY / "grafana" / "provisioning"
    datasources = yaml.safe_load((provisioning / "datasources" / "prometheus.yaml").read_text())
    source = datasources["datasources"][0]
    assert source["type"] == "prometheus" and source["isDefault"] is True
    prometheus_port = service(compose, "prometheus")["ports"][0].rsplit(":", 1)[1]
    assert source["url"] == f"http://prometheus:{prometheus_port}"

    providers = yaml.safe_load((provisioning / "dashboards" / "chunkd.yaml").read_text())
    path = providers["providers"][0]["options"]["path"]
    dashboards = mounts[path]
    assert dashboards == DEPLOY / "grafana" / "dashboards"
    files = sorted(dashboards.glob("*.json"))
    assert [f.name for f in files] == ["chunkd.json"]
    json.loads(files[0].read_text())
    home = grafana["environment"]["GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH"]
    assert home == f"{path}/chunkd.json"


def test_docker_compose_config(tmp_path: Path) -> None:
    """`docker compose config` where the compose plugin exists (not here)."""
    docker = shutil.which("docker")
    if docker is None or run([docker, "compose", "version"], check=False).returncode != 0:
        pytest.skip("docker compose is not installed; the structure tests above stand in")
    run([docker, "compose", "-f", COMPOSE, "config", "--quiet"])
