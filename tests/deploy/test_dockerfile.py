"""deploy/Dockerfile, checked without a Docker engine: the package lists
against the Makefile and Debian bookworm, the CMake configuration the build
stage runs, the shared libraries the binaries load, the non-root user, the
build context, the HEALTHCHECK command against a real chunkd, and the OCI
labels (version == the VERSION file, license Apache-2.0)."""

from __future__ import annotations

import fnmatch
import json
import re
import shlex
import subprocess
from pathlib import Path

import pytest

from conftest import BUILD, DEPLOY, REPO, Process, free_port, run

DOCKERFILE = DEPLOY / "Dockerfile"

# Makefile packages the image does not build with: tests, benchmarks and
# the developer's tools.
TEST_ONLY = {"git", "libgtest-dev", "libgmock-dev", "libbenchmark-dev", "redis-server",
             "prometheus", "python3", "python3-venv", "python3-pip", "openssl"}
# In every debian:bookworm-slim image already.
BASE_IMAGE = {"libc6", "libgcc-s1", "libstdc++6", "zlib1g"}
BUILD_TOOLS = re.compile(r"(-dev$|^build-essential$|^cmake$|^ninja-build$|^pkg-config$|^gcc|^g\+\+"
                         r"|^cpp|^golang|^protobuf-compiler)")


def stages() -> list[dict]:
    """The Dockerfile's stages: base image, name, joined instructions."""
    text = DOCKERFILE.read_text().replace("\\\n", " ")
    result: list[dict] = []
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        instruction, _, rest = line.partition(" ")
        if instruction.upper() == "FROM":
            parts = rest.split()
            result.append({"from": parts[0], "name": parts[2] if len(parts) > 2 else None,
                           "lines": []})
        elif result:
            result[-1]["lines"].append((instruction.upper(), rest.strip()))
    return result


def stage(name: str | None) -> dict:
    found = [s for s in stages() if s["name"] == name]
    assert len(found) == 1, f"one stage named {name}"
    return found[0]


def apt_packages(s: dict) -> list[str]:
    packages: list[str] = []
    for instruction, rest in s["lines"]:
        if instruction != "RUN":
            continue
        for m in re.finditer(r"apt-get install ([^&;]*)", rest):
            packages += [w for w in m.group(1).split() if not w.startswith("-")]
    return packages


def makefile_packages() -> set[str]:
    text = (REPO / "Makefile").read_text().replace("\\\n", " ")
    m = re.search(r"^APT_PACKAGES\s*:=(.*)$", text, re.M)
    assert m, "APT_PACKAGES in the Makefile"
    return set(m.group(1).split())


def runtime() -> dict:
    return stages()[-1]


def test_stages_are_bookworm() -> None:
    names = [(s["from"], s["name"]) for s in stages()]
    assert names == [("golang:1.25-bookworm", "probe"), ("debian:bookworm", "build"),
                     ("debian:bookworm-slim", None)]


def test_build_stage_uses_the_makefile_packages() -> None:
    build = apt_packages(stage("build"))
    assert len(build) == len(set(build)), "a package listed twice"
    make = makefile_packages()
    assert TEST_ONLY <= make, f"not in the Makefile any more: {TEST_ONLY - make}"
    assert set(build) == make - TEST_ONLY


def test_runtime_stage_has_no_build_tools() -> None:
    packages = apt_packages(runtime())
    assert packages
    assert [p for p in packages if BUILD_TOOLS.search(p)] == []
    copies = [rest for instruction, rest in runtime()["lines"] if instruction == "COPY"]
    assert all(c.startswith("--from=") for c in copies), "only built binaries are copied in"


def test_packages_exist_in_bookworm() -> None:
    os_release = Path("/etc/os-release").read_text()
    if "VERSION_CODENAME=bookworm" not in os_release:
        pytest.skip("apt here is not Debian bookworm's")
    packages = apt_packages(stage("build")) + apt_packages(runtime())
    result = run(["apt-cache", "show", "--no-all-versions", *packages], check=False)
    found = set(re.findall(r"^Package: (\S+)$", result.stdout, re.M))
    assert set(packages) - found == set(), "not Debian bookworm packages"


