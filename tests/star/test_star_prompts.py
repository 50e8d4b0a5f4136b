"""The STaR authors' prompts for CommonsenseQA and GSM8K (issue 12, item 2) and --train-with-fewshot."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from thoughtsource.errors import ConfigError
from thoughtsource.star.prompts import PROMPT_FILES, read_prompt
from thoughtsource.star.tasks import Problem, get_task
from thoughtsource.star.tasks.exemplars import star_exemplars
from thoughtsource.star.tasks.from_dataset import DatasetTask

SHIPPED = {  # file here -> upstream file under ../shared/data/star_examples
    "cqa_prompts.txt": "cqa_prompts.txt",
    "cqa_prompts_answer_key.txt": "cqa_prompts_answer_key.txt",
    "cqa_prompts_direct.txt": "cqa_prompts_direct.txt",
    "cqa_prompts_direct_answer_key.txt": "cqa_prompts_direct_answer_key.txt",
    "gsm_prompts.txt": "gsm/prompts.txt",
    "gsm_prompts_answer_key.txt": "gsm/prompts_answer_key.txt",
    "LICENSE.txt": "LICENSE.txt",
}
# (prompt file, hint, direct) for each rendering the authors ship
RENDERINGS = {
    "commonsense_qa": [("cqa_prompts.txt", False, False), ("cqa_prompts_answer_key.txt", True, False),
                       ("cqa_prompts_direct.txt", False, True), ("cqa_prompts_direct_answer_key.txt", True, True)],
    "gsm8k": [("gsm_prompts.txt", False, False), ("gsm_prompts_answer_key.txt", True, False)],
}
NEW = {
    "commonsense_qa": Problem("new", "Where would you find a stapler?", "desk", "multiplechoice",
                              ("ocean", "desk", "tree", "sky", "moon")),
    "gsm8k": Problem("new", "Tom has 3 apples and buys 4 more. How many apples does he have?", "7", "number"),
}


def _task(name: str, shared_data: Path | None = None, **options: object) -> DatasetTask:
    task = get_task(name, data_dir=str(shared_data) if shared_data else None, **options)
    assert isinstance(task, DatasetTask)
    return task


def test_shipped_prompts_are_the_authors_files(shared_data: Path) -> None:
    for here, upstream in SHIPPED.items():
        assert read_prompt(here) == (shared_data / "star_examples" / upstream).read_text(encoding="utf-8"), here
    attribution = read_prompt("ATTRIBUTION.txt")
    assert "Apache License" in read_prompt("LICENSE.txt") and "ezelikman/STaR" in attribution and "Apache" in attribution


@pytest.mark.parametrize("name", ["commonsense_qa", "gsm8k"])
def test_default_prompt_is_the_authors_text_exactly(name: str) -> None:
    t = _task(name)
    assert t.prompts == "star"
    ex = t.exemplars(10)
    assert len(ex) == len(star_exemplars(name)) == (7 if name == "commonsense_qa" else 6)
    p = NEW[name]
    for filename, hint, direct in RENDERINGS[name]:
        block = t.prompt(p, [], hint=hint, direct=direct)
        assert t.prompt(p, ex, hint=hint, direct=direct) == read_prompt(filename) + "\n\n" + block, filename


def test_new_question_blocks_follow_the_authors_format() -> None:
    cqa, gsm = _task("commonsense_qa"), _task("gsm8k")
    p, q = NEW["commonsense_qa"], NEW["gsm8k"]
    assert cqa.prompt(p, []) == "Q: Where would you find a stapler?\nAnswer Choices:\n(a) ocean\n(b) desk\n(c) tree\n(d) sky\n(e) moon\nA:"
    assert "(b) desk (CORRECT)\n" in cqa.prompt(p, [], hint=True)
    assert gsm.prompt(q, []) == f"Q: {q.question}\nA:"
    assert gsm.prompt(q, [], hint=True) == f"Q: {q.question} (7)\nA:"
    # each exemplar block of the files has the same shape as the new question's block
    for filename in ("cqa_prompts.txt", "gsm_prompts.txt"):
        for block in read_prompt(filename).split("\n\n"):
            assert re.match(r"Q: [^\n]+\n(Answer Choices:\n(\([a-e]\) [^\n]+\n){5})?A: ", block), block


def test_completions_and_targets_use_the_authors_format() -> None:
    cqa, gsm = _task("commonsense_qa"), _task("gsm8k")
    assert cqa.completion(NEW["commonsense_qa"], "Staplers are kept on desks.") == (
        " Staplers are kept on desks. Therefore, the answer is desk (b).")
    assert cqa.completion(NEW["commonsense_qa"], None) == " (b)."
    assert gsm.completion(NEW["gsm8k"], "He has 3 + 4 = <<3+4=7>>7 apples.") == " He has 3 + 4 = <<3+4=7>>7 apples.\n#### 7"
    assert gsm.completion(NEW["gsm8k"], None) == " #### 7"
    generated = " He has 3 + 4 = 7 apples.\n#### 7\n\nQ: Next question?\nA: It"
    assert gsm.trim(generated) == " He has 3 + 4 = 7 apples.\n#### 7"  # the stop strings cut the next exemplar
    assert gsm.is_correct(NEW["gsm8k"], gsm.trim(generated))


@pytest.mark.parametrize("name", ["commonsense_qa", "gsm8k"])
def test_extraction_finds_each_exemplars_gold_answer(name: str) -> None:
    t = _task(name)
    for e in t.exemplars(10):
        own = t.completion(e, e.rationale).strip()
        assert own in read_prompt(PROMPT_FILES[name][0])  # the exemplar's own rationale, verbatim
        assert t.predicted_answer(e, own) == e.answer and t.is_correct(e, own)
        assert t.verify(e, own) is None  # the verified filter accepts the authors' rationales
        direct = t.completion(e, None).strip()
        assert t.predicted_answer(e, direct, direct=True) == e.answer and t.is_correct(e, direct, direct=True)
        wrong = e.with_answer(next(c for c in e.choices if c != e.answer)) if e.choices else e.with_answer(str(int(e.answer) + 1))
        assert not t.is_correct(wrong, own)


@pytest.mark.parametrize("name", ["commonsense_qa", "gsm8k"])
def test_fewshot_k_takes_the_first_k_exemplars(name: str) -> None:
    t = _task(name)
    blocks = read_prompt(PROMPT_FILES[name][0]).split("\n\n")
    p = NEW[name]
    for k in (0, 1, 3):
        assert t.prompt(p, t.exemplars(k)) == "".join(b + "\n\n" for b in blocks[:k]) + t.prompt(p, [])


def test_train_with_fewshot_record_is_the_authors_prompt_without_hint() -> None:
    t = _task("commonsense_qa")
    p = NEW["commonsense_qa"]
    text = "Staplers are kept on desks. Therefore, the answer is desk (b)."
    rec = t.training_record(p, text, rationalized=True, exemplars=t.exemplars(7))
    assert rec.prompt == read_prompt("cqa_prompts.txt") + "\n\n" + t.prompt(p, [])
    assert "(CORRECT)" not in rec.prompt + rec.completion and rec.completion == " " + text
    assert t.training_record(p, text).prompt == t.prompt(p, [])  # without exemplars: the bare question


@pytest.mark.parametrize(("name", "train_size"), [("commonsense_qa", 9741), ("gsm8k", 7473)])
def test_exemplar_questions_are_left_out_of_train_and_test(shared_data: Path, name: str, train_size: int) -> None:
    t = _task(name, shared_data, n_train=None, n_test=None)
    key = {" ".join(e.question.lower().split()) for e in t.exemplars(10)}
    raw = t._collection_splits()[t.train_split]
    assert len(raw) == train_size and sum(" ".join(s.question.lower().split()) in key for s in raw) == len(key)
    train, test = t.load("train", 0), t.load("test", 0)
    assert len(train) == train_size - len(key) and len(test) > 1000
    assert not {" ".join(p.question.lower().split()) for p in train + test} & key
    ref = _task(name, shared_data, n_train=None, n_test=None, prompts="reference")
    assert len(ref.load("train", 0)) == train_size - 10  # reference exemplars: 10 dataset samples with a CoT


def test_prompt_option_is_validated(shared_data: Path) -> None:
    with pytest.raises(ConfigError):
        get_task("commonsense_qa", prompts="paper")
    worldtree = shared_data / "thoughtsource_examples" / "tests_unit_data" / "worldtree_100_dataset.json"
    assert _task(str(worldtree)).prompts == "reference"
    with pytest.raises(ConfigError, match="commonsense_qa and gsm8k"):
        get_task(str(worldtree), prompts="star")
