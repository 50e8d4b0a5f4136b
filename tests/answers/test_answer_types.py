"""Conformance of every registered answer type (as tests/datasets/test_all.py does for datasets): the same checks,
run over ``answers.ANSWER_TYPES``, so a new type is held to them by registering it."""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

import pytest

from thoughtsource import answers
from thoughtsource.answers import ANSWER_TYPES, MODES, NONE, AnswerType
from thoughtsource.errors import ThoughtSourceError
from thoughtsource.prompts import load_fragments
from thoughtsource.schema import ANSWER_TYPES as SCHEMA_TYPES

# Per type: (gold answer as a sample stores it, choices, a value that is not the gold).  A new type adds its row.
EXAMPLES: dict[str, tuple[list[str], list[str], Any]] = {
    "multiplechoice": (["light"], ["dark", "light", "blue"], "A"),
    "bool": (["yes"], [], False),
    "number": (["1,250"], [], 1251.0),
    "text": (["naoa"], [], "naob"),
    "collection": (["red", "blue"], [], frozenset({"red"})),
    "math": (["\\frac{14}{3}"], [], "\\frac{15}{4}"),
}
NAMES = list(ANSWER_TYPES)


def test_the_registry_is_the_schemas_list_of_types() -> None:
    assert tuple(ANSWER_TYPES) == SCHEMA_TYPES
    assert set(EXAMPLES) == set(ANSWER_TYPES), "add an example row for the new type"


@pytest.mark.parametrize("name", NAMES)
def test_type_is_one_module_with_its_name(name: str) -> None:
    t = ANSWER_TYPES[name]
    assert isinstance(t, AnswerType) and t.name == name
    assert type(t).__module__.startswith("thoughtsource.answers.") and type(t).__module__ != "thoughtsource.answers.base"
    assert answers.get(name) is t


def test_an_unknown_type_is_one_clear_error() -> None:
    with pytest.raises(ThoughtSourceError, match=r"Unknown answer type 'no-such-type'.*math") as e:
        answers.get("no-such-type")
    assert isinstance(e.value, ValueError) and "\n" not in str(e.value)


@pytest.mark.parametrize("name", NAMES)
def test_the_gold_stated_as_an_answer_is_read_back_as_the_gold(name: str) -> None:
    t = ANSWER_TYPES[name]
    answer, choices, _ = EXAMPLES[name]
    gold = t.gold(answer, choices)
    assert gold is not None
    stated = t.gold_text(answer, choices)
    for text, source in ((f"So the answer is {stated}.", "cot"), (f" {stated}.", "extraction")):
        for mode in MODES:
            e = t.extract(text, mode, source, choices)  # type: ignore[arg-type]
            assert e.found and t.equal(e.value, gold), (text, mode, e)
            bare = t.bare(text, choices)
            assert bare is None or bare == e, (text, bare, e)


@pytest.mark.parametrize("name", NAMES)
def test_a_wrong_value_is_wrong_and_votes_apart(name: str) -> None:
    t = ANSWER_TYPES[name]
    answer, choices, wrong = EXAMPLES[name]
    gold = t.gold(answer, choices)
    assert not t.equal(wrong, gold)
    right = t.extract(f"The answer is {t.gold_text(answer, choices)}.", "strict", "cot", choices).value
    keys = [t.vote_key(v) for v in (right, right, wrong)]
    assert all(isinstance(k, Hashable) for k in keys)
    assert keys[0] == keys[1] != keys[2]


@pytest.mark.parametrize("name", NAMES)
def test_text_without_an_answer_is_none_never_an_error(name: str) -> None:
    t = ANSWER_TYPES[name]
    _, choices, _ = EXAMPLES[name]
    for text in ("We cannot tell from the question", "?!", "The answer is", "\\boxed{"):
        e = t.extract(text, "strict", "cot", choices)
        assert e.value is None and e.rule in ("none", "ambiguous", "truncated"), (text, e)
    assert NONE.value is None


@pytest.mark.parametrize("name", NAMES)
def test_flexible_never_loses_a_strict_answer(name: str) -> None:
    t = ANSWER_TYPES[name]
    answer, choices, _ = EXAMPLES[name]
    text = f"Let me work through it. First step done.\nTherefore, the answer is {t.gold_text(answer, choices)}."
    strict = t.extract(text, "strict", "cot", choices)
    assert strict.found and t.extract(text, "flexible", "cot", choices) == strict


@pytest.mark.parametrize("name", NAMES)
def test_extraction_prompt_is_a_bundled_fragment(name: str) -> None:
    t = ANSWER_TYPES[name]
    _, choices, _ = EXAMPLES[name]
    table = load_fragments().answer_extractions
    assert t.extraction_prompt(choices, table) in table


