"""chunkd with the shared Redis index (docs/design.md, "The redis and redis-cluster backends") through failures:
real redis-server processes and a 3-master + 3-replica Redis Cluster on free
loopback ports, started and killed by the tests. Reference counts are read
back from Redis directly (redis_util.read_counts), never through chunkd."""

from __future__ import annotations

import random
import signal
import threading
import time
import urllib.request
import uuid
from collections import Counter
from pathlib import Path
from typing import Iterator, List

import grpc
import pytest

from chunkd_client import ChunkdError, Client
from chunkd_client.testing import ChunkdServer, health_status

from e2e_util import RPC_TIMEOUT, HealthWatch, random_bytes, stub
from metrics_util import parse_samples, scrape, value
from redis_util import FAILOVER_NODE_TIMEOUT_MS, RedisCluster, RedisServer, read_counts
from chunkd_client._proto.chunkd.v1 import chunkd_pb2 as pb

SERVING, NOT_SERVING = 1, 2
DEDUP_HEALTH = "chunkd.v1.ChunkService.Dedup"
#: Seconds within which chunkd must notice Redis coming or going (the probe
#: runs every second; generous for a loaded machine).
HEALTH_DEADLINE = 30.0


def ns() -> str:
    return f"t-{uuid.uuid4().hex[:12]}"


def wait_for(predicate, what: str, timeout: float = HEALTH_DEADLINE) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


def dedup_health(server: ChunkdServer) -> int:
    """The Dedup health status; 0 in the instant after start before chunkd
    registered it (NOT_FOUND)."""
    try:
        return health_status(server.address, service=DEDUP_HEALTH)
    except grpc.RpcError as e:
        if e.code() == grpc.StatusCode.NOT_FOUND:
            return 0
        raise


