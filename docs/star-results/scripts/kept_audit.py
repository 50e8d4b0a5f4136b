"""Audit the kept training examples of an arithmetic STaR run: how many are real scratchpads.

    PYTHONPATH=src python docs/star-results/scripts/kept_audit.py star_runs/v2/star star_runs/v2/verified ...

For every iteration's ``train.jsonl`` (what the model was fine-tuned on) each completion is checked with
the verified filter (:func:`thoughtsource.star.verify.verify_scratchpad`), and the failures are sorted into
"no scratchpad at all" (the completion does not open one) and "wrong scratchpad" (one opened, a line wrong).
Prints a markdown table; ``--json PATH`` also writes the counts.
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

from thoughtsource.io import write_json
from thoughtsource.star.verify import verify_scratchpad

_Q = re.compile(r"Input:\n([\d ]+?) \+ ([\d ]+?)\nTarget:\n$")  # operands are written digit by digit


def audit(run: Path) -> list[dict]:
    rows = []
    for it_dir in sorted(run.glob("iter_*"), key=lambda p: int(p.name.split("_")[1])):
        train = it_dir / "train.jsonl"
        if not train.exists() or int(it_dir.name.split("_")[1]) == 0:
            continue
        c = {"iteration": int(it_dir.name.split("_")[1]), "kept": 0, "rationalized": 0,
             "correct_scratchpad": 0, "no_scratchpad": 0, "wrong_scratchpad": 0, "correct_by_digits": {}}
        for line in train.read_text().splitlines():
            ex = json.loads(line)
            m = _Q.search(ex["prompt"])
            if m is None:  # the direct baseline trains on answers only: nothing to audit
                continue
            c["kept"] += 1
            c["rationalized"] += bool(ex.get("rationalized"))
            text = ex["completion"]
            if not text.lstrip().startswith("<scratch>"):
                text = "<scratch>\n" + text  # the prompt may end in the opening tag
            reason = verify_scratchpad(text, int(m.group(1).replace(" ", "")), int(m.group(2).replace(" ", "")))
            if reason is None:
                c["correct_scratchpad"] += 1
                width = f"{len(m.group(1).split())}d"
                c["correct_by_digits"][width] = c["correct_by_digits"].get(width, 0) + 1
            elif text.count("\n") <= 3 or "C:" not in text:
                c["no_scratchpad"] += 1
            else:
                c["wrong_scratchpad"] += 1
        rows.append(c)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("runs", nargs="+", type=Path)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    out = {run.name: audit(run) for run in args.runs}
    print("| arm | iteration | kept | of which rationalized | correct scratchpad (by digits) | no scratchpad | wrong scratchpad |")
    print("|---|---|---|---|---|---|---|")
    for arm, rows in out.items():
        for r in rows:
            by = ", ".join(f"{k}: {v}" for k, v in sorted(r["correct_by_digits"].items())) or "-"
            print(f"| {arm} | {r['iteration']} | {r['kept']} | {r['rationalized']} | {r['correct_scratchpad']} ({by}) "
                  f"| {r['no_scratchpad']} | {r['wrong_scratchpad']} |")
    if args.json:
        write_json(args.json, out)


if __name__ == "__main__":
    main()
