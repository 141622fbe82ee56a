"""Real Redis for the end-to-end tests: one redis-server, or a Redis Cluster
of masters with replicas built with `redis-cli --cluster create`, on free
loopback ports in temporary directories, started and stopped by the tests;
and a minimal RESP client that reads what chunkd wrote straight from the
servers (no Redis client library: the tests check chunkd's bytes, not a
library's view of them)."""

from __future__ import annotations

import shutil
import socket
import subprocess
import tempfile
import time
from typing import Dict, List, Optional, Sequence, Tuple

from chunkd_client.testing import free_port

#: Seconds a server or cluster may take to come up or heal.
STARTUP_TIMEOUT = 30.0
#: A cluster node's --cluster-node-timeout unless a test sets it: Redis's
#: own default, which no stall of a loaded machine reaches, so that the
#: clusters of tests that break no node never fail a master over by
#: themselves. Tests that kill a master to see its replica take over pass
#: FAILOVER_NODE_TIMEOUT_MS, and must tolerate a spurious failover too.
NODE_TIMEOUT_MS = 15000
#: The node timeout of the clusters whose tests wait for a failover.
FAILOVER_NODE_TIMEOUT_MS = 1000


class RespError(Exception):
    """An error reply of a Redis server."""


class Resp:
    """One RESP2 connection; binary-safe arguments and replies."""

    def __init__(self, port: int, timeout: float = 10.0) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.reader = self.sock.makefile("rb")

    def close(self) -> None:
        self.reader.close()
        self.sock.close()

    def __enter__(self) -> "Resp":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @staticmethod
    def _encode(args: Sequence[object]) -> bytes:
        out = [b"*%d\r\n" % len(args)]
        for a in args:
            b = a if isinstance(a, bytes) else str(a).encode()
            out.append(b"$%d\r\n%s\r\n" % (len(b), b))
        return b"".join(out)

    def _read(self) -> object:
        line = self.reader.readline()
        if not line.endswith(b"\r\n"):
            raise ConnectionError("connection closed by redis")
        kind, rest = line[:1], line[1:-2]
        if kind == b"+":
            return rest
        if kind == b"-":
            return RespError(rest.decode(errors="replace"))
        if kind == b":":
            return int(rest)
        if kind == b"$":
            n = int(rest)
            if n < 0:
                return None
            data = self.reader.read(n + 2)
            return data[:-2]
        if kind == b"*":
            n = int(rest)
            return None if n < 0 else [self._read() for _ in range(n)]
        raise ConnectionError(f"bad RESP line {line!r}")

    def pipeline(self, commands: Sequence[Sequence[object]]) -> List[object]:
        """Sends every command, then reads every reply (errors as RespError
        objects in the list)."""
        self.sock.sendall(b"".join(self._encode(c) for c in commands))
        return [self._read() for _ in commands]

    def call(self, *args: object) -> object:
        reply = self.pipeline([args])[0]
        if isinstance(reply, RespError):
            raise reply
        return reply


def _ping(port: int, password: str = "") -> bool:
    try:
        with Resp(port, timeout=1.0) as r:
            if password:
                r.call("AUTH", password)
            return r.call("PING") == b"PONG"
    except (OSError, RespError):
        return False


