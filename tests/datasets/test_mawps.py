"""MAWPS (cv_mawps fold 0 train + dev) against the raw files: count, specific records field by field."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest


@pytest.fixture(scope="module")
def raw(data_dir: Path) -> dict[str, dict[str, str]]:
    out = {}
    for part in ("train", "dev"):
        with open(data_dir / "mawps" / "cv_mawps" / "fold0" / f"{part}.csv", encoding="utf-8", newline="") as fh:
            for i, row in enumerate(csv.DictReader(fh), 1):
                out[f"mawps-{part}-{i}"] = row
    return out


@pytest.fixture(scope="module")
def by_id(load_split) -> dict:
    return {x.id: x for x in load_split("mawps", "train")}


def test_count(by_id, raw) -> None:
    assert len(raw) == 1537 + 384
    assert set(by_id) == set(raw)


def test_placeholders_filled_and_detokenized(by_id, raw) -> None:
    r = raw["mawps-train-1"]
    assert r["Question"].startswith("Mary is baking a cake . The recipe wants number0 cups of flour .")
    assert (r["Numbers"], r["Equation"], r["Answer"]) == ("8.0 2.0", "- number0 number1", "6")
    s = by_id["mawps-train-1"]
    assert (
        s.question
        == "Mary is baking a cake. The recipe wants 8 cups of flour. She already put in 2 cups. How many cups does she need to add?"
    )
    assert s.cot == ["We subtract 2 from 8 and get 6."] and s.answer == ["6"]
    # number1 is in the question but not in the equation
    r = raw["mawps-train-2"]
    assert (r["Numbers"], r["Equation"]) == ("139.0 118.0 131.0", "+ number0 number2")
    assert by_id["mawps-train-2"].cot == ["We add 139 to 131 and get 270."]
    assert "118 scissors" in by_id["mawps-train-2"].question


def test_multi_step_cot_uses_the_records_own_numbers(by_id, raw) -> None:
    r = raw["mawps-dev-4"]
    assert (r["Numbers"], r["Equation"], r["Answer"]) == ("25000.0 1500.0 8.0", "- number0 * number1 number2", "13000.0")
    s = by_id["mawps-dev-4"]
    assert s.question == (
        "Conner has 25000 dollars in his bank account. Every month he spends 1500 dollars. He does not add money "
        "to the account. How much money will Conner have in his account after 8 months?"
    )
    assert s.cot == ["First we multiply 1500 by 8 and get 12000.", "Then we subtract 12000 from 25000 and get 13000."]
    assert s.answer == ["13000"]
    assert by_id["mawps-train-4"].cot == ["First we add 4 to 6 and get 10.", "Then we multiply 8 by 10 and get 80."]


def test_float_fractions_shown_as_fractions(by_id, raw) -> None:
    r = raw["mawps-train-9"]
    assert r["Numbers"] == "7.666666666666667 3.3333333333333335" and r["Answer"] == "4.333333333333333"
    s = by_id["mawps-train-9"]
    assert s.question == (
        "Ezra drew a white line that was 23/3 inches long. Then he drew a blue line that was 10/3 inches long. "
        "How much longer was the white line than the blue line?"
    )
    assert s.cot == ["We subtract 10/3 from 23/3 and get 13/3."]
    assert s.answer == ["4.333333"]
