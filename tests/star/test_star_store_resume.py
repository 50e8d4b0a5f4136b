"""Finer resume: STaR generation goes through the run's completion store, so a run killed in the middle of a
generation step asks, when resumed, only for the completions it had not finished (CPU).

What is tested is the loop's bookkeeping (which completions are asked for, which steps are redone), not what a model
says: the runs start from the committed 0.37M bootstrap base (``tests/star/fixtures/bootstrap_base``, a real model
``thoughtsource star base`` built, on the compact scratchpad it was trained on), not the 135M embedded model."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from bootstrap_base import BOOTSTRAP_BASE
from thoughtsource.backends import Completion, Request
from thoughtsource.io import read_json
from thoughtsource.star.config import StarConfig
from thoughtsource.star.loop import StarRun

pytestmark = pytest.mark.slow

BASE = BOOTSTRAP_BASE
CFG = {
    "model": str(BASE),
    "task": "arithmetic",
    "task_options": {"min_digits": 1, "max_digits": 1, "n_train": 8, "n_test_per_digit": 2, "n_dev_per_digit": 2,
                     "scratchpad": "compact"},
    "iterations": 1,
    "fewshot_k": 0,  # the base was trained zero-shot: it answers most of these right, so iteration 1 trains on them
    "steps": {"first": 1, "warmup_steps": 0},
    "generation": {"batch_size": 2, "max_new_tokens": 40},  # a compact 1-digit answer is 30 characters (tokens)
}


class _Killed(Exception):
    pass


class _Stop(Exception):
    pass


class Recording:
    """Wraps an engine's backend: records every prompt sent; raises (a kill) before the call that would pass ``fail_after``."""

    def __init__(self, sent: list[str], fail_after: int | None = None) -> None:
        self.sent, self.fail_after = sent, fail_after

    def __call__(self, backend: Any) -> Any:
        outer = self

        class Wrapped:
            name = backend.name

            def cache_identity(self) -> dict[str, Any]:
                return backend.cache_identity()

            async def complete(self, requests: list[Request]) -> list[Completion]:
                if outer.fail_after is not None and len(outer.sent) + len(requests) > outer.fail_after:
                    raise _Killed(f"killed after {len(outer.sent)} completions")
                outer.sent.extend(r.prompt for r in requests)
                return await backend.complete(requests)

            async def aclose(self) -> None:
                await backend.aclose()

        return Wrapped()


def _stop_after_generate(n: int, step: str) -> None:
    if step == "generate":
        raise _Stop


def _run(out: Path, sent: list[str], *, fail_after: int | None = None, resume: bool = False) -> StarRun:
    run = StarRun(StarConfig.from_dict(CFG), out, resume=resume, show_progress=False, on_step=_stop_after_generate,
                  wrap_backend=Recording(sent, fail_after))
    with pytest.raises((_Stop, _Killed)):
        run.run()
    return run


def test_a_killed_generation_resumes_asking_only_for_unfinished_completions(tmp_path: Path) -> None:
    # uninterrupted: iteration 0 (2 dev + 2 test prompts), then iteration 1's generation of 8 prompts
    whole: list[str] = []
    _run(tmp_path / "whole", whole)
    assert len(whole) == 12
    # killed after 4 of the 8 generation completions (2 batches of 2 committed; iteration 0 done)
    first: list[str] = []
    _run(tmp_path / "run", first, fail_after=8)
    assert len(first) == 8 and not (tmp_path / "run" / "iter_1" / "generate.json").exists()
    # resumed: only the 4 unfinished generation prompts go to the model again
    second: list[str] = []
    run = _run(tmp_path / "run", second, resume=True)
    gen_prompts = {r["prompt"] for r in read_json(tmp_path / "whole" / "iter_1" / "generate.json")["rows"]}
    assert len(second) == 4 and set(second) <= gen_prompts and not set(second) & set(first)
    assert set(first[4:]) | set(second) == gen_prompts  # together exactly the step's prompts, each asked once
    assert run.done_steps == [(1, "generate")]  # iteration 0 was done and is not redone
    got = read_json(tmp_path / "run" / "iter_1" / "generate.json")
    want = read_json(tmp_path / "whole" / "iter_1" / "generate.json")
    assert got["rows"] == want["rows"]  # the same results as the uninterrupted run
    assert (got["stats"]["from_store"], got["stats"]["requested"]) == (4, 4)
    assert got["model"]["fingerprint"] == want["model"]["fingerprint"]
    # a step redone (its file lost) with everything in the store asks the model for nothing
    (tmp_path / "run" / "iter_1" / "generate.json").unlink()
    third: list[str] = []
    _run(tmp_path / "run", third, resume=True)
    assert third == [] and read_json(tmp_path / "run" / "iter_1" / "generate.json")["rows"] == want["rows"]