def owners(paths: list[str]) -> dict[str, str]:
    """The Debian package owning each file (one dpkg -S for all), trying
    both sides of usrmerge."""
    candidates: dict[str, str] = {}
    for path in paths:
        for c in {path, str(Path(path).resolve())}:
            candidates[c] = path
            if c.startswith("/usr/lib/"):
                candidates[c.removeprefix("/usr")] = path
            elif c.startswith("/lib/"):
                candidates["/usr" + c] = path
    result = run(["dpkg", "-S", *sorted(candidates)], check=False)
    found: dict[str, str] = {}
    for line in result.stdout.splitlines():
        package, _, file = line.partition(": ")
        if file in candidates:
            found[candidates[file]] = package.split(":")[0]
    missing = [p for p in paths if p not in found]
    assert not missing, f"no Debian package owns {missing}"
    return found


def test_runtime_libraries_are_exactly_what_the_binaries_load() -> None:
    binaries = [BUILD / "server" / "chunkd", BUILD / "clients" / "cli" / "chunkctl"]
    for b in binaries:
        if not b.is_file():
            pytest.fail(f"{b} is missing: make build", pytrace=False)
    libraries: set[str] = set()
    for b in binaries:
        output = run(["ldd", b]).stdout
        assert "not found" not in output
        libraries |= {m.group(1) for m in re.finditer(r"=> (/\S+)", output)}
    needed = set(owners(sorted(libraries)).values()) - BASE_IMAGE
    installed = set(apt_packages(runtime())) - {"ca-certificates"}
    assert needed - installed == set(), "libraries the image would lack"
    assert installed - needed == set(), "packages the binaries do not load"


def cmake_options(s: dict) -> list[str]:
    for instruction, rest in s["lines"]:
        if instruction == "RUN" and "cmake -S" in rest:
            words = shlex.split(rest.split("&&")[0])
            return [w for w in words if w.startswith("-D") or w.startswith("-G") or w == "Ninja"]
    pytest.fail("no cmake configure in the build stage", pytrace=False)


def test_cmake_configures_with_only_the_build_packages(tmp_path: Path) -> None:
    """Configures as the build stage does; every CMake package it finds must
    come from the build stage's packages or their dependencies (a
    find_package of a test-only package, e.g. Google Benchmark, would break
    the image build)."""
    options = cmake_options(stage("build"))
    assert "-DCHUNKD_BUILD_TESTS=OFF" in options
    run(["cmake", "-S", REPO, "-B", tmp_path, *options], timeout=300)
    cache = (tmp_path / "CMakeCache.txt").read_text()
    # <Package>_DIR entries: where find_package found a CMake package config.
    found = {m.group(1): m.group(2) for m in
             re.finditer(r"^([\w-]+)_DIR:PATH=(/\S+)$", cache, re.M)
             if next(Path(m.group(2)).glob("*onfig.cmake"), None) is not None}
    assert "absl" in found and "gRPC" in found
    packages = apt_packages(stage("build"))
    closure = run(["apt-cache", "depends", "--recurse", "--no-recommends", "--no-suggests",
                   "--no-conflicts", "--no-breaks", "--no-replaces", "--no-enhances",
                   *packages]).stdout
    allowed = {line.strip() for line in closure.splitlines() if not line.startswith(" ")}
    for name, directory in sorted(found.items()):
        config = str(next(Path(directory).glob("*onfig.cmake")))
        owner = owners([config])[config]
        assert owner in allowed, f"{name} ({directory}) comes from {owner}, not a build package"


