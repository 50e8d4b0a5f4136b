"""Figures for :mod:`thoughtsource.reporting.stats` (matplotlib, Agg backend); drawing only, no computation.

* :func:`plot_lengths`: token-length distributions per dataset, one panel per field (the paper's Figure 1);
* :func:`plot_overlap`: dataset × dataset n-gram overlap heatmaps, questions and reference CoTs (Figure 2);
* :func:`plot_counts`: samples, samples with reference CoTs and with generated CoTs per dataset.

Colours are colour-blind safe: the Okabe-Ito palette for categories, viridis for the heatmaps.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import require
from ..io import atomic_write
from .stats import FIELD_LABELS, FIELDS, OVERLAP_FIELDS, overlap_matrix

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from .stats import StatsReport

log = logging.getLogger(__name__)

OKABE_ITO = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442", "#000000")
METRIC_LABELS = {"overlap_coefficient": "overlap coefficient (Szymkiewicz–Simpson)", "jaccard": "Jaccard index"}
_RC = {"font.size": 10, "axes.titlesize": 11, "axes.labelsize": 10, "xtick.labelsize": 9, "ytick.labelsize": 9,
       "svg.fonttype": "none", "savefig.bbox": "tight"}


def _pyplot() -> Any:
    require("matplotlib", extra="plots", purpose="plotting")
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    return plt


def save_figure(fig: Figure, path: str | Path, formats: Sequence[str] = ("png",), dpi: int = 100) -> list[Path]:
    """Write ``path`` with each suffix in ``formats`` (atomically) and close the figure."""
    plt = _pyplot()
    written = []
    stem = Path(path).with_suffix("")
    try:
        for fmt in formats:
            target = stem.with_suffix(f".{fmt}")
            with atomic_write(target, "wb") as fh:
                fig.savefig(fh, format=fmt, dpi=dpi, metadata={"Software": None} if fmt == "png" else None)
            written.append(target)
    finally:
        plt.close(fig)
    return written


def _horizontal() -> dict[str, Any]:
    """Horizontal box/violin plots: ``orientation=`` since matplotlib 3.10, ``vert=False`` before."""
    import matplotlib

    major, minor = (int(x) for x in matplotlib.__version__.split(".")[:2])
    return {"orientation": "horizontal"} if (major, minor) >= (3, 10) else {"vert": False}


def _log_axis(ax: Any) -> None:
    """Log x axis labelled in plain numbers (1, 2, 5, 10, ...; fewer steps when it spans many decades).

    Call after the data is drawn: the tick steps depend on the axis limits.
    """
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    ax.set_xscale("log")
    lo, hi = ax.get_xlim()
    decades = math.log10(max(hi, 1e-9) / max(lo, 1e-9))
    subs = (1.0, 2.0, 5.0) if decades <= 2.3 else (1.0, 3.0) if decades <= 3.6 else (1.0,)
    ax.xaxis.set_major_locator(LogLocator(base=10, subs=subs, numticks=12))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:,.0f}" if v >= 1 else f"{v:g}"))
    ax.xaxis.set_minor_formatter(NullFormatter())


def _log10_ticks(ax: Any, lo: float, hi: float) -> None:
    """Ticks for data drawn as log10(value), labelled with the plain values 1, 2, 5, 10, ..."""
    candidates = [m * 10**e for e in range(0, 7) for m in (1, 2, 5)]
    ticks = [t for t in candidates if lo / 1.5 <= t <= hi * 1.5] or [lo, hi]
    if len(ticks) > 7:
        ticks = [t for t in ticks if str(int(t))[0] in "15"]
    ax.set_xticks(np.log10(ticks), [f"{t:,.0f}" for t in ticks])


def plot_lengths(report: StatsReport, fields: Sequence[str] | None = None, kind: str = "box", datasets: Sequence[str] | None = None) -> Figure:
    """Token-length distributions (log scale), one horizontal box (or violin) per dataset, one panel per field.

    Fields without any text in any dataset are left out.  ``kind``: ``"box"`` (whiskers at the 5th and
    95th percentiles, beyond them the outliers as small dots) or ``"violin"``.
    """
    plt = _pyplot()
    lengths = report.lengths
    names = list(datasets or report.datasets)
    fields = [f for f in (fields or FIELDS) if (lengths["field"] == f).any()]
    if not fields:
        fields = ["question"]
    height = max(2.6, 0.32 * len(names) + 1.3)
    with plt.rc_context(_RC):
        fig, axes = plt.subplots(1, len(fields), figsize=(2.9 * len(fields) + 1.4, height), sharey=True, squeeze=False,
                                 layout="constrained")
        positions = np.arange(len(names))[::-1]  # first dataset at the top
        for j, (ax, f) in enumerate(zip(axes[0], fields, strict=True)):
            sub = lengths[lengths["field"] == f]
            groups = {d: g["length"].to_numpy() for d, g in sub.groupby("dataset", sort=False)}
            data, pos = [], []
            for p, d in zip(positions, names, strict=True):
                vals = groups.get(d)
                if vals is not None and vals.size:
                    data.append(np.maximum(vals, 1))  # log axis: 0-token texts (e.g. only punctuation) drawn at 1
                    pos.append(p)
            colour = OKABE_ITO[j % len(OKABE_ITO)]
            if data and kind == "violin":
                parts = ax.violinplot([np.log10(v) for v in data], positions=pos, **_horizontal(), widths=0.8,
                                      showmedians=True, showextrema=False)
                for body in parts["bodies"]:
                    body.set_facecolor(colour)
                    body.set_edgecolor("black")
                    body.set_alpha(0.7)
                parts["cmedians"].set_color("black")
                _log10_ticks(ax, min(float(v.min()) for v in data), max(float(v.max()) for v in data))
                ax.set_xlabel(f"tokens in {FIELD_LABELS[f]}")
            elif data:
                ax.boxplot(data, positions=pos, **_horizontal(), widths=0.6, whis=(5, 95), patch_artist=True,
                           boxprops={"facecolor": colour, "alpha": 0.8}, medianprops={"color": "black"},
                           flierprops={"marker": ".", "markersize": 2, "markerfacecolor": "#555555",
                                       "markeredgecolor": "none", "alpha": 0.5})
                _log_axis(ax)
                ax.set_xlabel(f"tokens in {FIELD_LABELS[f]}")
            ax.set_title(f"{chr(97 + j)}  {FIELD_LABELS[f]}", loc="left", fontweight="bold")
            ax.grid(axis="x", color="#dddddd", linewidth=0.6)
            ax.set_axisbelow(True)
            ax.set_ylim(-0.7, len(names) - 0.3)
        axes[0][0].set_yticks(positions, names)
        fig.suptitle(f"Token lengths per dataset (tokenizer: {report.tokenizer})", x=0.01, ha="left", fontsize=11)
    return fig


def plot_overlap(report: StatsReport, metric: str = "overlap_coefficient", fields: Sequence[str] = OVERLAP_FIELDS,
                 min_value: float = 0.01) -> Figure:
    """Lower-triangle heatmaps of pairwise n-gram overlap; values < ``min_value`` are not written (as in the paper)."""
    plt = _pyplot()
    fields = [f for f in fields if f in report.overlap]
    names = report.datasets
    k = len(names)
    cell = 0.48
    side = max(3.5, cell * k + 1.8)
    with plt.rc_context(_RC):
        fig, axes = plt.subplots(1, len(fields), figsize=(side * len(fields) + 1.0, side), squeeze=False, layout="constrained")
        cmap = plt.get_cmap("viridis").with_extremes(bad="white")
        image = None
        for j, (ax, f) in enumerate(zip(axes[0], fields, strict=True)):
            m = overlap_matrix(report.overlap[f], metric, names).to_numpy(dtype=float)
            mask = np.triu(np.ones_like(m, dtype=bool), k=1)  # keep the lower triangle and the diagonal
            empty = np.isnan(np.diag(m))  # a dataset without this field: its row and column stay blank
            mask |= empty[:, None] | empty[None, :]
            shown = np.ma.masked_array(m, mask=mask | np.isnan(m))
            image = ax.imshow(shown, cmap=cmap, vmin=0.0, vmax=1.0, interpolation="nearest")
            size = 7 if k > 12 else 8
            for d in np.flatnonzero(empty):
                ax.text(d, d, "n/a", ha="center", va="center", fontsize=size, color="#555555")
            for a in range(k):
                for b in range(a + 1):
                    v = m[a, b]
                    if mask[a, b] or math.isnan(v) or v < min_value:
                        continue
                    ax.text(b, a, f"{v:.2f}", ha="center", va="center", fontsize=size,
                            color="black" if v > 0.6 else "white")
            ax.set_xticks(range(k), names, rotation=45, ha="right", rotation_mode="anchor")
            ax.set_yticks(range(k), names)
            ax.set_title(f"{chr(97 + j)}  {FIELD_LABELS[f]}", loc="left", fontweight="bold")
            for spine in ax.spines.values():
                spine.set_visible(False)
            ax.tick_params(length=0)
        if image is not None:
            fig.colorbar(image, ax=list(axes[0]), shrink=0.6, aspect=30, label=METRIC_LABELS.get(metric, metric))
        fig.suptitle(f"{report.n}-gram {METRIC_LABELS.get(metric, metric)} between datasets (values < {min_value} omitted)",
                     x=0.01, ha="left", fontsize=11)
    return fig


def plot_counts(report: StatsReport) -> Figure:
    """Horizontal grouped bars per dataset (all splits): samples, with reference CoT, with generated CoT (log scale)."""
    plt = _pyplot()
    totals = report.counts.groupby("dataset", sort=False)[["samples", "with_reference_cot", "with_generated_cot"]].sum()
    names = list(totals.index)
    series = [("samples", "samples"), ("with_reference_cot", "with reference CoT"), ("with_generated_cot", "with generated CoT")]
    height = max(2.6, 0.55 * len(names) + 1.2)
    with plt.rc_context(_RC):
        fig, ax = plt.subplots(figsize=(8.5, height), layout="constrained")
        y = np.arange(len(names))[::-1]
        bar_h = 0.26
        colours = {col: OKABE_ITO[i] for i, (col, _) in enumerate(series)}
        drawn = [(col, label) for col, label in series if totals[col].sum() > 0]  # an empty series gets no legend entry
        for i, (col, label) in enumerate(drawn):
            vals = totals[col].to_numpy()
            ys = y + ((len(drawn) - 1) / 2 - i) * bar_h
            ax.barh(ys, np.where(vals > 0, vals, np.nan), height=bar_h, color=colours[col], label=label)
            if col == "samples":
                for yy, v in zip(ys, vals, strict=True):
                    ax.text(v * 1.08, yy, f"{int(v):,}", va="center", fontsize=8)
        ax.set_yticks(y, names)
        ax.set_xlabel("samples (log scale)")
        values = totals.to_numpy()
        positive = values[values > 0]
        lo = 10 ** math.floor(math.log10(positive.min())) * 0.8 if positive.size else 0.8
        ax.set_xlim(lo, max(10.0, float(values.max())) * 4)
        _log_axis(ax)
        ax.grid(axis="x", color="#dddddd", linewidth=0.6)
        ax.set_axisbelow(True)
        ax.legend(loc="lower left", bbox_to_anchor=(0.0, 1.0), ncol=len(drawn), fontsize=8, frameon=False)
        fig.suptitle("Samples per dataset (all splits)", x=0.01, ha="left", fontsize=11)
    return fig


def write_all(report: StatsReport, out_dir: str | Path, formats: Sequence[str] = ("png",), kind: str = "box") -> dict[str, Path]:
    """Every figure as ``out_dir/<name>.<fmt>``; returns name → PNG (or first format) path."""
    _pyplot()  # a clear error without matplotlib (the plots extra), before any figure
    out = Path(out_dir)
    figures = {
        "counts": lambda: plot_counts(report),
        "lengths": lambda: plot_lengths(report, kind=kind),
        "overlap_coefficient": lambda: plot_overlap(report, "overlap_coefficient"),
        "jaccard": lambda: plot_overlap(report, "jaccard"),
    }
    paths: dict[str, Path] = {}
    for name, make in figures.items():
        paths[name] = save_figure(make(), out / f"stats_{name}", formats)[0]
        log.debug("wrote %s", paths[name])
    return paths
