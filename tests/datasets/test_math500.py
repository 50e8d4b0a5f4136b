"""MATH-500 against its raw file: counts, one record field by field, subject/level kept, and every reference
solution's last \\boxed{} scored equal to the gold answer (500/500)."""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path

from thoughtsource.extract import extract, gold_value, is_correct


def test_counts_subjects_and_levels(load_split) -> None:
    samples = load_split("math500", "test")
    assert len(samples) == 500
    assert Counter(s.model_extra["subject"] for s in samples) == {
        "Algebra": 124, "Intermediate Algebra": 97, "Prealgebra": 82, "Number Theory": 62, "Precalculus": 56,
        "Geometry": 41, "Counting & Probability": 38,
    }  # fmt: skip
    assert Counter(s.model_extra["level"] for s in samples) == {1: 43, 2: 90, 3: 105, 4: 128, 5: 134}


def test_first_record(load_split, data_dir: Path) -> None:
    raw = json.loads((data_dir / "math500" / "test.jsonl").read_text(encoding="utf-8").splitlines()[0])
    s = load_split("math500", "test")[0]
    assert s.id == "math500-test-1"
    assert s.type == "math"
    assert s.question == re.sub(" {2,}", " ", raw["problem"].strip())  # the shared clean-up squashes blanks
    assert s.answer == [raw["answer"]] == ["\\left( 3, \\frac{\\pi}{2} \\right)"]
    assert s.cot == [re.sub(" {2,}", " ", line.strip()) for line in raw["solution"].splitlines() if line.strip()]
    assert (s.model_extra["subject"], s.model_extra["level"]) == ("Precalculus", 2)
    assert s.to_dict()["subject"] == "Precalculus"  # written out with the sample


def test_every_reference_solution_extracts_to_its_gold(load_split) -> None:
    samples = load_split("math500", "test")
    wrong = []
    for s in samples:
        e = extract("\n".join(s.cot), "math", source="cot")
        if e.rule != "math:boxed" or not is_correct(e.value, "math", gold_value("math", s.answer)):
            wrong.append((s.id, e))
    assert wrong == []
