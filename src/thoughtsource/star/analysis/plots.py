"""Plots of a STaR run (matplotlib, Agg): test accuracy per iteration, per group (digit count) as the
paper's Figure 4, the train-set funnel (correct before / after rationalization), several runs
compared and several seeds aggregated.  Every accuracy carries its Wilson 95 % error bar; lines
are spread a little along x so that their bars do not hide each other; the best iteration (on dev)
is marked."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .accuracy import Best, Proportion, best_iteration, group_key, group_proportions, groups, proportion


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _errorbar(ax: Any, xs: list[int], props: list[Proportion | None], *, offset: float = 0.0, **kw: Any) -> Any:
    """A line of accuracies with Wilson 95 % error bars (points without data are skipped)."""
    pts = [(x + offset, p) for x, p in zip(xs, props, strict=True) if p is not None and p.n]
    if not pts:
        return None
    ys = [p.correct / p.n for _, p in pts]
    lo = [max(0.0, y - p.interval[0]) for y, (_, p) in zip(ys, pts, strict=True)]
    hi = [max(0.0, p.interval[1] - y) for y, (_, p) in zip(ys, pts, strict=True)]
    kw.setdefault("marker", "o")
    kw.setdefault("capsize", 3)
    kw.setdefault("markersize", 4)
    return ax.errorbar([x for x, _ in pts], ys, yerr=[lo, hi], **kw)


def _offsets(k: int, width: float = 0.24) -> list[float]:
    """x offsets that spread k lines' error bars around each iteration."""
    if k <= 1:
        return [0.0] * k
    return [-width / 2 + width * i / (k - 1) for i in range(k)]


def _mark_best(ax: Any, best: Best | None) -> None:
    if best is None:
        return
    label = f"best on dev: iteration {best.iteration}" if best.chosen_on == "dev" else f"best on test (no dev): iteration {best.iteration}"
    ax.axvline(best.iteration, color="0.45", linestyle=":", linewidth=1.2, label=label, zorder=0)


def _finish(ax: Any, xs: list[int], ylabel: str, title: str) -> None:
    ax.set_xlabel("iteration")
    ax.set_ylabel(ylabel)
    # accuracies of small models sit near 0: scale to the data (with the error bars), never beyond 100 %
    top = ax.dataLim.y1 if ax.has_data() and ax.dataLim.y1 > 0 else 1.0
    top = min(1.0, max(0.1, top * 1.15))
    ax.set_ylim(-0.02 * top, top * 1.02)
    ax.set_xticks(xs)
    if xs:
        ax.set_xlim(min(xs) - 0.5, max(xs) + 0.5)
    ax.grid(axis="y", alpha=0.3)
    ax.legend(fontsize=7)
    ax.set_title(title, fontsize=8)


def _save(fig: Any, path: Path) -> Path:
    plt = _plt()
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def plot_run(summary: dict[str, Any], out: str | Path) -> list[Path]:
    """Write ``plots/accuracy.png``, ``plots/per_group.png`` (when groups exist) and ``plots/train.png``;
    every accuracy with its Wilson 95 % interval, the best iteration (on dev) marked."""
    plt = _plt()
    out = Path(out) / "plots"
    its = sorted(summary["iterations"], key=lambda m: m["iteration"])
    cfg = summary.get("config")
    xs = [m["iteration"] for m in its]
    best = best_iteration(summary)
    written: list[Path] = []

    fig, ax = plt.subplots(figsize=(5.5, 3.8))
    trained = [m for m in its if m["iteration"] > 0 and m.get("train_n")]
    # with --pseudo-labels the train accuracies are against the pseudo-labels, never to be read as gold accuracy
    vs = " vs pseudo-labels" if any(m.get("train_target") == "pseudo_label" for m in trained) else ""
    lines = [("test", [proportion(m, "test", None, cfg) for m in its], xs, {}),
             ("dev", [proportion(m, "dev", None, cfg) for m in its], xs, {}),
             (f"train{vs} (M_{{n-1}}, before rationalization)", [_train_prop(m, "train_correct_before_rationalization") for m in trained],
              [m["iteration"] for m in trained], {"linestyle": "--", "marker": "s"})]
    lines = [t for t in lines if any(p is not None for p in t[1])]
    for (label, props, lx, kw), off in zip(lines, _offsets(len(lines)), strict=True):
        _errorbar(ax, lx, props, offset=off, label=label, **kw)
    _mark_best(ax, best)
    _finish(ax, xs, "accuracy (Wilson 95 %)", _title(summary))
    written.append(_save(fig, out / "accuracy.png"))

    if trained:
        fig, ax = plt.subplots(figsize=(5.5, 3.8))
        tx = [m["iteration"] for m in trained]
        funnel = [(f"train correct{vs} (no hint)", [_train_prop(m, "train_correct_before_rationalization") for m in trained], {}),
                  ("after rationalization", [_after_rationalization(m) for m in trained], {"marker": "s"}),
                  ("rationalization acceptance", [_acceptance(m) for m in trained], {"marker": "^", "linestyle": "--"})]
        funnel = [t for t in funnel if any(p is not None for p in t[1])]
        for (label, props, kw), off in zip(funnel, _offsets(len(funnel)), strict=True):
            _errorbar(ax, tx, props, offset=off, label=label, **kw)
        _finish(ax, tx, "share of training problems (Wilson 95 %)", _title(summary) + " — train set")
        written.append(_save(fig, out / "train.png"))

    names = groups(summary)
    if names:
        fig, ax = plt.subplots(figsize=(5.5, 3.8))
        for g, off in zip(names, _offsets(len(names)), strict=True):
            _errorbar(ax, xs, [group_proportions(m, "test", cfg).get(g) for m in its], offset=off, label=g)
        _mark_best(ax, best)
        _finish(ax, xs, "test accuracy (Wilson 95 %)", _title(summary) + " — per group")
        written.append(_save(fig, out / "per_group.png"))
    return written


