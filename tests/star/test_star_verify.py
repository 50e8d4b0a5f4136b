"""The verified-rationale filter (issue 12, item 3): checks of the rationale itself, beyond its answer."""

from __future__ import annotations

import json
import random
import re
from pathlib import Path

import pytest

from thoughtsource.star.tasks import Problem, Task, get_task
from thoughtsource.star.tasks.arithmetic import ArithmeticTask, scratchpad
from thoughtsource.star.verify import (
    check_statements,
    verify_bool,
    verify_choice,
    verify_compact_scratchpad,
    verify_number,
    verify_scratchpad,
)


@pytest.fixture(scope="module")
def figure_3(shared_data: Path) -> str:
    """The paper's Figure 3 target (scratchpad and answer for 6 2 4 + 2 5 9), read from the paper itself."""
    paper = shared_data.parent / "papers" / "star-paper.txt"
    if not paper.is_file():
        pytest.skip(f"STaR paper not found at {paper}")
    m = re.search(r"```\nInput:\n6 2 4 \+ 2 5 9\nTarget:\n(.*?)\n```", paper.read_text(), re.S)
    assert m is not None
    return m.group(1)


# --------------------------------------------------------------------------- arithmetic
def test_figure_3_scratchpad_is_accepted(figure_3: str) -> None:
    assert verify_scratchpad(figure_3, 624, 259) is None


@pytest.mark.parametrize(
    ("old", "new", "what"),
    [
        ("2 + 5 , 3 C: 1", "2 + 5 , 3 C: 0", "carry"),  # single wrong carry
        ("6 + 2 , 8 3 C: 0", "6 + 2 , 8 3 C: 1", "carry"),
        ("6 + 2 , 8 3 C: 0", "6 + 2 , 7 3 C: 0", "digits"),  # single wrong digit
        ("2 + 5 , 3 C: 1", "2 + 5 , 4 C: 1", "digits"),
        ("2 + 5 , 3 C: 1", "2 + 6 , 3 C: 1", "digit pair"),
        ("0 8 8 3\n", "0 8 9 3\n", "final scratchpad line"),
        ("6 2 4 + 2 5 9 , C: 0", "6 2 4 + 2 5 8 , C: 0", "restates"),
    ],
)
def test_one_wrong_line_with_the_right_answer_is_rejected(old: str, new: str, what: str, figure_3: str) -> None:
    text = figure_3.replace(old, new, 1)
    assert text != figure_3 and text.endswith("\n8 8 3")  # the final answer is still right
    reason = verify_scratchpad(text, 624, 259)
    assert reason is not None and what in reason


@pytest.mark.parametrize("text", ["</scratch>\n8 8 3", "8 8 3", "<scratch>\n</scratch>\n8 8 3", " 8 8 3\n</scratch>"])
def test_hint_copy_without_a_scratchpad_is_rejected(text: str) -> None:
    assert verify_scratchpad(text, 624, 259) is not None


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("</scratch>\n8 8 3", "</scratch>"),  # no answer line
        ("</scratch>\n8 8 3", "</scratch>\n8 8 4"),  # answer differs from the scratchpad
        ("</scratch>\n8 8 3", "</scratch>\n8 8 3\nInput:"),  # text after the answer line
        (", 8 8 3 C: 0\n", ""),  # a line missing
        ("2 + 5 , 3 C: 1\n", "2 + 5 , 3 C: 1\n2 + 5 , 3 C: 1\n"),  # a line repeated
    ],
)
def test_malformed_scratchpads_are_rejected(old: str, new: str, figure_3: str) -> None:
    text = figure_3.replace(old, new)
    assert text != figure_3 and verify_scratchpad(text, 624, 259) is not None


def _random_pairs(n: int, seed: int) -> list[tuple[int, int]]:
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        d = rng.randint(1, 5)
        lo = 0 if d == 1 else 10 ** (d - 1)
        out.append((rng.randint(lo, 10**d - 1), rng.randint(lo, 10**d - 1)))
    return out


def _corrupt_one_digit(text: str, rng: random.Random) -> str:
    """Change one digit (operand, pair, sum digit or carry) on one scratchpad line, the answer line kept."""
    lines = text.splitlines()
    k = rng.randrange(1, len(lines) - 2)  # between <scratch> and </scratch>
    j = rng.choice([m.start() for m in re.finditer(r"\d", lines[k])])
    lines[k] = lines[k][:j] + str((int(lines[k][j]) + rng.randint(1, 9)) % 10) + lines[k][j + 1 :]
    return "\n".join(lines)


