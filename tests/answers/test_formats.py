"""Answer formats real models write (issue 45, findings 1-3): PRM800K's "# Answer" line, GSM8K's "####", the answer
phrases the number and math types share, self-corrections, verdicts, conditional answers, cut-off thinking, scientific
notation, space-grouped digits and what is written inside a box.  Every text here is written for these tests."""

from __future__ import annotations

from typing import Any

import pytest

from thoughtsource.extract import extract, gold_value, is_correct

MODES = ("strict", "flexible")
SOURCES = ("cot", "extraction")
EVERY_MODE = [(m, s) for m in MODES for s in SOURCES]
LETTERS = ["a bench", "a kettle", "a lantern", "a ladder", "a rope"]


def _all(text: str, answer_type: str, choices: list[str] | None = None) -> set[Any]:
    """The extractions of ``text`` in every mode and from every source."""
    return {extract(text, answer_type, mode=m, source=s, choices=choices or ()) for m, s in EVERY_MODE}  # type: ignore[arg-type]


# -- 1. PRM800K: the answer is the line under "# Answer"

PRM800K = (
    "Each crate holds $6$ melons, so $4$ crates hold $6 \\cdot 4 = 24$ melons.\n\n"
    "Two melons were bruised, and the grocer keeps $2$ aside.\n\n"
    "# Answer\n\n"
    "22"
)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("source", SOURCES)
def test_prm800k_answer_line_is_the_answer_for_math(mode: str, source: str) -> None:
    # before: strict found nothing in a CoT; flexible took the last $…$ ("2"); an extraction output its first sentence
    e = extract(PRM800K, "math", mode=mode, source=source)  # type: ignore[arg-type]
    assert e == ("22", "math:after-phrase")


def test_prm800k_answer_line_is_the_answer_for_numbers() -> None:
    text = "The hall seats 25 rows of 50.\n\n# Answer\n\n1,250\n"
    for mode, source in EVERY_MODE:
        assert extract(text, "number", mode=mode, source=source) == (1250.0, "number:after-phrase")  # type: ignore[arg-type]


@pytest.mark.parametrize("heading", ["# Answer", "## Final Answer", "# Answer:"])
def test_answer_heading_forms(heading: str) -> None:
    text = f"The area is $7 \\times 3 = 21$ square units, minus the $1$ cut out.\n\n{heading}\n\n20\n"
    assert extract(text, "math", source="cot").value == "20"
    assert extract(text, "number", source="cot").value == 20.0


def test_escaped_dollar_inside_a_math_span_is_part_of_it() -> None:
    # before: "$\$7.25$" was read as the span "$\$" -> a lone backslash
    e = extract("After the discount the ticket costs $\\$7.25$.", "math", mode="flexible", source="cot")
    assert e == ("\\$7.25", "math:last-math")
    e = extract("The answer is $\\$7.25$ per ticket.", "math", source="cot")
    assert e == ("\\$7.25", "math:after-phrase")
    line = "Three tickets cost $3 \\cdot \\$7.25 = \\$21.75$.\n\n# Answer\n\n\\$21.75"
    e = extract(line, "math", source="cot")
    assert e.value == "\\$21.75" and is_correct(e.value, "math", gold_value("math", ["\\$21.75"]))
    assert extract(line, "number", source="cot").value == 21.75


# -- 2. "####" (GSM8K, and math models such as Abel) is an answer phrase of the math type too

def test_four_hashes_are_an_answer_phrase_for_math() -> None:
    text = "Tom reads $12$ pages a day for $5$ days, so $12 \\cdot 5 = 60$ pages; $3$ were pictures.\n#### 57"
    for mode, source in EVERY_MODE:
        assert extract(text, "math", mode=mode, source=source) == ("57", "math:after-phrase")  # type: ignore[arg-type]


def test_a_markdown_heading_is_not_an_answer_phrase() -> None:
    # before: the number type read "## Step 2: ..." as the answer 2
    text = "## Step 2: Add the costs\nThe pens cost 6 dollars and the paper 4 dollars."
    assert extract(text, "number", source="cot") == (None, "none")
    assert extract(text, "math", source="cot") == (None, "none")
    assert extract("### 1. Count the chairs\nThere are 9.", "number", source="cot") == (None, "none")


# The answer phrases of the number type are the math type's: one rule set.
PHRASES = [
    "So the answer is {x}.",
    "Answer: {x}",
    "The final answer should be {x}.",
    "Therefore the answer must be {x}.",
    "The answer to the question is {x}.",
    "#### {x}",
    "# Answer\n\n{x}",
    "The answer is {y}. Wait, no: it must be {x}.",
]


