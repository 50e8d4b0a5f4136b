"""The bootstrap experiment's report: does the STaR loop lift a base beyond the digit counts it was taught?

An experiment is a folder ``ROOT/seed_<s>/<arm>/`` of STaR runs (``star``, ``verified``, ``norat``,
``direct``, ...) that all start from one base model per seed (``ROOT/base_<s>/``, built by ``thoughtsource
star base``; its ``thoughtsource_base.json`` names k, the largest digit count it was trained on in
quantity).  Every run is scored on the same fixed test problems, so two iterations or two arms are
compared **paired**, problem by problem, with the exact McNemar test (a two-sided binomial test on the
discordant pairs); every accuracy carries its Wilson 95 % interval.

Per seed and arm the iteration is chosen on dev (highest dev accuracy over the digit counts above k;
ties: earliest) and reported on test.  Digit counts are split by what the base saw in gold: **taught**
(``data.digits``, in quantity), **seen** (a few gold examples, ``data.extra``) and **never seen** (above every
digit count with gold).  The acceptance rule of the experiment (issue 30):

    in at least two of three seeds, the ``star`` arm at its dev-chosen iteration reaches >= 90 % test accuracy
    on at least two never-seen digit counts (n >= 200 each).

The earlier rule (beats iteration 0 on two digit counts above k, Wilson intervals apart) is reported beside it.

:func:`report` computes all of it from the run folders (``metrics.json`` and each iteration's
``test.json`` rows); :func:`thoughtsource.star.analysis.plots.plot_digits` draws the paper's Figure 4
(accuracy per digit count by iteration, one panel per arm).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from ...io import read_json
from ...statistics import mcnemar_exact
from .accuracy import Proportion, digits_of, fmt_p, group_key, learnt_range

MIN_N = 200
NEVER_SEEN_TARGET = 0.9
ARM_ORDER = ("star", "verified", "norat", "direct")


# --------------------------------------------------------------------------- paired test
def paired(a: dict[str, bool], b: dict[str, bool]) -> dict[str, Any]:
    """A against B on the problems both answered: discordant counts, the difference and McNemar's p."""
    ids = sorted(set(a) & set(b))
    only_a = sum(a[i] and not b[i] for i in ids)
    only_b = sum(b[i] and not a[i] for i in ids)
    n = len(ids)
    return {"n": n, "only_a": only_a, "only_b": only_b,
            "difference": round((only_a - only_b) / n, 4) if n else None, "p_value": float(f"{mcnemar_exact(only_a, only_b):.6g}")}


# --------------------------------------------------------------------------- loading
def test_rows(run: Path, iteration: int) -> dict[str, dict[str, bool]]:
    """``{group: {problem id: correct}}`` of one iteration's test set."""
    out: dict[str, dict[str, bool]] = {}
    for r in read_json(run / f"iter_{iteration}" / "test.json")["rows"]:
        out.setdefault(r["group"], {})[r["id"]] = bool(r["correct"])
    return out


def find_runs(root: Path) -> dict[int, dict[str, Path]]:
    """``{seed: {arm: run folder}}`` for every ``seed_<s>/<arm>/metrics.json`` under ``root``."""
    out: dict[int, dict[str, Path]] = {}
    for seed_dir in sorted(root.glob("seed_*")):
        if not seed_dir.name.removeprefix("seed_").isdigit():
            continue
        arms = {p.parent.name: p.parent for p in sorted(seed_dir.glob("*/metrics.json"))}
        if arms:
            out[int(seed_dir.name.removeprefix("seed_"))] = dict(sorted(arms.items(), key=lambda kv: _arm_rank(kv[0])))
    return out


def _arm_rank(arm: str) -> tuple[int, str]:
    return (ARM_ORDER.index(arm) if arm in ARM_ORDER else len(ARM_ORDER), arm)


def base_info(root: Path, seed: int, summary: dict[str, Any]) -> dict[str, Any] | None:
    """The run's base's ``thoughtsource_base.json`` (beside the base model the run names, else ``ROOT/base_<s>``)."""
    model = Path(summary["config"]["model"])
    for folder in (model, root / f"base_{seed}"):
        info = folder / "thoughtsource_base.json"
        if info.is_file():
            return dict(read_json(info))
    return None


