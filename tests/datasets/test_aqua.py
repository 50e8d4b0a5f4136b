"""AQuA-RAT (validation = dev.json, test = test.json) against the raw files; train.json is absent here."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from thoughtsource import datasets
from thoughtsource.errors import DataError


def raw_lines(data_dir: Path, name: str) -> list[dict]:
    return [json.loads(x) for x in (data_dir / "aqua" / name).read_text(encoding="utf-8").splitlines() if x.strip()]


def test_counts(load_split) -> None:
    assert len(load_split("aqua", "validation")) == 254
    assert len(load_split("aqua", "test")) == 254


def test_validation_record(load_split, data_dir: Path) -> None:
    r = raw_lines(data_dir, "dev.json")[0]
    assert r["options"] == ["A)32400", "B)6000", "C)600", "D)60000", "E)10"] and r["correct"] == "A"
    s = {x.id: x for x in load_split("aqua", "validation")}["aqua-validation-1"]
    assert s.question == r["question"]
    assert s.type == "multiplechoice"
    assert s.choices == ["32400", "6000", "600", "60000", "10"]
    assert s.answer == ["32400"]
    assert s.cot == r["rationale"].split("\n")
    assert s.cot[-1] == "Correct answer - A"


def test_choices_containing_parentheses(load_split, data_dir: Path) -> None:
    # the published loader split options at every ")", cutting "5(√3 + 1)" to "5(√3 + 1"
    r = raw_lines(data_dir, "test.json")[0]
    assert r["options"][0] == "A)5(√3 + 1)" and r["correct"] == "A"
    s = {x.id: x for x in load_split("aqua", "test")}["aqua-test-1"]
    assert s.question == r["question"]
    assert s.choices == ["5(√3 + 1)", "6(√3 + √2)", "7(√3 – 1)", "8(√3 – 2)", "None of these"]
    assert s.answer == ["5(√3 + 1)"]
    assert s.cot[0] == "Explanation :" and s.cot[-1] == "Answer : A"
    assert len(s.cot) == len([x for x in r["rationale"].split("\n") if x.strip()])


def test_second_validation_record(load_split, data_dir: Path) -> None:
    r = raw_lines(data_dir, "dev.json")[1]
    s = {x.id: x for x in load_split("aqua", "validation")}["aqua-validation-2"]
    assert r["correct"] == "D"
    assert s.choices == ["100 m", "150 m", "200 m", "250 m", "300 m"]
    assert s.answer == ["250 m"]
    assert s.cot == [x.strip() for x in r["rationale"].split("\n") if x.strip()]


def test_train_is_declared_but_reported_missing(data_dir: Path) -> None:
    spec = datasets.spec("aqua")
    assert spec.splits == ("train", "validation", "test")
    assert "train" not in datasets.available_splits("aqua", data_dir)
    with pytest.raises(DataError) as e:
        datasets.load("aqua", ["train"], data_dir=data_dir)
    assert "aqua/train.json" in str(e.value) and "https://raw.githubusercontent.com/deepmind/AQuA/master/train.json" in str(
        e.value
    )


def test_unpinned_train_file_is_used_with_a_warning(data_dir: Path, tmp_path: Path, caplog) -> None:
    # train.json is absent here; it has the format of dev.json, so three dev lines stand in for it
    (tmp_path / "aqua").mkdir()
    lines = (data_dir / "aqua" / "dev.json").read_text(encoding="utf-8").splitlines()[:3]
    (tmp_path / "aqua" / "train.json").write_text("\n".join(lines) + "\n", encoding="utf-8")
    with caplog.at_level("WARNING"):
        samples = datasets.load("aqua", ["train"], data_dir=tmp_path)["train"]
    assert [s.id for s in samples] == ["aqua-train-1", "aqua-train-2", "aqua-train-3"]
    assert samples[0].answer == ["32400"]
    assert "no checksum is pinned" in caplog.text and "train.json" in caplog.text


def test_gold_by_position_where_choice_texts_repeat(load_split, data_dir: Path) -> None:
    # AQuA test 125: B and E are both "6 kmph", the source's gold is E. The sample stores the gold as choice text,
    # which used to map back to the first letter (B), so the model's " E." (Kojima's aqua_zero_shot_cot log,
    # record 135, the same question) was scored wrong. The sample now keeps the source's letter: by position.
    from thoughtsource.extract import extract, gold_value, is_correct, sample_gold

    raw = raw_lines(data_dir, "test.json")[124]
    assert raw["options"][1] == "B)6 kmph" and raw["options"][4] == "E)6 kmph" and raw["correct"] == "E"
    samples = {x.id: x for x in load_split("aqua", "test")}
    s = samples["aqua-test-125"]
    assert s.answer == ["6 kmph"] and s.answer_letter == "E"  # type: ignore[attr-defined]
    gold = sample_gold(s)
    assert gold == "E"
    for text, ok in ((" E.", True), (" B.", False), (" A.", False)):
        assert is_correct(extract(text, s.type, choices=s.choices).value, s.type, gold) is ok
    # a ThoughtSource file that has only the text (no answer_letter): every letter with that text is right
    text_only = gold_value(s.type, s.answer, s.choices)
    assert text_only == frozenset({"B", "E"})
    assert is_correct("B", s.type, text_only) and is_correct("E", s.type, text_only)
    kept = sorted(x.id for x in samples.values() if "answer_letter" in x.model_extra)
    assert kept == ["aqua-test-118", "aqua-test-125", "aqua-test-127", "aqua-test-194"]
    assert all(sum(c == samples[i].answer[0] for c in samples[i].choices) > 1 for i in kept)
    assert [samples[i].answer_letter for i in kept] == [  # type: ignore[attr-defined]
        raw_lines(data_dir, "test.json")[int(i.rsplit("-", 1)[1]) - 1]["correct"] for i in kept
    ]
