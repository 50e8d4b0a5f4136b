"""Rationale generation for one STaR step: store first, the engine for the rest, sharded over ranks.

The engine (:mod:`.engines`: transformers or vLLM in process, or a server started per checkpoint)
completes the prompts through the one store-first runner (:mod:`thoughtsource.generation.runner`):
every completion is committed to the run's completion store (``OUT/completions.sqlite``, keyed by
the model's fingerprint, the prompt and the parameters) as its batch finishes, so a killed run loses
at most the batch in flight and a resumed one asks only for the completions it lacks.  Under
``accelerate launch`` rank r completes prompts r, r+W, ... and the results are gathered on every rank;
an engine that runs on rank 0 only (vllm, server) is waited for through the store.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..backends import Backend, Completion, Request
from ..console import progress
from ..errors import ThoughtSourceError
from ..generation.runner import Runner, run_coroutine
from ..store import CompletionStore, NoStore, completion_key
from . import dist
from .config import StarConfig
from .engines import Session
from .loading import WeightsError

log = logging.getLogger(__name__)

STORE_POLL_S = 2.0


class RankWaitError(ThoughtSourceError):
    """A rank gave up waiting for completions another rank makes (that rank failed, or went silent)."""


@dataclass
class GenStats:
    requests: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    wall_s: float = 0.0
    from_store: int = 0
    generated_tokens: int = 0  # completion tokens of the completions asked for now (not read from the store)
    ranks: list[dict[str, Any]] = field(default_factory=list)

    @property
    def tokens_per_s(self) -> float:
        return self.generated_tokens / self.wall_s if self.wall_s > 0 else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {"requests": self.requests, "prompt_tokens": self.prompt_tokens, "completion_tokens": self.completion_tokens,
                "wall_s": round(self.wall_s, 3), "tokens_per_s": round(self.tokens_per_s, 2),
                "from_store": self.from_store, "requested": self.requests - self.from_store, "ranks": self.ranks}


class Generator:
    """Completes prompts with one model (M_n): ``session()`` opens its engine only when something is missing."""

    def __init__(self, cfg: StarConfig, session: Callable[[], Session], identity: dict[str, Any], *,
                 store: CompletionStore | None, shard: bool = True, show_progress: bool = True,
                 wrap: Callable[[Backend], Backend] | None = None,
                 failed_elsewhere: Callable[[], str | None] = lambda: None) -> None:
        self.cfg = cfg
        self.session = session
        self.identity = identity
        self.store = store
        self.shard = shard  # False: rank 0 completes everything, the other ranks read it from the store
        self.show_progress = show_progress
        self.wrap = wrap  # tests: a backend wrapper (counting, failing)
        self.failed_elsewhere = failed_elsewhere  # what another rank failed with, else None

    def requests(self, prompts: Sequence[str], max_tokens: Sequence[int], *, stop: Sequence[str], temperature: float,
                 n: int, seed: int) -> list[Request]:
        return [Request(prompt=p, max_tokens=int(m), temperature=temperature, stop=tuple(stop), seed=seed + i * n + j,
                        sample_index=j)
                for i, (p, m) in enumerate(zip(prompts, max_tokens, strict=True)) for j in range(n)]

    def complete(self, prompts: Sequence[str], max_tokens: Sequence[int], *, stop: Sequence[str] = (),
                 temperature: float = 0.0, n: int = 1, seed: int = 0, description: str = "generate",
                 stats: GenStats | None = None) -> list[list[Completion]]:
        """n completions per prompt (same order)."""
        reqs = self.requests(prompts, max_tokens, stop=stop, temperature=temperature, n=n, seed=seed)
        keys = [completion_key(self.identity, r) for r in reqs]
        t0 = time.perf_counter()
        world, rank = dist.world_size(), dist.rank()
        if self.shard:
            mine = list(range(rank, len(reqs), world))
        else:
            mine = list(range(len(reqs))) if rank == 0 else []
        local, counts = self._complete_mine(reqs, keys, mine, description)
        counts["rank"] = rank
        if self.shard:
            done: dict[int, Completion] = {}
            gathered = dist.all_gather((local, counts))
            for part, _ in gathered:
                done.update(part)
            all_counts = [c for _, c in gathered]
        else:
            done = local if rank == 0 else self._wait_in_store(reqs, keys)
            all_counts = [counts]
        check_same_weights(all_counts)
        out = [done[i] for i in range(len(reqs))]
        if stats is not None:
            stats.requests += len(out)
            stats.from_store += sum(c["from_store"] for c in all_counts)
            stats.generated_tokens += sum(c["generated_tokens"] for c in all_counts)
            stats.prompt_tokens += sum(c.prompt_tokens for c in out)
            stats.completion_tokens += sum(c.completion_tokens for c in out)
            stats.wall_s += time.perf_counter() - t0
            stats.ranks = _merge_counts(stats.ranks, all_counts)
        return [out[i * n:(i + 1) * n] for i in range(len(prompts))]

    def _complete_mine(self, reqs: list[Request], keys: list[str], mine: list[int],
                       description: str) -> tuple[dict[int, Completion], dict[str, Any]]:
        """This rank's requests: those in the store are read, the rest go to the engine through the one store-first
        runner (:class:`~thoughtsource.generation.runner.Runner`) in batches, each committed as it finishes."""
        hits = self.store.get_many(keys[i] for i in mine) if self.store is not None else {}
        done = {i: hits[keys[i]].to_completion() for i in mine if keys[i] in hits}
        missing = [i for i in mine if i not in done]
        counts: dict[str, Any] = {"prompts": len(mine), "from_store": len(done), "requested": len(missing), "generated_tokens": 0}
        if not missing:
            return done, counts
        # longest prompts first, so each batch holds prompts of similar length; results go back in order
        missing.sort(key=lambda i: -len(reqs[i].prompt))
        session = self.session()
        if session.weights is not None:
            counts["weights"] = session.weights
        backend = self.wrap(session.backend) if self.wrap is not None else session.backend
        t0 = time.perf_counter()

        with progress("tok/s", enabled=self.show_progress) as bar:
            no_rate: dict[str, Any] = {"tok/s": ""}  # a field whose name is no keyword
            task = bar.add_task(description, total=len(missing), **no_rate)

            def tick() -> None:
                elapsed = time.perf_counter() - t0
                bar.advance(task, 1)
                rate: dict[str, Any] = {"tok/s": f"{runner.generated_tokens / elapsed:.0f}" if elapsed else ""}
                bar.update(task, **rate)

            # the store records the engine's name; with the store off nothing is kept
            runner = Runner(backend, self.store if self.store is not None else NoStore(), self.identity,
                            batch_size=max(1, self.cfg.generation.batch_size), concurrency=1, on_done=tick,
                            allow_empty=True, backend_name=session.engine)

            async def _run() -> None:
                try:
                    rows = await runner.complete([reqs[i] for i in missing])
                    done.update((i, row.to_completion()) for i, (row, _) in zip(missing, rows, strict=True))
                finally:  # workers/connections belong to this event loop; the engine itself stays open
                    await backend.aclose()

            run_coroutine(_run)
        counts["generated_tokens"] = sum(done[i].completion_tokens for i in missing)
        return done, counts

    def _wait_in_store(self, reqs: list[Request], keys: list[str]) -> dict[int, Completion]:
        """Another rank completes these (an engine on rank 0 only): wait until the store holds them all.

        Gives up (:class:`RankWaitError`) when a rank reports a failure, or when no new completion arrives for
        ``generation.wait_timeout_s``: a rank 0 that died or hangs never leaves the others waiting for ever.
        """
        if self.store is None:
            raise RuntimeError("ranks other than 0 read rank 0's completions from the store: generation.store must be on")
        wanted = len(set(keys))
        timeout = self.cfg.generation.wait_timeout_s
        have, last_progress = -1, time.monotonic()
        while True:
            rows = self.store.get_many(keys)
            if len(rows) == wanted:
                return {i: rows[k].to_completion() for i, k in enumerate(keys)}
            if len(rows) > have:
                have, last_progress = len(rows), time.monotonic()
            if (why := self.failed_elsewhere()) is not None:
                raise RankWaitError(f"rank {dist.rank()} stops waiting for completions: {why}")
            if time.monotonic() - last_progress > timeout:
                raise RankWaitError(f"rank {dist.rank()} waited {timeout:g} s (generation.wait_timeout_s) without a new "
                                    f"completion in the store ({have} of {wanted}); is rank 0 alive?")
            time.sleep(min(STORE_POLL_S, timeout / 4))


def check_same_weights(counts: Sequence[dict[str, Any]]) -> None:
    """Every rank that generated reports the digest of its weights: they must be one (same on every rank)."""
    digests = {c["rank"]: c["weights"] for c in counts if c.get("weights")}
    if len(set(digests.values())) > 1:
        raise WeightsError(f"the ranks generate with different weights: {digests}; a model loaded inside a ZeRO-3/FSDP "
                           "init, or a rank that loaded another checkpoint")


def _merge_counts(before: list[dict[str, Any]], new: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per-rank counts summed over the calls of one step (the weights digest: the rank's latest)."""
    by_rank = {c["rank"]: dict(c) for c in before}
    for c in new:
        if c["rank"] in by_rank:
            for k in ("prompts", "from_store", "requested", "generated_tokens"):
                by_rank[c["rank"]][k] += c[k]
            if c.get("weights"):
                by_rank[c["rank"]]["weights"] = c["weights"]
        else:
            by_rank[c["rank"]] = dict(c)
    return [by_rank[r] for r in sorted(by_rank)]
