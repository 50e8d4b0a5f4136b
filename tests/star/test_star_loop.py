"""The STaR loop end to end (CPU, tiny): artifacts, the hint/no-hint rule, the correctness filter, ThoughtSource
outputs, and resume after SIGKILL.

``tiny_run`` (and the tests that read it) runs the embedded SmolLM2-135M: the suite's end-to-end STaR run on a
pretrained model, with few-shot prompts.  The tests of the loop's mechanism (resume after SIGKILL, pseudo-labels,
the verified filter with fresh samples) start from the committed 0.37M bootstrap base
(``tests/star/fixtures/bootstrap_base``, a real model ``thoughtsource star base`` built on the compact scratchpad,
zero-shot; it solves most 1-2-digit sums and some 3-digit ones): what they test is the loop's bookkeeping, not what a
model says, and where a test needs right and wrong generations it asserts that it got both.  The filter's and
train_with_fewshot's training records are also checked on known texts, with no model."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bootstrap_base import BOOTSTRAP_BASE, from_the_base
from thoughtsource.io import read_json
from thoughtsource.star.config import StarConfig
from thoughtsource.star.loop import StarRun
from thoughtsource.star.tasks import get_task

pytestmark = pytest.mark.slow

BASE = BOOTSTRAP_BASE
TINY = {
    "task": "arithmetic",
    "task_options": {"min_digits": 1, "max_digits": 1, "n_train": 8, "n_test_per_digit": 2, "n_dev_per_digit": 2},
    "iterations": 2,
    "fewshot_k": 1,
    "steps": {"first": 2, "warmup_steps": 0},
    "batch_size": 4,
    "lr": 1e-4,
    "generation": {"batch_size": 8, "max_new_tokens": 40},
}
#: TINY on the bootstrap base: its compact scratchpad (a compact 1-digit answer is 30 characters, tokens), zero-shot
#: prompts (it was trained on them; after a few-shot prefix it answers nothing right)
TINY_BASE = from_the_base(TINY)


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    out = tmp_path_factory.mktemp("star") / "run"
    summary = StarRun(StarConfig.from_dict(TINY), out, show_progress=False).run()
    return out, summary


def _rows(path: Path) -> list[dict]:
    return read_json(path)["rows"]


def test_tiny_arithmetic_run_completes(tiny_run: tuple[Path, dict]) -> None:
    out, summary = tiny_run
    its = summary["iterations"]
    assert [m["iteration"] for m in its] == [0, 1, 2]
    assert read_json(out / "metrics.json") == summary
    assert StarConfig.from_dict(read_json(out / "config.json")) == StarConfig.from_dict(TINY)
    for n in (1, 2):
        d = out / f"iter_{n}"
        for name in ("generate.json", "rationalize.json", "rationales.json", "train.jsonl", "train_stats.json",
                     "test.json", "dev.json", "filter.json", "metrics.json", "checkpoint/config.json"):
            assert (d / name).exists(), d / name
        m = its[n]
        assert m["train_n"] == 8 and m["test_n"] == 2 and m["dev_n"] == 2
        assert m["test_correct_by_group"] == {"1-digit": [m["test_correct"], 2]}
        f = m["filter"]  # the answer filter keeps everything; the verified check still counts what it would reject
        assert f["name"] == "answer" and f["generate"]["answer_correct"] == m["train_correct_before_rationalization"]
        assert f["rationalize"]["answer_correct"] == m["rationalization_correct"]
        assert m["rationalization_attempted"] == 8 - m["train_correct_before_rationalization"]
        assert m["train_accuracy_after_rationalization"] >= m["train_accuracy_before_rationalization"]
        assert m["kept"] == m["train_correct_before_rationalization"] + m["rationalization_correct"]
        if m["kept"]:
            assert m["steps"] == StarConfig.from_dict(TINY).steps.steps(n)
            assert not (d / "trainer").exists()  # the trainer's work folder goes once the checkpoint is written
    # every logged training step, per iteration, in OUT/metrics.jsonl (the local tracker, always on)
    jsonl = out / "metrics.jsonl"
    logged = [json.loads(line) for line in jsonl.read_text().splitlines()] if jsonl.exists() else []
    trained = [n for n in (1, 2) if its[n]["kept"]]
    assert {r["iteration"] for r in logged} == set(trained)
    for n in trained:
        steps = {r["step"] for r in logged if r["iteration"] == n and "loss" in r}
        assert steps and max(steps) == its[n]["steps"]
    assert all((out / "plots" / f).exists() for f in ("accuracy.png", "per_group.png", "train.png"))
    assert set(its[0]["test_accuracy_by_group"]) == {"1-digit"}


def test_rationalization_prompts_hold_the_hint_training_examples_do_not(tiny_run: tuple[Path, dict]) -> None:
    out, _ = tiny_run
    task = get_task("arithmetic", **TINY["task_options"])
    for n in (1, 2):
        d = out / f"iter_{n}"
        for r in _rows(d / "rationalize.json"):
            last = r["prompt"].rsplit("Input:\n", 1)[1]
            assert last.endswith(f"Target: {' '.join(r['answer'])}\n")  # the hint: the target
        for r in _rows(d / "generate.json"):
            assert r["prompt"].rsplit("Input:\n", 1)[1].endswith("\nTarget:\n")  # no hint
        train_recs = [json.loads(x) for x in (d / "train.jsonl").read_text().splitlines()]
        problems = {p.id: p for p in task.load("train", 0)}
        for rec in train_recs:
            p = problems[rec["id"]]
            assert rec["prompt"] == f"Input:\n{p.question}\nTarget:\n"  # no hint, no exemplars
            assert "Target: " not in rec["prompt"] + rec["completion"]


def test_tiny_run_kept_only_rationales_ending_in_the_correct_answer(tiny_run: tuple[Path, dict]) -> None:
    out, _ = tiny_run
    task = get_task("arithmetic", **TINY["task_options"])
    problems = {p.id: p for p in task.load("train", 0)}
    kept_total = 0
    for n in (1, 2):
        d = out / f"iter_{n}"
        gen = {r["id"]: r for r in _rows(d / "generate.json")}
        rat = {r["id"]: r for r in _rows(d / "rationalize.json")}
        recs = {json.loads(x)["id"]: json.loads(x) for x in (d / "train.jsonl").read_text().splitlines()}
        expected = {i for i, r in gen.items() if r["correct"]} | {i for i, r in rat.items() if r["correct"]}
        assert set(recs) == expected
        for i, rec in recs.items():
            assert task.is_correct(problems[i], rec["completion"])  # re-checked independently
            assert rec["rationalized"] == (not gen[i]["correct"])
        kept_total += len(recs)
        # every rationale of the iteration is a ThoughtSource generated_cot by author "star"
        ts = read_json(d / "rationales.json")
        samples = ts["arithmetic"]["train"]
        assert len(samples) == 8
        cots = [c for s in samples for c in s["generated_cot"]]
        assert all(c["author"] == "star" and c["star_iteration"] == n for c in cots)
        assert sum(c["rationalized"] for c in cots) == len(rat)
        assert {s["id"] for s in samples for c in s["generated_cot"] if c["kept_for_training"]} == expected
    assert kept_total == summary_kept(out)


def summary_kept(out: Path) -> int:
    return sum(m.get("kept", 0) for m in read_json(out / "metrics.json")["iterations"])


def _known_texts(run: StarRun, problems: list) -> tuple[dict[str, str], dict[str, str]]:
    """Each problem's gold completion (right) and the same with its final answer off by one (wrong)."""
    right = {p.id: run.task.completion(p, p.rationale) for p in problems}
    wrong = {p.id: right[p.id].rsplit("\n", 1)[0] + f"\n{' '.join(str(int(p.answer) + 1))}" for p in problems}
    return right, wrong