def base_k(root: Path, seed: int, summary: dict[str, Any]) -> int | None:
    """k of the run's base: the largest digit count it was taught in quantity."""
    info = base_info(root, seed, summary)
    return None if info is None else int(info["k"])


def gold_ceiling(info: dict[str, Any]) -> int:
    """The largest digit count with any gold example in the base's training data (``data.by_digits``, the counts
    the base was built from; else the recipe's ``digits`` and ``extra``): digit counts above it were never seen."""
    counts = (info.get("data") or {}).get("by_digits")
    if counts:
        return max(int(d) for d, n in counts.items() if int(n) > 0)
    recipe = (info.get("config") or {}).get("data") or {}
    extra = [int(d) for d, share in (recipe.get("extra") or {}).items() if float(share) > 0]
    return max([int((recipe.get("digits") or [int(info["k"])])[-1]), int(info["k"]), *extra])


# --------------------------------------------------------------------------- per run
def _dev_above(m: dict[str, Any], k: int) -> Proportion | None:
    cells = [v for g, v in (m.get("dev_correct_by_group") or {}).items() if digits_of(g) > k]
    if not cells:
        return None
    return Proportion(sum(c for c, _ in cells), sum(n for _, n in cells))


def chosen_iteration(summary: dict[str, Any], k: int) -> int:
    """The iteration with the highest dev accuracy over the digit counts above k (ties: earliest)."""
    best, best_acc = 0, -1.0
    for m in sorted(summary["iterations"], key=lambda m: m["iteration"]):
        p = _dev_above(m, k)
        acc = p.correct / p.n if p is not None and p.n else -1.0
        if acc > best_acc:
            best, best_acc = m["iteration"], acc
    return best


def kept_audit(run: Path, summary: dict[str, Any]) -> list[dict[str, Any]]:
    """Per iteration: rationales kept by the answer filter and how many of them pass the verified check."""
    rows = []
    for m in sorted(summary["iterations"], key=lambda m: m["iteration"]):
        f = m.get("filter")
        if not m["iteration"] or not f:
            continue
        answer_correct = f["generate"]["answer_correct"] + f["rationalize"]["answer_correct"]
        verified = answer_correct - f["generate"]["rejected"] - f["rationalize"]["rejected"]
        rows.append({"iteration": m["iteration"], "train_n": m.get("train_n"), "answer_correct": answer_correct,
                     "verified": verified, "rationalized_correct": f["rationalize"]["answer_correct"],
                     "kept": m.get("kept"), "filter": f["name"]})
    return rows


def _cell(c: int, n: int) -> dict[str, Any]:
    return Proportion(c, n).to_dict()


def run_report(run: Path, summary: dict[str, Any], k: int) -> dict[str, Any]:
    its = sorted(m["iteration"] for m in summary["iterations"])
    chosen = chosen_iteration(summary, k)
    rows0, rows_c = test_rows(run, 0), test_rows(run, chosen)
    per_digit = {}
    for g in sorted(rows0, key=group_key):
        a, b = rows_c.get(g, {}), rows0[g]
        pa, pb = Proportion(sum(a.values()), len(a)), Proportion(sum(b.values()), len(b))
        apart = bool(pa.n and pb.n and pa.interval[0] > pb.interval[1])
        per_digit[g] = {"digits": digits_of(g), "iteration_0": pb.to_dict(), "chosen": pa.to_dict(),
                        "vs_iteration_0": paired(a, b), "intervals_apart": apart}
    by_iteration = {}
    for m in sorted(summary["iterations"], key=lambda m: m["iteration"]):
        by_iteration[str(m["iteration"])] = {g: _cell(*v) for g, v in sorted((m.get("test_correct_by_group") or {}).items(),
                                                                              key=lambda kv: group_key(kv[0]))}
    return {"run": str(run), "iterations": its, "chosen_iteration": chosen, "k": k, "per_digit": per_digit,
            "test_by_iteration": by_iteration, "kept": kept_audit(run, summary)}


