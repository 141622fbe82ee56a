#!/usr/bin/env python3
"""Lays out the JSON schemas kubeconform validates the chart against, offline.

Two sources, both fetched by their ordinary clients (see the Makefile's
test-chart target):

* Kubernetes: the schemas inside the `kubernetes-validate` PyPI package
  (kubernetes_validate/kubernetes-json-schema/v<version>-local-strict/, one
  file per kind plus _definitions.json). Each file carries an `$id` under
  https://kubernetes.io/api/ and refers to `/api/_definitions.json`, which
  the package's own validator resolves through an in-memory registry; a
  file-based validator would fetch that URL from the internet. The copy
  written here drops the `$id` and points the references at the sibling
  file, so kubeconform resolves them on disk.

* Custom resources: a CustomResourceDefinition's openAPIV3Schema (e.g. the
  ServiceMonitor CRD of the prometheus-operator Go module) converted to the
  JSON schema kubeconform looks up as <group>/<kind>_<version>.json:
  `nullable` becomes a "null" type, `x-kubernetes-int-or-string` an
  integer-or-string, and every object that lists its properties (and does
  not preserve unknown fields) gets additionalProperties false, which is
  what kubeconform -strict means for built-in kinds too.

Usage:
  kubeconform_schemas.py --kubernetes-version 1.30.0 --crd CRD.yaml ... --out DIR
Then:
  kubeconform -strict -kubernetes-version 1.30.0 \\
    -schema-location 'DIR/kubernetes/{{ .NormalizedKubernetesVersion }}-local{{ .StrictSuffix }}/{{ .ResourceKind }}{{ .KindSuffix }}.json' \\
    -schema-location 'DIR/crds/{{ .Group }}/{{ .ResourceKind }}_{{ .ResourceAPIVersion }}.json'
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
from pathlib import Path
from typing import Any

import yaml

DEFINITIONS_REF = '"/api/_definitions.json#'


def kubernetes_validate_dir() -> Path:
    spec = importlib.util.find_spec("kubernetes_validate")
    if spec is None or spec.origin is None:
        raise SystemExit("kubernetes_validate is not installed in this Python "
                         f"({sys.executable}): pip install kubernetes-validate")
    return Path(spec.origin).parent / "kubernetes-json-schema"


def copy_kubernetes_schemas(version: str, out: Path) -> int:
    """Copies v<version>-local-strict with on-disk references; returns the
    number of files written."""
    name = f"v{version}-local-strict"
    source = kubernetes_validate_dir() / name
    if not source.is_dir():
        available = sorted(p.name for p in source.parent.iterdir())
        raise SystemExit(f"{source} does not exist; kubernetes-validate has: "
                         + ", ".join(available))
    target = out / "kubernetes" / name
    target.mkdir(parents=True, exist_ok=True)
    count = 0
    for path in sorted(source.glob("*.json")):
        text = path.read_text(encoding="utf-8")
        text = text.replace(DEFINITIONS_REF, '"_definitions.json#')
        schema = json.loads(text)
        schema.pop("$id", None)
        (target / path.name).write_text(json.dumps(schema), encoding="utf-8")
        count += 1
    if count == 0 or not (target / "_definitions.json").is_file():
        raise SystemExit(f"{source} holds no schemas (or no _definitions.json)")
    return count


def to_json_schema(node: Any) -> Any:
    """Converts one OpenAPI v3 (structural CRD) schema node, recursively."""
    if isinstance(node, list):
        return [to_json_schema(item) for item in node]
    if not isinstance(node, dict):
        return node
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key.startswith("x-kubernetes-") or key == "nullable":
            continue
        if key in ("properties", "patternProperties", "definitions"):
            out[key] = {name: to_json_schema(sub) for name, sub in value.items()}
        elif key in ("items", "additionalProperties", "not", "allOf", "anyOf", "oneOf"):
            out[key] = to_json_schema(value)
        else:
            out[key] = value
    if node.get("x-kubernetes-int-or-string"):
        out.pop("type", None)
        out.setdefault("anyOf", [{"type": "integer"}, {"type": "string"}])
    if node.get("nullable") and "type" in out:
        out["type"] = [out["type"], "null"]
    preserve = node.get("x-kubernetes-preserve-unknown-fields", False)
    if (node.get("type") == "object" and "properties" in node
            and "additionalProperties" not in node and not preserve):
        out["additionalProperties"] = False
    return out


def write_crd_schemas(crd_path: Path, out: Path) -> list[Path]:
    written = []
    for crd in yaml.safe_load_all(crd_path.read_text(encoding="utf-8")):
        if not crd or crd.get("kind") != "CustomResourceDefinition":
            continue
        spec = crd["spec"]
        group, kind = spec["group"], spec["names"]["kind"]
        for version in spec["versions"]:
            schema = version.get("schema", {}).get("openAPIV3Schema")
            if schema is None:
                raise SystemExit(f"{crd_path}: {kind} {version['name']} has no openAPIV3Schema")
            converted = to_json_schema(schema)
            props = converted.setdefault("properties", {})
            props["apiVersion"] = {"type": "string", "enum": [f"{group}/{version['name']}"]}
            props["kind"] = {"type": "string", "enum": [kind]}
            converted.setdefault("required", [])
            for required in ("apiVersion", "kind", "metadata"):
                if required not in converted["required"]:
                    converted["required"].append(required)
            target = out / "crds" / group / f"{kind.lower()}_{version['name']}.json"
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(json.dumps(converted, indent=1), encoding="utf-8")
            written.append(target)
    if not written:
        raise SystemExit(f"{crd_path} holds no CustomResourceDefinition")
    return written


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kubernetes-version", required=True, help="e.g. 1.30.0")
    parser.add_argument("--crd", type=Path, action="append", default=[],
                        help="a CustomResourceDefinition YAML file (repeatable)")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    count = copy_kubernetes_schemas(args.kubernetes_version, args.out)
    print(f"{count} Kubernetes {args.kubernetes_version} schemas in {args.out / 'kubernetes'}")
    for crd in args.crd:
        for path in write_crd_schemas(crd, args.out):
            print(f"{crd.name} -> {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
