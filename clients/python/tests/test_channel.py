"""TLS options and token metadata, without a server."""

from __future__ import annotations

from pathlib import Path

import grpc
import pytest

from chunkd_client import Client, TlsOptions
from chunkd_client._channel import (
    call_metadata,
    channel_credentials,
    channel_options,
    token_from_file,
)


def test_token_becomes_a_bearer_header() -> None:
    assert call_metadata("abc", [("x-trace", "1")]) == (
        ("authorization", "Bearer abc"), ("x-trace", "1"))
    assert call_metadata(None, ()) == ()
    for bad in ("", "two words", "tab\there"):
        with pytest.raises(ValueError):
            call_metadata(bad, ())


def test_token_from_file(tmp_path: Path) -> None:
    path = tmp_path / "token"
    path.write_text("  secret-token \n# ignored\n")
    assert token_from_file(path) == "secret-token"
    path.write_text("\n \n")
    with pytest.raises(ValueError, match="empty"):
        token_from_file(path)


def test_tls_choices(tmp_path: Path) -> None:
    assert channel_credentials(None) is None and channel_credentials(False) is None
    assert isinstance(channel_credentials(True), grpc.ChannelCredentials)
    ready = grpc.ssl_channel_credentials()
    assert channel_credentials(ready) is ready
    with pytest.raises(TypeError):
        channel_credentials("yes")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="both"):
        TlsOptions(cert=tmp_path / "c.pem").credentials()
    with pytest.raises(OSError, match="CA file"):
        TlsOptions(ca=tmp_path / "missing.pem").credentials()
    options = channel_options(TlsOptions(server_name="chunkd.internal"), [("a", 1)])
    assert ("grpc.ssl_target_name_override", "chunkd.internal") in options
    assert options[-1] == ("a", 1)


def test_client_rejects_bad_settings_before_connecting(tmp_path: Path) -> None:
    with pytest.raises(ValueError):
        Client("127.0.0.1:1", token="a b")
    with pytest.raises(OSError):
        Client("127.0.0.1:1", tls=TlsOptions(ca=tmp_path / "nope.pem"))
