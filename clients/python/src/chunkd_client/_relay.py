"""Relay: a TCP relay in front of a server that refuses the first
connections, answers late, holds a stream open, cuts its connections or
resets its HTTP/2 streams, for testing how a client reconnects and replays
(chunkd_client.testing exports it). It needs only the standard library.
"""

from __future__ import annotations

import queue
import socket
import threading
import time
from typing import List, Optional

class Relay:
    """A TCP relay on 127.0.0.1 in front of a server (e.g. a ChunkdServer's
    ``address``), for testing how a client reconnects and replays; each
    fault is one the test sets off, so no outcome depends on timing:

    * it closes the first ``refuse`` connections at once (the client sees
      UNAVAILABLE), and any whose server cannot be reached;
    * then it passes every byte both ways, ``connect_delay`` seconds after
      it accepted a connection (a server slow to reach);
    * with ``hold_upload_after=N``, it stops passing a connection's bytes
      from the client once N have passed, until ``release()``: a stream
      whose upload cannot end, so the server holds it open however fast it
      is, while its answers go on reaching the client (``downstream``
      counts the bytes passed to the clients; ``held`` is set once a hold
      began, so a test can act while a stream is certainly under way);
    * ``freeze()`` stops passing bytes either way, until ``cut()``;
    * ``cut()`` ends every connection (the client sees it drop mid-stream)
      and lets later ones pass freely;
    * ``reset_streams()`` resets every open HTTP/2 stream with RST_STREAM
      CANCEL, to the client and to the server, as a proxy that drops them
      does (the client reports CANCELLED), and keeps the connection.

    ``refused`` counts the closed connections; ``answered`` is set once the
    server's first bytes reached a client (for gRPC, its SETTINGS: the
    connection is up); ``close()`` ends every one.
    ``timeout`` bounds connecting upstream, each wait and each thread's end.
    """

    def __init__(self, upstream: str, refuse: int = 1, connect_delay: float = 0.0,
                 timeout: float = 30.0, hold_upload_after: Optional[int] = None) -> None:
        host, port = upstream.rsplit(":", 1)
        self._upstream = (host, int(port))
        self._refuse = refuse
        self._connect_delay = connect_delay
        self._timeout = timeout
        self._hold_after = hold_upload_after
        self.refused = 0
        self.downstream = 0
        self.answered = threading.Event()
        self.held = threading.Event()
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._listener.settimeout(0.2)
        self.address = f"127.0.0.1:{self._listener.getsockname()[1]}"
        self._stop = threading.Event()
        self._released = threading.Event()
        self._flowing = threading.Event()
        self._flowing.set()
        self._lock = threading.Lock()
        self._links: List[_Link] = []
        self._threads = [threading.Thread(target=self._accept, daemon=True)]
        self._threads[0].start()

    def release(self) -> None:
        """Passes the client's bytes held by ``hold_upload_after`` again."""
        self._released.set()

    def freeze(self) -> None:
        """Stops passing bytes either way until ``cut()``."""
        self._flowing.clear()

    def cut(self) -> None:
        """Ends every connection; later ones pass freely."""
        self._released.set()
        with self._lock:
            links, self._links = self._links, []
        for link in links:
            link.close()
        self._flowing.set()

    def reset_streams(self) -> int:
        """Resets every open stream with RST_STREAM CANCEL, both ways, and
        releases the held bytes; returns how many streams were reset."""
        with self._lock:
            links = list(self._links)
        reset = sum(link.reset_streams() for link in links)
        self._released.set()
        return reset

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._listener.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            if self.refused < self._refuse:
                self.refused += 1
                conn.close()
                continue
            time.sleep(self._connect_delay)
            try:
                upstream = socket.create_connection(self._upstream, timeout=self._timeout)
            except OSError:  # the server is down: so is this connection
                conn.close()
                continue
            link = _Link(conn, upstream)
            with self._lock:
                self._links.append(link)
            self._threads += link.threads
            for up in (True, False):
                thread = threading.Thread(target=self._pump, args=(link, up), daemon=True)
                self._threads.append(thread)
                thread.start()

    def _pump(self, link: "_Link", up: bool) -> None:
        """Passes one direction of ``link``: from the client when ``up``."""
        source = link.client if up else link.server
        source.settimeout(None)
        passed = 0
        try:
            while True:
                if up and self._hold_after is not None and passed >= self._hold_after \
                        and not self._released.is_set():
                    self.held.set()
                    self._released.wait(self._timeout)
                data = source.recv(65536)
                if not data:
                    break
                self._flowing.wait(self._timeout)
                passed += len(data)
                link.pass_on(data, up)
                if not up:
                    with self._lock:
                        self.downstream += len(data)
                    self.answered.set()
        except OSError:
            pass
        self._flowing.wait(self._timeout)  # frozen: not even the end passes
        link.end(up)

    def close(self) -> None:
        self._stop.set()
        self._listener.close()
        self._released.set()
        self._flowing.set()
        self.cut()
        for thread in self._threads:
            thread.join(self._timeout)
            if thread.is_alive():
                raise RuntimeError("relay thread did not stop")


