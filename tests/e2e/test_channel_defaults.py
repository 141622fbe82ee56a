"""The three clients' default service config (docs/cli.md, "Channel
defaults") is written once per language: the Python client's
DEFAULT_SERVICE_CONFIG, the Go module's DefaultServiceConfig and chunkctl's
kDefaultServiceConfig. They must say the same thing."""

from __future__ import annotations

import json
import re

from chunkd_client import DEFAULT_SERVICE_CONFIG

from e2e_util import REPO


def literal(path: str, pattern: str) -> object:
    text = (REPO / path).read_text()
    match = re.search(pattern, text, re.DOTALL)
    assert match, f"{path}: no default service config found by {pattern!r}"
    return json.loads(match.group(1))


def test_every_client_has_the_same_default_service_config() -> None:
    python = json.loads(json.dumps(DEFAULT_SERVICE_CONFIG))
    go = literal("clients/go/client.go", r"const DefaultServiceConfig = `(.*?)`")
    cpp = literal("clients/cli/remote.cc",
                  r'kDefaultServiceConfig\[\] = R"json\((.*?)\)json"')
    assert go == python
    assert cpp == python
    # What docs/cli.md promises.
    assert python["loadBalancingConfig"] == [{"round_robin": {}}]
    policy = python["methodConfig"][0]["retryPolicy"]
    assert policy == {"maxAttempts": 5, "initialBackoff": "1s", "maxBackoff": "9s",
                      "backoffMultiplier": 3, "retryableStatusCodes": ["UNAVAILABLE"]}
