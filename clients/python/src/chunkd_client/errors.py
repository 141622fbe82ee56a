"""The exception raised for every failed chunkd call."""

from __future__ import annotations

from typing import Any, Optional

import grpc


class ChunkdError(Exception):
    """A chunkd RPC failed.

    Attributes:
        code: the gRPC status code, e.g. ``grpc.StatusCode.INVALID_ARGUMENT``
            for bad parameters (the message names the field and its allowed
            range), ``RESOURCE_EXHAUSTED`` past a server limit,
            ``UNAVAILABLE`` when the server or its index cannot be reached,
            ``DEADLINE_EXCEEDED`` when the call's timeout expired,
            ``DATA_LOSS`` when a Chunk or Dedup stream ended OK but its
            summary does not account for the bytes the client sent.
        message: the server's status details (or gRPC's own description).
    """

    def __init__(self, code: grpc.StatusCode, message: str) -> None:
        super().__init__(code, message)
        self.code = code
        self.message = message

    def __str__(self) -> str:
        return f"{self.code.name}: {self.message}"

    @classmethod
    def from_rpc_error(cls, error: grpc.RpcError) -> "ChunkdError":
        """Translates an error raised by grpcio.

        Every ``grpc.RpcError`` raised by a call is also a ``grpc.Call`` that
        knows its code and details.
        """
        code = error.code() if hasattr(error, "code") else None
        details = error.details() if hasattr(error, "details") else None
        if not isinstance(code, grpc.StatusCode):
            code = grpc.StatusCode.UNKNOWN
        return cls(code, details or str(error))


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
