"""Python client for chunkd, the gRPC content-defined chunking and
deduplication service.

    from chunkd_client import ChunkingParams, Client

    with Client("localhost:50051", timeout=60) as client:  # tls=, token=
        params = ChunkingParams("fastcdc", avg_size=16384)
        stream = client.chunk("disk.img", params=params)
        for record in stream:          # ChunkRecord(offset, length, fingerprint)
            ...
        print(stream.summary)          # ChunkSummary, set once exhausted

Every failed call raises ChunkdError, a grpc.RpcError with code() and
details() as grpcio's own errors have.
"""

from chunkd_client.client import (
    ALGORITHM_PARAMETERS, ALGORITHMS, FINGERPRINTS, HINTS, MAX_SAMPLE_RATE, MAX_SETS,
    ChunkStream, ChunkingParams, Client, DedupStream, ResponseStream, chunking_params,
    parse_set,
)
from chunkd_client._channel import DEFAULT_SERVICE_CONFIG, TlsOptions
from chunkd_client.errors import ChunkdError
from chunkd_client.records import (
    AlgorithmInfo, ChunkRecord, ChunkSummary, DedupRecord, DedupSummary, EstimateProgress,
    EstimateResult, IndexCost, ParamRange, ServerInfo, SetEstimate, SizeBucket,
)

from chunkd_client._version import __version__

__all__ = [
    "ALGORITHM_PARAMETERS",
    "ALGORITHMS",
    "DEFAULT_SERVICE_CONFIG",
    "FINGERPRINTS",
    "HINTS",
    "MAX_SAMPLE_RATE",
    "MAX_SETS",
    "AlgorithmInfo",
    "ChunkRecord",
    "ChunkStream",
    "ChunkSummary",
    "ChunkdError",
    "ChunkingParams",
    "Client",
    "DedupRecord",
    "DedupStream",
    "DedupSummary",
    "EstimateProgress",
    "EstimateResult",
    "IndexCost",
    "ParamRange",
    "ResponseStream",
    "ServerInfo",
    "SetEstimate",
    "SizeBucket",
    "TlsOptions",
    "chunking_params",
    "parse_set",
]
