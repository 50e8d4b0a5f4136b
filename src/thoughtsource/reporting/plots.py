"""Evaluation plots (matplotlib, Agg backend, PNG).

:func:`plot_accuracy` draws the accuracy of every combination with its 95% Wilson interval;
:func:`plot_trigger_heatmap` draws CoT triggers × datasets, one panel per model.  Both take the ``accuracy`` frame of
:class:`thoughtsource.evaluate.Evaluation` and write a PNG atomically.  :func:`plot_reasoning` draws, per model, the
distribution of reasoning lengths (with the truncation rate) and accuracy against reasoning length.
"""

from __future__ import annotations

import logging
import os
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import MissingDependencyError, require
from ..evaluate import COMBINATION
from ..io import atomic_write

if TYPE_CHECKING:
    import pandas as pd

log = logging.getLogger(__name__)

__all__ = ["heatmap_cells", "plot_accuracy", "plot_or_warn", "plot_reasoning", "plot_trigger_heatmap", "row_label"]


def _pyplot() -> Any:
    require("matplotlib", extra="plots", purpose="plotting")
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    return plt


def _save(fig: Any, path: str | os.PathLike[str]) -> Path:
    out = Path(path)
    with atomic_write(out, "wb") as fh:
        fig.savefig(fh, format="png", dpi=150, bbox_inches="tight")
    return out


_FIELD_NAMES = {"cot_trigger": "trigger", "answer_extraction": "extraction"}


def shown_value(value: Any) -> str:
    """A cell value as shown: ``None`` (no trigger, no instruction) is ``none``."""
    return "none" if value is None or str(value) == "None" else str(value)


def row_label(row: Any, varying: list[str]) -> str:
    """"model: m · trigger: none": every part names its field."""
    parts = [f"{_FIELD_NAMES.get(c, c)}: {shown_value(row[c])}" for c in varying]
    return " · ".join(parts) if parts else "all"


def plot_accuracy(
    accuracy: pd.DataFrame,
    path: str | os.PathLike[str],
    *,
    mode: str | None = "strict",
    title: str | None = None,
    max_rows: int = 60,
) -> Path:
    """Horizontal dot plot: accuracy (%) of each combination with its 95% Wilson interval and n."""
    plt = _pyplot()
    import numpy as np

    frame = accuracy if mode is None else accuracy[accuracy["mode"] == mode]
    frame = frame.sort_values("accuracy", ascending=True, kind="stable").tail(max_rows)
    # Label rows by the columns that differ; the shared ones go into the title.
    varying = [c for c in COMBINATION if frame[c].nunique(dropna=False) > 1] if len(frame) else []
    shared = [f"{_FIELD_NAMES.get(c, c)}: {shown_value(frame[c].iloc[0])}" for c in COMBINATION if c not in varying and len(frame)]
    labels = ["\n".join(textwrap.wrap(row_label(r, varying), 60)) for _, r in frame.iterrows()]
    height = max(2.5, 0.45 * len(frame) + 1.5)
    fig, ax = plt.subplots(figsize=(10, height))
    try:
        y = list(range(len(frame)))
        acc = 100 * frame["accuracy"].to_numpy(dtype=float)
        lo = 100 * frame["ci_low"].to_numpy(dtype=float)
        hi = 100 * frame["ci_high"].to_numpy(dtype=float)
        # an interval that does not contain its estimate (a frame from elsewhere) is drawn as a bare point
        xerr = [np.nan_to_num(np.maximum(acc - lo, 0.0)), np.nan_to_num(np.maximum(hi - acc, 0.0))]
        ax.errorbar(acc, y, xerr=xerr, fmt="o", color="#1f5fa8", ecolor="#7ea6d8", elinewidth=2, capsize=4)
        for yi, a, h, n in zip(y, acc, hi, frame["n"].tolist(), strict=True):
            ax.annotate(
                f"{a:.1f}%  (n={n})", (min(h, 100), yi), xytext=(6, 0), textcoords="offset points", va="center", fontsize=9
            )
        ax.set_yticks(y)
        ax.set_yticklabels(labels, fontsize=9)
        ax.set_xlim(0, 115)
        ax.set_xticks(range(0, 101, 10))
        ax.set_xlabel("accuracy (%) with 95% Wilson interval", fontsize=10)
        ax.grid(axis="x", alpha=0.3)
        ax.set_ylim(-0.7, len(frame) - 0.3)
        head = title or "Accuracy per combination" + (f" ({mode})" if mode else "")
        sub = "\n".join(textwrap.wrap(", ".join(shared), 110))
        ax.set_title(head + (f"\n{sub}" if sub else ""), fontsize=11)
        return _save(fig, path)
    finally:
        plt.close(fig)


def heatmap_cells(accuracy: pd.DataFrame, *, mode: str | None = "strict") -> dict[str, pd.DataFrame]:
    """What :func:`plot_trigger_heatmap` draws: per model, a table trigger × (``accuracy``/``n``, dataset), pooled
    over splits, instructions and answer extractions of that model only."""
    frame = accuracy if mode is None else accuracy[accuracy["mode"] == mode]
    out = {}
    for model, sub in frame.groupby(frame["model"].astype(str), sort=True):
        g = sub.groupby([sub["cot_trigger"].astype(str).rename("cot_trigger"), sub["dataset"].astype(str).rename("dataset")])
        sums = g[["correct", "n"]].sum()
        table = sums.assign(accuracy=sums["correct"] / sums["n"])[["accuracy", "n"]].unstack("dataset")
        out[str(model)] = table
    return out


