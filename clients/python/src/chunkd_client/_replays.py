"""The replays of a Chunk or Dedup stream with ``retries``, for Client and
AsyncClient alike: after which failures and waits a stream is sent again
(Replays), which records the caller has already had and how a replay must
repeat them (Delivered), the checks of ``retries`` and ``on_replay``, and the
stream_id that makes a replayed Dedup count nothing twice
(docs/clients.md, "Replaying streams")."""

from __future__ import annotations

import hashlib
import struct
import uuid
from typing import Any, Callable, Optional, Tuple

import grpc

from chunkd_client.errors import ChunkdError

#: The status codes after which a stream with ``retries`` sends its source
#: again: the server or its index was unreachable, the server went away
#: mid-stream, was over a limit, or failed. DEADLINE_EXCEEDED joins them when
#: the call has a timeout (each attempt gets the whole timeout again), and
#: CANCELLED when the caller did not cancel: a server that stops past its
#: shutdown deadline, or a proxy that drops the stream, resets it with
#: RST_STREAM CANCEL, which the client reports as CANCELLED
#: (docs/clients.md, "Replaying streams").
REPLAYED_CODES = frozenset({
    grpc.StatusCode.UNAVAILABLE,
    grpc.StatusCode.ABORTED,
    grpc.StatusCode.RESOURCE_EXHAUSTED,
    grpc.StatusCode.INTERNAL,
    grpc.StatusCode.CANCELLED,
})
#: The wait before the first replay, in seconds; it doubles for each next
#: one, up to REPLAY_MAX_BACKOFF (the numbers of the channel's retry policy).
REPLAY_INITIAL_BACKOFF = 0.1
REPLAY_MAX_BACKOFF = 2.0
#: After that wait a replay also waits, at most this long (gRPC's connect
#: timeout) or the call's timeout, for the channel to (re)connect: gRPC
#: backs off reconnecting to a server that went away (20 ms, growing to at
#: most 2 s: DEFAULT_CHANNEL_OPTIONS), and a replay sent before would fail
#: at once and waste an attempt.
REPLAY_CONNECT_WAIT = 20.0


#: ``on_replay(error, delay)``: told of each replay before its wait (see
#: ``Client.dedup``).
OnReplay = Callable[[ChunkdError, float], object]


class Replays:
    """When a Chunk or Dedup stream with ``retries`` is sent again.

    ``delay`` answers, for each failure in turn, how long to wait before
    the replay, or None when the failure is final: a code not in
    REPLAYED_CODES, a CANCELLED of the caller's (``cancelled_here``, or a
    client ``closed()`` since), or no replay left. ``on_replay``, when
    given, is called with the failure and that wait for each replay, before
    the wait.
    """

    def __init__(self, retries: int, timeout: Optional[float], channel: Any,
                 on_replay: Optional[OnReplay] = None,
                 closed: Callable[[], bool] = lambda: False) -> None:
        check_replay_arguments(retries, on_replay)
        self.left = retries
        self.timeout = timeout
        self.channel = channel
        self.on_replay = on_replay
        self.closed = closed
        self._backoff = REPLAY_INITIAL_BACKOFF

    def delay(self, failure: ChunkdError, cancelled_here: bool = False) -> Optional[float]:
        code = failure.code()
        replayed = code in REPLAYED_CODES or (
            code == grpc.StatusCode.DEADLINE_EXCEEDED and self.timeout is not None
        )
        if code == grpc.StatusCode.CANCELLED and (cancelled_here or self.closed()):
            replayed = False
        if not replayed or self.left == 0:
            return None
        self.left -= 1
        delay, self._backoff = self._backoff, min(self._backoff * 2, REPLAY_MAX_BACKOFF)
        return delay

    @property
    def connect_wait(self) -> float:
        """How long a replay may wait for the channel to be ready."""
        if self.timeout is None:
            return REPLAY_CONNECT_WAIT
        return min(REPLAY_CONNECT_WAIT, self.timeout)


