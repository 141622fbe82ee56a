"""How sources are cut into messages (no server needed)."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from chunkd_client._sources import iter_source

DATA = bytes(range(256)) * 40  # 10240 bytes


class CountingReader(io.RawIOBase):
    """A binary stream that records every read size."""

    def __init__(self, data: bytes) -> None:
        self._inner = io.BytesIO(data)
        self.reads: list = []

    def readable(self) -> bool:
        return True

    def read(self, size: int = -1) -> bytes:
        self.reads.append(size)
        return self._inner.read(size)


@pytest.mark.parametrize("size", [1, 7, 1000, 10240, 1 << 20])
def test_buffers_are_cut_into_message_size_pieces(size: int) -> None:
    for source in (DATA, bytearray(DATA), memoryview(DATA)):
        pieces = list(iter_source(source, size))
        assert b"".join(pieces) == DATA
        assert all(isinstance(p, bytes) for p in pieces)
        assert all(0 < len(p) <= size for p in pieces)
        assert all(len(p) == size for p in pieces[:-1])


def test_non_byte_memoryview_counts_bytes() -> None:
    import array

    words = array.array("I", range(1000))
    pieces = list(iter_source(memoryview(words), 1000))
    assert b"".join(pieces) == words.tobytes()
    assert [len(p) for p in pieces] == [1000] * 4


def test_paths_are_read_in_pieces(tmp_path: Path) -> None:
    path = tmp_path / "f"
    path.write_bytes(DATA)
    for source in (path, str(path)):
        pieces = list(iter_source(source, 3000))
        assert [len(p) for p in pieces] == [3000, 3000, 3000, 1240]
        assert b"".join(pieces) == DATA


def test_file_objects_are_read_message_size_at_a_time() -> None:
    reader = CountingReader(DATA)
    pieces = list(iter_source(reader, 4096))
    assert b"".join(pieces) == DATA
    # Never more than one message at a time: no read() of the whole file.
    assert reader.reads and all(size == 4096 for size in reader.reads)
    assert not reader.closed  # the caller's file stays open


def test_iterables_keep_their_framing_and_split_long_pieces() -> None:
    pieces = list(iter_source(iter([b"a", b"", b"bc", b"x" * 10, bytearray(b"yz")]), 4))
    assert pieces == [b"a", b"bc", b"xxxx", b"xxxx", b"xx", b"yz"]


def test_empty_sources_give_no_pieces(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.write_bytes(b"")
    for source in (b"", empty, io.BytesIO(b""), iter([])):
        assert list(iter_source(source, 10)) == []


@pytest.mark.parametrize("bad", [0, -1])
def test_message_size_must_be_positive(bad: int) -> None:
    with pytest.raises(ValueError, match="message_size"):
        iter_source(DATA, bad)


def test_text_is_rejected() -> None:
    with pytest.raises(TypeError):
        list(iter_source(io.StringIO("text"), 10))
    with pytest.raises(TypeError):
        list(iter_source(iter(["text"]), 10))
    with pytest.raises(TypeError):
        iter_source(12345, 10)  # type: ignore[arg-type]
