"""`chunkctl size` (docs/cli.md, docs/operations.md "Capacity"), run as the
built binary: the estimate's arithmetic in its JSON, the text it prints, and
the usage errors a bad figure gets. No server is involved."""

from __future__ import annotations

import json
import math

PB = 10**15
KIB = 1024
GIB = 1024**3


def estimate(chunkctl, *args: object) -> dict:
    result = chunkctl("size", *args, "--json")
    assert result.stderr == ""
    assert result.stdout.endswith("}\n") and result.stdout.count("\n") == 1
    return json.loads(result.stdout)


def test_one_petabyte_at_16_kib(chunkctl) -> None:
    doc = estimate(chunkctl, "--data", "1PB", "--avg", "16KiB")
    assert doc["data_bytes"] == PB
    assert doc["avg_bytes"] == 16 * KIB
    assert doc["entries"] == 61_035_156_250
    assert doc["hints"] is False
    assert doc["redis_master_memory_bytes"] == 64 * GIB
    by_name = {index["index"]: index for index in doc["indexes"]}
    assert list(by_name) == ["memory", "rocksdb", "redis", "redis-cluster"]
    for index in by_name.values():
        assert index["measured_at_entries"] == 10_000_000
        total = index.get("memory_bytes", index.get("disk_bytes"))
        assert total == round(doc["entries"] * index["bytes_per_entry"])
    assert by_name["memory"]["bytes_per_entry"] == 49
    assert by_name["memory"]["fits_one_machine"] is False
    assert by_name["rocksdb"]["bytes_per_entry"] == 37.2
    cluster = by_name["redis-cluster"]
    usable = 64 * GIB * doc["redis_data_share"]
    assert cluster["masters"] == math.ceil(cluster["memory_bytes"] / usable)
    assert cluster["entries_per_server"] == math.floor(
        usable / cluster["bytes_per_entry"])
    # ceil(log2(61,035,156,250 / 64)) = 30.
    assert cluster["bucket_bits"] == 30
    assert cluster["entries_per_bucket"] == round(doc["entries"] / 2**30, 1)
    assert by_name["redis"]["bucket_bits"] == 30
    assert by_name["redis"]["servers"] == cluster["masters"]


def test_hints_cost_more_and_master_memory_counts(chunkctl) -> None:
    plain = estimate(chunkctl, "--data", "1.5PB", "--avg", "64KB",
                     "--index", "redis-cluster")
    hints = estimate(chunkctl, "--data", "1.5PB", "--avg", "64KB",
                     "--index", "redis-cluster", "--hints")
    big = estimate(chunkctl, "--data", "1.5PB", "--avg", "64KB",
                   "--index", "redis-cluster", "--redis-master-memory",
                   "256GiB")
    assert plain["entries"] == 1_500_000_000_000_000 // 64_000
    assert hints["indexes"][0]["bytes_per_entry"] > \
        plain["indexes"][0]["bytes_per_entry"]
    assert hints["indexes"][0]["masters"] >= plain["indexes"][0]["masters"]
    assert big["indexes"][0]["masters"] == math.ceil(
        big["indexes"][0]["memory_bytes"] / (256 * GIB * 0.75))
    # A small index: bucket_bits stays at its least, 18; three masters.
    small = estimate(chunkctl, "--data", "100GB", "--index", "redis-cluster")
    assert small["indexes"][0]["bucket_bits"] == 18
    assert small["indexes"][0]["masters"] == 3


def test_text_output(chunkctl) -> None:
    out = chunkctl("size", "--data", "500TB", "--avg", "64KiB").stdout
    assert out.startswith("unique data    500,000,000,000,000 bytes (454.7 TiB)\n")
    assert "\nentries        7,629,394,532, one per unique chunk" in out
    assert "duplicate data adds no entries" in out
    assert "\nmemory         49 bytes an entry resident" in out
    assert "348.2 GiB: fits one machine" in out
    assert "\nrocksdb        37.2 bytes an entry on disk" in out
    assert "\n  disk         264.3 GiB\n" in out
    assert "?bucket_bits=27 (57 entries a bucket on average" in out
    assert "Redis servers are counted 75 % full" in out


def test_bad_input_is_a_usage_error(chunkctl) -> None:
    cases = [
        (["--data", "500XB"], "--data: expected a size such as 500TB, 1.5PB "
                              "or 64KiB"),
        (["--data", "1PB", "--avg", "0"], "--avg: 0 bytes"),
        (["--data", "1PB", "--index", "etcd"],
         "--index: expected memory, rocksdb, redis, redis-cluster or all, "
         "got \"etcd\""),
        (["--data", "1PB", "--redis-master-memory", "-1GiB"],
         "--redis-master-memory: expected a size"),
        ([], "missing --data SIZE"),
    ]
    for args, message in cases:
        result = chunkctl("size", *args, check=False)
        assert result.returncode == 2, args
        assert result.stdout == ""
        assert result.stderr.startswith("chunkctl: "), result.stderr
        assert message in result.stderr, result.stderr
        assert result.stderr.endswith("(see chunkctl size --help)\n")
    usage = chunkctl("size", "--help").stdout
    assert usage.startswith("Usage: chunkctl size --data SIZE")
    assert "KiB, MiB, GiB, TiB, PiB (powers of 1024)" in usage
