"""An index in chunkd 0.3's key-per-entry layout (keys
chunkd:<ns>:<fingerprint>, hashes of r, s, h:<params>, r:<params>), written
here as 0.3 wrote it: chunkd refuses to start on it, naming the command;
`chunkctl index migrate` moves it into buckets; then chunkd serves it and
its releases count down exactly what the old keys held."""

from __future__ import annotations

import random
import subprocess
from pathlib import Path
from typing import Dict

from chunkd_client import Client
from chunkd_client.testing import ChunkdServer

from e2e_util import RPC_TIMEOUT
from redis_util import Resp, RedisServer, read_counts

NAMESPACE = "old"


def write_old_layout(port: int, entries: int) -> Dict[bytes, int]:
    """Entries as chunkd 0.3 kept them; every seventh with a hint list and
    its run. Returns fingerprint -> count."""
    rng = random.Random(30)
    counts: Dict[bytes, int] = {}
    commands = []
    for i in range(entries):
        fp = rng.randbytes(32)
        counts[fp] = 1 + i % 3
        fields = ["r", counts[fp], "s", 4096 + i]
        if i % 7 == 0:
            fields += ["h:fastcdc-16k", "16384,20480", "r:fastcdc-16k", "1,2,3"]
        commands.append(["HSET", b"chunkd:" + NAMESPACE.encode() + b":" + fp,
                         *fields])
    with Resp(port) as r:
        r.pipeline(commands)
    return counts


def test_an_old_index_is_refused_then_migrated(chunkd_bin: Path, chunkctl):
    redis = RedisServer().start()
    try:
        spec = f"redis://{redis.address}"
        old = write_old_layout(redis.port, 600)

        refused = subprocess.run(
            [str(chunkd_bin), "--listen=127.0.0.1:0", "--metrics_listen=",
             f"--index={spec}"],
            capture_output=True, text=True, timeout=60)
        assert refused.returncode != 0
        assert "key-per-entry layout of chunkd 0.3" in refused.stderr, refused.stderr
        assert "run `chunkctl index migrate --index=" in refused.stderr, refused.stderr

        moved = chunkctl("index", "migrate", "--index", spec, "--settle-ms", "0")
        assert "moved 600 entries from 600 keys (the key-per-entry layout) " \
            "into buckets of bucket_bits 18" in moved.stdout, moved.stdout
        again = chunkctl("index", "migrate", "--index", spec, "--settle-ms", "0")
        assert "moved 0 entries from 0 keys" in again.stdout, again.stdout

        counts, _ = read_counts([redis.port], NAMESPACE)
        assert counts == old
        with ChunkdServer(chunkd_bin, index=spec) as server, \
                Client(server.address, timeout=RPC_TIMEOUT) as client:
            fps = list(old)
            left = client.release(NAMESPACE, fps)
            assert left == [old[fp] - 1 for fp in fps]
        counts, _ = read_counts([redis.port], NAMESPACE)
        assert counts == {fp: n - 1 for fp, n in old.items() if n > 1}
    finally:
        redis.cleanup()


def test_migrate_names_what_is_wrong(chunkctl):
    missing = chunkctl("index", "migrate", check=False)
    assert missing.returncode == 2
    assert "--index is required" in missing.stderr, missing.stderr
    memory = chunkctl("index", "migrate", "--index", "memory", check=False)
    assert memory.returncode == 2
    assert "only a redis:// or redis-cluster:// index" in memory.stderr
    bits = chunkctl("index", "migrate", "--index", "redis://127.0.0.1:1",
                    "--bucket-bits", "4", check=False)
    assert bits.returncode == 2
    assert "--bucket-bits must be 8..32, got 4" in bits.stderr, bits.stderr
    sub = chunkctl("index", "compact", check=False)
    assert sub.returncode == 2
    assert 'unknown subcommand "compact"; known: migrate' in sub.stderr
