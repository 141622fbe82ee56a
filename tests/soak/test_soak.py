"""A 3-minute slice of the fleet soak (tests/soak/soak.py) in `make test`:
every fault kind once, then every check of the full soak. `make soak` runs
the full one (SOAK_MINUTES, default 30)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from soak import REPO, Config, Soak, write_report  # noqa: E402

MINUTES = float(os.environ.get("SOAK_SLICE_MINUTES", "3"))


def _binary(env: str, default: str) -> Path:
    path = Path(os.environ.get(env) or REPO / default)
    if not os.access(path, os.X_OK):
        pytest.fail(f"{path} is not an executable (make build, make test-python builds "
                    f"chunkd-go) or set ${env}", pytrace=False)
    return path


def test_a_slice_of_the_fleet_soak_passes_every_check() -> None:
    out = REPO / "build" / "soak-slice"
    config = Config(MINUTES, out, _binary("CHUNKD_BIN", "build/server/chunkd"),
                    _binary("CHUNKCTL_BIN", "build/clients/cli/chunkctl"),
                    _binary("CHUNKD_GO_BIN", "build/tools/bin/chunkd-go"))
    report = Soak(config).run()
    write_report(report, out)
    assert all(report["fault_counts"].values()), report["fault_counts"]
    failed = {name: {k: v for k, v in check.items() if k not in ("lives",)}
              for name, check in report["checks"].items() if not check["ok"]}
    assert not failed, (f"soak checks failed (report: {out / 'report.json'}):\n"
                        + json.dumps(failed, indent=1, default=str))
