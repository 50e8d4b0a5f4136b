"""Ctrl-C with the in-process model (issue 22): decoding stops between steps, every finished completion is kept (and
stored by generate), the command exits 130; a second Ctrl-C aborts at once.  No test waits on a clock: Ctrl-C is
simulated by making ``interrupt.requested`` true after a fixed number of checks (one per decoding step)."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from thoughtsource import interrupt
from thoughtsource.backends.base import Request
from thoughtsource.interrupt import Interrupted

REPO = Path(__file__).resolve().parents[1]


class _CtrlCAfter:
    """``interrupt.requested`` that turns true at its ``n``-th call (decoding checks it once per step)."""

    def __init__(self, n: int) -> None:
        self.n, self.calls = n, 0

    def __call__(self) -> bool:
        self.calls += 1
        return self.calls >= self.n


@pytest.fixture(scope="module")
def embedded(embedded_model: tuple):
    from thoughtsource.backends.transformers_local import TransformersBackend

    return TransformersBackend.from_loaded(*embedded_model, name="embedded", batch_size=8, threads=1)


def _requests() -> list[Request]:
    return [Request(prompt="Once upon a time, in a small village by the sea,", max_tokens=60),
            Request(prompt="Q: 2+2?\nA:", max_tokens=2),
            Request(prompt="The history of the lighthouse begins in", max_tokens=60),
            Request(prompt="Q: 3+3?\nA:", max_tokens=3)]


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["prefix", "generate"])
def test_decoding_stops_between_steps_and_keeps_finished_rows(embedded, mode: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(embedded.options, "mode", mode)
    ctrl_c = _CtrlCAfter(6)
    monkeypatch.setattr(interrupt, "requested", ctrl_c)
    with pytest.raises(Interrupted) as stopped:
        asyncio.run(embedded.complete(_requests()))  # through the queue and worker thread, as generate calls it
    kept = stopped.value.completions
    assert sorted(kept) == [1, 3]  # the two short requests finished (2 and 3 tokens); the long ones were cut off
    assert [kept[1].completion_tokens, kept[3].completion_tokens] == [2, 3]
    assert ctrl_c.calls <= 10  # stopped a step or two after Ctrl-C, not after 60 decoding steps


def _stored(db: Path) -> int:
    import sqlite3

    con = sqlite3.connect(db)
    try:
        return con.execute("SELECT COUNT(*) FROM completions").fetchone()[0]
    finally:
        con.close()


def test_generate_stores_the_finished_completions_of_an_interrupted_batch_and_resumes(examples_dir: Path,
                                                                                        tmp_path: Path) -> None:
    """The dispatcher's side: a batch interrupted with 1 of its 3 requests finished commits that one, re-raises Ctrl-C
    (KeyboardInterrupt: the CLI's 'aborted', exit 130), and a re-run asks only for the rest."""
    from thoughtsource.backends.base import Completion
    from thoughtsource.backends.mock import MockBackend
    from thoughtsource.collection import Collection
    from thoughtsource.generation import generate

    class StoppedAfterOne(MockBackend):
        def __init__(self) -> None:
            super().__init__()
            self.calls: list[int] = []

        async def complete(self, requests: list[Request]) -> list[Completion]:
            self.calls.append(len(requests))
            if len(self.calls) == 1:
                raise Interrupted({1: Completion(text=" finished before Ctrl-C.", completion_tokens=4, finish_reason="stop")})
            return await super().complete(requests)

    c = Collection.from_json(examples_dir / "tests_unit_data" / "worldtree_100_dataset.json").select(
        split="train", number_samples=3, seed=0)
    db = tmp_path / "s.sqlite"
    cfg = {"cot_trigger_keys": ["kojima-01"], "answer_extraction_keys": ["kojima-A-D"], "backend": "mock", "batch_size": 8}
    backend = StoppedAfterOne()
    with pytest.raises(KeyboardInterrupt):
        generate(c, cfg, backend=backend, store=db, progress=False)
    assert backend.calls == [3] and _stored(db) == 1  # the one finished CoT is committed, nothing else
    report = generate(c, cfg, backend=backend, store=db, progress=False)
    assert report.errors == 0 and report.cached == 1 and report.called == 5  # the two cut-off CoTs and 3 answers
    assert sorted(g.cot for _, _, x in c.samples() for g in x.generated_cot).count("finished before Ctrl-C.") == 1


def test_the_first_ctrl_c_asks_decoding_to_stop_the_second_aborts(tmp_path: Path) -> None:
    handler = signal.getsignal(signal.SIGINT)  # Python's default, or SIG_IGN when pytest runs as a background job
    script = (
        "import os, signal, sys\n"
        "from thoughtsource import interrupt\n"
        "with interrupt.graceful_sigint():\n"
        "    try:\n"
        "        signal.raise_signal(signal.SIGINT)\n"  # nothing decoding: the plain KeyboardInterrupt
        "    except KeyboardInterrupt:\n"
        "        print('plain', flush=True)\n"
        "with interrupt.graceful_sigint(), interrupt.decoding():\n"
        "    signal.raise_signal(signal.SIGINT)\n"  # decoding: asks it to stop, no exception
        "    print('stop requested' if interrupt.requested() else 'not requested', flush=True)\n"
        "    signal.raise_signal(signal.SIGINT)\n"  # the second: abort at once
        "    print('still running', flush=True)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    p = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=120)
    assert p.stdout.splitlines() == ["plain", "stop requested"]
    assert p.returncode == 130 and p.stderr.strip().splitlines()[-1] == "aborted"
    assert signal.getsignal(signal.SIGINT) is handler  # this process: untouched
