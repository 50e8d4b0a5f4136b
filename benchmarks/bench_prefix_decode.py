"""Zero-shot prompts in the ``prefix`` decoding mode: one batch per group against one row at a time.

STaR on a from-scratch base (``thoughtsource star base``) prompts zero-shot: the prompts share no long prefix.
Before the fix each such row formed its own group and was decoded at batch 1; now they form one group decoded
``batch_size`` rows at a time.  This measures both on the same model and prompts in the same run (the baseline is
the old path: ``batch_size=1``) and checks that the texts are identical.

Usage: OMP_NUM_THREADS=1 PYTHONPATH=src python benchmarks/bench_prefix_decode.py [--model FOLDER] [--n 200] [--digits 6]
(without --model: a randomly initialised model of configs/star/bootstrap/base.yaml's shape; it writes max_tokens
tokens per row, so the work is the same in both arms).
"""

from __future__ import annotations

import argparse
import platform
import time
from pathlib import Path

import torch
import yaml

from thoughtsource.backends import Request
from thoughtsource.backends.transformers_local import TransformersBackend
from thoughtsource.star.scratch_model import Architecture, build_model, build_tokenizer
from thoughtsource.star.tasks.arithmetic import ArithmeticTask

REPO = Path(__file__).resolve().parent.parent


def load(folder: Path | None) -> tuple[object, object, str]:
    if folder is not None:
        from transformers import AutoModelForCausalLM, AutoTokenizer

        return AutoModelForCausalLM.from_pretrained(folder), AutoTokenizer.from_pretrained(folder), str(folder)
    cfg = yaml.safe_load((REPO / "configs" / "star" / "bootstrap" / "base.yaml").read_text())
    tok = build_tokenizer()
    return build_model(Architecture(**cfg["architecture"]), tok, seed=0), tok, "random init, bootstrap base shape"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", type=Path, default=None)
    ap.add_argument("--n", type=int, default=200)
    ap.add_argument("--digits", type=int, default=6)
    ap.add_argument("--max-tokens", type=int, default=80)
    ap.add_argument("--batch", type=int, default=256)
    args = ap.parse_args()
    model, tok, name = load(args.model)
    model.eval()
    task = ArithmeticTask(args.digits, args.digits, n_train=0, n_test_per_digit=args.n, n_dev_per_digit=0, pool_size=0,
                          scratchpad="compact")
    requests = [Request(prompt=task.prompt(p, []), max_tokens=args.max_tokens, stop=task.stop) for p in task.load("test", 0)]
    out = {}
    for label, batch in (("one row at a time (before)", 1), (f"batch_size={args.batch} (now)", args.batch)):
        backend = TransformersBackend.from_loaded(model, tok, mode="prefix", batch_size=batch)
        t0 = time.perf_counter()
        done = backend.complete_sync(requests)
        out[label] = (time.perf_counter() - t0, done)
    (t_base, base), (t_ours, ours) = out.values()
    same = sum(a.text == b.text for a, b in zip(base, ours, strict=True))
    tokens = sum(c.completion_tokens for c in ours)
    print(f"machine: {platform.machine()} {platform.processor() or ''}, torch {torch.__version__}, threads {torch.get_num_threads()}")
    print(f"model: {name}; {len(requests)} zero-shot {args.digits}-digit prompts, max_tokens {args.max_tokens}")
    for label, (t, done) in out.items():
        print(f"{label:32s} {t:8.2f} s  {sum(c.completion_tokens for c in done)} tokens  {tokens / t:8.1f} tok/s")
    print(f"identical texts: {same}/{len(requests)}; speed-up (before / now): {t_base / t_ours:.1f}x")


if __name__ == "__main__":
    main()
