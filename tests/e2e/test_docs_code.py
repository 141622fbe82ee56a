"""The documents say what the code does.

- Every ```json example of command-line output in docs/ and the READMEs is
  read as the CLIs print it: `chunk`, `dedup` and `info` examples validate
  against docs/cli-output.schema.json, every example has exactly the keys
  the real chunkctl prints (run against a real chunkd started here, or
  without a server for `size`), and what an example shows of values that do
  not depend on the data or the machine (defaults, ranges, limits, the
  bytes per entry of `size`) is what chunkctl prints.
- Every flag in a flag table of docs/operations.md is one `chunkd --help`
  lists, with the default it lists, and every flag it lists is in the table
  of "Server flags".
- Every `chunkd_*` metric named in docs/, the READMEs, the Grafana
  dashboards and the alert rules is one a running chunkd exports or that
  server/metrics/ defines.
- Every repository path named in docs/ and the READMEs exists.

Each failure names the document, the line and what is wrong. In JSON
examples, a bare capital letter (`"bytes":N`) stands for a number and a hex
string ending in `...` for a whole digest.
"""

from __future__ import annotations

import glob
import itertools
import json
import re
import subprocess
from pathlib import Path
from typing import Callable, Dict, Iterable, List, Optional, Set, Tuple

import jsonschema
import pytest

from chunkd_client.testing import ChunkdServer

from e2e_util import REPO, SEKIEN, SUBPROCESS_TIMEOUT

SCHEMA = json.loads((REPO / "docs" / "cli-output.schema.json").read_text(encoding="utf-8"))
OPERATIONS = REPO / "docs" / "operations.md"


def documents() -> List[Path]:
    """The documents a reader of the repository meets."""
    docs = [REPO / "README.md", REPO / "CHANGELOG.md"]
    docs += sorted(REPO.glob("clients/*/README.md")) + sorted(REPO.glob("helm/*/README.md"))
    docs += sorted((REPO / "docs").rglob("*.md"))
    return [d for d in docs if d.is_file()]


def _where(doc: Path, line: int) -> str:
    return "%s:%d" % (doc.relative_to(REPO) if REPO in doc.parents else doc, line)


# ---------------------------------------------------------------- JSON examples

FENCE = re.compile(r"^\s*```json\s*$")
#: Stands for a number the example leaves open (`"bytes":N`).
PLACEHOLDER = 987654321
_LETTER = re.compile(r"([:\[,]\s*)([A-Z][A-Z0-9]?)(?=\s*[,}\]])")
_SHORT_HEX = re.compile(r'"([0-9a-f]+)\.\.\."')


def json_blocks(doc: Path) -> List[Tuple[int, str]]:
    """The ```json blocks of a document: (line of the fence, text)."""
    blocks, current, start = [], None, 0
    for number, line in enumerate(doc.read_text(encoding="utf-8").splitlines(), 1):
        if current is None and FENCE.match(line):
            current, start = [], number
        elif current is not None and line.strip().startswith("```"):
            blocks.append((start, "\n".join(current)))
            current = None
        elif current is not None:
            current.append(line)
    return blocks


def parse_example(text: str) -> List[object]:
    """The JSON values of an example, one after the other (JSON Lines, a
    pretty-printed object, or an object wrapped over several lines)."""
    text = _LETTER.sub(lambda m: m.group(1) + str(PLACEHOLDER), text)
    text = _SHORT_HEX.sub(lambda m: '"%s"' % m.group(1).ljust(64, "0"), text)
    decoder, values, at = json.JSONDecoder(), [], 0
    while True:
        while at < len(text) and text[at].isspace():
            at += 1
        if at == len(text):
            return values
        value, at = decoder.raw_decode(text, at)
        values.append(value)


def kind_of(value: object) -> Optional[str]:
    """Which command printed a JSON value, by its keys; None: not CLI output."""
    if not isinstance(value, dict):
        return None
    if "algorithms" in value or "max_message_bytes" in value:
        return "info"
    if "data_bytes" in value or "indexes" in value:
        return "size"
    if "unique_bytes" in value or "total" in value:
        return "dedup"
    if "offset" in value and "length" in value:
        return "chunk"
    return None


def _key_problems(what: str, shown: dict, printed: dict) -> List[str]:
    problems = []
    missing = sorted(set(printed) - set(shown))
    extra = sorted(set(shown) - set(printed))
    if missing:
        problems.append("%s lacks keys chunkctl prints: %s" % (what, ", ".join(missing)))
    if extra:
        problems.append("%s has keys chunkctl does not print: %s" % (what, ", ".join(extra)))
    return problems


