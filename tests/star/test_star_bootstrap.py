"""The STaR loop's mechanism, end to end on the CPU: two iterations from a committed base built by ``star base``.

The base (``tests/star/fixtures/bootstrap_base/``: a 0.37M-parameter RoPE model, 1.5 MB, with its loss and dev
curves) was built by ``thoughtsource star base`` from the recipe in its ``thoughtsource_base.json``: 1-2-digit sums
in quantity (k = 2) and 7 % 3-digit ones, trained until its range was learnt.  Where a small model's training
lands near a phase transition depends on the CPU's float kernels: built in the test, such a base solved 1.5 % to
49 % of the 3-digit problems over six builds (three seeds, this CPU's kernels and AVX2's), and STaR lifted it from
near zero not at all in one build of six.  A committed base takes that out: the STaR iterations that run here
start from the same weights on every machine.  It was chosen on dev (3-digit dev accuracy between 30 % and 60 %),
and ``test_the_recipe_rebuilds_a_base_that_passes_the_gate`` rebuilds it from its recipe on this machine and
checks the gate (not the weights, which differ between CPUs).

What the tests prove, on any machine of this kind:

* ``star base`` trains until its range is learnt: the gate stopped the build at a dev check where every digit
  count of its range is solved >= 90 % of the time, and its curves are kept beside it (and a rebuild here does
  the same);
* the precondition of bootstrapping holds: the base solves its range and some, not most, k+1 = 3-digit problems;
* each iteration's training records are the logged judged generations: each completion is the text the log says
  M_{n-1} generated for that problem (zero-shot, or with the hint for a rationalization), each reaches the right
  answer (judged again here), every judged-right generation is kept once, and no training prompt carries the hint;
* the log is what the models write: ``SAMPLE`` rows of every generation step, chosen by a seed drawn when the test
  runs, are generated again from the checkpoint that made them (greedy, float32, one thread, no completion store;
  :func:`thoughtsource.star.audit.regenerate_sample`) and equal the logged text byte for byte, and each checkpoint
  hashes to the fingerprint its steps recorded.  Only this tells a text the model wrote from a gold scratchpad
  logged in its place (on this format a right scratchpad is byte for byte the gold one): the forgery of issue 41
  (gold logged for 1 in 5 wrongly answered problems of iteration 1, 190 of 3,200 rows) passes the check above and
  fails the audit, which names forged rows (9 of the 128 it regenerated from that step);
* iteration 2 trains from the base, not from iteration 1: training the base again on iteration 2's records with
  the run's own settings gives exactly M_2's weights (training is deterministic on one CPU thread);
* the loop lifts 3-digit test accuracy past iteration 0's Wilson 95 % interval by ``MARGIN`` at the iteration
  dev chooses, paired McNemar p < 0.001.

What they do not prove: that STaR bootstraps beyond gold.  Gold training reaches the lift's threshold too: the
base trained 250 steps on its own gold recipe gets 194/200 3-digit test sums (issue 41's audit), and the loop's
gold arm (iteration 1's 3,200 problems, their gold scratchpads, 250 steps) 200/200 here, against the threshold of
150/200.  So the lift shows that the filtered self-generated records are as good as gold for this base, not that
they reach further than gold would.  Nor do they prove that STaR lifts digit counts never seen in gold (3-digit gold
is in the base's data; docs/star-results.md does that with a larger base), nor anything about pretrained models or
GPUs.  The audit regenerates a sample: a forged share f of a step escapes it with probability (1 - f)^SAMPLE, and
sampled (temperature > 0) steps are not regenerated (this run has none).  Each guard was checked by breaking the
loop on purpose (the closing note of issue 29): removing the answer filter, training from M_{n-1}, and mixing gold
scratchpads into the records each make a test here fail; logging gold in place of generations fails the audit
(``test_gold_scratchpads_in_the_log_pass_the_provenance_check_and_fail_the_audit``).

``MARGIN`` was chosen on dev, not test: over the pilot runs from this base (this CPU's kernels and AVX2's), 3-digit
dev accuracy at the dev-chosen iteration rose past the upper end of iteration 0's dev interval by ``MIN_DEV_RISE``;
the margin is half of that.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from bootstrap_base import BOOTSTRAP_BASE

pytest.importorskip("transformers")
pytest.importorskip("torch")

from thoughtsource.star.analysis import bootstrap_experiment  # its test_rows must not be collected as a test
from thoughtsource.star.analysis.plots import plot_digits
from thoughtsource.star.artifacts import write
from thoughtsource.star.audit import regenerate_sample
from thoughtsource.star.config import StarConfig
from thoughtsource.star.loop import StarRun
from thoughtsource.star.tasks.arithmetic import ArithmeticTask

# the module's experiment (base + 2 iterations) runs in whichever test comes first: minutes on a free 2-core machine,
# far more on a loaded one
pytestmark = [pytest.mark.slow, pytest.mark.timeout(5400)]

REPO = Path(__file__).resolve().parents[2]
FIXTURE = BOOTSTRAP_BASE
RECIPE: dict[str, Any] = json.loads((FIXTURE / "thoughtsource_base.json").read_text())["config"]
TASK: dict[str, Any] = RECIPE["task_options"]
SEED = 1
RUN = {
    "task": "arithmetic",
    "task_options": TASK,
    "iterations": 2,
    "fewshot_k": 0,
    "steps": {"first": 250, "growth": "additive", "increase": 0, "warmup_steps": 20},
    "batch_size": 32,
    "lr": 1.0e-3,
    "lr_scheduler": "cosine",
    "weight_decay": 0.1,
    "seed": SEED,
    "checkpoint_every": 0,
    "keep_checkpoints": True,
    "generation": {"engine": "transformers", "batch_size": 256},
}
K_PLUS_1 = "3-digit"
#: the smallest rise of 3-digit dev accuracy past iteration 0's dev interval (upper end), at the dev-chosen
#: iteration, over the pilot runs from this base: 24/50 (Wilson upper end 0.617) -> 50/50 at iteration 2, with this
#: CPU's kernels and with AVX2's (docs/star-results.md, "The CI test")
MIN_DEV_RISE = 0.38
#: the rise the test demands on test: the chosen iteration's accuracy at least this far above the upper end of
#: iteration 0's Wilson 95 % interval (n = 200); half the smallest rise seen on dev
MARGIN = MIN_DEV_RISE / 2
#: rows of each generation step the audit regenerates: a forged share f of a step's rows escapes with probability
#: (1 - f)^128 (the gold forgery of issue 41, 6 % of iteration 1's rows: 0.04 %; 2.3 %: 5 %)
SAMPLE = 128
#: the base must solve some k+1 problems but not most: bootstrapping needs a foothold below and room above
K_PLUS_1_BASE_RANGE = (0.05, 0.6)


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    return subprocess.run([sys.executable, "-m", "thoughtsource", *args], capture_output=True, text=True, timeout=3000, env=env)


@pytest.fixture(scope="module")
def experiment(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """ROOT/base_<SEED> (the committed base) and ROOT/seed_<SEED>/star (two STaR iterations from it)."""
    root = tmp_path_factory.mktemp("bootstrap")
    shutil.copytree(FIXTURE, root / f"base_{SEED}")
    (root / "run.yaml").write_text(yaml.safe_dump({**RUN, "model": str(root / f"base_{SEED}")}))
    p = _cli("star", "run", "--config", str(root / "run.yaml"), "--out", str(root / f"seed_{SEED}" / "star"), "--threads", "1",
             "--json")
    assert p.returncode == 0, p.stderr[-3000:]
    return root


def _check_gate(base: Path, info: dict[str, Any]) -> None:
    """The gate stopped the build at a dev check where the range was learnt, before the cap; the curves are there."""
    every, cap = info["config"]["gate"]["every"], info["config"]["training"]["steps"]
    assert info["k"] == 2 and info["learnt_range"]
    learnt_at = info["gate"]["learnt_at_step"]
    assert learnt_at is not None and learnt_at % every == 0 and info["training"]["global_step"] == learnt_at < cap
    for g in ("1-digit", "2-digit"):
        c, n = info["dev_correct_by_group"][g]
        assert n < 10 or c >= 0.9 * n, (g, c, n)
    dev_curve = [json.loads(line) for line in (base / "dev_curve.jsonl").read_text().splitlines()]
    assert [r["step"] for r in dev_curve] == list(range(every, learnt_at + 1, every))
    assert [r["learnt"] for r in dev_curve] == [False] * (len(dev_curve) - 1) + [True]
    losses = [json.loads(line) for line in (base / "train_metrics.jsonl").read_text().splitlines()]
    assert sum("loss" in r for r in losses) >= learnt_at // 10 - 1  # logged every 10 steps
    assert (base / "curves.png").stat().st_size > 10_000


def _rows(path: Path) -> dict[str, dict[str, Any]]:
    return {r["id"]: r for r in json.loads(path.read_text())["rows"]} if path.is_file() else {}


def test_the_committed_base_passed_the_gate_and_keeps_its_curves() -> None:
    _check_gate(FIXTURE, json.loads((FIXTURE / "thoughtsource_base.json").read_text()))


def test_the_recipe_rebuilds_a_base_that_passes_the_gate(tmp_path: Path) -> None:
    """The committed base's recipe, built again on this machine: the gate passes here too (its weights and its
    k+1 accuracy may differ from the committed ones: that is why the base is committed)."""
    (tmp_path / "base.yaml").write_text(yaml.safe_dump(RECIPE))
    p = _cli("star", "base", "--config", str(tmp_path / "base.yaml"), "--out", str(tmp_path / "base"), "--threads", "1", "--json")
    assert p.returncode == 0, p.stderr[-3000:]
    info = json.loads(p.stdout)
    assert info["config"] == RECIPE
    _check_gate(tmp_path / "base", info)


def test_the_base_meets_the_precondition_of_bootstrapping(experiment: Path) -> None:
    """Its range solved, k+1 neither impossible nor already solved: otherwise this test says so, rather than the
    bootstrap test failing on a base that could not bootstrap."""
    rep = bootstrap_experiment.report(experiment, need=1)
    test0 = rep["seeds"][str(SEED)]["star"]["test_by_iteration"]["0"]
    lo, hi = K_PLUS_1_BASE_RANGE
    acc = test0[K_PLUS_1]["accuracy"]
    if not lo <= acc <= hi:
        pytest.fail(f"precondition of bootstrapping not met: the base's {K_PLUS_1} test accuracy is {acc:.3f}, outside "
                    f"[{lo}, {hi}] (its curves: {FIXTURE / 'curves.png'}); the base needs changing, not the loop")
    assert test0["2-digit"]["accuracy"] >= 0.8


def _check_judged_generations(run: Path, n: int, base: Path) -> None:
    """Iteration n's training records are the logged judged generations of M_{n-1} (read from the log: see
    ``test_gold_scratchpads_in_the_log_pass_this_check_and_fail_the_audit`` for what that cannot see)."""
    task = ArithmeticTask(**TASK)
    d = run / f"iter_{n}"
    gen, rat = _rows(d / "generate.json"), _rows(d / "rationalize.json")
    problems = {p.id: p for p in task.train_problems(n, RUN["seed"])}
    records = [json.loads(line) for line in (d / "train.jsonl").read_text().splitlines()]
    assert records and len({r["id"] for r in records}) == len(records)
    n_rationalized = 0
    for r in records:
        p = problems[r["id"]]
        # the prompt is the bare question: never the hint
        assert r["prompt"] == task.prompt(p, []) and "Target:\n" in r["prompt"] and f"Target: {p.answer}" not in r["prompt"]
        source = rat[r["id"]] if r["rationalized"] else gen[r["id"]]
        n_rationalized += r["rationalized"]
        if r["rationalized"]:
            assert not gen[r["id"]]["correct"] and source["prompt"] == task.prompt(p, [], hint=True)
        else:
            assert source["prompt"] == task.prompt(p, [])
        # what is trained on is what the log says M_{n-1} wrote for this problem, judged right again here
        assert r["completion"] == task.generated_completion(source["text"]), r["id"]
        assert task.is_correct(p, source["text"]), (r["id"], source["text"])
    # every judged-right generation was kept, each problem once
    kept_expected = {i for i, g in gen.items() if task.is_correct(problems[i], g["text"])}
    kept_expected |= {i for i, g in rat.items() if task.is_correct(problems[i], g["text"])}
    assert {r["id"] for r in records} == kept_expected
    assert n_rationalized < len(records)
    if n == 1:  # the base reads the hint (a share of its prompts carried it); M_1, trained without hints, rarely does
        assert n_rationalized > 0
    # the generations came from M_{n-1}
    model_path = json.loads((d / "generate.json").read_text())["model"]["path"]
    assert (model_path == str(base)) if n == 1 else model_path.endswith("iter_1/checkpoint")


@pytest.mark.parametrize("n", [1, 2])
def test_each_iteration_trains_on_the_models_own_judged_generations(experiment: Path, n: int) -> None:
    _check_judged_generations(experiment / f"seed_{SEED}" / "star", n, experiment / f"base_{SEED}")


def test_a_sample_of_every_logged_generation_regenerates_from_its_checkpoint(experiment: Path) -> None:
    """``SAMPLE`` rows of every generation step, chosen by a seed drawn now (the loop cannot know which), generated
    again from the checkpoint that made them: the same text byte for byte, and the fingerprint the step recorded."""
    seed = random.SystemRandom().randrange(2**31)
    rep = regenerate_sample(experiment / f"seed_{SEED}" / "star", SAMPLE, seed)
    assert rep.ok, rep.summary()
    assert {(s.iteration, s.step) for s in rep.steps} == {(n, step) for n in (0, 1, 2) for step in ("test", "dev")} | {
        (n, step) for n in (1, 2) for step in ("generate", "rationalize")}
    assert all(s.checked == min(SAMPLE, s.rows) > 0 for s in rep.steps), rep.summary()
    assert not rep.train_fingerprints


class GoldInjectingRun(StarRun):
    """The forgery of issue 41 (finding 3): for about 1 in 5 wrongly answered problems of iteration 1, the gold
    scratchpad is logged as M_0's generation (and so judged right, kept and trained on)."""

    injected: list[str]

    def _generate(self, n: int, d: Path, train: list[Any], *, hint: bool) -> dict[str, Any]:
        result = super()._generate(n, d, train, hint=hint)
        if n == 1 and not hint:
            by_id = {p.id: p for p in train}
            for row in [r for r in result["rows"] if not r["correct"]][::5]:
                p = by_id[row["id"]]
                gold = self.task.completion(p, p.rationale)
                row.update(text=gold, **self._judge(p, gold))
                self.injected.append(row["id"])
            write(d / "generate.json", result)
        return result


