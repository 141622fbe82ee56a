"""The chart's flagfile and health checks against a real chunkd: what the
ConfigMap renders must start the server, and the helm test pod's commands
(and the probes' gRPC health services) must see it SERVING."""

from __future__ import annotations

import re
import shutil
import signal
import time
import urllib.request
from pathlib import Path

import pytest

from conftest import CHART, Chart, Process, flagfile, free_port, one, run, workload
from test_chart import ROCKSDB_MOUNT, VALUE_SETS, ids, quantity_bytes, values_args


def local_index(flag: str, volume: Path) -> str:
    """A flag, with a RocksDB database moved from the pod's volume to the
    directory `volume`, made here as the mount point would be."""
    pod_url = f"--index=rocksdb://{ROCKSDB_MOUNT}/"
    if not flag.startswith(pod_url):
        return flag
    volume.mkdir(exist_ok=True)
    return f"--index=rocksdb://{volume}/" + flag.removeprefix(pod_url)


def local_flagfile(flags: list[str], port: int, metrics: int, volume: Path) -> str:
    """The rendered flags with the listen addresses moved to loopback ports
    and a RocksDB index to `volume`."""
    out = []
    for flag in flags:
        flag = re.sub(r"^--listen=0\.0\.0\.0:\d+$", f"--listen=127.0.0.1:{port}", flag)
        flag = re.sub(r"^--metrics_listen=0\.0\.0\.0:\d+$",
                      f"--metrics_listen=127.0.0.1:{metrics}", flag)
        out.append(local_index(flag, volume))
    return "\n".join(out) + "\n"


def probe_commands(objects: list[dict], health_probe_bin: Path, port: int) -> list[list[str]]:
    """The helm test pod's containers' commands, aimed at the local server."""
    pod = one(objects, "Pod")
    commands = []
    for container in pod["spec"]["containers"]:
        command = container["command"]
        assert command[0] == "grpc_health_probe"
        commands.append([str(health_probe_bin)] + [
            re.sub(r"^-addr=.*$", f"-addr=127.0.0.1:{port}", c) for c in command[1:]])
    return commands


def serve_chart(chart: Chart, chunkd_bin: Path, health_probe_bin: Path, processes: list,
                tmp_path: Path, *args: str) -> Process:
    """chunkd with the chart's flags (a RocksDB volume at tmp_path/volume),
    SERVING to the helm test pod's and the probes' commands."""
    objects = chart.render(*args)
    port, metrics = free_port(), free_port()
    flags = tmp_path / "chunkd.flags"
    flags.write_text(local_flagfile(flagfile(objects), port, metrics, tmp_path / "volume"))
    container = workload(objects)["spec"]["template"]["spec"]["containers"][0]
    assert container["args"][0].startswith("--flagfile=")
    server = Process([chunkd_bin, f"--flagfile={flags}", *container["args"][1:]],
                     tmp_path / "chunkd.log")
    processes.append(server)
    server.wait_for_port(port)

    commands = probe_commands(objects, health_probe_bin, port)
    assert commands
    for command in commands:
        result = run(command, check=False, timeout=30)
        assert result.returncode == 0, f"{command}: {result.stdout}{result.stderr}"
        assert "status: SERVING" in result.stdout + result.stderr
    # The probes ask for the same health services.
    for kind in ("livenessProbe", "readinessProbe", "startupProbe"):
        service = container[kind]["grpc"]["service"]
        command = [str(health_probe_bin), f"-addr=127.0.0.1:{port}", f"-service={service}",
                   "-connect-timeout=5s", "-rpc-timeout=5s"]
        assert run(command, check=False, timeout=30).returncode == 0, kind
    with urllib.request.urlopen(f"http://127.0.0.1:{metrics}/metrics", timeout=10) as response:
        assert b"chunkd_build_info" in response.read()
    return server


def test_default_values_serve(chart: Chart, chunkd_bin: Path, health_probe_bin: Path,
                              processes: list, tmp_path: Path) -> None:
    serve_chart(chart, chunkd_bin, health_probe_bin, processes, tmp_path)