# --------------------------------------------------------------------------- the experiment
def report(root: str | Path, *, reference: str = "star", min_n: int = MIN_N, need: int = 2) -> dict[str, Any]:
    """Every seed's arms: chosen iteration, per-digit accuracies, McNemar against iteration 0 and against
    ``reference`` (each at its chosen iteration), the kept-data audit and the acceptance verdict."""
    root = Path(root)
    runs = find_runs(root)
    seeds: dict[str, Any] = {}
    verdicts: dict[int, bool] = {}  # seed -> the rule holds (seeds with a reference arm)
    never_verdicts: dict[int, bool] = {}  # seed -> >= NEVER_SEEN_TARGET on `need` never-seen digit counts
    for seed, arms in runs.items():
        out: dict[str, Any] = {}
        for arm, run in arms.items():
            summary = read_json(run / "metrics.json")
            k = base_k(root, seed, summary)
            if k is None or not (run / "iter_0" / "test.json").is_file():
                continue
            out[arm] = run_report(run, summary, k)
            info = base_info(root, seed, summary)
            out[arm]["gold_ceiling"] = gold_ceiling(info) if info is not None else k
            out[arm]["config"] = {key: summary["config"].get(key) for key in ("task", "baseline", "rationalization", "filter", "seed", "model")}
        ref = out.get(reference)
        if ref is not None:
            ref_rows = test_rows(Path(ref["run"]), ref["chosen_iteration"])
            for arm, r in out.items():
                if arm == reference:
                    continue
                rows = test_rows(Path(r["run"]), r["chosen_iteration"])
                r["vs_" + reference] = {g: paired(rows.get(g, {}), ref_rows[g]) for g in sorted(ref_rows, key=group_key)}
            above = [g for g, d in ref["per_digit"].items() if d["digits"] > ref["k"]]
            wins = [g for g in above if ref["per_digit"][g]["intervals_apart"]
                    and min(ref["per_digit"][g]["chosen"]["n"], ref["per_digit"][g]["iteration_0"]["n"]) >= min_n]
            ref["acceptance"] = {"digit_counts_above_k_won": wins, "needed": need, "min_n": min_n, "holds": len(wins) >= need}
            verdicts[seed] = len(wins) >= need
            never = [g for g, d in ref["per_digit"].items() if d["digits"] > ref["gold_ceiling"]]
            reached = [g for g in never if ref["per_digit"][g]["chosen"]["n"] >= min_n
                       and ref["per_digit"][g]["chosen"]["accuracy"] >= NEVER_SEEN_TARGET]
            ref["never_seen"] = {"gold_ceiling": ref["gold_ceiling"], "digit_counts": never, "reached_target": reached,
                                 "target": NEVER_SEEN_TARGET, "holds": len(reached) >= need}
            never_verdicts[seed] = len(reached) >= need
        seeds[str(seed)] = out
    bases = {}
    for seed in runs:
        base_file = root / f"base_{seed}" / "thoughtsource_base.json"
        if base_file.is_file():
            b = read_json(base_file)
            bases[str(seed)] = {"k": b["k"], "dev_correct_by_group": b["dev_correct_by_group"],
                                "learnt_range": learnt_range(b["dev_correct_by_group"], int(b["k"]))}
    learnt = [ok for seed, ok in verdicts.items() if bases.get(str(seed), {}).get("learnt_range", True)]
    never_needed = max(1, math.ceil(2 * len(never_verdicts) / 3))
    return {"root": str(root), "reference": reference, "seeds": seeds, "bases": bases,
            "never_seen_acceptance": {
                "rule": f"in >= 2 of 3 seeds, {reference} at its dev-chosen iteration reaches >= {NEVER_SEEN_TARGET:.0%} test "
                        f"accuracy on >= {need} digit counts never seen in gold (n >= {min_n})",
                "seeds_holding": sum(never_verdicts.values()), "seeds": len(never_verdicts), "seeds_needed": never_needed,
                "holds": bool(never_verdicts) and sum(never_verdicts.values()) >= never_needed},
            "acceptance": {"rule": f"in every seed, {reference} at its dev-chosen iteration beats iteration 0 on >= {need} digit "
                                   f"counts > k with non-overlapping Wilson 95% intervals and n >= {min_n}",
                           "seeds_holding": sum(verdicts.values()), "seeds": len(verdicts),
                           "holds": bool(verdicts) and all(verdicts.values()),
                           "seeds_whose_base_learnt_its_range": len(learnt),
                           "holds_where_the_base_learnt_its_range": bool(learnt) and all(learnt)}}