def test_non_root_user_matches_the_chart() -> None:
    import yaml

    user = [rest for instruction, rest in runtime()["lines"] if instruction == "USER"]
    assert user == ["10001:10001"]
    run_lines = " ".join(rest for instruction, rest in runtime()["lines"] if instruction == "RUN")
    assert "--uid 10001" in run_lines and "--gid 10001" in run_lines
    values = yaml.safe_load((REPO / "helm" / "chunkd" / "values.yaml").read_text())
    assert values["podSecurityContext"]["runAsUser"] == 10001
    assert values["podSecurityContext"]["runAsGroup"] == 10001


def dockerignored(path: str, patterns: list[str]) -> bool:
    """Docker's rule: the last pattern matching the path or a parent wins."""
    parts = path.split("/")
    excluded = False
    for pattern in patterns:
        negate = pattern.startswith("!")
        p = pattern.lstrip("!").strip("/")
        if any(fnmatch.fnmatch("/".join(parts[:i]), p) for i in range(1, len(parts) + 1)):
            excluded = not negate
    return excluded


def test_build_context_holds_what_copy_needs() -> None:
    patterns = [line.strip() for line in (REPO / ".dockerignore").read_text().splitlines()
                if line.strip() and not line.startswith("#")]
    sources: list[str] = []
    for s in stages():
        for instruction, rest in s["lines"]:
            if instruction == "COPY" and not rest.startswith("--from="):
                sources += rest.split()[:-1]
    assert sources
    tracked = run(["git", "-C", REPO, "ls-files"]).stdout.split()
    for source in sources:
        path = REPO / source
        assert path.exists(), source
        assert not dockerignored(source, patterns), f".dockerignore excludes {source}"
        files = [f for f in tracked if f == source or f.startswith(source.rstrip("/") + "/")]
        assert files, f"{source} holds no tracked file"
        assert not [f for f in files if dockerignored(f, patterns)], source
    # And the rest stays out: tests, clients other than the CLI, build output.
    for outside in ("tests/e2e/conftest.py", "clients/python/pyproject.toml", "build/x", ".git/x"):
        assert dockerignored(outside, patterns), outside


def healthcheck() -> list[str]:
    lines = [rest for instruction, rest in runtime()["lines"] if instruction == "HEALTHCHECK"]
    assert len(lines) == 1
    return json.loads(lines[0].split(" CMD ", 1)[1])


def entrypoint() -> list[str]:
    lines = [rest for instruction, rest in runtime()["lines"] if instruction == "ENTRYPOINT"]
    assert len(lines) == 1
    return json.loads(lines[0])


def test_probe_binary_is_copied_where_healthcheck_runs_it() -> None:
    command = healthcheck()
    copies = [rest for instruction, rest in runtime()["lines"]
              if instruction == "COPY" and rest.startswith("--from=probe")]
    assert copies == [f"--from=probe /out/{command[0]} /usr/local/bin/{command[0]}"]
    probe = [rest for instruction, rest in stage("probe")["lines"] if instruction == "RUN"]
    assert f"-o /out/{command[0]}" in probe[0]


def test_healthcheck_against_a_real_chunkd(chunkd_bin: Path, health_probe_bin: Path,
                                           processes: list, tmp_path: Path) -> None:
    """Runs the image's ENTRYPOINT flags and HEALTHCHECK command (ports moved
    to free loopback ones): SERVING while chunkd runs, a failure once it
    has stopped."""
    port, metrics = free_port(), free_port()
    flags = [f.replace("0.0.0.0:50051", f"127.0.0.1:{port}").replace("0.0.0.0:9464",
                                                                       f"127.0.0.1:{metrics}")
             for f in entrypoint()[1:]]
    assert entrypoint()[0] == "chunkd" and len(flags) == 2
    server = Process([chunkd_bin, *flags], tmp_path / "chunkd.log")
    processes.append(server)
    server.wait_for_port(port)
    command = [health_probe_bin if c == "grpc_health_probe" else
               c.replace("127.0.0.1:50051", f"127.0.0.1:{port}") for c in healthcheck()]
    result = run(command, check=False, timeout=30)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SERVING" in result.stdout + result.stderr
    server.stop()
    result = run(command, check=False, timeout=30)
    assert result.returncode != 0


