"""Training noise of one STaR iteration: the same kept data, trained again from the base with other training seeds.

    python experiments/star_training_noise.py --run star_runs/bootstrap_v2/seed_1/star --iteration 2 \\
        --train-seeds 101,102 --out docs/star-results/bootstrap_v2/noise_seed_1_iter_2.json

For each training seed t it copies the run up to iteration N, keeps iteration N's generations and its
``train.jsonl`` (the data), trains the base on exactly those records with ``seed: t`` (the Trainer's data order and
dropout; the problems, the data and every other setting stay), and lets the loop make iteration N's test and dev
steps again on the new checkpoint (``--resume``: every earlier step is reused). The report compares each retrained
model with the original M_N per test digit count: accuracies, exact McNemar on the paired rows, and how many test
answers flipped. What it measures is the spread a single training run hides; two arms whose difference is inside
it are not told apart by one run each.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path
from typing import Any


def retrain(run: Path, n: int, seed: int, work: Path) -> Path:
    from thoughtsource.io import read_json, write_json
    from thoughtsource.star.artifacts import read_jsonl
    from thoughtsource.star.config import StarConfig
    from thoughtsource.star.loop import StarRun
    from thoughtsource.star.tasks.base import TrainingRecord
    from thoughtsource.star.train import train

    copy = work / f"train_seed_{seed}"
    if (copy / f"iter_{n}" / "test.json").is_file():
        return copy  # done before: resumable
    shutil.rmtree(copy, ignore_errors=True)
    copy.mkdir(parents=True)
    for item in run.iterdir():
        if item.name.startswith("iter_"):
            if int(item.name.removeprefix("iter_")) <= n:
                shutil.copytree(item, copy / item.name)
        elif item.is_file() and item.name in ("config.json",):
            shutil.copy2(item, copy / item.name)
    d = copy / f"iter_{n}"
    shutil.rmtree(d / "checkpoint")
    for name in ("train_stats.json", "test.json", "dev.json", "metrics.json"):
        (d / name).unlink(missing_ok=True)
    cfg = StarConfig.model_validate({**read_json(copy / "config.json"), "iterations": n})
    records = [TrainingRecord(**r) for r in read_jsonl(d / "train.jsonl")]
    _, _, stats = train(cfg.model_copy(update={"seed": seed}), cfg.model, records, cfg.steps.steps(n), d / "trainer",
                        checkpoint=d / "checkpoint", show_progress=False)
    shutil.rmtree(d / "trainer", ignore_errors=True)
    write_json(d / "train_stats.json", {**stats, "training_seed": seed})
    StarRun(cfg, copy, resume=True, show_progress=False).run()
    return copy


def rows(run: Path, n: int) -> dict[str, dict[str, bool]]:
    from thoughtsource.star.analysis.bootstrap_experiment import test_rows

    return test_rows(run, n)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--run", type=Path, required=True)
    ap.add_argument("--iteration", type=int, required=True)
    ap.add_argument("--train-seeds", default="101,102")
    ap.add_argument("--work", type=Path, default=None, help="default: RUN/../noise_<arm>_iter_<N>")
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    import torch

    torch.set_num_threads(1)
    from thoughtsource.io import read_json, write_json
    from thoughtsource.star.analysis.accuracy import Proportion, group_key
    from thoughtsource.star.analysis.bootstrap_experiment import paired

    n = args.iteration
    work = args.work or args.run.parent / f"noise_{args.run.name}_iter_{n}"
    original = rows(args.run, n)
    report: dict[str, Any] = {"run": str(args.run), "iteration": n, "original_seed": read_json(args.run / "config.json")["seed"],
                              "train_n": sum(1 for _ in (args.run / f"iter_{n}" / "train.jsonl").open()), "retrained": []}
    for seed in [int(s) for s in args.train_seeds.split(",") if s.strip()]:
        again = rows(retrain(args.run, n, seed, work), n)
        per_digit = {}
        for g in sorted(original, key=group_key):
            a, b = again.get(g, {}), original[g]
            per_digit[g] = {"original": Proportion(sum(b.values()), len(b)).to_dict(),
                            "retrained": Proportion(sum(a.values()), len(a)).to_dict(), "paired": paired(a, b)}
        report["retrained"].append({"training_seed": seed, "per_digit": per_digit})
        write_json(args.out, report)
    print(json.dumps({r["training_seed"]: {g: (d["original"]["correct"], d["retrained"]["correct"], d["paired"]["p_value"])
                                           for g, d in r["per_digit"].items()} for r in report["retrained"]}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
