#!/usr/bin/env python3
"""Installs a Go toolchain from the Go module proxy: the Makefile runs it
when the Go it finds is missing or older than the repository's Go modules
ask for (Debian bookworm's golang is 1.19).

The toolchain is the module golang.org/toolchain@v0.0.1-goVERSION.OS-ARCH,
the zip `go` itself downloads when GOTOOLCHAIN asks for a newer Go (which
Go 1.19 cannot do). Its hash must equal the one the Go checksum database
(sum.golang.org, asked through the same proxy; the database's signature is
not verified, so this guards against a damaged download, not against a
proxy that lies) holds for it; then it is
unpacked into DEST (replacing what was there) with bin/ and pkg/tool/
executable, as `go` does for toolchain modules.

    tools/fetch_go.py --version 1.26.8 --needs 1.26.5 --dest .tools/go

$GOPROXY's first URL is the proxy when set (default https://proxy.golang.org).
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import os
import platform
import shutil
import sys
import tempfile
import urllib.error
import urllib.request
import zipfile
from pathlib import Path

MODULE = "golang.org/toolchain"
TIMEOUT = 60
ARCHES = {"x86_64": "amd64", "amd64": "amd64", "aarch64": "arm64", "arm64": "arm64"}


def version_tuple(version: str) -> tuple:
    return tuple(int(p) for p in version.split("."))


def proxy() -> str:
    for entry in os.environ.get("GOPROXY", "").replace("|", ",").split(","):
        if entry.startswith(("https://", "http://")):
            return entry.rstrip("/")
    return "https://proxy.golang.org"


def fetch(url: str, out) -> None:
    try:
        with urllib.request.urlopen(url, timeout=TIMEOUT) as response:
            shutil.copyfileobj(response, out, 1 << 20)
    except (urllib.error.URLError, OSError) as e:
        raise SystemExit(f"fetch_go: cannot download {url}: {e}") from None


def zip_hash(path: Path) -> str:
    """The "h1:" hash of a module zip (golang.org/x/mod/sumdb/dirhash): the
    SHA-256 of the lines "SHA256(file)  name" of every file, sorted by
    name."""
    lines = []
    with zipfile.ZipFile(path) as archive:
        for name in sorted(archive.namelist()):
            if name.endswith("/"):
                continue
            digest = hashlib.sha256()
            with archive.open(name) as f:
                for block in iter(lambda: f.read(1 << 20), b""):
                    digest.update(block)
            lines.append(f"{digest.hexdigest()}  {name}\n")
    summary = hashlib.sha256("".join(lines).encode()).digest()
    return "h1:" + base64.b64encode(summary).decode()


def checksum_db_hash(base: str, module_version: str) -> str:
    url = f"{base}/sumdb/sum.golang.org/lookup/{MODULE}@{module_version}"
    with tempfile.TemporaryFile() as body:
        fetch(url, body)
        body.seek(0)
        text = body.read().decode()
    for line in text.splitlines():
        words = line.split()
        if len(words) == 3 and words[:2] == [MODULE, module_version]:
            return words[2]
    raise SystemExit(f"fetch_go: the checksum database has no hash for {module_version}")


def unpack(archive: Path, prefix: str, dest: Path) -> None:
    """Unpacks the zip's files under `prefix` into a fresh `dest`."""
    staging = Path(tempfile.mkdtemp(prefix=".go-", dir=dest.parent))
    try:
        with zipfile.ZipFile(archive) as z:
            for info in z.infolist():
                if not info.filename.startswith(prefix) or ".." in info.filename.split("/"):
                    raise SystemExit(f"fetch_go: unexpected path in the zip: {info.filename}")
                z.extract(info, staging)
        root = staging / prefix
        for directory in (root / "bin", root / "pkg" / "tool"):
            for f in directory.rglob("*"):
                if f.is_file():
                    f.chmod(0o755)
        if dest.exists():
            shutil.rmtree(dest)
        root.rename(dest)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--version", required=True, help="Go release, e.g. 1.24.13")
    parser.add_argument("--needs", help="the oldest Go that will do (go.mod's go line)")
    parser.add_argument("--dest", required=True, type=Path, help="GOROOT to install into")
    args = parser.parse_args()

    if args.needs and version_tuple(args.version) < version_tuple(args.needs):
        raise SystemExit(f"fetch_go: Go {args.version} is older than the {args.needs} "
                         "the Go modules need: raise GO_FETCH_VERSION in the Makefile")
    system = platform.system().lower()
    arch = ARCHES.get(platform.machine().lower())
    if system != "linux" or arch is None:
        raise SystemExit(f"fetch_go: no Go toolchain for {platform.system()} "
                         f"{platform.machine()}; install Go {args.needs or args.version} "
                         "or newer and pass GO=/path/to/go")
    module_version = f"v0.0.1-go{args.version}.{system}-{arch}"
    base = proxy()
    dest = args.dest.resolve()
    dest.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".go-zip-", dir=dest.parent) as tmp:
        archive = Path(tmp) / "go.zip"
        with open(archive, "wb") as out:
            fetch(f"{base}/{MODULE}/@v/{module_version}.zip", out)
        want = checksum_db_hash(base, module_version)
        got = zip_hash(archive)
        if got != want:
            raise SystemExit(f"fetch_go: {module_version}.zip hashes to {got}, "
                             f"the checksum database says {want}")
        unpack(archive, f"{MODULE}@{module_version}/", dest)
    go = dest / "bin" / "go"
    if not os.access(go, os.X_OK):
        raise SystemExit(f"fetch_go: {go} missing after unpacking")
    print(f"fetch_go: Go {args.version} ({want}) in {dest}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
