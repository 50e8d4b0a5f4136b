"""Several STaR runs ("arms") side by side: accuracy ± Wilson interval per iteration, the best
iteration per arm (chosen on dev, reported on test), and each arm against a reference arm and
against its own iteration 0 (difference, Newcombe interval, Fisher's exact p-value, significant at
0.05 or not).  One set of tables (:func:`tables`) rendered as Markdown (:func:`markdown`, for
``docs/star-results.md``), as rich tables (``star compare``) or as JSON (:func:`comparison`).

An arm is a run directory (``metrics.json``), a multi-seed directory (``aggregate.json``) or a
metrics JSON file (``docs/star-results/star_metrics.json``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...errors import ConfigError
from ...io import read_json
from .accuracy import (
    ALPHA,
    TEST_NAME,
    Best,
    Proportion,
    best_iteration,
    claim_points,
    compare,
    fmt_p,
    group_proportions,
    groups,
    proportion,
    proportion_at,
    run_stats,
)

Runs = dict[str, dict[str, Any]]


# --------------------------------------------------------------------------- loading
def load_run(path: str | Path) -> dict[str, Any]:
    """A run summary from a metrics JSON file, a run directory or a multi-seed directory."""
    p = Path(path)
    for candidate in (p, p / "metrics.json", p / "aggregate.json"):
        if candidate.is_file():
            data = read_json(candidate)
            if not isinstance(data, dict) or "iterations" not in data:
                raise ConfigError(f"{candidate} is not a STaR metrics summary (no 'iterations')")
            return data
    its = sorted(p.glob("iter_*/metrics.json"), key=lambda f: int(f.parent.name.removeprefix("iter_")))
    if its and (p / "config.json").is_file():  # a run still in its first iteration: the per-iteration files
        return {"config": read_json(p / "config.json"), "iterations": [read_json(f) for f in its]}
    raise ConfigError(f"no STaR run at {p}: expected a metrics JSON file or a folder with metrics.json or aggregate.json")


def parse_arm(spec: str) -> tuple[str, Path]:
    """``NAME=PATH`` → (NAME, PATH); a bare PATH is named after its folder (or file stem, ``_metrics`` dropped)."""
    if "=" in spec:
        name, _, path = spec.partition("=")
        return name, Path(path)
    p = Path(spec)
    return (p.stem.removesuffix("_metrics") if p.is_file() else p.name), p


def load_arms(specs: Sequence[str]) -> Runs:
    runs: Runs = {}
    for spec in specs:
        name, path = parse_arm(spec)
        if name in runs:
            raise ConfigError(f"two arms are named {name!r}: name them NAME=DIR")
        runs[name] = load_run(path)
    return runs


# --------------------------------------------------------------------------- the comparison as data
def _reference(runs: Runs, reference: str | None) -> str:
    if not runs:
        raise ConfigError("no runs to compare")
    if reference is None:
        return next(iter(runs))
    if reference not in runs:
        raise ConfigError(f"--reference {reference!r} is not one of the arms: {', '.join(runs)}")
    return reference


def comparison(runs: Runs, reference: str | None = None, group: str | None = None) -> dict[str, Any]:
    """Everything ``star compare --json`` prints: each arm's :func:`.accuracy.run_stats` and each arm
    against the reference at the final and at the best iteration (accuracies as {correct, n, accuracy, ci95})."""
    ref = _reference(runs, reference)
    vs_ref: dict[str, Any] = {}
    ref_pts = claim_points(runs[ref], group)
    for name, s in runs.items():
        if name == ref:
            continue
        pts = claim_points(s, group)
        vs_ref[name] = {}
        for which in ("final", "best"):
            a, b = pts[which], ref_pts[which]
            c = compare(proportion_at(s, a, group), proportion_at(runs[ref], b, group))
            if c is not None and a is not None and b is not None:
                vs_ref[name][which] = {"iteration": a["iteration"], "reference_iteration": b["iteration"], **c.to_dict()}
    return {"reference": ref, "group": group, "test": TEST_NAME, "alpha": ALPHA,
            "interval": "Wilson 95 % (accuracies), Newcombe hybrid score 95 % (differences)",
            "arms": {name: run_stats(s, group) for name, s in runs.items()}, "vs_reference": vs_ref}


# --------------------------------------------------------------------------- tables
@dataclass
class Table:
    title: str
    headers: list[str]
    rows: list[list[str]]
    notes: list[str] = field(default_factory=list)

    def markdown(self) -> str:
        def cell(x: str) -> str:
            return x.replace("|", "\\|")

        lines = [f"### {self.title}", "", "| " + " | ".join(map(cell, self.headers)) + " |",
                 "|" + "---|" * len(self.headers)]
        lines += ["| " + " | ".join(map(cell, r)) + " |" for r in self.rows]
        if self.notes:
            lines += ["", *self.notes]
        return "\n".join(lines)


def _yes_no(c: dict[str, Any]) -> str:
    return "yes" if c["significant_at_0.05"] else "no"


def _fmt_cmp(c: dict[str, Any]) -> list[str]:
    lo, hi = c["difference_ci95"]
    return [f"{c['difference']:+.3f} [{lo:+.3f}, {hi:+.3f}]", fmt_p(c["p_value"]), _yes_no(c)]


def _fmt_prop(d: dict[str, Any] | None) -> str:
    if not d or not d["n"]:
        return "—"
    return Proportion(int(d["correct"]), int(d["n"])).fmt()  # from the counts, not the rounded accuracy


def accuracy_table(runs: Runs, group: str | None = None, split: str = "test") -> Table:
    """Iterations × arms: correct/n = accuracy [Wilson 95 %]; ★ marks each arm's best iteration (on dev)."""
    cmp = comparison(runs, group=group)
    its = sorted({m["iteration"] for s in runs.values() for m in s["iterations"]})
    rows = []
    for n in its:
        row = [str(n)]
        for arm in cmp["arms"].values():
            cell = next((_fmt_prop(i.get(split)) for i in arm["iterations"] if i["iteration"] == n), "")
            if arm["best"] and arm["best"]["iteration"] == n and cell not in ("", "—"):
                cell += " ★"
            row.append(cell)
        rows.append(row)
    what = f"{split} accuracy" + (f", {group}" if group else "")
    return Table(f"{what.capitalize()} per iteration", ["iteration", *runs], rows,
                 [f"correct/n = accuracy [Wilson 95 % interval]; ★ best iteration of the arm ({_chosen_on(cmp)})."])


