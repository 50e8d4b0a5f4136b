"""STaR on real data (issue 30, item 5): MAWPS with the embedded SmolLM2-135M-Instruct, arms side by side, resumable.

    python experiments/star_mawps.py                                   # run / resume every arm (one GPU: --parallel 1)
    python experiments/star_mawps.py --report docs/star-results/real_data/mawps   # report.json, report.md, plot, rows

Each arm is one ``thoughtsource star run --config configs/star/mawps/run.yaml --out ROOT/ARM --resume [flags]``;
a killed experiment is continued by running this again (every run resumes from its last finished step and its
completion store).  Logs go to ROOT/logs/.  The arms:

    star       answer filter + rationalization (the paper)
    verified   the verified filter (the rationale's arithmetic checks out and uses the question's numbers)
    norat      no rationalization
    direct     question -> answer, no rationale, the same optimizer steps and batch as star (matched compute)
    gold       the dataset's reference rationales (an upper bound), the same steps
    star_k4    star with 4 rationales per problem at temperature 0.7, every distinct correct one kept (ReST-EM)

Few-shot is iteration 0 of every run (the base model, 4-shot, greedy; identical in all arms).  The report chooses
each arm's iteration on dev (highest dev accuracy, ties: earliest) and compares on the fixed test set, paired,
with the exact McNemar test: few-shot against each arm, and star (and star_k4, verified) against direct.
Raw files come from ``--data`` (else $THOUGHTSOURCE_DATA, else shared/data beside or above the repository).
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
ARMS: dict[str, list[str]] = {
    "star": [],
    "verified": ["--filter", "verified"],
    "norat": ["--no-rationalization"],
    "direct": ["--baseline", "direct"],
    "gold": ["--baseline", "gold"],
    "star_k4": ["--samples", "4"],
}
#: the paired comparisons beside few-shot vs each arm: (A, B) at their dev-chosen iterations
VERSUS = (("star", "direct"), ("star_k4", "direct"), ("verified", "direct"), ("star", "norat"), ("gold", "star"))


def _cli() -> list[str]:
    exe = Path(sys.executable).with_name("thoughtsource")
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "thoughtsource"]


def _data_dir(given: Path | None) -> Path | None:
    if given is not None:
        return given
    if os.environ.get("THOUGHTSOURCE_DATA"):
        return Path(os.environ["THOUGHTSOURCE_DATA"])
    return next((d for d in (REPO / "shared" / "data", REPO.parent / "shared" / "data") if d.is_dir()), None)


def run_arms(root: Path, arms: list[str], config: Path, data: Path | None, extra: list[str]) -> int:
    env = {**os.environ}
    if data is not None:
        env["THOUGHTSOURCE_DATA"] = str(data)
    failed = []
    for arm in arms:  # one at a time: each run holds the GPU for itself
        log = root / "logs" / f"{arm}.log"
        log.parent.mkdir(parents=True, exist_ok=True)
        cmd = [*_cli(), "star", "run", "--config", str(config), "--out", str(root / arm), "--resume", *ARMS[arm], *extra]
        print(f"[{time.strftime('%H:%M:%S')}] start {arm}: {' '.join(cmd[1:])}  (log: {log})", flush=True)
        t0 = time.perf_counter()
        with log.open("a", encoding="utf-8") as fh:
            rc = subprocess.run(cmd, stdout=fh, stderr=subprocess.STDOUT, env=env, cwd=REPO, check=False).returncode
        print(f"[{time.strftime('%H:%M:%S')}] {arm}: {'done' if rc == 0 else f'FAILED (exit {rc})'} in "
              f"{time.perf_counter() - t0:.0f} s", flush=True)
        if rc != 0:
            failed.append(arm)
    if failed:
        print(f"failed arms: {', '.join(failed)} (see {root / 'logs'})", file=sys.stderr)
    return 1 if failed else 0


def _rows(run: Path, n: int) -> list[dict[str, Any]]:
    from thoughtsource.io import read_json

    return read_json(run / f"iter_{n}" / "test.json")["rows"]


def _correct(rows: list[dict[str, Any]]) -> dict[str, bool]:
    return {r["id"]: bool(r["correct"]) for r in rows}


def report(root: Path, out: Path, arms: list[str]) -> dict[str, Any]:
    """report.json / report.md / test_accuracy.png / test_rows.json.gz / ARM_metrics.json from the finished runs."""
    from thoughtsource.io import write_json
    from thoughtsource.star.analysis import compare_runs as star_report
    from thoughtsource.star.analysis.accuracy import best_iteration
    from thoughtsource.star.analysis.bootstrap_experiment import paired
    from thoughtsource.star.analysis.plots import plot_compare

    summaries = {a: star_report.load_run(root / a) for a in arms if (root / a / "metrics.json").is_file()}
    if not summaries:
        raise SystemExit(f"no finished arm under {root} (expected {', '.join(f'{a}/metrics.json' for a in arms)})")
    first = next(iter(summaries))
    fewshot = {"config": {**summaries[first]["config"], "baseline": "fewshot"}, "iterations": summaries[first]["iterations"][:1]}
    runs = {"fewshot": fewshot, **summaries}
    chosen = {a: best_iteration(s) for a, s in summaries.items()}
    correct = {a: _correct(_rows(root / a, b.iteration)) for a, b in chosen.items() if b is not None}
    correct["fewshot"] = _correct(_rows(root / first, 0))
    tests: dict[str, Any] = {}
    for a in summaries:
        if a in correct:  # A vs few-shot: only_a = problems A gets right and few-shot wrong
            tests[f"{a} vs fewshot"] = paired(correct[a], correct["fewshot"])
    for a, b in VERSUS:
        if a in correct and b in correct:
            tests[f"{a} vs {b}"] = paired(correct[a], correct[b])
    rep = {
        "root": str(root), "arms": list(summaries), "fewshot_from": first,
        "chosen": {a: b.to_dict() if b else None for a, b in chosen.items()},
        "paired_tests": tests,
        "test": "exact McNemar (two-sided binomial on the discordant pairs), each arm at its dev-chosen iteration",
        "comparison": star_report.comparison(runs, "fewshot"),
        "per_iteration": {a: [{"iteration": m["iteration"], "test": [m.get("test_correct"), m.get("test_n")],
                               "dev": [m.get("dev_correct"), m.get("dev_n")], "kept": m.get("kept"), "steps": m.get("steps"),
                               "samples": (m.get("filter") or {}).get("samples")} for m in s["iterations"]]
                          for a, s in summaries.items()},
    }
    out.mkdir(parents=True, exist_ok=True)
    write_json(out / "report.json", rep)
    lines = [f"# STaR on MAWPS (SmolLM2-135M-Instruct), {', '.join(summaries)}", "",
             "Each arm at its dev-chosen iteration; paired exact McNemar on the fixed test set "
             "(only_a: right in A only; only_b: right in B only).", "",
             "| comparison | n | only A | only B | difference | p |", "|---|---|---|---|---|---|"]
    for name, t in tests.items():
        lines.append(f"| {name} | {t['n']} | {t['only_a']} | {t['only_b']} | {t['difference']} | {t['p_value']:.3g} |")
    (out / "report.md").write_text("\n".join(lines) + "\n\n" + star_report.markdown(runs, "fewshot"), encoding="utf-8")
    plot_compare(runs, out / "test_accuracy.png")
    rows = {a: {str(m["iteration"]): [{k: r.get(k) for k in ("id", "answer", "text", "predicted", "correct")}
                                      for r in _rows(root / a, m["iteration"])] for m in s["iterations"]}
            for a, s in summaries.items()}
    with gzip.open(out / "test_rows.json.gz", "wt", encoding="utf-8") as fh:
        json.dump(rows, fh)
    for a in summaries:
        write_json(out / f"{a}_metrics.json", summaries[a])
    return rep


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--root", type=Path, default=REPO / "star_runs" / "mawps")
    ap.add_argument("--arms", default=",".join(ARMS))
    ap.add_argument("--config", type=Path, default=REPO / "configs" / "star" / "mawps" / "run.yaml")
    ap.add_argument("--data", type=Path, default=None, help="the raw data folder (default: $THOUGHTSOURCE_DATA, shared/data)")
    ap.add_argument("--report", type=Path, default=None, help="write the report into this folder instead of running")
    ap.add_argument("extra", nargs="*", help="more `star run` options after --, for every arm (e.g. -- --threads 1)")
    args = ap.parse_args()
    arms = [a for a in args.arms.split(",") if a.strip()]
    unknown = [a for a in arms if a not in ARMS]
    if unknown:
        ap.error(f"unknown arms {unknown}; known: {', '.join(ARMS)}")
    if args.report is not None:
        rep = report(args.root, args.report, arms)
        print(json.dumps(rep["paired_tests"], indent=1))
        return 0
    return run_arms(args.root, arms, args.config, _data_dir(args.data), args.extra)


if __name__ == "__main__":
    sys.exit(main())
