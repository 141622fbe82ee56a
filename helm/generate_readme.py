#!/usr/bin/env python3
"""Writes helm/chunkd/README.md from the chart: Chart.yaml's metadata and a
table per section of values.yaml, every value with its description and
default, in the file's order (helm-docs style).

values.yaml documents its keys with comment lines above them:

    ## @section Title          starts a table
    ## @param key.path text    describes a key (an object's @param covers
                               everything under it: resources, affinity ...)

A key with no @param of its own or of a parent, or a @param naming no key,
is an error: the README would lose it.

Usage:
  generate_readme.py            rewrite helm/chunkd/README.md
  generate_readme.py --check    exit 1 if it is stale or a value lacks a
                                description (tests/deploy/test_chart_readme.py)
Needs PyYAML (Debian: python3-yaml).
"""

from __future__ import annotations

import argparse
import difflib
import json
import re
import sys
from pathlib import Path
from typing import Any, Iterator

import yaml

CHART = Path(__file__).resolve().parent / "chunkd"
PARAM = re.compile(r"^## @param (\S+) (.+)$")
SECTION = re.compile(r"^## @section (.+)$")


class Values:
    """values.yaml's @section and @param comments, and its defaults."""

    def __init__(self, path: Path) -> None:
        text = path.read_text(encoding="utf-8")
        self.defaults = yaml.safe_load(text)
        self.sections: list[tuple[str, list[tuple[str, str]]]] = []
        self.errors: list[str] = []
        for number, line in enumerate(text.splitlines(), 1):
            if m := SECTION.match(line):
                self.sections.append((m.group(1).strip(), []))
            elif m := PARAM.match(line):
                if not self.sections:
                    self.errors.append(f"{path.name}:{number}: @param before any @section")
                    continue
                self.sections[-1][1].append((m.group(1), m.group(2).strip()))
            elif line.startswith("## @"):
                self.errors.append(f"{path.name}:{number}: unknown annotation: {line}")
        self._check()

    def params(self) -> dict[str, str]:
        return {key: text for _, params in self.sections for key, text in params}

    def default(self, key: str) -> Any:
        node: Any = self.defaults
        for part in key.split("."):
            node = node[part]
        return node

    def _check(self) -> None:
        params = self.params()
        seen: set[str] = set()
        for _, items in self.sections:
            for key, _ in items:
                if key in seen:
                    self.errors.append(f"@param {key} appears twice")
                seen.add(key)
                try:
                    self.default(key)
                except (KeyError, TypeError):
                    self.errors.append(f"@param {key} names no key of values.yaml")
        for key in leaves(self.defaults):
            parts = key.split(".")
            if not any(".".join(parts[:n]) in params for n in range(1, len(parts) + 1)):
                self.errors.append(f"{key} has no description: add '## @param {key} ...' "
                                   "above it in values.yaml")


def leaves(node: Any, prefix: str = "") -> Iterator[str]:
    """Every key path whose value is not a non-empty mapping."""
    if isinstance(node, dict) and node:
        for key, value in node.items():
            yield from leaves(value, f"{prefix}{key}" if not prefix else f"{prefix}.{key}")
    elif prefix:
        yield prefix


def cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def prose(text: str) -> str:
    """A description in a table cell: no raw HTML (<full name> is text)."""
    return cell(text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;"))


def render_default(value: Any) -> str:
    if value == "":
        return '`""`'
    return "`" + cell(json.dumps(value, separators=(", ", ": "))) + "`"


#: The README's section on the settings chunkd needs of any Redis it uses.
REDIS = """\
## Redis settings

chunkd's Redis index groups fingerprints into bucket hashes, each kept to
about 512 fields at most, with values of up to 64 bytes. Redis stores such a
hash in its compact listpack encoding only while it has at most
`hash-max-listpack-entries` fields and no field or value longer than
`hash-max-listpack-value` bytes; past either limit it converts the hash into
an ordinary hash table, which takes up to about twice the memory per entry,
and raising the limit later does not convert it back. The built-in Redis
runs with

```sh
redis-server --maxmemory-policy noeviction \\
  --hash-max-listpack-entries 512 --hash-max-listpack-value 64 ...
```

(`builtinRedis.hashMaxListpackEntries` and
`builtinRedis.hashMaxListpackValue`; the schema refuses lower values). An
external Redis (`index.redis.address`), and every node of a Redis Cluster
(`index.type=redis-cluster`), needs the same in its `redis.conf` (or its
managed service's parameter group):

```
maxmemory-policy noeviction
hash-max-listpack-entries 512
hash-max-listpack-value 64
```

The two listpack values are Redis's defaults; a configuration that lowers
them costs memory. chunkd reads all three with `CONFIG GET` when it
connects and logs a `WARNING` naming the server and the setting when one is
wrong. The rest: `docs/operations.md`, "Redis settings".
"""


#: The README's section on index.type=rocksdb: which workload and why.
ROCKSDB = """\
## The RocksDB index

`index.type=rocksdb` runs chunkd with
`--index=rocksdb:///var/lib/chunkd/index?sync=<index.rocksdb.sync>` on a
PersistentVolumeClaim mounted at `/var/lib/chunkd`, in a **StatefulSet** of
one pod, `<fullname>-0`. More replicas, or autoscaling, are refused: a second
pod cannot open the database (RocksDB's `LOCK`). Why a StatefulSet rather than
a Deployment with strategy `Recreate`:

- A StatefulSet starts its pod again only once the old one is gone, whatever
  replaces it: `helm upgrade`, a changed value, `kubectl delete pod`, an
  eviction, a drained node. `Recreate` orders rollouts only: a Deployment
  replaces a deleted or evicted pod at once, while the old one still drains,
  and on the same node (which ReadWriteOnce allows) the new pod would fail on
  the `LOCK` and restart with back-off until the old one has exited.
- The claim of its volumeClaimTemplate, `index-<fullname>-0`, is kept by
  `helm uninstall` and found again by a release of the same name; a claim
  the chart rendered itself would be deleted with the release, and the index
  with it.

The price: Kubernetes refuses changes to a StatefulSet's volumeClaimTemplates,
so `index.rocksdb.persistence.size`, `storageClassName` and `accessModes` are
fixed once installed (`helm upgrade` with other ones fails); grow the claim
itself (`kubectl edit pvc`, where its storage class allows expansion), or
give a claim you manage as `index.rocksdb.persistence.existingClaim`. A
consistent online backup is a RocksDB checkpoint, written on the same volume
to `/var/lib/chunkd/index.checkpoints/<UTC time>` (chunkd logs the path):

```sh
kubectl -n chunkd exec chunkd-0 -c chunkd -- sh -c 'kill -USR1 1'
```

The rest, with what each `sync` survives: `docs/operations.md`, "The RocksDB
index in the chart".
"""


def render(chart: dict, values: Values) -> str:
    license_ = chart.get("annotations", {}).get("artifacthub.io/license", "")
    lines = [
        "<!-- Generated by helm/generate_readme.py from Chart.yaml and values.yaml:",
        "     edit those and run `python3 helm/generate_readme.py`. -->",
        f"# {chart['name']}",
        "",
        f"![Version: {chart['version']}](https://img.shields.io/badge/Version-"
        f"{chart['version'].replace('-', '--')}-informational?style=flat-square) "
        f"![AppVersion: {chart['appVersion']}](https://img.shields.io/badge/AppVersion-"
        f"{chart['appVersion'].replace('-', '--')}-informational?style=flat-square) "
        f"![License: {license_}](https://img.shields.io/badge/License-"
        f"{license_.replace('-', '--')}-informational?style=flat-square)",
        "",
        chart["description"],
        "",
        f"**Homepage:** <{chart['home']}>",
        "",
        "## Installing",
        "",
        "```sh",
        "# Trial: one pod, the built-in single Redis.",
        f"helm install {chart['name']} helm/{chart['name']} --namespace chunkd --create-namespace \\",
        "  --set index.type=redis --set builtinRedis.enabled=true",
        f"helm test {chart['name']} -n chunkd",
        "",
        "# One pod, its index kept on a PersistentVolumeClaim.",
        f"helm install {chart['name']} helm/{chart['name']} --namespace chunkd --create-namespace \\",
        "  --set index.type=rocksdb",
        "```",
        "",
        "The files in `ci/` are worked examples (external Redis, Redis Cluster, mTLS with",
        "tokens, everything on for production, a PodMonitor with extra volumes and a",
        "sidecar). Operating chunkd, its alerts and the dashboard: `docs/operations.md`",
        "in the repository.",
        "",
        *REDIS.splitlines(),
        "",
        *ROCKSDB.splitlines(),
        "",
        "## Requirements",
        "",
        f"Kubernetes: `{chart['kubeVersion']}`",
        "",
        "## Maintainers",
        "",
        "| Name | Url |",
        "|---|---|",
        *[f"| {m['name']} | <{m.get('url', '')}> |" for m in chart.get("maintainers", [])],
        "",
        "## Source Code",
        "",
        *[f"* <{s}>" for s in chart.get("sources", [])],
        "",
        "## Values",
        "",
        "Every value is checked by `values.schema.json` (unknown keys are errors).",
    ]
    for title, params in values.sections:
        lines += ["", f"### {title}", "", "| Key | Description | Default |", "|---|---|---|"]
        for key, text in params:
            lines.append(f"| `{key}` | {prose(text)} | {render_default(values.default(key))} |")
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true",
                        help="fail if README.md is stale or a value lacks a description")
    parser.add_argument("--chart", type=Path, default=CHART)
    args = parser.parse_args()
    chart = yaml.safe_load((args.chart / "Chart.yaml").read_text(encoding="utf-8"))
    values = Values(args.chart / "values.yaml")
    if values.errors:
        print("\n".join(values.errors), file=sys.stderr)
        return 1
    readme = args.chart / "README.md"
    text = render(chart, values)
    if args.check:
        current = readme.read_text(encoding="utf-8") if readme.exists() else ""
        if current != text:
            sys.stderr.writelines(difflib.unified_diff(
                current.splitlines(keepends=True), text.splitlines(keepends=True),
                str(readme), "generated"))
            print(f"{readme} is stale: run python3 helm/generate_readme.py", file=sys.stderr)
            return 1
        return 0
    readme.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