def test_a_resume_with_another_generation_dtype_regenerates_and_rebuilds_what_was_built_on_it(tmp_path: Path) -> None:
    """Completions made in fp32 are not bf16's: a resume on bf16 (or on a CPU after a GPU run, both ``auto``) asks
    again for every completion, redoes every generation step, and rebuilds the dataset, the training and the
    evaluations that stood on them, instead of reusing the fp32 ones."""
    import sqlite3

    out = tmp_path / "run"
    StarRun(StarConfig.from_dict(CFG), out, show_progress=False).run()
    fp32 = {s: read_json(out / f"{s}.json") for s in ("iter_0/test", "iter_1/generate", "iter_1/test")}
    assert {v["model"]["identity"]["dtype"] for v in fp32.values()} == {"float32"}
    assert {v["model"]["identity"]["device"] for v in fp32.values()} == {"cpu"}
    with sqlite3.connect(out / "completions.sqlite") as db:
        stored = db.execute("select count(*) from completions").fetchone()[0]
    fp32_train = read_json(out / "iter_1" / "train_stats.json")

    cfg = StarConfig.from_dict({**CFG, "generation": {**CFG["generation"], "dtype": "bfloat16"}})
    run = StarRun(cfg, out, resume=True, show_progress=False)
    run.run()
    # found but made by fp32: redone (a generation step is named by the model that makes it: iteration 1's by M_0)
    assert {(0, "test"), (0, "dev"), (0, "generate")} <= set(run.redone_steps)
    # and everything of iteration 1 built on its generation was deleted and made again
    assert {(1, "generate"), (1, "dataset"), (1, "train"), (1, "test"), (1, "dev")} <= set(run.done_steps)
    for step in fp32:
        assert read_json(out / f"{step}.json")["model"]["identity"]["dtype"] == "bfloat16", step
    assert fp32_train["examples"] > 0 and read_json(out / "iter_1" / "train_stats.json")["examples"] > 0  # real trainings
    with sqlite3.connect(out / "completions.sqlite") as db:  # nothing reused: every bf16 completion was asked for
        assert db.execute("select count(*) from completions").fetchone()[0] == 2 * stored


def test_server_flags_and_environment_key_the_completions_but_do_not_refuse_a_resume() -> None:
    from thoughtsource.star.engines import store_identity

    def cfg(command: str, env: dict[str, str]) -> StarConfig:
        return StarConfig.from_dict({"generation": {"engine": "server", "server": {"command": command, "env": env}}})

    a = cfg("vllm serve {checkpoint} --port {port} --served-model-name {model_name}", {})
    b = cfg("vllm serve {checkpoint} --port {port} --served-model-name {model_name} --quantization fp8", {})
    c = cfg(a.generation.server.command, {"VLLM_ATTENTION_BACKEND": "FLASHINFER"})
    ids = [store_identity(x, "sha256:same") for x in (a, b, c)]
    assert ids[0] != ids[1] and ids[0] != ids[2] and ids[1] != ids[2]
    assert a.result_fields() == b.result_fields() == c.result_fields()  # a resume goes on, and regenerates