def retry_dedup(client: Client, data, namespace: str, stream_id: str,
                timeout: float = 60.0, **kwargs):
    """Dedup until it succeeds; only UNAVAILABLE may happen meanwhile."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return client.dedup_all(data, namespace=namespace,
                                    stream_id=stream_id, **kwargs)
        except ChunkdError as e:
            assert e.code == grpc.StatusCode.UNAVAILABLE, e
            assert time.monotonic() < deadline, f"no recovery: {e}"
            time.sleep(0.2)


@pytest.fixture(scope="module")
def cluster() -> Iterator[RedisCluster]:
    c = RedisCluster(3).start()
    try:
        yield c
    finally:
        c.cleanup()


@pytest.fixture(params=["redis", "redis-cluster"])
def shared_index(request, chunkd_bin: Path):
    """(chunkd, ports of the servers that hold entries) for either backend."""
    if request.param == "redis":
        server = RedisServer().start()
        try:
            with ChunkdServer(chunkd_bin, index=f"redis://{server.address}") as chunkd:
                yield chunkd, [server.port]
        finally:
            server.cleanup()
    else:
        c = request.getfixturevalue("cluster")
        with ChunkdServer(chunkd_bin, index=c.spec) as chunkd:
            yield chunkd, c.master_ports()


def test_dedup_through_redis_survives_a_redis_outage(
        chunkd_bin: Path, redis: RedisServer) -> None:
    data = random_bytes(seed=5, size=2_000_000)
    # A short failover wait: Redis stays down here, and calls fail after it.
    with ChunkdServer(chunkd_bin,
                      index=f"redis://{redis.address}?failover_wait_ms=500") as server:
        with Client(server.address, timeout=RPC_TIMEOUT) as client:
            assert client.server_info().index_backend == "redis"
            records, first = client.dedup_all(data, namespace="tenant")
            assert first.unique_bytes == len(data)
            # One key per chunk, namespaced, binary fingerprint, no hash tag.
            counts, _ = read_counts([redis.port], "tenant")
            assert counts == {r.fingerprint: 1 for r in records}
            _, second = client.dedup_all(data, namespace="tenant")
            assert second.unique_bytes == 0

            redis.kill()
            with pytest.raises(ChunkdError) as down:
                client.dedup_all(data, namespace="tenant")
            assert down.value.code == grpc.StatusCode.UNAVAILABLE
            assert f"redis at {redis.address}" in down.value.message
            assert ("redis did not come back within the failover wait of 500ms, "
                    "--redis_failover_wait") in down.value.message
            chunks, _ = client.chunk_all(data)
            assert len(chunks) == len(records)

            # Redis back (from its AOF): chunkd reconnects by itself.
            redis.restart()
            _, third = retry_dedup(client, data, "tenant", stream_id="")
            assert third.unique_bytes == 0
            counts, _ = read_counts([redis.port], "tenant")
            assert counts == {r.fingerprint: 3 for r in records}


def test_health_follows_redis_and_draining_wins(chunkd_bin: Path) -> None:
    redis = RedisServer()  # not started: chunkd must start without it
    try:
        with ChunkdServer(chunkd_bin,
                          index=f"redis://{redis.address}?failover_wait_ms=500",
                          extra_args=["--shutdown_grace=600s"]) as server:
            # Up and serving overall; Dedup is not, and says why in the log.
            assert health_status(server.address) == SERVING
            wait_for(lambda: dedup_health(server) == NOT_SERVING, "NOT_SERVING")
            wait_for(lambda: "Connection refused" in server.log(), "log")
            assert f"redis at {redis.address}" in server.log()
            with Client(server.address, timeout=RPC_TIMEOUT) as client:
                chunks, _ = client.chunk_all(b"x" * 100_000)
                assert chunks
                with pytest.raises(ChunkdError) as down:
                    client.dedup_all(b"x" * 100_000, namespace="n")
                assert down.value.code == grpc.StatusCode.UNAVAILABLE

                redis.start()
                wait_for(lambda: dedup_health(server) == SERVING, "SERVING")
                client.dedup_all(b"x" * 100_000, namespace="n")
                redis.kill()
                wait_for(lambda: dedup_health(server) == NOT_SERVING, "down again")
                redis.restart()
                wait_for(lambda: dedup_health(server) == SERVING, "back again")

                # Drain with a stream open: everything turns NOT_SERVING and
                # stays so across several probes of the (healthy) index. The
                # listener is closed then: watched over connections made
                # before.
                release = threading.Event()

                def pieces():
                    yield b"y" * 10_000
                    release.wait(60)

                channel = grpc.insecure_channel(server.address)
                watches = [HealthWatch(channel), HealthWatch(channel, DEDUP_HEALTH)]
                wait_for(lambda: all(w.last() == SERVING for w in watches), "watching")
                stream = client.dedup(pieces(), namespace="n")
                wait_for(lambda: _active_streams(server) == 1, "stream open")
                server.process.send_signal(signal.SIGTERM)
                wait_for(lambda: all(w.last() == NOT_SERVING for w in watches),
                         "draining")
                # Two more probes of the index, which answers: they do not
                # turn Dedup back to SERVING (a grace only a hang runs out
                # keeps the stream, and the drain, going meanwhile).
                probes = _health_probes(server)
                wait_for(lambda: _health_probes(server) >= probes + 2, "two more probes")
                assert [w.last() for w in watches] == [NOT_SERVING] * 2
                release.set()
                records, summary = stream.collect()
                assert summary.total_bytes == 10_000
                assert server.process.wait(30) == 0
                for watch in watches:
                    assert watch.ended.wait(30)
                    # Nothing but NOT_SERVING once draining began.
                    draining = watch.statuses.index(NOT_SERVING,
                                                    watch.statuses.index(SERVING))
                    assert set(watch.statuses[draining:]) == {NOT_SERVING}, watch.statuses
                channel.close()
    finally:
        redis.cleanup()


def _health_probes(server: ChunkdServer) -> float:
    """The index probes of the health monitor that Redis answered."""
    samples = parse_samples(scrape(server.metrics_address))
    return value(samples, "chunkd_index_requests_total", backend="redis", op="health",
                 result="ok") or 0


def _waiting_calls(server: ChunkdServer) -> float:
    """The index calls waiting for Redis to come back."""
    samples = parse_samples(scrape(server.metrics_address))
    return value(samples, "chunkd_index_waiting_calls") or 0


def _active_streams(server: ChunkdServer) -> int:
    text = urllib.request.urlopen(
        f"http://{server.metrics_address}/metrics", timeout=5).read().decode()
    for line in text.splitlines():
        if line.startswith("chunkd_active_streams"):
            return int(float(line.split()[-1]))
    return -1


def test_racing_streams_count_each_new_chunk_once(shared_index) -> None:
    server, ports = shared_index
    data = random_bytes(seed=11, size=3_000_000)
    namespace = ns()
    results: List[list] = [None] * 8
    errors: List[BaseException] = []
    start = threading.Barrier(8)

    def run(i: int) -> None:
        try:
            with Client(server.address, timeout=RPC_TIMEOUT) as client:
                start.wait(30)
                results[i], _ = client.dedup_all(data, namespace=namespace,
                                                 message_size=64 * 1024)
        except BaseException as e:  # reported below
            errors.append(e)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors, errors
    fingerprints = [r.fingerprint for r in results[0]]
    assert len(set(fingerprints)) == len(fingerprints) > 100
    new = Counter(r.fingerprint for rs in results for r in rs if r.is_new)
    assert new == Counter({fp: 1 for fp in fingerprints})
    counts, _ = read_counts(ports, namespace)
    assert counts == {fp: 8 for fp in fingerprints}


def test_two_chunkd_on_one_cluster_count_racing_streams_exactly(
        chunkd_bin: Path, cluster: RedisCluster) -> None:
    """Two chunkd on one Redis Cluster, 8 streams racing on the same new
    data (4 through each): every chunk new exactly once across both, 8
    references each; then 8 racing releases (4 through each) answer every
    count from 7 down to 0 exactly once per chunk."""
    data = random_bytes(seed=12, size=4_000_000)
    namespace = ns()
    with ChunkdServer(chunkd_bin, index=cluster.spec) as a, \
            ChunkdServer(chunkd_bin, index=cluster.spec) as b:
        servers = [a, b]
        results: List[list] = [None] * 8
        answers: List[list] = [None] * 8
        errors: List[BaseException] = []
        start = threading.Barrier(8)

        def run(i: int, release: bool) -> None:
            try:
                with Client(servers[i % 2].address, timeout=RPC_TIMEOUT) as client:
                    start.wait(30)
                    if release:
                        fps = [r.fingerprint for r in results[0]]
                        answers[i] = client.release(namespace, fps)
                    else:
                        results[i], _ = client.dedup_all(
                            data, namespace=namespace, message_size=64 * 1024)
            except BaseException as e:  # reported below
                errors.append(e)

        for release in (False, True):
            start.reset()
            threads = [threading.Thread(target=run, args=(i, release))
                       for i in range(8)]
            for t in threads:
                t.start()
            for t in threads:
                t.join(120)
            assert not errors, errors
            if not release:
                fingerprints = [r.fingerprint for r in results[0]]
                assert len(set(fingerprints)) == len(fingerprints) > 100
                new = Counter(r.fingerprint for rs in results for r in rs
                              if r.is_new)
                assert new == Counter({fp: 1 for fp in fingerprints})
                counts, _ = read_counts(cluster.master_ports(), namespace)
                assert counts == {fp: 8 for fp in fingerprints}
        for k, fp in enumerate(fingerprints):
            assert sorted(answer[k] for answer in answers) == list(range(8)), fp
        counts, _ = read_counts(cluster.master_ports(), namespace)
        assert counts == {}


def versions() -> List[bytes]:
    """A small versioned dataset: edits, an insertion, an append."""
    rng = random.Random(21)
    v1 = rng.randbytes(1_500_000)
    v2 = v1[:500_000] + rng.randbytes(40_000) + v1[540_000:]
    v3 = v2[:900_000] + rng.randbytes(5_000) + v2[900_000:] + rng.randbytes(200_000)
    return [v1, v2, v3]


def test_exact_counts_after_concurrent_dedups_and_releases(shared_index) -> None:
    server, ports = shared_index
    data = versions()
    namespace = ns()
    kept: List[Counter] = [None] * 6
    errors: List[BaseException] = []

    def run(i: int) -> None:
        # Deduplicate a version twice, then release the first run's
        # references (the release request sent twice with one request_id:
        # applied once).
        try:
            with Client(server.address, timeout=RPC_TIMEOUT) as client:
                version = data[i % 3]
                first, _ = client.dedup_all(version, namespace=namespace,
                                            avg_size=8192, min_size=2048,
                                            max_size=32768)
                second, _ = client.dedup_all(version, namespace=namespace,
                                             avg_size=8192, min_size=2048,
                                             max_size=32768)
                fps = [r.fingerprint for r in first]
                rid = f"release-{namespace}-{i}"
                left = client.release(namespace, fps, request_id=rid)
                again = client.release(namespace, fps, request_id=rid)
                assert again == left
                assert all(n >= 1 for n in left)  # our second run holds one
                kept[i] = Counter(r.fingerprint for r in second)
        except BaseException as e:
            errors.append(e)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(180)
    assert not errors, errors
    expected: Counter = Counter()
    for c in kept:
        expected.update(c)
    counts, _ = read_counts(ports, namespace)
    assert counts == dict(expected)

    # Releasing everything that is left empties the namespace.
    with Client(server.address, timeout=RPC_TIMEOUT) as client:
        fps = list(expected.elements())
        client.release(namespace, fps)
        assert client.find_missing(namespace, list(expected)) == list(expected)
    counts, per_server = read_counts(ports, namespace)
    assert counts == {} and sum(per_server.values()) == 0


def test_kill9_mid_stream_then_a_retry_with_the_stream_id_counts_exactly(
        chunkd_bin: Path, redis: RedisServer) -> None:
    data = random_bytes(seed=31, size=16 << 20)
    namespace = ns()
    piece = 1 << 20
    # Waiting off: the stream fails, and the client's replay makes it exact.
    with ChunkdServer(chunkd_bin,
                      index=f"redis://{redis.address}?failover_wait_ms=0") as server, \
            Client(server.address, timeout=RPC_TIMEOUT) as client:
        # Some of the stream is already indexed: the retry must still call
        # those chunks duplicates, and the rest new.
        earlier, _ = client.dedup_all(data[:3 << 20], namespace=namespace)
        earlier_fps = {r.fingerprint for r in earlier}

        def killing_pieces():
            for i in range(0, len(data), piece):
                if i == 6 * piece:
                    redis.kill()
                yield data[i:i + piece]

        with pytest.raises(ChunkdError) as failed:
            client.dedup_all(killing_pieces(), namespace=namespace,
                             stream_id="stream-31")
        assert failed.value.code == grpc.StatusCode.UNAVAILABLE
        assert f"redis at {redis.address} is unreachable" in failed.value.message

        # Meanwhile Chunk and GetServerInfo serve; the index RPCs say why not.
        chunks, _ = client.chunk_all(data[:2 << 20])
        assert chunks
        assert client.server_info().index_backend == "redis"
        for call in (lambda: client.find_missing(namespace, [b"a" * 32]),
                     lambda: client.release(namespace, [b"a" * 32])):
            with pytest.raises(ChunkdError) as down:
                call()
            assert down.value.code == grpc.StatusCode.UNAVAILABLE
            assert redis.address in down.value.message

        redis.restart()  # from its AOF: nothing acknowledged is lost
        records, summary = retry_dedup(client, data, namespace, "stream-31",
                                       message_size=300_000)
    # What a first successful run would have said.
    assert [r.is_new for r in records] == [
        r.fingerprint not in earlier_fps for r in records]
    assert summary.unique_chunks == sum(r.is_new for r in records) > 0
    assert summary.total_bytes == len(data)
    expected = Counter(r.fingerprint for r in earlier)
    expected.update(r.fingerprint for r in records)
    counts, _ = read_counts([redis.port], namespace)
    assert counts == dict(expected)
    assert max(counts.values()) == 2


def test_cluster_master_killed_during_a_long_dedup(chunkd_bin: Path) -> None:
    # Its own, with a short node timeout: this test breaks one master.
    cluster = RedisCluster(3, node_timeout_ms=FAILOVER_NODE_TIMEOUT_MS).start()
    try:
        data = random_bytes(seed=41, size=24 << 20)
        namespace = ns()
        piece = 1 << 20
        victim = cluster.master_ports()[1]
        with ChunkdServer(chunkd_bin, index=cluster.spec) as server, \
                Client(server.address, timeout=RPC_TIMEOUT) as client:
            assert client.server_info().index_backend == "redis-cluster"

            def slow_pieces():
                for i in range(0, len(data), piece):
                    if i == 4 * piece:
                        cluster.node(victim).kill()
                    time.sleep(0.15)  # long enough to span the failover
                    yield data[i:i + piece]

            outcome = "completed"
            try:
                records, _ = client.dedup_all(slow_pieces(), namespace=namespace,
                                              stream_id="long-41")
            except ChunkdError as e:
                # A clean failure: UNAVAILABLE naming Redis.
                assert e.code == grpc.StatusCode.UNAVAILABLE, e
                assert "redis" in e.message, e
                outcome = "failed"
            records, summary = retry_dedup(client, data, namespace, "long-41",
                                           timeout=90.0)
            assert all(r.is_new for r in records), outcome
            assert summary.total_bytes == len(data)
        cluster.wait_healthy()
        masters = cluster.master_ports()
        assert victim not in masters and len(masters) == 3
        counts, per_server = read_counts(masters, namespace)
        assert counts == {r.fingerprint: 1 for r in records}, outcome
        assert all(n > 0 for n in per_server.values()), per_server
    finally:
        cluster.cleanup()


def _index_errors(server: ChunkdServer) -> dict:
    """chunkd_index_requests_total{result="error"} per op (health probes
    left out: they report the outage, as they should), the waits that ended
    and the gRPC calls that did not end OK."""
    samples = parse_samples(scrape(server.metrics_address))
    out = {op: value(samples, "chunkd_index_requests_total",
                     backend="redis-cluster", op=op, result="error")
           for op in ("lookup", "insert", "release", "hints")}
    out["recovered"] = value(samples, "chunkd_index_waits_total", result="recovered")
    out["expired"] = value(samples, "chunkd_index_waits_total", result="expired")
    out["failed calls"] = sum(
        v for n, labels, v in samples if n == "grpc_server_handled_total"
        and labels["grpc_service"] == "chunkd.v1.ChunkService"
        and labels["grpc_code"] != "OK")
    return out


def test_dedup_and_find_missing_ride_through_a_master_kill(chunkd_bin: Path) -> None:
    """A master SIGKILLed while a Dedup stream runs and FindMissing calls keep
    coming: the calls that need its slots wait for the replica to take over
    (--redis_failover_wait, here far longer than any failover), and no call
    fails, in the client or in chunkd: no client retry is needed."""
    # Its own, with a short node timeout: this test breaks one master.
    cluster = RedisCluster(3, node_timeout_ms=FAILOVER_NODE_TIMEOUT_MS).start()
    try:
        data = random_bytes(seed=43, size=16 << 20)
        early = random_bytes(seed=44, size=2 << 20)
        namespace = ns()
        piece = 1 << 20
        victim = cluster.master_ports()[0]
        with ChunkdServer(chunkd_bin, index=cluster.spec + "?failover_wait_ms=60000") as server, \
                Client(server.address, timeout=RPC_TIMEOUT) as client:
            indexed, _ = client.dedup_all(early, namespace=namespace)
            early_fps = [r.fingerprint for r in indexed]
            lookups = {"calls": 0, "errors": []}
            stop = threading.Event()

            def look_up() -> None:
                # Bounded: stopped below, long before.
                for _ in range(100_000):
                    if stop.is_set():
                        return
                    try:
                        assert client.find_missing(namespace, early_fps) == []
                        lookups["calls"] += 1
                    except BaseException as e:  # reported below
                        lookups["errors"].append(e)
                        return

            def spanning_pieces():
                # The stream spans the failover: its first pieces go before
                # the kill, the rest once a call waits for the replica (the
                # lookups of the reader, spread over every master, do) and
                # the replica took over.
                for i in range(0, len(data), piece):
                    if i == 4 * piece:
                        cluster.node(victim).kill()
                        wait_for(lambda: _waiting_calls(server) >= 1,
                                 "a call waiting for the replica")
                        cluster.wait_healthy()
                    yield data[i:i + piece]

            reader = threading.Thread(target=look_up)
            reader.start()
            try:
                records, summary = client.dedup_all(spanning_pieces(), namespace=namespace,
                                                    stream_id="ride-43")
                cluster.wait_healthy()  # the failover is over
            finally:
                stop.set()
                reader.join(120)
            assert not lookups["errors"], lookups["errors"]
            assert lookups["calls"] > 0
            assert summary.total_bytes == len(data)
            assert all(r.is_new for r in records)
            errors = _index_errors(server)
        assert errors["failed calls"] == 0, errors
        assert all(errors[op] == 0 for op in ("lookup", "insert", "release", "hints")), errors
        assert errors["recovered"] > 0 and errors["expired"] == 0, errors
        masters = cluster.master_ports()
        assert victim not in masters and len(masters) == 3
        counts, _ = read_counts(masters, namespace)
        expected = Counter(r.fingerprint for r in indexed)
        expected.update(r.fingerprint for r in records)
        assert counts == dict(expected)
    finally:
        cluster.cleanup()


def test_chunk_streams_flow_while_a_dedup_waits_for_its_master(chunkd_bin: Path) -> None:
    """One worker thread, and a Dedup stream waiting for a master that is
    gone (no replica: its slots have no master until it restarts): the
    waiting call lends the pool a thread, so a Chunk stream still runs to
    its end; the master restarts from its AOF and the Dedup goes on."""
    cluster = RedisCluster(3, replicas=0).start()
    try:
        data = random_bytes(seed=45, size=4 << 20)
        namespace = ns()
        victim = cluster.master_ports()[1]
        # The wait outlasts the Chunk call's deadline: without a lent thread
        # the Chunk stream would time out behind the waiting Dedup.
        with ChunkdServer(chunkd_bin, index=cluster.spec + "?failover_wait_ms=300000",
                          extra_args=["--threads=1"]) as server, \
                Client(server.address, timeout=RPC_TIMEOUT) as client:
            cluster.node(victim).kill()
            outcome: dict = {}

            def dedup() -> None:
                try:
                    outcome["records"], _ = client.dedup_all(
                        data, namespace=namespace, stream_id="waits-45")
                except BaseException as e:  # reported below
                    outcome["error"] = e

            waiting = threading.Thread(target=dedup)
            waiting.start()
            try:
                wait_for(lambda: "index calls wait for redis to come back" in server.log(),
                         "a waiting index call")
                samples = parse_samples(scrape(server.metrics_address))
                assert value(samples, "chunkd_index_waiting_calls") >= 1
                chunks, summary = client.chunk_all(data)
                assert summary.total_bytes == len(data) and chunks
                assert waiting.is_alive(), "the Dedup should still wait"
            finally:
                cluster.node(victim).restart()
                cluster.wait_healthy()
                waiting.join(120)
            assert "error" not in outcome, outcome
            records = outcome["records"]
            assert [(r.offset, r.length) for r in records] == [
                (c.offset, c.length) for c in chunks]
            wait_for(lambda: "no index call waits for redis any more" in server.log(),
                     "the all-clear line")
        counts, _ = read_counts(cluster.master_ports(), namespace)
        assert counts == dict(Counter(r.fingerprint for r in records))
    finally:
        cluster.cleanup()


def test_a_drain_ends_the_calls_waiting_for_redis_with_unavailable(
        chunkd_bin: Path, redis: RedisServer) -> None:
    """A drain must not wait for Redis beyond its grace: a Dedup stream and a
    FindMissing waiting for a stopped Redis (with a failover wait far longer
    than the grace) end with UNAVAILABLE once the grace is over, the
    FindMissing saying that chunkd stopped waiting, and chunkd exits."""
    request = pb.FindMissingRequest(namespace="drain", fingerprints=[b"a" * 32])
    with ChunkdServer(chunkd_bin, index=f"redis://{redis.address}?failover_wait_ms=600000",
                      extra_args=["--shutdown_grace=2s"]) as server:
        channel, chunkd = stub(server.address)
        with channel:
            redis.process.send_signal(signal.SIGSTOP)
            try:
                looked_up = chunkd.FindMissing.future(request, timeout=RPC_TIMEOUT)
                params = pb.DedupParams(namespace="drain", stream_id="drain-1")
                deduped = chunkd.Dedup(iter([pb.DedupRequest(params=params, data=b"d" * 100_000)]),
                                       timeout=RPC_TIMEOUT)

                wait_for(lambda: _waiting_calls(server) == 2, "both calls waiting for Redis")
                server.process.send_signal(signal.SIGTERM)
                with pytest.raises(grpc.RpcError) as lookup:
                    looked_up.result()
                assert lookup.value.code() == grpc.StatusCode.UNAVAILABLE, lookup.value
                assert ("no more waiting for redis to come back: chunkd is stopping"
                        in lookup.value.details()), lookup.value
                with pytest.raises(grpc.RpcError) as dedup:
                    list(deduped)
                assert dedup.value.code() == grpc.StatusCode.UNAVAILABLE, dedup.value
                assert server.process.wait(RPC_TIMEOUT) == 0
            finally:
                redis.process.send_signal(signal.SIGCONT)


def test_password_file_secret_and_redacted_logs(chunkd_bin: Path, tmp_path: Path) -> None:
    secret = "s3cret-from-a-k8s-secret"
    redis = RedisServer(password=secret).start()
    try:
        password_file = tmp_path / "redis-password"
        password_file.write_text(secret + "\n")  # as `echo` writes it
        with ChunkdServer(chunkd_bin, index=f"redis://{redis.address}",
                          extra_args=[f"--redis_password_file={password_file}"]) as server:
            with Client(server.address, timeout=RPC_TIMEOUT) as client:
                _, summary = client.dedup_all(b"z" * 300_000, namespace="pw")
                assert summary.total_bytes == 300_000
            wait_for(lambda: dedup_health(server) == SERVING, "SERVING")
            assert secret not in server.log()
            assert f"index redis://{redis.address}" in server.log()
        # A password in the URL is logged as *** (the log file also holds
        # the command line that the test ran: skip it).
        with ChunkdServer(chunkd_bin,
                          index=f"redis://:{secret}@{redis.address}") as server:
            wait_for(lambda: dedup_health(server) == SERVING, "SERVING")
            printed = "\n".join(line for line in server.log().splitlines()
                                if not line.startswith("$ "))
            assert secret not in printed
            assert f"index redis://:***@{redis.address}" in printed
        # An unreadable password file: chunkd refuses to start and says why.
        missing = tmp_path / "no-such-file"
        with pytest.raises(Exception) as refused:
            ChunkdServer(chunkd_bin, index=f"redis://{redis.address}",
                         extra_args=[f"--redis_password_file={missing}"]).start(attempts=1)
        assert (f"--redis_password_file: cannot read the Redis password file "
                f"{missing}: No such file or directory") in str(refused.value)
    finally:
        redis.cleanup()


def test_an_evicting_redis_is_a_loud_warning(chunkd_bin: Path) -> None:
    redis = RedisServer(extra_args=["--maxmemory-policy", "allkeys-lru"]).start()
    try:
        with ChunkdServer(chunkd_bin, index=f"redis://{redis.address}") as server:
            wait_for(lambda: "maxmemory-policy" in server.log(), "the warning")
            log = server.log()
            assert (f"WARNING: redis at {redis.address} runs with "
                    "maxmemory-policy allkeys-lru") in log
            assert "noeviction" in log
            # A warning, not a refusal: Dedup serves.
            wait_for(lambda: dedup_health(server) == SERVING, "SERVING")
    finally:
        redis.cleanup()
