"""Running a real chunkd server for tests (no mocks).

``ChunkdServer`` starts the chunkd binary on free loopback ports with the
in-memory index, waits until the standard gRPC health service reports
SERVING, and stops it again::

    with ChunkdServer("/path/to/chunkd", max_message_bytes=1 << 20) as server:
        with Client(server.address, timeout=30) as client:
            ...

``Relay`` is a TCP relay in front of one that refuses the first
connections, answers late, holds a stream open, cuts its connections or
resets its streams, for testing reconnection and replays.

This module needs only grpcio; it has no pytest dependency.
"""

from __future__ import annotations

import os
import queue
import re
import signal
import socket
import subprocess
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from typing import Iterator, List, Optional, Sequence, Union

import grpc

_HEALTH_CHECK = "/grpc.health.v1.Health/Check"
_SERVING = 1


class ServerError(RuntimeError):
    """The server could not be started or died; the message has its log."""


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def health_status(
    target: str,
    *,
    service: str = "",
    timeout: float = 2.0,
    credentials: Optional[grpc.ChannelCredentials] = None,
) -> int:
    """Calls grpc.health.v1.Health/Check once and returns the status enum
    (1 = SERVING). Raises grpc.RpcError when the call fails.

    The two messages are encoded by hand (HealthCheckRequest.service and
    HealthCheckResponse.status are both field 1), which spares a dependency
    on grpcio-health-checking. ``credentials``: TLS for a TLS server.
    """
    encoded_service = service.encode()
    request = (
        b"\x0a" + _varint(len(encoded_service)) + encoded_service if service else b""
    )
    channel = (
        grpc.insecure_channel(target)
        if credentials is None
        else grpc.secure_channel(target, credentials)
    )
    with channel:
        check = channel.unary_unary(
            _HEALTH_CHECK, request_serializer=None, response_deserializer=None
        )
        response = check(request, timeout=timeout)
    return _status_of(response)


def wait_until_serving(
    target: str,
    *,
    timeout: float = 30.0,
    process: Optional[subprocess.Popen] = None,
    credentials: Optional[grpc.ChannelCredentials] = None,
    service: str = "",
) -> None:
    """Polls the health service until it reports ``service`` (by default
    the overall status) SERVING; until chunkd registered the name it
    answers NOT_FOUND, which counts as not yet.

    Raises TimeoutError after ``timeout`` seconds, ServerError when
    ``process`` exits first.
    """
    deadline = time.monotonic() + timeout
    last: object = None
    while True:
        if process is not None and process.poll() is not None:
            raise ServerError(f"chunkd exited with {process.returncode} while starting")
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError(f"{target} not SERVING after {timeout}s (last: {last})")
        try:
            status = health_status(
                target, service=service, timeout=min(1.0, remaining),
                credentials=credentials,
            )
            if status == _SERVING:
                return
            last = f"status {status}"
        except grpc.RpcError as e:
            last = e
        time.sleep(0.05)


