"""Similarity data for long traces: every pair above 0.05 in a Python loop (as before issue 42) against the vectorised
top partners of ``web.similarity.pairwise``, in the same run.

Three traces of ~20 KB each, made of real CoTs of the example model runs (concatenated, seeded), as on a sample page
with three reasoning traces.  Prints per trace set: pairs, JSON bytes and seconds of both, and the time ratio; and
checks that both highlight the same sentences at every threshold of the slider's range.

    PYTHONPATH=src OMP_NUM_THREADS=1 python benchmarks/similarity_topk.py [--sets 3] [--kb 20]
"""

from __future__ import annotations

import argparse
import json
import random
import time
from pathlib import Path

from thoughtsource.web.data import ServedData
from thoughtsource.web.similarity import MIN_SENT, highlighted, jaccard, pairwise, sentences

RUNS = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "thoughtsource_examples" / "model_runs"


def all_pairs(cots: list[str]) -> dict:
    """The former ``pairwise``: every sentence pair of different CoTs above MIN_SENT, one pair at a time."""
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.metrics.pairwise import cosine_similarity

    sents = [sentences(c) for c in cots]
    flat = [(ci, si, s) for ci, ss in enumerate(sents) for si, s in enumerate(ss)]
    cos = cosine_similarity(TfidfVectorizer(stop_words="english").fit_transform([s for _, _, s in flat]))
    pairs = []
    for i, (ca, sa, ta) in enumerate(flat):
        for j in range(i + 1, len(flat)):
            cb, sb, tb = flat[j]
            if ca != cb:
                t, jac = float(cos[i, j]), jaccard(ta, tb)
                if max(t, jac) >= MIN_SENT:
                    pairs.append([ca, sa, cb, sb, round(t, 4), round(jac, 4)])
    return {"sentences": sents, "pairs": pairs}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sets", type=int, default=3)
    ap.add_argument("--kb", type=int, default=20)
    args = ap.parse_args()
    data = ServedData.load(sorted(RUNS.glob("*.json")))
    texts = [c.cot for it in data.items for c in it.sample.generated_cot if c.cot and len(c.cot) > 200]
    pairwise(["warm up.", "warm up now."])
    for seed in range(args.sets):
        rng = random.Random(seed)
        traces = []
        for _ in range(3):
            t = ""
            while len(t) < args.kb * 1000:
                t += rng.choice(texts) + "\n"
            traces.append(t[: args.kb * 1000])
        t0 = time.perf_counter()
        new = pairwise(traces)
        t_new = time.perf_counter() - t0
        t0 = time.perf_counter()
        old = all_pairs(traces)
        t_old = time.perf_counter() - t0
        same = all(highlighted(new, m, th / 100) == highlighted(old, m, th / 100)
                   for m in ("tfidf", "jaccard") for th in range(5, 101, 5))
        print(f"set {seed}: {sum(map(len, new['sentences']))} sentences | all pairs: {len(old['pairs'])} pairs, "
              f"{len(json.dumps(old)) / 1000:.0f} KB, {t_old:.2f} s | top partners: {len(new['pairs'])} pairs, "
              f"{len(json.dumps(new)) / 1000:.0f} KB, {t_new:.3f} s | time ratio {t_new / t_old:.3f} | "
              f"same highlights at 0.05..1.00: {same}")


if __name__ == "__main__":
    main()
