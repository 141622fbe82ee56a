"""Turning the accepted kinds of input into a stream of byte pieces."""

from __future__ import annotations

import io
import os
import threading
from typing import Any, BinaryIO, Callable, Iterable, Iterator, List, Sequence, Union

#: What ``Client.chunk`` and ``Client.dedup`` accept as input.
Source = Union[
    str,
    "os.PathLike[str]",
    "os.PathLike[bytes]",
    bytes,
    bytearray,
    memoryview,
    BinaryIO,
    Iterable[bytes],
]


class _EndOfFile:
    """The type of END_OF_FILE."""

    def __repr__(self) -> str:
        return "END_OF_FILE"


#: The piece that ends one file of an Estimate's data set.
END_OF_FILE = _EndOfFile()
#: What a stream's pieces are: bytes, or END_OF_FILE after each file of a
#: data set.
Piece = Union[bytes, _EndOfFile]


def iter_source(source: Source, message_size: int) -> Iterator[bytes]:
    """Yields the bytes of ``source`` in pieces of at most ``message_size``.

    * a path (``str`` or ``os.PathLike``): the file is opened and read
      ``message_size`` bytes at a time, closed at the end;
    * ``bytes`` / ``bytearray`` / ``memoryview``: sliced into ``message_size``
      pieces;
    * a binary file object (anything with ``read``): read ``message_size``
      bytes at a time until it returns ``b""``; it is not closed;
    * any other iterable of bytes-like pieces: each piece is passed on as it
      is, split only when longer than ``message_size`` (small pieces are not
      merged, so the caller controls the framing); empty pieces are skipped.

    Nothing ever holds more than one piece of a file in memory.
    """
    if message_size < 1:
        raise ValueError(f"message_size must be at least 1, got {message_size}")
    if isinstance(source, (str, os.PathLike)):
        return _iter_path(source, message_size)
    if isinstance(source, (bytes, bytearray, memoryview)):
        return _iter_buffer(source, message_size)
    if hasattr(source, "read"):
        return _iter_file(source, message_size)  # type: ignore[arg-type]
    if isinstance(source, Iterable):
        return _iter_pieces(source, message_size)
    raise TypeError(
        "source must be a path, bytes-like object, binary file or iterable of "
        f"bytes, not {type(source).__name__}"
    )


def _iter_path(path: "Union[str, os.PathLike]", message_size: int) -> Iterator[bytes]:
    with open(path, "rb") as f:
        yield from _iter_file(f, message_size)


def _checked(piece: object) -> "Union[bytes, bytearray, memoryview]":
    """A piece a source's read() returned, once it is bytes-like (else
    TypeError); empty at the end of the source."""
    if not isinstance(piece, (bytes, bytearray, memoryview)):
        raise TypeError(
            f"source.read() returned {type(piece).__name__}, expected bytes"
        )
    return piece


def _iter_file(f: BinaryIO, message_size: int) -> Iterator[bytes]:
    if isinstance(f, io.TextIOBase):
        raise TypeError("source file must be opened in binary mode")
    while True:
        piece = f.read(message_size)
        if piece is None:  # non-blocking stream without data: keep trying
            continue
        if not _checked(piece):
            return
        yield bytes(piece)


def _iter_buffer(
    buffer: "Union[bytes, bytearray, memoryview]", message_size: int
) -> Iterator[bytes]:
    view = memoryview(buffer).cast("B")
    for start in range(0, len(view), message_size):
        yield bytes(view[start : start + message_size])


def _iter_pieces(pieces: Iterable[bytes], message_size: int) -> Iterator[bytes]:
    for piece in pieces:
        if not isinstance(piece, (bytes, bytearray, memoryview)):
            raise TypeError(
                f"source yielded {type(piece).__name__}, expected a bytes-like object"
            )
        if len(piece) <= message_size and isinstance(piece, bytes):
            if piece:
                yield piece
        else:
            yield from _iter_buffer(piece, message_size)