def _chosen_on(cmp: dict[str, Any]) -> str:
    ons = {a["best"]["chosen_on"] for a in cmp["arms"].values() if a["best"]}
    if ons == {"dev"}:
        return "highest dev accuracy, ties → earliest"
    if ons == {"test"}:
        return "no dev split: highest TEST accuracy, ties → earliest — optimistic"
    return "highest dev accuracy where the arm has a dev split, otherwise highest test accuracy (optimistic)"


def group_table(summary: dict[str, Any], name: str = "") -> Table | None:
    """One arm's iterations × groups (the paper's Figure 4 as a table)."""
    names = groups(summary)
    if not names:
        return None
    cfg = summary.get("config")
    rows = []
    for m in sorted(summary["iterations"], key=lambda m: m["iteration"]):
        gp = group_proportions(m, "test", cfg)
        rows.append([str(m["iteration"]), *(gp[g].fmt() if g in gp else "—" for g in names)])
    return Table(f"Test accuracy per group{': ' + name if name else ''}", ["iteration", *names], rows)


def best_table(runs: Runs, group: str | None = None) -> Table:
    rows = []
    for name, s in runs.items():
        b: Best | None = best_iteration(s, group)
        if b is None:
            rows.append([name, "—", "—", "—", "—"])
            continue
        rows.append([name, str(b.iteration), b.chosen_on, b.dev.fmt() if b.dev else "—", b.test.fmt() if b.test else "—"])
    return Table("Best iteration per arm" + (f" ({group})" if group else ""),
                 ["arm", "best iteration", "chosen on", "dev accuracy", "test accuracy"], rows,
                 ["Chosen on the dev split (highest accuracy, ties → earliest) and reported on test; "
                  "an arm without a dev split is chosen on test, which overstates its accuracy."])


def reference_table(runs: Runs, reference: str | None = None, group: str | None = None) -> Table:
    cmp = comparison(runs, reference, group)
    rows = []
    for name, by in cmp["vs_reference"].items():
        for which in ("final", "best"):
            c = by.get(which)
            if c is not None:
                rows.append([f"{name} − {cmp['reference']}", which, f"{c['iteration']} vs {c['reference_iteration']}",
                             _fmt_prop(c["a"]), _fmt_prop(c["b"]), *_fmt_cmp(c)])
    return Table(f"Each arm against {cmp['reference']}" + (f" ({group})" if group else ""),
                 ["comparison", "at", "iterations", "arm", "reference", "difference [95 %]", "p", "significant at 0.05"],
                 rows, [f"Test accuracy; p: {TEST_NAME}; difference interval: Newcombe hybrid score."])


