"""STaR generation on the one store-first runner (mock backend, no model): store first, longest prompts first in
batches, the engine's name on every stored row, and the same completions with the store off."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from thoughtsource.backends.base import Completion, Request
from thoughtsource.backends.mock import MockBackend
from thoughtsource.star.config import StarConfig
from thoughtsource.star.engines import Session
from thoughtsource.star.generation import Generator, GenStats
from thoughtsource.store import CompletionStore

CFG = StarConfig.from_dict({"task": "arithmetic", "model": "embedded", "generation": {"batch_size": 3}})
PROMPTS = [f"p{'x' * i}" for i in range(7)]


class Batches(MockBackend):
    """The mock backend, recording the prompts of each call."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[list[str]] = []

    async def complete(self, requests: list[Request]) -> list[Completion]:
        self.calls.append([r.prompt for r in requests])
        return await super().complete(requests)


def _complete(store: CompletionStore | None) -> tuple[list[list[str]], dict[str, Any], Batches]:
    backend = Batches()
    session = Session(n=0, engine="transformers", model_path="m", fingerprint="f", backend=backend)
    gen = Generator(CFG, lambda: session, {"weights": "f"}, store=store, show_progress=False)
    stats = GenStats()
    out = gen.complete(PROMPTS, [5] * len(PROMPTS), n=2, stats=stats)
    return [[c.text for c in cs] for cs in out], stats.to_dict(), backend


def test_store_first_in_batches_longest_prompt_first(tmp_path: Path) -> None:
    with CompletionStore(tmp_path / "c.sqlite") as store:
        texts, stats, backend = _complete(store)
        assert [len(c) for c in backend.calls] == [3, 3, 3, 3, 2]
        sent = [p for c in backend.calls for p in c]
        assert sent == sorted(sent, key=len, reverse=True) and len(set(sent)) == len(PROMPTS)
        assert (stats["requests"], stats["from_store"], stats["requested"]) == (14, 0, 14)
        assert stats["ranks"][0]["generated_tokens"] == stats["completion_tokens"] > 0
        again, stats2, backend2 = _complete(store)
        assert backend2.calls == [] and again == texts and stats2["from_store"] == 14
    rows = sqlite3.connect(tmp_path / "c.sqlite").execute("SELECT DISTINCT backend FROM completions").fetchall()
    assert rows == [("transformers",)]  # the engine's name, as STaR always recorded it
    off, stats_off, _ = _complete(None)
    assert off == texts and stats_off["requested"] == 14