def source_pieces(
    source: Source, message_size: int, replayable: bool = False
) -> Callable[[], Iterator[bytes]]:
    """A function returning the pieces of ``source`` (``iter_source``).

    Called once unless ``replayable``; then every call returns the pieces
    from the source's start again: a path is opened again, a bytes-like
    object sliced again, a binary file object seeked back to where it was
    when this was called (it must be seekable). Anything else cannot be read
    twice: ValueError, before any call.
    """
    pieces = iter_source(source, message_size)  # checks the arguments now
    if not replayable:
        return lambda: pieces
    if isinstance(source, (str, os.PathLike, bytes, bytearray, memoryview)):
        return lambda: iter_source(source, message_size)
    if hasattr(source, "read"):
        seekable = getattr(source, "seekable", None)
        if callable(seekable) and seekable():
            return _Rewinder(source, message_size)  # type: ignore[arg-type]
        what = "a binary file that cannot seek (a pipe or stdin?)"
    else:
        what = f"an iterable of bytes ({type(source).__name__})"
    raise ValueError(
        "retries need a source that can be read again from its start (a path, "
        f"a bytes-like object or a seekable binary file), not {what}"
    )


class _Rewinder:
    """The pieces of a seekable file from where it was at first, each time
    it is called.

    The reads of a failed stream may still be under way on gRPC's thread
    when the replay starts; each call starts a new epoch, and the reads of an
    older one stop at their next piece, so that only one position is ever
    being read. A call does not wait for the lock: a read of the failed
    stream that blocks (a file object that stalls) holds up only the
    replay's reads, never the caller.
    """

    def __init__(self, f: BinaryIO, message_size: int) -> None:
        if isinstance(f, io.TextIOBase):
            raise TypeError("source file must be opened in binary mode")
        self._file = f
        self._size = message_size
        self._start = f.tell()
        self._lock = threading.Lock()
        self._epoch = 0

    def __call__(self) -> Iterator[bytes]:
        # Only the caller's thread changes the epoch; readers compare it
        # under the lock, before they seek or read.
        self._epoch += 1
        return self._read(self._epoch)

    def _read(self, epoch: int) -> Iterator[bytes]:
        rewound = False
        while True:
            with self._lock:
                if epoch != self._epoch:
                    return
                if not rewound:
                    self._file.seek(self._start)
                    rewound = True
                piece = self._file.read(self._size)
            if piece is None:  # non-blocking stream without data: keep trying
                continue
            if not _checked(piece):
                return
            yield bytes(piece)


def dataset_files(sources: Sequence[Any]) -> List[Any]:
    """The files of a data set given as ``sources`` (each a Source, or for
    AsyncClient an async iterable): each source is one file, except a path
    to a directory, which stands for every regular file under it (followed
    symbolic links included), in sorted path order. ValueError when there
    is no source."""
    if not sources:
        raise ValueError("the data set has no source: give at least one file")
    files: List[Any] = []
    for source in sources:
        if isinstance(source, (str, os.PathLike)) and os.path.isdir(source):
            files.extend(_walk(os.fsdecode(source)))
        else:
            files.append(source)
    return files


def _raise(error: OSError) -> None:
    raise error


def _walk(directory: str) -> List[str]:
    """Every regular file under ``directory``, sorted; a directory that
    cannot be read fails the data set, as in chunkctl and chunkd-go."""
    found = []
    for parent, _, names in os.walk(directory, onerror=_raise):
        for name in names:
            path = os.path.join(parent, name)
            if os.path.isfile(path):
                found.append(path)
    return sorted(found)


def dataset_pieces(
    sources: Sequence[Source], message_size: int
) -> Callable[[], Iterator[Piece]]:
    """``source_pieces`` for a data set of several files (``dataset_files``):
    each file's pieces followed by END_OF_FILE. The sources are checked now,
    each file is opened when its turn comes."""
    pieces = [source_pieces(f, message_size) for f in dataset_files(sources)]

    def chained() -> Iterator[Piece]:
        for file_pieces in pieces:
            yield from file_pieces()
            yield END_OF_FILE

    return chained