def _value_problems(what: str, shown: dict, printed: dict, skip: Set[str]) -> List[str]:
    """Values the example gives (not placeholders) that chunkctl prints otherwise."""
    problems = []
    for key, value in shown.items():
        if key in skip or key not in printed or value == PLACEHOLDER:
            continue
        if isinstance(value, dict) and isinstance(printed[key], dict):
            problems += _value_problems("%s.%s" % (what, key), value, printed[key], set())
        elif value != printed[key]:
            problems.append("%s.%s is %s in the example, %s as chunkctl prints it" % (
                what, key, json.dumps(value), json.dumps(printed[key])))
    return problems


def _list_problems(what: str, shown: List[dict], printed: List[dict], key: str,
                   skip: Callable[[dict], Set[str]]) -> List[str]:
    """Each object of a list the example shows (algorithms, indexes) against
    the printed object of the same `key`; `skip` says which values to leave
    unchecked."""
    problems = []
    real = {item[key]: item for item in printed}
    for item in shown:
        name = item.get(key)
        if name not in real:
            problems.append("%s lists %s %r, which chunkctl does not print" % (what, key, name))
            continue
        where = "%s %s %s" % (what, key, name)
        problems += _key_problems(where, item, real[name])
        problems += _value_problems(where, item, real[name], skip(real[name]))
    return problems


#: Values of `info` that depend on the machine, not on the code.
MACHINE_DEPENDENT = {"backend", "backend_threads"}
#: Values of `size` that depend on its arguments.
SIZE_ARGUMENTS = {"indexes", "data_bytes", "avg_bytes", "entries",
                  "redis_master_memory_bytes", "hints"}


def info_problems(shown: dict, printed: dict) -> List[str]:
    return (_key_problems("info", shown, printed)
            + _value_problems("info", shown, printed, {"algorithms"})
            + _list_problems("info", shown.get("algorithms", []),
                             printed.get("algorithms", []), "name",
                             lambda _: MACHINE_DEPENDENT))


def size_problems(shown: dict, printed: dict) -> List[str]:
    return (_key_problems("size", shown, printed)
            + _value_problems("size", shown, printed, SIZE_ARGUMENTS)
            + _list_problems("size", shown.get("indexes", []), printed.get("indexes", []),
                             "index",
                             lambda real: set(real) - {"bytes_per_entry", "measured_at_entries"}))


def example_problems(doc: Path, printed: Dict[str, List[dict]]) -> Tuple[List[str], Set[str]]:
    """What is wrong with the CLI output examples of one document, and the
    kinds of output it shows. `printed` holds the real output per kind."""
    problems, kinds = [], set()
    for line, text in json_blocks(doc):
        try:
            values = parse_example(text)
        except ValueError as e:
            problems.append("%s: a json block that does not parse: %s" % (_where(doc, line), e))
            continue
        for value in values:
            kind = kind_of(value)
            if kind is None:
                continue
            kinds.add(kind)
            where = "%s: %s example" % (_where(doc, line), kind)
            if kind != "size":
                for error in jsonschema.Draft202012Validator(SCHEMA).iter_errors(value):
                    problems.append("%s: does not match docs/cli-output.schema.json: %s" % (
                        where, error.message[:200]))
            if kind == "info":
                found = info_problems(value, printed["info"][0])
            elif kind == "size":
                found = size_problems(value, printed["size"][0])
            elif kind == "dedup":
                real = printed["dedup"][1 if value.get("total") else 0]
                found = _key_problems("dedup line", value, real)
            else:
                found = _key_problems("chunk line", value, printed["chunk"][0])
            problems += ["%s: %s" % (where, p) for p in found]
    return problems, kinds


def _run(*args: object) -> str:
    result = subprocess.run([str(a) for a in args], capture_output=True, text=True,
                            stdin=subprocess.DEVNULL, timeout=SUBPROCESS_TIMEOUT)
    assert result.returncode == 0, "%s: %s" % (" ".join(map(str, args)), result.stderr)
    return result.stdout


def _json_lines(text: str) -> List[dict]:
    return [json.loads(line) for line in text.splitlines() if line.strip()]


