"""Kept rationales: does the scratchpad match the true one, or is the answer copied without working?"""
import json, sys
sys.path.insert(0, "src")
from thoughtsource.star.tasks.arithmetic import ArithmeticTask
t = ArithmeticTask(1, 3, n_train=60, n_test_per_digit=8)
probs = {p.id: p for p in t.load("train", 0)}
for run in ("star", "norat"):
    n = 1
    while True:
        try:
            recs = [json.loads(x) for x in open(f"star_runs/{run}/iter_{n}/train.jsonl")]
        except FileNotFoundError:
            break
        exact = sum(r["completion"] == t.completion(probs[r["id"]], probs[r["id"]].rationale) for r in recs)
        no_scratch = sum("<scratch>" not in r["completion"] for r in recs)
        rat = sum(r["rationalized"] for r in recs)
        rat_no = sum(r["rationalized"] and "<scratch>" not in r["completion"] for r in recs)
        print(f"{run} iter {n}: kept {len(recs)} (rationalized {rat}); exact true scratchpad {exact}; "
              f"no <scratch> opening at all {no_scratch} (of the rationalized: {rat_no})")
        n += 1
