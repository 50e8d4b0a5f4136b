"""CommonsenseQA (+ECQA) and StrategyQA: counts and specific records checked against the raw files."""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path

import pytest

from thoughtsource import datasets
from thoughtsource.datasets._text import clean_text


def _raw_jsonl(path: Path, qid: str) -> dict:
    for line in path.read_text(encoding="utf-8").splitlines():
        rec = json.loads(line)
        if rec["id"] == qid:
            return rec
    raise AssertionError(f"{qid} not in {path}")


def _letters(text: str) -> str:
    return re.sub(r"\W", "", text).lower()


def _ecqa_row(data_dir: Path, qid: str) -> dict | None:
    for name in ("cqa_data_val.csv", "cqa_data_test.csv"):
        with open(data_dir / "ecqa/generated_csv" / name, encoding="utf-8", newline="") as fh:
            for row in csv.DictReader(fh):
                if row["q_no"] == qid:
                    return row
    return None


@pytest.fixture(scope="module")
def cqa(data_dir: Path) -> dict[str, dict]:
    loaded = datasets.load("commonsense_qa", data_dir=data_dir)
    return {split: {s.id: s for s in samples} for split, samples in loaded.items()}


def test_commonsense_qa_counts_and_ecqa_coverage(cqa: dict[str, dict]) -> None:
    assert {k: len(v) for k, v in cqa.items()} == {"train": 9741, "validation": 1221, "test": 1140}
    # ECQA: only the author-split val+test CSVs exist (3,284 rows); they cover 369 dev + 2,904 train questions
    assert sum(1 for s in cqa["validation"].values() if s.cot) == 369
    assert sum(1 for s in cqa["train"].values() if s.cot) == 2904
    assert not any(s.cot or s.answer for s in cqa["test"].values())


@pytest.mark.parametrize(
    ("split", "qid", "raw_file"),
    [
        ("validation", "e69da59cbcf2a302e4523571eba8186b", "dev_rand_split.jsonl"),  # with ECQA explanation
        ("validation", "1afa02df02c908a558b4036e80242fac", "dev_rand_split.jsonl"),  # ECQA train part: no CoT here
        ("train", "61fe6e879ff18686d7552425a36344c8", "train_rand_split.jsonl"),
        ("test", "90b30172e645ff91f7171a048582eb8b", "test_rand_split_no_answers.jsonl"),
    ],
)
def test_commonsense_qa_record_matches_raw(cqa, data_dir: Path, split: str, qid: str, raw_file: str) -> None:
    raw = _raw_jsonl(data_dir / "commonsense_qa" / raw_file, qid)
    s = cqa[split][qid]
    assert s.question == clean_text(raw["question"]["stem"])  # doubled blanks squashed
    assert s.choices == [c["text"] for c in raw["question"]["choices"]]
    if "answerKey" in raw:
        labels = [c["label"] for c in raw["question"]["choices"]]
        assert s.answer == [s.choices[labels.index(raw["answerKey"])]]
    else:
        assert s.answer == []
    row = _ecqa_row(data_dir, qid)
    assert bool(s.cot) == (row is not None and split != "test")
    if row is not None and split != "test":
        # the CoT is the free-flow explanation, cut into sentences: nothing lost, nothing added but periods/capitals
        assert _letters(" ".join(s.cot)) == _letters(row["taskB"])


def test_commonsense_qa_ecqa_sentences_keep_proper_nouns(cqa) -> None:
    s = cqa["validation"]["e69da59cbcf2a302e4523571eba8186b"]
    assert s.answer == ["demonstration"]
    assert s.choices == ["classroom", "facebook", "school", "apartment", "demonstration"]
    assert s.cot == [
        "She signed up for a demonstration to understand a computer better by seeing a practical explanation of how it works.",
        "Classroom, school and apartment are places and she can’t sign up for them.",
        "By signing up on Facebook, she may still face difficulty to understand the computer.",  # published: "facebook"
    ]
    t = cqa["train"]["61fe6e879ff18686d7552425a36344c8"]
    assert t.cot[0] == "Populated areas are where there are a lot of number of people."
    assert len(t.cot) == 5 and t.answer == ["populated areas"]


@pytest.fixture(scope="module")
def strategy(data_dir: Path) -> dict:
    return {s.id: s for s in datasets.load("strategy_qa", data_dir=data_dir)["train"]}


def test_strategy_qa_count_is_the_official_train_set(strategy: dict, data_dir: Path) -> None:
    raw = json.loads((data_dir / "strategy_qa/train.json").read_text()) + json.loads((data_dir / "strategy_qa/dev.json").read_text())
    assert len(strategy) == len(raw) == 2290
    assert set(strategy) == {r["qid"] for r in raw}


@pytest.mark.parametrize(("raw_file", "qid"), [("train.json", "2bc9c4f9c19c167187f2"), ("dev.json", "c91eafafed5a8f80bb5a"),
                                               ("train.json", "f945d8a4274bb3805989")])
def test_strategy_qa_record_matches_raw(strategy: dict, data_dir: Path, raw_file: str, qid: str) -> None:
    raw = next(r for r in json.loads((data_dir / "strategy_qa" / raw_file).read_text()) if r["qid"] == qid)
    s = strategy[qid]
    assert s.type == "bool" and s.choices == ["True", "False"]
    assert s.question == raw["question"]
    assert s.answer == [str(raw["answer"])]
    assert s.cot == [" ".join(f.split()) for f in raw["facts"]]
    assert s.model_extra["decomposition"] == raw["decomposition"]


def test_strategy_qa_specific_values(strategy: dict) -> None:
    s = strategy["c91eafafed5a8f80bb5a"]
    assert (s.question, s.answer) == ("Is Miami a city on the American West Coast?", ["False"])
    assert s.cot == ["Miami is a city in the state of Florida.", "Florida is the southernmost state on the American East Coast."]
    g = strategy["2bc9c4f9c19c167187f2"]
    assert g.answer == ["True"]
    # the raw fact has a double blank where a number is missing; white space is normalized
    assert g.cot[2] == "Modern geneticists have determined that out of every 200 men today has DNA that can be traced to Genghis Khan."


def test_commonsense_qa_keeps_the_source_letter_where_choice_texts_repeat(cqa: dict[str, dict], data_dir: Path) -> None:
    """6 validation and 42 train questions have their gold's text at two letters: the sample keeps the answerKey, so
    the gold is scored by position (extract.sample_gold); no other sample carries the field."""
    from thoughtsource.extract import sample_gold

    for split, n, raw_file in (("validation", 6, "dev_rand_split.jsonl"), ("train", 42, "train_rand_split.jsonl")):
        kept = [s for s in cqa[split].values() if "answer_letter" in s.model_extra]
        assert len(kept) == n
        assert all(s.choices.count(s.answer[0]) > 1 for s in kept)
        assert sum(1 for s in cqa[split].values() if s.answer and s.choices.count(s.answer[0]) > 1) == n
        s = kept[0]
        raw = _raw_jsonl(data_dir / "commonsense_qa" / raw_file, s.id)
        assert s.answer_letter == raw["answerKey"] and sample_gold(s) == raw["answerKey"]