@pytest.mark.parametrize("phrase", PHRASES)
def test_number_and_math_read_the_same_answer_phrases(phrase: str) -> None:
    text = "We add the two piles.\n" + phrase.format(x="41", y="14")
    assert extract(text, "number", source="cot").value == 41.0
    assert extract(text, "math", source="cot").value == "41"


# -- 3. misreads

def test_a_verdict_on_the_answer_is_not_an_answer() -> None:
    # before: the math and text types took "correct" as the answer
    math = "The answer is $36$. Checking each step once more, I conclude that my answer is correct."
    for mode, source in EVERY_MODE:
        assert extract(math, "math", mode=mode, source=source).value == "36"  # type: ignore[arg-type]
    text = "The answer is Lisbon. Having checked the map, I conclude that my answer is correct."
    assert extract(text, "text", source="cot").value == "Lisbon"
    assert extract("The answer is as follows: $x = 4$.", "math", source="cot").value != "as follows: $x = 4$"
    # "right" answers "Which way?" unless it judges "my/this answer"
    assert extract("The answer is right.", "text", source="cot").value == "right"
    assert extract("The answer is left. I am sure my answer is right.", "text", source="cot").value == "left"


@pytest.mark.parametrize(
    ("box", "math_value", "number_value"),
    [
        ("\\boxed{57.142\\ldots \\approx 57}", "57", 57.0),
        ("\\boxed{57.142 \\approx 57}", "57", 57.0),
        ("\\boxed{\\text{answer: 12}}", "12", 12.0),
        ("\\boxed{\\text{The final answer is } 3\\sqrt{2}}", "3\\sqrt{2}", None),
        ("\\boxed{\\frac{1}{7} \\approx 0.143}", "\\frac{1}{7}", 1 / 7),
        ("\\boxed{\\text{answer: no}}", "\\text{no}", None),
    ],
)
def test_text_and_approximations_inside_a_box(box: str, math_value: str, number_value: float | None) -> None:
    text = f"Dividing gives {box}"
    assert extract(text, "math", source="cot") == (math_value, "math:boxed")
    if number_value is not None:
        assert extract(text, "number", source="cot").value == pytest.approx(number_value)


def test_an_approximated_answer_is_scored_against_its_gold() -> None:
    e = extract("So $\\boxed{57.142\\ldots \\approx 57}$ buses.", "math", source="cot")
    assert is_correct(e.value, "math", gold_value("math", ["57"]))
    e = extract("So $\\boxed{\\frac{1}{7} \\approx 0.143}$.", "math", source="cot")
    assert is_correct(e.value, "math", gold_value("math", ["\\frac17"]))


CONDITIONAL = [
    ("number", "The answer is 45 if the coupon applies, and 52 without it."),
    ("number", "The answer is 30 dollars if she takes the bus, 24 otherwise."),
    ("math", "The answer is $45$ if the coupon applies, and $52$ without it."),
    ("number", "Each ticket is 8 dollars. It comes to 45 if the coupon applies, and 52 without it."),
    ("math", "Each ticket is $8$ dollars. It comes to $45$ if the coupon applies, and $52$ without it."),
]


@pytest.mark.parametrize(("answer_type", "text"), CONDITIONAL)
def test_a_conditional_answer_is_no_answer_in_every_mode(answer_type: str, text: str) -> None:
    # before: 45 (the first value) in every mode
    for mode, source in EVERY_MODE:
        e = extract(text, answer_type, mode=mode, source=source)  # type: ignore[arg-type]
        if text.startswith("The answer") or (source, mode) == ("cot", "flexible"):
            assert e == (None, "conditional"), (mode, source, e)
        elif source == "cot":
            assert e == (None, "none")  # no answer phrase: nothing to read in strict mode
    tail = " " + text.split(". ")[-1]  # an extraction output that starts with the conditional answer
    for mode in MODES:
        assert extract(tail, answer_type, mode=mode) == (None, "conditional")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "text",
    [
        "The answer is 45, since with 3 coupons and 2 tickets we pay 45.",  # "with" is part of the story
        "If she paid 50 dollars, she was left with 5 dollars. The answer is 5.",  # a premise and its result
        "The answer is 45 if the coupon applies.",  # one value under a condition is that value
    ],
)
def test_one_value_with_a_condition_is_still_an_answer(text: str) -> None:
    assert extract(text, "number", source="cot").value in (45.0, 5.0)


CUT_THINKING = "<think>\nThe train covers 60 km in 1.5 hours, so its speed is 60 / 1.5 = 40 km/h, so the answer is"