def test_generated_scratchpads_pass_and_every_single_corruption_fails() -> None:
    rng = random.Random(7)
    for a, b in [*_random_pairs(2000, 12), (0, 0), (9, 9), (99, 1), (99999, 99999), (50, 50)]:
        good = scratchpad(a, b) + "\n" + " ".join(str(a + b))
        assert verify_scratchpad(good, a, b) is None, good
        bad = _corrupt_one_digit(good, rng)
        assert bad != good and bad.endswith("\n" + " ".join(str(a + b)))  # the final answer is still right
        assert verify_scratchpad(bad, a, b) is not None, bad


def test_arithmetic_task_verify_hook(figure_3: str) -> None:
    t = ArithmeticTask(1, 5, n_train=50, n_test_per_digit=2)
    problems = t.load("train", 3)
    assert all(t.verify(p, t.completion(p, p.rationale)) is None for p in problems)
    p = t.make_problem(624, 259, "fig3")
    assert t.verify(p, figure_3) is None
    assert t.verify(p, "</scratch>\n8 8 3", rationalized=True) is not None
    assert t.verify(p, figure_3.replace("C: 1", "C: 0")) is not None


# --------------------------------------------------------------------------- number (GSM8K)
def test_a_false_statement_with_the_gold_answer_is_rejected() -> None:
    text = "Tom has 2 apples and buys 3 more, so he has 2 + 3 = 6 apples.\nHe eats one, 6 - 1 = 5.\n#### 5"
    reason = verify_number(text, "5")
    assert reason is not None and "2 + 3 = 6" in reason
    assert verify_number(text.replace("= 6 apples", "= 5 apples").replace("6 - 1 = 5", "5 - 0 = 5"), "5") is None


@pytest.mark.parametrize(
    "statement",
    [
        "Natalia sold 48/2 = <<48/2=24>>24 clips in May.",
        "she makes $720 + $270 = $<<720+270=990.00>>990.00",
        "In total 1,000 + 2,500 = 3,500 people.",
        "Her overtime pay is 18*.5 = $9.00",
        "Maila read 12 x 2 = 24 pages.",
        "Each gets 100/3 = 33.33 dollars.",
        "So 20% * 50 = 10 are red.",
        "It grew by 0.2 * 100 = 20%.",
        "Then (3 + 4) * 2 = 14 and 14 − 4 = 10.",
        "10 ÷ 4 = 2.5 and 3 × 4 = 12",
        "2 years ago: 86(2)=172",
        "The trip took 1 1/2 * 60 = 90 minutes.",
        "Marco gets 28 / 1/5 = 28 * 5 = 140 cups.",
        "2^3 = 8 cubes and 10/2^2 = 2.5",
        "a total of -5 + 3 = -2 degrees",
    ],
)
def test_true_statements_pass(statement: str) -> None:
    errors, checked = check_statements(statement)
    assert errors == [] and checked >= 1


@pytest.mark.parametrize(
    ("statement", "bad"),
    [
        ("Natalia sold 48/2 = <<48/2=25>>24 clips in May.", "<<48/2=25>>"),
        ("she makes $720 + $270 = $980.00", "$720 + $270 = $980.00"),
        ("In total 1,000 + 2,500 = 3,600 people.", "1,000 + 2,500 = 3,600"),
        ("Each gets 100/3 = 33.4 dollars.", "100/3 = 33.4"),
        ("Maila read 12 x 2 = 26 pages.", "12 x 2 = 26"),
        ("Then (3 + 4) * 2 = 14 = 15.", "14 = 15"),
        ("Running total: 5 + 3 = 8 + 2 = 10", "5 + 3 = 8 + 2"),  # a chain states 8 = 10
    ],
)
def test_false_statements_are_found(statement: str, bad: str) -> None:
    errors, _ = check_statements(statement)
    assert errors == [bad]


@pytest.mark.parametrize(
    "text",
    [
        "She spent S + 30 + 46 = S + 76.",  # variables: nothing to check
        "Half of 10 = 5 apples, 2 hours = 120 minutes.",  # phrases with words
        "so 2 * x = 12 and 11x+15=301",
        "He leaves at 0900-0130 = 0730 hours",
        "It lasts 560//10 = 56 nights",
    ],
)
def test_statements_with_words_or_unknown_notation_are_not_checked(text: str) -> None:
    assert check_statements(text) == ([], 0)


