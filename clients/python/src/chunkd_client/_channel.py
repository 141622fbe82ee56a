"""Channel security and per-call metadata, shared by Client and AsyncClient."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import List, Optional, Sequence, Tuple, Union

import grpc

#: Channel options of every client: responses are batches of records, so
#: never refuse one for its size.
DEFAULT_CHANNEL_OPTIONS: Tuple[Tuple[str, object], ...] = (
    ("grpc.max_receive_message_length", -1),
)


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
    tls: Tls, options: Sequence[Tuple[str, object]]
) -> List[Tuple[str, object]]:
    """Default options, the TLS server name override, then the caller's."""
    result = list(DEFAULT_CHANNEL_OPTIONS)
    if isinstance(tls, TlsOptions) and tls.server_name:
        result.append(("grpc.ssl_target_name_override", tls.server_name))
    return result + list(options)


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
