#!/usr/bin/env python3
"""Draws docs/estimate.md's example: an estimate of versions of a source tree.

    tools/estimate_example.py [--versions N] [--out DIR] [--docs]

The data set is N versions of this repository's own source tree (default:
every commit of main's first-parent history up to --commit), each version
one tar file (`git archive`), so consecutive versions share most of their
bytes the way nightly backups of a project do. `chunkctl estimate --local`
cuts it with the sets below in one pass, exactly and then sampled 1 in 64;
`chunkd-client plot` draws the exact estimate. With --docs the tables and
the picture go into docs/ (the block between the `estimate example` markers
of docs/estimate.md, and docs/images/estimate-example.png). Needs the build
(`make build`) and the virtualenv (`make .venv/.installed`).
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

# The parameter sets of the example, one --set per line: documentation, kept
# beside its picture.
SETS_FILE = REPO / "docs" / "images" / "estimate-example.sets"


def example_sets() -> List[str]:
    return [line.strip() for line in SETS_FILE.read_text().splitlines()
            if line.strip() and not line.startswith("#")]


def commits(tip: str, count: int) -> List[str]:
    """`count` commits of the first-parent history up to `tip`, evenly spaced
    (all of them when count is 0)."""
    out = subprocess.run(
        ["git", "-C", str(REPO), "rev-list", "--first-parent", "--reverse", tip],
        check=True, capture_output=True, text=True).stdout.split()
    if count == 0 or len(out) <= count:
        return out
    step = (len(out) - 1) / (count - 1)
    return [out[round(i * step)] for i in range(count)]


def write_versions(directory: Path, tip: str, count: int) -> List[Path]:
    files = []
    for i, commit in enumerate(commits(tip, count)):
        path = directory / ("v%03d-%s.tar" % (i, commit[:8]))
        with path.open("wb") as f:
            subprocess.run(["git", "-C", str(REPO), "archive", "--format=tar", commit],
                           check=True, stdout=f)
        files.append(path)
    return files


def estimate(files: List[Path], extra: List[str]) -> subprocess.CompletedProcess:
    args = [str(CHUNKCTL), "estimate", "--local"]
    for spec in example_sets():
        args += ["--set", spec]
    return subprocess.run(args + extra + [str(f) for f in files],
                          check=True, capture_output=True, text=True)


def accuracy_table(exact: dict, sampled: dict) -> str:
    """Exact against sampled ratio per set, as a Markdown table."""
    rows = ["| set | exact ratio | 1 in 64 | error | 95 % interval | covers |",
            "|---|---|---|---|---|---|"]
    for e, s in zip(exact["sets"], sampled["sets"]):
        low, high = s["ratio_interval"]
        rows.append("| `%s` | %.3f | %.3f | %+.2f %% | %.3f–%.3f | %s |" % (
            e["set"], e["dedup_ratio"], s["dedup_ratio"],
            100 * (s["dedup_ratio"] / e["dedup_ratio"] - 1), low, high,
            "yes" if low <= e["dedup_ratio"] <= high else "no"))
    return "\n".join(rows)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--versions", type=int, default=0,
                        help="versions to take, evenly spaced (default 0: every one)")
    parser.add_argument("--commit", default="HEAD", help="the newest version")
    parser.add_argument("--out", type=Path, default=REPO / "build" / "estimate-example")
    parser.add_argument("--docs", action="store_true",
                        help="write the tables and the picture into docs/")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        files = write_versions(Path(tmp), args.commit, args.versions)
        size = sum(f.stat().st_size for f in files)
        result = json.loads(estimate(files, ["--json"]).stdout)
        sampled = json.loads(estimate(files, ["--json", "--sample", "64"]).stdout)
        table = estimate(files, []).stdout
    saved = args.out / "estimate.json"
    saved.write_text(json.dumps(result) + "\n")
    picture = args.out / "estimate.png"
    subprocess.run([str(CHUNKD_CLIENT), "plot", str(saved), str(picture)], check=True)
    accuracy = accuracy_table(result, sampled)
    print(table, end="")
    print(accuracy)
    print("data set: %d versions, %d bytes; picture: %s" % (len(files), size, picture))
    if args.docs:
        PICTURE.write_bytes(picture.read_bytes())
        block = "\n".join([
            BEGIN,
            "%d versions of chunkd's source tree, one tar file each (`git archive` of "
            "every commit of its main line, %d bytes), `tools/estimate_example.py --docs`:"
            % (len(files), size),
            "", "```", table.rstrip("\n"), "```", "",
            "![Dedup ratio against mean chunk size, and the chunk size histograms]"
            "(images/estimate-example.png)", "",
            "The same estimate sampled 1 in 64 (`--sample 64`) against the exact one:", "",
            accuracy,
            END])
        text = DOC.read_text()
        text = re.sub(re.escape(BEGIN) + ".*?" + re.escape(END), lambda _: block, text,
                      flags=re.S)
        DOC.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
