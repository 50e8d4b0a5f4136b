"""One STaR iteration's wall time split into generation / rationalization / training, with the
generation throughput; baseline in the same run: the generation step one request at a time
(batch size 1) vs batched.

    PYTHONPATH=src python benchmarks/bench_star.py [--n-train 16] [--digits 1-2] [--steps 4] [--batch 16]

Prints the machine, the command, both numbers and the ratio (no assertions).
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import tempfile
import time
from pathlib import Path


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n-train", type=int, default=16)
    ap.add_argument("--digits", default="1-2")
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--fewshot-k", type=int, default=2)
    args = ap.parse_args()
    lo, _, hi = args.digits.partition("-")

    import torch

    from thoughtsource.io import read_json
    from thoughtsource.star.config import StarConfig
    from thoughtsource.star.generation import Generator, GenStats
    from thoughtsource.star.loop import StarRun

    cfg = StarConfig.from_dict({
        "task": "arithmetic",
        "task_options": {"min_digits": int(lo), "max_digits": int(hi or lo), "n_train": args.n_train, "n_test_per_digit": 1},
        "iterations": 1, "fewshot_k": args.fewshot_k, "steps": {"first": args.steps, "warmup_steps": 0},
        "batch_size": 8, "lr": 1e-4, "generation": {"batch_size": args.batch},
    })
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "run"
        t0 = time.perf_counter()
        run = StarRun(cfg, out, show_progress=False)
        run.run()
        total = time.perf_counter() - t0
        m = read_json(out / "iter_1" / "metrics.json")
        gen = read_json(out / "iter_1" / "generate.json")["stats"]
        rat = read_json(out / "iter_1" / "rationalize.json")["stats"]

        # baseline: the same generation step, one request at a time
        problems = run.task.load("train", cfg.seed)
        ex = run.task.exemplars(cfg.fewshot_k)
        prompts = [run.task.prompt(p, ex) for p in problems]
        max_tokens = [run.task.max_new_tokens(p) for p in problems]
        one_cfg = cfg.model_copy(update={"generation": cfg.generation.model_copy(update={"batch_size": 1})})
        from thoughtsource.embedded import load_model

        model, tok = load_model("embedded")
        one = GenStats()
        Generator(one_cfg, "embedded", model=model, tokenizer=tok, show_progress=False).complete(
            prompts, max_tokens, stop=run.task.stop, stats=one)

    t = m["timings_s"]
    print(f"machine: {platform.machine()} {os.cpu_count()} CPU(s), torch {torch.__version__}, "
          f"cuda={torch.cuda.is_available()}, load avg {os.getloadavg()[0]:.1f}")
    print(f"command: {' '.join([Path(sys.executable).name, *sys.argv])}")
    print(f"one iteration ({args.n_train} problems, digits {args.digits}, {args.steps} steps): total {total:.1f} s "
          f"(incl. iteration-0 test and model loads)")
    print(f"  generation     {t['generate']:8.1f} s  {gen['completion_tokens']} tokens  {gen['tokens_per_s']:.1f} tok/s (batch {args.batch})")
    print(f"  rationalization{t['rationalize']:8.1f} s  {rat['completion_tokens']} tokens  {rat['tokens_per_s']:.1f} tok/s "
          f"({m['rationalization_attempted']} wrong problems)")
    print(f"  training       {t['train']:8.1f} s  {m['steps']} steps on {m['kept']} kept examples")
    print(f"  test           {t['test']:8.1f} s")
    print(f"generation baseline one-by-one: {one.wall_s:.1f} s  {one.completion_tokens} tokens  {one.tokens_per_s:.1f} tok/s")
    ratio = gen["tokens_per_s"] / one.tokens_per_s if one.tokens_per_s else float("nan")
    print(f"batched / one-by-one throughput: {ratio:.2f}x")


if __name__ == "__main__":
    main()
