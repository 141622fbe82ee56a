"""report.py's chart: throughput against threads, one line per backend, one
panel per algorithm and dataset (matplotlib, imported only when a chart is
asked for)."""

import math

from report_data import BACKEND_ORDER, ALGORITHM_ORDER, gbps, order


def minor_label(value, _):
    """Labels the minor ticks at 2 and 5 times a power of ten."""
    if value <= 0:
        return ""
    mantissa = value / 10 ** math.floor(math.log10(value) + 1e-9)
    return "%g" % value if round(mantissa) in (2, 5) else ""


def chart(t, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter

    datasets = t.datasets()
    algorithms = sorted({a for d in datasets for a in t.algorithms(d)},
                        key=lambda a: order(a, ALGORITHM_ORDER))
    threads = t.threads()
    fig, axes = plt.subplots(len(datasets), len(algorithms),
                             figsize=(4.2 * len(algorithms),
                                      3.6 * len(datasets)),
                             squeeze=False)
    colors = {"scalar": "tab:blue", "avx2": "tab:orange",
              "avx512": "tab:green", "auto": "tab:red"}
    legend = {}
    for row, dataset in enumerate(datasets):
        for col, algorithm in enumerate(algorithms):
            ax = axes[row][col]
            backends = sorted({k[3] for k in t.rows(algorithm, dataset,
                                                     ("auto",))},
                              key=lambda b: order(b, BACKEND_ORDER))
            for backend in backends:
                xs, ys = [], []
                for n in threads:
                    r = t.get(algorithm, dataset, backend, "auto", n)
                    if r is not None:
                        xs.append(n)
                        ys.append(gbps(r.best))
                if xs:
                    ax.plot(xs, ys, marker="o", label=backend,
                            color=colors.get(backend))
            ref = t.reference(algorithm, dataset)
            if ref is not None:
                ax.axhline(gbps(ref.best), color="black", linestyle="--",
                           linewidth=1, label="scalar reference")
            cx, cy = [], []
            for n in threads:
                c = t.ceiling_rate(dataset, n)
                if c is not None:
                    cx.append(n)
                    cy.append(gbps(c))
            if cx:
                ax.plot(cx, cy, color="gray", linestyle=":", marker="s",
                        label="memory read")
            ax.set_title("%s — %s" % (algorithm, dataset))
            ax.set_xticks(threads)
            ax.set_xlim(min(threads) - 0.3, max(threads) + 0.3)
            ax.set_xlabel("threads")
            ax.set_ylabel("GB/s (log scale)")
            # Log scale: the memory ceiling and the chunkers differ by an
            # order of magnitude, and equal ratios look equally far apart.
            ax.set_yscale("log")
            ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: "%g" % v))
            ax.yaxis.set_minor_formatter(FuncFormatter(minor_label))
            ax.tick_params(axis="y", which="minor", labelsize="x-small")
            ax.grid(True, which="both", alpha=0.3)
            if algorithm == "fixed":
                ax.text(0.5, 0.5, "fixed reads no data:\nonly the chunk list "
                        "is built", transform=ax.transAxes, ha="center",
                        va="center", fontsize="small", color="dimgray")
            for handle, label in zip(*ax.get_legend_handles_labels()):
                legend.setdefault(label, handle)
    # One legend for all panels: the same backends everywhere.
    order_labels = [b for b in BACKEND_ORDER if b in legend] + [
        b for b in legend if b not in BACKEND_ORDER]
    fig.legend([legend[b] for b in order_labels], order_labels,
               loc="lower center", ncol=len(order_labels), frameon=False)
    fig.suptitle("chunkd: chunking throughput vs threads (engine strategy "
                 "auto; GB/s = 10^9 input bytes/s, best repetition)")
    fig.tight_layout(rect=(0, 0.05, 1, 1))
    fig.savefig(path, dpi=110)