def _logged(run: StarRun, problems: list, texts: dict[str, str], *, hint: bool = False) -> dict:
    """A generation step's log as the loop writes it, for the problems that ``texts`` (id → text) holds, in their
    order: the few-shot prompt (one exemplar), the text, the run's own verdict."""
    ex = run.task.exemplars(1)
    return {"rows": [{"id": p.id, "answer": p.answer, "prompt": run.task.prompt(p, ex, hint=hint), "text": texts[p.id],
                      **run._judge(p, texts[p.id])} for p in problems if p.id in texts], "stats": {}, "wall_s": 0.0}


def test_filter_keeps_exactly_the_correct_rationales_without_hints(tmp_path: Path) -> None:
    """The filter step on known texts (real task judge, no model): correct generations and correct
    rationalizations of wrongly answered problems are kept, hints never reach the training set."""
    run = StarRun(StarConfig.from_dict(TINY), tmp_path, show_progress=False)
    train = run.task.load("train", 0)
    right, wrong = _known_texts(run, train)
    gen = _logged(run, train, {p.id: right[p.id] if i < 2 else wrong[p.id] for i, p in enumerate(train)})
    rat_texts = {p.id: right[p.id] if i in (2, 3) else wrong[p.id] for i, p in enumerate(train) if i >= 2}
    # a rationale that states the right answer but in a broken format is not kept either (strict)
    rat_texts[train[3].id] = right[train[3].id].replace("</scratch>", "")
    rat = _logged(run, train, rat_texts, hint=True)
    d = tmp_path / "iter_1"
    d.mkdir()
    records = run._dataset(1, d, train, gen, rat)
    assert [r.id for r in records] == [train[0].id, train[1].id, train[2].id]
    assert [r.rationalized for r in records] == [False, False, True]
    for r, p in zip(records, train, strict=False):
        assert r.prompt == f"Input:\n{p.question}\nTarget:\n" and r.completion == right[p.id]
    assert all(r["prompt"].endswith(f"Target: {' '.join(r['answer'])}\n") for r in rat["rows"])
    samples = read_json(d / "rationales.json")["arithmetic"]["train"]
    kept = {s["id"] for s in samples for c in s["generated_cot"] if c["kept_for_training"]}
    assert kept == {r.id for r in records}
    assert (d / "train.jsonl").read_text().count("\n") == 3