def test_redis_index_serves(chart: Chart, chunkd_bin: Path, health_probe_bin: Path,
                            processes: list, tmp_path: Path) -> None:
    """index.type=redis with an external address, against a real Redis."""
    redis_server = shutil.which("redis-server")
    if redis_server is None:
        pytest.fail("redis-server is missing: make deps", pytrace=False)
    redis_port = free_port()
    redis = Process([redis_server, "--port", str(redis_port), "--bind", "127.0.0.1",
                     "--save", "", "--appendonly", "no", "--maxmemory-policy", "noeviction",
                     "--dir", tmp_path], tmp_path / "redis.log")
    processes.append(redis)
    redis.wait_for_port(redis_port)
    serve_chart(chart, chunkd_bin, health_probe_bin, processes, tmp_path,
                "--set", "index.type=redis", "--set", f"index.redis.address=127.0.0.1:{redis_port}")


def test_rocksdb_index_serves(chart: Chart, chunkd_bin: Path, health_probe_bin: Path,
                              processes: list, tmp_path: Path) -> None:
    """index.type=rocksdb: chunkd opens the database where the chart puts it,
    below the volume's mount point, and SIGUSR1 (the backup the chart's NOTES
    and README give) writes a checkpoint beside it, on the same volume."""
    server = serve_chart(chart, chunkd_bin, health_probe_bin, processes, tmp_path,
                         "-f", CHART / "ci" / "rocksdb-values.yaml")
    volume = tmp_path / "volume"
    assert (volume / "index" / "CURRENT").is_file(), sorted(volume.rglob("*"))
    server.proc.send_signal(signal.SIGUSR1)
    checkpoints = volume / "index.checkpoints"
    deadline = time.monotonic() + 60
    while not (checkpoints.is_dir()
               and any((c / "CURRENT").is_file() for c in checkpoints.iterdir())):
        assert server.proc.poll() is None, server.log.read_text()
        assert time.monotonic() < deadline, (
            f"no checkpoint in {checkpoints} 60 s after SIGUSR1: {server.log.read_text()}")
        time.sleep(0.2)


def test_builtin_redis_command(chart: Chart, processes: list, tmp_path: Path) -> None:
    """The built-in Redis' shell command, run by sh with a real redis-server
    (its data directory and port moved): the password from the environment
    is required, keys are never evicted, and hashes stay listpacks up to the
    chart's limits (set above Redis's defaults here, so that only the
    chart's arguments can give them)."""
    redis_server, redis_cli = shutil.which("redis-server"), shutil.which("redis-cli")
    if redis_server is None or redis_cli is None:
        pytest.fail("redis-server is missing: make deps", pytrace=False)
    entries, value = 600, 80
    objects = chart.render("-f", CHART / "ci" / "builtin-redis-values.yaml",
                           "--set", f"builtinRedis.hashMaxListpackEntries={entries}",
                           "--set", f"builtinRedis.hashMaxListpackValue={value}")
    container = one(objects, "StatefulSet")["spec"]["template"]["spec"]["containers"][0]
    assert container["command"] == ["sh", "-c"]
    port = free_port()
    script = container["args"][0].replace("--dir /data", f"--dir {tmp_path}")
    password = "a password with spaces"
    server = Process(["env", f"REDIS_PASSWORD={password}", "sh", "-c",
                      f"{script} --port {port} --bind 127.0.0.1"], tmp_path / "redis.log")
    processes.append(server)
    server.wait_for_port(port)

    def cli(*args: str, auth: bool = True) -> str:
        env_auth = ["env", f"REDISCLI_AUTH={password}"] if auth else []
        return run([*env_auth, redis_cli, "-p", str(port), *args], timeout=30).stdout.strip()

    assert "NOAUTH" in cli("ping", auth=False)
    assert cli("ping") == "PONG"
    assert cli("config", "get", "maxmemory-policy").splitlines() == ["maxmemory-policy", "noeviction"]
    assert cli("config", "get", "appendonly").splitlines() == ["appendonly", "yes"]
    assert cli("config", "get", "maxmemory").splitlines() == ["maxmemory", str(512 * 1024 * 1024)]
    assert cli("config", "get", "hash-max-listpack-entries").splitlines() == [
        "hash-max-listpack-entries", str(entries)]
    assert cli("config", "get", "hash-max-listpack-value").splitlines() == [
        "hash-max-listpack-value", str(value)]
    # A hash at both limits stays a listpack; one field more and Redis
    # converts it into a hash table.
    pairs = [word for i in range(entries) for word in (f"{i:030d}", "v" * value)]
    assert cli("hset", "bucket", *pairs) == str(entries)
    assert cli("object", "encoding", "bucket") == "listpack"
    assert cli("hset", "bucket", "one-more", "v") == "1"
    assert cli("object", "encoding", "bucket") == "hashtable"


