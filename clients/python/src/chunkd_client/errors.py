"""The exception raised for every failed chunkd call."""

from __future__ import annotations

import grpc


class ChunkdError(Exception):
    """A chunkd RPC failed.

    Attributes:
        code: the gRPC status code, e.g. ``grpc.StatusCode.INVALID_ARGUMENT``
            for bad parameters (the message names the field and its allowed
            range), ``RESOURCE_EXHAUSTED`` past a server limit,
            ``UNAVAILABLE`` when the server or its index cannot be reached,
            ``DEADLINE_EXCEEDED`` when the call's timeout expired.
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
