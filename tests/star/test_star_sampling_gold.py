"""Issue 30's levers for STaR: k sampled rationales per problem (``sampling``), the gold-rationale arm
(``baseline: gold``) and matched compute (every training arm runs the same optimizer steps of the same batch size).

The gold arm is about word problems' reference rationales: it runs on MAWPS with the embedded SmolLM2-135M (CPU,
tiny), its iteration 0 read from a few-shot run's completion store.  The k-samples run tests the loop's sampling
and filtering mechanism, not what a model says: it starts from the committed 0.37M bootstrap base
(``tests/star/fixtures/bootstrap_base``, a real model ``thoughtsource star base`` built, on the compact scratchpad it
was trained on) on 3-digit sums, which it gets right only sometimes, so that at temperature 1 some samples are right
and many wrong."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from bootstrap_base import BOOTSTRAP_BASE, from_the_base
from thoughtsource.errors import ConfigError
from thoughtsource.io import read_json
from thoughtsource.star.config import StarConfig
from thoughtsource.star.loop import StarRun
from thoughtsource.star.tasks import get_task
from thoughtsource.store import share_completions

pytestmark = pytest.mark.slow


def _cfg(shared_data: Path, **over: Any) -> dict[str, Any]:
    cfg: dict[str, Any] = {
        "task": "mawps",
        "task_options": {"per_iteration": 6, "n_test": 3, "n_dev": 2, "data_dir": str(shared_data)},
        "iterations": 1,
        "fewshot_k": 2,
        "steps": {"first": 3, "warmup_steps": 0},
        "batch_size": 2,
        "lr": 1e-4,
        # what the arms generate (iteration 0's and M_1's test and dev answers) is counted, never judged here: 8 tokens
        "generation": {"batch_size": 8, "max_new_tokens": 8, "threads": 1},
    }
    cfg.update(over)
    return cfg


def _records(d: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in (d / "train.jsonl").read_text(encoding="utf-8").splitlines()]


BASE = BOOTSTRAP_BASE
K_CFG: dict[str, Any] = from_the_base({
    "task_options": {"min_digits": 3, "max_digits": 3, "per_iteration": 6, "n_test_per_digit": 3, "n_dev_per_digit": 2},
    "iterations": 1,
    "steps": {"first": 3, "warmup_steps": 0},
    "batch_size": 2,
    "lr": 1e-4,
    "sampling": {"k": 4, "temperature": 1.0},
    "generation": {"batch_size": 8, "threads": 1},  # max_new_tokens: the task's, room for a 3-digit compact answer
})


def test_k_samples_each_kept_distinct_correct_one_is_a_record(tmp_path: Path) -> None:
    cfg = K_CFG
    out = tmp_path / "star"
    summary = StarRun(StarConfig.from_dict(cfg), out, show_progress=False).run()
    d = out / "iter_1"
    gen = read_json(d / "generate.json")["rows"]
    rat = read_json(d / "rationalize.json")["rows"]
    assert len(gen) == 6 and all(len(r["samples"]) == 4 for r in gen)
    assert 0 < sum(r["correct"] for r in gen) < 6  # not vacuous: some problems have a right sample, some none
    # each sample has its own seed: at temperature 1 the four samples of a prompt are not all one text
    assert sum(len({s["text"] for s in r["samples"]}) > 1 for r in gen) >= 5
    for r in gen:  # the row's verdict: whether any sample is right; its text the first right one
        assert r["correct"] == any(s["correct"] for s in r["samples"])
        assert r["text"] == next((s["text"] for s in r["samples"] if s["correct"]), r["samples"][0]["text"])
    # rationalization: one hinted sample for each problem with no correct sample, decoded greedily (no samples)
    assert {r["id"] for r in rat} == {r["id"] for r in gen if not r["correct"]}
    assert all("samples" not in r for r in rat)
    recs = _records(d)
    want = {(r["id"], " ".join(s["text"].split())) for r in gen for s in r["samples"] if s["correct"]}
    got = {(x["id"], " ".join(x["completion"].split())) for x in recs if not x["rationalized"]}
    assert got == want and len(got) == sum(not x["rationalized"] for x in recs)  # every distinct correct one, once
    f = read_json(d / "filter.json")["samples"]
    assert f["drawn"] == 4 * 6 and f["problems"] == 6  # every sample drawn, of every problem (not only of those right)
    assert f["problems_with_kept"] == f["problems_with_correct"] == len({i for i, _ in want}) == sum(r["correct"] for r in gen)
    assert f["kept"] == len(got) and f["answer_correct"] == f["kept"] + f["duplicates"]
    assert f["duplicates"] > 0  # not vacuous: a right sample drawn twice, kept once
    m = summary["iterations"][1]
    assert m["filter"]["samples"] == f and m["kept"] == len(recs)
    # test and dev stay greedy: the test rows are the base model's one greedy answer each
    assert all("samples" not in r for r in read_json(d / "test.json")["rows"])
    assert recs  # matched compute: the schedule's steps whatever the data's size
    assert m["steps"] == StarConfig.from_dict(cfg).steps.steps(1)


def test_gold_arm_trains_on_the_reference_rationales_with_the_same_steps_as_direct(shared_data: Path, tmp_path: Path) -> None:
    task = get_task("mawps", per_iteration=6, n_test=3, n_dev=2, data_dir=str(shared_data))
    train = {p.id: p for p in task.train_problems(1, 0)}
    # the few-shot baseline: iteration 0 only, the base's greedy few-shot answers to the test and dev problems
    fewshot = tmp_path / "fewshot"
    StarRun(StarConfig.from_dict(_cfg(shared_data, baseline="fewshot")), fewshot, show_progress=False).run()
    assert [read_json(fewshot / "iter_0" / f"{s}.json")["stats"]["from_store"] for s in ("test", "dev")] == [0, 0]
    steps = {}
    for arm in ("gold", "direct"):
        out = tmp_path / arm
        if arm == "gold":  # its iteration 0 is the few-shot run's (same model, prompts and options): read, not redone
            share_completions(fewshot / "completions.sqlite", out)
        summary = StarRun(StarConfig.from_dict(_cfg(shared_data, baseline=arm, iterations=1)), out, show_progress=False).run()
        d = out / "iter_1"
        assert not (d / "generate.json").exists()  # neither arm generates rationales
        if arm == "gold":
            assert [read_json(out / "iter_0" / f"{s}.json")["stats"]["from_store"] for s in ("test", "dev")] == [3, 2]
        recs = _records(d)
        assert [r["id"] for r in recs] == list(train)
        for r in recs:
            p = train[r["id"]]
            if arm == "gold":  # the dataset's reference rationale, in the exemplars' format, without exemplars or hint
                assert p.rationale and r["completion"] == task.completion(p, p.rationale)
                assert r["completion"].startswith(" " + p.rationale) and r["prompt"] == task.prompt(p, [])
            else:
                assert r["completion"] == task.completion(p, None)
        steps[arm] = read_json(d / "train_stats.json")["steps"]
        assert summary["iterations"][1]["steps"] == steps[arm]
    assert steps["gold"] == steps["direct"] == 3


def test_sampling_and_gold_are_checked_at_the_edge() -> None:
    with pytest.raises(ConfigError, match=r"sampling\.k > 1"):
        StarConfig.from_dict({"baseline": "direct", "sampling": {"k": 4}})
    with pytest.raises(ConfigError, match="pseudo-labels"):
        StarConfig.from_dict({"baseline": "gold", "pseudo_labels": {"mode": "majority"}})
    with pytest.raises(ConfigError, match="temperature"):
        StarConfig.from_dict({"sampling": {"k": 4, "temperature": 0}})
    assert StarConfig.from_dict({"sampling": {"k": 4}}).sampling.temperature == 1.0


@pytest.mark.parametrize(("filter_", "max_kept"), [("answer", None), ("answer", 1), ("verified", None)])
def test_k_samples_filter_keeps_each_distinct_passing_sample_once(shared_data: Path, tmp_path: Path, filter_: str,
                                                                   max_kept: int | None) -> None:
    """The dataset step on k samples per problem whose texts are the dataset's own: its reference rationale (right,
    verified), the same with other white space (a duplicate), a right answer after false arithmetic (answer filter
    only) and a wrong answer.  A model's samples hit some of these by chance; here every branch is exercised."""
    cfg = StarConfig.from_dict(_cfg(shared_data, filter=filter_, sampling={"k": 4, "temperature": 1.0, "max_kept": max_kept}))
    run = StarRun(cfg, tmp_path / "run", show_progress=False)
    train = run.task.train_problems(1, 0)[:3]
    rows = []
    for p in train:
        gold = run.task.completion(p, p.rationale).strip()
        false_math = f"We add 1 to 1 and get 7. Therefore, the answer is {p.answer}."
        texts = [gold, "  " + gold.replace(" ", "  "), false_math, "We add 1 to 1 and get 2. Therefore, the answer is 2."]
        samples = [{"text": t, **run._judge(p, t)} for t in texts]
        assert [s["correct"] for s in samples] == [True, True, True, p.answer == "2"]
        rows.append({"id": p.id, "answer": p.answer, "prompt": "", **samples[0], "samples": samples})
    gen = {"rows": rows}
    d = tmp_path / "run" / "iter_1"
    d.mkdir(parents=True)
    recs = run._dataset(1, d, train, gen, {"rows": []})
    per_problem = 1 if max_kept == 1 or filter_ == "verified" else 2  # the gold text once (+ the false-math one)
    assert len(recs) == 3 * per_problem
    for p in train:
        mine = [r.completion for r in recs if r.id == p.id]
        assert mine[0] == run.task.gold_record(p).completion  # the first kept one is the reference, whitespace aside
        assert len(mine) == per_problem
    f = read_json(d / "filter.json")["samples"]
    assert f["problems_with_kept"] == f["problems_with_correct"] == 3 and f["kept"] == len(recs) and f["drawn"] == 12
    assert f["duplicates"] == 3  # the white-space variant of the reference, whatever the filter and cap
    assert f["capped"] == (3 if max_kept == 1 else 0)
    if filter_ == "verified":
        assert read_json(d / "filter.json")["generate"]["rejected"] == 3  # the false arithmetic, once per problem
