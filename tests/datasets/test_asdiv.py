"""ASDiv-A against the raw files: count (fold ids), specific records field by field."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import pytest


@pytest.fixture(scope="module")
def raw(data_dir: Path) -> dict[str, dict[str, str]]:
    root = ET.parse(data_dir / "asdiv" / "ASDiv.xml").getroot()
    return {p.get("ID"): {c.tag: (c.text or "") for c in p} for p in root.iter("Problem")}


@pytest.fixture(scope="module")
def fold_ids(data_dir: Path) -> list[str]:
    ids = []
    for i in range(5):
        ids += (data_dir / "asdiv" / "nfolds" / "asdiv-a" / f"fold{i}.txt").read_text().split()
    return ids


@pytest.fixture(scope="module")
def by_id(load_split) -> dict:
    return {x.id: x for x in load_split("asdiv", "train")}


def test_count_is_the_asdiv_a_subset(by_id, raw, fold_ids) -> None:
    assert len(raw) == 2305
    assert len(fold_ids) == len(set(fold_ids)) == 1218
    assert set(by_id) == set(fold_ids)


def test_simple_records(by_id, raw) -> None:
    r = raw["nluds-0001"]
    assert (r["Formula"], r["Answer"]) == ("7+2=9", "9 (apples)")
    s = by_id["nluds-0001"]
    assert (
        s.question
        == f"{r['Body']} {r['Question']}"
        == "Seven red apples and two green apples are in the basket. How many apples are in the basket?"
    )
    assert s.answer == ["9"]  # the number, without the unit "(apples)"
    assert s.cot == ["We add 7 to 2 and get 9."]
    assert by_id["nluds-0002"].cot == ["We add 6 to 9 and get 15."]


def test_multi_step_cot_uses_the_records_own_numbers(by_id, raw) -> None:
    assert raw["nluds-0037"]["Formula"].replace(" ", "") == "10-(3+2)=5"
    assert by_id["nluds-0037"].cot == ["First we add 3 to 2 and get 5.", "Then we subtract 5 from 10 and get 5."]
    assert by_id["nluds-0037"].answer == ["5"]
    assert by_id["nluds-0033"].cot == ["First we add 18 to 20 and get 38.", "Then we add 38 to 17 and get 55."]


def test_division_with_remainder(by_id, raw) -> None:
    r = raw["nluds-0754"]
    assert (r["Formula"], r["Answer"], r["Solution-Type"]) == ("200/28=7 r4", "8 (washing machines)", "Ceil-Division")
    s = by_id["nluds-0754"]
    # the raw body ends with "," : no doubled comma
    assert (
        s.question
        == "A washing machine can wash 28 pounds of clothes per day. If there are 200 pounds of clothes to be washed per day, how many washing machines are needed?"
    )
    assert s.cot == ["We divide 200 by 28 and get 7 remainder 4.", "Since there is a remainder, we round up to 8."]
    assert s.answer == ["8"]
    assert raw["nluds-0774"]["Formula"] == "53/8=6 r5"
    assert by_id["nluds-0774"].cot == ["We divide 53 by 8 and get 6 remainder 5."] and by_id["nluds-0774"].answer == ["6"]
    assert by_id["nluds-0906"].cot == ["First we subtract 3 from 8 and get 5.", "Then we divide 26 by 5 and get 5 remainder 1."]


def test_rounded_gold_answer(by_id, raw) -> None:
    assert raw["nluds-0575"]["Formula"] == "10/3=3.333"
    assert by_id["nluds-0575"].answer == ["3.333"]
    assert by_id["nluds-0575"].cot == ["We divide 10 by 3 and get 3.333333."]
