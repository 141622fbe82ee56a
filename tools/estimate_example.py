#!/usr/bin/env python3
"""Draws docs/estimate.md's example: an estimate of versions of a source tree.

    tools/estimate_example.py [--versions N] [--out DIR] [--docs]

The data set is N versions of this repository's own source tree, taken from
its git history at evenly spaced commits, each version one tar file
(`git archive`), so consecutive versions share most of their bytes the way
nightly backups of a project do. `chunkctl estimate --local --json` cuts it
with the sets below in one pass; `chunkd-client plot` draws the picture.
With --docs the JSON, the picture and the text table go into docs/ (the
block between the `estimate example` markers of docs/estimate.md, and
docs/images/estimate-example.png). Needs the build (`make build`) and the
virtualenv (`make .venv/.installed`).
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import List

REPO = Path(__file__).resolve().parents[1]
CHUNKCTL = REPO / "build" / "clients" / "cli" / "chunkctl"
CHUNKD_CLIENT = REPO / ".venv" / "bin" / "chunkd-client"
DOC = REPO / "docs" / "estimate.md"
PICTURE = REPO / "docs" / "images" / "estimate-example.png"
BEGIN = "<!-- estimate example: begin -->"
END = "<!-- estimate example: end -->"

# Four FastCDC sizes, the other content-defined chunkers at their defaults
# or at sizes near them, and fixed-size blocks for contrast.
SETS = [
    "fastcdc:min=1024,avg=4096,max=16384",
    "fastcdc:min=2048,avg=8192,max=32768",
    "fastcdc:min=4096,avg=16384,max=65536",
    "fastcdc:min=16384,avg=65536,max=262144",
    "seqcdc:preset=seqcdc-8k",
    "seqcdc:preset=seqcdc-16k",
    "buzhash:min=4096,avg=16384,max=65536",
    "rabin:min=4096,avg=16384,max=65536",
    "crc32:min=2048,avg=16384,max=65536",
    "fixed:avg=4096",
    "fixed:avg=16384",
]


def commits(count: int) -> List[str]:
    """`count` commits of main's first-parent history, evenly spaced."""
    out = subprocess.run(
        ["git", "-C", str(REPO), "rev-list", "--first-parent", "--reverse", "HEAD"],
        check=True, capture_output=True, text=True).stdout.split()
    if len(out) <= count:
        return out
    step = (len(out) - 1) / (count - 1)
    return [out[round(i * step)] for i in range(count)]


def write_versions(directory: Path, count: int) -> List[Path]:
    files = []
    for i, commit in enumerate(commits(count)):
        path = directory / ("v%03d-%s.tar" % (i, commit[:8]))
        with path.open("wb") as f:
            subprocess.run(["git", "-C", str(REPO), "archive", "--format=tar", commit],
                           check=True, stdout=f)
        files.append(path)
    return files


def estimate(files: List[Path], extra: List[str]) -> subprocess.CompletedProcess:
    args = [str(CHUNKCTL), "estimate", "--local"]
    for spec in SETS:
        args += ["--set", spec]
    return subprocess.run(args + extra + [str(f) for f in files],
                          check=True, capture_output=True, text=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--versions", type=int, default=24)
    parser.add_argument("--out", type=Path, default=REPO / "build" / "estimate-example")
    parser.add_argument("--docs", action="store_true",
                        help="write the table and the picture into docs/")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        files = write_versions(Path(tmp), args.versions)
        size = sum(f.stat().st_size for f in files)
        result = json.loads(estimate(files, ["--json"]).stdout)
        table = estimate(files, []).stdout
    saved = args.out / "estimate.json"
    saved.write_text(json.dumps(result) + "\n")
    picture = args.out / "estimate.png"
    subprocess.run([str(CHUNKD_CLIENT), "plot", str(saved), str(picture)], check=True)
    print(table, end="")
    print("data set: %d versions, %d bytes; picture: %s" % (len(files), size, picture))
    if args.docs:
        PICTURE.write_bytes(picture.read_bytes())
        block = "\n".join([
            BEGIN,
            "%d versions of chunkd's source tree (`git archive` of evenly spaced commits "
            "of its history, %d bytes), `tools/estimate_example.py --docs`:" % (len(files), size),
            "", "```", table.rstrip("\n"), "```", "",
            "![Dedup ratio against mean chunk size, and the chunk size histograms]"
            "(images/estimate-example.png)",
            END])
        text = DOC.read_text()
        text = re.sub(re.escape(BEGIN) + ".*?" + re.escape(END), lambda _: block, text,
                      flags=re.S)
        DOC.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
