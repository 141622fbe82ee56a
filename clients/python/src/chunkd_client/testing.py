"""Running a real chunkd server for tests (no mocks).

``ChunkdServer`` starts the chunkd binary on free loopback ports with the
in-memory index, waits until the standard gRPC health service reports
SERVING, and stops it again::

    with ChunkdServer("/path/to/chunkd", max_message_bytes=1 << 20) as server:
        with Client(server.address, timeout=30) as client:
            ...

``Relay`` (from _relay) is a TCP relay in front of one that refuses the
first connections, answers late, holds a stream open, cuts its connections
or resets its streams, for testing reconnection and replays.

This module needs only grpcio; it has no pytest dependency.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Iterator, List, Optional, Sequence, Union

import grpc

from chunkd_client._relay import Relay

__all__ = ["ChunkdServer", "Relay", "ServerError", "free_port", "health_status",
           "serving", "wait_until_serving"]

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

    def wait_for_active_streams(self, active: int, timeout: float = 60.0) -> None:
        """Waits until ``active_streams()`` is ``active``; ServerError after
        ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        while self.active_streams() != active:
            if time.monotonic() >= deadline:
                raise ServerError(f"chunkd never had {active} active streams "
                                  f"within {timeout} s")
            time.sleep(0.02)

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
