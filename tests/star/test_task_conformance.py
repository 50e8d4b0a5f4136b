"""The contract every STaR task keeps: what :class:`~thoughtsource.star.loop.StarRun` (and its metrics) ask of a
:class:`~thoughtsource.star.tasks.Task`, checked on every task in ``TASKS`` built small from its real data, and on
dataset tasks of the other answer types (any registered dataset is a task).

A new entry in ``TASKS`` fails :func:`test_every_registered_task_is_checked` until it is added to :data:`SMALL`.
"""

from __future__ import annotations

import inspect
from decimal import Decimal, InvalidOperation

import pytest

from thoughtsource.star.tasks import TASKS, Problem, Task, TrainingRecord, get_task, task_class

#: each task in TASKS, small: {name: task_options}; data_dir (../shared/data) is added for dataset tasks
SMALL: dict[str, dict[str, object]] = {
    "arithmetic": {"min_digits": 1, "max_digits": 3, "n_train": 12, "n_test_per_digit": 4, "n_dev_per_digit": 2,
                   "pool_size": 60},
    "gsm8k": {"n_train": 8, "n_test": 8, "n_dev": 4},
    "commonsense_qa": {"n_train": 8, "n_test": 8, "n_dev": 4},
}
#: registered datasets taken as tasks (DatasetTask with reference exemplars): a number and a bool answer type
DATASETS: dict[str, dict[str, object]] = {
    "svamp": {"n_train": 8, "n_test": 8, "n_dev": 4},
    "strategy_qa": {"n_train": 8, "n_test": 8, "n_dev": 4},
}
SEED = 0


@pytest.fixture(scope="module", params=[*SMALL, *DATASETS])
def task(request: pytest.FixtureRequest) -> Task:
    """Each task, built once for this module from its real data (read on first use)."""
    name = request.param
    options = {**SMALL, **DATASETS}[name]
    if name != "arithmetic":
        options = {**options, "data_dir": str(request.getfixturevalue("shared_data"))}
    return get_task(name, **options)


def _splits(task: Task) -> dict[str, list[Problem]]:
    return {split: task.load(split, SEED) for split in ("train", "dev", "test")}


def _gold_text(task: Task, p: Problem) -> str:
    """What a model that reproduced the reference rationale would generate after the prompt."""
    return task.completion(p, p.rationale)


def _wrong_answer(p: Problem) -> str:
    """An answer of the problem's type that is not its answer."""
    if p.type == "multiplechoice":
        return next(c for c in p.choices if c != p.answer)
    if p.type == "bool":
        return {"yes": "no", "no": "yes"}[p.answer]
    try:
        return str(Decimal(p.answer.replace(",", "")) + 1)
    except InvalidOperation:
        return p.answer + "1"


def _with_rationale(problems: list[Problem]) -> list[Problem]:
    return [p for p in problems if p.rationale.strip()]


def test_every_registered_task_is_checked() -> None:
    assert set(SMALL) == set(TASKS)


@pytest.mark.parametrize("name", list(TASKS))
def test_task_classes_implement_the_whole_contract(name: str) -> None:
    cls = task_class(name)
    assert issubclass(cls, Task) and not inspect.isabstract(cls), sorted(getattr(cls, "__abstractmethods__", ()))
    assert isinstance(cls.name, str) and cls.name
    assert isinstance(cls.stop, tuple) and all(isinstance(s, str) and s for s in cls.stop)


def test_task_is_abstract() -> None:
    with pytest.raises(TypeError, match="abstract"):
        Task()  # type: ignore[abstract]

    class Partial(Task):
        def load(self, split: str, seed: int) -> list[Problem]:
            return []

    with pytest.raises(TypeError, match="abstract"):
        Partial()  # type: ignore[abstract]


def test_problems_have_ids_questions_and_answers(task: Task) -> None:
    splits = _splits(task)
    assert splits["train"] and splits["test"], "train and test are never empty"
    ids: dict[str, str] = {}
    for split, problems in splits.items():
        for p in problems:
            assert isinstance(p, Problem)
            assert p.id and p.id not in ids, f"{p.id} in {split} and {ids.get(p.id)}"  # unique across the splits
            ids[p.id] = split
            assert p.question.strip() and p.answer.strip(), p
            assert p.type != "multiplechoice" or p.answer in p.choices, p
    assert _splits(task) == splits, "the same seed gives the same problems"


