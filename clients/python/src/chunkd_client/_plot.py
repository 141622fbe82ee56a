"""The picture of an estimate: ``chunkd-client estimate --plot FILE`` and
``chunkd-client plot JSON FILE`` (docs/estimate.md says how to read it).

It is drawn from the object ``estimate --json`` prints, so that the JSON
chunkctl and chunkd-go write is drawn the same way. Left: the dedup ratio
against the mean chunk size (log2 axis), one line per algorithm through its
sets, each point labelled with its set and, when sampled, the 95 % interval
as an error bar. Right: the chunk size histograms of the sets side by side,
per power-of-two bucket, as the share of each set's chunks. A set has the
same colour in both panels.

matplotlib is an optional dependency (the ``plot`` extra), imported only
here and only when a picture is drawn.
"""

from __future__ import annotations

import os
from typing import Any, Dict, List, Mapping, Sequence

from chunkd_client._cli_output import human_bytes

#: What to install for pictures.
INSTALL_HINT = "pip install 'chunkd-client[plot]'"
#: The formats drawn, by file extension.
FORMATS = {".png": "png", ".svg": "svg"}
#: The marker of each algorithm's line, in the table's order.
_MARKERS = "osD^vP*X"


class PlotError(Exception):
    """A picture that cannot be drawn: matplotlib missing, an output name
    without a known extension, or JSON that is not an estimate's."""


def plot_format(path: str) -> str:
    """"png" or "svg", by ``path``'s extension; PlotError for another."""
    extension = os.path.splitext(path)[1].lower()
    if extension not in FORMATS:
        raise PlotError(f"{path}: the picture is drawn as .png or .svg, by the file's "
                        f"extension, not {extension or 'no extension'!r}")
    return FORMATS[extension]


