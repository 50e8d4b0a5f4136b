"""experiments/star_word_problems.py: every arm's completion store starts with the few-shot run's completions
(``thoughtsource.store.share_completions``), so iteration 0 is computed once.  A copied row must be exactly the source's; a row the arm already has stays its own."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

from thoughtsource.backends import Completion, Request
from thoughtsource.store import CompletionStore, share_completions

SCRIPT = Path(__file__).resolve().parents[2] / "experiments" / "star_word_problems.py"


def _script():
    sys.path.insert(0, str(SCRIPT.parent))  # it imports star_bootstrap beside it
    try:
        spec = importlib.util.spec_from_file_location("star_word_problems", SCRIPT)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module
    finally:
        sys.path.remove(str(SCRIPT.parent))


def _put(store: CompletionStore, key: str, text: str) -> None:
    store.put(key, "transformers", {"weights": "sha256:abc"}, Request(prompt=f"prompt {key}", max_tokens=8),
              Completion(text=text, prompt_tokens=3, completion_tokens=2, finish_reason="stop"))


def test_an_arm_gets_the_few_shot_runs_completions_and_keeps_its_own(tmp_path: Path) -> None:
    share = _script().share_completions
    assert share is share_completions  # the experiment shares through the store's own function
    source = CompletionStore(tmp_path / "fewshot" / "completions.sqlite")
    for k in ("a", "b", "c"):
        _put(source, k, f"few-shot {k}")
    arm = tmp_path / "gold"
    assert share(source.path, arm) == 3  # a fresh arm: the whole store
    target = CompletionStore(arm / "completions.sqlite")
    assert {k: target.get(k).text for k in "abc"} == {k: f"few-shot {k}" for k in "abc"}
    _put(target, "d", "the arm's own")
    _put(source, "e", "few-shot e")
    assert share(source.path, arm) == 1  # only what it lacks
    again = CompletionStore(arm / "completions.sqlite")
    assert again.get("d").text == "the arm's own" and again.get("e").text == "few-shot e"
    assert share(tmp_path / "missing.sqlite", arm) == 0
