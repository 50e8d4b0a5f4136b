"""Table-driven answer-extraction cases, written from what real models produce.

Most texts are verbatim outputs from the Kojima et al. logs (text-davinci-002), the ThoughtSource
model runs (GPT-4, GPT-3.5-turbo, Flan-T5-XXL, Cohere command-xlarge) and common GSM8K-style
formats.  Each row: answer type, text, keyword arguments of ``extract``, expected value.
``AMB`` / ``NONE`` expect "no answer" with rule ``ambiguous`` / ``none``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from thoughtsource.extract import extract, gold_value, is_correct, normalize_text, text_f1

AMB = "<ambiguous>"
NONE = "<none>"
CS = ["shelf", "board", "church", "table", "dark"]  # CommonsenseQA question 1
CS2 = ["literacy", "knowing how to read", "money", "buying", "money bank"]
GPT35 = ["new perspective", "entertained", "understanding", "hunger", "tired eyes"]
DATES = ["09/22/2021", "09/09/2021", "09/08/2006", "09/08/2021", "09/07/2021", "08/11/2021"]
OBJ = ["Sam.", "Helga.", "Karl."]
TF = ["True", "False"]
X = {"source": "cot"}  # read a CoT (no extraction step)
FLEX = {"mode": "flexible"}
XF = {"source": "cot", "mode": "flexible"}

MC: list[tuple[str, dict[str, Any], Any]] = [
    (" E.", {"choices": CS}, "E"),
    ("E", {"choices": CS}, "E"),
    ("(E)", {"choices": CS}, "E"),
    (" (E) dark.", {"choices": CS}, "E"),
    ("E) dark", {"choices": CS}, "E"),
    ("E. dark", {"choices": CS}, "E"),
    (" e.", {"choices": CS}, "E"),
    (" (b)", {"choices": CS}, "B"),
    (" b)", {"choices": CS}, "B"),
    ("option E", {"choices": CS}, "E"),
    ("Option (d)", {"choices": CS}, "D"),
    ("choice C.", {"choices": CS}, "C"),
    (" dark.", {"choices": CS}, "E"),
    (" Dark", {"choices": CS}, "E"),
    (" **E**", {"choices": CS}, "E"),
    (" **(E) dark**", {"choices": CS}, "E"),
    ("\n\n(C)", {"choices": CS}, "C"),
    (" A: shelf.", {"choices": CS}, "A"),
    (" most likely D, table.", {"choices": CS}, "D"),
    (" D--table.", {"choices": CS}, "D"),
    (" C, because (A) and (B) are wrong.", {"choices": CS}, "C"),
    (" A shelf.", {"choices": CS}, "A"),
    (" A dog.", {"choices": CS}, NONE),
    (" I think it is B.", {"choices": CS}, "B"),
    (" probably (A), (B), (C), or (D).", {"choices": CS}, AMB),
    (" B or C.", {"choices": CS}, AMB),
    (" either A or B.", {"choices": CS}, AMB),
    (" A and D.", {"choices": CS}, AMB),
    (" A, B, C, D, or E.", {"choices": CS}, AMB),
    (" most likely to be A, B, or D.\n\nThe third step is", {"choices": CS}, AMB),
    (" (B), (D), or (E).", {"choices": CS}, AMB),
    (" A or A.", {"choices": CS}, "A"),
    (" CE.", {"choices": CS}, NONE),
    (" none of the above.", {"choices": CS}, NONE),
    ("", {"choices": CS}, NONE),
    ("   \n", {"choices": CS}, NONE),
    (" D. \n\nk = 92", {"choices": CS}, "D"),
    (" D. \n\nThere are at least 501 students in the school.", {"choices": CS}, "D"),
    ("C.", {"choices": OBJ}, "C"),
    (" D.", {"choices": OBJ}, NONE),  # only A-C exist
    (" Karl.", {"choices": OBJ}, "C"),
    (" B.", {}, "B"),  # no choice list: letters A-J
    (" D: 09/08/2021.", {"choices": DATES}, "D"),
    (" 09/08/2021", {"choices": DATES}, "D"),
    ("A) new perspective.", {"choices": GPT35}, "A"),
    ("A) New perspective", {"choices": GPT35}, "A"),
    (" tired eyes", {"choices": GPT35}, "E"),
    (" (C): staying home.", {"choices": ["a", "b", "staying home", "d", "e"]}, "C"),
    (' most likely "B: crowd."', {"choices": ["a", "crowd", "c", "d", "e"]}, "B"),
    (' "wealth" or "get rich."', {"choices": ["a", "wealth", "get rich", "d", "e"]}, AMB),
    (" money bank", {"choices": CS2}, "E"),
    (" money", {"choices": CS2}, "C"),
    (" knowing how to read.", {"choices": CS2}, "B"),
    ("B) falling down and D) exhaustion.", {"choices": ["a", "falling down", "c", "exhaustion", "e"]}, AMB),
    ("A) ground and C) surface of earth", {"choices": ["ground", "b", "surface of earth", "d", "e"]}, AMB),
    ("either C) hungry or E) thirsty.", {"choices": ["a", "b", "hungry", "d", "thirsty"]}, AMB),
    ("C) A 6'' Man", {"choices": ["a", "b", "A 6'' Man", "d"]}, "C"),
    ("B) Amoxicillin-clavulanate.", {"choices": ["Amoxicillin", "Amoxicillin-clavulanate", "Clindamycin"]}, "B"),
    (" Amoxicillin-clavulanate.", {"choices": ["Amoxicillin", "Amoxicillin-clavulanate", "Clindamycin"]}, "B"),
    ("D).", {"choices": CS}, "D"),  # Flan-T5
    (" A) clothes.", {"choices": ["clothes", "b", "c", "d"]}, "A"),
    # CoTs without an extraction step
    ("The answer is A. Wait, let me reconsider. The answer is C.", {"choices": CS, **X}, "C"),
    ("Candles give light in the dark. Therefore, the answer is (E).", {"choices": CS, **X}, "E"),
    ("Answer: D) table", {"choices": CS, **X}, "D"),
    ("The correct option is C.", {"choices": CS, **X}, "C"),
    ("The correct answer is:\n\nD) table", {"choices": CS, **X}, "D"),
    ("You'd have to go to the great outdoors to see a gazelle. The final answer: E.", {"choices": CS, **X}, "E"),
    ("Therefore, among A through E, the answer is C.", {"choices": CS, **X}, "C"),
    ("I would choose B.", {"choices": CS, **X}, "B"),
    ("So the answer is b.", {"choices": CS, **X}, "B"),
    ("The answer is **B**.", {"choices": CS, **X}, "B"),
    ("The answer is not A. It must be something else.", {"choices": CS, **X}, NONE),
    ("I think it's (D) because tables hold candles.", {"choices": CS, **X}, NONE),
    ("I think it's (D) because tables hold candles.", {"choices": CS, **XF}, "D"),
    ("(A) is wrong, (B) is wrong, so I pick option C for now.", {"choices": CS, **XF}, "C"),
    ("A dog would not go to church.", {"choices": CS, **XF}, NONE),
    ("The most likely diagnosis is Scalded skin syndrome (B).", {"choices": CS, **XF}, "B"),
    ("the answer is B or C.", {"choices": CS, **X}, AMB),
    ("The hikers stopped to have a drink, simply put they were thirsty.", {"choices": ["a", "b", "were thirsty"]}, "C"),
    (
        "So the answer is less likely, as it does not seem as though pollution would have any effect.",
        {"choices": ["x", "pollution"], **X},
        NONE,
    ),
    ("First I thought the answer is B. But the answer is B or C.", {"choices": CS, **X}, AMB),
]

NUMBER: list[tuple[str, dict[str, Any], Any]] = [
    (" 70.", {}, 70.0),
    (" 40", {}, 40.0),
    (" -3", {}, -3.0),
    (" −3.", {}, -3.0),
    (" -15.", {}, -15.0),
    (" 1,000", {}, 1000.0),
    (" 1,234,567.89", {}, 1234567.89),
    (" $40,000.", {}, 40000.0),
    (" $5.50.", {}, 5.5),
    (" -$5", {}, -5.0),
    (" 50%", {}, 50.0),
    (" 50 percent.", {}, 50.0),
    (" 3/4", {}, 0.75),
    (" 3 1/2 cups.", {}, 3.5),
    (" .5", {}, 0.5),
    (" 12 km/h.", {}, 12.0),
    (" 1.5 hours.", {}, 1.5),
    (" 40 points.", {}, 40.0),
    (" 26.\n\nThe original price was $26 + 25% = $32.5", {}, 26.0),
    (": \n\n42 + 66 = 108", {}, 108.0),
    (" 3 x 15 = 45 minutes.", {}, 45.0),
    (" 1600*3.5 = $5600. \n\nI hope this helps!", {}, 5600.0),
    (" 11.08+14.33+9.31=34.72.", {}, 34.72),
    (" eleven.", {}, 11.0),
    (" two hundred ninety-four dollars.", {}, 294.0),
    (": \n\nOne hundred and eighty", {}, 180.0),
    (" seventy six.", {}, 76.0),
    (" 5 or 6.", {}, AMB),
    (" 3/8 or 0.375.", {}, 0.375),  # the same value twice is not ambiguous
    (' 9.8. \n\nThe answer (in words) is "nine point eight gallons."', {}, 9.8),
    (' 27. \n\nThe answer (words) is "twenty-seven."', {}, 27.0),
    (": \n\nThe boots cost more than $99.", {}, 99.0),
    (" 0.6666666666666667.", {}, 0.6666666666666667),
    (" **42**", {}, 42.0),
    (" \\boxed{42}", {}, 42.0),
    (" 26.\n\nQ: Kyle has 99 apples. A: 99", {}, 26.0),
    (" not known.", {}, NONE),
    (" _____.", {}, NONE),
    (" _____.", FLEX, NONE),
    ("  . \n\n15 + 30 + 60 = 105 pounds", {}, 105.0),
    (" \n$270 + 10 = 280$", {}, 280.0),
    (" \n\n$$\nx = 80\n$$\n\nThere are 80 students at that grade level.", {}, 80.0),
    (": \n\nBob will need to spend $14.00 to buy enough popsicles.", {}, 14.0),
    # CoTs
    ("5 + 3 = 8. The answer is 8.", X, 8.0),
    ("Natalia sold 48/2 = 24 clips in May.\n#### 72", X, 72.0),
    ("So she has 18 apples left.", X, NONE),
    ("So she has 18 apples left.", XF, 18.0),
    ("The answer is 10. Actually, I made a mistake: the answer is 12.", X, 12.0),
    ("$\\frac{32}{46} \\times 100\\% = \\fbox{70}\\%$.", X, 70.0),
    ("The answer is: **1,250**", X, 1250.0),
    ("Answer: -7", X, -7.0),
    ("Final answer: $1,200.50", X, 1200.5),
    ("x = 5, y = 10", XF, 10.0),
    ("She ate 3/4 of the pizza.", XF, 0.75),
    ("The answer is 15%.", X, 15.0),
    ("2 - 3 = -1", XF, -1.0),
    ("The result is 5-3", XF, 3.0),
    ("He was 25 years old in 1990", XF, 1990.0),
    ("The answer is \\boxed{\\frac{3}{4}}.", X, 0.75),
    ("Therefore, the answer (arabic numerals) is 40.", X, 40.0),
    ("The answer is either 5 or 6.", X, AMB),
    ("The answer is not 5.", X, NONE),
    ("The answer is not 5. The answer is 6.", X, 6.0),
    ("The answer is 3 days.", X, 3.0),
    ("Therefore, the total cost is $1,000,000.", XF, 1000000.0),
    ("No numbers here at all.", XF, NONE),
    ("So the answer is 23 + 18 + 28, which equals 69.", X, 69.0),
    ("The answer is 246 people times 4 sections, which is 984 people.", X, 984.0),
    ("The answer is 65899 + 119, or 65918.", X, 65918.0),
]

BOOL: list[tuple[str, dict[str, Any], Any]] = [
    (" Yes.", {}, True),
    (" No.", {}, False),
    ("yes", {}, True),
    (" YES", {}, True),
    (" No, a baby gray whale would not fit.", {}, False),
    (":\n\nYes", {}, True),
    (": Yes", {}, True),
    (" True.", {}, True),
    (" false", {}, False),
    (" **Yes**", {}, True),
    (" Yes, Hulk's alter ego can explain atomic events.", {}, True),
    (" No, Immanuel Kant would not be disgusted by the movement.", {}, False),
    (" not known.", {}, NONE),
    (" not known.", FLEX, NONE),
    (" moot.", {}, NONE),
    (" the same for all people.", {}, NONE),
    (" There is no evidence.", {}, NONE),
    (" There is no evidence.", FLEX, NONE),
    (" unknown.", {}, NONE),
    (" dependent on the context of the lesson.", {}, NONE),
    (" It depends.", FLEX, NONE),
    (" Yes or No.", {}, AMB),
    (" yes and no", {}, AMB),
    (" not true.", {}, False),
    (" A.", {"choices": TF}, True),
    (" B) False", {"choices": TF}, False),
    ("B).", {"choices": TF}, False),
    (" (A).", {"choices": TF}, True),
    (" A) True.", {"choices": TF}, True),
    (" (B) False.", {"choices": TF}, False),
    ("No.", {"choices": TF}, False),
    (" A.", {}, NONE),  # a letter means nothing without choices
    # CoTs
    ("So the answer is yes.", X, True),
    ("Therefore, the answer (Yes or No) is No.", X, False),
    ("So, no, the Toyota Hilux cannot tip the scales.", X, NONE),
    ("So, no, the Toyota Hilux cannot tip the scales.", XF, False),
    ("Answer: A) True", {"choices": TF, **X}, True),
    ("Therefore, the answer is B) False.", {"choices": TF, **X}, False),
    ("Ivan died in 1584. The final answer: False.", X, False),
    ("The coin is still heads up. So the answer is yes.", X, True),
    ("The answer is yes. Wait, actually the answer is no.", X, False),
    ("Thus, the answer is **No**.", X, False),
    ("Computers were not invented until the 1940s.", XF, NONE),
    ("There is no record of this, so yes, it is possible.", XF, True),
    ("So the answer is: True", X, True),
    ("The statement is true.", XF, True),
    ("The answer is no one cuisine that can be called Italian.", X, NONE),
    (" No it would not.", {}, False),
]

TEXT: list[tuple[str, dict[str, Any], Any]] = [
    (' "fnenl".', {}, "fnenl"),
    (" fnel", {}, "fnel"),
    (' "n a o a".', {}, "n a o a"),
    (' "n-a-e-y".', {}, "n-a-e-y"),
    ('So, the final answer is "fnenl".', X, "fnenl"),
    ("The answer is Paris.", X, "Paris"),
    ("**Paris**", {}, "Paris"),
    ("Reasoning first.\nParis", X, NONE),
    ("Reasoning first.\nParis", XF, "Paris"),
    ("", {}, NONE),
    (" the Eiffel Tower.", {}, "the Eiffel Tower"),
    ("Answer: New York City", X, "New York City"),
    ('So, the answer is "s-a-a-s" (without the quotation marks).', X, "s-a-a-s"),
    ('Therefore, the answer is "n-d-o-a", or "ndoa".', X, "n-d-o-a"),
    (" “fnel”.", {}, "fnel"),
]

COLLECTION: list[tuple[str, dict[str, Any], Any]] = [
    (" apples, oranges and bananas.", {}, frozenset({"apples", "oranges", "bananas"})),
    (" apples; oranges", {}, frozenset({"apples", "oranges"})),
    ("The answer is: red, green, blue", X, frozenset({"red", "green", "blue"})),
    ("The answer is:\n- milk\n- eggs\n- flour", X, frozenset({"milk", "eggs", "flour"})),
    (" **Oxygen**, hydrogen.", {}, frozenset({"oxygen", "hydrogen"})),
    ("No list here", X, NONE),
    ("First line\nred and blue", XF, frozenset({"red", "blue"})),
]

CASES = (
    [("multiplechoice", *c) for c in MC]
    + [("number", *c) for c in NUMBER]
    + [("bool", *c) for c in BOOL]
    + [("text", *c) for c in TEXT]
    + [("collection", *c) for c in COLLECTION]
)


def test_there_are_at_least_150_cases_over_all_types() -> None:
    assert len(CASES) >= 150
    assert {c[0] for c in CASES} == {"multiplechoice", "number", "bool", "text", "collection"}


@pytest.mark.parametrize(("answer_type", "text", "kwargs", "expected"), CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_extract(answer_type: str, text: str, kwargs: dict[str, Any], expected: Any) -> None:
    e = extract(text, answer_type, **kwargs)
    if expected == AMB:
        assert (e.value, e.rule) == (None, "ambiguous"), e
    elif expected == NONE:
        assert (e.value, e.rule) == (None, "none"), e
    elif isinstance(expected, float):
        assert e.value == pytest.approx(expected), e
        assert e.rule.startswith("number:")
    else:
        assert e.value == expected, e
        assert e.found and e.rule.split(":")[0] in {"mc", "bool", "text", "collection"}


def test_flexible_never_loses_a_strict_answer() -> None:
    for answer_type, text, kwargs, _ in CASES:
        kw = {k: v for k, v in kwargs.items() if k != "mode"}
        strict = extract(text, answer_type, mode="strict", **kw)
        if strict.found:
            assert extract(text, answer_type, mode="flexible", **kw) == strict, (answer_type, text)


@pytest.mark.parametrize(
    ("answer_type", "value", "gold", "choices", "ok"),
    [
        ("number", 26.0, ["26"], [], True),
        ("number", 0.6666666666666667, ["0.6666666666666666"], [], True),
        ("number", 12.3, ["12.30"], [], True),
        ("number", 40000.0, ["40,000"], [], True),
        ("number", 0.75, ["3/4"], [], True),
        ("number", 0.83, ["0.8333"], [], False),
        ("number", -15.0, ["15"], [], False),
        # exact numbers: integers exactly, decimals at the gold's precision, fractions as fractions
        ("number", 1201587.0, ["1201565"], [], False),
        ("number", 1363393.0, ["1,363,293"], [], False),
        ("number", 10001.0, ["10000"], [], False),
        ("number", 3.5, ["3.50"], [], True),
        ("number", 3.5004, ["3.5"], [], False),
        ("number", 0.33, ["1/3"], [], False),
        ("number", 2 / 3, ["2/3"], [], True),
        ("number", 2 / 3, ["0.67"], [], True),
        ("number", 2 / 3, ["0.7"], [], False),
        ("number", 0.166666666666667, ["0.16666666666666666"], [], True),
        ("number", 0.6667, ["0.6666666666666666"], [], False),
        ("multiplechoice", "E", ["dark"], CS, True),
        ("multiplechoice", "D", ["dark"], CS, False),
        ("multiplechoice", "E", ["E"], [], True),
        ("bool", True, ["True"], TF, True),
        ("bool", False, ["yes"], [], False),
        ("text", "n a o a", ["naoa"], [], True),
        ("text", "n-a-e-y", ["naey"], [], True),
        ("text", "the Eiffel Tower", ["Eiffel Tower"], [], True),
        ("text", "fnenl", ["fnel"], [], False),
        ("collection", frozenset({"red", "blue"}), ["Blue", "red"], [], True),
        ("collection", frozenset({"red"}), ["Blue", "red"], [], False),
        ("number", None, ["3"], [], False),
    ],
)
def test_is_correct(answer_type: str, value: Any, gold: list[str], choices: list[str], ok: bool) -> None:
    assert is_correct(value, answer_type, gold_value(answer_type, gold, choices)) is ok


def test_text_normalization_and_f1() -> None:
    assert normalize_text("  The  Eiffel-Tower! ") == "eiffeltower"
    assert text_f1("Paris, France", ["Paris"]) == pytest.approx(2 / 3)
    assert text_f1("Paris", ["London", "paris"]) == 1.0
    assert text_f1("", ["x"]) == 0.0


def test_bad_arguments_raise() -> None:
    with pytest.raises(ValueError, match="mode"):
        extract("1", "number", mode="loose")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="answer type"):
        extract("1", "no-such-type")


@pytest.mark.slow
def test_bare_answer_shortcut_agrees_with_the_full_rules_on_every_real_answer(shared_data: Path) -> None:
    """The shortcut for bare outputs ("B.", ": No", "A) <choice A>.") returns what the full rules return, on every
    answer of the ThoughtSource model runs and of the Kojima et al. logs, in both modes and from both sources."""
    from thoughtsource.collection import Collection
    from thoughtsource.datasets.cot_logs import log_to_samples, read_kojima_log_file

    samples = []
    for path in sorted((shared_data / "kojima_logs").glob("*_zero_shot_cot.log")):
        samples.extend(log_to_samples(read_kojima_log_file(path)))
    for path in sorted((shared_data / "thoughtsource_examples" / "model_runs").glob("*.json")):
        samples.extend(x for _, _, x in Collection.load(path).samples())
    checked = shortcut = 0
    for x in samples:
        for cot in x.generated_cot:
            for a in cot.answers:
                for text, source in ((a.answer, "extraction"), (cot.cot, "cot")):
                    for mode in ("strict", "flexible"):
                        fast = extract(text, x.type, mode=mode, choices=x.choices, source=source)  # type: ignore[arg-type]
                        full = extract(text, x.type, mode=mode, choices=x.choices, source=source, shortcut=False)  # type: ignore[arg-type]
                        assert fast == full, (text, x.type, x.choices, source, mode)
                        checked += 1
                        shortcut += source == "extraction" and fast.rule in ("mc:letter", "bool:word")
    assert checked > 50_000 and shortcut > 10_000


@pytest.mark.parametrize("text", ["B.", " (C)", "(b)", "F.", "A", "I.", ": No", "no", "TRUE.", "Nope", "No one.", "A) dog.",
                                  "A) Dog", "B) dog", "A) dog or cat", "A) the answer is B", "A) dog. B) cat", "(A) dog",
                                  "A) dog; really", " A)  dog ", "E) dog", "A)dog"])
@pytest.mark.parametrize("answer_type", ["multiplechoice", "bool"])
def test_bare_answer_shortcut_edge_cases(text: str, answer_type: str) -> None:
    for choices in ([], ["dog", "cat", "cow", "emu"], ["yes", "no"], ["A", "B", "C", "D", "E", "F", "G", "H", "I"]):
        for mode in ("strict", "flexible"):
            assert extract(text, answer_type, mode=mode, choices=choices) == extract(  # type: ignore[arg-type]
                text, answer_type, mode=mode, choices=choices, shortcut=False)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("text", "value"),
    [
        # the reasoning-model answers: LaTeX numerics are numbers
        ("The answer is $\\boxed{3\\frac{3}{4}}$.", 3.75),
        ("So \\boxed{3^{4}}", 81.0),
        ("\\boxed{2.5 \\times 10^{4}}", 25000.0),
        ("The answer is \\$5.50.", 5.5),
        ("The answer is $50\\%$.", 50.0),
        ("The answer is $12\\text{ cm}$.", 12.0),
        ("The answer is $90^\\circ$.", 90.0),
        ("The answer is $1{,}000$.", 1000.0),
        ("The answer is $\\frac12$.", 0.5),
        ("The answer is $\\dfrac{7}{4}$.", 1.75),
        ("The answer is $-\\frac{1}{2}$.", -0.5),
    ],
)
def test_number_reads_latex_numerics(text: str, value: float) -> None:
    e = extract(text, "number", source="cot")
    assert e.value == pytest.approx(value, rel=1e-12), e


@pytest.mark.parametrize(
    ("text", "mode", "value", "rule"),
    [
        ("so $x = \\boxed{\\frac{14}{3}}$.", "strict", "\\frac{14}{3}", "math:boxed"),
        ("<think>maybe \\boxed{5}</think> The final answer is $\\boxed{6}$.", "strict", "6", "math:boxed"),
        ("\\boxed{1} first, then \\boxed{\\left( 3, \\frac{\\pi}{2} \\right)}", "strict", "\\left( 3, \\frac{\\pi}{2} \\right)",
         "math:boxed"),
        ("Final Answer: The final answer is $p - q$. I hope it is correct.", "strict", "p - q", "math:after-phrase"),
        ("The answer is \\(3\\sqrt{13}\\).", "strict", "3\\sqrt{13}", "math:after-phrase"),
        ("We get $x = 4$ in the end", "strict", None, "none"),
        ("We get $x = 4$ in the end", "flexible", "x = 4", "math:last-math"),
        ("<think>still thinking about \\boxed{5}", "strict", None, "truncated"),
    ],
)
def test_math_extraction(text: str, mode: str, value: str | None, rule: str) -> None:
    assert extract(text, "math", mode=mode, source="cot") == (value, rule)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("pred", "gold", "ok"),
    [
        ("(3, \\frac{\\pi}{2})", "\\left( 3, \\frac{\\pi}{2} \\right)", True),
        ("\\sqrt{117}", "3\\sqrt{13}", True),
        ("-q + p", "p - q", True),
        ("Evelyn", "\\text{Evelyn}", True),
        ("90", "90^\\circ", True),
        ("0.5", "\\frac12", True),
        ("\\frac{14}{3}", "\\dfrac{14}{3}", True),
        ("[-2, 7)", "[-2,7)", True),
        ("(2, 1)", "(1,2)", False),
        ("1201587", "1201565", False),  # plain numbers: the exact rule of the number type
        ("3.5004", "3.5", False),
        ("\\frac{15}{4}", "\\frac{14}{3}", False),
    ],
)
def test_math_equal(pred: str, gold: str, ok: bool) -> None:
    assert is_correct(pred, "math", gold_value("math", [gold])) is ok


def test_math_answer_cut_off_inside_its_math_span_is_not_read() -> None:
    # the embedded model on MATH-500 (extraction output cut at max_tokens): the last phrase's "$...$" never closes,
    # so the earlier complete answer stands
    text = "$f(1986) = 1986.$\n\nThe answer is $f(1986) = 1"
    assert extract(text, "math") == ("f(1986) = 1986", "math:after-phrase")


# "The answer is X, not Y" and its family: one case per phrasing, each read as a careful human reads it.  The
# "not Y but X" and "not Y, it is X" forms gave no answer in strict mode before (the negation skipped the whole
# sentence), and the math type read "6, not 5" as the answer "6, not 5"; a sentence that only negates gives none.
FAMILY = [
    "The answer is {x}, not {y}.",
    "The answer is not {y} but {x}.",
    "The answer is not {y}, but rather {x}.",
    "The answer is {x} (not {y}).",
    "Instead of {y}, the answer is {x}.",
    "The answer is {x}, instead of {y}.",
    "The answer is {x} rather than {y}.",
    "The answer is not {y}, it is {x}.",
    "The answer is not {y}; it is {x}.",
    "The answer is not {y}; instead, it is {x}.",
    "The answer is {x} and not {y}.",
]
# per type: (x, y, choices, the gold as a sample stores it)
FAMILY_VALUES: dict[str, tuple[str, str, list[str], list[str]]] = {
    "number": ("6", "5", [], ["6"]),
    "multiplechoice": ("(E)", "(D)", ["sing", "neat", "allergies", "living", "water"], ["water"]),
    "bool": ("yes", "no", [], ["yes"]),
    "math": ("\\frac{1}{3}", "\\frac{1}{2}", [], ["\\frac13"]),
}


@pytest.mark.parametrize("phrasing", FAMILY)
@pytest.mark.parametrize("answer_type", list(FAMILY_VALUES))
def test_the_answer_is_x_not_y_reads_x(answer_type: str, phrasing: str) -> None:
    x, y, choices, answer = FAMILY_VALUES[answer_type]
    text = phrasing.format(x=x, y=y)
    gold = gold_value(answer_type, answer, choices)
    for mode in ("strict", "flexible"):
        e = extract(text, answer_type, mode=mode, source="cot", choices=choices)  # type: ignore[arg-type]
        assert e.rule.endswith("after-phrase") or e.rule in ("mc:letter", "bool:word"), (text, mode, e)
        assert is_correct(e.value, answer_type, gold), (text, mode, e)


@pytest.mark.parametrize("text", ["The answer is not (D).", "The answer is not only (D) but also (E).",
                                  "The answer is not (D); the rest is unclear."])
def test_an_answer_sentence_that_only_negates_states_nothing(text: str) -> None:
    assert extract(text, "multiplechoice", source="cot", choices=list("abcde")).value is None
    assert extract(text.replace("(D)", "5").replace("(E)", "6"), "number", source="cot").value is None
    assert extract(text.replace("(D)", "$5$").replace("(E)", "$6$"), "math", source="cot").value is None


def test_not_these_but_that_in_a_real_cot(shared_data: Path) -> None:
    """GPT-3.5-turbo on CommonsenseQA (ThoughtSource's released run): "the answer is not A, B, C, or D, but E) using
    water" gave no answer in strict mode (the negation skipped the sentence); it is E, the gold."""
    from thoughtsource.collection import Collection

    path = shared_data / "thoughtsource_examples" / "model_runs" / "thoughtsource_67_openai_chat_gpt-3.5-turbo_None_None-kojima-01-zhou-01.json"
    sample = next(s for s in Collection.load(path)["commonsense_qa"]["validation"] if s.id == "6be05d227f4f6fe727218fc8be9df340")
    cot = next(c.cot for c in sample.generated_cot if c.id == "5b5858a7-44a5-4a27-be86-32ea0b2defc4")
    assert "Therefore, the answer is not A, B, C, or D, but E) using water" in cot
    gold = gold_value("multiplechoice", sample.answer, sample.choices)
    for mode in ("strict", "flexible"):
        e = extract(cot, "multiplechoice", mode=mode, source="cot", choices=sample.choices)  # type: ignore[arg-type]
        assert e == ("E", "mc:letter") and is_correct(e.value, "multiplechoice", gold)