def test_variable_chains_check_only_their_numeric_part() -> None:
    assert check_statements("so S + 143 = 200 - 16 = 184.") == ([], 1)
    assert check_statements("so S + 143 = 200 - 16 = 183.")[0] == ["200 - 16 = 183"]


def test_number_rationale_other_rules() -> None:
    good = "She has 48/2 = 24.\n#### 24"
    assert verify_number(good, "24") is None
    assert "hint" in (verify_number("The answer is given (24). 48/2 = 24\n#### 24", "24", hint="(24)") or "")
    assert verify_number("#### 24", "24") == "no arithmetic statement"
    assert verify_number("#### 24", "24", require_statement=False) is None
    assert "gold" in (verify_number("48/2 = 24\n#### 25", "24") or "")
    assert verify_number("48/2 = 24", "24") == "no final answer"
    assert verify_number("48/2 = 24. Therefore, the answer is 24.", "24") is None


def _gsm_exemplars(path: Path) -> list[tuple[str, str, str]]:
    """(question, rationale, gold) of the STaR authors' GSM8K prompt file."""
    out = []
    for block in path.read_text().strip().split("\n\n"):
        q, a = block.split("\nA: ", 1)
        out.append((q.removeprefix("Q: "), a, a.rsplit("#### ", 1)[1].strip()))
    return out


def test_the_authors_gsm8k_exemplars_pass(shared_data: Path) -> None:
    exemplars = _gsm_exemplars(shared_data / "star_examples" / "gsm" / "prompts.txt")
    assert len(exemplars) == 6
    for _, rationale, gold in exemplars:
        errors, checked = check_statements(rationale)
        assert errors == [] and checked >= 2
        assert verify_number(rationale, gold) is None
        assert verify_number(rationale, str(int(gold) + 1)) is not None


def test_gsm8k_reference_solutions_nearly_all_pass(shared_data: Path) -> None:
    """The human solutions of GSM8K (with their calculator annotations): false rejections are rare.

    On all 8,792 train+test solutions 100 fail (61 contain only equations with variables, 39 a
    statement that is false as written, e.g. ``8*3 = <<80*3=240>>240``, or in other units, ``$1 / 2 = 50 cents``).
    """
    lines = (shared_data / "gsm8k" / "train.jsonl").read_text().splitlines()[:2000]
    solutions = [json.loads(line)["answer"] for line in lines]
    failed = [s for s in solutions if verify_number(s, s.rsplit("#### ", 1)[1].strip().replace(",", ""))]
    assert len(failed) / len(solutions) < 0.015
    slip = "Every tray needs 80 cookies and she's making 3 trays so 8*3 = <<80*3=240>>240\n#### 240"  # a GSM8K train line
    assert verify_number(slip, "240") == "false statement: 8*3 = 240"


# --------------------------------------------------------------------------- multiple choice (CQA)
def _cqa_exemplars(path: Path) -> list[tuple[list[str], str, str]]:
    """(choices, rationale, gold text) of the STaR authors' CQA prompt file."""
    out = []
    for block in path.read_text().strip().split("\n\n"):
        lines = block.splitlines()
        choices = [ln[4:] for ln in lines if re.match(r"^\([a-e]\) ", ln)]
        rationale = lines[-1].removeprefix("A: ")
        letter = re.search(r"\(([a-e])\)\.$", rationale)
        assert letter is not None
        out.append((choices, rationale, choices[ord(letter.group(1)) - 97]))
    return out


def test_the_authors_cqa_exemplars_pass(shared_data: Path) -> None:
    exemplars = _cqa_exemplars(shared_data / "star_examples" / "cqa_prompts.txt")
    assert len(exemplars) == 7
    for choices, rationale, gold in exemplars:
        assert verify_choice(rationale, choices, gold) is None
        other = next(c for c in choices if c != gold)
        assert verify_choice(rationale, choices, other) is not None  # not the gold answer


INK = ["shirt pocket", "calligrapher's hand", "inkwell", "desk drawer", "blotter"]
INK_OK = "The answer must be used to absorb extra ink. Blotters are designed to absorb liquids. Therefore, the answer is blotter (e)."