def require_matplotlib() -> None:
    """PlotError naming the extra to install when matplotlib is missing."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise PlotError(f"drawing needs matplotlib: {INSTALL_HINT}") from None


_NUMBER = (int, float)
#: What the picture reads of each set, and the type of each.
_SET_KEYS: Dict[str, Any] = {"set": str, "algorithm": str, "dedup_ratio": _NUMBER,
             "mean_chunk_size": _NUMBER, "ratio_interval": (list, type(None)),
             "histogram": list}


def check_estimate(estimate: Any) -> None:
    """PlotError naming what is wrong when ``estimate`` is not the object
    of ``estimate --json``, as far as the picture reads it."""
    if not isinstance(estimate, dict):
        raise PlotError("not the JSON object of estimate --json")
    for key in ("sets", "total_bytes", "files", "sample_rate"):
        if key not in estimate:
            raise PlotError(f"not the JSON of estimate --json: no {key!r}")
    if not isinstance(estimate["sets"], list) or not all(
            isinstance(s, dict) for s in estimate["sets"]):
        raise PlotError("not the JSON of estimate --json: 'sets' is not a list of "
                        "objects")
    for number, s in enumerate(estimate["sets"], 1):
        for key, kind in _SET_KEYS.items():
            if not isinstance(s.get(key), kind):
                raise PlotError(f"not the JSON of estimate --json: set {number} has "
                                f"no {key!r} of the right type")
        if s["ratio_interval"] is not None and len(s["ratio_interval"]) != 2:
            raise PlotError(f"not the JSON of estimate --json: set {number}'s "
                            "'ratio_interval' is not [low, high]")
        if not all(isinstance(b, list) and len(b) == 2 for b in s["histogram"]):
            raise PlotError(f"not the JSON of estimate --json: set {number}'s "
                            "'histogram' is not a list of [lower_bound, chunks]")


def _size_tick(value: float, _: Any = None) -> str:
    """A power-of-two size as a tick label: 512, 4K, 1M."""
    for unit, shift in (("M", 20), ("K", 10)):
        if value >= 1 << shift:
            return f"{value / (1 << shift):g}{unit}"
    return f"{value:g}"


def _title(estimate: Mapping[str, Any]) -> str:
    rate = estimate["sample_rate"]
    files = estimate["files"]
    sampling = "exact" if rate <= 1 else f"sampled 1 in {rate}"
    fingerprint = estimate.get("fingerprint")
    return (f"Estimate of {human_bytes(estimate['total_bytes'])} in {files} "
            f"file{'' if files == 1 else 's'}: {sampling}"
            + (f", {fingerprint}" if fingerprint else ""))


def _short_label(s: Mapping[str, Any]) -> str:
    """The set's label without its algorithm, which the line's legend
    names."""
    label = str(s["set"])
    prefix = f"{s['algorithm']}:"
    return label[len(prefix):] if label.startswith(prefix) else label


def _ratio_panel(ax: Any, sets: Sequence[Mapping[str, Any]], colors: List[Any]) -> None:
    by_algorithm: Dict[str, List[int]] = {}
    for i, s in enumerate(sets):
        if s["mean_chunk_size"] > 0:
            by_algorithm.setdefault(str(s["algorithm"]), []).append(i)
    for number, (algorithm, members) in enumerate(by_algorithm.items()):
        members.sort(key=lambda i: sets[i]["mean_chunk_size"])
        xs = [sets[i]["mean_chunk_size"] for i in members]
        ys = [sets[i]["dedup_ratio"] for i in members]
        marker = _MARKERS[number % len(_MARKERS)]
        ax.plot(xs, ys, color="0.45", linewidth=1.2, marker=marker, markersize=8,
                markerfacecolor="none", markeredgecolor="0.45", label=algorithm,
                zorder=2)
        for i, x, y in zip(members, xs, ys):
            ax.plot([x], [y], linestyle="none", marker=marker, markersize=6,
                    color=colors[i], zorder=3)
            interval = sets[i]["ratio_interval"]
            if interval:
                ax.errorbar([x], [y], yerr=[[max(y - interval[0], 0)],
                                            [max(interval[1] - y, 0)]],
                            fmt="none", ecolor=colors[i], elinewidth=1.2, capsize=4,
                            zorder=3)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("mean chunk size (bytes, log2)")
    ax.set_ylabel("dedup ratio (bytes / unique bytes)")
    ax.set_title("Dedup ratio against chunk size", fontsize=11)
    ax.grid(True, which="major", linewidth=0.5, alpha=0.5)
    if by_algorithm:
        ax.legend(title="algorithm", fontsize=8, title_fontsize=8, loc="best")
        _pad_axes(ax, [s for s in sets if s["mean_chunk_size"] > 0])
    else:
        ax.text(0.5, 0.5, "no chunks", transform=ax.transAxes, ha="center")


def _pad_axes(ax: Any, sets: Sequence[Mapping[str, Any]]) -> None:
    """Room around the points for their labels: half a power of two left
    and right, a tenth of the ratios' span above and below."""
    import matplotlib.ticker as ticker

    xs = [s["mean_chunk_size"] for s in sets]
    lows = [s["ratio_interval"][0] if s["ratio_interval"] else s["dedup_ratio"]
            for s in sets]
    highs = [s["ratio_interval"][1] if s["ratio_interval"] else s["dedup_ratio"]
             for s in sets]
    span = max(max(highs) - min(lows), 0.05 * max(highs), 0.01)
    ax.set_xlim(min(xs) / 2 ** 0.75, max(xs) * 2 ** 0.75)
    ax.set_ylim(max(min(lows) - 0.15 * span, 0), max(highs) + 0.15 * span)
    ax.xaxis.set_major_locator(ticker.LogLocator(base=2))
    ax.xaxis.set_major_formatter(ticker.FuncFormatter(_size_tick))


def _obstacles(ax: Any, sets: Sequence[Mapping[str, Any]], renderer: Any) -> List[Any]:
    """What a point's label must not cover, in display coordinates: the
    markers with their error bars, and the legend."""
    from matplotlib.transforms import Bbox

    boxes = []
    for s in sets:
        if s["mean_chunk_size"] <= 0:
            continue
        low, high = s["ratio_interval"] or (s["dedup_ratio"], s["dedup_ratio"])
        x, y0 = ax.transData.transform((s["mean_chunk_size"], low))
        _, y1 = ax.transData.transform((s["mean_chunk_size"], high))
        boxes.append(Bbox.from_extents(x - 8, y0 - 8, x + 8, y1 + 8))
    legend = ax.get_legend()
    if legend is not None:
        boxes.append(legend.get_window_extent(renderer))
    return boxes