class _Stop(Exception):
    pass


def test_gold_scratchpads_in_the_log_pass_the_provenance_check_and_fail_the_audit(experiment: Path, tmp_path: Path) -> None:
    """Iteration 1 again (from the run's completion store) with the forgery, up to its training records: the check that
    reads the log passes, the audit (as the test above runs it) fails and names forged rows, and only those."""
    honest = experiment / f"seed_{SEED}" / "star"
    forged = tmp_path / "star"
    forged.mkdir()
    shutil.copytree(honest / "iter_0", forged / "iter_0")
    for f in [honest / "config.json", *honest.glob("completions.sqlite*")]:
        shutil.copy(f, forged / f.name)

    def stop(n: int, step: str) -> None:
        if (n, step) == (1, "dataset"):
            raise _Stop

    run = GoldInjectingRun(StarConfig.model_validate(json.loads((honest / "config.json").read_text())), forged, resume=True,
                           show_progress=False, on_step=stop)
    run.injected = []
    with pytest.raises(_Stop):
        run.run()
    wrong = sum(not r["correct"] for r in _rows(honest / "iter_1" / "generate.json").values())
    assert len(run.injected) == (wrong + 4) // 5 > 100
    _check_judged_generations(forged, 1, experiment / f"base_{SEED}")  # blind to it
    rep = regenerate_sample(forged, SAMPLE, 0)
    assert not rep.ok
    assert [(s.iteration, s.step) for s in rep.steps if not s.ok] == [(1, "generate")]
    step = next(s for s in rep.steps if not s.ok)
    assert step.n_mismatches > 0 and {m.id for m in step.mismatches} <= set(run.injected), rep.summary()
    assert all(m.logged.startswith("<scratch>") and m.logged != m.regenerated for m in step.mismatches)
    print(f"forged {len(run.injected)} of {step.rows} rows; the audit regenerated {rep.checked} rows "
          f"({step.checked} of that step): {step.n_mismatches} differ")