@pytest.mark.parametrize(
    ("text", "what"),
    [
        ("Blotter is marked. Therefore, the answer is blotter (e) (CORRECT).", "hint"),
        ("The (correct) one is blotter. Therefore, the answer is blotter (e).", "hint"),
        ("blotter CORRECT. Therefore, the answer is blotter (e).", "hint"),
        ("Blotters absorb liquids. Therefore, the answer is inkwell (e).", "different choices"),
        ("Blotters absorb liquids. Therefore, the answer is blotter (c).", "different choices"),
        ("The answer is inkwell. Blotters absorb liquids. Therefore, the answer is blotter (e).", "earlier"),
        ("The answer is (c). Blotters absorb liquids. Therefore, the answer is blotter (e).", "earlier"),
        ("Blotters absorb liquids. Therefore, the answer is blotter (e) or inkwell (c).", "several"),
        ("Blotters absorb liquids. Therefore, the answer is a sponge.", "no choice"),
        ("Blotters absorb liquids, so use a blotter (e).", "no 'the answer is'"),
        ("Ink stays in the inkwell. Therefore, the answer is inkwell (c).", "gold"),
    ],
)
def test_crafted_multiple_choice_failures(text: str, what: str) -> None:
    reason = verify_choice(text, INK, "blotter")
    assert reason is not None and what in reason, reason


@pytest.mark.parametrize(
    "text",
    [
        INK_OK,
        "An inkwell (c) holds ink and a shirt pocket (a) gets stained, so neither absorbs it. The correct choice absorbs. "
        "Therefore, the answer is blotter (e).",
        "The answer is not inkwell (c). Therefore, the answer is blotter (e).",
        "Therefore, the answer is (e).",
        "Therefore, the answer is blotter.",
    ],
)
def test_multiple_choice_eliminations_and_short_forms_pass(text: str) -> None:
    assert verify_choice(text, INK, "blotter") is None


def test_choice_inside_a_longer_choice_is_one_choice() -> None:
    choices = ["money", "money bank", "bank"]
    assert verify_choice("Therefore, the answer is money bank (b).", choices, "money bank") is None
    assert verify_choice("Therefore, the answer is money (b).", choices, "money bank") is not None


def test_bool_hint_copy_is_rejected() -> None:
    assert verify_bool("Cats are mammals. So the answer is yes.", "yes") is None
    assert verify_bool("(yes) Cats are mammals. So the answer is yes.", "yes") is not None
    assert verify_bool("Cats are mammals (YES). So the answer is yes.", "yes") is not None


# --------------------------------------------------------------------------- task hooks
def test_base_task_verify_checks_nothing() -> None:
    # Task's default, called on a task that overrides it (Task is abstract: a bare subclass cannot be made)
    assert Task.verify(ArithmeticTask(1, 1), Problem("1", "q", "a"), "anything") is None


def test_dataset_task_verify_dispatches_on_type(shared_data: Path) -> None:
    cqa = get_task("commonsense_qa", data_dir=str(shared_data), n_train=5, n_test=5)
    p = cqa.load("train", 0)[0]
    good = f"Because. Therefore, the answer is {cqa.answer_text(p)}."
    assert cqa.verify(p, good) is None
    assert "hint" in (cqa.verify(p, good.replace("Because.", f"{p.answer} (CORRECT)."), rationalized=True) or "")
    gsm = get_task("gsm8k", data_dir=str(shared_data), n_train=5, n_test=5)
    q = gsm.load("train", 0)[0]
    assert gsm.verify(q, f"2 + 3 = 5 and 1 + 1 = 2. Therefore, the answer is {q.answer}.") is None
    assert "2 + 3 = 6" in (gsm.verify(q, f"2 + 3 = 6. Therefore, the answer is {q.answer}.") or "")
    assert gsm.verify(q, f"{gsm.hint(q)} Therefore, the answer is {q.answer}.", rationalized=True) is not None


