"""The faults the soak injects, each a function of the fleet that returns a
one-line description of what it did. Every wait in them is bounded
(fleet.SETTLE_TIMEOUT): a fleet that does not recover fails the soak."""

from __future__ import annotations

import random
import signal
import time
from typing import Callable, Dict, List

from fleet import (NODE_TIMEOUT_MS, SETTLE_TIMEOUT, Cluster, RedisServer, RelayProcess, Replica,
                   SoakError)

#: The fault kinds, in the order of the first round.
KINDS = ("rolling_restart", "kill_replica", "kill_master", "stop_master", "kill_redis_replica",
         "cut_connections", "restart_cluster")


class Faults:
    def __init__(self, cluster: Cluster, replicas: List[Replica], relays: List[RelayProcess],
                 on_start: Callable[[Replica], None], grace_seconds: float,
                 rng: random.Random) -> None:
        self.cluster = cluster
        self.replicas = replicas
        self.relays = relays
        self.on_start = on_start  # told of every replica (re)start
        self.grace = grace_seconds
        self.rng = rng

    def inject(self, kind: str) -> str:
        action: Dict[str, Callable[[], str]] = {
            "rolling_restart": self.rolling_restart,
            "kill_replica": self.kill_replica,
            "kill_master": self.kill_master,
            "stop_master": self.stop_master,
            "kill_redis_replica": self.kill_redis_replica,
            "cut_connections": self.cut_connections,
            "restart_cluster": self.restart_cluster,
        }
        return action[kind]()

    def _start(self, replica: Replica) -> None:
        replica.start()
        self.on_start(replica)

    def rolling_restart(self) -> str:
        """SIGTERM each replica in turn; the next once this one serves again."""
        for replica in self.replicas:
            code = replica.terminate(self.grace + 15)
            if code != 0:
                raise SoakError(f"{replica.life} exited with {code} after SIGTERM")
            self._start(replica)
        return "SIGTERM and restart of " + ", ".join(r.address for r in self.replicas)

    def kill_replica(self) -> str:
        replica = self.rng.choice(self.replicas)
        replica.kill()
        self._start(replica)
        return f"SIGKILL and restart of chunkd {replica.address}"

    def _kill_until(self, node: RedisServer, done: Callable[[], bool], failure: str) -> float:
        """SIGKILL a Redis node, wait until `done` (at most SETTLE_TIMEOUT),
        then start it again from its AOF; returns the seconds it took."""
        node.kill()
        started = time.monotonic()
        while not done():
            if time.monotonic() - started > SETTLE_TIMEOUT:
                raise SoakError(failure)
            time.sleep(0.1)
        waited = time.monotonic() - started
        self.cluster.restart_node(node)
        return waited

    def kill_master(self) -> str:
        """SIGKILL a master; its replica takes over; the old master comes back
        from its AOF as a replica."""
        master = self.rng.choice(self.cluster.masters())
        failover = self._kill_until(
            master, lambda: master.port not in self.cluster.redis.master_ports(),
            f"no failover of redis {master.address}")
        self.cluster.wait_healthy()
        return f"SIGKILL of redis master {master.address}; failover in {failover:.1f} s"

    def stop_master(self) -> str:
        """SIGSTOP a master for half the node timeout: no failover."""
        master = self.rng.choice(self.cluster.masters())
        pause = NODE_TIMEOUT_MS / 2000
        master.process.send_signal(signal.SIGSTOP)
        try:
            time.sleep(pause)
        finally:
            master.process.send_signal(signal.SIGCONT)
        self.cluster.wait_healthy()
        return f"SIGSTOP of redis master {master.address} for {pause:.1f} s"

    def kill_redis_replica(self) -> str:
        """SIGKILL a Redis replica and keep it down until the cluster marks
        it failed: until then its master's writes are not confirmed (WAIT),
        after it they are not waited for; then it comes back from its AOF
        and resynchronises."""
        masters = set(self.cluster.redis.master_ports())
        node = self.rng.choice([n for n in self.cluster.nodes if n.port not in masters])
        down = self._kill_until(node, lambda: self.cluster.marked_failed(node),
                                f"redis replica {node.address} never marked failed")
        self.cluster.wait_healthy()
        return f"SIGKILL of redis replica {node.address}; marked failed after {down:.1f} s"

    def cut_connections(self) -> str:
        relay = self.rng.choice(self.relays)
        relay.cut()
        return f"every client connection through {relay.address} reset"

    def restart_cluster(self) -> str:
        """SIGTERM every node at once (each writes its AOF out), then start
        them all again."""
        for node in self.cluster.nodes:
            node.process.terminate()
        for node in self.cluster.nodes:
            node.process.wait(SETTLE_TIMEOUT)
        started = time.monotonic()
        for node in self.cluster.nodes:
            self.cluster.restart_node(node)
        self.cluster.wait_healthy()
        return (f"SIGTERM of all {len(self.cluster.nodes)} redis nodes; back from their "
                f"AOF in {time.monotonic() - started:.1f} s")
