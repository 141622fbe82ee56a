"""Running every client of chunkd as a newcomer would: chunkctl, the
chunkd-client console script, chunkd-go and grpcurl.

Binaries: $CHUNKCTL_BIN (conftest), $CHUNKD_GO_BIN (default
<repo>/build/tools/bin/chunkd-go), $GRPCURL_BIN (default
<repo>/build/tools/bin/grpcurl) and the console script installed next to the
running Python. `make test` builds and installs all of them.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Dict, List, Optional, Sequence

import pytest

from e2e_util import REPO, SUBPROCESS_TIMEOUT

TOOLS_BIN = REPO / "build" / "tools" / "bin"


def tool(env: str, default: Path) -> Path:
    path = Path(os.environ.get(env) or default)
    if not (path.is_file() and os.access(path, os.X_OK)):
        pytest.fail(f"{path} is not an executable: run `make test` (it installs it) "
                    f"or point ${env} at it", pytrace=False)
    return path


def chunkd_go() -> Path:
    return tool("CHUNKD_GO_BIN", TOOLS_BIN / "chunkd-go")


def grpcurl() -> Path:
    return tool("GRPCURL_BIN", TOOLS_BIN / "grpcurl")


def chunkd_client() -> Path:
    return tool("CHUNKD_CLIENT_BIN", Path(sys.executable).with_name("chunkd-client"))


def run(command: Sequence[object], *, check: bool = True, env: Optional[Dict[str, str]] = None,
        stdin: Optional[bytes] = None) -> subprocess.CompletedProcess:
    """Runs a client; fails the test on a non-zero exit when `check`."""
    full_env = dict(os.environ)
    full_env.pop("CHUNKD_TOKEN", None)
    full_env.update(env or {})
    result = subprocess.run(
        [str(c) for c in command], input=stdin,
        stdin=None if stdin is not None else subprocess.DEVNULL,
        capture_output=True, timeout=SUBPROCESS_TIMEOUT, env=full_env,
    )
    if check and result.returncode != 0:
        pytest.fail(f"{' '.join(map(str, command))} exited with {result.returncode}:\n"
                    f"{result.stderr.decode(errors='replace')}", pytrace=False)
    return result


def chunk_flags(style: str, params: Dict[str, object]) -> List[str]:
    """`params` ({"algorithm": "fastcdc", "min": 4096, ...}) as flags of a
    client: "double" (--min N) or "single" (-min N, Go's flag package)."""
    dash = "--" if style == "double" else "-"
    return [item for name, value in params.items() for item in (f"{dash}{name}", str(value))]
