"""``engine: server`` end to end on the CPU: the loop starts ``thoughtsource serve-model`` on each model M_n, checks
the weights fingerprint the server reports, and records it in every generation step; a resumed run redoes a step
that another model produced, and a server that serves another model than the checkpoint is refused.

What is tested is the loop's server bookkeeping (which process serves which weights, what each step records), not
what a model says: the run starts from the committed 0.37M bootstrap base (``tests/star/fixtures/bootstrap_base``, a
real model folder ``thoughtsource star base`` built, on the compact scratchpad it was trained on), not the 135M
embedded model; ``serve-model`` serves that folder and each checkpoint trained from it like any other."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest

from bootstrap_base import BOOTSTRAP_BASE, from_the_base
from thoughtsource.errors import EngineError
from thoughtsource.io import read_json, write_json
from thoughtsource.star.config import StarConfig
from thoughtsource.star.engines import model_fingerprint
from thoughtsource.star.loop import StarRun

pytestmark = pytest.mark.slow

BASE = str(BOOTSTRAP_BASE)
SRC = str(Path(__file__).resolve().parents[2] / "src")
SERVE = f"{sys.executable} -m thoughtsource -q serve-model --port {{port}} --served-model-name {{model_name}} --batch-size 8 --threads 1"


def _cfg(command: str) -> dict:
    return from_the_base({  # zero-shot, the base answers most 1-digit sums right, so M_1 trains on them
        "task_options": {"min_digits": 1, "max_digits": 1, "n_train": 8, "n_test_per_digit": 3, "n_dev_per_digit": 2},
        "iterations": 1,
        "steps": {"first": 2, "warmup_steps": 0},
        "batch_size": 2,
        "lr": 1e-4,
        "generation": {"engine": "server", "batch_size": 4, "max_new_tokens": 40,  # a compact 1-digit answer is 30 characters (tokens)
                       "server": {"command": command, "server_kind": "serve-model", "startup_timeout_s": 300, "stop_grace_s": 10,
                                  "env": {"PYTHONPATH": os.pathsep.join([SRC, os.environ.get("PYTHONPATH", "")])}}},
    })


@pytest.mark.timeout(3600)  # four serve-model starts (M_0, M_1; M_0 and M_1 again for the other command): minutes at load 8
def test_each_step_is_generated_by_a_server_on_its_own_checkpoint(tmp_path: Path) -> None:
    out = tmp_path / "run"
    cfg = StarConfig.from_dict(_cfg(SERVE + " --model {checkpoint}"))
    run = StarRun(cfg, out, show_progress=False)
    run.run()
    base = run.base_path
    assert base == BASE
    m0, m1 = model_fingerprint(base), model_fingerprint(str(out / "iter_1" / "checkpoint"))
    assert read_json(out / "iter_1" / "metrics.json")["kept"] > 0 and m0 != m1  # M_1 was trained: other weights
    expected = {"iter_0/test": (base, m0), "iter_0/dev": (base, m0), "iter_1/generate": (base, m0), "iter_1/rationalize": (base, m0),
                "iter_1/test": (str(out / "iter_1" / "checkpoint"), m1), "iter_1/dev": (str(out / "iter_1" / "checkpoint"), m1)}
    for step, (path, fp) in expected.items():
        model = read_json(out / f"{step}.json")["model"]
        assert model["engine"] == "server" and model["path"] == path and model["fingerprint"] == fp, step
        assert model["served"] == {"id": "star-current", "fingerprint": fp, "root": None}, step  # what the server said
    # one server per model, each started on its checkpoint and stopped
    assert sorted(p.name for p in (out / "logs").iterdir()) == ["server-M0.log", "server-M1.log"]

    # a test step made by the wrong model (a server still holding M_0) is not accepted on resume: it is redone
    test = read_json(out / "iter_1" / "test.json")
    stale = {**test, "model": {**test["model"], "fingerprint": m0}, "rows": [{**r, "text": "stale"} for r in test["rows"]]}
    write_json(out / "iter_1" / "test.json", stale)
    (out / "iter_1" / "metrics.json").unlink()
    again = StarRun(cfg, out, resume=True, show_progress=False)
    again.run()
    assert again.redone_steps == [(1, "test")] and again.done_steps == [(1, "test")]
    redone = read_json(out / "iter_1" / "test.json")
    assert redone["model"]["fingerprint"] == m1 and redone["rows"] == test["rows"]
    assert redone["stats"]["from_store"] == 3  # M_1's completions are in the store under M_1's fingerprint

    # a server command that ignores {checkpoint} serves the base folder for M_1: refused, with the reason
    for name in ("test.json", "dev.json", "metrics.json"):
        (out / "iter_1" / name).unlink()
    shutil.rmtree(out / "completions.sqlite", ignore_errors=True)
    for f in out.glob("completions.sqlite*"):
        f.unlink()
    wrong = StarConfig.from_dict(_cfg(SERVE + f" --model {BASE}"))
    with pytest.raises(EngineError, match=r"serves weights sha256:\w+, not the checkpoint .*iter_1/checkpoint"):
        StarRun(wrong, out, resume=True, show_progress=False).run()
    assert not (out / "iter_1" / "test.json").exists()