@pytest.fixture(scope="module")
def printed(server: ChunkdServer, chunkctl_bin: Path) -> Dict[str, List[dict]]:
    """What chunkctl prints with --json, per command, from a chunkd with its
    default flags."""
    at = ("--server", server.address)
    out = {
        "chunk": _json_lines(_run(chunkctl_bin, "chunk", *at, "--json", SEKIEN))[:1],
        "dedup": _json_lines(_run(chunkctl_bin, "dedup", *at, "--json",
                                  "--namespace", "docs-examples", SEKIEN)),
        "info": [json.loads(_run(chunkctl_bin, "info", *at, "--json"))],
        "size": [json.loads(_run(chunkctl_bin, "size", "--data", "1PB", "--json"))],
    }
    for kind in ("chunk", "dedup", "info"):
        for value in out[kind]:
            jsonschema.validate(value, SCHEMA)
    return out


def test_cli_json_examples_are_what_the_clis_print(printed: Dict[str, List[dict]]) -> None:
    problems, kinds = [], set()
    for doc in documents():
        found, shown = example_problems(doc, printed)
        problems += found
        kinds |= shown
    assert problems == []
    # The examples are there to be checked: every kind of output is shown.
    assert kinds == {"chunk", "dedup", "info", "size"}


# ---------------------------------------------------------------- flags

_HELP_FLAG = re.compile(r"^\s{4}--([a-z0-9_]+) \(", re.M)
_HELP_DEFAULT = re.compile(r"default: (.*?);\s*$", re.S)
_CODE = re.compile(r"`([^`]+)`")


def help_flags(help_text: str) -> Dict[str, str]:
    """The flags `chunkd --help` lists, with their defaults as it prints them."""
    flags = {}
    starts = list(_HELP_FLAG.finditer(help_text))
    for here, after in zip(starts, starts[1:] + [None]):
        entry = help_text[here.start():after.start() if after else len(help_text)]
        found = _HELP_DEFAULT.search(entry)
        flags[here.group(1)] = found.group(1).strip().strip('"') if found else ""
    return flags


def flag_tables(doc: Path) -> Iterable[Tuple[int, str, List[str], str]]:
    """Rows of the tables whose first column is `flag` or `option`: (line, section,
    flags named in the first cell, the default cell or "")."""
    section, header = "", None
    for number, line in enumerate(doc.read_text(encoding="utf-8").splitlines(), 1):
        if line.startswith("#"):
            section = line.lstrip("#").strip()
        if not line.startswith("|"):
            header = None
            continue
        cells = [c.strip() for c in re.split(r"(?<!\\)\|", line.strip())[1:-1]]
        if header is None:
            header = cells
            continue
        if header[0] not in ("flag", "option") or set(line) <= set("|-: "):
            continue
        default = cells[header.index("default")] if "default" in header else ""
        names = [c[2:].split()[0] for c in _CODE.findall(cells[0]) if c.startswith("--")]
        yield number, section, names, default


def _normal(value: str) -> str:
    """A default as a comparable string: durations in seconds, no quotes."""
    value = value.strip().strip('"')
    m = re.fullmatch(r"(\d+(?:\.\d+)?)(s|m|h)", value)
    if m:
        seconds = float(m.group(1)) * {"s": 1, "m": 60, "h": 3600}[m.group(2)]
        return "%gs" % seconds
    m = re.fullmatch(r"(\d+) (KiB|MiB|GiB)", value)
    if m:
        return str(int(m.group(1)) << {"KiB": 10, "MiB": 20, "GiB": 30}[m.group(2)])
    return value


def flag_problems(doc: Path, flags: Dict[str, str], every_in: str) -> List[str]:
    """Flags of the tables that chunkd does not have or whose default differs;
    flags chunkd has that the table of section `every_in` lacks."""
    problems, listed = [], set()
    for line, section, names, default in flag_tables(doc):
        for name in names:
            if section == every_in:
                listed.add(name)
            if name not in flags:
                problems.append("%s: --%s is not a flag of chunkd (chunkd --help)" % (
                    _where(doc, line), name))
                continue
            # A default cell that opens with a value: that value is the default.
            shown = _CODE.match(default)
            if len(names) == 1 and shown and not shown.group(1).startswith("--") \
                    and flags[name] and _normal(shown.group(1)) != _normal(flags[name]):
                problems.append("%s: --%s's default is %s here, %s in chunkd --help" % (
                    _where(doc, line), name, shown.group(1), flags[name]))
    for name in sorted(set(flags) - listed):
        problems.append("%s: --%s (chunkd --help) is missing from the table of \"%s\"" % (
            doc.relative_to(REPO) if REPO in doc.parents else doc, name, every_in))
    return problems


def _chunkd_help(chunkd_bin: Path) -> str:
    result = subprocess.run([str(chunkd_bin), "--help"], capture_output=True, text=True,
                            stdin=subprocess.DEVNULL, timeout=SUBPROCESS_TIMEOUT)
    assert result.returncode == 0, result.stderr
    return result.stdout + result.stderr


