"""`pip wheel clients/python` builds a wheel that installs into a fresh venv
and works there against a real chunkd: the library, its generated stubs and
the console script."""

from __future__ import annotations

import json
import subprocess
import sys
import venv
import zipfile
from pathlib import Path

from chunkd_client.testing import ChunkdServer

PACKAGE_DIR = Path(__file__).resolve().parents[1]
TIMEOUT = 600


def sh(*args: object, cwd: Path = None) -> str:
    result = subprocess.run([str(a) for a in args], capture_output=True, text=True,
                            timeout=TIMEOUT, cwd=cwd, stdin=subprocess.DEVNULL)
    assert result.returncode == 0, f"{args} failed:\n{result.stdout}\n{result.stderr}"
    return result.stdout


def test_wheel_installs_into_a_fresh_venv_and_works(server: ChunkdServer, tmp_path: Path) -> None:
    wheels = tmp_path / "wheels"
    sh(sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", wheels, PACKAGE_DIR)
    [wheel] = list(wheels.glob("chunkd_client-*.whl"))
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        entry_points = next(n for n in names if n.endswith("entry_points.txt"))
        assert "chunkd-client = chunkd_client.cli:entry_point" in archive.read(
            entry_points).decode()
    assert {"chunkd_client/_proto/chunkd/v1/chunkd_pb2.py",
            "chunkd_client/_proto/chunkd/v1/chunkd_pb2_grpc.py",
            "chunkd_client/aio.py", "chunkd_client/py.typed"} <= names

    env_dir = tmp_path / "fresh"
    venv.create(env_dir, with_pip=True)
    python = env_dir / "bin" / "python"
    sh(python, "-m", "pip", "install", "-q", wheel)

    # Run outside the repository so nothing is imported from the source tree.
    script = (
        "import chunkd_client, chunkd_client.aio, sys\n"
        "assert 'site-packages' in chunkd_client.__file__, chunkd_client.__file__\n"
        "with chunkd_client.Client(sys.argv[1], timeout=60) as c:\n"
        "    records, summary = c.chunk_all(bytes(range(256)) * 1000, algorithm='fixed',"
        " avg_size=4096)\n"
        "print(len(records), summary.total_bytes)\n"
    )
    assert sh(python, "-c", script, server.address, cwd=tmp_path).split() == ["63", "256000"]
    info = json.loads(sh(env_dir / "bin" / "chunkd-client", "info", "--json",
                         "--server", server.address, cwd=tmp_path))
    assert info["index_backend"] == "memory"
