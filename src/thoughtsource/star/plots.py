"""Plots of a STaR run (matplotlib, Agg): test accuracy per iteration, per group (digit count) as the
paper's Figure 4, and the train-set funnel (correct before / after rationalization, kept)."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot_run(summary: dict[str, Any], out: str | Path) -> list[Path]:
    """Write ``plots/accuracy.png``, ``plots/per_group.png`` (when groups exist) and ``plots/train.png``."""
    plt = _plt()
    out = Path(out) / "plots"
    out.mkdir(parents=True, exist_ok=True)
    its = summary["iterations"]
    xs = [m["iteration"] for m in its]
    written: list[Path] = []

    fig, ax = plt.subplots(figsize=(5, 3.5))
    ax.plot(xs, [m["test_accuracy"] for m in its], marker="o", label="test")
    tr = [(m["iteration"], m.get("train_accuracy_before_rationalization")) for m in its if m["iteration"] > 0]
    if any(v is not None for _, v in tr):
        ax.plot([x for x, _ in tr], [v for _, v in tr], marker="s", linestyle="--", label="train (M_{n-1}, before rationalization)")
    ax.set_xlabel("iteration")
    ax.set_ylabel("accuracy")
    ax.set_ylim(0, 1)
    ax.set_xticks(xs)
    ax.legend(fontsize=7)
    ax.set_title(_title(summary), fontsize=8)
    fig.tight_layout()
    written.append(out / "accuracy.png")
    fig.savefig(written[-1], dpi=120)
    plt.close(fig)

    trained = [m for m in its if m["iteration"] > 0 and m.get("train_n")]
    if trained:
        fig, ax = plt.subplots(figsize=(5, 3.5))
        tx = [m["iteration"] for m in trained]
        ax.plot(tx, [m["train_accuracy_before_rationalization"] for m in trained], marker="o", label="train correct (no hint)")
        ax.plot(tx, [m["train_accuracy_after_rationalization"] for m in trained], marker="s", label="after rationalization")
        if any(m.get("rationalization_acceptance") is not None for m in trained):
            ax.plot(tx, [m.get("rationalization_acceptance") for m in trained], marker="^", linestyle="--",
                    label="rationalization acceptance")
        ax.set_xlabel("iteration")
        ax.set_ylabel("share of training problems")
        ax.set_ylim(0, 1)
        ax.set_xticks(tx)
        ax.legend(fontsize=7)
        ax.set_title(_title(summary) + " — train set", fontsize=8)
        fig.tight_layout()
        written.append(out / "train.png")
        fig.savefig(written[-1], dpi=120)
        plt.close(fig)

    groups = sorted({g for m in its for g in m.get("test_accuracy_by_group", {})}, key=_group_key)
    if groups:
        fig, ax = plt.subplots(figsize=(5, 3.5))
        for g in groups:
            ax.plot(xs, [m.get("test_accuracy_by_group", {}).get(g) for m in its], marker="o", label=g)
        ax.set_xlabel("iteration")
        ax.set_ylabel("test accuracy")
        ax.set_ylim(0, 1)
        ax.set_xticks(xs)
        ax.legend(fontsize=7)
        ax.set_title(_title(summary) + " — per group", fontsize=8)
        fig.tight_layout()
        written.append(out / "per_group.png")
        fig.savefig(written[-1], dpi=120)
        plt.close(fig)
    return written


def plot_compare(runs: dict[str, dict[str, Any]], out_file: str | Path, *, group: str | None = None) -> Path:
    """Several runs (label → metrics.json summary) in one test-accuracy-per-iteration plot."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(5.5, 3.8))
    for label, summary in runs.items():
        its = summary["iterations"]
        ys = [m["test_accuracy"] if group is None else m.get("test_accuracy_by_group", {}).get(group) for m in its]
        ax.plot([m["iteration"] for m in its], ys, marker="o", label=label)
    ax.set_xlabel("iteration")
    ax.set_ylabel("test accuracy" + (f" ({group})" if group else ""))
    ax.set_ylim(0, 1)
    ax.legend(fontsize=7)
    fig.tight_layout()
    out_file = Path(out_file)
    out_file.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out_file, dpi=120)
    plt.close(fig)
    return out_file


def _group_key(g: str) -> tuple[int, str]:
    head = g.split("-", 1)[0]
    return (int(head), g) if head.isdigit() else (10**9, g)


def _title(summary: dict[str, Any]) -> str:
    c = summary["config"]
    kind = c["baseline"] if c["baseline"] != "star" else ("STaR" if c["rationalization"] else "STaR w/o rationalization")
    return f"{c['task']} · {c['model'].split('/')[-1]} · {kind}"
