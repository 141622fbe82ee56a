"""The exception raised for every failed chunkd call."""

from __future__ import annotations

from typing import Any, Dict, NamedTuple, Optional, Tuple

import grpc
from google.rpc import error_details_pb2, status_pb2

#: The trailing metadata key of the status details: a google.rpc.Status.
STATUS_DETAILS_KEY = "grpc-status-details-bin"
#: The type URL of a google.rpc.ErrorInfo in the details.
ERROR_INFO_TYPE_URL = "type.googleapis.com/google.rpc.ErrorInfo"


class ErrorInfo(NamedTuple):
    """The google.rpc.ErrorInfo of a refusal: ``reason`` (a value of the
    proto's ErrorReason without its ``ERROR_REASON_`` prefix, e.g.
    ``"STREAM_LIMIT"``), ``domain`` (``"chunkd.dev"``) and ``metadata``
    (e.g. ``{"flag": "--max_streams", "limit": "64"}``)."""

    reason: str
    domain: str
    metadata: Dict[str, str]


def error_info_of(trailing_metadata: Any) -> Optional[ErrorInfo]:
    """The ErrorInfo in a call's trailing metadata (pairs of key and
    value), from its ``grpc-status-details-bin`` entry; None when there is
    none or it does not parse."""
    for key, value in trailing_metadata or ():
        if key != STATUS_DETAILS_KEY or not isinstance(value, bytes):
            continue
        status = status_pb2.Status()
        try:
            status.ParseFromString(value)
        except Exception:  # not a google.rpc.Status: no reason
            return None
        for detail in status.details:
            if detail.type_url != ERROR_INFO_TYPE_URL:
                continue
            info = error_details_pb2.ErrorInfo()
            try:
                info.ParseFromString(detail.value)
            except Exception:
                return None
            return ErrorInfo(info.reason, info.domain, dict(info.metadata))
    return None


class StatusCodeAttribute:
    """``ChunkdError.code``: call it, as on grpcio's errors, for the
    ``grpc.StatusCode`` (``error.code()``).

    Earlier releases made ``code`` the ``grpc.StatusCode`` itself, so this
    also compares equal to that status code (``error.code ==
    grpc.StatusCode.UNAVAILABLE``), hashes as it, and has its ``name`` and
    ``value``; only an identity test (``is``) tells them apart.
    """

    __slots__ = ("_code",)

    def __init__(self, code: grpc.StatusCode) -> None:
        self._code = code

    def __call__(self) -> grpc.StatusCode:
        return self._code

    def __eq__(self, other: object) -> bool:
        if isinstance(other, StatusCodeAttribute):
            other = other._code
        return self._code == other

    def __hash__(self) -> int:
        return hash(self._code)

    @property
    def name(self) -> str:
        return str(self._code.name)

    @property
    def value(self) -> Any:
        return self._code.value

    def __repr__(self) -> str:
        return repr(self._code)


