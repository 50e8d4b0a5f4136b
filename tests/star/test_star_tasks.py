"""STaR tasks: the paper's scratchpad, hints only in rationalization prompts, never in training data."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from thoughtsource.errors import ConfigError, UnknownNameError
from thoughtsource.star.tasks import TASKS, get_task, task_class, task_option_types
from thoughtsource.star.tasks.arithmetic import ArithmeticTask, scratchpad
from thoughtsource.star.tasks.from_dataset import CommonsenseQaTask, DatasetOptions, DatasetTask, Gsm8kTask

FIGURE_3 = """<scratch>
6 2 4 + 2 5 9 , C: 0
2 + 5 , 3 C: 1
6 + 2 , 8 3 C: 0
, 8 8 3 C: 0
0 8 8 3
</scratch>"""


def test_scratchpad_is_the_papers_figure_3() -> None:
    assert scratchpad(624, 259) == FIGURE_3
    t = ArithmeticTask(3, 3)
    p = t.make_problem(624, 259, "fig3")
    assert t.prompt(p, []) == "Input:\n6 2 4 + 2 5 9\nTarget:\n"
    assert t.completion(p, p.rationale) == FIGURE_3 + "\n8 8 3"
    assert t.is_correct(p, FIGURE_3 + "\n8 8 3")
    assert not t.is_correct(p, FIGURE_3 + "\n8 8 4")
    assert not t.is_correct(p, "8 8 3")  # strict: no scratchpad, no answer
    assert t.is_correct(p, "8 8 3", direct=True)


@pytest.mark.parametrize(("a", "b"), [(0, 0), (9, 9), (99, 1), (12345, 99999), (50, 50)])
def test_scratchpad_last_line_is_the_sum(a: int, b: int) -> None:
    last = scratchpad(a, b).splitlines()[-2]
    assert int(last.replace(" ", "")) == a + b


def test_arithmetic_is_seeded_uniform_and_disjoint() -> None:
    t = ArithmeticTask(1, 3, n_train=60, n_test_per_digit=10)
    train, test = t.load("train", 0), t.load("test", 0)
    assert [p.id for p in train] == [p.id for p in t.load("train", 0)]
    assert [p.question for p in train] != [p.question for p in t.load("train", 1)]
    assert {d: sum(p.meta["digits"] == d for p in train) for d in (1, 2, 3)} == {1: 20, 2: 20, 3: 20}
    assert len(test) == 30
    key = {(p.meta["a"], p.meta["b"]) for p in test}
    assert not key & {(p.meta["a"], p.meta["b"]) for p in train}
    assert not key & {(p.meta["a"], p.meta["b"]) for p in t.exemplars(3)}


def test_arithmetic_hint_only_in_rationalization_prompt() -> None:
    t = ArithmeticTask(2, 2, n_train=4, n_test_per_digit=1)
    p = t.load("train", 0)[0]
    ex = t.exemplars(2)
    hinted = t.prompt(p, ex, hint=True)
    plain = t.prompt(p, ex)
    target = " ".join(p.answer)
    assert hinted.endswith(f"Target: {target}\n") and "Target: " in hinted.split(p.question)[0]
    assert f"Target: {target}" not in plain
    rec = t.training_record(p, t.completion(p, p.rationale), rationalized=True)  # as if generated
    assert rec.prompt == f"Input:\n{p.question}\nTarget:\n"  # no hint, no exemplars
    assert rec.rationalized and rec.completion.endswith(target)


# --------------------------------------------------------------------------- dataset tasks
@pytest.fixture
def worldtree(examples_dir: Path) -> Path:
    return examples_dir / "tests_unit_data" / "worldtree_100_dataset.json"


def test_multiplechoice_hint_is_the_correct_marker(worldtree: Path) -> None:
    t = get_task(str(worldtree), n_train=20, n_test=10)
    train, test = t.load("train", 0), t.load("test", 0)
    assert len(train) == 20 and len(test) == 10
    ex = t.exemplars(2)
    assert not {p.id for p in ex} & {p.id for p in train} and not {p.id for p in train} & {p.id for p in test}
    p = train[0]
    hinted = t.prompt(p, ex, hint=True)
    last = hinted.split("Q: ")[-1]
    assert f"{p.answer} (CORRECT)" in last and last.count("(CORRECT)") == 1
    assert "(CORRECT)" not in t.prompt(p, ex)
    rec = t.training_record(p, "Because of reasons. Therefore, the answer is x (a).", rationalized=True)
    assert "(CORRECT)" not in rec.prompt + rec.completion
    assert rec.prompt.startswith(f"Q: {p.question}\nAnswer Choices:\n(a) ") and rec.prompt.endswith("A:")


def test_number_hint_is_the_answer_alone_never_the_solution(shared_data: Path, tmp_path: Path) -> None:
    rows = [json.loads(line) for line in (shared_data / "gsm8k" / "train.jsonl").read_text().splitlines()[:12]]
    samples = [{"id": f"gsm8k-{i}", "question": r["question"], "type": "number",
                "cot": r["answer"].split("####")[0].strip().splitlines(), "answer": [r["answer"].split("####")[1].strip()]}
               for i, r in enumerate(rows)]
    f = tmp_path / "gsm8k_12.json"
    f.write_text(json.dumps({"gsm8k": {"train": samples}}))
    t = get_task(str(f), n_test=2)
    p = t.load("train", 0)[0]
    hinted = t.prompt(p, [], hint=True)
    assert hinted == f"Q: {p.question} ({p.answer})\nA:"
    solution = next(s for s in samples if s["id"] == p.meta["sample_id"])["cot"]
    assert not any(line in hinted for line in solution)
    assert "(" + p.answer + ")" not in t.training_record(p, "x", rationalized=True).prompt


def test_registry_names() -> None:
    assert set(TASKS) >= {"arithmetic", "gsm8k", "commonsense_qa"}


def test_an_unknown_task_lists_each_name_once() -> None:
    with pytest.raises(UnknownNameError) as e:
        get_task("gsm8", n_train=1)
    names = str(e.value).split("Available: ", 1)[1].split(", ")
    assert "Did you mean: gsm8k" in str(e.value)
    assert len(names) == len(set(names)) and {"arithmetic", "gsm8k", "commonsense_qa", "worldtree"} <= set(names)


# --------------------------------------------------------------------------- DatasetTask's options object
def test_dataset_task_from_options_or_keywords_is_the_same_task(shared_data: Path) -> None:
    keywords = {"data_dir": str(shared_data), "n_train": 6, "n_test": 4, "n_dev": 2, "exemplar_seed": 7}
    from_options = DatasetTask(DatasetOptions(dataset="svamp", **keywords))
    tasks = [DatasetTask("svamp", **keywords), DatasetTask(dataset="svamp", **keywords), get_task("svamp", **keywords)]
    for t in tasks:
        assert t.options == from_options.options
        for split in ("train", "dev", "test"):
            assert t.load(split, 3) == from_options.load(split, 3)
        assert t.exemplars(2) == from_options.exemplars(2)
    assert (from_options.n_train, from_options.n_test, from_options.exemplar_split) == (6, 4, "train")
    with pytest.raises(TypeError, match="twice"):
        DatasetTask(DatasetOptions(dataset="svamp"), n_train=3)


def test_registered_dataset_tasks_keep_their_defaults() -> None:
    assert Gsm8kTask().options == DatasetOptions(dataset="gsm8k", test_split="test", prompts="star")
    assert CommonsenseQaTask(n_train=5).options == DatasetOptions(dataset="commonsense_qa", test_split="validation",
                                                                  prompts="star", n_train=5)
    assert Gsm8kTask(Gsm8kTask.options_for(n_test=9, prompts="reference")).options == Gsm8kTask(n_test=9, prompts="reference").options
    assert Gsm8kTask(dataset="other").dataset == "other"


def test_dataset_options_are_checked_and_frozen() -> None:
    with pytest.raises(ConfigError, match="n_dev >= 0"):
        DatasetOptions(dataset="svamp", n_dev=-1)
    with pytest.raises(ConfigError, match="per_iteration >= 1"):
        DatasetOptions(dataset="svamp", per_iteration=0)
    with pytest.raises(ConfigError, match="prompts must be one of"):
        DatasetTask("svamp", prompts="paper")
    with pytest.raises(ConfigError, match="commonsense_qa and gsm8k"):
        DatasetTask(DatasetOptions(dataset="svamp", prompts="star"))
    with pytest.raises(TypeError):
        DatasetOptions("svamp")  # type: ignore[misc]  # keywords only
    with pytest.raises(dataclasses.FrozenInstanceError):
        DatasetOptions(dataset="svamp").n_test = 3  # type: ignore[misc]


def test_task_options_a_config_may_set_are_kept() -> None:
    """The task_options keys each task takes (config files and `star run` options name them)."""
    dataset_keys = {"name", "train_split", "test_split", "exemplar_split", "n_train", "n_test", "test_fraction",
                    "exemplar_seed", "max_new_tokens", "data_dir", "prompts", "n_dev", "per_iteration", "format",
                    "calculator_rounds"}
    assert set(task_option_types(task_class("gsm8k"))) == set(task_option_types(task_class("commonsense_qa"))) == dataset_keys
    assert set(task_option_types(DatasetTask)) == dataset_keys | {"dataset"}  # by name: the dataset is the name
    types = task_option_types(Gsm8kTask)
    assert types["n_test"] == int | None and types["test_fraction"] is float and types["prompts"] is str
    with pytest.raises(ConfigError, match="unknown task_options key 'dataset'"):
        get_task("gsm8k", dataset="svamp")