def plot_trigger_heatmap(
    accuracy: pd.DataFrame,
    path: str | os.PathLike[str],
    *,
    mode: str | None = "strict",
    title: str | None = None,
) -> Path:
    """Heatmaps of CoT triggers (rows) × datasets (columns), one panel per model (models are never pooled);
    cells show accuracy (%) and n, pooled over splits, instructions and answer extractions."""
    plt = _pyplot()
    import numpy as np
    import pandas as pd

    cells = heatmap_cells(accuracy, mode=mode)
    models = sorted(cells) or ["(none)"]
    triggers = sorted({t for c in cells.values() for t in c.index})
    datasets = sorted({d for c in cells.values() for d in c.columns.get_level_values(1)})
    width = max(4.5, 1.3 * len(datasets) + 3)
    fig, axes = plt.subplots(1, len(models), figsize=(width * len(models), max(2.5, 0.6 * len(triggers) + 1.8)), squeeze=False)
    try:
        im = None
        for ax, model in zip(axes[0], models, strict=True):
            table = cells.get(model)
            acc = (100 * table["accuracy"] if table is not None else pd.DataFrame()).reindex(index=triggers, columns=datasets)
            ns = (table["n"] if table is not None else pd.DataFrame()).reindex(index=triggers, columns=datasets)
            data = acc.to_numpy(dtype=float) if triggers and datasets else np.zeros((0, 0))
            if not data.size:
                ax.text(0.5, 0.5, "no answers", ha="center", va="center", transform=ax.transAxes)
                continue
            im = ax.imshow(np.ma.masked_invalid(data), cmap="viridis", vmin=0, vmax=100, aspect="auto")
            ax.set_xticks(range(len(datasets)))
            ax.set_xticklabels(datasets, rotation=30, ha="right", fontsize=9)
            ax.set_yticks(range(len(triggers)))
            ax.set_yticklabels([f"trigger: {shown_value(t)}" for t in triggers], fontsize=9)
            ax.set_xlabel("dataset", fontsize=10)
            ax.set_title(f"model: {model}", fontsize=10)
            for i in range(len(triggers)):
                for j in range(len(datasets)):
                    v = data[i, j]
                    if v == v:
                        color = "black" if v > 60 else "white"
                        ax.text(j, i, f"{v:.1f}\nn={int(ns.iloc[i, j])}", ha="center", va="center", fontsize=8, color=color)
        if im is not None:
            cbar = fig.colorbar(im, ax=list(axes[0]), fraction=0.046, pad=0.04)
            cbar.set_label("accuracy (%)", fontsize=9)
        fig.suptitle(title or "Accuracy: CoT trigger × dataset, per model" + (f" ({mode})" if mode else ""), fontsize=11)
        return _save(fig, path)
    finally:
        plt.close(fig)


_MISSING_SAID: set[str] = set()


def plot_reasoning(
    reasoning: pd.DataFrame,
    path: str | os.PathLike[str],
    *,
    lengths: pd.DataFrame,
    by_length: pd.DataFrame,
    mode: str | None = "strict",
) -> Path:
    """Two panels, one line per model: the distribution of reasoning lengths (histogram; the legend gives the
    truncation rate) and accuracy against reasoning length (per quartile, at its median length, with 95% Wilson
    intervals).  Lengths are in the unit of :func:`~thoughtsource.evaluate.reasoning_table` (tokens or words)."""
    plt = _pyplot()
    import numpy as np

    acc = by_length if mode is None else by_length[by_length["mode"] == mode]
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.5))
    try:
        for i, r in enumerate(reasoning.to_dict("records")):
            color = f"C{i % 10}"
            mine = lengths[lengths["model"] == r["model"]]
            x = mine[r["unit"]].astype(float).dropna().to_numpy()
            label = f"{r['model']} ({r['unit']}; truncated {100 * r['truncation_rate']:.1f}%, n={r['cots']})"
            if len(x):
                left.hist(x, bins=min(30, max(5, len(x) // 5)), histtype="step", linewidth=1.8, color=color, label=label)
            a = acc[acc["model"] == r["model"]]
            if len(a):
                y = 100 * a["accuracy"].to_numpy(dtype=float)
                err = [np.maximum(y - 100 * a["ci_low"].to_numpy(dtype=float), 0), np.maximum(100 * a["ci_high"].to_numpy(dtype=float) - y, 0)]
                right.errorbar(a["length_median"].to_numpy(dtype=float), y, yerr=err, fmt="o-", color=color, capsize=3,
                               label=f"{r['model']} ({r['unit']})")
        left.set_xlabel("reasoning length")
        left.set_ylabel("CoTs")
        left.set_title("Reasoning length per model", fontsize=11)
        right.set_xlabel("reasoning length (median of each quartile)")
        right.set_ylabel("accuracy (%) with 95% Wilson interval")
        right.set_ylim(0, 105)
        right.set_title("Accuracy against reasoning length" + (f" ({mode})" if mode else ""), fontsize=11)
        for ax in (left, right):
            ax.grid(alpha=0.3)
            if ax.get_legend_handles_labels()[0]:
                ax.legend(fontsize=8)
        return _save(fig, path)
    finally:
        plt.close(fig)


def plot_or_warn(draw: Callable[..., Path], *args: Any, **kwargs: Any) -> Path | None:
    """``draw(*args, **kwargs)``; any failure (matplotlib missing, a bad frame, an unwritable path) is a warning.

    Plots come after the numbers: a command whose results are computed and written must not die on a plot.
    """
    name = Path(args[1]).name if len(args) > 1 else getattr(draw, "__name__", "plot")
    try:
        return draw(*args, **kwargs)
    except MissingDependencyError as e:
        if str(e) not in _MISSING_SAID:  # once per process, not once per plot
            _MISSING_SAID.add(str(e))
            log.warning("plots skipped: %s", e)
    except Exception as e:  # a plot never kills the command that computed the results
        log.warning("plot %s not written: %s: %s", name, type(e).__name__, e)
    return None