class ChunkdError(grpc.RpcError, grpc.Call):  # type: ignore[misc]
    """A chunkd RPC failed.

    A ``grpc.RpcError`` and a ``grpc.Call``, as the errors grpcio raises:
    ``except grpc.RpcError`` catches every failed call of the clients, and

    * ``code()`` is the gRPC status code, e.g.
      ``grpc.StatusCode.INVALID_ARGUMENT`` for bad parameters (the details
      name the field and its allowed range), ``RESOURCE_EXHAUSTED`` past a
      server limit, ``UNAVAILABLE`` when the server or its index cannot be
      reached, ``DEADLINE_EXCEEDED`` when the call's timeout expired,
      ``DATA_LOSS`` when a Chunk or Dedup stream ended OK but its summary
      does not account for the bytes the client sent;
    * ``details()`` is the server's status details (or gRPC's own
      description), also the attribute ``message``;
    * ``trailing_metadata()`` is the failed call's trailing metadata (None
      for an error the client found itself, such as DATA_LOSS);
    * ``reason`` tells refusals apart without reading the message: the
      ``google.rpc.ErrorInfo`` reason the server sent in the status details,
      e.g. ``"STREAM_LIMIT"``, ``"PER_TOKEN_STREAM_LIMIT"``,
      ``"INDEX_FULL"``, ``"UNAUTHENTICATED"`` (docs/clients.md, "Error
      reasons", lists them), or None when the status carries none;
      ``domain`` (``"chunkd.dev"``) and ``metadata`` (a dict, e.g. the
      ``flag`` and the ``limit`` that refused) come with it.

    ``code`` used to be an attribute holding the status code; comparing it
    with a ``grpc.StatusCode`` and reading ``code.name`` still work (see
    StatusCodeAttribute).
    """

    def __init__(
        self,
        code: grpc.StatusCode,
        message: str,
        trailing_metadata: Optional[Tuple[Tuple[str, Any], ...]] = None,
    ) -> None:
        super().__init__(code, message)
        self._code = StatusCodeAttribute(code)
        self.message = message
        self._trailing_metadata = trailing_metadata
        info = error_info_of(trailing_metadata)
        #: The ErrorInfo reason, e.g. "STREAM_LIMIT"; None without one.
        self.reason: Optional[str] = info.reason if info else None
        #: The ErrorInfo domain ("chunkd.dev"); None without a reason.
        self.domain: Optional[str] = info.domain if info else None
        #: The ErrorInfo metadata; empty without a reason.
        self.metadata: Dict[str, str] = info.metadata if info else {}

    @property
    def code(self) -> StatusCodeAttribute:  # type: ignore[override]
        """The status code: ``code()`` returns the ``grpc.StatusCode``."""
        return self._code

    def details(self) -> str:
        """The server's status details (the same as ``message``)."""
        return self.message

    def initial_metadata(self) -> None:
        return None

    def trailing_metadata(self) -> Optional[Tuple[Tuple[str, Any], ...]]:
        return self._trailing_metadata

    def is_active(self) -> bool:
        """False: the call has ended."""
        return False

    def time_remaining(self) -> None:
        return None

    def cancel(self) -> bool:
        """False: an ended call cannot be cancelled."""
        return False

    def add_callback(self, callback: Any) -> bool:
        """False: the call has ended, the callback is not kept."""
        return False

    def __str__(self) -> str:
        return f"{self.code.name}: {self.message}"

    def __repr__(self) -> str:
        return f"ChunkdError({self.code()!r}, {self.message!r})"

    def __reduce__(self) -> Any:
        return (type(self), (self.code(), self.message, self._trailing_metadata))

    @classmethod
    def from_rpc_error(cls, error: grpc.RpcError) -> "ChunkdError":
        """Translates an error raised by grpcio (a ChunkdError is returned
        as it is).

        Every ``grpc.RpcError`` raised by a call is also a ``grpc.Call`` that
        knows its code and details.
        """
        if isinstance(error, ChunkdError):
            return error
        code = error.code() if hasattr(error, "code") else None
        details = error.details() if hasattr(error, "details") else None
        if not isinstance(code, grpc.StatusCode):
            code = grpc.StatusCode.UNKNOWN
        trailing = None
        if hasattr(error, "trailing_metadata"):
            try:  # a tuple, or grpc.aio's Metadata (pairs as well)
                trailing = tuple(tuple(entry) for entry in error.trailing_metadata() or ())
            except Exception:  # not a finished call's error: keep none
                trailing = None
        return cls(code, details or str(error), trailing)


def unaccounted_stream(
    total_bytes: Optional[int], sent: int, complete: bool
) -> Optional[ChunkdError]:
    """The DATA_LOSS error of a Chunk or Dedup stream that ended OK without
    accounting for the data the client sent; None when it did.

    ``total_bytes`` is the summary's (None: no summary arrived), ``sent`` the
    data bytes the client sent in the stream and ``complete`` whether it had
    sent all of its source and half-closed the stream.
    """
    if total_bytes is None:
        return ChunkdError(
            grpc.StatusCode.DATA_LOSS,
            f"the stream ended without a summary; {sent} bytes were sent",
        )
    if not complete:
        return ChunkdError(
            grpc.StatusCode.DATA_LOSS,
            f"server summary reports total_bytes={total_bytes} but the stream "
            f"ended before all data was sent; {sent} bytes were sent",
        )
    if total_bytes != sent:
        return ChunkdError(
            grpc.StatusCode.DATA_LOSS,
            f"server summary reports total_bytes={total_bytes} but {sent} bytes "
            "were sent",
        )
    return None


def check_accounted(summary: Any, requests: Any) -> None:
    """Raises unaccounted_stream's error for a stream that ended OK with
    ``summary`` (None when none arrived) after ``requests`` (which count
    ``sent`` bytes and know whether they are ``complete``)."""
    error = unaccounted_stream(
        None if summary is None else summary.total_bytes,
        requests.sent,
        requests.complete,
    )
    if error is not None:
        raise error
