"""The files of a STaR run folder: where each step's artifact lives, written once for every rank, and whether a
finished step still stands.

Every artifact is written atomically (temp file + rename) by rank 0, between two barriers (:func:`write`).  A step
whose artifact exists is done, unless the model that would make it now is not the one that made it (another
fingerprint, device, dtype or server): then it is redone, and what its iteration built on it is deleted first
(:data:`BUILT_ON`), so a crash cannot leave it behind.  A rank that fails leaves ``OUT/logs/failed-rank<R>.txt``,
so a rank waiting for its completions stops at once.  :func:`rationales` exports an iteration's rationales as
ThoughtSource ``generated_cot`` (author "star").
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from ..io import atomic_write, read_json, write_json
from ..schema import Answer, GeneratedCot, Sample
from . import dist
from .config import StarConfig
from .tasks import Problem, Task

log = logging.getLogger(__name__)

AUTHOR = "star"
FAILED = "failed-rank"  # OUT/logs/failed-rank<R>.txt: rank R failed with this error

#: what an artifact of an iteration is built on: when it is redone, these go first
AFTER_DATASET = ("filter.json", "rationales.json", "train.jsonl", "trainer", "train_stats.json", "checkpoint", "test.json",
                 "dev.json", "metrics.json")
BUILT_ON: dict[str, tuple[str, ...]] = {
    "pseudo_labels.json": ("generate.json", "rationalize.json", *AFTER_DATASET),
    "generate.json": ("rationalize.json", *AFTER_DATASET),
    "rationalize.json": AFTER_DATASET,
    "test.json": ("metrics.json",),
    "dev.json": ("metrics.json",),
}


def iter_dir(out: Path, n: int) -> Path:
    return out / f"iter_{n}"


def checkpoint(out: Path, n: int) -> Path:
    return iter_dir(out, n) / "checkpoint"


def has_checkpoint(out: Path, n: int) -> bool:
    return (checkpoint(out, n) / "config.json").exists()


def write(path: Path, data: Any) -> None:
    """Rank 0 writes; every rank then has the file.

    The barrier before the write keeps the ranks' decisions alike: no rank can see the file before
    it has reached this write itself, so every "is this step done?" check gives the same answer on
    every rank and the ranks never pair different collectives.
    """
    dist.barrier()
    if dist.is_main():
        write_json(path, data)
        log.info("wrote %s (rank %d of %d)", path, dist.rank(), dist.world_size())
    dist.barrier()


def write_jsonl(path: Path, rows: list[dict[str, Any]]) -> None:
    """Rank 0 writes one JSON object a line, between the barriers of :func:`write`."""
    dist.barrier()
    if dist.is_main():
        with atomic_write(path) as fh:
            for r in rows:
                fh.write(json.dumps(r, ensure_ascii=False) + "\n")
    dist.barrier()


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


class RunFolder:
    """One run's folder: its config, the finished steps that still stand, and the ranks' failure markers.

    ``stale(data, n)`` says why a step's artifact was not produced by M_n as it is generated now (None: it was).
    """

    def __init__(self, out: Path, stale: Callable[[dict[str, Any], int], str | None]) -> None:
        self.out = out
        self.stale = stale
        self.redone_steps: list[tuple[int, str]] = []  # artifacts found but made by another model: computed again

    def prepare(self, cfg: StarConfig, *, resume: bool) -> None:
        """The folder with the run's config.json; an existing run is continued only with ``resume`` and a config whose
        result fields are unchanged."""
        cfg_path = self.out / "config.json"
        if cfg_path.exists():
            if not resume:
                raise ConfigError(f"{self.out} already holds a STaR run: pass --resume to continue it, or another --out")
            old = StarConfig.from_dict(read_json(cfg_path), path=str(cfg_path))
            a, b = old.result_fields(), cfg.result_fields()
            diffs = [f"{k}: {a.get(k)!r} -> {b.get(k)!r}" for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)]
            if diffs:
                raise ConfigError("the run's config changed; these options change results, so it cannot resume",
                                  path=str(cfg_path), problems=diffs)
        self.out.mkdir(parents=True, exist_ok=True)
        write(cfg_path, cfg.model_dump(mode="json"))

    def load_step(self, path: Path, n: int) -> dict[str, Any] | None:
        """A finished step's artifact, unless M_n as generated now did not produce it (then None: the step is redone,
        and what this iteration built on it is deleted first, so a crash cannot leave it behind)."""
        if not path.exists():
            return None
        data = read_json(path)
        if (why := self.stale(data, n)) is not None:
            log.warning("%s was %s: redoing it and what was built on it", path, why)
            self.redone_steps.append((n, path.stem))
            self.invalidate_after(path)
            return None
        return data

    def invalidate_after(self, path: Path) -> None:
        """Delete the artifacts of ``path``'s iteration that were built on it (rank 0; every rank waits)."""
        downstream = BUILT_ON.get(path.name, ())
        dist.barrier()
        if dist.is_main():
            for name in downstream:
                target = path.parent / name
                if target.is_dir():
                    shutil.rmtree(target, ignore_errors=True)
                elif target.exists():
                    target.unlink()
                    log.info("deleted %s: it was built on %s", target, path.name)
        dist.barrier()

    def iteration_current(self, n: int) -> bool:
        """Iteration n is finished and every generation step in it was made by the models as generated now."""
        d = iter_dir(self.out, n)
        if not (d / "metrics.json").exists():
            return False
        for name, model_n in (("pseudo_labels.json", n - 1), ("generate.json", n - 1), ("rationalize.json", n - 1),
                              ("test.json", n), ("dev.json", n)):
            if (d / name).exists() and self.stale(read_json(d / name), model_n) is not None:
                return False
        return True

    # ------------------------------------------------------------------ the ranks' failure markers
    def clear_failures(self) -> None:
        """Rank 0 deletes the markers an earlier attempt left (the ranks meet after this, at the first write)."""
        if dist.is_main():
            for old in self.out.glob(f"logs/{FAILED}*"):
                old.unlink()

    def report_failure(self, e: BaseException) -> None:
        """Tell the other ranks: a rank waiting for this one's completions stops at once (:meth:`failed_elsewhere`)."""
        try:
            marker = self.out / "logs" / f"{FAILED}{dist.rank()}.txt"
            marker.parent.mkdir(parents=True, exist_ok=True)
            with atomic_write(marker) as fh:
                fh.write(f"rank {dist.rank()} failed: {type(e).__name__}: {e}"[:2000])
        except OSError as err:  # reporting never hides the failure itself
            log.warning("could not record the failure for the other ranks: %s", err)

    def failed_elsewhere(self) -> str | None:
        """What another rank of this run failed with, if one did."""
        mine = f"{FAILED}{dist.rank()}.txt"
        for marker in sorted(self.out.glob(f"logs/{FAILED}*.txt")):
            if marker.name != mine:
                return marker.read_text(encoding="utf-8", errors="replace")
        return None