def _train_prop(m: dict[str, Any], key: str) -> Proportion | None:
    k, n = m.get(key), m.get("train_n")
    return Proportion(int(k), int(n)) if k is not None and n else None


def _after_rationalization(m: dict[str, Any]) -> Proportion | None:
    k, n = m.get("train_correct_before_rationalization"), m.get("train_n")
    if k is None or not n or m.get("rationalization_correct") is None:
        return None
    return Proportion(int(k) + int(m["rationalization_correct"]), int(n))


def _acceptance(m: dict[str, Any]) -> Proportion | None:
    k, n = m.get("rationalization_correct"), m.get("rationalization_attempted")
    return Proportion(int(k), int(n)) if k is not None and n else None


def plot_compare(runs: dict[str, dict[str, Any]], out_file: str | Path, *, group: str | None = None) -> Path:
    """Several runs (label → metrics.json summary) in one test-accuracy-per-iteration plot, with Wilson
    95 % error bars; a large hollow marker rings each run's best iteration (on dev)."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(6.5, 4.2))
    all_x: set[int] = set()
    for (label, summary), off in zip(runs.items(), _offsets(len(runs), 0.3), strict=True):
        its = sorted(summary["iterations"], key=lambda m: m["iteration"])
        xs = [m["iteration"] for m in its]
        all_x.update(xs)
        props = [proportion(m, "test", group, summary.get("config")) for m in its]
        line = _errorbar(ax, xs, props, offset=off, label=label)
        best = best_iteration(summary, group)
        if line is not None and best is not None and best.test is not None and best.test.n:
            ax.plot([best.iteration + off], [best.test.correct / best.test.n], marker="o", markersize=13, markerfacecolor="none",
                    markeredgewidth=1.5, color=line.lines[0].get_color(), linestyle="none")
    ax.plot([], [], marker="o", markersize=10, markerfacecolor="none", color="0.3", linestyle="none",
            label="best iteration (dev; test if no dev)")
    _finish(ax, sorted(all_x), "test accuracy (Wilson 95 %)" + (f" — {group}" if group else ""), "")
    return _save(fig, Path(out_file))


def plot_aggregate(agg: dict[str, Any], out_dir: str | Path) -> list[Path]:
    """``aggregate.png``: the pooled test accuracy over seeds (Wilson band) and each seed's accuracy;
    ``aggregate_per_group.png`` (when groups exist): the pooled accuracy per group with Wilson bars."""
    plt = _plt()
    its = sorted(agg["iterations"], key=lambda m: m["iteration"])
    xs = [m["iteration"] for m in its]
    best = best_iteration(agg)
    title = f"{_title(agg)} — {len(agg.get('seeds', []))} seeds pooled"
    fig, ax = plt.subplots(figsize=(5.5, 3.8))
    pooled = [proportion(m, "test") for m in its]
    pts = [(x, p) for x, p in zip(xs, pooled, strict=True) if p is not None and p.n]
    if pts:
        ax.fill_between([x for x, _ in pts], [p.interval[0] for _, p in pts], [p.interval[1] for _, p in pts],
                        alpha=0.2, label="pooled: Wilson 95 %")
        ax.plot([x for x, _ in pts], [p.correct / p.n for _, p in pts], marker="o", linewidth=2, label="pooled over seeds")
    for s in agg.get("seeds", []):
        ys = [(m["iteration"], m.get("test_accuracy_by_seed", {}).get(str(s))) for m in its]
        ys = [(x, y) for x, y in ys if y is not None]
        ax.plot([x for x, _ in ys], [y for _, y in ys], linewidth=0.9, alpha=0.7, marker=".", label=f"seed {s}")
    _mark_best(ax, best)
    _finish(ax, xs, "test accuracy", title)
    written = [_save(fig, Path(out_dir) / "aggregate.png")]
    names = groups(agg)
    if names:
        fig, ax = plt.subplots(figsize=(5.5, 3.8))
        for g, off in zip(names, _offsets(len(names)), strict=True):
            _errorbar(ax, xs, [group_proportions(m, "test").get(g) for m in its], offset=off, label=g)
        _mark_best(ax, best)
        _finish(ax, xs, "test accuracy (pooled, Wilson 95 %)", title + " — per group")
        written.append(_save(fig, Path(out_dir) / "aggregate_per_group.png"))
    return written


def _title(summary: dict[str, Any]) -> str:
    c = summary["config"]
    kind = c["baseline"] if c["baseline"] != "star" else ("STaR" if c["rationalization"] else "STaR w/o rationalization")
    return f"{c['task']} · {c['model'].split('/')[-1]} · {kind}"


def plot_digits(rep: dict[str, Any], seed: str, out: str | Path, arms: Sequence[str] | None = None) -> Path:
    """The paper's Figure 4 for one seed: test accuracy per digit count, one line per iteration, one panel per arm."""
    plt = _plt()
    runs = rep["seeds"][seed]
    names = [a for a in (arms or runs) if a in runs]
    fig, axes = plt.subplots(1, len(names), figsize=(3.6 * len(names), 3.4), sharey=True, squeeze=False)
    for ax, arm in zip(axes[0], names, strict=True):
        r = runs[arm]
        its = r["iterations"]
        cmap = plt.get_cmap("viridis")
        for i, it in enumerate(its):
            cells = r["test_by_iteration"].get(str(it), {})
            gs = sorted(cells, key=group_key)
            xs = [int(g.split('-')[0]) for g in gs]
            ys = [cells[g]["accuracy"] or 0.0 for g in gs]
            lo = [y - cells[g]["ci95"][0] for y, g in zip(ys, gs, strict=True)]
            hi = [cells[g]["ci95"][1] - y for y, g in zip(ys, gs, strict=True)]
            style = {"linewidth": 2.2} if it == r["chosen_iteration"] else {"linewidth": 1.0}
            ax.errorbar(xs, ys, yerr=[lo, hi], marker="o", markersize=3, capsize=2, color=cmap(i / max(1, len(its) - 1)),
                        label=f"iter {it}" + (" (chosen on dev)" if it == r["chosen_iteration"] else ""), **style)
        ax.axvline(r["k"] + 0.5, color="0.5", linestyle=":", linewidth=1)
        ax.text(r["k"] + 0.6, 1.02, "beyond k", fontsize=7, color="0.4")
        ax.set_title(f"{arm}", fontsize=9)
        ax.set_xlabel("digits")
        ax.set_ylim(-0.02, 1.08)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=6, loc="lower left")
    axes[0][0].set_ylabel("test accuracy (Wilson 95 %)")
    fig.suptitle(f"STaR from a from-scratch base, seed {seed}: accuracy per digit count by iteration", fontsize=9)
    return _save(fig, Path(out))


