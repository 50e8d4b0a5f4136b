"""Issue 41's pre-registered experiment: STaR with calculator-executed rationales on real word problems.

    python experiments/star_word_problems.py --split-only                    # the task file (the pre-registered split)
    python experiments/star_word_problems.py --arms fewshot --seeds 0        # the CPU pilot: iteration 0 on test and dev
    python experiments/star_word_problems.py --arms gold,verified,star,norat,direct --seeds 0,1,2 --parallel 2
    python experiments/star_word_problems.py --arms star --seeds 0 -- --set generation.decoder=graph  # extra star-run args

On a lent GPU machine, ``bash experiments/star_word_problems_gpu.sh`` runs every arm side by side (its header says how).

Every arm is one ``thoughtsource star run`` of ``configs/star/word_problems/calc.yaml`` per seed into
ROOT/seed_<s>/<arm>/, with ``--resume``: a killed experiment is continued by running this again.  Each process has
one torch thread; logs go to ROOT/logs/.  The arms (docs/star-results.md, "Issue 41"):

    fewshot   iteration 0 only (one deterministic run)     gold      the gold calc rationales (upper bound)
    star      answer filter, greedy, rationalization        verified  verified filter, k = 4 at T = 0.7, accumulated
    norat     verified without rationalization              direct    question -> answer at matched compute
"""

from __future__ import annotations

import argparse
import sys
import threading
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))
from star_bootstrap import _cli, run_jobs  # noqa: E402  (the same process runner)

from thoughtsource.store import share_completions  # noqa: E402

ARMS: dict[str, list[str]] = {
    "fewshot": ["--baseline", "fewshot", "--set", "iterations=0"],
    "gold": ["--baseline", "gold"],
    "verified": ["--samples", "4", "--accumulate"],
    "star": ["--filter", "answer"],
    "norat": ["--samples", "4", "--accumulate", "--no-rationalization"],
    "direct": ["--baseline", "direct"],
}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--root", type=Path, default=REPO / "star_runs" / "word_problems")
    ap.add_argument("--config", type=Path, default=REPO / "configs" / "star" / "word_problems" / "calc.yaml")
    ap.add_argument("--arms", default="fewshot")
    ap.add_argument("--seeds", default="0")
    ap.add_argument("--parallel", type=int, default=1, help="processes at a time (one torch thread each)")
    ap.add_argument("--split-only", action="store_true", help="write the task file and its counts, run nothing")
    argv = sys.argv[1:]
    cut = argv.index("--") if "--" in argv else len(argv)  # after "--": passed to every star run as is
    args, extra = ap.parse_args(argv[:cut]), argv[cut + 1:]
    arms = [a for a in args.arms.split(",") if a.strip()]
    unknown = [a for a in arms if a not in ARMS]
    if unknown:
        ap.error(f"unknown arms {unknown}; known: {', '.join(ARMS)}")
    task_file = args.root / "word_problems_calc.json"
    if not task_file.is_file() or args.split_only:
        import json

        from thoughtsource.star.word_problems import context_lines, write_split

        args.root.mkdir(parents=True, exist_ok=True)
        parts = write_split(task_file, calc=True)
        print(json.dumps({"split": parts.counts(), "context_lines": context_lines(parts.dev, parts.test)}, indent=1))
        if args.split_only:
            return 0
    shared = args.root / f"seed_{args.seeds.split(',')[0]}" / "fewshot" / "completions.sqlite"
    for arm in arms:
        for s in args.seeds.split(","):
            if arm != "fewshot":
                added = share_completions(shared, args.root / f"seed_{s}" / arm)
                print(f"seed {s} {arm}: {added} completions shared from {shared}")
    cli, lock = _cli(), threading.Lock()
    jobs = [([*cli, "star", "run", "--config", str(args.config), "--set", f"task={task_file}", "--seed", s, "--out",
              str(args.root / f"seed_{s}" / arm), "--resume", "--threads", "1", *ARMS[arm], *extra],
             args.root / "logs" / f"seed_{s}_{arm}.log")
            for arm in arms for s in ([args.seeds.split(",")[0]] if arm == "fewshot" else args.seeds.split(","))]
    return run_jobs(jobs, args.parallel, lock)


if __name__ == "__main__":
    sys.exit(main())
