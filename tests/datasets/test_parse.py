"""The shared parsing helpers of thoughtsource.datasets._parse."""

from __future__ import annotations

from fractions import Fraction

import pytest

from thoughtsource.datasets._parse import (
    agrees,
    choice_index,
    clean_number,
    equation_cot,
    evaluate,
    exact_number,
    format_number,
    join_body_question,
    leading_number,
    parse_choices,
    parse_infix,
    parse_prefix,
    readable_number,
    split_inline_choices,
    split_lines,
    strip_calculator,
)


def test_parse_choices() -> None:
    assert parse_choices(["A)32400", "B) 6000", "(C) 600", "D. 1/2", "e)5(√3 + 1)"]) == (
        ["A", "B", "C", "D", "E"],
        ["32400", "6000", "600", "1/2", "5(√3 + 1)"],
    )
    with pytest.raises(ValueError, match="no label"):
        parse_choices(["32400"])


def test_split_inline_choices() -> None:
    head, labels, texts = split_inline_choices("Q? Answer Choices: (A) 1 (B) two words (C) 3.5")
    assert head == "Q? Answer Choices:" and labels == ["A", "B", "C"] and texts == ["1", "two words", "3.5"]


def test_choice_index() -> None:
    assert choice_index("C") == 2 and choice_index("(b)") == 1
    assert choice_index("B", ["A", "C", "B"]) == 2
    with pytest.raises(ValueError):
        choice_index("AB")
    with pytest.raises(ValueError):
        choice_index("F", ["A", "B"])


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (18.0, "18"),
        (18, "18"),
        (0.5, "0.5"),
        (-3.0, "-3"),
        ("1,450,000", "1450000"),
        ("18.0", "18"),
        (Fraction(1, 3), "0.333333"),
        (Fraction(10, 2), "5"),
        (1e-9, "0"),
        (2.675, "2.675"),
        ("3/4", "0.75"),
    ],
)
def test_format_number(value, text) -> None:
    assert format_number(value) == text


def test_format_number_rejects() -> None:
    with pytest.raises(ValueError):
        format_number("twelve")
    with pytest.raises(ValueError):
        format_number(float("nan"))
    assert clean_number("  72 ") == "72"


def test_numbers_from_raw_text() -> None:
    assert leading_number("9 (apples)") == "9"
    assert leading_number("14  (seats)") == "14"
    assert leading_number("-2.5 m") == "-2.5" and leading_number("1,000 (cars)") == "1,000"
    assert leading_number("(apples)") is None
    assert exact_number("0.16666666666666666") == Fraction(1, 6)
    assert exact_number("7.666666666666667") == Fraction(23, 3)
    assert exact_number("0.3333") == Fraction(3333, 10000)  # few decimals: taken as written
    assert readable_number(Fraction(23, 3)) == "23/3" and readable_number(Fraction(5, 2)) == "2.5"
    assert readable_number(Fraction(12)) == "12"
    assert agrees(Fraction(10, 3), "3.333") and not agrees(Fraction(5), 1.0) and agrees(Fraction(51), 51.0)


def test_infix_equations() -> None:
    expr = parse_infix("( 6.0 - ( 3.0 + 2.0 ) )")
    assert evaluate(expr) == 1
    assert equation_cot(expr) == ["First we add 3 to 2 and get 5.", "Then we subtract 5 from 6 and get 1."]
    assert equation_cot(parse_infix("76.0 - 25.0")) == ["We subtract 25 from 76 and get 51."]
    assert equation_cot(parse_infix("18+20+17")) == ["First we add 18 to 20 and get 38.", "Then we add 38 to 17 and get 55."]
    assert equation_cot(parse_infix("26/(8-3)"), remainder=True) == [
        "First we subtract 3 from 8 and get 5.",
        "Then we divide 26 by 5 and get 5 remainder 1.",
    ]
    assert equation_cot(parse_infix("12")) == []
    assert equation_cot(parse_infix("3*(4.5)")) == ["We multiply 3 by 4.5 and get 13.5."]
    for bad in ("2 ** 3", "x + 1", "1 +", "__import__('os')"):
        with pytest.raises(ValueError):
            parse_infix(bad)


def test_prefix_equations() -> None:
    expr = parse_prefix("- number0 * number1 number2", ["25000.0", "1500.0", "8.0"])
    assert evaluate(expr) == 13000
    assert equation_cot(expr) == [
        "First we multiply 1500 by 8 and get 12000.",
        "Then we subtract 12000 from 25000 and get 13000.",
    ]
    assert evaluate(parse_prefix("* number0 12.0", ["3"])) == 36
    frac = parse_prefix("+ + number0 number0 number2", ["0.16666666666666666", "0.16666666666666666", "0.5"])
    assert equation_cot(frac, show=readable_number) == [
        "First we add 1/6 to 1/6 and get 1/3.",
        "Then we add 1/3 to 0.5 and get 5/6.",
    ]
    with pytest.raises(ValueError, match="number2"):
        parse_prefix("+ number0 number2", ["1", "2"])
    with pytest.raises(ValueError, match="trailing"):
        parse_prefix("+ number0 number1 number1", ["1", "2"])
    with pytest.raises(ValueError, match="incomplete"):
        parse_prefix("+ number0", ["1"])
    with pytest.raises(ValueError, match="division by zero"):
        evaluate(parse_prefix("/ number0 number1", ["1", "0"]))


def test_calculator_annotations_and_lines() -> None:
    text = "Weng earns 12/60 = $<<12/60=0.2>>0.2 per minute.\n\nWorking 50 minutes, she earned 0.2 x 50 = $<<0.2*50=10>>10.\n"
    assert split_lines(strip_calculator(text)) == [
        "Weng earns 12/60 = $0.2 per minute.",
        "Working 50 minutes, she earned 0.2 x 50 = $10.",
    ]


def test_join_body_question() -> None:
    assert join_body_question("Mary has 3 cats.", "How many?") == "Mary has 3 cats. How many?"
    assert join_body_question("If each set has 13 chairs", "How many chairs?") == "If each set has 13 chairs, how many chairs?"
    assert join_body_question("If there are 200 per day,", "How many?") == "If there are 200 per day, how many?"
    assert join_body_question("If she gives 3 apples", "Dan gets how many?") == "If she gives 3 apples, Dan gets how many?"
    assert join_body_question("  a  b ", " c ") == "a b, c"
