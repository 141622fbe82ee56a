"""The soak's data and what every answer about it must be.

The dataset is seeded: a few "projects", each a base file and versions of
it, every version the previous one with a few edits (bytes inserted,
deleted, overwritten), as successive backups of a changing tree are; so a
Dedup of version k+1 after version k finds most chunks known and follows
RapidCDC hints. `chunkctl chunk --local` (the in-process chunker, which the
server must match byte for byte) gives each file's chunks per parameter
set once, before the run; every Chunk and Dedup answer is compared with
them, and the index's reference counts with what they add up to.
"""

from __future__ import annotations

import json
import random
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Sequence, Tuple

#: (offset, length, fingerprint hex)
Chunk = Tuple[int, int, str]


@dataclass(frozen=True)
class ParamSet:
    """One way of cutting: a name, the CLI flags, and the Python keywords."""

    name: str
    flags: Tuple[str, ...]
    kwargs: Tuple[Tuple[str, object], ...]

    def params(self) -> Dict[str, object]:
        return dict(self.kwargs)


#: The parameter sets of Chunk calls. Dedup uses the first (fastcdc, the
#: defaults: RapidCDC hints on) and buzhash.
PARAM_SETS: Tuple[ParamSet, ...] = (
    ParamSet("fastcdc", ("--algorithm", "fastcdc"), (("algorithm", "fastcdc"),)),
    ParamSet("buzhash", ("--algorithm", "buzhash"), (("algorithm", "buzhash"),)),
    ParamSet("crc32-8k", ("--algorithm", "crc32", "--avg", "8192"),
             (("algorithm", "crc32"), ("avg_size", 8192))),
)
DEDUP_PARAM_SETS = ("fastcdc", "buzhash")


def param_set(name: str) -> ParamSet:
    return next(p for p in PARAM_SETS if p.name == name)


@dataclass(frozen=True)
class DataFile:
    name: str       # "p2-v1"
    project: int
    version: int
    path: Path


def _edit(rng: random.Random, data: bytearray, edits: int) -> bytearray:
    for _ in range(edits):
        at = rng.randrange(len(data))
        kind = rng.randrange(3)
        size = rng.randrange(1, 4096)
        if kind == 0:
            data[at:at] = rng.randbytes(size)
        elif kind == 1:
            del data[at:at + size]
        else:
            data[at:at + size] = rng.randbytes(len(data[at:at + size]))
    return data


def make_dataset(directory: Path, seed: int, projects: int, versions: int,
                 base_size: int) -> List[DataFile]:
    """Writes projects × versions files under `directory` (seeded)."""
    directory.mkdir(parents=True, exist_ok=True)
    rng = random.Random(seed)
    files = []
    for p in range(projects):
        size = base_size + rng.randrange(base_size)
        data = bytearray(rng.randbytes(size))
        # Some repetition inside a file too: a block copied further on.
        block = bytes(data[: size // 8])
        data[size // 2: size // 2] = block
        for v in range(versions):
            if v:
                data = _edit(rng, data, edits=4)
            path = directory / f"p{p}-v{v}.bin"
            path.write_bytes(bytes(data))
            files.append(DataFile(path.stem, p, v, path))
    return files


def local_chunks(chunkctl: Path, path: Path, params: ParamSet) -> List[Chunk]:
    """What the server must answer for `path`: chunkctl's in-process
    chunker, one `offset,length,hex` line per chunk."""
    out = subprocess.run([str(chunkctl), "chunk", "--local", *params.flags, str(path)],
                         check=True, capture_output=True, timeout=300).stdout.decode()
    chunks = []
    for line in out.splitlines():
        offset, length, fp = line.split(",")
        chunks.append((int(offset), int(length), fp))
    return chunks


class Expected:
    """Every file's chunks per parameter set, as a JSON file the workers
    load: {"files": {name: path}, "chunks": {params: {name: [[o, l, fp]]}}}."""

    def __init__(self, files: Dict[str, str], chunks: Dict[str, Dict[str, List[Chunk]]]):
        self.files = files
        self.chunks = chunks

    @staticmethod
    def compute(chunkctl: Path, files: Sequence[DataFile]) -> "Expected":
        chunks: Dict[str, Dict[str, List[Chunk]]] = {}
        for p in PARAM_SETS:
            chunks[p.name] = {f.name: local_chunks(chunkctl, f.path, p) for f in files}
        return Expected({f.name: str(f.path) for f in files}, chunks)

    def save(self, path: Path) -> None:
        path.write_text(json.dumps({"files": self.files, "chunks": self.chunks}))

    @staticmethod
    def load(path: Path) -> "Expected":
        doc = json.loads(path.read_text())
        chunks = {p: {f: [tuple(c) for c in cs] for f, cs in per.items()}
                  for p, per in doc["chunks"].items()}
        return Expected(doc["files"], chunks)

    def fingerprints(self, params: str, name: str) -> List[str]:
        return [fp for _, _, fp in self.chunks[params][name]]