class Delivered:
    """The records a stream with ``retries`` has handed to its caller, as
    every replay must repeat them: where they end, how many there are, and
    a SHA-256 over their offsets, lengths and fingerprints (a few dozen
    bytes of state, however long the stream).

    ``take`` says of each record of the current attempt whether it is new
    to the caller; after ``replaying()`` the records before the end of
    those handed out are repeats, checked against them once the replay
    reaches that end. A replay that does not repeat them exactly (a record
    across that end, a gap, other offsets, lengths or fingerprints before
    it) means the source, or the index the hints learn from, changed under
    the replay: ``take`` raises DATA_LOSS, as it does for records that do
    not follow each other, and ``check_summary`` for a summary that does
    not add up to the records handed out.
    """

    def __init__(self) -> None:
        self.end = 0
        self.count = 0
        self._digest = hashlib.sha256()
        #: The digest and count of the repeats while a replay is before end.
        self._repeat: Optional[Tuple[Any, int]] = None
        self._replayed = False

    def replaying(self) -> None:
        """A new attempt starts from the source's start."""
        self._repeat = (hashlib.sha256(), 0) if self.end else None
        self._replayed = True

    def take(self, offset: int, length: int, fingerprint: bytes) -> bool:
        """True for a record to hand out (and counts it), False for a
        repeat; raises DATA_LOSS for a replay that cuts otherwise."""
        key = struct.pack("<QQ", offset, length) + bytes(fingerprint)
        if self._repeat is None:
            if offset != self.end:
                raise self._gap(offset)
            self._digest.update(key)
            self.end, self.count = offset + length, self.count + 1
            return True
        digest, count = self._repeat
        if offset >= self.end:
            raise self._gap(offset)
        if offset + length > self.end:
            raise _changed(f"has a chunk [{offset}, {offset + length}) across offset "
                           f"{self.end}, where the chunks already returned end")
        digest.update(key)
        self._repeat = (digest, count + 1)
        if offset + length == self.end:
            if count + 1 != self.count or digest.digest() != self._digest.digest():
                raise _changed(
                    f"has {count + 1} chunks before offset {self.end} that differ from "
                    f"the {self.count} already returned (in offsets, lengths or "
                    "fingerprints)")
            self._repeat = None
        return False

    def _gap(self, offset: int) -> ChunkdError:
        what = (f"goes on at offset {offset}, not at offset {self.end}, where the "
                "chunks already returned end")
        if self._replayed:
            return _changed(what)
        return ChunkdError(grpc.StatusCode.DATA_LOSS, f"the stream {what}")

    def check_summary(self, total_bytes: int, total_chunks: int) -> None:
        """DATA_LOSS unless the summary of the attempt that ended OK counts
        the records handed out, no more and no less."""
        if self._repeat is not None:
            raise _changed(f"ended at offset {total_bytes}, before offset {self.end}, "
                           "where the chunks already returned end")
        if (total_bytes, total_chunks) != (self.end, self.count):
            raise ChunkdError(
                grpc.StatusCode.DATA_LOSS,
                f"the stream's summary counts {total_bytes} bytes in {total_chunks} "
                f"chunks, but the chunks returned cover {self.end} bytes in "
                f"{self.count}")


def _changed(what: str) -> ChunkdError:
    return ChunkdError(grpc.StatusCode.DATA_LOSS,
                       f"the replayed stream {what}: the source or the index changed "
                       "under the replay")



#: The most replays a Dedup call may ask for (as chunkctl and the Go client).
MAX_RETRIES = 100


def check_replay_arguments(retries: int, on_replay: Optional[OnReplay]) -> None:
    """ValueError for a ``retries`` that is not an int in 0..MAX_RETRIES,
    TypeError for an ``on_replay`` that is neither None nor callable."""
    if (isinstance(retries, bool) or not isinstance(retries, int)
            or not 0 <= retries <= MAX_RETRIES):
        raise ValueError(f"retries must be an int in 0..{MAX_RETRIES}, got {retries!r}")
    if on_replay is not None and not callable(on_replay):
        raise TypeError(f"on_replay must be callable or None, not "
                        f"{type(on_replay).__name__}")


def stream_id_for(stream_id: str, retries: int) -> str:
    """The stream_id of a Dedup stream: the caller's, else a random one when
    the stream may be replayed (so that a replay counts nothing twice)."""
    if stream_id or not retries:
        return stream_id
    return uuid.uuid4().hex