def test_chart_flags_are_chunkd_flags(chart: Chart, chunkd_bin: Path) -> None:
    """Every flag any value set renders is one chunkd defines: a misspelt flag
    would stop the pod at start."""
    helpfull = run([chunkd_bin, "--helpfull"], check=False, timeout=30)
    known = set(re.findall(r"^\s+--(\w+) \(", helpfull.stdout + helpfull.stderr, re.M))
    assert {"listen", "index", "shutdown_grace"} <= known
    rendered: set[str] = set()
    for values in [None, *sorted((CHART / "ci").glob("*.yaml"))]:
        objects = chart.render(*([] if values is None else ["-f", values]))
        container = workload(objects)["spec"]["template"]["spec"]["containers"][0]
        for flag in flagfile(objects) + container["args"]:
            rendered.add(re.match(r"^--(\w+)", flag).group(1))
    assert rendered - known == set()
    # The value sets exercise the security and limit flags too.
    assert {"redis_password_file", "auth_tokens", "tls_cert", "max_streams", "index_cache_mib",
            "memory_budget", "stream_memory_budget", "max_streams_per_token", "max_streams_per_ip",
            "max_streams_per_connection", "max_stream_rate_per_connection",
            "stream_idle_timeout", "max_connection_idle",
            "index_max_entries", "hint_cache_mib"} <= rendered


#: The flags the memory plan reads (server/service/memory_plan.h).
MEMORY_FLAGS = ("--max_message_bytes=", "--max_inflight_bytes=", "--threads=",
                "--max_streams=", "--memory_budget=", "--stream_memory_budget=",
                "--index_max_entries=", "--hint_cache_mib=", "--index_cache_mib=")



@pytest.mark.parametrize("values", VALUE_SETS, ids=ids)
def test_memory_fits_the_container_limit(chart: Chart, chunkd_bin: Path, processes: list,
                                         tmp_path: Path, values: Path | None) -> None:
    """A real chunkd with each value set's memory flags and its container's
    memory limit: the bound it logs is within 85 % of the limit, and it
    warns of nothing (tests/integration/test_memory_limit.py shows the bound
    holds at full load)."""
    objects = chart.render(*values_args(values))
    container = workload(objects)["spec"]["template"]["spec"]["containers"][0]
    limit = quantity_bytes(container["resources"]["limits"]["memory"])
    rendered = flagfile(objects)
    # The same kind of index; an unreachable Redis does not stop chunkd.
    [index] = [local_index(f, tmp_path / "volume") for f in rendered if f.startswith("--index=")]
    if not index.startswith(("--index=memory", "--index=rocksdb:")):
        index = "--index=redis://127.0.0.1:1"
    limit_file = tmp_path / "memory.max"
    limit_file.write_text(f"{limit}\n")
    port = free_port()
    flags = [f for f in rendered + container["args"][1:] if f.startswith(MEMORY_FLAGS)]
    server = Process([chunkd_bin, f"--listen=127.0.0.1:{port}", "--metrics_listen=",
                      index, f"--memory_limit_file={limit_file}", *flags],
                     tmp_path / "chunkd.log")
    processes.append(server)
    server.wait_for_port(port)
    log = server.log.read_text()
    bound = re.search(rf"chunkd: memory limit {limit} bytes .* resident memory at most "
                      r"(\d+) bytes", log)
    assert bound, log
    assert int(bound.group(1)) <= 0.85 * limit, log
    assert "warning" not in log, log