def test_probe_pin_is_complete() -> None:
    go_mod = (DEPLOY / "probe" / "go.mod").read_text()
    assert re.search(r"^require github.com/grpc-ecosystem/grpc-health-probe v\d+\.\d+\.\d+$",
                     go_mod, re.M)
    go_sum = (DEPLOY / "probe" / "go.sum").read_text()
    assert re.search(r"^github.com/grpc-ecosystem/grpc-health-probe v\S+ h1:", go_sum, re.M)



def args(s: dict) -> dict:
    """The ARG defaults of a stage."""
    found = {}
    for instruction, rest in s["lines"]:
        if instruction == "ARG":
            name, _, default = rest.partition("=")
            found[name] = default
    return found


def labels(s: dict) -> dict:
    """The LABELs of a stage, with the stage's ARG defaults substituted."""
    defaults = args(s)
    found = {}
    for instruction, rest in s["lines"]:
        if instruction == "LABEL":
            for pair in shlex.split(rest):
                key, _, value = pair.partition("=")
                found[key] = re.sub(r"\$\{(\w+)\}", lambda m: defaults[m.group(1)], value)
    return found


def version_file() -> str:
    return (REPO / "VERSION").read_text().strip()


def test_oci_labels_name_the_version_and_license() -> None:
    found = labels(runtime())
    assert found == {
        "org.opencontainers.image.title": "chunkd",
        "org.opencontainers.image.description":
            "Content-defined chunking and deduplication over gRPC",
        "org.opencontainers.image.version": version_file(),
        "org.opencontainers.image.licenses": "Apache-2.0",
        "org.opencontainers.image.source": "https://github.com/chunkd/chunkd",
        "org.opencontainers.image.url": "https://github.com/chunkd/chunkd",
    }
    head = (REPO / "LICENSE").read_text()[:300]
    assert "Apache License" in head and "Version 2.0" in head
    # The Go module's path names the same repository.
    go_mod = (REPO / "clients" / "go" / "go.mod").read_text()
    assert go_mod.startswith("module github.com/chunkd/chunkd/")


def test_build_stage_checks_the_version_it_builds() -> None:
    """The version label comes from the build argument, whose default must
    be VERSION; the build stage stops when chunkd --version (which CMake
    reads from VERSION, copied in) disagrees with it."""
    assert args(stage("build")) == {"CHUNKD_VERSION": version_file()}
    assert args(runtime()) == {"CHUNKD_VERSION": version_file()}
    copies = [rest.split() for instruction, rest in stage("build")["lines"]
              if instruction == "COPY"]
    assert ["CMakeLists.txt", "VERSION", "LICENSE", "./"] in copies
    build = " ".join(rest for instruction, rest in stage("build")["lines"]
                     if instruction == "RUN")
    assert ('test "$(/build/server/chunkd --version | head -n 1)" = '
            '"chunkd ${CHUNKD_VERSION}"') in build


def test_license_is_in_the_image() -> None:
    copies = [rest for instruction, rest in runtime()["lines"] if instruction == "COPY"]
    assert "--from=build /src/LICENSE /usr/share/doc/chunkd/LICENSE" in copies
    workdir = [rest for instruction, rest in stage("build")["lines"] if instruction == "WORKDIR"]
    assert workdir == ["/src"]


def test_version_check_agrees_with_the_built_chunkd(chunkd_bin: Path) -> None:
    """What the build stage's check compares: the first line of the chunkd
    this tree builds (the same CMake reading VERSION)."""
    first = run([chunkd_bin, "--version"]).stdout.splitlines()[0]
    assert first == f"chunkd {args(stage('build'))['CHUNKD_VERSION']}"
