"""SVAMP against the raw file: count, specific records field by field."""

from __future__ import annotations

import json
from pathlib import Path

import pytest


@pytest.fixture(scope="module")
def raw(data_dir: Path) -> dict[str, dict]:
    return {r["ID"]: r for r in json.loads((data_dir / "svamp" / "SVAMP.json").read_text(encoding="utf-8"))}


@pytest.fixture(scope="module")
def by_id(load_split) -> dict:
    return {x.id: x for x in load_split("svamp", "train")}


def test_count(by_id, raw) -> None:
    assert len(by_id) == len(raw) == 1000


def test_one_step_records(by_id, raw) -> None:
    s = by_id["chal-1"]
    r = raw["chal-1"]
    assert (r["Equation"], r["Answer"]) == ("( 76.0 - 25.0 )", 51.0)
    # the body has no final period: it runs on into the question
    assert (
        s.question
        == "Each pack of dvds costs 76 dollars. If there is a discount of 25 dollars on each pack, how much do you have to pay to buy each pack?"
    )
    assert s.answer == ["51"] and s.type == "number" and s.choices == []
    assert s.cot == ["We subtract 25 from 76 and get 51."]
    s = by_id["chal-12"]
    assert raw["chal-12"]["Equation"] == "( 11.0 * 13.0 )"
    assert s.question == raw["chal-12"]["Body"] + ", how many chairs do they have in the backyard?"
    assert s.cot == ["We multiply 11 by 13 and get 143."] and s.answer == ["143"]


def test_multi_step_cot_uses_the_records_own_numbers(by_id, raw) -> None:
    # The published loader never reset its sentence buffer for "First we", so chal-11's first step was glued to the
    # sentence of chal-10 (a waiter, 9 + 12).  Ours is built from chal-11's own equation only.
    assert raw["chal-10"]["Equation"] == "( 9.0 + 12.0 )"
    assert by_id["chal-10"].cot == ["We add 9 to 12 and get 21."]
    assert raw["chal-11"]["Equation"] == "( 6.0 - ( 3.0 + 2.0 ) )"
    s = by_id["chal-11"]
    assert s.question == raw["chal-11"]["Body"] + " " + raw["chal-11"]["Question"]
    assert s.cot == ["First we add 3 to 2 and get 5.", "Then we subtract 5 from 6 and get 1."]
    assert s.answer == ["1"]
    assert by_id["chal-300"].cot == ["First we add 25 to 18 and get 43.", "Then we add 43 to 2 and get 45."]


def test_gold_answer_kept_when_equation_disagrees(by_id, raw) -> None:
    r = raw["chal-680"]
    assert r["Equation"] == "( ( 4.0 - 2.0 ) + 3.0 )" and r["Answer"] == 1.0
    s = by_id["chal-680"]
    assert s.answer == ["1"]
    assert s.cot == ["First we subtract 2 from 4 and get 2.", "Then we add 2 to 3 and get 5."]