def test_operations_flag_tables_are_chunkds_flags(chunkd_bin: Path) -> None:
    flags = help_flags(_chunkd_help(chunkd_bin))
    assert len(flags) >= 20, "chunkd --help lists too few flags to be read right"
    assert flag_problems(OPERATIONS, flags, "Server flags") == []


_CLI_FLAG = re.compile(r"^\s+(--[a-z][a-z0-9-]*)", re.M)
CLI_DOCS = [REPO / "docs" / "cli.md", REPO / "docs" / "clients.md"]


def chunkctl_flags(chunkctl_bin: Path) -> Set[str]:
    """Every flag chunkctl's help lists, over all its commands."""
    flags: Set[str] = set()
    for command in ([], ["chunk"], ["dedup"], ["estimate"], ["info"], ["size"], ["bench"],
                    ["index", "migrate"]):
        result = subprocess.run([str(chunkctl_bin), *command, "--help"], capture_output=True,
                                text=True, stdin=subprocess.DEVNULL, timeout=SUBPROCESS_TIMEOUT)
        assert result.returncode == 0, "chunkctl %s --help: %s" % (" ".join(command),
                                                                   result.stderr)
        flags |= {f[2:] for f in _CLI_FLAG.findall(result.stdout)}
    return flags


def cli_flag_problems(doc: Path, flags: Set[str]) -> List[str]:
    return ["%s: --%s is not a flag of chunkctl (chunkctl COMMAND --help)" % (
        _where(doc, line), name)
            for line, _, names, _ in flag_tables(doc) for name in names if name not in flags]


def test_cli_flag_tables_are_chunkctls_flags(chunkctl_bin: Path) -> None:
    flags = chunkctl_flags(chunkctl_bin)
    assert {"server", "json", "data", "bucket-bits"} <= flags
    assert [p for doc in CLI_DOCS for p in cli_flag_problems(doc, flags)] == []


# ---------------------------------------------------------------- metrics

_METRIC = re.compile(r"\bchunkd_[a-z0-9_]+")
#: Names of the form chunkd_* that are not metrics.
NOT_METRICS = {"chunkd_client",  # the Python package
               "chunkd_malloc",  # service_bench's --chunkd_malloc
               "chunkd_tables"}  # the CMake target of the generated tables
_SUFFIXES = ("_bucket", "_count", "_sum")


def metric_sources() -> List[Path]:
    """Documents, dashboards and alert rules that name metrics."""
    files = documents()
    for pattern in ("deploy/grafana/dashboards/*.json", "helm/*/dashboards/*.json",
                    "deploy/prometheus/*.yml", "helm/*/files/*.yml"):
        files += sorted(REPO.glob(pattern))
    return files


def defined_metrics() -> Set[str]:
    names = set()
    for source in sorted((REPO / "server" / "metrics").iterdir()):
        if source.suffix in (".h", ".cc"):
            names |= set(re.findall(r'"(chunkd_[a-z0-9_]+)"', source.read_text(encoding="utf-8")))
    return names


def exported_metrics(text: str) -> Set[str]:
    return {line.split("{")[0].split(" ")[0] for line in text.splitlines()
            if line.startswith("chunkd_")}


def metric_problems(files: Iterable[Path], known: Set[str]) -> List[str]:
    problems = []
    for path in files:
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            for name in _METRIC.findall(line):
                base = name
                for suffix in _SUFFIXES:
                    if name.endswith(suffix) and name[:-len(suffix)] in known:
                        base = name[:-len(suffix)]
                if name in NOT_METRICS or base in known:
                    continue
                problems.append("%s: %s is not a metric chunkd exports" % (
                    _where(path, number), name))
    return problems


def test_metric_names_are_chunkds(server: ChunkdServer) -> None:
    exported = exported_metrics(server.metrics())
    defined = defined_metrics()
    assert "chunkd_chunks_total" in exported and "chunkd_chunks_total" in defined
    # What a running chunkd exports is defined in server/metrics/.
    assert {n for n in exported if not n.endswith(_SUFFIXES)} <= defined
    assert metric_problems(metric_sources(), exported | defined) == []


# ---------------------------------------------------------------- paths

_PATH = re.compile(
    r"(?<![\w./@:-])((?:server|clients|tests|docs|deploy|helm|proto|tools)/[A-Za-z0-9_.{},*/+-]*)")


