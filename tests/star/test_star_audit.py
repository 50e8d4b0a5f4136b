"""``star audit`` (:func:`thoughtsource.star.audit.regenerate_sample`): a run's logged generations regenerated from the
checkpoints that made them, on a real one-iteration run from the committed 0.37M bootstrap base (CPU, one thread).

An honest run regenerates row for row; each way of forging the log that its other readers cannot see is named: a
gold scratchpad in place of a wrong generation (byte for byte what a right one looks like), a checkpoint swapped after
the run, a flipped verdict, a hinted prompt, a dropped row, a step made on other hardware."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from bootstrap_base import BOOTSTRAP_BASE

pytest.importorskip("torch")
pytest.importorskip("transformers")

from thoughtsource.io import read_json, write_json
from thoughtsource.star.audit import regenerate_sample, sample_indices
from thoughtsource.star.config import StarConfig
from thoughtsource.star.engines import model_fingerprint
from thoughtsource.star.loop import StarRun
from thoughtsource.star.tasks import get_task

BASE = BOOTSTRAP_BASE
TINY: dict[str, Any] = {
    "task": "arithmetic",
    "task_options": {"min_digits": 1, "max_digits": 3, "n_test_per_digit": 8, "n_dev_per_digit": 4, "per_iteration": 96,
                     "pool_size": 2000, "scratchpad": "compact"},
    "iterations": 1, "fewshot_k": 0, "steps": {"first": 4, "warmup_steps": 0}, "batch_size": 8, "lr": 1e-3, "seed": 1,
    "keep_checkpoints": True, "generation": {"batch_size": 64, "threads": 1},
}
STEPS = {(0, "test"), (0, "dev"), (1, "generate"), (1, "rationalize"), (1, "test"), (1, "dev")}


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("audit")
    shutil.copytree(BASE, root / "base")
    out = root / "run"
    StarRun(StarConfig.from_dict({**TINY, "model": str(root / "base")}), out, show_progress=False).run()
    return out


@pytest.fixture
def forged(run: Path, tmp_path: Path) -> Path:
    """A copy of the run to forge (its config still names the same base)."""
    shutil.copytree(run, tmp_path / "run")
    return tmp_path / "run"


def _edit(path: Path, change: Any) -> dict[str, Any]:
    data = read_json(path)
    change(data)
    write_json(path, data)
    return data


def test_sample_indices_are_seeded_per_step() -> None:
    a = sample_indices(3200, 64, 0, 1, "generate")
    assert a == sample_indices(3200, 64, 0, 1, "generate") and len(set(a)) == 64 and a == sorted(a)
    assert a != sample_indices(3200, 64, 1, 1, "generate") and a != sample_indices(3200, 64, 0, 2, "generate")
    assert a != sample_indices(3200, 64, 0, 1, "test")
    assert sample_indices(10, 64, 0, 1, "dev") == sample_indices(10, None, 5, 1, "dev") == list(range(10))


@pytest.mark.slow
def test_an_honest_run_regenerates_row_for_row(run: Path) -> None:
    rep = regenerate_sample(run, None, 0)
    assert rep.ok, rep.summary()
    assert {(s.iteration, s.step) for s in rep.steps} == STEPS
    assert all(s.checked == s.rows > 0 for s in rep.steps) and rep.n_mismatches == 0
    # the train step records the checkpoint it wrote; iteration 1's evaluations were made by that checkpoint
    trained = read_json(run / "iter_1" / "train_stats.json")["fingerprint"]
    assert trained == model_fingerprint(str(run / "iter_1" / "checkpoint"), memo=False) == read_json(run / "iter_1" / "test.json")["model"]["fingerprint"]
    assert {s.fingerprint for s in rep.steps if s.model == 1} == {trained}


@pytest.mark.slow
def test_a_gold_scratchpad_in_place_of_a_wrong_generation_is_named(forged: Path) -> None:
    """The forgery the other checks cannot see: the gold text is judged right, kept, and byte for byte a right text."""
    task = get_task(TINY["task"], **TINY["task_options"])
    problems = {p.id: p for p in task.train_problems(1, TINY["seed"])}

    def inject(data: dict[str, Any]) -> None:
        row = next(r for r in data["rows"] if not r["correct"])
        gold = task.completion(problems[row["id"]], problems[row["id"]].rationale)
        row.update(text=gold, predicted=problems[row["id"]].answer, correct=True)
        inject.id = row["id"]  # type: ignore[attr-defined]

    _edit(forged / "iter_1" / "generate.json", inject)
    # as the loop would have: no rationalization for a problem answered right
    _edit(forged / "iter_1" / "rationalize.json", lambda d: d.update(rows=[r for r in d["rows"] if r["id"] != inject.id]))  # type: ignore[attr-defined]
    rep = regenerate_sample(forged, None, 0)
    assert not rep.ok
    bad = [s for s in rep.steps if not s.ok]
    assert [(s.iteration, s.step) for s in bad] == [(1, "generate")]
    assert [m.id for m in bad[0].mismatches] == [inject.id]  # type: ignore[attr-defined]
    assert not bad[0].verdict_mismatches and not bad[0].prompt_mismatches  # the verdict holds: only regenerating tells
    assert inject.id in rep.summary()  # type: ignore[attr-defined]


@pytest.mark.slow
def test_a_checkpoint_swapped_after_the_run_fails_the_fingerprints(forged: Path) -> None:
    shutil.copy(BASE / "model.safetensors", forged / "iter_1" / "checkpoint" / "model.safetensors")
    rep = regenerate_sample(forged, 4, 0)
    assert not rep.ok
    assert {(s.iteration, s.step) for s in rep.steps if s.fingerprint != s.recorded_fingerprint} == {(1, "test"), (1, "dev")}
    assert any("iter_1/train_stats.json" in p for p in rep.problems())
    # the forger who rewrites the steps' fingerprints too still meets the train step's
    fp = model_fingerprint(str(forged / "iter_1" / "checkpoint"), memo=False)
    for step in ("test", "dev"):
        _edit(forged / "iter_1" / f"{step}.json", lambda d: d["model"].update(fingerprint=fp, identity={**d["model"]["identity"], "weights": fp}))
    rep = regenerate_sample(forged, 4, 0)
    assert not rep.ok and rep.train_fingerprints and all(s.fingerprint == s.recorded_fingerprint for s in rep.steps)


@pytest.mark.slow
def test_a_flipped_verdict_a_hinted_prompt_and_a_dropped_row_are_named(forged: Path) -> None:
    task = get_task(TINY["task"], **TINY["task_options"])
    problems = {p.id: p for p in task.train_problems(1, TINY["seed"])}
    hinted = read_json(forged / "iter_1" / "generate.json")["rows"][-1]["id"]
    # a test verdict flipped (accuracy raised without a text changed)
    flipped = _edit(forged / "iter_1" / "test.json", lambda d: d["rows"][0].update(correct=not d["rows"][0]["correct"]))["rows"][0]["id"]
    _edit(forged / "iter_1" / "generate.json",
          lambda d: d["rows"][-1].update(prompt=task.prompt(problems[hinted], [], hint=True)))
    _edit(forged / "iter_1" / "rationalize.json", lambda d: d["rows"].pop(0))
    rep = regenerate_sample(forged, 2, 0)
    by_step = {(s.iteration, s.step): s for s in rep.steps}
    assert by_step[1, "test"].verdict_mismatches == [flipped] and by_step[1, "generate"].prompt_mismatches == [hinted]
    assert by_step[1, "rationalize"].row_problems and "1 missing" in by_step[1, "rationalize"].row_problems[0]
    assert not rep.ok and rep.n_mismatches == 0


@pytest.mark.slow
def test_a_step_made_with_another_dtype_is_not_comparable_not_passed(forged: Path) -> None:
    _edit(forged / "iter_0" / "test.json", lambda d: d["model"]["identity"].update(device="cuda", dtype="bfloat16"))
    rep = regenerate_sample(forged, 2, 0)
    step = next(s for s in rep.steps if (s.iteration, s.step) == (0, "test"))
    assert step.checked == 0 and step.not_checked is not None and "dtype ('bfloat16'; here 'float32')" in step.not_checked
    assert not rep.ok


@pytest.mark.slow
def test_the_cli_reports_and_fails(run: Path, forged: Path) -> None:
    """The real entry point in this process (tests/cli_in_process.py): exit statuses, stdout and stderr as a process
    of its own has them; what is checked is the command's report and status, not the process."""
    from cli_in_process import run_cli

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return run_cli("star", "audit", *args)

    p = cli(str(run), "--sample", "8", "--seed", "3", "--json")
    assert p.returncode == 0, p.stderr[-2000:]
    rep = json.loads(p.stdout)
    assert rep["ok"] and rep["seed"] == 3 and sum(s["checked"] for s in rep["steps"]) == 6 * 8
    _edit(forged / "iter_1" / "test.json", lambda d: d["rows"][0].update(text=d["rows"][0]["text"] + " "))
    p = cli(str(forged), "--sample", "0")
    assert p.returncode == 1
    assert "iter_1/test.json: 1 of 24 regenerated rows differ from the log" in p.stdout
    p = cli(str(forged / "iter_1"))
    assert p.returncode != 0 and "not a STaR run folder" in p.stderr + p.stdout
