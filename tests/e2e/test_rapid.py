"""RapidCDC hints in Dedup through the real server: with the
default test (FF+RWT+FPT) Dedup returns exactly the records Dedup without
hints returns, on versions with inserts, deletes and overwrites, and the
summary reports the hints; a hint test with another algorithm is refused."""

from __future__ import annotations

import random
import re
import urllib.request

import grpc
import pytest

from chunkd_client._proto.chunkd.v1 import chunkd_pb2 as pb
from chunkd_client._proto.chunkd.v1 import chunkd_pb2_grpc as pb_grpc
from chunkd_client.testing import ChunkdServer
from e2e_util import RPC_TIMEOUT, cpu_flags, fastcdc_params, random_bytes, start_with_env

MiB = 1 << 20


def versions(count: int = 4) -> list:
    rng = random.Random(6)
    current = bytearray(random_bytes(60, 6 * MiB))
    out = [bytes(current)]
    for _ in range(count):
        for _ in range(20):
            at = rng.randrange(len(current))
            kind = rng.choice(["insert", "delete", "overwrite"])
            size = rng.randint(50, 150)
            if kind == "insert":
                current[at:at] = rng.randbytes(size)
            elif kind == "delete":
                del current[at : at + size]
            else:
                current[at : at + size] = rng.randbytes(len(current[at : at + size]))
        out.append(bytes(current))
    return out


def dedup(stub, data: bytes, namespace: str, hints: int):
    params = pb.DedupParams(chunking=fastcdc_params(), namespace=namespace, hints=hints)

    def requests():
        yield pb.DedupRequest(params=params)
        for i in range(0, len(data), MiB):
            yield pb.DedupRequest(data=data[i : i + MiB])

    records, summary = [], None
    for response in stub.Dedup(requests(), timeout=RPC_TIMEOUT):
        if response.WhichOneof("body") == "summary":
            summary = response.summary
        else:
            records.extend(
                (r.offset, r.length, r.fingerprint, r.is_new) for r in response.batch.chunks
            )
    return records, summary


def hint_metrics(server) -> dict:
    url = f"http://{server.metrics_address}/metrics"
    with urllib.request.urlopen(url, timeout=10) as response:
        text = response.read().decode()
    out = {}
    for m in re.finditer(r'^chunkd_hints_total\{(.*?)\} (\S+)$', text, re.M):
        labels = dict(re.findall(r'(\w+)="([^"]*)"', m.group(1)))
        out[(labels["test"], labels["result"])] = float(m.group(2))
    for m in re.finditer(r'^chunkd_hint_skipped_bytes_total\{test="(\w+)"\} (\S+)$', text, re.M):
        out[(m.group(1), "skipped")] = float(m.group(2))
    for m in re.finditer(r'^chunkd_hint_cache_total\{result="(\w+)"\} (\S+)$', text, re.M):
        out[("cache", m.group(1))] = float(m.group(2))
    return out


def test_hints_reproduce_dedup_without_hints(server) -> None:
    before = hint_metrics(server)
    accepted = rejected = 0
    with grpc.insecure_channel(server.address) as channel:
        stub = pb_grpc.ChunkServiceStub(channel)
        skipped = 0
        for i, data in enumerate(versions()):
            hinted, with_summary = dedup(stub, data, "rapid-on", pb.HINT_TEST_UNSPECIFIED)
            plain, plain_summary = dedup(stub, data, "rapid-off", pb.HINT_TEST_OFF)
            assert hinted == plain, f"version {i}"
            assert with_summary.unique_bytes == plain_summary.unique_bytes
            assert plain_summary.hints_tried == 0
            assert (with_summary.hints_accepted + with_summary.hints_rejected
                    == with_summary.hints_tried)
            accepted += with_summary.hints_accepted
            rejected += with_summary.hints_rejected
            skipped += with_summary.hint_skipped_bytes
            if i > 0:
                assert with_summary.hints_accepted > 0
        assert skipped > 0
    # The metrics count exactly what the summaries reported.
    after = hint_metrics(server)
    delta = {k: after[k] - before.get(k, 0) for k in after}
    assert delta[("ff_rwt_fpt", "accepted")] == accepted
    assert delta[("ff_rwt_fpt", "rejected")] == rejected
    assert delta[("ff_rwt_fpt", "skipped")] == skipped
    assert delta[("ff", "accepted")] == 0
    # Every chunk that passed the window test got its fingerprint from the
    # hint cache (from the third version on, most: they were duplicates
    # before) or from SHA-256.
    assert delta[("cache", "hit")] > 0
    looked_up = delta[("cache", "hit")] + delta[("cache", "miss")]
    assert accepted <= looked_up <= accepted + rejected


@pytest.mark.parametrize("algorithm", [pb.ALGORITHM_CRC32, pb.ALGORITHM_SEQCDC])
def test_hint_test_needs_fastcdc(server, algorithm) -> None:
    with grpc.insecure_channel(server.address) as channel:
        stub = pb_grpc.ChunkServiceStub(channel)
        params = pb.DedupParams(chunking=pb.ChunkingParams(algorithm=algorithm),
                                namespace="rapid", hints=pb.HINT_TEST_FF)
        with pytest.raises(grpc.RpcError) as info:
            list(stub.Dedup(iter([pb.DedupRequest(params=params, data=b"x" * 100)]),
                            timeout=RPC_TIMEOUT))
        assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "needs algorithm ALGORITHM_FASTCDC" in info.value.details()
        # Unset hints with another algorithm simply means no hints.
        params.hints = pb.HINT_TEST_UNSPECIFIED
        responses = list(stub.Dedup(iter([pb.DedupRequest(params=params, data=b"x" * 100)]),
                                    timeout=RPC_TIMEOUT))
        assert responses[-1].summary.total_bytes == 100


def _cpu_has_vpclmulqdq() -> bool:
    return {"avx512f", "avx512bw", "avx512vl", "pclmulqdq", "vpclmulqdq"} <= cpu_flags()


@pytest.mark.parametrize("backend", ["openssl", "vpclmulqdq"])
def test_content_key_backends_give_the_same_records(chunkd_bin, monkeypatch, backend) -> None:
    """$CHUNKD_CONTENT_KEY picks how the hint cache keys contents; the
    records never depend on it, and the cache serves the duplicates it saw
    (with the memory index it takes duplicates: those of version 1 are
    looked up from version 2 on)."""
    if backend == "vpclmulqdq" and not _cpu_has_vpclmulqdq():
        pytest.skip("this CPU lacks VPCLMULQDQ with AVX-512")
    monkeypatch.setenv("CHUNKD_CONTENT_KEY", backend)
    data = versions(2)
    with ChunkdServer(chunkd_bin) as server:
        assert f"content key {backend})" in server.log()
        with grpc.insecure_channel(server.address) as channel:
            stub = pb_grpc.ChunkServiceStub(channel)
            for i, version in enumerate(data):
                hinted, _ = dedup(stub, version, "keyed", pb.HINT_TEST_UNSPECIFIED)
                plain, _ = dedup(stub, version, "plain", pb.HINT_TEST_OFF)
                assert hinted == plain, f"version {i}"
        metrics = hint_metrics(server)
        assert metrics[("cache", "hit")] > 100


def test_unknown_content_key_backend_stops_the_server(chunkd_bin) -> None:
    result = start_with_env(chunkd_bin, CHUNKD_CONTENT_KEY="xxh3")
    assert result.returncode != 0
    assert "CHUNKD_CONTENT_KEY" in result.stderr and "'xxh3'" in result.stderr, result.stderr
