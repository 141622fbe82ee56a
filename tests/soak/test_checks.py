"""The soak's resource check on made-up samples: it must pass a replica
whose memory rises and falls with its load, and fail one that leaks."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from checks import RSS_GROWTH_PER_10_MIN, resources_flat  # noqa: E402
from fleet import Series  # noqa: E402

MIB = 1 << 20


def _series(rss: "list[float]") -> Series:
    """One chunkd life sampled once a second: [t, rss, threads, fds]."""
    s = Series("chunkd", "chunkd-0.1")
    s.samples = [[1000.0 + i, r, 30, 18] for i, r in enumerate(rss)]
    return s


def _judged(rss: "list[float]") -> dict:
    result = resources_flat({"chunkd-0.1": _series(rss)})
    return result["lives"][0] | {"ok_all": result["ok"]}


def test_memory_given_back_in_a_pause_is_no_growth() -> None:
    # 10 minutes busy at 56 MiB, trimmed to 33 MiB in a pause where the
    # last two thirds begin (a median there would see 23 MiB of growth).
    rss = [(33 if 200 <= i < 260 else 56) * MIB for i in range(600)]
    life = _judged(rss)
    assert life["ok_all"], life
    assert life["rss_growth_mib"] == 0


def test_a_leak_fails_the_check() -> None:
    # 20 MiB per 10 minutes on top of a busy/quiet load pattern.
    rate = 20 * MIB / 600
    rss = [(40 if i % 60 < 40 else 30) * MIB + rate * i for i in range(1800)]
    life = _judged(rss)
    assert not life["ok_all"], life
    assert life["rss_mib_per_10_min"] > RSS_GROWTH_PER_10_MIN / MIB


def test_growth_within_the_bound_passes() -> None:
    rate = 8 * MIB / 600
    rss = [(40 if i % 60 < 40 else 30) * MIB + rate * i for i in range(1800)]
    assert _judged(rss)["ok_all"]