def rationales(task: Task, cfg: StarConfig, n: int, model: str, train: list[Problem], gen: dict[str, Any],
               rat: dict[str, Any] | None, kept: set[tuple[str, str]]) -> dict[str, Any]:
    """Every rationale of iteration n as ThoughtSource ``generated_cot`` (author "star"), in a ThoughtSource file."""
    date = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    by_id = {p.id: p for p in train}
    rat_rows = {r["id"]: r for r in (rat or {"rows": []})["rows"]}
    samples = []
    for row in gen["rows"]:
        p = by_id[row["id"]]
        cots = []
        for kind, r in (("generate", row), ("rationalize", rat_rows.get(row["id"]))):
            if r is None:
                continue
            rationalized = kind == "rationalize"
            # correct_answer is always judged against the gold answer; with pseudo-labels, the target's verdict
            # (what the filter used) is kept beside it as correct_vs_pseudo_label
            pseudo = {"correct_vs_pseudo_label": bool(r["correct"])} if "gold_answer" in p.meta else {}
            gold_ok = r.get("correct_vs_gold", r["correct"]) if pseudo else r["correct"]
            cots.append(GeneratedCot(
                id=f"star-iter{n}-{kind}", prompt_text=r["prompt"], cot=r["text"], author=AUTHOR, date=date,
                api_service=cfg.generation.engine_name, model=model,
                answers=[Answer(id=f"star-iter{n}-{kind}-strict", answer_extraction="strict", answer=r["predicted"],
                                correct_answer=bool(gold_ok), **pseudo)],
                star_iteration=n, rationalized=rationalized, kept_for_training=(p.id, kind) in kept,
            ))
        gold = p.meta.get("gold_answer", p.answer)
        extra = {"pseudo_label": p.meta["pseudo_label"]} if "pseudo_label" in p.meta else {}
        samples.append(Sample(id=p.id, question=p.question, type=p.type, choices=list(p.choices),  # type: ignore[arg-type]
                              answer=[gold], cot=[p.rationale] if p.rationale else [],
                              context=p.meta.get("context", ""), generated_cot=cots, **extra))
    return {task.name: {"train": [s.to_dict() for s in samples]}}