#: ``python -m thoughtsource ARGS`` whose loop holds once iteration 1's generations are written (the loop's on_step
#: hook): the SIGKILL lands there, mid-iteration, however fast the model
_HOLD_AFTER_GENERATE = """
import sys, time
from thoughtsource.star import loop

class HeldRun(loop.StarRun):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.on_step = lambda n, step: time.sleep(3600) if (n, step) == (1, "generate") else None

loop.StarRun = HeldRun
sys.argv = ["thoughtsource", *sys.argv[1:]]
from thoughtsource.cli import main
main()
"""


def test_resume_after_sigkill_mid_iteration(tmp_path: Path) -> None:
    cfg = {**TINY_BASE, "iterations": 1, "task_options": {**TINY_BASE["task_options"], "n_train": 4, "n_test_per_digit": 1}}
    (tmp_path / "cfg.yaml").write_text(json.dumps(cfg))  # JSON is YAML
    out = tmp_path / "run"
    src = str(Path(__file__).resolve().parents[2] / "src")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([src, os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.Popen([sys.executable, "-c", _HOLD_AFTER_GENERATE, "-q", "star", "run", "--config", str(tmp_path / "cfg.yaml"),
                             "--out", str(out)], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    marker = out / "iter_1" / "generate.json"
    deadline = time.monotonic() + 600
    while not marker.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.2)
    assert marker.exists(), proc.stderr.read().decode() if proc.poll() is not None else "timed out"
    os.kill(proc.pid, signal.SIGKILL)  # mid-iteration: generation done, the rest not
    proc.wait()
    finished = {p.name for p in (out / "iter_1").iterdir()}
    assert "checkpoint" not in finished and "metrics.json" not in finished
    before = {p: p.stat().st_mtime_ns for p in [out / "iter_0" / "test.json", marker]}

    with pytest.raises(Exception, match="--resume"):
        StarRun(StarConfig.from_dict(cfg), out, show_progress=False).run()
    run = StarRun(StarConfig.from_dict(cfg), out, resume=True, show_progress=False)
    summary = run.run()
    assert (0, "test") not in run.done_steps and (1, "generate") not in run.done_steps
    assert {s for _, s in run.done_steps} >= {"dataset", "train", "test"}
    assert all(p.stat().st_mtime_ns == t for p, t in before.items())
    assert [m["iteration"] for m in summary["iterations"]] == [0, 1]
    assert not list(out.rglob("*.tmp")) and not list((out / "iter_1").glob(".checkpoint-*"))
    # a resumed finished run does nothing
    again = StarRun(StarConfig.from_dict(cfg), out, resume=True, show_progress=False)
    again.run()
    assert again.done_steps == []


def test_resume_refuses_a_changed_config(tmp_path: Path) -> None:
    from thoughtsource.errors import ConfigError

    out = tmp_path / "run"
    out.mkdir()
    (out / "config.json").write_text(json.dumps(StarConfig.from_dict(TINY).model_dump(mode="json")))
    with pytest.raises(ConfigError, match="lr"):
        StarRun(StarConfig.from_dict({**TINY, "lr": 0.5}), out, resume=True, show_progress=False).run()


class _Stop(Exception):
    pass


def test_pseudo_labels_majority_replace_the_gold_answers(tmp_path: Path) -> None:
    """Appendix H: the targets are majority answers of k samples; gold answers are only used for reporting,
    and every artifact (generate.json, rationales.json, metrics) keeps the two apart."""
    from collections import Counter

    cfg = StarConfig.from_dict({**TINY_BASE, "iterations": 1,
                                "pseudo_labels": {"mode": "majority", "k": 3, "temperature": 0.3},
                                "task_options": {**TINY_BASE["task_options"], "n_train": 8, "n_test_per_digit": 1}})

    def stop_after_generate(n: int, step: str) -> None:
        if step == "generate":
            raise _Stop

    with pytest.raises(_Stop):
        StarRun(cfg, tmp_path, show_progress=False, on_step=stop_after_generate).run()
    pl = read_json(tmp_path / "iter_1" / "pseudo_labels.json")["rows"]
    assert len(pl) == 8
    for r in pl:
        assert sum(r["votes"].values()) <= 3
        if r["votes"]:
            top = max(r["votes"].values())
            assert r["votes"][r["label"]] == top
            assert r["label_correct"] == (int(r["label"]) == int(r["gold"]))
        else:
            assert r["label"] is None
    labelled = {r["id"]: r["label"] for r in pl if r["label"] is not None}
    assert labelled  # the base's samples gave answers to vote on
    gen = _rows(tmp_path / "iter_1" / "generate.json")
    assert {g["id"] for g in gen} == set(labelled)  # unlabelled questions are left out
    assert all(g["answer"] == labelled[g["id"]] for g in gen)  # judged against the pseudo-label
    assert Counter(g["correct"] for g in gen)  # judged at all
    gold = {r["id"]: r["gold"] for r in pl}
    for g in gen:  # the gold answer and the verdict against it are kept beside the target, never replaced
        assert g["target"] == "pseudo_label" and g["gold_answer"] == gold[g["id"]]
        assert isinstance(g["correct_vs_gold"], bool)

    # the rest of the iteration: every artifact keeps gold and pseudo-label apart
    summary = StarRun(cfg, tmp_path, resume=True, show_progress=False).run()
    samples = read_json(tmp_path / "iter_1" / "rationales.json")["arithmetic"]["train"]
    assert {s["id"] for s in samples} == set(labelled)
    by_id = {g["id"]: g for g in gen}
    for s in samples:
        assert s["answer"] == [gold[s["id"]]]  # the sample's answer is the gold one
        assert s["pseudo_label"] == labelled[s["id"]]
        for cot in s["generated_cot"]:
            a = cot["answers"][0]
            if cot["id"].endswith("generate"):
                assert a["correct_answer"] == by_id[s["id"]]["correct_vs_gold"]
                assert a["correct_vs_pseudo_label"] == by_id[s["id"]]["correct"]
    m = summary["iterations"][1]
    assert m["train_target"] == "pseudo_label"
    assert m["train_correct_before_rationalization"] == sum(g["correct"] for g in gen)
    assert m["train_correct_vs_gold_before_rationalization"] == sum(g["correct_vs_gold"] for g in gen)
    assert m["pseudo_labels"]["labelled"] == len(labelled)


def test_verified_filter_and_fresh_samples(tmp_path: Path) -> None:
    """filter: verified keeps only rationales whose scratchpad recomputes; each iteration draws fresh pool problems.
    3-digit sums sampled at temperature 0.8: the base answers some right, some wrong, and some right after a wrong
    scratchpad (asserted: the verified filter has something to reject)."""
    cfg = {**TINY_BASE, "iterations": 2, "filter": "verified",
           "task_options": {"min_digits": 3, "max_digits": 3, "per_iteration": 48, "pool_size": 200,
                            "n_test_per_digit": 2, "n_dev_per_digit": 2, "scratchpad": "compact"},
           "generation": {"batch_size": 48, "temperature": 0.8}}
    out = tmp_path / "run"
    summary = StarRun(StarConfig.from_dict(cfg), out, show_progress=False).run()
    task = get_task("arithmetic", **cfg["task_options"])
    held_out = {p.question for p in task.load("test", 0) + task.load("dev", 0)}
    ids = []
    rejected = 0
    for n in (1, 2):
        d = out / f"iter_{n}"
        gen = {r["id"]: r for r in _rows(d / "generate.json")}
        rat = {r["id"]: r for r in _rows(d / "rationalize.json")}
        ids.append(set(gen))
        questions = {r["prompt"].rsplit("Input:\n", 1)[1].split("\n")[0] for r in gen.values()}
        assert len(gen) == 48 and not questions & held_out
        recs = [json.loads(x) for x in (d / "train.jsonl").read_text().splitlines()]
        m = summary["iterations"][n]
        f = m["filter"]
        assert f["name"] == "verified"
        assert m["kept"] == len(recs) == (f["generate"]["answer_correct"] - f["generate"]["rejected"]
                                          + f["rationalize"]["answer_correct"] - f["rationalize"]["rejected"])
        assert 0 < m["kept"] < len(gen)  # right and wrong answers: the filter chose
        rejected += f["generate"]["rejected"] + f["rationalize"]["rejected"]
        for rec in recs:  # every kept rationale passes the check; prompts carry no hint
            p = next(q for q in task.train_problems(n, 0) if q.id == rec["id"])
            assert task.verify(p, rec["completion"]) is None
            assert rec["prompt"] == f"Input:\n{p.question}\nTarget:\n"
        assert len(f["examples"]) == min(8, f["generate"]["rejected"] + f["rationalize"]["rejected"])
        for e in f["examples"]:
            assert e["reason"] and task.verify(next(q for q in task.train_problems(n, 0) if q.id == e["id"]), e["text"])
            assert e["id"] not in {r["id"] for r in recs}  # left out
        assert set(rat) == {i for i, r in gen.items() if not r["correct"]}
    assert rejected > 0  # a right answer after a wrong scratchpad was generated, and the verified filter left it out
    assert ids[0] != ids[1]


def test_train_with_fewshot_puts_the_exemplars_into_the_training_prompts(tmp_path: Path) -> None:
    """train_with_fewshot: the kept records' prompts are the few-shot prompt without hint (the dataset step on known
    texts, real task judge and check, no model: the bootstrap base answers nothing right after a few-shot prefix)."""
    cfg = StarConfig.from_dict({**TINY, "filter": "verified", "train_with_fewshot": True, "fewshot_k": 1})
    run = StarRun(cfg, tmp_path, show_progress=False)
    task = run.task
    train = task.load("train", 0)
    ex = task.exemplars(1)
    right, wrong = _known_texts(run, train)
    gen = _logged(run, train, {p.id: right[p.id] if i < 4 else wrong[p.id] for i, p in enumerate(train)})
    rat = _logged(run, train[4:6], right, hint=True)
    d = tmp_path / "iter_1"
    d.mkdir()
    records = run._dataset(1, d, train, gen, rat)
    assert [r.id for r in records] == [p.id for p in train[:6]] and [r.rationalized for r in records] == [False] * 4 + [True] * 2
    recs = [json.loads(x) for x in (d / "train.jsonl").read_text().splitlines()]
    assert recs == [r.to_dict() for r in records]
    for rec, p in zip(recs, train[:6], strict=True):
        assert rec["prompt"] == task.prompt(p, ex)  # the exemplars, then the question without its hint
        assert rec["prompt"].count("Input:") == 1 + 1 and "Target: " not in rec["prompt"].split("Input:")[-1]
        assert rec["completion"] == right[p.id]
