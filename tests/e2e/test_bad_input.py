"""Protocol violations and bad parameters, sent with the raw generated stubs:
each is answered with the right code and a message naming the field (and its
value or allowed range), and the server keeps serving afterwards."""

from __future__ import annotations

import re
from typing import Iterator, Tuple

import grpc
import pytest

from chunkd_client import ChunkdError, Client
from chunkd_client._proto.chunkd.v1 import chunkd_pb2 as pb
from chunkd_client._proto.chunkd.v1 import chunkd_pb2_grpc as pb_grpc
from chunkd_client.testing import ChunkdServer
from e2e_util import RPC_TIMEOUT, SMALL_LIMIT, call_stream, fastcdc_params, random_bytes

DATA = random_bytes(41, 200_000)
INVALID = grpc.StatusCode.INVALID_ARGUMENT


@pytest.fixture
def raw(server: ChunkdServer) -> Iterator[Tuple[pb_grpc.ChunkServiceStub, grpc.Channel]]:
    """A raw stub; after the test, the same channel must still work."""
    channel = grpc.insecure_channel(server.address)
    stub = pb_grpc.ChunkServiceStub(channel)
    yield stub
    assert_still_serving(stub)
    channel.close()


def assert_still_serving(stub: pb_grpc.ChunkServiceStub) -> None:
    code, responses = call_stream(
        stub.Chunk,
        [pb.ChunkRequest(params=pb.ChunkParams(chunking=fastcdc_params()), data=DATA)],
    )
    assert code is None, f"follow-up call failed: {code} {responses}"
    assert responses[-1].WhichOneof("body") == "summary"
    assert responses[-1].summary.total_bytes == len(DATA)


def chunk_first(chunking: "pb.ChunkingParams", fingerprint: int = 0) -> "pb.ChunkRequest":
    return pb.ChunkRequest(params=pb.ChunkParams(chunking=chunking, fingerprint=fingerprint), data=DATA)


def assert_rejected(result, code: grpc.StatusCode, *needles: str) -> str:
    got, details = result
    assert got == code, f"expected {code}, got {got}: {details}"
    for needle in needles:
        assert re.search(needle, details), f"{needle!r} not in {details!r}"
    return details


# --- the protocol -----------------------------------------------------------


def test_chunk_without_params(raw) -> None:
    assert_rejected(call_stream(raw.Chunk, [pb.ChunkRequest(data=DATA)]), INVALID, r"\bparams\b")


def test_dedup_without_params(raw) -> None:
    assert_rejected(call_stream(raw.Dedup, [pb.DedupRequest(data=DATA)]), INVALID, r"\bparams\b")


@pytest.mark.parametrize("method", ["Chunk", "Dedup"])
def test_stream_without_any_message(raw, method: str) -> None:
    assert_rejected(call_stream(getattr(raw, method), []), INVALID, r"\bparams\b")


def test_chunk_params_twice(raw) -> None:
    params = pb.ChunkParams(chunking=fastcdc_params())
    result = call_stream(raw.Chunk, [
        pb.ChunkRequest(params=params, data=DATA[:1000]),
        pb.ChunkRequest(params=params, data=DATA[1000:]),
    ])
    assert_rejected(result, INVALID, r"\bparams\b")


def test_dedup_params_twice(raw) -> None:
    params = pb.DedupParams(chunking=fastcdc_params(), namespace="twice")
    result = call_stream(raw.Dedup, [
        pb.DedupRequest(params=params),
        pb.DedupRequest(data=DATA[:1000]),
        pb.DedupRequest(params=params, data=DATA[1000:]),
    ])
    assert_rejected(result, INVALID, r"\bparams\b")


def test_empty_params_mean_defaults(raw) -> None:
    code, responses = call_stream(raw.Chunk, [pb.ChunkRequest(params=pb.ChunkParams()), pb.ChunkRequest(data=DATA)])
    assert code is None, responses
    assert responses[-1].summary.total_bytes == len(DATA)


# --- chunking parameters -------------------------------------------------------


def test_min_greater_than_avg(raw) -> None:
    result = call_stream(raw.Chunk, [chunk_first(fastcdc_params(min_size=32768, avg_size=16384, max_size=65536))])
    assert_rejected(result, INVALID, r"\bmin_size\b", r"32768|16384")


def test_avg_greater_than_max(raw) -> None:
    result = call_stream(raw.Chunk, [chunk_first(fastcdc_params(min_size=4096, avg_size=65536, max_size=32768))])
    assert_rejected(result, INVALID, r"\b(avg_size|max_size)\b", r"65536|32768")