def test_training_record_with_fewshot_exemplars() -> None:
    t = ArithmeticTask(2, 2, n_train=4, n_test_per_digit=1)
    p, ex = t.load("train", 0)[0], t.exemplars(3)
    text = t.completion(p, p.rationale)
    bare = t.training_record(p, text, rationalized=True)
    few = t.training_record(p, text, rationalized=True, exemplars=ex)
    assert bare.prompt == f"Input:\n{p.question}\nTarget:\n"
    assert few.prompt == t.prompt(p, ex) and few.prompt.endswith(bare.prompt) and few.prompt.count("Input:") == 4
    assert f"Target: {' '.join(p.answer)}" not in few.prompt  # never the hint, even for a rationalization
    assert few.completion == bare.completion and few.rationalized
    direct = t.training_record(p, None, exemplars=ex)
    assert direct.prompt == t.prompt(p, ex, direct=True) and "<scratch>" not in direct.prompt + direct.completion


COMPACT = "<scratch>\n4+9+0=13\n2+5+1=8\n6+2+0=8\n</scratch>\n883"


def test_compact_scratchpad_passes_when_every_line_is_right() -> None:
    assert verify_compact_scratchpad(COMPACT, 624, 259) is None
    assert verify_compact_scratchpad("<scratch>\n9+9+0=18\n</scratch>\n18", 9, 9) is None


@pytest.mark.parametrize(("text", "reason"), [
    (COMPACT.replace("2+5+1=8", "2+5+0=7"), "line 2: 2+5+0, should be 2+5+1"),  # carry dropped
    (COMPACT.replace("4+9+0=13", "4+9+0=14"), "line 1: total 14, should be 13"),  # wrong total
    (COMPACT.replace("6+2+0=8\n", ""), "2 lines, a 3-digit sum needs 3"),  # a step missing
    (COMPACT.replace("2+5+1=8", "5+2+1=8"), "line 2: 5+2+1, should be 2+5+1"),  # operands swapped
    (COMPACT.replace("883", "884"), "answer 884 is not"),
    (COMPACT + "\n1", "text after the answer line"),
    (COMPACT.replace("</scratch>", "</scr>"), "no </scratch> line"),
    (COMPACT.replace("4+9+0=13", "4 + 9 + 0 = 13"), "is not 'x+y+c=t'"),
])
def test_compact_scratchpad_rejects_a_wrong_line(text: str, reason: str) -> None:
    got = verify_compact_scratchpad(text, 624, 259)
    assert got is not None and reason in got


def test_compact_task_verify_uses_the_compact_check() -> None:
    from thoughtsource.star.tasks.arithmetic import ArithmeticTask

    t = ArithmeticTask(3, 3, scratchpad="compact")
    p = t.make_problem(624, 259, "x")
    assert t.verify(p, COMPACT) is None
    assert t.is_correct(p, COMPACT.replace("2+5+1=8", "2+5+0=7")) and t.verify(p, COMPACT.replace("2+5+1=8", "2+5+0=7"))


# --------------------------------------------------------------------------- word problems (issue 30)
@pytest.mark.parametrize(
    ("statement", "bad"),
    [
        ("We subtract 3 from 9 and get 12. Therefore, the answer is 12.", "subtract 3 from 9 and get 12"),  # pilot, mawps-train-297
        ("We divide 6 weeks by 4 days and get 12. Then we multiply 12 by 4 and get 48.", "divide 6 weeks by 4 days and get 12"),
        ("First we subtract 24 from 24 and get 16. Then we divide 16 by 2 and get 8.", "subtract 24 from 24 and get 16"),
        ("We add 20 to 22 and get 41.", "add 20 to 22 and get 41"),
        ("We then add 20 and 22 to get 43.", "add 20 and 22 to get 43"),
        ("Then we multiply 96 by 5, which is 400.", "multiply 96 by 5, which is 400"),
        ("20 plus 12 is 32, and 5 times 4 equals 21.", "5 times 4 equals 21"),
        ("12 divided by 4 = 4", "12 divided by 4 = 4"),
        ("We divide 26 by 3 and get 8 remainder 1.", "divide 26 by 3 and get 8 remainder 1"),
    ],
)
def test_false_verbal_statements_are_found(statement: str, bad: str) -> None:
    errors, _ = check_statements(statement)
    assert errors == [bad]