def test_training_problems_are_not_test_dev_or_exemplar_problems(task: Task) -> None:
    splits = _splits(task)
    held = {p.id for p in splits["test"] + splits["dev"]}
    for n in (1, 2):
        train = task.train_problems(n, SEED)
        assert train and not {p.id for p in train} & held
        assert [p.id for p in train] == [p.id for p in task.train_problems(n, SEED)]
    exemplars = task.exemplars(3)
    assert exemplars and task.exemplars(0) == []
    assert all(e.rationale.strip() for e in exemplars), "exemplars show a rationale"
    ids = {e.id for e in exemplars}
    questions = {" ".join(e.question.lower().split()) for e in exemplars}
    for p in splits["train"] + splits["dev"] + splits["test"]:
        assert p.id not in ids and " ".join(p.question.lower().split()) not in questions, p.id


def test_gold_rationale_is_judged_correct_and_a_wrong_answer_is_not(task: Task) -> None:
    problems = _with_rationale(_splits(task)["train"])[:5] + task.exemplars(2)
    assert problems, "the task has reference rationales"
    for p in problems:
        gold = _gold_text(task, p)
        assert task.is_correct(p, gold), (p.id, gold)
        predicted = task.predicted_answer(p, gold)
        assert predicted is not None
        # a predicted answer taken as a pseudo-label is judged as the answer it came from (loop._pseudo_labels)
        assert task.is_correct(p.with_answer(predicted), gold)
        wrong = task.completion(p.with_answer(_wrong_answer(p)), p.rationale)
        assert not task.is_correct(p, wrong), (p.id, wrong)
        assert not task.is_correct(p, "") and task.predicted_answer(p, "") is None
        # what the loop does with a generation: cut at the next few-shot example, then judge it
        followed = gold + (task.stop[0] if task.stop else "\n\n") + task.prompt(p, [])
        assert task.is_correct(p, task.trim(followed))
        verdict = task.verify(p, gold)
        assert verdict is None or (isinstance(verdict, str) and verdict)


def test_direct_answers_are_judged(task: Task) -> None:
    for p in _splits(task)["test"][:5]:
        answer = task.completion(p, None)
        assert task.is_correct(p, answer, direct=True), (p.id, answer)  # loop._same_answer relies on it
        wrong = task.completion(p.with_answer(_wrong_answer(p)), None)
        assert not task.is_correct(p, wrong, direct=True), (p.id, wrong)


def test_hints_and_prompts_render(task: Task) -> None:
    exemplars = task.exemplars(2)
    for p in _splits(task)["test"][:5]:
        hint = task.hint(p)
        assert isinstance(hint, str) and hint.strip()
        for direct in (False, True):
            bare = task.prompt(p, [], direct=direct)
            assert p.question in bare
            hinted = task.prompt(p, [], hint=True, direct=direct)
            assert hinted != bare and hint in hinted, "the hint shows in rationalization prompts"
            # few-shot: the exemplars' blocks, then the problem's own
            assert task.prompt(p, exemplars, direct=direct).endswith(bare)
            assert task.prompt(p, exemplars, hint=True, direct=direct).endswith(hinted)
            tokens = task.max_new_tokens(p, direct=direct)
            assert isinstance(tokens, int) and tokens > 0


def test_training_records_never_hold_the_hint(task: Task) -> None:
    exemplars = task.exemplars(2)
    for p in _with_rationale(_splits(task)["train"])[:3]:
        text = _gold_text(task, p)
        for ex in ([], exemplars):
            record = task.training_record(p, text, rationalized=True, exemplars=ex)
            assert isinstance(record, TrainingRecord)
            assert record.id == p.id and record.rationalized
            assert record.prompt == task.prompt(p, ex, hint=False) != task.prompt(p, ex, hint=True)
            assert record.completion == task.generated_completion(text)
            direct = task.training_record(p, None, exemplars=ex)
            assert direct.prompt == task.prompt(p, ex, direct=True) and direct.completion == task.completion(p, None)
            gold = task.gold_record(p, exemplars=ex)
            assert gold.prompt == record.prompt and gold.completion == task.completion(p, p.rationale)
            assert not gold.rationalized
            assert set(record.to_dict()) == {"id", "prompt", "completion", "rationalized"}


def test_groups_are_all_none_or_all_labels(task: Task) -> None:
    """metrics.py decides from the first problem whether a task has groups, then sorts the labels."""
    problems = [p for split in _splits(task).values() for p in split]
    groups = [task.groups(p) for p in problems]
    assert all(g is None for g in groups) or all(isinstance(g, str) and g for g in groups)