def test_crc32_avg_not_a_power_of_two(raw) -> None:
    params = pb.ChunkingParams(algorithm=pb.ALGORITHM_CRC32, min_size=2048, avg_size=10000, max_size=65536)
    result = call_stream(raw.Chunk, [chunk_first(params)])
    assert_rejected(result, INVALID, r"\bavg_size\b", r"10000", r"(?i)power of (two|2)")


@pytest.mark.parametrize("algorithm", ["fastcdc", "crc32", "seqcdc"])
def test_max_over_the_limit(raw, client: Client, algorithm: str) -> None:
    info = client.server_info().algorithm(algorithm)
    limit = info.max_size.max
    assert limit < 2**32 - 1, "the limit must be below what the field can carry"
    params = pb.ChunkingParams(algorithm=info.algorithm, max_size=limit + 1)
    result = call_stream(raw.Chunk, [chunk_first(params)])
    assert_rejected(result, INVALID, r"\bmax_size\b", rf"\b{limit}\b")


@pytest.mark.parametrize(
    "algorithm, field, value, takes",
    [
        ("crc32", "normalization_level", 2, "min_size, avg_size, max_size"),
        ("crc32", "seed", 7, "min_size, avg_size, max_size"),
        ("fixed", "min_size", 8192, "avg_size"),
        ("fixed", "max_size", 1 << 30, "avg_size"),
        ("seqcdc", "avg_size", 8192, "min_size, max_size, seq_mode"),
        ("fastcdc", "skip_size", 0, "min_size, avg_size, max_size, normalization_level, seed"),
    ],
)
def test_parameter_of_another_algorithm(raw, algorithm: str, field: str, value: int,
                                        takes: str) -> None:
    """A field the algorithm does not read is refused by name, not ignored."""
    params = pb.ChunkingParams(algorithm=getattr(pb, f"ALGORITHM_{algorithm.upper()}"),
                               **{field: value})
    for method, first in ((raw.Chunk, chunk_first(params)),
                          (raw.Dedup, pb.DedupRequest(params=pb.DedupParams(
                              chunking=params, namespace="strict")))):
        result = call_stream(method, [first])
        assert_rejected(result, INVALID, rf"^chunking\.{field} is not a parameter of "
                        rf"{algorithm} \(it takes {re.escape(takes)}")


@pytest.mark.parametrize("algorithm", ["fastcdc", "crc32", "seqcdc"])
def test_min_under_the_limit(raw, client: Client, algorithm: str) -> None:
    info = client.server_info().algorithm(algorithm)
    lowest = info.min_size.min
    if lowest == 0:
        pytest.skip(f"{algorithm} accepts min_size 0")
    params = pb.ChunkingParams(algorithm=info.algorithm, min_size=lowest - 1)
    result = call_stream(raw.Chunk, [chunk_first(params)])
    assert_rejected(result, INVALID, r"\bmin_size\b", rf"\b{lowest}\b")


def test_normalization_level_out_of_range(raw, client: Client) -> None:
    highest = client.server_info().algorithm("fastcdc").normalization_level.max
    result = call_stream(raw.Chunk, [chunk_first(fastcdc_params(normalization_level=highest + 1))])
    assert_rejected(result, INVALID, r"\bnormalization_level\b", rf"\b{highest}\b")


def test_unknown_algorithm(raw) -> None:
    result = call_stream(raw.Chunk, [chunk_first(pb.ChunkingParams(algorithm=99))])
    # The value or the accepted ones.
    assert_rejected(result, INVALID, r"\balgorithm\b", r"\b99\b|(?i:fastcdc)|1\s*(\.\.|-|to)\s*4")


def test_unknown_fingerprint(raw) -> None:
    result = call_stream(raw.Chunk, [chunk_first(fastcdc_params(), fingerprint=99)])
    assert_rejected(result, INVALID, r"\bfingerprint\b", r"\b99\b|(?i:sha256)|1\s*(\.\.|-|to)\s*3")


def test_unknown_seq_mode(raw) -> None:
    params = pb.ChunkingParams(algorithm=pb.ALGORITHM_SEQCDC, seq_mode=7)
    assert_rejected(call_stream(raw.Chunk, [chunk_first(params)]), INVALID, r"\bseq_mode\b")


# --- Dedup and FindMissing -----------------------------------------------------------


def test_dedup_needs_a_fingerprint(raw) -> None:
    params = pb.DedupParams(chunking=fastcdc_params(), namespace="nofp",
                            fingerprint=pb.FINGERPRINT_ALGORITHM_NONE)
    result = call_stream(raw.Dedup, [pb.DedupRequest(params=params, data=DATA)])
    assert_rejected(result, INVALID, r"\bfingerprint\b")


