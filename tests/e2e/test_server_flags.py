"""chunkd describes itself: --help lists every flag the server defines with
its default and exits 0, --helpfull adds Abseil's flags, --version prints
"chunkd VERSION" (the repository's VERSION file) and exits 0."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import Dict, List

from e2e_util import REPO, SUBPROCESS_TIMEOUT

#: ABSL_FLAG(type, name, default, "help...
_FLAG = re.compile(r"ABSL_FLAG\(\s*([\w:]+)\s*,\s*(\w+)\s*,\s*([^,]+?)\s*,\s*\"")
#: One flag of Abseil's help output, its lines joined: --name (help); default: D;
_HELP_ENTRY = re.compile(r"--(\w+) \((.*)\); default: (.*);")


def duration(seconds: int) -> str:
    """absl::FormatDuration of whole seconds: 90 -> 1m30s."""
    parts = [(seconds // 3600, "h"), (seconds % 3600 // 60, "m"), (seconds % 60, "s")]
    return "".join(f"{n}{unit}" for n, unit in parts if n) or "0"


def printed_default(kind: str, default: str) -> str:
    """How Abseil prints the default of a flag declared with this C++
    default expression (the forms server/ uses; extend for new ones)."""
    if kind == "std::string":
        assert re.fullmatch(r'"[^"\\]*"', default), default
        return default
    if kind == "absl::Duration":
        m = re.fullmatch(r"absl::(Seconds|Minutes|Hours)\((\d+)\)", default)
        assert m, f"a new form of duration default: {default}"
        scale = {"Seconds": 1, "Minutes": 60, "Hours": 3600}[m.group(1)]
        return duration(int(m.group(2)) * scale)
    if kind == "bool":
        assert default in ("true", "false"), default
        return default
    m = re.fullmatch(r"(?:\w+\{)?(-?\d+)\}?(?: << (\d+))?", default)
    assert m, f"a new form of integer default: {default}"
    return str(int(m.group(1)) << int(m.group(2) or 0))


def server_flags() -> Dict[str, str]:
    """name -> printed default of every flag defined in chunkd's sources
    (server/, without the benchmarks and tests, which chunkd does not link)."""
    flags: Dict[str, str] = {}
    for source in sorted((REPO / "server").rglob("*.cc")):
        relative = source.relative_to(REPO / "server")
        if relative.parts[0] == "bench" or source.name.endswith("_test.cc"):
            continue
        text = source.read_text()
        for m in _FLAG.finditer(text):
            assert m.group(2) not in flags, f"--{m.group(2)} defined twice"
            flags[m.group(2)] = printed_default(m.group(1), m.group(3))
    assert "listen" in flags and len(flags) >= 20, sorted(flags)
    return flags


def chunkd(chunkd_bin: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(chunkd_bin), *args], capture_output=True, text=True,
                          timeout=SUBPROCESS_TIMEOUT, stdin=subprocess.DEVNULL)


def help_entries(text: str) -> Dict[str, str]:
    """name -> default of every flag in Abseil's help output, where a flag's
    entry starts with "    --" and goes on in lines indented further."""
    blocks: List[str] = []
    for line in text.splitlines():
        if line.startswith("    --"):
            blocks.append(line.strip())
        elif line.startswith("      ") and blocks:
            blocks[-1] += " " + line.strip()
    entries: Dict[str, str] = {}
    for block in blocks:
        m = _HELP_ENTRY.fullmatch(block)
        assert m, f"not a flag's help: {block!r}"
        assert m.group(1) not in entries, f"--{m.group(1)} listed twice"
        entries[m.group(1)] = m.group(3)
    return entries


def test_help_lists_every_flag_with_its_default(chunkd_bin: Path) -> None:
    result = chunkd(chunkd_bin, "--help")
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    assert result.stdout.startswith("chunkd: content-defined chunking")
    assert "No flags matched" not in result.stdout
    # Exactly chunkd's flags, each with the default its source declares.
    assert help_entries(result.stdout) == server_flags()
    assert "Flags from server/main.cc:" in result.stdout


def test_helpfull_adds_abseils_flags(chunkd_bin: Path) -> None:
    result = chunkd(chunkd_bin, "--helpfull")
    assert result.returncode == 0, result.stderr
    entries = help_entries(result.stdout)
    assert {k: v for k, v in entries.items() if k in server_flags()} == server_flags()
    assert {"flagfile", "fromenv", "tryfromenv", "undefok"} <= set(entries)


def test_help_matching_a_substring(chunkd_bin: Path) -> None:
    result = chunkd(chunkd_bin, "--help=redis")
    assert result.returncode == 0, result.stderr
    names = set(help_entries(result.stdout))
    assert {"redis_pool_size", "redis_connect_timeout", "index"} <= names
    assert "threads" not in names


def test_version(chunkd_bin: Path) -> None:
    result = chunkd(chunkd_bin, "--version")
    assert result.returncode == 0, result.stderr
    lines: List[str] = result.stdout.splitlines()
    assert lines[0] == f"chunkd {(REPO / 'VERSION').read_text().strip()}"
    # The second line says how it was built.
    assert len(lines) == 2 and " build with " in lines[1] and "gRPC 1." in lines[1]


def test_an_unknown_flag_is_still_an_error(chunkd_bin: Path) -> None:
    result = chunkd(chunkd_bin, "--no_such_flag=1")
    assert result.returncode != 0
    assert "no_such_flag" in result.stderr
