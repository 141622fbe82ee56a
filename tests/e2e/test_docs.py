"""The documentation holds together: every relative link and #anchor in
README.md, CHANGELOG.md and docs/ (subfolders too) resolves, the README stays
a page, and docs/benchmarks.md is exactly what docs/assemble_benchmarks.py
(behind `make bench`) writes from its template, the assembler replacing
exactly the benchmark blocks it has new results for.

Anchors are GitHub's: a heading's rendered text, lower-cased, stripped of
everything but letters, digits, `_`, `-` and spaces, spaces turned into `-`;
a repeated heading gets `-1`, `-2`, ... Explicit `<a id="...">` or
`<a name="...">` anchors count too. Links to other sites are not fetched.
Needs nothing beyond pytest and the standard library.
"""

from __future__ import annotations

import importlib.util
import os
import re
import time
from pathlib import Path
from typing import Dict, List, Set, Tuple
from urllib.parse import unquote

import pytest

REPO = Path(__file__).resolve().parents[2]
DOCS = [REPO / "README.md", REPO / "CHANGELOG.md"] + sorted((REPO / "docs").rglob("*.md"))

FENCE = re.compile(r"^\s{0,3}(`{3,}|~{3,})")
HEADING = re.compile(r"^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
CODE_SPAN = re.compile(r"(`+)(.+?)\1", re.S)
INLINE_LINK = re.compile(r"!?\[((?:[^\[\]]|\[[^\]]*\])*)\]\(\s*<?([^)\s>]*)>?(?:\s+\"[^\"]*\")?\s*\)")
REFERENCE_DEF = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+\"[^\"]*\")?\s*$")
HTML_ANCHOR = re.compile(r"<a\s+(?:id|name)=\"([^\"]+)\"", re.I)
EXTERNAL = re.compile(r"^[a-z][a-z0-9+.-]*:", re.I)  # http:, https:, mailto:, ...


def _prose_lines(text: str) -> List[Tuple[int, str]]:
    """The lines outside fenced code blocks, with their numbers."""
    out = []
    fence = None
    for number, line in enumerate(text.splitlines(), 1):
        m = FENCE.match(line)
        if fence is None and m:
            fence = m.group(1)
            continue
        if fence is not None:
            if m and m.group(1)[0] == fence[0] and len(m.group(1)) >= len(fence):
                fence = None
            continue
        out.append((number, line))
    return out


def _render(text: str) -> str:
    """A heading's text as GitHub renders it (what its anchor is made of)."""
    pieces = []
    last = 0
    for m in CODE_SPAN.finditer(text):
        pieces.append(("text", text[last:m.start()]))
        pieces.append(("code", m.group(2).strip()))
        last = m.end()
    pieces.append(("text", text[last:]))
    out = []
    for kind, piece in pieces:
        if kind == "text":
            piece = INLINE_LINK.sub(lambda m: m.group(1), piece)
            piece = re.sub(r"<[^>]+>", "", piece)
            piece = piece.replace("*", "")
            piece = re.sub(r"(?<![\w])_+|_+(?![\w])", "", piece)
        out.append(piece)
    return "".join(out)


def slug(heading: str) -> str:
    text = _render(heading).strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path: Path) -> Set[str]:
    found: Set[str] = set()
    counts: Dict[str, int] = {}
    text = path.read_text(encoding="utf-8")
    for _, line in _prose_lines(text):
        m = HEADING.match(line)
        if m:
            base = slug(m.group(2))
            n = counts.get(base, 0)
            counts[base] = n + 1
            found.add(base if n == 0 else "%s-%d" % (base, n))
        found.update(HTML_ANCHOR.findall(line))
    return found


def links(path: Path) -> List[Tuple[int, str]]:
    out = []
    for number, line in _prose_lines(path.read_text(encoding="utf-8")):
        prose = CODE_SPAN.sub("", line)
        out += [(number, m.group(2)) for m in INLINE_LINK.finditer(prose)]
        m = REFERENCE_DEF.match(prose)
        if m:
            out.append((number, m.group(1)))
    return out