def vs_first_table(runs: Runs, group: str | None = None) -> Table:
    cmp = comparison(runs, group=group)
    rows = []
    for name, arm in cmp["arms"].items():
        for which in ("final", "best"):
            c = arm["vs_iteration_0"].get(which)
            if c is not None:
                rows.append([name, which, f"{c['iteration']} vs 0", _fmt_prop(c["a"]), _fmt_prop(c["b"]), *_fmt_cmp(c)])
    return Table("Each arm against its iteration 0 (the few-shot model)" + (f" ({group})" if group else ""),
                 ["arm", "at", "iterations", "accuracy", "iteration 0", "difference [95 %]", "p", "significant at 0.05"],
                 rows, [f"p: {TEST_NAME}; the two accuracies share the test problems, for which this unpaired test is conservative."])


def seeds_table(runs: Runs) -> Table | None:
    rows = []
    for name, s in runs.items():
        if "seeds" not in s:
            continue
        for m in s["iterations"]:
            sp = m.get("test_accuracy_seeds") or {}
            per = m.get("test_accuracy_by_seed") or {}
            mean, sd = sp.get("mean"), sp.get("sd")
            pooled = proportion(m, "test")
            rows.append([name, str(m["iteration"]), ", ".join(f"{v:.3f}" for v in per.values()),
                         "—" if mean is None else f"{mean:.3f}", "—" if sd is None else f"{sd:.3f}",
                         _fmt_prop(pooled.to_dict() if pooled else None)])
    if not rows:
        return None
    return Table("Seeds", ["arm", "iteration", "test accuracy per seed", "mean", "sd", "pooled"], rows,
                 ["Pooled: sums over seeds with a Wilson interval that assumes independent problems — too narrow when "
                  "seeds share the test set; the sd across seeds is the run-to-run variation."])


def filter_table(runs: Runs) -> Table | None:
    rows = []
    for name, s in runs.items():
        for m in sorted(s["iterations"], key=lambda m: m["iteration"]):
            f = m.get("filter")
            if not f:
                continue
            row = [name, str(m["iteration"]), str(f.get("name", ""))]
            for kind in ("generate", "rationalize"):
                c = f.get(kind) or {}
                k, r = c.get("answer_correct"), c.get("rejected")
                row += ["—" if k is None else str(k), "—" if k is None or r is None else Proportion(int(r), int(k)).fmt()]
            rows.append(row)
    if not rows:
        return None
    return Table("Rationale filter", ["arm", "iteration", "filter", "generated: answer correct", "of those rejected",
                                      "rationalized: answer correct", "of those rejected"], rows,
                 ["Rejected: rationales with the right answer that the filter drops (share with Wilson 95 % interval)."])


def filter_examples(runs: Runs, per_arm: int = 3, max_chars: int = 200) -> Table | None:
    rows = []
    for name, s in runs.items():
        shown = 0
        for m in sorted(s["iterations"], key=lambda m: m["iteration"]):
            for ex in (m.get("filter") or {}).get("examples") or []:
                if shown >= per_arm:
                    break
                text = " ".join(str(ex.get("text", "")).split())
                rows.append([name, str(m["iteration"]), str(ex.get("kind", "")), str(ex.get("reason", "")),
                             "`" + (text[:max_chars] + " …" if len(text) > max_chars else text).replace("`", "'") + "`"])
                shown += 1
    if not rows:
        return None
    return Table("Rejected rationales (examples)", ["arm", "iteration", "kind", "reason", "text"], rows)


def tables(runs: Runs, reference: str | None = None, group: str | None = None, *, per_group: bool = True) -> list[Table]:
    """Every table of the report, in order; those without data are left out."""
    out: list[Table | None] = [accuracy_table(runs, group)]
    if any(proportion(m, "dev") for s in runs.values() for m in s["iterations"]):
        out.append(accuracy_table(runs, group, split="dev"))
    out += [best_table(runs, group), vs_first_table(runs, group)]
    if len(runs) > 1:
        out.append(reference_table(runs, reference, group))
    if per_group and group is None:
        out += [group_table(s, name) for name, s in runs.items()]
    out += [seeds_table(runs), filter_table(runs), filter_examples(runs)]
    return [t for t in out if t is not None and t.rows]


def markdown(runs: Runs, reference: str | None = None, group: str | None = None, *, title: str | None = None) -> str:
    """The report's Markdown tables for ``runs`` (name → summary)."""
    parts = [f"## {title}"] if title else []
    parts += [t.markdown() for t in tables(runs, reference, group)]
    return "\n\n".join(parts) + "\n"