def _expand(path: str) -> List[str]:
    """`a.{h,cc}` -> a.h, a.cc."""
    m = re.search(r"\{([^{}]*)\}", path)
    if not m:
        return [path]
    return list(itertools.chain.from_iterable(
        _expand(path[:m.start()] + alt + path[m.end():]) for alt in m.group(1).split(",")))


def _exists(path: str, bases: List[Path]) -> bool:
    for base in bases:
        if "*" in path and glob.glob(str(base / path)):
            return True
        if "*" not in path and (base / path).exists():
            return True
    return False


def path_problems(doc: Path, root: Path = REPO) -> List[str]:
    """Repository paths a document names that do not exist. A README below
    the root may also name paths relative to its own folder."""
    bases = [root] if doc.parent == root or doc.parent == root / "docs" else [root, doc.parent]
    problems = []
    for number, line in enumerate(doc.read_text(encoding="utf-8").splitlines(), 1):
        for m in _PATH.finditer(line):
            for path in _expand(m.group(1).rstrip(".,;:)")):
                if not _exists(path, bases):
                    problems.append("%s: %s does not exist" % (_where(doc, number), path))
    return problems


@pytest.mark.parametrize("doc", documents(), ids=lambda p: str(p.relative_to(REPO)))
def test_paths_named_in_the_documents_exist(doc: Path) -> None:
    assert path_problems(doc) == []


# ---------------------------------------------------------------- the checkers

def test_the_checkers_find_planted_errors(tmp_path: Path) -> None:
    """Each checker fails on a document with one planted error of its kind."""
    doc = tmp_path / "doc.md"
    doc.write_text(
        "# Doc\n\n## Server flags\n\n| flag | default | meaning |\n|---|---|---|\n"
        "| `--listen` | `127.0.0.1:1` | x |\n| `--no_such_flag` | – | x |\n"
        "| `--stream_idle_timeout` | `60s` | x |\n\n"
        "See `server/no/such_file.h` and `server/metrics/metrics.{h,zz}`; "
        "`chunkd_no_such_metric` and `chunkd_chunks_total` and `chunkd_client`.\n\n"
        "```json\n{\"offset\":0,\"length\":N,\"fingerprint\":\"9f86d0...\",\"extra\":1}\n```\n"
        "```json\n{\"version\":\"0\",\"max_message_bytes\":4194304,\"algorithms\":"
        "[{\"name\":\"fastcdc\",\"min_size\":{\"min\":64,\"max\":1,\"default\":2048}}]}\n```\n",
        encoding="utf-8")
    flags = {"listen": "127.0.0.1:50051", "stream_idle_timeout": "1m", "threads": "0"}
    assert [p.split(": ", 1)[1] for p in flag_problems(doc, flags, "Server flags")] == [
        "--listen's default is 127.0.0.1:1 here, 127.0.0.1:50051 in chunkd --help",
        "--no_such_flag is not a flag of chunkd (chunkd --help)",
        "--threads (chunkd --help) is missing from the table of \"Server flags\"",
    ]
    assert [p.split(": ", 1)[1] for p in cli_flag_problems(doc, {"listen", "threads"})] == [
        "--no_such_flag is not a flag of chunkctl (chunkctl COMMAND --help)",
        "--stream_idle_timeout is not a flag of chunkctl (chunkctl COMMAND --help)",
    ]
    assert [p.split(": ", 1)[1] for p in path_problems(doc, tmp_path)] == [
        "server/no/such_file.h does not exist",
        "server/metrics/metrics.h does not exist",
        "server/metrics/metrics.zz does not exist",
    ]
    assert path_problems(doc, REPO) and all("metrics.h" not in p
                                            for p in path_problems(doc, REPO))
    assert [p.split(": ", 1)[1] for p in metric_problems([doc], {"chunkd_chunks_total"})] == [
        "chunkd_no_such_metric is not a metric chunkd exports"]
    printed = {
        "chunk": [{"offset": 0, "length": 5, "fingerprint": "ab" * 32}],
        "info": [{"version": "0", "max_message_bytes": 4194304, "algorithms": [
            {"name": "fastcdc", "min_size": {"min": 64, "max": 1, "default": 4096}}]}],
    }
    problems, kinds = example_problems(doc, printed)
    assert kinds == {"chunk", "info"}
    assert any("chunk line has keys chunkctl does not print: extra" in p for p in problems)
    assert any("does not match docs/cli-output.schema.json" in p for p in problems)
    assert any("info name fastcdc.min_size.default is 2048 in the example, 4096"
               in p for p in problems)