def broken_links(path: Path, root: Path = REPO) -> List[str]:
    """What is wrong with each link of `path` that does not resolve inside
    `root`, as "FILE:LINE: TARGET (why)"."""
    problems = []
    for number, target in links(path):
        where = "%s:%d: %s" % (path.relative_to(root), number, target)
        if not target:
            problems.append(where + " (empty link)")
            continue
        if EXTERNAL.match(target):
            continue
        file_part, _, anchor = target.partition("#")
        dest = path if not file_part else (path.parent / unquote(file_part)).resolve()
        if root not in dest.parents and dest != root:
            problems.append(where + " (leaves the repository)")
            continue
        if not dest.exists():
            problems.append(where + " (no such file)")
            continue
        if anchor:
            if dest.suffix != ".md" or dest.is_dir():
                problems.append(where + " (an anchor into a file that is not markdown)")
            elif unquote(anchor) not in anchors(dest):
                problems.append(where + " (no such anchor in %s)" % dest.relative_to(root))
    return problems


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(REPO)))
def test_every_link_and_anchor_resolves(doc: Path) -> None:
    assert broken_links(doc) == []


def test_the_documents_are_the_expected_ones() -> None:
    names = {str(p.relative_to(REPO)) for p in DOCS}
    assert {"README.md", "docs/design.md", "docs/operations.md",
            "docs/clients.md", "docs/benchmarks.md", "docs/development.md",
            "docs/compatibility.md"} <= names


def test_anchors_are_githubs() -> None:
    assert slug("Running chunkd exposed") == "running-chunkd-exposed"
    assert slug("HTTP/2 rapid reset") == "http2-rapid-reset"
    assert slug("Memory and the chart's resources") == "memory-and-the-charts-resources"
    assert slug("The console script `chunkd-client`") == "the-console-script-chunkd-client"
    assert slug("What `make test` checks here") == "what-make-test-checks-here"
    assert slug("Why FF+RWT+FPT is exact") == "why-ffrwtfpt-is-exact"
    assert slug("Compose: chunkd, Redis, Prometheus, Grafana") == \
        "compose-chunkd-redis-prometheus-grafana"
    assert slug("`--max_streams` and *friends*") == "--max_streams-and-friends"
    assert slug("Throughput — `random`") == "throughput--random"


def test_the_checker_finds_broken_links(tmp_path: Path) -> None:
    root = tmp_path.resolve()
    (root / "docs").mkdir()
    (root / "docs" / "a.md").write_text(
        "# A\n\n## Same\n\n## Same\n\n"
        "[ok](#same-1) [ok](b.md#b-title) [bad](#same-2) [bad](b.md#nope)\n"
        "[bad](missing.md) [out](../../elsewhere.md) [web](https://example.com/#x)\n"
        "`[not a link](nowhere.md)`\n\n```\n[not a link](nowhere.md)\n```\n",
        encoding="utf-8")
    (root / "docs" / "b.md").write_text("# B title\n", encoding="utf-8")
    problems = broken_links(root / "docs" / "a.md", root)
    assert [p.split(": ", 1)[1] for p in problems] == [
        "#same-2 (no such anchor in docs/a.md)",
        "b.md#nope (no such anchor in docs/b.md)",
        "missing.md (no such file)",
        "../../elsewhere.md (leaves the repository)",
    ]


def test_the_readme_is_a_page_without_benchmark_tables() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(readme) <= 300
    assert [l for l in readme if l.startswith("|") and "GB/s" in l] == []