class ChunkdServer:
    """One chunkd process on free loopback ports.

    Args:
        binary: path of the chunkd executable.
        max_message_bytes: passed as ``--max_message_bytes`` when set.
        index: the index backend (``--index``), "memory" by default.
        extra_args: more flags (e.g. ``--tls_cert``, ``--auth_tokens``).
        startup_timeout: seconds to wait for SERVING.
        health_credentials: channel credentials for the health checks of a
            server started with TLS flags (None: plaintext).

    ``address`` and ``metrics_address`` are "127.0.0.1:PORT". The server's
    output goes to a log file whose text ``log()`` returns.
    """

    def __init__(
        self,
        binary: Union[str, os.PathLike],
        *,
        max_message_bytes: Optional[int] = None,
        index: str = "memory",
        extra_args: Sequence[str] = (),
        startup_timeout: float = 30.0,
        health_credentials: Optional[grpc.ChannelCredentials] = None,
    ) -> None:
        self.binary = Path(binary)
        self.health_credentials = health_credentials
        self.max_message_bytes = max_message_bytes
        self.index = index
        self.extra_args = list(extra_args)
        self.startup_timeout = startup_timeout
        self.address = ""
        self.metrics_address = ""
        self.process: Optional[subprocess.Popen] = None
        # Removed when this object goes away; readable by name until then.
        self._log = tempfile.NamedTemporaryFile(prefix="chunkd-", suffix=".log")

    def command(self) -> List[str]:
        """The command line used to start the server."""
        args = [
            str(self.binary),
            f"--listen={self.address}",
            f"--metrics_listen={self.metrics_address}",
            f"--index={self.index}",
        ]
        if self.max_message_bytes is not None:
            args.append(f"--max_message_bytes={self.max_message_bytes}")
        return args + self.extra_args

    def start(self, attempts: int = 3) -> "ChunkdServer":
        """Starts the server and waits until it is SERVING.

        Retries with new ports when the process exits during startup (a port
        taken between choosing and binding it).
        """
        if not self.binary.is_file() or not os.access(self.binary, os.X_OK):
            raise ServerError(f"chunkd binary not found or not executable: {self.binary}")
        for attempt in range(attempts):
            self.address = f"127.0.0.1:{free_port()}"
            self.metrics_address = f"127.0.0.1:{free_port()}"
            try:
                return self._launch()
            except ServerError:
                if attempt + 1 == attempts:
                    raise ServerError(f"chunkd failed to start:\n{self.log()}") from None
        raise AssertionError("unreachable")

    def restart(self) -> "ChunkdServer":
        """Stops the server if it still runs (SIGTERM) and starts it again on
        the same ports, e.g. to test clients across a restart; waits until it
        is SERVING."""
        assert self.address, "the server was never started"
        self.stop()
        try:
            return self._launch()
        except ServerError:
            raise ServerError(f"chunkd failed to restart:\n{self.log()}") from None

    def _launch(self) -> "ChunkdServer":
        """Runs the command on the chosen ports; ServerError when the
        process exits while starting."""
        self._log.write(f"$ {' '.join(self.command())}\n".encode())
        self._log.flush()
        self.process = subprocess.Popen(
            self.command(),
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )
        try:
            wait_until_serving(
                self.address,
                timeout=self.startup_timeout,
                process=self.process,
                credentials=self.health_credentials,
                # Published after every other status (the Dedup one too):
                # a test finds them all set.
                service="chunkd.v1.ChunkService",
            )
        except TimeoutError as e:
            self.stop()
            raise ServerError(f"{e}\n{self.log()}") from None
        return self

    def metrics(self) -> str:
        """The text of the metrics endpoint (Prometheus format)."""
        url = f"http://{self.metrics_address}/metrics"
        with urllib.request.urlopen(url, timeout=10) as response:
            return str(response.read().decode())

    def alive(self) -> bool:
        """True while the process runs."""
        return self.process is not None and self.process.poll() is None

    def stop(self, timeout: float = 10.0) -> Optional[int]:
        """SIGTERM, then SIGKILL after ``timeout`` seconds; returns the exit
        code (None if it was never started)."""
        if self.process is None:
            return None
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout)
        return self.process.returncode

    def vm_kib(self, field: str = "VmRSS") -> int:
        """A memory figure of the running process from /proc (Linux), in
        KiB: "VmRSS" (resident now) or "VmHWM" (its peak)."""
        assert self.process is not None, "the server was never started"
        status = Path(f"/proc/{self.process.pid}/status").read_text()
        match = re.search(rf"^{field}:\s+(\d+) kB", status, re.MULTILINE)
        assert match is not None, f"no {field} in /proc/{self.process.pid}/status"
        return int(match.group(1))

    def active_streams(self) -> float:
        """The chunkd_active_streams gauge, read from the metrics endpoint."""
        text = self.metrics()
        match = re.search(r"^chunkd_active_streams (\S+)$", text, re.MULTILINE)
        assert match is not None, "chunkd_active_streams is not exported"
        return float(match.group(1))

    def log(self) -> str:
        """Everything the server printed so far."""
        self._log.flush()
        return Path(self._log.name).read_text(errors="replace")

    def __enter__(self) -> "ChunkdServer":
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


def serving(server: "ChunkdServer") -> Iterator["ChunkdServer"]:
    """Starts `server`, yields it, stops it; a generator for test fixtures.

    Raises ServerError after stopping when the server died while in use, with
    the tail of its log, so a crash never passes as a clean teardown.
    """
    server.start()
    try:
        yield server
    finally:
        died = not server.alive()
        code = server.stop()
        if died:
            raise ServerError(
                f"chunkd died during the tests (exit {code}):\n"
                + server.log()[-4000:]
            )


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


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _status_of(response: bytes) -> int:
    """Field 1 (varint) of a HealthCheckResponse; 0 when absent."""
    status, i = 0, 0
    while i < len(response):
        key, i = _read_varint(response, i)
        field, wire_type = key >> 3, key & 7
        if wire_type == 0:
            value, i = _read_varint(response, i)
            if field == 1:
                status = value
        elif wire_type == 2:
            length, i = _read_varint(response, i)
            i += length
        elif wire_type == 1:
            i += 8
        elif wire_type == 5:
            i += 4
        else:
            raise ValueError(f"cannot parse HealthCheckResponse {response!r}")
    return status


def _read_varint(data: bytes, i: int) -> "tuple[int, int]":
    value, shift = 0, 0
    while True:
        if i >= len(data):
            raise ValueError("truncated varint")
        byte = data[i]
        i += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, i
        shift += 7
