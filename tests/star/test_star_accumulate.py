"""k samples kept across iterations (``sampling.accumulate``, RFT / ReST-EM): the distinct kept rationales are
deduplicated and accumulated, iteration n trains from the base on their union, a run killed with SIGKILL in the
middle of iteration 2 and resumed ends where an unbroken one does, and each iteration reports pass@k and
valid-pass@k.

The end-to-end tests run on the committed 0.87M-parameter bootstrap base (``docs/star-results/bootstrap_v2/base_0``:
it solves 1-4-digit sums with a compact scratchpad, almost no 5-digit ones): 24 fixed 4-5-digit training problems,
k = 4 samples at temperature 0.7, 3 iterations.  The unbroken run they compare against is made once, in the test
process (one torch thread, as in the runs' processes); the runs killed with SIGKILL are ``thoughtsource star run``
processes.  The training problems
are the same every iteration, so the same scratchpad is found again and again: deduplication across iterations is
exercised on every run, not only when chance allows.  The expected union is rebuilt here from the raw generations
with the task's own judge and check, not with the loop's code.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from thoughtsource.errors import ConfigError
from thoughtsource.io import read_json
from thoughtsource.star.accumulate import accumulate
from thoughtsource.star.config import StarConfig
from thoughtsource.star.loop import StarRun
from thoughtsource.star.metrics import pass_at_k_metrics
from thoughtsource.star.tasks import TrainingRecord, get_task

REPO = Path(__file__).resolve().parents[2]
BASE = REPO / "docs" / "star-results" / "bootstrap_v2" / "base_0"
SEED = 0
K = 4
ITERATIONS = 3
RUN: dict[str, Any] = {
    "model": str(BASE),
    "task": "arithmetic",
    "task_options": {"min_digits": 4, "max_digits": 5, "scratchpad": "compact", "n_train": 24, "n_test_per_digit": 8,
                     "n_dev_per_digit": 0, "pool_size": 2000},
    "iterations": ITERATIONS,
    "fewshot_k": 0,
    "sampling": {"k": K, "temperature": 0.7, "accumulate": True},
    "steps": {"first": 20, "growth": "additive", "increase": 0, "warmup_steps": 2},
    "batch_size": 8,
    "lr": 5.0e-4,
    "seed": SEED,
    "checkpoint_every": 0,  # a killed training starts again from the base: the resumed run is bitwise the unbroken one
    "generation": {"engine": "transformers", "batch_size": 256, "threads": 1},
}


def _rec(pid: str, text: str, rationalized: bool = False) -> TrainingRecord:
    return TrainingRecord(id=pid, prompt=f"Input:\n{pid}\nTarget:\n", completion=text, rationalized=rationalized)


# --------------------------------------------------------------------------- the union, and pass@k (no model)
def test_the_union_keeps_each_problems_distinct_rationale_once_the_first_found_first() -> None:
    it1 = [_rec("a", "x = 1\n2"), _rec("b", "y\n3")]
    u1, r1 = accumulate([], it1)
    assert u1 == it1 and r1 | {"new": 2, "union": 2, "previous": 0, "already_in_union": 0} == r1
    # iteration 2 finds a's rationale again with other white space (one record), the same text for another problem
    # (its own record), and a new one for a
    it2 = [_rec("a", "  x  =  1 \n 2 ", rationalized=True), _rec("c", "x = 1\n2"), _rec("a", "x = 2\n2")]
    u2, r2 = accumulate(u1, it2)
    assert u2 == [*it1, it2[1], it2[2]]  # the earlier union first, unchanged (its record, not the rationalized twin)
    assert (r2["previous"], r2["kept_this_iteration"], r2["already_in_union"], r2["new"], r2["union"]) == (2, 3, 1, 2, 4)
    assert r2["problems"] == 3 and r2["rationalized"] == 0
    # max_kept caps the union's records per problem; the earliest stay
    u3, r3 = accumulate(u1, it2, max_kept=1)
    assert u3 == [*it1, it2[1]] and r3["capped"] == 1 and r3["new"] == 1
    assert accumulate(u2, it2)[1]["new"] == 0  # the same iteration again adds nothing


def test_pass_at_k_counts_right_and_valid_samples_with_the_unbiased_estimator() -> None:
    # 4 problems, k = 4: (right samples, of them passing the check)
    m = pass_at_k_metrics(4, [(0, 0), (1, 0), (4, 4), (2, 1)])
    assert (m["solved"], m["validly_solved"]) == (3, 2)
    assert m["pass_at_k"] == 0.75 and m["valid_pass_at_k"] == 0.5
    assert m["pass_at_1"] == round((0 + 1 + 4 + 2) / 16, 4) and m["valid_pass_at_1"] == round((0 + 0 + 4 + 1) / 16, 4)
    assert pass_at_k_metrics(1, [])["pass_at_k"] is None


def test_accumulate_is_checked_at_the_edge() -> None:
    for bad in ({"baseline": "direct"}, {"baseline": "gold"}, {"pseudo_labels": {"mode": "majority"}}):
        with pytest.raises(ConfigError, match=r"sampling\.accumulate"):
            StarConfig.from_dict({**bad, "sampling": {"accumulate": True}})
    # a resume may not switch it: it changes what every later iteration trains on
    on, off = StarConfig.from_dict({"sampling": {"accumulate": True}}), StarConfig.from_dict({})
    assert on.result_fields() != off.result_fields()
    assert StarConfig.from_dict({"sampling": {"k": 1}}).result_fields() == off.result_fields()


# --------------------------------------------------------------------------- real runs on the bootstrap base
def _env() -> dict[str, str]:
    src = str(REPO / "src")
    return {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": os.pathsep.join([src, os.environ.get("PYTHONPATH", "")])}


def _start(cfg: Path, out: Path, *, resume: bool = False) -> subprocess.Popen[bytes]:
    args = [sys.executable, "-m", "thoughtsource", "-q", "star", "run", "--config", str(cfg), "--out", str(out)]
    return subprocess.Popen([*args, *(["--resume"] if resume else [])], env=_env(), stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE)


def _kill_when(proc: subprocess.Popen[bytes], marker: Path) -> None:
    """SIGKILL the run as soon as ``marker`` exists (no finally, no atexit runs in it)."""
    deadline = time.monotonic() + 3000
    while not marker.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert marker.exists(), proc.stderr.read().decode()[-3000:] if proc.poll() is not None and proc.stderr else "timed out"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()


@contextlib.contextmanager
def _one_thread() -> Iterator[None]:
    """Torch on one CPU thread, as in the runs' processes (``OMP_NUM_THREADS=1``, ``generation.threads: 1``), and the
    test process's thread count back afterwards."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """ROOT/run.yaml and ROOT/whole: an unbroken run (in this process: it is the reference, not a process under test;
    the killed runs are ``thoughtsource star run`` processes)."""
    root = tmp_path_factory.mktemp("accumulate")
    (root / "run.yaml").write_text(json.dumps(RUN))  # JSON is YAML
    with _one_thread():
        StarRun(StarConfig.from_dict(RUN), root / "whole", show_progress=False).run()
    return root


def _task() -> Any:
    return get_task("arithmetic", **RUN["task_options"])


def _kept(task: Any, run: Path, n: int) -> list[TrainingRecord]:
    """Iteration n's kept records, rebuilt from its generation files with the task's own judge (answer filter): per
    problem its right samples, else its right hinted one, each distinct text once."""
    problems = {p.id: p for p in task.train_problems(n, SEED)}
    rat_path = run / f"iter_{n}" / "rationalize.json"
    rat = {r["id"]: r["text"] for r in read_json(rat_path)["rows"]} if rat_path.exists() else {}
    out = []
    for row in read_json(run / f"iter_{n}" / "generate.json")["rows"]:
        p = problems[row["id"]]
        assert len(row["samples"]) == K
        right, hinted = [s["text"] for s in row["samples"] if task.is_correct(p, s["text"])], False
        if not right and row["id"] in rat and task.is_correct(p, rat[row["id"]]):
            right, hinted = [rat[row["id"]]], True
        seen: set[str] = set()
        for t in right:
            if " ".join(t.split()) not in seen:
                seen.add(" ".join(t.split()))
                out.append(task.training_record(p, t, rationalized=hinted))
    return out


def _key(r: TrainingRecord) -> tuple[str, str]:
    return r.id, " ".join(r.completion.split())


def _jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


@pytest.mark.slow
@pytest.mark.timeout(3600)
def test_each_iteration_trains_on_the_union_of_every_iterations_distinct_kept_rationales(root: Path) -> None:
    run, task = root / "whole", _task()
    union: list[TrainingRecord] = []
    keys: set[tuple[str, str]] = set()
    found_again = 0
    for n in range(1, ITERATIONS + 1):
        kept = _kept(task, run, n)
        new = []
        for r in kept:
            key = _key(r)
            found_again += key in keys
            if key not in keys:
                keys.add(key)
                new.append(r)
        union += new
        # the training set of iteration n is the union, in order: iteration n-1's, then what is new
        assert _jsonl(run / f"iter_{n}" / "train.jsonl") == [r.to_dict() for r in union]
        m = read_json(run / f"iter_{n}" / "metrics.json")
        acc = m["accumulated"]
        assert (acc["union"], acc["new"], acc["previous"], acc["kept_this_iteration"]) == (
            len(union), len(new), len(union) - len(new), len(kept))
        assert acc["already_in_union"] == len(kept) - len(new) and m["kept"] == len(union)
        assert read_json(run / f"iter_{n}" / "train_stats.json")["examples"] == len(union)  # what the trainer got
        assert sum(acc["new_by_iteration"].values()) == len(union) and acc["new_by_iteration"][str(n)] == len(new)
    # a rationale found in iterations 1 and 2 (and 3) is one record: it happened, and the union has no duplicate
    assert found_again >= 5
    last = [TrainingRecord(**r) for r in _jsonl(run / f"iter_{ITERATIONS}" / "train.jsonl")]
    assert len({_key(r) for r in last}) == len(last) == len(union)


@pytest.mark.slow
@pytest.mark.timeout(3600)
def test_pass_at_k_and_valid_pass_at_k_are_the_samples_own(root: Path) -> None:
    run, task = root / "whole", _task()
    summary = read_json(run / "metrics.json")
    lucky = 0
    for n in range(1, ITERATIONS + 1):
        problems = {p.id: p for p in task.train_problems(n, SEED)}
        right, valid = [], []
        for row in read_json(run / f"iter_{n}" / "generate.json")["rows"]:
            p = problems[row["id"]]
            ok = [task.is_correct(p, s["text"]) for s in row["samples"]]
            right.append(sum(ok))
            valid.append(sum(o and task.verify(p, s["text"]) is None for o, s in zip(ok, row["samples"], strict=True)))
        m = summary["iterations"][n]["pass_at_k"]
        assert m["k"] == K and m["problems"] == len(problems)
        assert m["solved"] == sum(c > 0 for c in right) and m["validly_solved"] == sum(v > 0 for v in valid)
        assert m["pass_at_k"] == round(m["solved"] / len(problems), 4)
        assert m["valid_pass_at_k"] == round(m["validly_solved"] / len(problems), 4)
        assert m["pass_at_1"] == round(sum(right) / (K * len(problems)), 4)
        lucky += m["solved"] - m["validly_solved"]
        assert 0 < m["validly_solved"] < len(problems)  # the base solves some, not all: the numbers say something
    assert lucky > 0  # right answers after a wrong scratchpad: valid-pass@k is not pass@k here


@pytest.mark.slow
@pytest.mark.timeout(3600)
def test_the_last_iteration_trains_from_the_base_on_the_union(root: Path, tmp_path: Path) -> None:
    """Train the base on the union rebuilt here, with the run's settings: exactly M_3's weights; and the union holds
    records iteration 3 did not find again (else this would not tell the union from iteration 3's own records)."""
    run, task = root / "whole", _task()
    union: list[TrainingRecord] = []
    for n in range(1, ITERATIONS + 1):
        union += [r for r in _kept(task, run, n) if _key(r) not in {_key(x) for x in union}]
    assert {_key(r) for r in union} - {_key(r) for r in _kept(task, run, ITERATIONS)}
    from thoughtsource.star.train import train

    cfg = StarConfig.model_validate(read_json(run / "config.json"))
    with _one_thread():  # as the run's process trained M_3
        train(cfg, str(BASE), union, cfg.steps.steps(ITERATIONS), str(tmp_path / "work"), checkpoint=str(tmp_path / "again"),
              show_progress=False)
    from safetensors.torch import load_file

    again = load_file(tmp_path / "again" / "model.safetensors")
    last = load_file(run / f"iter_{ITERATIONS}" / "checkpoint" / "model.safetensors")
    assert again.keys() == last.keys() and all(again[k].equal(last[k]) for k in last)


#: what differs between two runs of the same config: wall times, speeds and the run folder's path
VOLATILE = {"timings_s", "generation_tokens_per_s", "model", "wall_s", "train_runtime_s"}


def _stable(x: Any) -> Any:
    if isinstance(x, dict):
        return {k: _stable(v) for k, v in x.items() if k not in VOLATILE}
    if isinstance(x, list):
        return [_stable(v) for v in x]
    return x


def _same_as_whole(run: Path, whole: Path) -> None:
    for n in range(1, ITERATIONS + 1):
        for name in ("train.jsonl", "filter.json"):
            assert (run / f"iter_{n}" / name).read_bytes() == (whole / f"iter_{n}" / name).read_bytes(), (n, name)
    assert _stable(read_json(run / "metrics.json")["iterations"]) == _stable(read_json(whole / "metrics.json")["iterations"])
    assert not list(run.rglob("*.tmp"))


@pytest.mark.slow
@pytest.mark.timeout(3600)
def test_sigkill_twice_in_iteration_2_then_resume_gives_the_unbroken_runs_union_and_metrics(root: Path) -> None:
    """``thoughtsource star run`` killed with SIGKILL when iteration 2's generations are written (its dataset step not
    yet), resumed, killed again when its union is written (training under way), resumed to the end."""
    out = root / "killed"
    _kill_when(_start(root / "run.yaml", out), out / "iter_2" / "generate.json")
    assert not (out / "iter_2" / "metrics.json").exists() and (out / "iter_1" / "metrics.json").exists()
    _kill_when(_start(root / "run.yaml", out, resume=True), out / "iter_2" / "train.jsonl")
    assert not (out / "iter_2" / "metrics.json").exists()
    before = (out / "iter_2" / "train.jsonl").stat().st_mtime_ns
    with _one_thread():  # the last resume, to the end, in this process: the kills were the processes' part
        StarRun(StarConfig.from_dict(RUN), out, resume=True, show_progress=False).run()
    assert (out / "iter_2" / "train.jsonl").stat().st_mtime_ns == before  # the written union was read, not rebuilt
    _same_as_whole(out, root / "whole")


@pytest.mark.slow
@pytest.mark.timeout(3600)
def test_a_kill_between_the_filter_report_and_the_union_rebuilds_the_same_union(root: Path) -> None:
    """The dataset step writes filter.json (with the union's counts) before train.jsonl (the union, its marker): a
    run killed between the two resumes to the same union, counted once.  Here the unbroken run's folder with
    iteration 2's union and everything after it removed stands for that kill."""
    out = root / "between"
    shutil.copytree(root / "whole", out)
    shutil.rmtree(out / f"iter_{ITERATIONS}")
    for name in ("train.jsonl", "train_stats.json", "test.json", "metrics.json"):
        (out / "iter_2" / name).unlink()
    shutil.rmtree(out / "iter_2" / "checkpoint")
    cfg = StarConfig.from_dict(RUN)
    run = StarRun(cfg, out, resume=True, show_progress=False)
    with _one_thread():
        run.run()
    assert (2, "dataset") in run.done_steps and (2, "generate") not in run.done_steps
    _same_as_whole(out, root / "whole")