BAD_NAMESPACES = ["", "has space", "a" * 129, "slash/ns", "colon:ns", "br{ace}", "ünï"]


@pytest.mark.parametrize("namespace", BAD_NAMESPACES, ids=repr)
def test_bad_namespace(raw, namespace: str) -> None:
    params = pb.DedupParams(chunking=fastcdc_params(), namespace=namespace)
    result = call_stream(raw.Dedup, [pb.DedupRequest(params=params, data=DATA)])
    assert_rejected(result, INVALID, r"\bnamespace\b")
    with pytest.raises(grpc.RpcError) as caught:
        raw.FindMissing(pb.FindMissingRequest(namespace=namespace, fingerprints=[bytes(32)]),
                        timeout=RPC_TIMEOUT)
    assert caught.value.code() == INVALID and "namespace" in caught.value.details()


def test_longest_namespace_is_accepted(client: Client) -> None:
    ns = "A-z0.9_" * 18 + "xx"
    assert len(ns) == 128
    _, summary = client.dedup_all(DATA, namespace=ns)
    assert summary.total_bytes == len(DATA)
    assert client.find_missing(ns, [bytes(32)]) == [bytes(32)]


def test_find_missing_bad_fingerprint_length(raw) -> None:
    with pytest.raises(grpc.RpcError) as caught:
        raw.FindMissing(pb.FindMissingRequest(namespace="ok", fingerprints=[bytes(32), b"short"]),
                        timeout=RPC_TIMEOUT)
    assert caught.value.code() == INVALID
    assert "fingerprint" in caught.value.details()


def test_find_missing_too_many(raw) -> None:
    request = pb.FindMissingRequest(namespace="ok", fingerprints=[i.to_bytes(32, "big") for i in range(10001)])
    with pytest.raises(grpc.RpcError) as caught:
        raw.FindMissing(request, timeout=RPC_TIMEOUT)
    assert caught.value.code() in (INVALID, grpc.StatusCode.RESOURCE_EXHAUSTED)
    assert "10000" in caught.value.details()


# --- --max_message_bytes -------------------------------------------------------------


@pytest.fixture
def small(small_server: ChunkdServer) -> Iterator[pb_grpc.ChunkServiceStub]:
    # The client's own receive limit is not what is tested here.
    channel = grpc.insecure_channel(small_server.address)
    yield pb_grpc.ChunkServiceStub(channel)
    channel.close()


LIMIT_TEXT = rf"(\b{SMALL_LIMIT}\b|\b1 ?MiB\b)"


def test_small_server_reports_its_limit(small_server: ChunkdServer) -> None:
    with Client(small_server.address, timeout=RPC_TIMEOUT) as c:
        assert c.server_info().max_message_bytes == SMALL_LIMIT


@pytest.mark.parametrize("where", ["first", "later"])
@pytest.mark.parametrize("method", ["Chunk", "Dedup"])
def test_data_over_the_limit(small, where: str, method: str) -> None:
    big = random_bytes(42, SMALL_LIMIT + 1)
    if method == "Chunk":
        params = dict(params=pb.ChunkParams(chunking=fastcdc_params()))
        request = pb.ChunkRequest
    else:
        params = dict(params=pb.DedupParams(chunking=fastcdc_params(), namespace="limit"))
        request = pb.DedupRequest
    if where == "first":
        requests = [request(data=big, **params)]
    else:
        requests = [request(data=DATA, **params), request(data=big)]
    result = call_stream(getattr(small, method), requests)
    assert_rejected(result, grpc.StatusCode.RESOURCE_EXHAUSTED, r"\bdata\b", LIMIT_TEXT)

    # Exactly at the limit is fine, and the server keeps serving.
    at_limit = big[:SMALL_LIMIT]
    code, responses = call_stream(getattr(small, method), [request(**params), request(data=at_limit)])
    assert code is None, responses
    assert responses[-1].WhichOneof("body") == "summary"
    assert responses[-1].summary.total_bytes == SMALL_LIMIT


def test_client_message_size_within_limit(small_server: ChunkdServer) -> None:
    data = random_bytes(43, 3 * SMALL_LIMIT + 5)
    with Client(small_server.address, timeout=RPC_TIMEOUT) as c:
        with pytest.raises(ChunkdError) as caught:
            c.chunk_all(data, message_size=SMALL_LIMIT + 1)
        assert caught.value.code == grpc.StatusCode.RESOURCE_EXHAUSTED
        records, summary = c.chunk_all(data, message_size=SMALL_LIMIT)
        assert summary.total_bytes == len(data) and records