#: HTTP/2 (RFC 9113): the client's connection preface, and the frame types
#: and flags a Relay reads.
_PREFACE = 24
_DATA, _HEADERS, _RST_STREAM, _WINDOW_UPDATE = 0x0, 0x1, 0x3, 0x8
_END_STREAM = 0x1
_CANCEL = 0x8


def _frame(kind: int, stream: int, payload: bytes) -> bytes:
    return (len(payload).to_bytes(3, "big") + bytes([kind, 0])
            + stream.to_bytes(4, "big") + payload)


class _Link:
    """One relayed connection, read frame by frame both ways so that the
    Relay can reset its streams between frames.

    A frame of a stream the Relay reset is dropped; the flow-control window
    its DATA took is given back to the sender (WINDOW_UPDATE on the
    connection), or the connection would stall for the streams after it.
    Each socket is written by a thread of its own (_Writer): a reader never
    waits on a peer that does not read (chunkd pausing its reads while it
    sends answers nobody would pass on).
    """

    def __init__(self, client: socket.socket, server: socket.socket) -> None:
        self.client = client
        self.server = server
        self._to = {True: _Writer(server), False: _Writer(client)}  # by ``up``
        self._lock = threading.Lock()
        self._pending = {True: bytearray(), False: bytearray()}
        self._preface = _PREFACE
        self._open: set = set()
        self._reset: set = set()

    @property
    def threads(self) -> List[threading.Thread]:
        return [writer.thread for writer in self._to.values()]

    def pass_on(self, data: bytes, up: bool) -> None:
        """Passes ``data`` read from the client (``up``) or the server on,
        whole frames at a time."""
        with self._lock:
            pending = self._pending[up]
            pending += data
            out = bytearray()
            if up and self._preface:
                taken = min(self._preface, len(pending))
                out += pending[:taken]
                del pending[:taken]
                self._preface -= taken
            while len(pending) >= 9:
                size = 9 + int.from_bytes(pending[:3], "big")
                if len(pending) < size:
                    break
                frame = bytes(pending[:size])
                del pending[:size]
                if self._keep(frame, up):
                    out += frame
            self._to[up].put(bytes(out))

    def _keep(self, frame: bytes, up: bool) -> bool:
        """Notes the streams ``frame`` opens and closes; False for a frame
        of a reset stream (its window given back)."""
        kind, flags = frame[3], frame[4]
        stream = int.from_bytes(frame[5:9], "big") & 0x7FFFFFFF
        if stream in self._reset:
            if kind == _DATA and len(frame) > 9:
                credit = _frame(_WINDOW_UPDATE, 0, (len(frame) - 9).to_bytes(4, "big"))
                self._to[not up].put(credit)
            return False
        if up and kind == _HEADERS:
            self._open.add(stream)
        if kind == _RST_STREAM or (not up and kind in (_DATA, _HEADERS)
                                   and flags & _END_STREAM):
            self._open.discard(stream)
        return True

    def reset_streams(self) -> int:
        with self._lock:
            for stream in self._open:
                rst = _frame(_RST_STREAM, stream, _CANCEL.to_bytes(4, "big"))
                for writer in self._to.values():
                    writer.put(rst)
            reset = len(self._open)
            self._reset |= self._open
            self._open = set()
            return reset

    def end(self, up: bool) -> None:
        """The ``up`` side's bytes ended: so does what it sends to, once
        the bytes before have gone."""
        self._to[up].put(_Writer.END)

    def close(self) -> None:
        for sock in (self.client, self.server):
            try:
                sock.shutdown(socket.SHUT_RDWR)  # wakes a pump blocked in recv
            except OSError:
                pass
            sock.close()
        for writer in self._to.values():
            writer.put(_Writer.STOP)


class _Writer:
    """Sends what is put to one socket, in order, on a thread of its own;
    END half-closes the socket after what came before, STOP ends the
    thread."""

    END = object()
    STOP = object()

    def __init__(self, sock: socket.socket) -> None:
        self._sock = sock
        self._queue: "queue.SimpleQueue[object]" = queue.SimpleQueue()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def put(self, data: object) -> None:
        if data:
            self._queue.put(data)

    def _run(self) -> None:
        while True:
            data = self._queue.get()
            if data is _Writer.STOP:
                return
            try:
                if isinstance(data, bytes):
                    self._sock.sendall(data)
                else:  # END
                    self._sock.shutdown(socket.SHUT_WR)
            except OSError:
                pass  # the connection is gone; what is left is dropped