class RedisServer:
    """One redis-server on 127.0.0.1 in a temporary directory.

    persistent: --appendonly yes --appendfsync always, so that kill -9 loses
    nothing Redis acknowledged, and restart() finds it again.
    password: --requirepass (client() connections are not authenticated).
    node_timeout_ms: --cluster-node-timeout of a cluster node.
    """

    def __init__(self, *, persistent: bool = False, cluster: bool = False,
                 password: str = "", extra_args: Sequence[str] = (),
                 node_timeout_ms: int = NODE_TIMEOUT_MS) -> None:
        self.password = password
        self.node_timeout_ms = node_timeout_ms
        self.port = free_port()
        self.bus_port = free_port() if cluster else 0
        self.persistent = persistent
        self.cluster = cluster
        self.extra_args = list(extra_args)
        self.dir = tempfile.mkdtemp(prefix="chunkd-redis-")
        self.process: Optional[subprocess.Popen] = None

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def command(self) -> List[str]:
        binary = shutil.which("redis-server")
        if binary is None:
            raise RuntimeError("redis-server is not installed (make deps installs it)")
        args = [binary, "--port", str(self.port), "--bind", "127.0.0.1",
                "--dir", self.dir, "--save", "", "--maxmemory-policy", "noeviction",
                "--hash-max-listpack-entries", "512"]
        if self.persistent:
            args += ["--appendonly", "yes", "--appendfsync", "always"]
        else:
            args += ["--appendonly", "no"]
        if self.password:
            args += ["--requirepass", self.password]
        if self.cluster:
            args += ["--cluster-enabled", "yes", "--cluster-port", str(self.bus_port),
                     "--cluster-config-file", "nodes.conf",
                     "--cluster-node-timeout", str(self.node_timeout_ms)]
        return args + self.extra_args

    def start(self) -> "RedisServer":
        self.process = subprocess.Popen(
            self.command(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + STARTUP_TIMEOUT
        while not _ping(self.port, self.password):
            if self.process.poll() is not None:
                raise RuntimeError(f"redis-server on {self.port} exited "
                                   f"with {self.process.returncode}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"redis-server on {self.port} did not start")
            time.sleep(0.05)
        return self

    restart = start

    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def kill(self) -> None:
        """kill -9, and reap."""
        if self.running():
            self.process.kill()
            self.process.wait(10)

    def cleanup(self) -> None:
        self.kill()
        shutil.rmtree(self.dir, ignore_errors=True)

    def client(self) -> Resp:
        return Resp(self.port)


class RedisCluster:
    """`masters` masters with `replicas` replicas each (every node with its
    AOF, and the node timeout `node_timeout_ms`), via redis-cli --cluster
    create."""

    def __init__(self, masters: int = 3, replicas: int = 1,
                 node_timeout_ms: int = NODE_TIMEOUT_MS) -> None:
        self.replicas = replicas
        self.nodes = [RedisServer(cluster=True, persistent=True,
                                  node_timeout_ms=node_timeout_ms)
                      for _ in range((1 + replicas) * masters)]

    def start(self) -> "RedisCluster":
        try:
            for node in self.nodes:
                node.start()
            subprocess.run(
                ["redis-cli", "--cluster", "create",
                 *[n.address for n in self.nodes],
                 "--cluster-replicas", str(self.replicas), "--cluster-yes"],
                check=True, capture_output=True, timeout=60)
            self.wait_healthy()
        except BaseException:
            self.cleanup()
            raise
        return self

    @property
    def spec(self) -> str:
        return "redis-cluster://" + ",".join(n.address for n in self.nodes)

    def node(self, port: int) -> RedisServer:
        return next(n for n in self.nodes if n.port == port)

    def slot_owners(self) -> List[Tuple[int, int, int]]:
        """(first slot, last slot, master port) per CLUSTER SLOTS of a
        running node."""
        for n in self.nodes:
            if not n.running():
                continue
            try:
                with n.client() as r:
                    slots = r.call("CLUSTER", "SLOTS")
                return [(s[0], s[1], s[2][1]) for s in slots]
            except (OSError, RespError):
                continue
        raise RuntimeError("no cluster node answers")

    def master_ports(self) -> List[int]:
        return sorted({port for _, _, port in self.slot_owners()})

    def wait_healthy(self, timeout: float = STARTUP_TIMEOUT) -> None:
        """Until every running node says cluster_state:ok, every slot has a
        running master, and every master has its replica linked."""
        deadline = time.monotonic() + timeout
        last = ""
        while time.monotonic() < deadline:
            try:
                ok = True
                for n in self.nodes:
                    if not n.running():
                        continue
                    with n.client() as r:
                        info = r.call("CLUSTER", "INFO").decode()
                        repl = r.call("INFO", "replication").decode()
                    if "cluster_state:ok" not in info:
                        ok, last = False, f"{n.address}: cluster_state not ok"
                    if "role:slave" in repl and "master_link_status:up" not in repl:
                        ok, last = False, f"{n.address}: replica link down"
                owners = self.slot_owners()
                covered = sum(b - a + 1 for a, b, _ in owners)
                if covered != 16384:
                    ok, last = False, f"{covered} slots covered"
                for port in {p for _, _, p in owners}:
                    if not self.node(port).running():
                        ok, last = False, f"slot owner {port} is dead"
                if ok:
                    return
            except (OSError, RespError, ValueError) as e:
                last = str(e)
            time.sleep(0.1)
        raise TimeoutError(f"redis cluster not healthy: {last}")

    def cleanup(self) -> None:
        for n in self.nodes:
            n.cleanup()


def _uvarint(data: bytes, at: int) -> Tuple[int, int]:
    value, shift = 0, 0
    while True:
        b = data[at]
        at += 1
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return value, at
        shift += 7


def read_counts(ports: Sequence[int], namespace: str) -> Tuple[Dict[bytes, int], Dict[int, int]]:
    """What the servers hold for `namespace`, read directly from its buckets
    (chunkd-b<bits>:<ns>:<fingerprint prefix>, field: the rest of the
    fingerprint, value: uvarint count, uvarint size, hint records): the
    reference count per binary fingerprint, and the number of entries per
    server."""
    ns = namespace.encode()
    counts: Dict[bytes, int] = {}
    per_server: Dict[int, int] = {}
    for port in ports:
        keys: List[bytes] = []
        with Resp(port) as r:
            cursor = b"0"
            while True:
                cursor, batch = r.call("SCAN", cursor, "MATCH",
                                       b"chunkd-b*:" + ns + b":*", "COUNT", 1000)
                # The glob's * may span a ':' of binary bucket bytes: the
                # key's own parts decide.
                keys.extend(k for k in batch if k.split(b":", 2)[1] == ns)
                if cursor == b"0":
                    break
            replies = r.pipeline([("HGETALL", k) for k in keys])
        per_server[port] = 0
        for key, reply in zip(keys, replies):
            assert not isinstance(reply, RespError), reply
            layout, _, bucket = key.split(b":", 2)
            kept = int(layout[len(b"chunkd-b"):]) // 8  # prefix bytes not in the field
            for field, value in zip(reply[::2], reply[1::2]):
                count, at = _uvarint(value, 0)
                _, at = _uvarint(value, at)  # the size: every entry has one
                fp = field if not bucket else bucket[:kept] + field
                assert fp not in counts, f"{fp!r} on two servers"
                counts[fp] = count
                per_server[port] += 1
    return counts, per_server
