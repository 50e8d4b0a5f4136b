"""The pre-registered word-problem split of issue 41 (docs/star-results.md, "Issue 41"), and its context lines.

* **test**: MAWPS ``cv_mawps/fold0/dev.csv`` (the held-out fold, ids ``mawps-dev-*``), ASDiv-A folds 3 and 4, and
  400 SVAMP problems drawn with a fixed seed; a test problem whose question text, numbers included, equals a
  training-pool problem's is dropped (:attr:`WordProblemSplit.dropped`).
* **pool**: MAWPS fold-0 ``train.csv``, ASDiv-A folds 0-2, the other 600 SVAMP problems; **dev**: 200 of the pool
  drawn with a fixed seed, never trained on; **train**: the rest of the pool.

:func:`split` builds it from the local raw files (the registered loaders, no network); :func:`write_split` writes it
as one ThoughtSource file (dataset ``word_problems``, splits ``train``, ``dev``, ``test``) that a STaR run takes as
its task.  :func:`context_lines` scores the two heuristics the pre-registration names on it.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any

from ..collection import Collection
from ..datasets import resolve, spec
from ..io import write_json
from ..schema import Sample
from .tasks.from_dataset import calc_gold

#: fixed before any run (the pre-registration); changing one changes the experiment
SVAMP_TEST = 400
DEV = 200
SEED = "issue-41-word-problems"
ASDIV_TEST_FOLDS = (3, 4)
ASDIV_POOL_FOLDS = (0, 1, 2)
NAME = "word_problems"


def question_key(question: str) -> str:
    """The text two problems are compared by: lower case, words and numbers only."""
    return " ".join(re.findall(r"[a-z]+|\d+(?:\.\d+)?", question.lower()))


@dataclass
class WordProblemSplit:
    test: list[Sample]
    dev: list[Sample]
    train: list[Sample]
    #: test problems dropped because a pool problem has the same question text
    dropped: list[str] = field(default_factory=list)

    def counts(self) -> dict[str, Any]:
        by = {name: _by_source(samples) for name, samples in (("test", self.test), ("dev", self.dev), ("train", self.train))}
        return {**{k: len(v) for k, v in (("test", self.test), ("dev", self.dev), ("train", self.train))},
                "dropped_from_test": len(self.dropped), "by_source": by}


def source_of(sample: Sample) -> str:
    """``mawps``, ``asdiv`` or ``svamp`` from a sample's id."""
    return "mawps" if sample.id.startswith("mawps-") else "asdiv" if sample.id.startswith("nluds-") else "svamp"


def _by_source(samples: list[Sample]) -> dict[str, int]:
    out: dict[str, int] = {}
    for s in samples:
        out[source_of(s)] = out.get(source_of(s), 0) + 1
    return out


def _asdiv_folds(data_dir: Path | None) -> dict[int, set[str]]:
    """The ids of each ASDiv-A fold file (verified local raw files)."""
    files = resolve(spec("asdiv"), ["train"], data_dir)
    return {i: {line.strip() for line in files[f"asdiv/nfolds/asdiv-a/fold{i}.txt"][0].read_text(encoding="utf-8").splitlines()
                if line.strip()} for i in range(5)}


def split(data_dir: str | Path | None = None) -> WordProblemSplit:
    """The pre-registered split from the local raw files."""
    d = Path(data_dir) if data_dir is not None else None

    def samples(name: str) -> list[Sample]:
        return [s for part in Collection.from_datasets(name, data_dir=d)[name].values() for s in part]

    mawps, asdiv, svamp = samples("mawps"), samples("asdiv"), samples("svamp")
    folds = _asdiv_folds(d)
    test_ids = set().union(*(folds[i] for i in ASDIV_TEST_FOLDS))
    pool_ids = set().union(*(folds[i] for i in ASDIV_POOL_FOLDS))
    order = sorted(svamp, key=lambda s: s.id)
    random.Random(f"{SEED}-svamp").shuffle(order)
    test = ([s for s in mawps if s.id.startswith("mawps-dev-")] + [s for s in asdiv if s.id in test_ids] + order[:SVAMP_TEST])
    pool = ([s for s in mawps if s.id.startswith("mawps-train-")] + [s for s in asdiv if s.id in pool_ids] + order[SVAMP_TEST:])
    seen = {question_key(s.question) for s in pool}
    dropped = [s.id for s in test if question_key(s.question) in seen]
    test = [s for s in test if question_key(s.question) not in seen]
    shuffled = sorted(pool, key=lambda s: s.id)
    random.Random(f"{SEED}-dev").shuffle(shuffled)
    dev_ids = {s.id for s in shuffled[:DEV]}
    return WordProblemSplit(test=test, dev=[s for s in pool if s.id in dev_ids], train=[s for s in pool if s.id not in dev_ids],
                            dropped=dropped)


