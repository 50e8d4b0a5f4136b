from __future__ import annotations

import pytest
from pydantic import ValidationError

from thoughtsource.answers import semantic_problems
from thoughtsource.schema import GeneratedCot, Sample, parse_number


def mc(**kw):
    base = dict(id="1", question="Q?", type="multiplechoice", choices=["red", "blue"], answer=["blue"])
    return Sample(**{**base, **kw})


def test_valid_multiplechoice_has_no_problems():
    assert semantic_problems(mc()) == []


def test_multiplechoice_answer_must_be_a_choice():
    problems = semantic_problems(mc(answer=["green"]))
    assert len(problems) == 1 and "'green' is not one of the choices" in problems[0]


@pytest.mark.parametrize(
    "answer,ok", [("18", True), ("-3", True), ("1,000", True), ("2.5", True), ("3/4", True), ("twelve", False), ("", False)]
)
def test_number_answers(answer, ok):
    s = Sample(id="n", question="?", type="number", answer=[answer])
    assert (semantic_problems(s) == []) is ok


@pytest.mark.parametrize("answer,ok", [("True", True), ("no", True), ("maybe", False)])
def test_bool_answers(answer, ok):
    s = Sample(id="b", question="?", type="bool", choices=["True", "False"], answer=[answer])
    assert (semantic_problems(s) == []) is ok


def test_unknown_type_and_missing_field_are_structural_errors():
    with pytest.raises(ValidationError):
        Sample(id="1", question="?", type="essay")
    with pytest.raises(ValidationError):
        Sample.model_validate({"id": "1", "type": "text"})


def test_old_keys_are_accepted_and_extras_kept():
    c = GeneratedCot.model_validate(
        {"id": "x", "templates_version": "0.01", "annotation": [{"key": "k", "value": "v"}], "seed": 3}
    )
    assert c.fragments_version == "0.01"
    assert c.annotations[0].key == "k"
    assert c.to_dict()["seed"] == 3


def test_parse_number():
    assert parse_number("1,234.5") == 1234.5
    assert parse_number("-7") == -7
    assert parse_number("3/4") == 0.75
    assert parse_number("1,23") is None
