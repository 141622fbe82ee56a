"""The processes of the soak, all on loopback: a Redis Cluster of 3 masters
and 3 replicas with the append-only file on, 3 chunkd replicas sharing it,
a relay in front of each replica (the clients dial the relays), and a
sampler that reads each process's resident memory, threads and open file
descriptors once a second, per life (a restarted process starts a new
life)."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Dict, List, Optional

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "e2e"))

from chunkd_client.testing import free_port, wait_until_serving  # noqa: E402
from redis_util import RedisCluster, RedisServer, read_counts  # noqa: E402,F401

#: Redis Cluster's node timeout: a master silent this long is failed over.
NODE_TIMEOUT_MS = 3000
#: How long a process may take to start, stop or heal before the soak fails.
SETTLE_TIMEOUT = 60.0


class SoakError(RuntimeError):
    """A process did not do what the soak needs of it."""


class Cluster:
    """3 + 3 Redis Cluster nodes, AOF on (fsync every second), node timeout
    NODE_TIMEOUT_MS; every node keeps its port and directory for its
    life, so a restarted node reloads its AOF and its cluster config."""

    def __init__(self, on_start: Callable[[str, int], None]) -> None:
        self.redis = RedisCluster(3)
        self.on_start = on_start  # told (life, pid) of every node (re)start
        self.lives: Dict[int, int] = {}
        for node in self.redis.nodes:
            node.extra_args += ["--appendfsync", "everysec",
                                "--cluster-node-timeout", str(NODE_TIMEOUT_MS)]

    @property
    def nodes(self) -> List[RedisServer]:
        return self.redis.nodes

    @property
    def spec(self) -> str:
        return self.redis.spec

    def start(self) -> None:
        self.redis.start()
        for node in self.nodes:
            self._started(node)

    def _started(self, node: RedisServer) -> None:
        self.lives[node.port] = self.lives.get(node.port, 0) + 1
        self.on_start(f"redis-{node.port}.{self.lives[node.port]}", node.process.pid)

    def masters(self) -> List[RedisServer]:
        return [self.redis.node(p) for p in self.redis.master_ports()]

    def wait_healthy(self) -> None:
        self.redis.wait_healthy(SETTLE_TIMEOUT)

    def marked_failed(self, node: RedisServer) -> bool:
        """Whether every running master flags `node` as failed (FAIL, not
        the suspicion PFAIL)."""
        for master in self.masters():
            if not master.running():
                return False
            with master.client() as r:
                lines = r.call("CLUSTER", "NODES").decode().splitlines()
            line = next((x for x in lines if f":{node.port}@" in x), "")
            flags = line.split()[2].split(",") if line else []
            if "fail" not in flags:
                return False
        return True

    def restart_node(self, node: RedisServer) -> None:
        node.restart()
        self._started(node)

    def stop_node(self, node: RedisServer) -> None:
        """SIGTERM: Redis writes its AOF out and exits."""
        if node.running():
            node.process.terminate()
            node.process.wait(SETTLE_TIMEOUT)

    def cleanup(self) -> None:
        self.redis.cleanup()


class Replica:
    """One chunkd on fixed ports; restarts reuse them."""

    def __init__(self, index: int, binary: Path, index_spec: str, log_dir: Path,
                 extra_args: List[str]) -> None:
        self.index = index
        self.binary = binary
        self.index_spec = index_spec
        self.port = free_port()
        self.metrics_port = free_port()
        self.log_path = log_dir / f"chunkd-{index}.log"
        self.extra_args = extra_args
        self.process: Optional[subprocess.Popen] = None
        self.lives = 0
        self.ready_seconds: List[float] = []  # exec to SERVING, per life

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def metrics_address(self) -> str:
        return f"127.0.0.1:{self.metrics_port}"

    @property
    def life(self) -> str:
        return f"chunkd-{self.index}.{self.lives}"

    def start(self) -> None:
        command = [str(self.binary), f"--listen={self.address}",
                   f"--metrics_listen={self.metrics_address}",
                   f"--index={self.index_spec}", *self.extra_args]
        with self.log_path.open("ab") as log:
            log.write(f"$ {' '.join(command)}\n".encode())
            started = time.monotonic()
            self.process = subprocess.Popen(command, stdin=subprocess.DEVNULL,
                                            stdout=log, stderr=subprocess.STDOUT)
        self.lives += 1
        try:
            wait_until_serving(self.address, timeout=SETTLE_TIMEOUT, process=self.process)
        except TimeoutError as e:
            raise SoakError(f"{self.life} did not start: {e}") from None
        self.ready_seconds.append(time.monotonic() - started)

    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def terminate(self, timeout: float) -> int:
        """SIGTERM and wait for the exit; its code."""
        self.process.terminate()
        try:
            return self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            raise SoakError(f"{self.life} did not exit {timeout} s after SIGTERM") from None

    def kill(self) -> None:
        self.process.kill()
        self.process.wait(SETTLE_TIMEOUT)


class RelayProcess:
    """relay.py in front of one replica."""

    def __init__(self, upstream_port: int) -> None:
        self.port = free_port()
        self.process = subprocess.Popen(
            [sys.executable, str(HERE / "relay.py"), str(self.port), str(upstream_port)],
            stdout=subprocess.PIPE, stdin=subprocess.DEVNULL)
        if self.process.stdout.readline().strip() != b"ready":
            raise SoakError("the relay did not start")

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def cut(self) -> None:
        self.process.send_signal(signal.SIGUSR1)

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(SETTLE_TIMEOUT)


@dataclass
class Series:
    """One process life's samples: (time, rss bytes, threads, fds)."""

    role: str
    life: str
    samples: List[List[float]] = field(default_factory=list)


def sample_process(pid: int) -> Optional[List[float]]:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
        fds = len(os.listdir(f"/proc/{pid}/fd"))
    except (OSError, ValueError):
        return None
    rss = re.search(r"^VmRSS:\s+(\d+) kB", status, re.MULTILINE)
    threads = re.search(r"^Threads:\s+(\d+)", status, re.MULTILINE)
    if rss is None or threads is None:
        return None  # a zombie
    return [time.time(), int(rss.group(1)) * 1024, int(threads.group(1)), fds]


class Sampler:
    """Samples every registered process once a second, on a thread."""

    def __init__(self) -> None:
        self.series: Dict[str, Series] = {}
        self._watched: Dict[str, tuple] = {}  # life -> (role, pid)
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def watch(self, role: str, life: str, pid: int) -> None:
        with self._lock:
            self._watched[life] = (role, pid)
            self.series.setdefault(life, Series(role, life))

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)

    def _run(self) -> None:
        while not self._stop.wait(1.0):
            with self._lock:
                watched = list(self._watched.items())
            for life, (role, pid) in watched:
                sample = sample_process(pid)
                if sample is None:
                    with self._lock:
                        self._watched.pop(life, None)
                    continue
                self.series[life].samples.append(sample)
