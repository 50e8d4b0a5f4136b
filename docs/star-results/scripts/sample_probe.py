"""Probe: can sampling find correct multi-digit scratchpads at all (pass@k with the verified filter)?

    PYTHONPATH=src python docs/star-results/scripts/sample_probe.py --model embedded --digits 2 --n 50 --k 8 \
        --out docs/star-results/fresh/probe_base.json

Takes the first ``--n`` problems of ``--digits`` digits from iteration 1's fresh training sample of
``src/thoughtsource/star/configs/arithmetic_fresh.yaml``, samples ``--k`` rationales per problem at ``--temperature``,
with the answer hint (rationalization) and without (generation), and counts per problem whether any
sample has the right answer and whether any sample is a correct scratchpad (every line recomputed).
A loop variant that keeps the first verified sample of k (rejection sampling) can only bootstrap a
digit count from the problems where this count is above zero.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import yaml

from thoughtsource.io import write_json
from thoughtsource.star.config import StarConfig, config_path
from thoughtsource.star.generation import Generator, GenStats
from thoughtsource.star.tasks import get_task


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", default="arithmetic_fresh")
    ap.add_argument("--model", default="embedded", help='"embedded" or a checkpoint folder (a run\'s iter_N/checkpoint)')
    ap.add_argument("--digits", type=int, default=2)
    ap.add_argument("--n", type=int, default=50)
    ap.add_argument("--k", type=int, default=8)
    ap.add_argument("--temperature", type=float, default=0.7)
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()

    data = yaml.safe_load(config_path(args.config).read_text())
    cfg = StarConfig.from_dict(data, path=args.config)
    task = get_task(cfg.task, **cfg.task_options)
    group = f"{args.digits}-digit"
    problems = [p for p in task.train_problems(1, cfg.seed) if task.groups(p) == group][: args.n]
    ex = task.exemplars(cfg.fewshot_k)
    from thoughtsource.embedded import load_model, resolve_model

    path = resolve_model(args.model) if args.model == "embedded" else args.model
    model, tok = load_model(path)
    gen = Generator(cfg, path, model=model, tokenizer=tok)
    result: dict = {"model": args.model, "digits": args.digits, "n": len(problems), "k": args.k,
                    "temperature": args.temperature, "modes": {}}
    for hint in (True, False):
        stats = GenStats()
        t0 = time.perf_counter()
        prompts = [task.prompt(p, ex, hint=hint) for p in problems]
        outs = gen.complete(prompts, [task.max_new_tokens(p) for p in problems], stop=task.stop,
                            temperature=args.temperature, n=args.k, seed=cfg.seed, stats=stats,
                            description=f"{'hint' if hint else 'no hint'} x{args.k}")
        any_answer = any_verified = samples_answer = samples_verified = 0
        examples = []
        for p, cs in zip(problems, outs, strict=True):
            texts = [task.trim(c.text) for c in cs]
            ok = [task.is_correct(p, t) for t in texts]
            ver = [o and task.verify(p, t, rationalized=hint) is None for o, t in zip(ok, texts, strict=True)]
            any_answer += any(ok)
            any_verified += any(ver)
            samples_answer += sum(ok)
            samples_verified += sum(ver)
            examples += [t for t, v in zip(texts, ver, strict=True) if v][:1]
        mode = "hint" if hint else "no hint"
        result["modes"][mode] = {"problems_with_answer_correct_sample": any_answer,
                                 "problems_with_verified_sample": any_verified,
                                 "samples_answer_correct": samples_answer, "samples_verified": samples_verified,
                                 "samples": len(problems) * args.k, "verified_examples": examples[:3],
                                 "stats": stats.to_dict(), "wall_s": round(time.perf_counter() - t0, 1)}
        print(mode, {k: v for k, v in result["modes"][mode].items() if k != "verified_examples"}, flush=True)
    write_json(args.out, result)


if __name__ == "__main__":
    main()