def _label_points(fig: Any, ax: Any, sets: Sequence[Mapping[str, Any]],
                  colors: List[Any]) -> None:
    """Puts each point's label next to it where it covers no other label,
    marker or the legend, trying places around the point nearest first
    (the last one tried when none is free)."""
    renderer = fig.canvas.get_renderer()
    area = ax.get_window_extent(renderer)
    placed = _obstacles(ax, sets, renderer)
    offsets = [(dx * r, dy * r) for r in (1, 1.8, 2.6)
               for dx, dy in ((8, 6), (8, -8), (-8, 6), (-8, -8), (0, 13), (0, -15))]
    for i in sorted(range(len(sets)), key=lambda i: sets[i]["mean_chunk_size"]):
        s = sets[i]
        if s["mean_chunk_size"] <= 0:
            continue
        for dx, dy in offsets:
            text = ax.annotate(
                _short_label(s), (s["mean_chunk_size"], s["dedup_ratio"]),
                xytext=(dx, dy), textcoords="offset points", fontsize=7.5,
                color=tuple(0.75 * c for c in colors[i][:3]),
                ha="left" if dx > 0 else "right" if dx < 0 else "center",
                va="bottom" if dy >= 0 else "top", zorder=4)
            text.set_in_layout(False)
            box = text.get_window_extent(renderer)
            inside = (area.x0 <= box.x0 and box.x1 <= area.x1
                      and area.y0 <= box.y0 and box.y1 <= area.y1)
            if inside and not any(box.overlaps(other) for other in placed):
                break
            if (dx, dy) != offsets[-1]:
                text.remove()
        placed.append(box)


def _histogram_panel(ax: Any, sets: Sequence[Mapping[str, Any]],
                     colors: List[Any]) -> None:
    """Each power-of-two bucket [b, 2b) split into one bar per set."""
    n = len(sets)
    bounds = sorted({int(b) for s in sets for b, _ in s["histogram"]})
    for i, s in enumerate(sets):
        total = sum(c for _, c in s["histogram"]) or 1
        lefts = [b * 2 ** (i / n) for b, _ in s["histogram"]]
        widths = [b * 2 ** ((i + 1) / n) - left
                  for (b, _), left in zip(s["histogram"], lefts)]
        shares = [100 * c / total for _, c in s["histogram"]]
        ax.bar(lefts, shares, width=widths, align="edge", color=colors[i],
               edgecolor="white", linewidth=0.3, label=str(s["set"]))
    ax.set_xscale("log", base=2)
    if bounds:
        import matplotlib.ticker as ticker

        ax.set_xlim(bounds[0] / 1.2, bounds[-1] * 2 * 1.2)
        ax.xaxis.set_major_locator(ticker.LogLocator(base=2))
        ax.xaxis.set_major_formatter(ticker.FuncFormatter(_size_tick))
    ax.set_xlabel("chunk size (bytes, power-of-two buckets, log2)")
    ax.set_ylabel("share of the set's chunks (%)")
    ax.set_title("Chunk sizes", fontsize=11)
    ax.grid(True, axis="y", linewidth=0.5, alpha=0.5)


def _colors(n: int) -> List[Any]:
    from matplotlib import colormaps

    palette = colormaps["tab10" if n <= 10 else "tab20"]
    return [palette(i % palette.N) for i in range(n)]


def _figure(estimate: Mapping[str, Any]) -> Any:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    sets = estimate["sets"]
    colors = _colors(len(sets))
    fig = Figure(figsize=(15, 6.5), constrained_layout=True)
    FigureCanvasAgg(fig)
    ratio_ax, histogram_ax = fig.subplots(1, 2, gridspec_kw={"width_ratios": (1.1, 1)})
    _ratio_panel(ratio_ax, sets, colors)
    _histogram_panel(histogram_ax, sets, colors)
    if sets:
        histogram_ax.legend(title="set", fontsize=8, title_fontsize=8,
                            loc="upper left", bbox_to_anchor=(1.02, 1.0))
    fig.suptitle(_title(estimate), fontsize=13)
    fig.canvas.draw()  # lays the figure out; the point labels stay out of it
    _label_points(fig, ratio_ax, sets, colors)
    return fig


def draw(estimate: Mapping[str, Any], path: str) -> None:
    """Draws ``estimate`` (the object of ``estimate --json``) into ``path``,
    a PNG or an SVG by its extension. PlotError when matplotlib is missing,
    the extension unknown or ``estimate`` not an estimate's JSON."""
    kind = plot_format(path)
    require_matplotlib()
    check_estimate(estimate)
    fig = _figure(estimate)
    fig.savefig(path, format=kind, dpi=130)