def plot_base_curves(train_rows: list[dict[str, Any]], dev_rows: list[dict[str, Any]], out: str | Path, title: str) -> Path:
    """``star base``'s curves: loss per logged step above, dev accuracy per digit count at each gate check below."""
    plt = _plt()
    fig, (ax_loss, ax_dev) = plt.subplots(2, 1, figsize=(7, 6), sharex=True)
    pts = [(r["step"], r["loss"]) for r in train_rows if "loss" in r]
    if pts:
        ax_loss.plot(*zip(*pts, strict=True), lw=1)
        ax_loss.set_yscale("log")
    ax_loss.set_ylabel("training loss")
    ax_loss.set_title(title)
    for g in sorted({g for r in dev_rows for g in r["dev_correct_by_group"]}, key=group_key):
        cells = [(r["step"], r["dev_correct_by_group"][g]) for r in dev_rows if g in r["dev_correct_by_group"]]
        ax_dev.plot([x for x, _ in cells], [c / n if n else 0.0 for _, (c, n) in cells], marker="o", ms=3, label=g)
    learnt = [r["step"] for r in dev_rows if r.get("learnt")]
    if learnt:
        ax_dev.axvline(learnt[0], color="grey", ls="--", lw=1, label=f"range learnt (step {learnt[0]})")
    ax_dev.set_ylim(-0.02, 1.02)
    ax_dev.set_xlabel("optimizer step")
    ax_dev.set_ylabel("dev accuracy (greedy)")
    ax_dev.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return Path(out)