@pytest.mark.parametrize(
    "statement",
    [
        "First we multiply 8 by 12 and get 96. Then we multiply 96 by 5 and get 480.",  # MAWPS references
        "We add 1/6 to 2/3 and get 5/6.",
        "First we subtract 31 from 7 and get -24. Then we add -24 to 24 and get 0.",
        "We divide 10 by 3 and get 10/3.",
        "We divide 100 by 3 and get 33.33.",
        "We divide 1230 by 48 and get 25 remainder 30. Since there is a remainder, we round up to 26.",  # ASDiv
        "the sum of 3 and 4 is 7 and 6 minus 2 equals 4",
        "24 gallons in minus 4 gallons out is 24-4=<<24-4=20>>20 gallons per second",  # GSM8K train: "is 24-4", no result
    ],
)
def test_true_verbal_statements_pass(statement: str) -> None:
    errors, checked = check_statements(statement)
    assert errors == [] and checked >= 1


def _word_problems(shared_data: Path, name: str) -> tuple[Task, list[Problem]]:
    from thoughtsource.star.tasks.from_dataset import DatasetTask

    task = DatasetTask(name, data_dir=str(shared_data))
    splits = task._collection_splits()
    return task, [task._problem(s, split) for split, samples in splits.items() for s in samples if s.cot]


@pytest.mark.parametrize(("name", "at_most"), [("mawps", 0), ("asdiv", 0), ("svamp", 1)])
def test_word_problem_reference_rationales_pass(shared_data: Path, name: str, at_most: int) -> None:
    """The datasets' own rationales ("We add 7 to 55 and get 62.") pass the verified filter with grounding.

    The one SVAMP failure subtracts 149, a number its question does not state.
    """
    task, problems = _word_problems(shared_data, name)
    assert len(problems) > 900
    failed = [p.id for p in problems if task.verify(p, task.completion(p, p.rationale))]
    assert len(failed) <= at_most, failed
    assert sum(check_statements(p.rationale)[1] > 0 for p in problems) == len(problems)  # every one is checked


def _pilot_rows(ds: str) -> list[dict[str, object]]:
    import gzip

    path = Path(__file__).parents[2] / "docs" / "star-results" / "real_data" / "pilot" / f"{ds}_fewshot_test_rows.json.gz"
    with gzip.open(path, "rt") as f:
        return json.load(f)["rows"]


def test_pilot_answer_correct_rationales_with_wrong_arithmetic_are_rejected(shared_data: Path) -> None:
    """Issue 30's pilot: of 14 answer-correct SmolLM2 rationales 10 state false verbal arithmetic."""
    verdicts = {}
    for ds in ("mawps", "asdiv"):
        task, problems = _word_problems(shared_data, ds)
        by_id = {p.id: p for p in problems}
        for row in _pilot_rows(ds):
            if row["correct"]:
                verdicts[row["id"]] = task.verify(by_id[str(row["id"])], str(row["text"]))
    assert len(verdicts) == 14
    assert verdicts["mawps/train/mawps-train-297"] == "false statement: subtract 3 from 9 and get 12"
    assert verdicts["asdiv/train/nluds-2148"] == "false statement: subtract 10 from 7 and get 17"
    assert sorted(k for k, v in verdicts.items() if v is None) == [
        "mawps/train/mawps-dev-101",  # "add 20 and 22 to get 42": right and from the question
        "mawps/train/mawps-dev-44",
        "mawps/train/mawps-dev-61",
        "mawps/train/mawps-train-118",
    ]


def test_numbers_from_nowhere_are_rejected(shared_data: Path) -> None:
    task, problems = _word_problems(shared_data, "mawps")
    (p,) = [p for p in problems if p.meta["sample_id"] == "mawps-train-297"]  # 9 crayons, 3 more placed
    assert task.verify(p, "We add 9 to 3 and get 12. Therefore, the answer is 12.") is None
    assert task.verify(p, "We add 5 to 7 and get 12. Therefore, the answer is 12.") == "number not from the question: 5 in add 5 to 7 and get 12"
    # an earlier result and a unit constant are grounded; a number the question never names is not
    assert task.verify(p, "We add 9 to 3 and get 12. Then we multiply 12 by 1 and get 12. Therefore, the answer is 12.") is None
    assert "6 in" in (task.verify(p, "We add 6 to 6 and get 12. Therefore, the answer is 12.") or "")
    assert verify_number("We add 5 to 7 and get 12. Therefore, the answer is 12.", "12") is None  # no question: no grounding
    gsm = get_task("gsm8k", data_dir=str(shared_data), n_train=5, n_test=5)
    q = gsm.load("train", 0)[0]
    assert gsm.verify(q, f"2 + 3 = 5. Therefore, the answer is {q.answer}.") is None  # GSM8K: statements only
