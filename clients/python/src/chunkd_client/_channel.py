"""Channel security and per-call metadata, shared by Client and AsyncClient."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, List, Mapping, Optional, Sequence, Tuple, Union

import grpc

from chunkd_client import _tables

#: Channel options of every client: responses are batches of records, so
#: never refuse one for its size; and reconnect sooner than gRPC's default
#: (1 s first, growing to 120 s), or every retry of a unary call falls
#: within one reconnect wait and none outlasts a restarting server
#: (docs/cli.md, "Channel defaults"). ``grpc.min_reconnect_backoff_ms`` is
#: left alone: despite its name it is the time each connection attempt
#: gets (20 s), and a short one fails every server slower to reach.
DEFAULT_CHANNEL_OPTIONS: Tuple[Tuple[str, object], ...] = (
    ("grpc.max_receive_message_length", -1),
    ("grpc.initial_reconnect_backoff_ms", 20),
    ("grpc.max_reconnect_backoff_ms", 2000),
)

#: The gRPC service config every client dials with unless the caller gives
#: its own (docs/cli.md, "Channel defaults"; declared once, in chunkd's table
#: proto/chunkd/v1/tables.json): round_robin over every address the target
#: resolves to, so that a ``dns:///`` name of a headless Service spreads the
#: streams over every pod; and up to 5 attempts (gRPC's most) of the
#: idempotent unary calls (GetServerInfo and FindMissing only read, Release
#: applies once per request_id) on UNAVAILABLE, gRPC drawing the waits
#: between them from [0, 1 s], [0, 3 s], [0, 9 s] and [0, 9 s]: together 11 s
#: on average, enough to outlast a server restart or what is left of a Redis
#: failover. Streams are never retried by gRPC: ``retries=N`` replays the
#: source instead.
DEFAULT_SERVICE_CONFIG: Mapping[str, Any] = _tables.SERVICE_CONFIG


#: What the ``service_config`` argument of a client accepts: None for
#: DEFAULT_SERVICE_CONFIG, else a service config as a mapping or a JSON
#: string (``{}``: none at all, gRPC's pick_first without retries).
ServiceConfig = Union[None, str, Mapping[str, Any]]


@dataclass(frozen=True)
class TlsOptions:
    """TLS settings of a channel.

    Every field is optional:

    * ``ca``: PEM file of the certificate authorities that sign the server's
      certificate; ``None`` uses the system's roots (as ``tls=True`` does);
    * ``cert`` and ``key``: PEM files of a client certificate and its private
      key, for a server that requires mutual TLS (``--tls_client_ca``); give
      both or neither;
    * ``server_name``: the name to verify in the server's certificate when it
      differs from the target's host (e.g. connecting to an IP address).
    """

    ca: Optional[Union[str, "os.PathLike[str]"]] = None
    cert: Optional[Union[str, "os.PathLike[str]"]] = None
    key: Optional[Union[str, "os.PathLike[str]"]] = None
    server_name: Optional[str] = None

    def credentials(self) -> grpc.ChannelCredentials:
        """The grpc channel credentials; reads the files now.

        Raises ValueError when only one of cert and key is given, OSError when
        a file cannot be read.
        """
        if (self.cert is None) != (self.key is None):
            raise ValueError("TLS: give both a client certificate and its key, or neither")
        return grpc.ssl_channel_credentials(
            root_certificates=_read(self.ca, "CA"),
            private_key=_read(self.key, "client key"),
            certificate_chain=_read(self.cert, "client certificate"),
        )


#: What the ``tls`` argument of a client accepts: None or False for a
#: plaintext channel, True for TLS with the system's roots, a TlsOptions, or
#: ready-made grpc.ChannelCredentials.
Tls = Union[None, bool, TlsOptions, grpc.ChannelCredentials]


def _read(path: Optional[Union[str, "os.PathLike[str]"]], what: str) -> Optional[bytes]:
    if path is None:
        return None
    try:
        return Path(path).read_bytes()
    except OSError as e:
        raise OSError(f"TLS: cannot read the {what} file {path}: {e.strerror}") from None


def channel_credentials(tls: Tls) -> Optional[grpc.ChannelCredentials]:
    """The credentials for ``tls``; None means a plaintext channel."""
    if tls is None or tls is False:
        return None
    if tls is True:
        return grpc.ssl_channel_credentials()
    if isinstance(tls, TlsOptions):
        return tls.credentials()
    if isinstance(tls, grpc.ChannelCredentials):
        return tls
    raise TypeError(
        "tls must be None, a bool, a TlsOptions or grpc.ChannelCredentials, "
        f"not {type(tls).__name__}"
    )


def channel_options(
    tls: Tls,
    options: Sequence[Tuple[str, object]],
    service_config: ServiceConfig = None,
) -> List[Tuple[str, object]]:
    """The channel's options: the defaults (DEFAULT_CHANNEL_OPTIONS and the
    service config), the TLS server name override, then the caller's own
    ``options``, each of which replaces a default of the same name (a
    ``grpc.service_config`` among them replaces ``service_config``)."""
    if service_config is None:
        config = json.dumps(DEFAULT_SERVICE_CONFIG, separators=(",", ":"))
    elif isinstance(service_config, str):
        config = service_config
    elif isinstance(service_config, Mapping):
        config = json.dumps(service_config, separators=(",", ":"))
    else:
        raise TypeError(
            "service_config must be None, a JSON string or a mapping, not "
            f"{type(service_config).__name__}"
        )
    defaults: List[Tuple[str, object]] = list(DEFAULT_CHANNEL_OPTIONS)
    defaults.append(("grpc.service_config", config))
    if isinstance(tls, TlsOptions) and tls.server_name:
        defaults.append(("grpc.ssl_target_name_override", tls.server_name))
    given = {name for name, _ in options}
    return [o for o in defaults if o[0] not in given] + list(options)


def call_metadata(
    token: Optional[str], metadata: Sequence[Tuple[str, str]]
) -> Tuple[Tuple[str, str], ...]:
    """The metadata sent with every call: ``authorization: Bearer TOKEN``
    when a token is given, then the caller's own entries."""
    entries: List[Tuple[str, str]] = []
    if token is not None:
        token = token.strip()
        if not token or any(c.isspace() for c in token):
            raise ValueError("token must be one non-empty word without whitespace")
        entries.append(("authorization", f"Bearer {token}"))
    return tuple(entries) + tuple(metadata)


def token_from_file(path: Union[str, "os.PathLike[str]"]) -> str:
    """The token stored in a file (its first line, without surrounding
    whitespace); ValueError when the file holds none."""
    text = Path(path).read_text(encoding="utf-8")
    lines = text.strip().splitlines()
    token = lines[0].strip() if lines else ""
    if not token:
        raise ValueError(f"the token file {path} is empty")
    return token