def _assembler():
    spec = importlib.util.spec_from_file_location(
        "assemble_benchmarks", REPO / "docs" / "assemble_benchmarks.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _run_assembler(assembler, bench: Path, doc: Path, *extra: str) -> int:
    return assembler.main(["--bench-dir", str(bench), "--doc", str(doc),
                           "--template", str(REPO / "docs" / "benchmarks.md.in"),
                           *extra])


def test_the_committed_report_is_what_the_assembler_writes(tmp_path: Path) -> None:
    """With no new results, assembling gives docs/benchmarks.md byte for byte:
    the guide text is the template's, every block the last measured one."""
    assembler = _assembler()
    committed = (REPO / "docs" / "benchmarks.md").read_text(encoding="utf-8")
    doc = tmp_path / "benchmarks.md"
    doc.write_text(committed, encoding="utf-8")
    empty = tmp_path / "bench"
    empty.mkdir()
    assert _run_assembler(assembler, empty, doc, "--check") == 0
    assert _run_assembler(assembler, empty, doc) == 0
    assert doc.read_text(encoding="utf-8") == committed

    # A hand edit outside the blocks is not what the assembler writes.
    doc.write_text(committed.replace("## How we measure", "## How we measured", 1),
                   encoding="utf-8")
    assert _run_assembler(assembler, empty, doc, "--check") == 1
    assert _run_assembler(assembler, empty, doc) == 0
    assert doc.read_text(encoding="utf-8") == committed


def test_the_report_is_a_report_not_a_diary() -> None:
    text = (REPO / "docs" / "benchmarks.md").read_text(encoding="utf-8")
    # Dates only in the markers and the header line that says when the
    # file was last assembled.
    prose = re.sub(r"<!-- bench:header begin.*?<!-- bench:header end -->", "", text,
                   flags=re.S)
    prose = re.sub(r"<!-- bench:[a-z0-9-]+ begin[^>]*-->", "", prose)
    assert len(text.splitlines()) <= 500
    assert "load average" not in prose
    assert re.findall(r"\b20\d\d-\d\d-\d\d\b", prose) == []
    assert "without gain" not in prose


def test_make_bench_replaces_only_the_sections_it_ran(tmp_path: Path) -> None:
    assembler = _assembler()
    doc = tmp_path / "benchmarks.md"
    original = (REPO / "docs" / "benchmarks.md").read_text(encoding="utf-8")
    doc.write_text(original, encoding="utf-8")
    bench = tmp_path / "bench"
    bench.mkdir()
    (bench / "service.md").write_text(
        "End-to-end over loopback gRPC\n\n| rpc | GB/s |\n|---|---|\n| sink | 9.99 |\n",
        encoding="utf-8")
    (bench / "results.md").write_text(
        "# chunkd chunking benchmarks\n\n## Throughput\n\n| a |\n|---|\n| 1 |\n",
        encoding="utf-8")
    (bench / "sha256.txt").write_text("stale\n", encoding="utf-8")
    old = time.mktime((2020, 1, 1, 0, 0, 0, 0, 0, -1))
    os.utime(bench / "sha256.txt", (old, old))  # older than the table it would replace

    assert _run_assembler(assembler, bench, doc) == 0
    text = doc.read_text(encoding="utf-8")
    blocks = {m.group("name"): m.group(0) for m in assembler.BLOCK.finditer(text)}
    assert "| sink | 9.99 |" in blocks["service"]
    assert "Generated by `make bench-service`" in blocks["service"]
    assert "### chunkd chunking benchmarks" in blocks["chunking"]
    assert "#### Throughput" in blocks["chunking"]
    assert "stale" not in text
    for name, block in {m.group("name"): m.group(0)
                        for m in assembler.BLOCK.finditer(original)}.items():
        if name not in ("service", "chunking", "header"):
            assert blocks[name] == block
    assert "new then: chunking, service." in blocks["header"]
    # Text outside the markers is kept as it was.
    strip = lambda t: assembler.BLOCK.sub("", t)
    assert strip(text) == strip(original)

    # Nothing newer: the file is left as it is.
    before = doc.stat().st_mtime_ns
    assert _run_assembler(assembler, bench, doc) == 0
    assert doc.read_text(encoding="utf-8") == text
    assert doc.stat().st_mtime_ns == before


def test_the_assembler_names_a_block_it_has_no_results_for(tmp_path: Path) -> None:
    assembler = _assembler()
    original = (REPO / "docs" / "benchmarks.md").read_text(encoding="utf-8")
    doc = tmp_path / "benchmarks.md"
    doc.write_text(assembler.BLOCK.sub(
        lambda m: "" if m.group("name") == "rapid" else m.group(0), original),
        encoding="utf-8")
    with pytest.raises(ValueError, match=r"no results for bench:rapid: run `make bench-rapid`"):
        assembler.assemble((REPO / "docs" / "benchmarks.md.in").read_text(encoding="utf-8"),
                           doc.read_text(encoding="utf-8"), tmp_path / "none",
                           None, "here")


def test_no_document_leans_on_files_outside_the_repository() -> None:
    """The documents stand on their own: none refers to the specification or
    the style guide the project started from, which are not in it."""
    readmes = sorted(REPO.glob("clients/*/README.md")) + sorted(REPO.glob("helm/*/README.md"))
    found = ["%s:%d" % (doc.relative_to(REPO), number)
             for doc in DOCS + readmes
             for number, line in enumerate(doc.read_text(encoding="utf-8").splitlines(), 1)
             if "DESIGN.md" in line or "STYLE.md" in line]
    assert found == []