def calc_gold_all(samples: list[Sample], data_dir: str | Path | None = None) -> dict[str, str]:
    """``{sample id: calculator-format gold rationale}`` from each source dataset's equations (those that execute to
    their gold answer; :func:`thoughtsource.star.tasks.from_dataset.calc_gold`)."""
    out: dict[str, str] = {}
    for source in ("mawps", "asdiv", "svamp"):
        part = [s for s in samples if source_of(s) == source]
        out.update(calc_gold(source, "train", None if data_dir is None else str(data_dir), part))
    return out


def write_split(out: str | Path, data_dir: str | Path | None = None, *, calc: bool = False) -> WordProblemSplit:
    """The split as one ThoughtSource file (dataset ``word_problems``), written atomically.

    Splits: ``train`` (the whole pool: a STaR run holds its 200 dev problems out of it, ``task_options.n_dev``),
    ``dev`` (this module's own draw, for the context lines) and ``test``.  ``calc``: each sample's CoT is its
    calculator-format gold rationale (none where its equation does not execute to its answer), the form a run with
    ``task_options.format: calc`` reads from a file."""
    parts = split(data_dir)
    gold = calc_gold_all(parts.train + parts.dev + parts.test, data_dir) if calc else {}

    def row(s: Sample) -> dict[str, Any]:
        d = s.model_dump(mode="json", exclude_none=True)
        if calc:
            d["cot"] = [gold[s.id]] if s.id in gold else []
        return d

    write_json(Path(out), {NAME: {name: [row(s) for s in samples] for name, samples in
                                  (("train", parts.dev + parts.train), ("dev", parts.dev), ("test", parts.test))}})
    return parts


# --------------------------------------------------------------------------- context lines
_NUMBER = re.compile(r"(?<![\w.])\d+(?:,\d{3})*(?:\.\d+)?")
OPERATIONS = ("+", "-", "*", "/")


def question_numbers(question: str) -> list[Fraction]:
    """The numbers a question states, in order (digits only; number words are not counted)."""
    return [Fraction(m.group().replace(",", "")) for m in _NUMBER.finditer(question)]


def _apply(op: str, a: Fraction, b: Fraction) -> Fraction | None:
    if op == "/":
        return a / b if b else None
    return a + b if op == "+" else a - b if op == "-" else a * b


def _right(value: Fraction | None, gold: str) -> bool:
    try:
        return value is not None and abs(float(value) - float(gold)) <= 1e-4 * max(1.0, abs(float(gold)))
    except ValueError:
        return False


def context_lines(dev: list[Sample], test: list[Sample]) -> dict[str, Any]:
    """"add all the numbers in the question" and "the first two numbers" (the one operation best on dev, and its
    oracle: any of the four right) on test, overall and per source."""

    def rate(samples: list[Sample], score: Any) -> dict[str, Any]:
        hits = [bool(score(s)) for s in samples]
        per: dict[str, list[int]] = {}
        for s, h in zip(samples, hits, strict=True):
            per.setdefault(source_of(s), [0, 0])
            per[source_of(s)][0] += h
            per[source_of(s)][1] += 1
        return {"right": sum(hits), "n": len(hits), "by_source": per}

    def first_two(op: str) -> Any:
        def score(s: Sample) -> bool:
            nums = question_numbers(s.question)
            return len(nums) >= 2 and _right(_apply(op, nums[0], nums[1]), s.answer[0])
        return score

    def add_all(s: Sample) -> bool:
        nums = question_numbers(s.question)
        return bool(nums) and _right(sum(nums, Fraction(0)), s.answer[0])

    def oracle(s: Sample) -> bool:
        return any(first_two(op)(s) for op in OPERATIONS)

    best = max(OPERATIONS, key=lambda op: (rate(dev, first_two(op))["right"], -OPERATIONS.index(op)))
    return {"add_all_numbers": rate(test, add_all), "first_two_numbers": {"operation": best, **rate(test, first_two(best))},
            "first_two_numbers_oracle": rate(test, oracle)}
