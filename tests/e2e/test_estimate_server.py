"""The Estimate RPC of a real chunkd (docs/design.md, "The Estimate
stream"), with raw grpcio stubs, on the memory and the rocksdb index: a
namespace is compared with, read and never written; the entry limit's
refusal carries its ErrorInfo; the stream is counted with rpc="Estimate" on
/metrics."""

from __future__ import annotations

from pathlib import Path
from typing import Iterator, List, Sequence, Tuple

import grpc
import pytest
from google.rpc import error_details_pb2, status_pb2

from chunkd_client.testing import ChunkdServer, serving
from e2e_util import RPC_TIMEOUT, fastcdc_params, pb, pb_grpc, random_bytes
from metrics_util import parse_samples, scrape, value

#: --estimate_max_entries of the servers here: room for the data sets of
#: the namespace test, not for 64-byte fixed chunks of 1 MiB.
MAX_ENTRIES = 2000

BASE = random_bytes(3101, 1 << 20)
#: An edited copy of BASE and bytes of its own.
EDITED = BASE[:300_000] + random_bytes(3102, 5000) + BASE[300_000:]
OTHER = random_bytes(3103, 600_000)


@pytest.fixture(params=["memory", "rocksdb"])
def server(request, chunkd_bin: Path, tmp_path: Path) -> Iterator[ChunkdServer]:
    index = "memory" if request.param == "memory" else f"rocksdb://{tmp_path / 'index'}"
    yield from serving(ChunkdServer(
        chunkd_bin, index=index, extra_args=[f"--estimate_max_entries={MAX_ENTRIES}"]))


def estimate_requests(params: pb.EstimateParams, files: Sequence[bytes],
                      piece: int = 100_000) -> Iterator[pb.EstimateRequest]:
    """params first, then each file in pieces, its last ended by end_of_file."""
    first = True
    for data in files:
        for at in range(0, len(data), piece):
            request = pb.EstimateRequest(data=data[at:at + piece],
                                         end_of_file=at + piece >= len(data))
            if first:
                request.params.CopyFrom(params)
            first = False
            yield request


def estimate(stub: pb_grpc.ChunkServiceStub, params: pb.EstimateParams,
             files: Sequence[bytes]) -> Tuple[List[pb.EstimateProgress], pb.EstimateResult]:
    responses = list(stub.Estimate(estimate_requests(params, files), timeout=RPC_TIMEOUT))
    assert responses and responses[-1].HasField("result")
    assert all(r.HasField("progress") for r in responses[:-1])
    return [r.progress for r in responses[:-1]], responses[-1].result


def dedup(stub: pb_grpc.ChunkServiceStub, namespace: str, data: bytes) -> pb.DedupSummary:
    params = pb.DedupParams(namespace=namespace, chunking=fastcdc_params())
    responses = list(stub.Dedup(iter([pb.DedupRequest(params=params, data=data)]),
                                timeout=RPC_TIMEOUT))
    return responses[-1].summary


def fingerprints(stub: pb_grpc.ChunkServiceStub, data: bytes) -> List[bytes]:
    params = pb.ChunkParams(chunking=fastcdc_params())
    responses = stub.Chunk(iter([pb.ChunkRequest(params=params, data=data)]),
                           timeout=RPC_TIMEOUT)
    return [c.fingerprint for r in responses for c in r.batch.chunks]


def fastcdc_set(label: str = "fastcdc:min=4096,avg=16384,max=65536") -> pb.EstimateSet:
    return pb.EstimateSet(label=label, chunking=fastcdc_params())