def test_iteration_2_trains_from_the_base_not_from_iteration_1(experiment: Path, tmp_path: Path) -> None:
    """Train the base again on iteration 2's records with the run's own settings: exactly M_2's weights."""
    run = experiment / f"seed_{SEED}" / "star"
    script = (
        "import sys, torch; from thoughtsource.star.config import StarConfig; from thoughtsource.star.train import train;"
        "from thoughtsource.star.tasks.base import TrainingRecord; from thoughtsource.io import read_json; import json;"
        "torch.set_num_threads(1);"
        f"cfg = StarConfig.model_validate(read_json({str(run / 'config.json')!r}));"
        f"recs = [TrainingRecord(**json.loads(l)) for l in open({str(run / 'iter_2' / 'train.jsonl')!r})];"
        f"train(cfg, {str(experiment / f'base_{SEED}')!r}, recs, cfg.steps.steps(2), {str(tmp_path / 'work')!r},"
        f" checkpoint={str(tmp_path / 'again')!r}, show_progress=False)"
    )
    p = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=3000,
                       env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert p.returncode == 0, p.stderr[-3000:]
    from safetensors.torch import load_file

    again = load_file(tmp_path / "again" / "model.safetensors")
    m2 = load_file(run / "iter_2" / "checkpoint" / "model.safetensors")
    m1 = load_file(run / "iter_1" / "checkpoint" / "model.safetensors")
    assert again.keys() == m2.keys()
    differing = [k for k in m2 if not (again[k] == m2[k]).all()]
    assert not differing, f"M_2 is not the base trained on iteration 2's records: {len(differing)} tensors differ"
    assert any(not (m1[k] == m2[k]).all() for k in m2)


