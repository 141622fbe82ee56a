"""A raw HTTP/2 client for the abuse tests: it speaks just enough HTTP/2 to
open gRPC streams and misbehave on them, which no gRPC library will do.

Frames are built by hand (the `hpack` package, which comes with `h2`,
encodes the headers), so the client is not held back by its own flow control
or concurrency limits the way a well-behaved HTTP/2 stack is: that is the
point of a flood. Every socket operation has a timeout, and the reader thread
stops with the connection.
"""

from __future__ import annotations

import socket
import struct
import threading
import time
from typing import Dict, List, Optional, Tuple

import hpack

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
DATA, HEADERS, RST_STREAM, SETTINGS, PING, GOAWAY, WINDOW_UPDATE = 0, 1, 3, 4, 6, 7, 8
END_STREAM, END_HEADERS, ACK = 0x1, 0x4, 0x1
CANCEL = 0x8
#: SETTINGS_MAX_CONCURRENT_STREAMS
MAX_CONCURRENT_STREAMS = 0x3


def frame(kind: int, flags: int, stream: int, payload: bytes = b"") -> bytes:
    return struct.pack(">I", len(payload))[1:] + bytes([kind, flags]) + \
        struct.pack(">I", stream) + payload


def grpc_message(payload: bytes) -> bytes:
    """One gRPC length-prefixed message (uncompressed)."""
    return b"\0" + struct.pack(">I", len(payload)) + payload


