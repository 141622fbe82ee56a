"""The generated stubs: built from proto/, importable, never committed."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

import chunkd_client
from chunkd_client._proto.chunkd.v1 import chunkd_pb2, chunkd_pb2_grpc

PACKAGE_DIR = Path(__file__).resolve().parents[1]
REPO = PACKAGE_DIR.parents[1]
PROTO = REPO / "proto" / "chunkd" / "v1" / "chunkd.proto"


def test_generated_modules_are_a_proper_package() -> None:
    assert chunkd_pb2.DESCRIPTOR.name == "chunkd/v1/chunkd.proto"
    assert chunkd_pb2.DESCRIPTOR.package == "chunkd.v1"
    assert hasattr(chunkd_pb2_grpc, "ChunkServiceStub")
    assert chunkd_pb2_grpc.chunkd_dot_v1_dot_chunkd__pb2 is chunkd_pb2


def test_generated_imports_are_rewritten() -> None:
    for module in (chunkd_pb2, chunkd_pb2_grpc):
        text = Path(module.__file__).read_text()
        assert not re.search(r"^\s*(from|import) chunkd\b", text, re.MULTILINE), module


def test_stubs_match_the_proto_file() -> None:
    """Catches stale stubs (e.g. an editable install after a proto change)."""
    text = PROTO.read_text()
    messages = set(re.findall(r"^message (\w+)", text, re.MULTILINE))
    enums = set(re.findall(r"^enum (\w+)", text, re.MULTILINE))
    rpcs = set(re.findall(r"^\s*rpc (\w+)\(", text, re.MULTILINE))
    file = chunkd_pb2.DESCRIPTOR
    assert set(file.message_types_by_name) == messages
    assert set(file.enum_types_by_name) == enums
    assert {m.name for m in file.services_by_name["ChunkService"].methods} == rpcs


def test_build_pin_matches_runtime_floor() -> None:
    tomllib = pytest.importorskip("tomllib")
    project = tomllib.loads((PACKAGE_DIR / "pyproject.toml").read_text())
    tools = [r for r in project["build-system"]["requires"] if r.startswith("grpcio-tools")]
    runtime = [r for r in project["project"]["dependencies"] if re.match(r"grpcio\b[^-]", r)]
    assert len(tools) == 1 and len(runtime) == 1
    pinned = re.fullmatch(r"grpcio-tools==([\d.]+)", tools[0])
    floor = re.match(r"grpcio>=([\d.]+)", runtime[0])
    assert pinned and floor, (tools, runtime)
    assert pinned.group(1) == floor.group(1)
    generated = re.search(
        r"GRPC_GENERATED_VERSION = '([\d.]+)'", Path(chunkd_pb2_grpc.__file__).read_text()
    )
    assert generated and generated.group(1) == pinned.group(1)


def test_stubs_are_not_committed() -> None:
    if shutil.which("git") is None:
        pytest.skip("git not installed")
    tracked = subprocess.run(
        ["git", "-C", str(REPO), "ls-files", "--", "clients/python"],
        capture_output=True, text=True, timeout=30, check=True,
    ).stdout.split()
    assert not [f for f in tracked if "_pb2" in f or "/_proto/" in f]
    ignored = subprocess.run(
        ["git", "-C", str(REPO), "check-ignore", "-q",
         "clients/python/src/chunkd_client/_proto/chunkd/v1/chunkd_pb2.py"],
        timeout=30,
    )
    assert ignored.returncode == 0


def test_public_api() -> None:
    for name in chunkd_client.__all__:
        assert hasattr(chunkd_client, name), name
