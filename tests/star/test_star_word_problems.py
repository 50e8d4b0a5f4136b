"""Issue 41's pre-registered split on the real raw files, and its context lines."""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import pytest

from thoughtsource.collection import Collection
from thoughtsource.schema import Sample
from thoughtsource.star.word_problems import context_lines, question_key, question_numbers, source_of, split, write_split


@pytest.fixture(scope="module")
def parts(shared_data: Path):
    return split(shared_data)


@pytest.mark.slow
def test_the_split_is_as_preregistered(parts) -> None:
    c = parts.counts()
    assert c["test"] >= 1000 and c["dev"] == 200
    assert c["test"] + c["dropped_from_test"] == 384 + 504 + 400  # MAWPS fold-0 dev, ASDiv-A folds 3-4, 400 SVAMP
    assert c["dev"] + c["train"] == 1537 + 714 + 600
    pool = {question_key(s.question) for s in parts.dev + parts.train}
    assert not any(question_key(s.question) in pool for s in parts.test)  # no test question is trained on
    assert not {s.id for s in parts.dev} & {s.id for s in parts.train}
    assert all(s.id.startswith("mawps-dev-") for s in parts.test if source_of(s) == "mawps")
    assert all(s.id.startswith("mawps-train-") for s in parts.dev + parts.train if source_of(s) == "mawps")


@pytest.mark.slow
def test_the_split_is_the_same_every_time_and_loads_as_a_thoughtsource_file(parts, shared_data: Path, tmp_path: Path) -> None:
    again = write_split(tmp_path / "wp.json", shared_data)
    assert [s.id for s in again.test] == [s.id for s in parts.test] and [s.id for s in again.dev] == [s.id for s in parts.dev]
    coll = Collection.load(tmp_path / "wp.json")
    assert {k: len(v) for k, v in coll["word_problems"].items()} == {"train": len(parts.train) + 200, "dev": 200, "test": len(parts.test)}


def test_context_lines_score_what_they_say() -> None:
    def sample(i: int, q: str, a: str) -> Sample:
        return Sample(id=f"chal-{i}", question=q, answer=[a], type="number", choices=[], cot=[])

    assert question_numbers("He had 1,200 coins and 3.5 kg, then 7.") == [Fraction(1200), Fraction(7, 2), Fraction(7)]
    dev = [sample(1, "Tom has 9 apples and eats 4.", "5"), sample(2, "A box of 8 holds 3 more.", "5")]
    test = [sample(3, "Ann has 10 pens and gives 3.", "7"), sample(4, "2 cats and 5 dogs.", "7"), sample(5, "6 rows of 4.", "24")]
    r = context_lines(dev, test)
    assert r["first_two_numbers"]["operation"] == "-" and r["first_two_numbers"]["right"] == 1
    assert r["add_all_numbers"]["right"] == 1 and r["first_two_numbers_oracle"]["right"] == 3


@pytest.mark.slow
def test_a_calc_run_reads_the_split_file(shared_data: Path, tmp_path: Path) -> None:
    """The file in the calc format is a STaR task: calc exemplars from the pool, grounded, 1,145 test problems whose
    gold rationales execute to their answers and pass the verified filter."""
    from thoughtsource.star.calculator import find_annotations
    from thoughtsource.star.tasks.from_dataset import DatasetTask

    parts = write_split(tmp_path / "wp.json", shared_data, calc=True)
    task = DatasetTask(str(tmp_path / "wp.json"), format="calc", train_split="train", test_split="test", n_test=None, n_dev=200)
    test, dev = task.load("test", 0), task.load("dev", 0)
    assert len(test) == len(parts.test) and len(dev) == 200
    train_ids = {p.id for p in task.load("train", 0)}
    assert not train_ids & {p.id for p in dev} and len(parts.train) - 10 <= len(train_ids) <= len(parts.train)  # less exemplars
    shots = task.exemplars(4)
    assert len(shots) == 4 and all(find_annotations(e.rationale) for e in shots)
    with_gold = [p for p in test if p.rationale]
    assert len(with_gold) >= 0.95 * len(test)
    for p in with_gold[:200]:
        completion = task.completion(p, p.rationale)
        assert task.is_correct(p, completion), (p.id, completion)
        assert task.verify(p, completion) is None, (p.id, completion, task.verify(p, completion))
