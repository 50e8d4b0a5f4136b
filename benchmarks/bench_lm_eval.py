"""lm-evaluation-harness's multiple-choice run through serve-model beside its own ``hf`` model, same weights, one run.

    PYTHONPATH=src python benchmarks/bench_lm_eval.py [--limit 100] [--batch-sizes 1,8]

The task is CommonsenseQA (``../shared/data/commonsense_qa/dev_rand_split.jsonl``, a local task YAML, no hub): each
question's five choices are scored by log-likelihood, ``--limit`` questions = 5 x limit scoring requests.  For each
batch size B: lm-eval's ``hf`` model (``HFLM(batch_size=B)``, in process) and ``local-completions`` against a real
serve-model server in a thread of this process (``run_model_server`` on a backend that loads its own copy of the
embedded SmolLM2, as serve-model does; ``batch_size=B`` prompts a
request, ``echo`` + ``logprobs``, token-id prompts as lm-eval sends them by default).  One torch thread each.

Prints seconds per run, server / hf (issue 45's target: within 1.5x), the accuracy of each and the largest log-likelihood
difference between the two.  No assertions.
"""

from __future__ import annotations

import argparse
import os
import platform
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DATA = Path(os.environ.get("THOUGHTSOURCE_DATA", ROOT.parent / "shared" / "data"))



def run(model: object, task_manager: object, limit: int) -> tuple[float, dict]:
    import lm_eval

    t = time.perf_counter()
    out = lm_eval.simple_evaluate(model=model, tasks=["ts_commonsense_qa"], limit=limit, task_manager=task_manager,
                                  log_samples=True)
    return time.perf_counter() - t, out


def loglikelihoods(out: dict) -> list[float]:
    rows = sorted(out["samples"]["ts_commonsense_qa"], key=lambda s: s["doc_id"])
    return [lp for s in rows for lp, _ in s["filtered_resps"]]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--limit", type=int, default=100)
    ap.add_argument("--batch-sizes", default="1,8")
    args = ap.parse_args()

    import torch
    from lm_eval.api.registry import get_model
    from lm_eval.models.huggingface import HFLM
    from lm_eval.tasks import TaskManager

    from thoughtsource.backends.server import run_model_server
    from thoughtsource.backends.transformers_local import TransformersBackend
    from thoughtsource.embedded import load_model
    from thoughtsource.testing.lm_eval_tasks import MC_TASK

    torch.set_num_threads(1)
    print(f"# {platform.node()} {platform.machine()}, {os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}, "
          f"{time.strftime('%Y-%m-%d %H:%M')}, {args.limit} questions ({5 * args.limit} scoring requests)")
    folder = Path(tempfile.mkdtemp())
    (folder / "ts_commonsense_qa.yaml").write_text(MC_TASK.format(data=DATA))
    tasks = TaskManager(include_path=str(folder))
    model, tok = load_model()
    backend = TransformersBackend("embedded", device="cpu", threads=1)  # its own copy, as serve-model loads it
    print(f"{'batch':>5} {'hf s':>8} {'server s':>9} {'server/hf':>10} {'acc hf':>7} {'acc srv':>8} {'max |dLL|':>10}")
    with run_model_server(backend, served_model_name="smol") as server:
        for b in (int(x) for x in args.batch_sizes.split(",")):
            hf_s, hf = run(HFLM(pretrained=model, tokenizer=tok, batch_size=b), tasks, args.limit)
            lm = get_model("local-completions").create_from_arg_string(
                f"model=smol,base_url={server.base_url}/completions,batch_size={b}")
            srv_s, srv = run(lm, tasks, args.limit)
            diff = max(abs(a - c) for a, c in zip(loglikelihoods(hf), loglikelihoods(srv), strict=True))
            acc = [r["results"]["ts_commonsense_qa"]["acc,none"] for r in (hf, srv)]
            print(f"{b:5d} {hf_s:8.1f} {srv_s:9.1f} {srv_s / hf_s:10.2f} {acc[0]:7.3f} {acc[1]:8.3f} {diff:10.2e}")


if __name__ == "__main__":
    main()
