"""One STaR config repeated over seeds: ``OUT/seed_<s>/`` per seed (run one after another, each
resumable), then the aggregate (:mod:`thoughtsource.star.analysis.seed_aggregate`: ``OUT/aggregate.json`` and
``OUT/plots/aggregate.png``)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from . import loop
from .analysis.seed_aggregate import write_aggregate
from .config import StarConfig

__all__ = ["Runner", "parse_seeds", "run_seeds", "seed_dir"]

log = logging.getLogger(__name__)

Runner = Callable[..., dict[str, Any]]


def parse_seeds(value: str) -> list[int]:
    """``"0,1,2"`` or ``"0-4"`` (or both, ``"0-2,7"``) → distinct seeds in the given order."""
    seeds: list[int] = []
    for part in value.split(","):
        part = part.strip()
        if not part:
            continue
        lo, sep, hi = part.partition("-")
        try:
            rng = range(int(lo), int(hi) + 1) if sep else [int(lo)]
        except ValueError:
            raise ConfigError(f"--seeds: expected e.g. 0,1,2 or 0-4, got {value!r}") from None
        seeds.extend(s for s in rng if s not in seeds)
    if not seeds:
        raise ConfigError(f"--seeds: no seed in {value!r}")
    return seeds


def seed_dir(out: str | Path, seed: int) -> Path:
    return Path(out) / f"seed_{seed}"


def run_seeds(cfg: StarConfig, out: str | Path, seeds: Sequence[int], *, resume: bool = False,
              show_progress: bool = True, runner: Runner | None = None) -> dict[str, Any]:
    """Run ``cfg`` once per seed into ``OUT/seed_<s>/`` (sequentially; ``resume`` continues each),
    then write and return the aggregate.  ``runner`` defaults to :func:`.loop.run_star`."""
    if runner is None:
        runner = loop.run_star  # looked up at the call: tests replace loop.run_star
    out = Path(out)
    summaries: dict[int, dict[str, Any]] = {}
    for s in seeds:
        log.info("seed %d: %s", s, seed_dir(out, s))
        summaries[s] = runner(cfg.model_copy(update={"seed": s}), seed_dir(out, s), resume=resume, show_progress=show_progress)
    return write_aggregate(out, summaries)
