"""Stream requests as wire bytes (server/service/request_bytes.h): chunkd finds
the data field in gRPC's slices instead of parsing it with protobuf, and must
accept and reject exactly what protobuf does. Each stream here is sent as
hand-made bytes; an accepted one must give the records of the same data sent
plainly, a rejected one the error of a message that does not parse."""

from __future__ import annotations

from typing import List, Sequence

import grpc
import pytest

from chunkd_client._proto.chunkd.v1 import chunkd_pb2 as pb
from chunkd_client.testing import ChunkdServer
from e2e_util import RPC_TIMEOUT, SMALL_LIMIT, fastcdc_params, random_bytes

DATA = random_bytes(43, 600_000)
CHUNK = "/chunkd.v1.ChunkService/Chunk"


def varint(v: int) -> bytes:
    out = bytearray()
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def field(number: int, wire_type: int, value: bytes) -> bytes:
    tag = varint(number << 3 | wire_type)
    return tag + (varint(len(value)) + value if wire_type == 2 else value)


def data_field(value: bytes) -> bytes:
    return field(2, 2, value)


PARAMS = pb.ChunkRequest(params=pb.ChunkParams(chunking=fastcdc_params())).SerializeToString()
UNKNOWN = (field(15, 0, varint(1 << 40)) + field(16, 1, b"8bytes!!") + field(17, 5, b"4byt")
           + field(99, 2, b"unknown") + field(2, 0, varint(5)))


def send(server: ChunkdServer, messages: Sequence[bytes]):
    """(None, responses) or (code, details) of a Chunk stream of raw messages."""
    with grpc.insecure_channel(server.address) as channel:
        call = channel.stream_stream(CHUNK, request_serializer=None,
                                     response_deserializer=pb.ChunkResponse.FromString)
        try:
            return None, list(call(iter(list(messages)), timeout=RPC_TIMEOUT))
        except grpc.RpcError as e:
            return e.code(), e.details() or ""


def records(responses) -> List[tuple]:
    out = []
    for r in responses:
        if r.WhichOneof("body") == "batch":
            out += [(c.offset, c.length, c.fingerprint) for c in r.batch.chunks]
    return out


@pytest.fixture(scope="module")
def expected(server: ChunkdServer) -> List[tuple]:
    """The records of DATA sent plainly, in 100 kB messages."""
    pieces = [PARAMS] + [data_field(DATA[i:i + 100_000]) for i in range(0, len(DATA), 100_000)]
    code, responses = send(server, pieces)
    assert code is None, responses
    assert responses[-1].summary.total_bytes == len(DATA)
    return records(responses)


def test_unknown_fields_around_the_data_are_ignored(server, expected) -> None:
    messages = [PARAMS + UNKNOWN] + [
        UNKNOWN + data_field(DATA[i:i + 150_000]) + UNKNOWN for i in range(0, len(DATA), 150_000)]
    code, responses = send(server, messages)
    assert code is None, responses
    assert records(responses) == expected


def test_data_with_the_params_before_or_after_it(server, expected) -> None:
    # The params after the data, in the same (first) message.
    code, responses = send(server, [data_field(DATA[:1000]) + PARAMS, data_field(DATA[1000:])])
    assert code is None, responses
    assert records(responses) == expected


def test_data_twice_in_one_message_keeps_the_last(server, expected) -> None:
    code, responses = send(server, [PARAMS, data_field(b"replaced") + data_field(DATA[:5000]),
                                    data_field(DATA[5000:])])
    assert code is None, responses
    assert records(responses) == expected


def test_empty_data_fields_and_empty_messages(server, expected) -> None:
    code, responses = send(server, [PARAMS, b"", data_field(b""), data_field(DATA), data_field(b"")])
    assert code is None, responses
    assert records(responses) == expected


def test_a_group_is_parsed_whole_and_accepted(server, expected) -> None:
    group = b"\xa3\x01\x08\x01\xa4\x01"  # unknown group 20 holding field 1
    code, responses = send(server, [PARAMS, group + data_field(DATA)])
    assert code is None, responses
    assert records(responses) == expected


@pytest.mark.parametrize("bad", [
    data_field(DATA[:5000])[:-1],           # the data cut off
    data_field(DATA[:5000]) + b"\x12",      # a tag without a length
    data_field(DATA[:5000]) + b"\x0f\x01",  # wire type 7
    b"\x00\x01" + data_field(DATA[:5000]),  # field number 0
    field(1, 2, b"\xff") + data_field(DATA[:5000]),  # params that do not parse
])
def test_malformed_second_message(server, bad: bytes) -> None:
    code, details = send(server, [PARAMS, bad])
    assert code == grpc.StatusCode.INVALID_ARGUMENT, details
    assert (f"request message 2 of the stream (counting from 1) is not a valid "
            f"chunkd.v1.ChunkRequest: its {len(bad)} bytes do not parse as protobuf") in details


def test_params_in_a_later_message_after_its_data(server) -> None:
    code, details = send(server, [PARAMS, data_field(DATA[:1000]) + PARAMS])
    assert code == grpc.StatusCode.INVALID_ARGUMENT, details
    assert "params may be sent only in the first request" in details


def test_oversized_data_is_refused(small_server) -> None:
    code, details = send(small_server, [PARAMS, data_field(b"x" * (SMALL_LIMIT + 1))])
    assert code == grpc.StatusCode.RESOURCE_EXHAUSTED, details
    assert f"data of {SMALL_LIMIT + 1} bytes exceeds max_message_bytes ({SMALL_LIMIT})" in details