@pytest.mark.parametrize("answer_type", ["number", "math", "multiplechoice", "bool", "text", "collection"])
def test_cut_off_thinking_has_no_answer_in_every_mode(answer_type: str) -> None:
    # before: the number type's flexible modes read 40; the choice type's extraction modes a letter
    for text in (CUT_THINKING, CUT_THINKING.replace("40 km/h", "(B)"), "<think>Yes, (C) fits, so the answer is"):
        assert _all(text, answer_type, LETTERS) == {(None, "truncated")}


def test_a_cot_cut_off_after_its_answer_phrase_has_no_answer() -> None:
    text = "The train covers 60 km in 1.5 hours, so its speed is 40 km/h. Therefore, the answer is"
    for answer_type in ("number", "math", "multiplechoice"):
        for mode in MODES:
            assert extract(text, answer_type, mode=mode, source="cot", choices=LETTERS) == (None, "truncated")  # type: ignore[arg-type]
    # an extraction output states its answer at its start
    assert extract(" 40. So the answer is", "number") == (40.0, "number:after-phrase")
    # a closed thought, then the answer
    assert extract("<think>40 km/h?</think>The answer is 40.", "number", source="cot").value == 40.0


@pytest.mark.parametrize(
    ("answer_type", "text", "choices", "value"),
    [
        ("multiplechoice", "So the answer is (D). Wait, no \u2014 it has to be (A), the bench.", LETTERS, "A"),
        ("multiplechoice", "The answer is D. Actually, it's B.", LETTERS, "B"),
        ("number", "The answer is 36. Actually, it should be 32, because the last row is shorter.", [], 32.0),
        ("math", "So the answer is $\\boxed{5}$. Wait, no: it must be $7$, since $x \\neq 5$.", [], "7"),
        ("bool", "The answer is no. Hold on, no: it is yes, the river does freeze.", [], True),
        ("number", "The answer is 36. Oops, it should be 32.", [], 32.0),
    ],
)
def test_a_self_correction_after_the_answer_is_the_answer(answer_type: str, text: str, choices: list[str], value: Any) -> None:
    for mode, source in EVERY_MODE:
        assert extract(text, answer_type, mode=mode, source=source, choices=choices).value == value  # type: ignore[arg-type]


def test_a_correction_phrase_with_no_answer_before_it_is_no_answer_phrase() -> None:
    assert extract(" D. Actually, it's B.", "multiplechoice", choices=LETTERS).value == "B"  # an output's start answers
    text = "Wait, it is 3 pens per box, so 4 boxes hold 12 pens."
    assert extract(text, "number", source="cot") == (None, "none")
    assert extract(text, "number", mode="flexible", source="cot").value == 12.0
    # a remark after the answer is no correction; a correction that only negates corrects nothing
    assert extract("The answer is 12. Wait, that's 3 more than last year.", "number", source="cot").value == 12.0
    assert extract("The answer is 12. No, it is not 13.", "number", source="cot").value == 12.0
    assert extract("The answer is 12. Actually, that is correct.", "math", source="cot").value == "12"
    # "Instead of no, the answer is yes": "no," opens no correction that swallows the answer phrase
    assert extract("Instead of no, the answer is yes.", "bool", source="cot").value is True


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("The answer is 4.2e4 joules.", 42000.0),
        ("The answer is 1e3.", 1000.0),
        ("The answer is 2.5E-3 grams.", 0.0025),
        ("So the answer is $2.5\\times10^{3}$.", 2500.0),
        ("So the answer is 2.5 x 10^3 metres.", 2500.0),
        ("The answer is 12 500 people.", 12500.0),
        ("The answer is 1 250 000 dollars.", 1250000.0),
        ("The answer is 12\u00a0500.", 12500.0),
        ("The answer is \u22121 250.", -1250.0),
        ("The answers are 10 000 and 20 000; the first is asked, so the answer is 10 000.", 10000.0),
        # a list of numbers is no grouped number
        ("The answer is 5 10 15, the first multiples of 5.", 5.0),
        ("The answer is 100 200 and 300 in turn.", 100.0),
    ],
)
def test_scientific_notation_and_space_grouped_digits(text: str, value: float) -> None:
    assert extract(text, "number", source="cot").value == value


def test_the_math_type_compares_scientific_and_grouped_numbers_as_numbers() -> None:
    assert is_correct("4.2e4", "math", "42000")
    assert is_correct("42 000", "math", "42000")
    assert not is_correct("4.2e4", "math", "4200")


def test_an_approximation_as_an_aside_keeps_the_answer() -> None:
    assert extract("The answer is about 17 (\u2248 17.3) buses.", "number", source="cot").value == 17.0
    assert extract("The answer is 1/3 \u2248 0.33.", "number", source="cot").value == pytest.approx(1 / 3)
    assert extract("The answer is \u2248 268.", "number", source="cot").value == 268.0
