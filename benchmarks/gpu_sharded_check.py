"""ZeRO-3 and FSDP at world size 1 on a GPU: the saved model, loaded plainly, generates what the in-run model generated.

    python benchmarks/gpu_sharded_check.py --out results.json                  # both strategies
    python benchmarks/gpu_sharded_check.py --strategies fsdp --steps 20 --out r.json

For each strategy it runs one tiny STaR iteration (the committed bootstrap base of the CI test,
``tests/star/fixtures/bootstrap_base``, on its own arithmetic task) through ``accelerate launch`` with the
repository's config (``configs/accelerate/deepspeed_zero3.yaml`` or ``fsdp.yaml``, ``--num_processes 1``), then:

1. loads the checkpoint the run saved (``iter_1/checkpoint``) plainly, with no accelerate/DeepSpeed/FSDP state, and
   compares its exact weight digest with the digest every rank reported for the model it generated with
   (``iter_1/test.json`` → ``stats.ranks[].weights``);
2. copies the run, deletes iteration 1's test step and the completion store, and resumes the copy in one plain
   process (``thoughtsource star run --resume``, no launcher): that process loads the saved checkpoint and makes
   the test step again; its greedy rows must equal the in-run model's rows.

It also records that training really ran under the strategy (``train_stats.json``: steps, world size, the trainer's
loss) and that the weights moved from the base. Needs a GPU, accelerate, and for ZeRO-3 ``deepspeed``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
BASE = REPO / "tests" / "star" / "fixtures" / "bootstrap_base"
CONFIGS = {"zero3": REPO / "configs" / "accelerate" / "deepspeed_zero3.yaml",
           "fsdp": REPO / "configs" / "accelerate" / "fsdp.yaml"}


def run_config(model: Path, steps: int) -> dict[str, Any]:
    task = json.loads((BASE / "thoughtsource_base.json").read_text())["config"]["task_options"]
    return {
        "model": str(model), "task": "arithmetic",
        "task_options": {**task, "per_iteration": 512, "n_test_per_digit": 40, "n_dev_per_digit": 10},
        "iterations": 1, "fewshot_k": 0,
        "steps": {"first": steps, "growth": "additive", "increase": 0, "warmup_steps": 2},
        "batch_size": 32, "lr": 5e-4, "seed": 0, "bf16": True, "checkpoint_every": 0,
        "generation": {"engine": "transformers", "batch_size": 256, "prefix_cache": False},
    }


def sh(cmd: list[str], log: Path, env: dict[str, str] | None = None, timeout: float = 600) -> int:
    t0 = time.time()
    with log.open("w") as fh:
        rc = subprocess.run(cmd, stdout=fh, stderr=subprocess.STDOUT, cwd=REPO, env=env or os.environ.copy(),
                            timeout=timeout, check=False).returncode
    print(f"  exit {rc} in {time.time() - t0:.1f}s: {' '.join(cmd[-8:])} (log {log})", flush=True)
    if rc != 0:
        print(log.read_text()[-4000:], flush=True)
    return rc


def check(strategy: str, work: Path, steps: int) -> dict[str, Any]:
    import yaml

    from thoughtsource.star.loading import load_for_generation, weights_digest

    out = work / strategy
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    cfg = out / "run.yaml"
    cfg.write_text(yaml.safe_dump(run_config(BASE, steps)))
    run = out / "run"
    env = {**os.environ, "COLUMNS": "200", "TOKENIZERS_PARALLELISM": "false"}
    launch = [sys.executable, "-m", "accelerate.commands.launch", "--config_file", str(CONFIGS[strategy]),
              "--num_processes", "1", "--main_process_port", "29517" if strategy == "zero3" else "29518",
              "-m", "thoughtsource", "star", "run", "--config", str(cfg), "--out", str(run)]
    res: dict[str, Any] = {"strategy": strategy, "config_file": str(CONFIGS[strategy].relative_to(REPO))}
    t0 = time.time()
    res["launch_exit"] = sh(launch, out / "launch.log", env)
    res["launch_s"] = round(time.time() - t0, 1)
    res["launch_log_tail"] = (out / "launch.log").read_text()[-3000:]
    if res["launch_exit"] != 0:
        return res
    test = json.loads((run / "iter_1" / "test.json").read_text())
    res["train_stats"] = {k: v for k, v in json.loads((run / "iter_1" / "train_stats.json").read_text()).items()
                          if not isinstance(v, (list, dict))}
    res["rank_digests"] = [r["weights"] for r in test["stats"]["ranks"]]
    # the dtype the run generated in ("auto": bf16 on a GPU, fp32 on a CPU); a float32 load of the same checkpoint
    # has other bits, hence another digest (the first GPU run of this script compared across dtypes)
    saved_model = load_for_generation(str(run / "iter_1" / "checkpoint"), "auto")[0]
    res["saved_digest"] = weights_digest(saved_model)
    base_digest = weights_digest(load_for_generation(str(BASE), "auto")[0])
    res["digests_equal"] = all(d == res["saved_digest"] for d in res["rank_digests"])
    res["weights_moved_from_base"] = res["saved_digest"] != base_digest
    res["in_run_test"] = {"n": len(test["rows"]), "correct": sum(bool(r.get("correct")) for r in test["rows"])}

    alone = out / "alone"
    shutil.copytree(run, alone)
    for name in ("iter_1/test.json", "iter_1/metrics.json", "metrics.json", "completions.sqlite", "completions.sqlite-wal",
                 "completions.sqlite-shm"):
        (alone / name).unlink(missing_ok=True)
    plain_env = {k: v for k, v in env.items() if not k.startswith(("ACCELERATE_", "FSDP_", "RANK", "WORLD_SIZE", "LOCAL_RANK"))}
    res["plain_exit"] = sh([sys.executable, "-m", "thoughtsource", "star", "run", "--config", str(cfg), "--out", str(alone),
                            "--resume"], out / "plain.log", plain_env)
    if res["plain_exit"] != 0:
        res["plain_log_tail"] = (out / "plain.log").read_text()[-3000:]
        return res
    again = json.loads((alone / "iter_1" / "test.json").read_text())
    res["plain_requested"] = again["stats"]["ranks"][0]["requested"]
    res["plain_digest"] = again["stats"]["ranks"][0]["weights"]
    same = sum(a == b for a, b in zip(test["rows"], again["rows"], strict=True))
    res["greedy_rows_identical"] = f"{same}/{len(test['rows'])}"
    import torch

    # on a GPU the Trainer must really have trained sharded (accelerate wraps with FSDP only on accelerators)
    res["trained_sharded"] = res["train_stats"].get("gathered_from")
    res["ok"] = bool((res["trained_sharded"] or not torch.cuda.is_available()) and res["digests_equal"] and res["weights_moved_from_base"] and same == len(test["rows"])
                     and res["plain_digest"] == res["saved_digest"] and res["plain_requested"] == len(test["rows"]))
    return res


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--strategies", default="zero3,fsdp")
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--work", type=Path, default=Path("/tmp/sharded_check"))
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    import torch

    results: dict[str, Any] = {"device": torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu",
                               "torch": torch.__version__, "date": time.strftime("%Y-%m-%d %H:%M:%S"), "checks": []}
    for name in ("transformers", "accelerate", "deepspeed"):
        try:
            results[name] = __import__(name).__version__
        except Exception as e:
            results[name] = f"not importable: {e}"
    for s in [s.strip() for s in args.strategies.split(",") if s.strip()]:
        print(f"== {s}", flush=True)
        try:
            r = check(s, args.work, args.steps)
        except Exception as e:
            import traceback

            r = {"strategy": s, "error": repr(e), "traceback": traceback.format_exc()[-3000:]}
        results["checks"].append(r)
        print(json.dumps({k: v for k, v in r.items() if not k.endswith("log_tail")}, indent=1), flush=True)
        args.out.write_text(json.dumps(results, indent=1))
    return 0 if all(c.get("ok") for c in results["checks"]) else 1


if __name__ == "__main__":
    sys.exit(main())