# --------------------------------------------------------------------------- tables
def markdown(rep: dict[str, Any]) -> str:
    """The report as Markdown tables: per seed, per arm, accuracy per digit count at iteration 0 and at the chosen one."""
    acc = rep["acceptance"]
    lines = []
    never = rep.get("never_seen_acceptance")
    if never:
        lines += [f"Acceptance (issue 30): {never['rule']}: **{'holds' if never['holds'] else 'does not hold'}** "
                  f"({never['seeds_holding']} of {never['seeds']} seeds).", ""]
    lines += [f"Earlier rule: {acc['rule']}: **{'holds' if acc['holds'] else 'does not hold'}** "
              f"({acc['seeds_holding']} of {acc['seeds']} seeds).", ""]
    failed = [seed for seed, b in rep.get("bases", {}).items() if not b["learnt_range"]]
    if failed:
        lines += [f"Bases that did not learn their own range (dev accuracy < 0.9 at some digit count <= k): seed "
                  f"{', '.join(failed)}. Over the {acc['seeds_whose_base_learnt_its_range']} seeds whose base did, the rule "
                  f"**{'holds' if acc['holds_where_the_base_learnt_its_range'] else 'does not hold'}**.", ""]
    ref = rep["reference"]
    for seed, arms in rep["seeds"].items():
        if not arms:
            continue
        groups = sorted({g for r in arms.values() for g in r["per_digit"]}, key=group_key)
        k = next(iter(arms.values()))["k"]
        ceiling = next(iter(arms.values())).get("gold_ceiling", k)
        lines += [f"#### Seed {seed} (k = {k}; gold up to {ceiling} digits, never seen above): test accuracy, iteration 0 → "
                  "dev-chosen iteration", "",
                  "| arm | chosen | " + " | ".join(groups) + " |", "|---|---|" + "---|" * len(groups)]
        for arm, r in arms.items():
            cells = []
            for g in groups:
                d = r["per_digit"].get(g)
                if d is None:
                    cells.append("—")
                    continue
                a, b = d["chosen"], d["iteration_0"]
                mark = " ✓" if d["intervals_apart"] and d["digits"] > k else ""
                mark += " ★" if d["digits"] > ceiling and d["chosen"]["n"] and d["chosen"]["accuracy"] >= NEVER_SEEN_TARGET else ""
                cells.append(f"{_cell_text(b)} → **{_cell_text(a)}**{mark} (p {fmt_p(d['vs_iteration_0']['p_value'])})")
            lines.append(f"| {arm} | {r['chosen_iteration']} | " + " | ".join(cells) + " |")
        lines += ["", f"✓: Wilson 95 % intervals apart, digit count above k; ★: never seen in gold and >= {NEVER_SEEN_TARGET:.0%}; "
                  "p: exact McNemar against iteration 0 (paired).", ""]
        others = [a for a in arms if a != ref and "vs_" + ref in arms[a]]
        if others:
            lines += [f"Against `{ref}` (each at its chosen iteration; difference = arm − {ref}, exact McNemar):", "",
                      "| arm | " + " | ".join(groups) + " |", "|---|" + "---|" * len(groups)]
            for arm in others:
                cmp = arms[arm]["vs_" + ref]
                cells = [f"{cmp[g]['difference'] or 0:+.3f} (p {fmt_p(cmp[g]['p_value'])})" if g in cmp else "—" for g in groups]
                lines.append(f"| {arm} | " + " | ".join(cells) + " |")
            lines.append("")
        audit = [(arm, row) for arm, r in arms.items() for row in r["kept"]]
        if audit:
            lines += ["Kept-data audit (training problems per iteration; answer-correct rationales, of them verified):", "",
                      "| arm | iteration | problems | answer-correct | verified | from rationalization | kept |",
                      "|---|---|---|---|---|---|---|"]
            lines += [f"| {arm} | {row['iteration']} | {row['train_n']} | {row['answer_correct']} | {row['verified']} | "
                      f"{row['rationalized_correct']} | {row['kept']} |" for arm, row in audit]
            lines.append("")
    return "\n".join(lines)


def _cell_text(d: dict[str, Any]) -> str:
    return f"{d['accuracy']:.3f} [{d['ci95'][0]:.2f}, {d['ci95'][1]:.2f}]" if d["n"] else "—"