def test_star_lifts_k_plus_1_accuracy_past_iteration_0(experiment: Path) -> None:
    rep = bootstrap_experiment.report(experiment, need=1)
    star = rep["seeds"][str(SEED)]["star"]
    assert star["k"] == 2 and star["iterations"] == [0, 1, 2]
    run = experiment / f"seed_{SEED}" / "star"
    metrics = json.loads((run / "metrics.json").read_text())
    # the iteration dev chooses (3-digit dev accuracy, ties: earliest), among the trained ones
    dev = {m["iteration"]: m["dev_correct_by_group"][K_PLUS_1] for m in metrics["iterations"]}
    chosen = max((1, 2), key=lambda n: (dev[n][0] / dev[n][1], -n))
    before, after = star["test_by_iteration"]["0"][K_PLUS_1], star["test_by_iteration"][str(chosen)][K_PLUS_1]
    assert before["n"] == after["n"] == 200
    assert after["accuracy"] >= before["ci95"][1] + MARGIN, (chosen, before, after)
    assert bootstrap_experiment.paired(bootstrap_experiment.test_rows(run, chosen)[K_PLUS_1], bootstrap_experiment.test_rows(run, 0)[K_PLUS_1])["p_value"] < 0.001
    # the kept-data audit counts the model's own correct rationales
    for kept in star["kept"]:
        assert 0 < kept["answer_correct"] <= kept["train_n"] and kept["verified"] <= kept["answer_correct"]
    plot_digits(rep, str(SEED), experiment / "digits.png")
    assert (experiment / "digits.png").stat().st_size > 0