class Connection:
    """One HTTP/2 connection to a gRPC server on loopback.

    A reader thread consumes everything the server sends, acknowledges its
    SETTINGS and PINGs, and records what the tests look at: the server's
    SETTINGS, the streams it reset, the GOAWAYs it sent (the last in
    `goaway`, all in order in `goaways`) and, with `keep_data=True`, each
    stream's DATA. With `ack_pings=False` the PINGs are held (`held_pings`)
    until `release_pings()` acknowledges them.
    """

    def __init__(self, address: str, *, timeout: float = 10.0,
                 authorization: Optional[str] = None, ack_pings: bool = True,
                 keep_data: bool = False) -> None:
        host, port = address.rsplit(":", 1)
        self.authority = address
        self.authorization = authorization
        self.sock = socket.create_connection((host, int(port)), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._encoder = hpack.Encoder()
        self._write_lock = threading.Lock()
        self._lock = threading.Lock()
        self.settings: Dict[int, int] = {}
        self.settings_seen = threading.Event()
        self.resets: Dict[int, int] = {}   # stream -> error code
        self.ended: Dict[int, List[Tuple[str, str]]] = {}  # stream -> trailers
        self.goaway: Optional[Tuple[int, int, bytes]] = None
        self.goaways: List[Tuple[int, int, bytes]] = []
        self.data: Dict[int, bytes] = {}  # stream -> DATA received (keep_data)
        self.keep_data = keep_data
        self.ack_pings = ack_pings
        self.held_pings: List[bytes] = []
        self.closed = threading.Event()
        self.bytes_received = 0
        self.next_stream = 1
        self._decoder = hpack.Decoder()
        self._block: Dict[int, bytes] = {}
        self.send(PREFACE + frame(SETTINGS, 0, 0) +
                  frame(WINDOW_UPDATE, 0, 0, struct.pack(">I", (1 << 30))))
        self._reader = threading.Thread(target=self._read_loop, daemon=True)
        self._reader.start()

    # -- sending ---------------------------------------------------------
    def send(self, data: bytes) -> None:
        with self._write_lock:
            self.sock.sendall(data)

    def headers_block(self, method: str) -> bytes:
        """The request headers of a gRPC call of `method` ("/pkg.Svc/M")."""
        headers = [(":method", "POST"), (":scheme", "http"), (":path", method),
                   (":authority", self.authority), ("content-type", "application/grpc"),
                   ("te", "trailers")]
        if self.authorization is not None:
            headers.append(("authorization", self.authorization))
        # Never-indexed literals: the block is the same bytes every time, so
        # one encoding serves any number of streams.
        return self._encoder.encode(
            [hpack.NeverIndexedHeaderTuple(k, v) for k, v in headers])

    def open_stream(self, block: bytes, end_stream: bool = False) -> int:
        stream = self.next_stream
        self.next_stream += 2
        flags = END_HEADERS | (END_STREAM if end_stream else 0)
        self.send(frame(HEADERS, flags, stream, block))
        return stream

    def rapid_reset(self, method: str, count: int, batch: int = 500) -> Tuple[int, float]:
        """Opens `count` streams of `method`, resetting each at once, as fast
        as the socket takes them, until the server closes the connection;
        returns the streams sent and the seconds it took."""
        block = self.headers_block(method)
        rst = struct.pack(">I", CANCEL)
        start = time.monotonic()
        sent = 0
        while sent < count and not self.closed.is_set():
            n = min(batch, count - sent)
            out = bytearray()
            for _ in range(n):
                stream = self.next_stream
                self.next_stream += 2
                out += frame(HEADERS, END_HEADERS, stream, block)
                out += frame(RST_STREAM, 0, stream, rst)
            try:
                self.send(bytes(out))
            except OSError:
                break
            sent += n
        return sent, time.monotonic() - start

    def send_data(self, stream: int, payload: bytes, end_stream: bool = False) -> None:
        self.send(frame(DATA, END_STREAM if end_stream else 0, stream, payload))

    def release_pings(self) -> None:
        """Acknowledges the PINGs held so far (with ack_pings=False)."""
        with self._lock:
            held, self.held_pings = self.held_pings, []
        for payload in held:
            self.send(frame(PING, ACK, 0, payload))

    def close(self) -> None:
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.sock.close()
        self._reader.join(5)

    # -- receiving -------------------------------------------------------
    def _recv_exact(self, n: int) -> bytes:
        out = bytearray()
        while len(out) < n:
            try:
                part = self.sock.recv(n - len(out))
            except socket.timeout:
                continue
            if not part:
                raise EOFError
            out += part
        return bytes(out)

    def _read_loop(self) -> None:
        try:
            while True:
                head = self._recv_exact(9)
                length = int.from_bytes(head[:3], "big")
                kind, flags = head[3], head[4]
                stream = int.from_bytes(head[5:9], "big") & 0x7FFFFFFF
                payload = self._recv_exact(length) if length else b""
                self.bytes_received += 9 + length
                self._on_frame(kind, flags, stream, payload)
        except (EOFError, OSError):
            pass
        finally:
            self.closed.set()

    def _reply(self, data: bytes) -> None:
        """Sends what the reader answers by itself; a server that has closed
        the connection may still have sent frames to read, so a failed send
        does not stop the reader."""
        try:
            self.send(data)
        except OSError:
            pass

    def _on_frame(self, kind: int, flags: int, stream: int, payload: bytes) -> None:
        if kind == SETTINGS and not flags & ACK:
            for i in range(0, len(payload), 6):
                key, value = struct.unpack(">HI", payload[i : i + 6])
                self.settings[key] = value
            self._reply(frame(SETTINGS, ACK, 0))
            self.settings_seen.set()
        elif kind == PING and not flags & ACK:
            if self.ack_pings:
                self._reply(frame(PING, ACK, 0, payload))
            else:
                with self._lock:
                    self.held_pings.append(payload)
        elif kind == RST_STREAM:
            with self._lock:
                self.resets[stream] = struct.unpack(">I", payload)[0]
        elif kind == GOAWAY:
            last, code = struct.unpack(">II", payload[:8])
            self.goaway = (last & 0x7FFFFFFF, code, payload[8:])
            with self._lock:
                self.goaways.append(self.goaway)
        elif kind == DATA and payload:
            if self.keep_data:
                with self._lock:
                    self.data[stream] = self.data.get(stream, b"") + payload
            # Give the server its window back so responses keep flowing.
            self._reply(frame(WINDOW_UPDATE, 0, 0, struct.pack(">I", len(payload))) +
                      frame(WINDOW_UPDATE, 0, stream, struct.pack(">I", len(payload))))
        elif kind == HEADERS:
            block = self._block.pop(stream, b"") + payload
            if flags & END_HEADERS:
                headers = self._decoder.decode(block)
                if flags & END_STREAM:
                    with self._lock:
                        self.ended[stream] = [(str(k), str(v)) for k, v in headers]
            else:
                self._block[stream] = block

