"""The bootstrap experiment (docs/star-results.md, top section): bases and STaR arms, resumable, side by side.

    python experiments/star_bootstrap.py --seeds 0,1,2 --parallel 2          # build / resume everything
    python experiments/star_bootstrap.py --seeds 0,1 --report docs/star-results/bootstrap   # tables, plots, metrics
    # issue 41's ablations from the committed bases: norat + verified in full, then iterations 1-2 per training seed
    python experiments/star_bootstrap.py --root star_runs/ablations --bases docs/star-results/bootstrap_v2 --arms norat_verified
    python experiments/star_bootstrap.py --root star_runs/ablations --bases docs/star-results/bootstrap_v2 \\
        --arms star,verified,norat,norat_verified --train-seeds 101,102 --iterations 2
    python experiments/star_bootstrap.py --root star_runs/ablations --bases docs/star-results/bootstrap_v2 \\
        --ablations-report docs/star-results/bootstrap_v2

For each seed s it runs, as separate processes with one torch thread each (``--parallel`` at a time):

    thoughtsource star base --config configs/star/bootstrap/base.yaml --seed s --out ROOT/base_s --resume
    thoughtsource star run  --config configs/star/bootstrap/run.yaml --model ROOT/base_s --seed s \\
                            --out ROOT/seed_s/ARM --resume  [ARM's flags]

Every command resumes where it stopped (the base from its trainer checkpoints, a run from its last
finished step and its completion store), so a killed experiment is continued by running this again.
Logs go to ROOT/logs/.  ``--report DIR`` writes report.json, report.md, one Figure-4 plot per seed and
each run's metrics.json (as seed_<s>_<arm>_metrics.json) into DIR.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
ARMS: dict[str, list[str]] = {
    "star": [],
    "verified": ["--filter", "verified"],
    "norat": ["--no-rationalization"],
    "norat_verified": ["--no-rationalization", "--filter", "verified"],
    "direct": ["--baseline", "direct"],
}


def _cli() -> list[str]:
    exe = Path(sys.executable).with_name("thoughtsource")
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "thoughtsource"]


def _run(cmd: list[str], log: Path, lock: threading.Lock) -> None:
    log.parent.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    with lock:
        print(f"[{time.strftime('%H:%M:%S')}] start {' '.join(cmd[1:])}  (log: {log})", flush=True)
    with log.open("a", encoding="utf-8") as fh:
        rc = subprocess.run(cmd, stdout=fh, stderr=subprocess.STDOUT, env=env, cwd=REPO, check=False).returncode
    with lock:
        print(f"[{time.strftime('%H:%M:%S')}] {'done' if rc == 0 else f'FAILED (exit {rc})'}: {log.name}", flush=True)
    if rc != 0:
        raise RuntimeError(f"{' '.join(cmd)} exited {rc}: see {log}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--root", type=Path, default=REPO / "star_runs" / "bootstrap")
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--arms", default=",".join(ARMS))
    ap.add_argument("--parallel", type=int, default=2, help="processes at a time (one torch thread each)")
    ap.add_argument("--base-config", type=Path, default=REPO / "configs" / "star" / "bootstrap" / "base.yaml")
    ap.add_argument("--run-config", type=Path, default=REPO / "configs" / "star" / "bootstrap" / "run.yaml")
    ap.add_argument("--report", type=Path, default=None, help="write the report into this folder instead of running")
    ap.add_argument("--train-seeds", default="",
                    help="training-noise runs instead: per (seed, arm, train seed) a run of --iterations iterations from the same "
                         "base, problems and generation seeds, fine-tuned with --train-seed T (into seed_S/ARM@train_T)")
    ap.add_argument("--iterations", type=int, default=2, help="iterations of each --train-seeds run")
    ap.add_argument("--bases", type=Path, default=None,
                    help="folder holding the finished base_<seed> models (default: ROOT); e.g. docs/star-results/bootstrap_v2")
    ap.add_argument("--ablations-report", type=Path, default=None,
                    help="write ablations.md/json into this folder (the --train-seeds reruns and norat_verified of ROOT beside the "
                         "original runs' metrics in --bases) instead of running")
    args = ap.parse_args()
    seeds = [int(s) for s in args.seeds.split(",") if s.strip()]
    arms = [a for a in args.arms.split(",") if a.strip()]
    unknown = [a for a in arms if a not in ARMS]
    if unknown:
        ap.error(f"unknown arms {unknown}; known: {', '.join(ARMS)}")
    if args.report is not None:
        return report(args.root, args.report)
    if args.ablations_report is not None:
        return ablations_report(args.bases or args.root, args.root, seeds, args.ablations_report)
    cli, lock = _cli(), threading.Lock()
    logs = args.root / "logs"
    if args.train_seeds:
        return train_seed_runs(args, cli, seeds, arms, [int(t) for t in args.train_seeds.split(",") if t.strip()], lock)
    with ThreadPoolExecutor(max_workers=args.parallel) as pool:
        bases: dict[int, Future[None]] = {}
        base_root = args.bases or args.root
        for s in seeds:
            if args.bases is not None:  # finished bases elsewhere (e.g. the committed ones): nothing to build
                done: Future[None] = Future()
                done.set_result(None)
                bases[s] = done
                continue
            cmd = [*cli, "star", "base", "--config", str(args.base_config), "--seed", str(s), "--out", str(args.root / f"base_{s}"),
                   "--resume", "--threads", "1"]
            bases[s] = pool.submit(_run, cmd, logs / f"base_{s}.log", lock)
        runs: list[Future[None]] = []
        # arm-major: every seed's `star` arm (the acceptance rule's) runs before any seed's controls
        for arm in arms:
            for s in seeds:
                bases[s].result()  # an arm starts once its seed's base exists (other bases build meanwhile)
                cmd = [*cli, "star", "run", "--config", str(args.run_config), "--model", str(base_root / f"base_{s}"),
                       "--seed", str(s), "--out", str(args.root / f"seed_{s}" / arm), "--resume", "--threads", "1", *ARMS[arm]]
                runs.append(pool.submit(_run, cmd, logs / f"seed_{s}_{arm}.log", lock))
        failed = [f.exception() for f in runs if f.exception() is not None]
    for e in failed:
        print(e, file=sys.stderr)
    return 1 if failed else 0


def train_seed_runs(args: argparse.Namespace, cli: list[str], seeds: list[int], arms: list[str], train_seeds: list[int],
                    lock: threading.Lock) -> int:
    """Each (seed, arm) again with other training seeds, seed-major (seed 0's arms first), iterations 1..N only.

    The base, the problems, the prompts and every generation seed are the original run's; only the Trainer's seed
    (data order, dropout) changes, so the spread between them is what one training run hides."""
    bases = args.bases or args.root
    missing = [s for s in seeds if not (bases / f"base_{s}" / "config.json").is_file()]
    if missing:
        print(f"no finished base for seeds {missing} under {bases} (run without --train-seeds first)", file=sys.stderr)
        return 2
    jobs = []
    for s in seeds:
        for t in train_seeds:
            for arm in arms:
                out = args.root / f"seed_{s}" / f"{arm}@train_{t}"
                cmd = [*cli, "star", "run", "--config", str(args.run_config), "--model", str(bases / f"base_{s}"), "--seed", str(s),
                       "--train-seed", str(t), "--set", f"iterations={args.iterations}", "--out", str(out), "--resume",
                       "--threads", "1", *ARMS[arm]]
                jobs.append((cmd, args.root / "logs" / f"seed_{s}_{arm}@train_{t}.log"))
    return run_jobs(jobs, args.parallel, lock)


def run_jobs(jobs: list[tuple[list[str], Path]], parallel: int, lock: threading.Lock) -> int:
    """Run (command, log) jobs, ``parallel`` at a time, in order; 1 when any failed (each failure printed)."""
    with ThreadPoolExecutor(max_workers=parallel) as pool:
        futures = [pool.submit(_run, cmd, log, lock) for cmd, log in jobs]
        failed = [f.exception() for f in futures if f.exception() is not None]
    for e in failed:
        print(e, file=sys.stderr)
    return 1 if failed else 0


HINTS_MARK = "<!-- hint policy: written by --ablations-report -->"


def ablations_report(originals: Path, root: Path, seeds: list[int], out: Path) -> int:
    from thoughtsource.io import write_json
    from thoughtsource.star.analysis.ablations import hint_markdown, markdown, report

    rep = report(originals, root, seeds)
    out.mkdir(parents=True, exist_ok=True)
    write_json(out / "ablations.json", rep)
    (out / "ablations.md").write_text(markdown(rep) + "\n", encoding="utf-8")
    main_report = out / "report.md"  # the hint policy and hinted records per digit count, in the experiment's report too
    if main_report.is_file():
        text = main_report.read_text(encoding="utf-8").split(HINTS_MARK)[0].rstrip("\n")
        main_report.write_text(f"{text}\n\n{HINTS_MARK}\n{hint_markdown(rep)}\n", encoding="utf-8")
    for s in seeds:  # the full norat_verified runs' metrics beside the other arms'
        full = root / f"seed_{s}" / "norat_verified" / "metrics.json"
        if full.is_file():
            shutil.copyfile(full, out / f"seed_{s}_norat_verified_metrics.json")
    print(f"wrote {out / 'ablations.md'}")
    return 0


def write_test_rows(runs: dict[int, dict[str, Path]], path: Path) -> None:
    """Every test answer of every seed, arm and iteration (id, digit count, answer given, right or not), gzipped JSON:
    {seed: {arm: {iteration: [rows]}}}, so every number of the report can be recomputed per problem."""
    import gzip
    import json

    from thoughtsource.io import read_json

    rows = {str(seed): {arm: {it.name.removeprefix("iter_"): [
                {k: r.get(k) for k in ("id", "group", "answer", "predicted", "correct")}
                for r in read_json(it / "test.json")["rows"]]
            for it in sorted(run.glob("iter_*"), key=lambda p: int(p.name.removeprefix("iter_"))) if (it / "test.json").is_file()}
        for arm, run in arms.items()} for seed, arms in runs.items()}
    tmp = path.with_suffix(".tmp")
    with gzip.open(tmp, "wt", encoding="utf-8") as fh:
        json.dump(rows, fh)
    tmp.replace(path)


def report(root: Path, out: Path) -> int:
    import json

    from thoughtsource.io import read_json, write_json
    from thoughtsource.star.analysis.bootstrap_experiment import find_runs, markdown
    from thoughtsource.star.analysis.bootstrap_experiment import report as make_report
    from thoughtsource.star.analysis.plots import plot_digits

    rep = make_report(root)
    out.mkdir(parents=True, exist_ok=True)
    write_json(out / "report.json", rep)
    (out / "report.md").write_text(markdown(rep) + "\n", encoding="utf-8")
    for seed in rep["seeds"]:
        if rep["seeds"][seed]:
            plot_digits(rep, seed, out / f"digits_seed_{seed}.png")
    for seed, arms in find_runs(root).items():
        for arm, run in arms.items():
            shutil.copyfile(run / "metrics.json", out / f"seed_{seed}_{arm}_metrics.json")
        base = root / f"base_{seed}" / "thoughtsource_base.json"
        if base.is_file():
            write_json(out / f"base_{seed}.json", read_json(base))
    write_test_rows(find_runs(root), out / "test_rows.json.gz")
    print(json.dumps(rep["acceptance"], indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
