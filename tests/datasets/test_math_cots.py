"""Every number in an equation-derived CoT (ASDiv, MAWPS, SVAMP) is the record's own.

The published loaders carried a sentence buffer over from the previous record, so a CoT could mention
another problem's numbers.  Here, for every record, each operand of each CoT sentence must be a number of
the record's *own* raw equation or the result of an earlier step of the same CoT; the operations are
counted against the equation; the sentences are ordered "First we" / "Then we".
"""

from __future__ import annotations

import csv
import json
import re
import xml.etree.ElementTree as ET
from fractions import Fraction
from pathlib import Path

import pytest

from thoughtsource.datasets._parse import exact_number

NUMBER = re.compile(r"\d+(?:\.\d+)?")
STEP = re.compile(r"^(?:We|First we|Then we) (add|subtract|multiply|divide) (\S+) (?:to|from|by) (\S+) and get (.+)\.$")


def value(text: str) -> Fraction:
    if "/" in text:
        n, d = text.split("/")
        return Fraction(int(n), int(d))
    return exact_number(text)


def raw_equations(name: str, data_dir: Path) -> dict[str, tuple[set[Fraction], int]]:
    """id → (numbers of the record's own equation, number of operations in it)."""
    out: dict[str, tuple[set[Fraction], int]] = {}
    if name == "svamp":
        for r in json.loads((data_dir / "svamp" / "SVAMP.json").read_text(encoding="utf-8")):
            eq = r["Equation"]
            out[r["ID"]] = ({exact_number(n) for n in NUMBER.findall(eq)}, sum(eq.count(op) for op in "+-*/"))
    elif name == "asdiv":
        for p in ET.parse(data_dir / "asdiv" / "ASDiv.xml").getroot().iter("Problem"):
            lhs = p.findtext("Formula").split("=")[0]
            out[p.get("ID")] = ({exact_number(n) for n in NUMBER.findall(lhs)}, sum(lhs.count(op) for op in "+-*/"))
    else:
        for part in ("train", "dev"):
            with open(data_dir / "mawps" / "cv_mawps" / "fold0" / f"{part}.csv", encoding="utf-8", newline="") as fh:
                for i, r in enumerate(csv.DictReader(fh), 1):
                    numbers = r["Numbers"].split()
                    tokens = r["Equation"].split()
                    used = {
                        exact_number(numbers[int(t[6:])]) if t.startswith("number") else exact_number(t)
                        for t in tokens
                        if t not in "+-*/"
                    }
                    out[f"mawps-{part}-{i}"] = (used, sum(t in "+-*/" for t in tokens))
    return out


@pytest.mark.parametrize("name", ["asdiv", "mawps", "svamp"])
def test_cot_numbers_are_the_records_own(name: str, load_split, data_dir: Path) -> None:
    equations = raw_equations(name, data_dir)
    samples = load_split(name, "train")
    for s in samples:
        own, operations = equations[s.id]
        steps = [m for m in (STEP.match(x) for x in s.cot) if m]
        # only ASDiv's ceiling divisions add one sentence that is not an operation
        assert len(steps) == len(s.cot) or (name == "asdiv" and s.cot[-1].startswith("Since there is a remainder")), s.id
        assert len(steps) == operations, (s.id, s.cot)
        results: set[Fraction] = set()
        for i, m in enumerate(steps):
            assert m.group(0).startswith("We" if operations == 1 else "First we" if i == 0 else "Then we"), (s.id, s.cot)
            for operand in (m.group(2), m.group(3)):
                assert value(operand) in own | results, (s.id, m.group(0), own)
            results.add(value(m.group(4).split(" remainder ")[0]))