def test_a_namespace_is_compared_and_left_as_it_was(server: ChunkdServer) -> None:
    with grpc.insecure_channel(server.address) as channel:
        stub = pb_grpc.ChunkServiceStub(channel)
        held = dedup(stub, "tenant", BASE).unique_bytes
        other_fps = fingerprints(stub, OTHER)
        missing = stub.FindMissing(pb.FindMissingRequest(
            namespace="tenant", fingerprints=other_fps), timeout=RPC_TIMEOUT)
        assert list(missing.missing_fingerprints) == other_fps

        params = pb.EstimateParams(sets=[fastcdc_set()], namespace="tenant")
        _, result = estimate(stub, params, [BASE, EDITED, OTHER])
        assert result.fingerprint == pb.FINGERPRINT_ALGORITHM_SHA256
        assert result.files == 3
        assert result.total_bytes == len(BASE) + len(EDITED) + len(OTHER)
        (estimate_set,) = result.sets
        assert estimate_set.label == "fastcdc:min=4096,avg=16384,max=65536"
        assert estimate_set.chunking.avg_size == 16384
        # Every distinct chunk of BASE, which is what Dedup found new; the
        # edit's and OTHER's own chunks are not in the namespace.
        assert estimate_set.HasField("namespace_bytes")
        assert estimate_set.namespace_bytes == held
        assert estimate_set.unique_bytes > held
        assert 0 < estimate_set.namespace_chunks < estimate_set.unique_chunks
        assert [c.backend for c in estimate_set.index_costs] == ["memory", "rocksdb", "redis"]

        # Nothing was written: OTHER's chunks are still missing, BASE's
        # references are still one each.
        missing = stub.FindMissing(pb.FindMissingRequest(
            namespace="tenant", fingerprints=other_fps), timeout=RPC_TIMEOUT)
        assert list(missing.missing_fingerprints) == other_fps
        again = dedup(stub, "tenant", BASE)
        assert again.unique_bytes == 0
        base_fps = list(dict.fromkeys(fingerprints(stub, BASE)))
        left = stub.Release(pb.ReleaseRequest(
            namespace="tenant", fingerprints=base_fps,
            fingerprint=pb.FINGERPRINT_ALGORITHM_SHA256), timeout=RPC_TIMEOUT)
        counts = {}
        for fp in fingerprints(stub, BASE):
            counts[fp] = counts.get(fp, 0) + 1
        assert list(left.ref_counts) == [2 * counts[fp] - 1 for fp in base_fps]


def error_info(error: grpc.RpcError) -> error_details_pb2.ErrorInfo:
    trailers = dict(error.trailing_metadata() or ())
    status = status_pb2.Status.FromString(trailers["grpc-status-details-bin"])
    assert status.code == error.code().value[0]
    (detail,) = status.details
    info = error_details_pb2.ErrorInfo()
    assert detail.Unpack(info)
    return info


def test_past_the_entry_limit_the_refusal_says_why(server: ChunkdServer) -> None:
    tiny = pb.EstimateSet(label="fixed:avg=64", chunking=pb.ChunkingParams(
        algorithm=pb.ALGORITHM_FIXED, avg_size=64))
    with grpc.insecure_channel(server.address) as channel:
        stub = pb_grpc.ChunkServiceStub(channel)
        with pytest.raises(grpc.RpcError) as refused:
            estimate(stub, pb.EstimateParams(sets=[tiny]), [BASE])
        assert refused.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert "--estimate_max_entries" in refused.value.details()
        assert "sample_rate" in refused.value.details()
        info = error_info(refused.value)
        assert info.reason == "STREAM_MEMORY"
        assert info.domain == "chunkd.dev"
        # Sampled, it fits; the slot went back.
        _, result = estimate(stub, pb.EstimateParams(sets=[tiny], sample_rate=4096), [BASE])
        assert result.sets[0].sampled
        assert result.sets[0].chunks == len(BASE) // 64
    server.wait_for_active_streams(0, RPC_TIMEOUT)


def test_a_bad_set_is_named(server: ChunkdServer) -> None:
    bad = pb.EstimateSet(label="fastcdc:avg=7", chunking=fastcdc_params(avg_size=7))
    with grpc.insecure_channel(server.address) as channel:
        stub = pb_grpc.ChunkServiceStub(channel)
        with pytest.raises(grpc.RpcError) as refused:
            estimate(stub, pb.EstimateParams(sets=[fastcdc_set(), bad]), [OTHER])
        assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert 'sets[1] (label "fastcdc:avg=7"): ' in refused.value.details()


def test_counted_with_rpc_estimate(server: ChunkdServer) -> None:
    before = parse_samples(scrape(server.metrics_address))
    bytes_before = value(before, "chunkd_ingest_bytes_total",
                         algorithm="fastcdc", rpc="Estimate")
    assert bytes_before is not None  # every rpc x algorithm starts at zero
    crc32 = pb.EstimateSet(label="crc32", chunking=pb.ChunkingParams(
        algorithm=pb.ALGORITHM_CRC32))
    with grpc.insecure_channel(server.address) as channel:
        stub = pb_grpc.ChunkServiceStub(channel)
        _, result = estimate(stub, pb.EstimateParams(sets=[fastcdc_set(), crc32]),
                             [BASE, OTHER])
    after = parse_samples(scrape(server.metrics_address))
    labels = dict(algorithm="fastcdc", rpc="Estimate")
    assert value(after, "chunkd_ingest_bytes_total", **labels) - bytes_before \
        == len(BASE) + len(OTHER)
    assert value(after, "chunkd_chunks_total", **labels) - \
        value(before, "chunkd_chunks_total", **labels) \
        == sum(s.chunks for s in result.sets)
    method = dict(grpc_method="Estimate", grpc_service="chunkd.v1.ChunkService",
                  grpc_type="bidi_stream")
    assert value(after, "grpc_server_handled_total", grpc_code="OK", **method) >= 1
    assert value(after, "grpc_server_started_total", **method) >= 1