@pytest.mark.parametrize("name", [n for n in NAMES if n != "collection"])  # a collection's gold is a list of items
def test_an_answer_in_gold_form_is_the_same_answer(name: str) -> None:
    """answer_text gives what a sample stores as its gold (STaR's pseudo-labels replace gold answers)."""
    t = ANSWER_TYPES[name]
    answer, choices, _ = EXAMPLES[name]
    value = t.extract(f"The answer is {t.gold_text(answer, choices)}.", "strict", "cot", choices).value
    label = t.answer_text(value, choices)
    assert label is not None and t.equal(value, t.gold([label], choices))


@pytest.mark.parametrize("name", NAMES)
def test_an_extracted_value_equal_to_the_gold_is_right(name: str) -> None:
    """extract.is_correct answers ``value == gold`` without asking the type: every type's equality must agree."""
    t = ANSWER_TYPES[name]
    answer, choices, _ = EXAMPLES[name]
    gold = t.gold(answer, choices)
    assert t.equal(gold, gold)


SINGLE = [n for n in NAMES if n != "collection"]  # a collection's gold is several items


@pytest.mark.parametrize("name", NAMES)
def test_the_gold_passes_its_check_and_two_golds_are_one_problem_unless_a_collection(name: str) -> None:
    """``gold_problems`` (``answers.semantic_problems``, which loading a file runs) accepts the type's own gold."""
    t = ANSWER_TYPES[name]
    answer, choices, _ = EXAMPLES[name]
    assert t.gold_problems(answer, choices) == []
    two = t.gold_problems([answer[0], answer[0]], choices)
    assert two == [] if name == "collection" else two == [f"field 'answer': a {name} sample has one gold answer, got 2"]


@pytest.mark.parametrize("name", NAMES)
def test_listed_choices_are_the_samples_and_hold_the_gold(name: str) -> None:
    t = ANSWER_TYPES[name]
    answer, choices, _ = EXAMPLES[name]
    listed = list(t.question_choices(choices or ["x", "y"]))
    assert listed in ([], choices)
    if listed:
        assert answer[0] in listed


@pytest.mark.parametrize("name", SINGLE)
def test_a_published_gold_is_read_as_the_samples_gold(name: str) -> None:
    """A log prints the gold as an answer extraction states it (a letter, Yes, 1,250): as ``Sample.answer`` it is
    the same gold, and a reason the type gives for a disagreement is a documented one."""
    from thoughtsource.datasets.cot_logs import DISAGREEMENT_REASONS

    t = ANSWER_TYPES[name]
    answer, choices, wrong = EXAMPLES[name]
    gold = t.gold(answer, choices)
    stored, letter = t.published_gold(t.gold_text(answer, choices), choices)
    assert letter is None and t.equal(gold, t.gold([stored], choices, letter))
    text = f"So the answer is {t.gold_text(answer, choices)}."
    for value, correct in ((gold, True), (wrong, False), (None, False)):
        assert t.published_reason(str(wrong), text, value, gold, correct) in (None, *DISAGREEMENT_REASONS)


@pytest.mark.parametrize("name", NAMES)
def test_partial_credit_is_none_or_full_for_the_gold(name: str) -> None:
    t = ANSWER_TYPES[name]
    answer, choices, wrong = EXAMPLES[name]
    gold = t.gold(answer, choices)
    assert t.f1(gold, gold) in (None, 1.0)
    f = t.f1(wrong, gold)
    assert f is None or 0.0 <= f < 1.0


@pytest.mark.parametrize("name", SINGLE)
def test_star_completions_state_the_gold_so_the_judge_reads_it(name: str) -> None:
    """STaR's prompt format per type: its label is the gold; every completion (reference format and the authors',
    with a rationale and direct) is read back as the gold, as the STaR judge reads it; the hint is in the
    rationalization prompt only."""
    t = ANSWER_TYPES[name]
    answer, choices, _ = EXAMPLES[name]
    gold = t.gold(answer, choices)
    label = t.star_label(answer[0], choices)
    assert t.equal(gold, t.gold([label], choices))
    for completion, source in (
        (t.completion(label, choices, "First step. Second step."), "cot"),
        (t.star_completion(label, choices, "First step. Second step."), "cot"),
        (t.completion(label, choices, None), "cot"),
        (t.star_completion(label, choices, None), "extraction"),  # the authors' direct prompt: "A: (b)."
    ):
        e = t.extract(completion, "strict", source, choices)  # type: ignore[arg-type]
        assert e.found and t.equal(e.value, gold), (completion, e)
    hint = t.star_hint(label, choices)
    question = "Which one is it?"
    asked, hinted = t.star_question(question, label, choices, False), t.star_question(question, label, choices, True)
    assert asked.startswith(question) and hinted.startswith(question) and asked.endswith("\n")
    assert hint not in asked and hint in hinted
