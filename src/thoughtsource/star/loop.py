"""The STaR outer loop (Algorithm 1 of Zelikman et al., 2022), top to bottom.

    M_0 = M
    for n in 1..N:
        (r_i, y_i)         = M_{n-1}(x_i)                 generate     -> iter_n/generate.json
        (r_i^rat, y_i^rat) = M_{n-1}(add_hint(x_i, y_i))  rationalize  -> iter_n/rationalize.json   (wrong ones only)
        D_n     = {(x_i, r_i, y_i)     | y_i correct}
        D_n^rat = {(x_i, r_i^rat, y_i) | y_i wrong, y_i^rat correct}                -> iter_n/train.jsonl, rationales.json
        M_n     = train(M, D_n ∪ D_n^rat)                 from the ORIGINAL M  -> iter_n/checkpoint/
        test accuracy of M_n                                                        -> iter_n/test.json, metrics.json

``iter_0`` holds the few-shot evaluation of the base model.  Every step's artifact is written
atomically (temp file + rename); a step whose artifact exists is done, so ``resume=True`` continues
from the last complete step and never redoes a finished one.  Inside a step every completion is
committed to ``OUT/completions.sqlite`` (keyed by the model's fingerprint, the prompt and the
parameters) as its batch finishes, so a resumed step asks only for the completions it lacks.  Each
generation step records the model that produced it (engine, path, fingerprint, what a server
reported); a resumed run redoes a step whose fingerprint is not the one of its model now.

Engines (``generation.engine``, :mod:`.engines`): transformers or vLLM in process, or a server the
loop starts per checkpoint.  Under ``accelerate launch`` generation is sharded over the ranks
(:mod:`.dist`) and rank 0 alone writes every file.

Baselines in the same loop: ``baseline="fewshot"`` (iteration 0 only), ``baseline="direct"``
(fine-tune on question → answer, no rationales), ``rationalization=False`` (STaR without
rationalization).  ``pseudo_labels.mode="majority"``: the targets are the majority answers of k
sampled rationales (Appendix H), for questions without gold answers.
"""

from __future__ import annotations

import datetime as _dt
import json
import logging
import shutil
import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from ..io import atomic_write, read_json, write_json
from ..store import CompletionStore
from . import dist
from .config import StarConfig
from .engines import Session, model_fingerprint, open_session, store_identity
from .generation import Generator, GenStats
from .tasks import Problem, Task, TrainingRecord, get_task

log = logging.getLogger(__name__)

AUTHOR = "star"
_FAILED = "failed-rank"  # OUT/logs/failed-rank<R>.txt: rank R failed with this error


# --------------------------------------------------------------------------- small helpers
def _iter_dir(out: Path, n: int) -> Path:
    return out / f"iter_{n}"


def _checkpoint(out: Path, n: int) -> Path:
    return _iter_dir(out, n) / "checkpoint"


def _has_checkpoint(out: Path, n: int) -> bool:
    return (_checkpoint(out, n) / "config.json").exists()


def _write_jsonl(path: Path, rows: list[dict[str, Any]]) -> None:
    with atomic_write(path) as fh:
        for r in rows:
            fh.write(json.dumps(r, ensure_ascii=False) + "\n")


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def _acc(k: int, n: int) -> float | None:
    return round(k / n, 4) if n else None


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


#: what an artifact of an iteration is built on: when it is redone, these go first
_AFTER_DATASET = ("filter.json", "rationales.json", "train.jsonl", "trainer", "train_stats.json", "checkpoint", "test.json",
                  "dev.json", "metrics.json")
_BUILT_ON: dict[str, tuple[str, ...]] = {
    "pseudo_labels.json": ("generate.json", "rationalize.json", *_AFTER_DATASET),
    "generate.json": ("rationalize.json", *_AFTER_DATASET),
    "rationalize.json": _AFTER_DATASET,
    "test.json": ("metrics.json",),
    "dev.json": ("metrics.json",),
}


def _write(path: Path, data: Any) -> None:
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


class StarRun:
    """One run directory.  ``run()`` executes (or resumes) the whole loop."""

    def __init__(self, cfg: StarConfig, out: str | Path, *, resume: bool = False, show_progress: bool = True,
                 on_step: Callable[[int, str], None] | None = None, wrap_backend: Callable[[Any], Any] | None = None) -> None:
        self.cfg = cfg
        self.out = Path(out)
        self.resume = resume
        self.show_progress = show_progress
        self.on_step = on_step  # called after each finished step (tests, benchmarks)
        from ..embedded import check_model_source

        check_model_source(cfg.model)  # before the run folder is made
        if self.out.exists() and not self.out.is_dir():
            raise ConfigError(f"{self.out}: is a file; --out is the run's folder")
        self.task: Task = get_task(cfg.task, **cfg.task_options)
        self._base_path: str | None = None
        self.done_steps: list[tuple[int, str]] = []  # steps computed (not loaded) in this process
        self.redone_steps: list[tuple[int, str]] = []  # artifacts found but made by another model: computed again
        self.wrap_backend = wrap_backend  # tests: wraps each engine's backend (counting, failing)
        self._session: Session | None = None  # the engine holding one model, kept across that model's steps
        self._store: CompletionStore | None = None
        self._fingerprints: dict[str, str] = {}

    # ------------------------------------------------------------------ set-up
    def _prepare_out(self) -> None:
        cfg_path = self.out / "config.json"
        if cfg_path.exists():
            if not self.resume:
                raise ConfigError(f"{self.out} already holds a STaR run: pass --resume to continue it, or another --out")
            old = StarConfig.from_dict(read_json(cfg_path), path=str(cfg_path))
            a, b = old.result_fields(), self.cfg.result_fields()
            diffs = [f"{k}: {a.get(k)!r} -> {b.get(k)!r}" for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)]
            if diffs:
                raise ConfigError("the run's config changed; these options change results, so it cannot resume",
                                  path=str(cfg_path), problems=diffs)
        self.out.mkdir(parents=True, exist_ok=True)
        _write(cfg_path, self.cfg.model_dump(mode="json"))

    @property
    def base_path(self) -> str:
        if self._base_path is None:
            from ..embedded import resolve_model

            self._base_path = resolve_model(self.cfg.model)
        return self._base_path

    def _model_path(self, n: int) -> str:
        """Weights of M_n: the base model for n == 0 (and for every 'fewshot' evaluation)."""
        return self.base_path if n == 0 else str(_checkpoint(self.out, n))

    # ------------------------------------------------------------------ engines
    def _fingerprint(self, n: int) -> str | None:
        """M_n's fingerprint (hash of its files); None when its checkpoint was deleted (keep_checkpoints: false)."""
        path = self._model_path(n)
        if n > 0 and not _has_checkpoint(self.out, n):
            return None
        if path not in self._fingerprints:
            self._fingerprints[path] = model_fingerprint(path)
        return self._fingerprints[path]

    def _identity(self, n: int) -> dict[str, Any] | None:
        """What produced (or would produce) M_n's completions: the store key's identity (weights, engine, resolved
        device and dtype, a server's command and environment)."""
        fp = self._fingerprint(n)
        return None if fp is None else store_identity(self.cfg, fp)

    def _model_info(self, n: int) -> dict[str, Any]:
        if self._session is not None and self._session.n == n:
            info = self._session.describe()
        else:
            info = {"engine": self.cfg.generation.engine_name, "path": self._model_path(n), "fingerprint": self._fingerprint(n)}
        return {**info, "identity": self._identity(n)}

    def _session_for(self, n: int) -> Session:
        """The engine on M_n: the open one if it holds M_n, else the open one is closed and M_n started."""
        if self._session is not None and self._session.n == n:
            return self._session
        self._close_session()
        fp = self._fingerprint(n)
        assert fp is not None, f"M_{n} has no checkpoint"
        # the transformers engine loads M_n in this process (whole, outside any ZeRO-3/FSDP init: .loading);
        # vllm and server load it themselves, from the checkpoint
        self._session = open_session(self.cfg, n, self._model_path(n), fp, log_dir=self.out / "logs")
        return self._session

    def _close_session(self) -> None:
        session, self._session = self._session, None
        if session is not None:
            session.close()

    def _open_store(self) -> None:
        """OUT/completions.sqlite: rank 0 creates it (WAL, migrations) before the other ranks open it."""
        if self._store is None and (self.cfg.generation.store or dist.world_size() > 1):
            if dist.is_main():
                self._store = CompletionStore(self.out / "completions.sqlite")
            dist.barrier()
            if not dist.is_main():
                self._store = CompletionStore(self.out / "completions.sqlite")

    def _generator(self, n: int) -> Generator:
        fp = self._fingerprint(n)
        assert fp is not None, f"M_{n} has no checkpoint"
        shard = self.cfg.generation.engine_name == "transformers"  # vllm and servers run on rank 0 only
        return Generator(self.cfg, lambda: self._session_for(n), store_identity(self.cfg, fp), store=self._store, shard=shard,
                         show_progress=self.show_progress, wrap=self.wrap_backend, failed_elsewhere=self._failed_elsewhere)

    def _stale(self, data: dict[str, Any], n: int) -> str | None:
        """Why a step's artifact was not produced by M_n as it is generated now (None: it was)."""
        model = data.get("model") or {}
        recorded, expected = model.get("fingerprint"), self._fingerprint(n)
        if recorded is not None and expected is not None and recorded != expected:
            return f"produced by {recorded}, not by M_{n} ({expected})"
        identity, now = model.get("identity"), self._identity(n)
        if identity is not None and now is not None and identity != now:
            diffs = sorted(k for k in set(identity) | set(now) if identity.get(k) != now.get(k))
            return f"generated with other {', '.join(diffs)} ({', '.join(f'{identity.get(k)!r} -> {now.get(k)!r}' for k in diffs)})"
        return None

    def _load_step(self, path: Path, n: int) -> dict[str, Any] | None:
        """A finished step's artifact, unless M_n as generated now did not produce it (then None: the step is redone,
        and what this iteration built on it is deleted first, so a crash cannot leave it behind)."""
        if not path.exists():
            return None
        data = read_json(path)
        if (why := self._stale(data, n)) is not None:
            log.warning("%s was %s: redoing it and what was built on it", path, why)
            self.redone_steps.append((n, path.stem))
            self._invalidate_after(path)
            return None
        return data

    def _invalidate_after(self, path: Path) -> None:
        """Delete the artifacts of ``path``'s iteration that were built on it (rank 0; every rank waits)."""
        downstream = _BUILT_ON.get(path.name, ())
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

    def _iteration_current(self, n: int, d: Path) -> bool:
        """Iteration n is finished and every generation step in it was made by the models as generated now."""
        if not (d / "metrics.json").exists():
            return False
        for name, model_n in (("pseudo_labels.json", n - 1), ("generate.json", n - 1), ("rationalize.json", n - 1),
                              ("test.json", n), ("dev.json", n)):
            if (d / name).exists() and self._stale(read_json(d / name), model_n) is not None:
                return False
        return True

    def _filter_path(self, n: int) -> Path:
        return _iter_dir(self.out, n) / "filter.json"

    def _step_done(self, n: int, step: str) -> None:
        self.done_steps.append((n, step))
        log.info("iteration %d: %s done", n, step)
        if self.on_step is not None:
            self.on_step(n, step)

    # ------------------------------------------------------------------ prompts
    @property
    def direct(self) -> bool:
        return self.cfg.baseline == "direct"

    def _exemplars(self, n: int) -> list[Problem]:
        if self.cfg.fewshot_k == 0 or (n > 0 and not self.cfg.fewshot_after_training):
            return []
        return self.task.exemplars(self.cfg.fewshot_k)

    def _complete(self, gen: Generator, problems: list[Problem], n: int, *, hint: bool, description: str,
                  stats: GenStats, temperature: float | None = None, samples: int = 1) -> list[list[str]]:
        ex = self._exemplars(n)
        prompts = [self.task.prompt(p, ex, hint=hint, direct=self.direct) for p in problems]
        g = self.cfg.generation
        max_tokens = [g.max_new_tokens or self.task.max_new_tokens(p, direct=self.direct) for p in problems]
        temp = g.temperature if temperature is None else temperature
        outs = gen.complete(prompts, max_tokens, stop=self.task.stop, temperature=temp, n=samples,
                            seed=self.cfg.seed * 1_000_003 + n, description=description, stats=stats)
        return [[self.task.trim(c.text) for c in cs] for cs in outs]

    def _judge(self, p: Problem, text: str) -> dict[str, Any]:
        return {"predicted": self.task.predicted_answer(p, text, direct=self.direct),
                "correct": bool(self.task.is_correct(p, text, direct=self.direct))}

    def _same_answer(self, p: Problem, label: str) -> bool:
        """Whether a (pseudo-)label equals the gold answer, judged by the task's own strict check."""
        return bool(self.task.is_correct(p, self.task.completion(p.with_answer(label), None), direct=True))

    # ------------------------------------------------------------------ steps
    def _pseudo_labels(self, n: int, d: Path, train: list[Problem]) -> list[Problem]:
        """Appendix H: the majority answer of k sampled rationales replaces the gold answer."""
        path = d / "pseudo_labels.json"
        pl = self.cfg.pseudo_labels
        if self._load_step(path, n - 1) is None:
            stats = GenStats()
            t0 = time.perf_counter()
            texts = self._complete(self._generator(n - 1), train, n - 1, hint=False, description=f"iter {n}: sample x{pl.k}",
                                   stats=stats, temperature=pl.temperature, samples=pl.k)
            rows = []
            for p, samples in zip(train, texts, strict=True):
                preds = [self.task.predicted_answer(p, t, direct=self.direct) for t in samples]
                votes = Counter(x for x in preds if x is not None)
                # deterministic tie-break: most votes, then first seen
                label = max(votes, key=lambda a: (votes[a], -preds.index(a))) if votes else None
                rows.append({"id": p.id, "label": label, "votes": dict(votes), "gold": p.answer,
                             "label_correct": label is not None and self._same_answer(p, label)})
            _write(path, {"rows": rows, "stats": stats.to_dict(), "wall_s": round(time.perf_counter() - t0, 3),
                          "model": self._model_info(n - 1), "world_size": dist.world_size()})
            self._step_done(n, "pseudo_labels")
        rows = read_json(path)["rows"]
        labels = {r["id"]: r["label"] for r in rows}
        # the target becomes the label; the gold answer stays beside it (meta), for artifacts and metrics only
        return [replace(p, answer=str(labels[p.id]), meta={**p.meta, "gold_answer": p.answer, "pseudo_label": str(labels[p.id])})
                for p in train if labels.get(p.id) is not None]

    def _gold_correct(self, p: Problem, text: str) -> bool | None:
        """For a pseudo-labelled problem, whether ``text`` reaches the GOLD answer (None without pseudo-labels)."""
        if "gold_answer" not in p.meta:
            return None
        return bool(self.task.is_correct(p.with_answer(p.meta["gold_answer"]), text, direct=self.direct))

    def _generate(self, n: int, d: Path, train: list[Problem], *, hint: bool) -> dict[str, Any]:
        name = "rationalize" if hint else "generate"
        path = d / f"{name}.json"
        if (done := self._load_step(path, n - 1)) is not None:
            return done
        stats = GenStats()
        t0 = time.perf_counter()
        texts = self._complete(self._generator(n - 1), train, n - 1, hint=hint, description=f"iter {n}: {name}", stats=stats)
        ex = self._exemplars(n - 1)
        rows = []
        for p, (text,) in zip(train, texts, strict=True):
            row = {"id": p.id, "answer": p.answer, "prompt": self.task.prompt(p, ex, hint=hint, direct=self.direct),
                   "text": text, **self._judge(p, text)}
            if "gold_answer" in p.meta:  # "answer"/"correct" are the pseudo-label target; the gold ones beside them
                row.update(target="pseudo_label", gold_answer=p.meta["gold_answer"], correct_vs_gold=self._gold_correct(p, text))
            rows.append(row)
        result = {"rows": rows, "stats": stats.to_dict(), "wall_s": round(time.perf_counter() - t0, 3),
                  "model": self._model_info(n - 1), "world_size": dist.world_size()}
        _write(path, result)
        self._step_done(n, name)
        return result

    def _dataset(self, n: int, d: Path, train: list[Problem], gen: dict[str, Any] | None,
                 rat: dict[str, Any] | None) -> list[TrainingRecord]:
        """D_n ∪ D_n^rat: the answer filter (the paper), or also the task's rationale check (``filter: verified``).

        The task's check runs on every answer-correct rationale whichever filter is on, so each run
        records how many kept rationales a verified filter would reject (``filter.json``).
        """
        path = d / "train.jsonl"
        if path.exists():
            return [TrainingRecord(**r) for r in _read_jsonl(path)]
        records: list[TrainingRecord] = []
        train_ex = self.task.exemplars(self.cfg.fewshot_k) if self.cfg.train_with_fewshot and self.cfg.fewshot_k else []
        if self.direct:
            records = [self.task.training_record(p, None, exemplars=train_ex) for p in train]
        else:
            assert gen is not None
            by_id = {p.id: p for p in train}
            rat_rows = {r["id"]: r for r in (rat or {"rows": []})["rows"]}
            report: dict[str, Any] = {"name": self.cfg.filter, "generate": {"answer_correct": 0, "rejected": 0},
                                      "rationalize": {"answer_correct": 0, "rejected": 0}, "examples": []}
            kept: set[tuple[str, str]] = set()
            for row in gen["rows"]:
                p = by_id[row["id"]]
                for kind, r in (("generate", row), ("rationalize", rat_rows.get(row["id"]))):
                    if r is None or not r["correct"]:
                        continue
                    reason = self.task.verify(p, r["text"], rationalized=kind == "rationalize")
                    report[kind]["answer_correct"] += 1
                    if reason is not None:
                        report[kind]["rejected"] += 1
                        if len(report["examples"]) < 8:
                            report["examples"].append({"id": p.id, "kind": kind, "reason": reason, "text": r["text"]})
                    if reason is None or self.cfg.filter == "answer":
                        records.append(self.task.training_record(p, r["text"], rationalized=kind == "rationalize",
                                                                 exemplars=train_ex))
                        kept.add((p.id, kind))
                    break  # rationalization only ran on problems answered wrongly
            _write(d / "filter.json", report)
            self._write_rationales(n, d, train, gen, rat, kept)
        dist.barrier()  # as in _write
        if dist.is_main():
            _write_jsonl(path, [r.to_dict() for r in records])
        dist.barrier()
        self._step_done(n, "dataset")
        return records

    def _write_rationales(self, n: int, d: Path, train: list[Problem], gen: dict[str, Any], rat: dict[str, Any] | None,
                          kept: set[tuple[str, str]]) -> None:
        """Every rationale of this iteration as ThoughtSource ``generated_cot`` (author "star")."""
        from ..schema import Answer, GeneratedCot, Sample

        model = self._model_path(n - 1)
        date = _now()
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
                    api_service=self.cfg.generation.engine_name, model=model,
                    answers=[Answer(id=f"star-iter{n}-{kind}-strict", answer_extraction="strict", answer=r["predicted"],
                                    correct_answer=bool(gold_ok), **pseudo)],
                    star_iteration=n, rationalized=rationalized, kept_for_training=(p.id, kind) in kept,
                ))
            gold = p.meta.get("gold_answer", p.answer)
            extra = {"pseudo_label": p.meta["pseudo_label"]} if "pseudo_label" in p.meta else {}
            samples.append(Sample(id=p.id, question=p.question, type=p.type, choices=list(p.choices),  # type: ignore[arg-type]
                                  answer=[gold], cot=[p.rationale] if p.rationale else [],
                                  context=p.meta.get("context", ""), generated_cot=cots, **extra))
        _write(d / "rationales.json", {self.task.name: {"train": [s.to_dict() for s in samples]}})

    def _train(self, n: int, d: Path, records: list[TrainingRecord]) -> dict[str, Any]:
        path = d / "train_stats.json"
        if path.exists() and _has_checkpoint(self.out, n):
            return read_json(path)
        from .train import save_checkpoint, train

        steps = self.cfg.steps.steps(n)
        t0 = time.perf_counter()
        if not records:
            log.warning("iteration %d: no correct rationales to train on; M_%d = the base model", n, n)
            if dist.is_main():  # one process reads and writes it; the others only wait
                from ..embedded import load_model
                from .loading import outside_sharded_init

                with outside_sharded_init():
                    model, tok = load_model(self.base_path)
                save_checkpoint(model, tok, _checkpoint(self.out, n))
                del model
            dist.barrier()
            stats: dict[str, Any] = {"steps": 0, "examples": 0, "note": "no training data: the base model is kept"}
        else:
            # the checkpoint is written whole (gathered under ZeRO-3/FSDP) by rank 0; no process keeps the trained
            # model: generation loads the checkpoint where it runs (every rank for transformers, none for a server)
            _, _, stats = train(self.cfg, self.base_path, records, steps, d / "trainer", checkpoint=_checkpoint(self.out, n),
                                description=f"iter {n}: train", show_progress=self.show_progress,
                                metrics_path=self.out / "metrics.jsonl",
                                metrics_extra={"iteration": n}, run_name=f"{self.out.name}-iter{n}")
        _free_memory()  # the trainer's memory goes back before an engine starts
        if dist.is_main():
            shutil.rmtree(d / "trainer", ignore_errors=True)
        stats["wall_s"] = round(time.perf_counter() - t0, 3)
        _write(path, stats)
        if not self.cfg.keep_checkpoints and n > 1:
            shutil.rmtree(_checkpoint(self.out, n - 1), ignore_errors=True)
        self._step_done(n, "train")
        return stats

    def _evaluate(self, n: int, d: Path, test: list[Problem], name: str = "test") -> dict[str, Any]:
        path = d / f"{name}.json"
        if (done := self._load_step(path, n)) is not None:
            return done
        stats = GenStats()
        t0 = time.perf_counter()
        texts = self._complete(self._generator(n), test, n, hint=False, description=f"iter {n}: {name}", stats=stats)
        rows = [{"id": p.id, "group": self.task.groups(p), "answer": p.answer, "text": t, **self._judge(p, t)}
                for p, (t,) in zip(test, texts, strict=True)]
        result = {"rows": rows, "stats": stats.to_dict(), "wall_s": round(time.perf_counter() - t0, 3),
                  "model": self._model_info(n), "world_size": dist.world_size()}
        _write(path, result)
        self._step_done(n, name)
        return result

    # ------------------------------------------------------------------ metrics
    def _metrics(self, n: int, train: list[Problem], gen: dict[str, Any] | None, rat: dict[str, Any] | None,
                 records: list[TrainingRecord] | None, train_stats: dict[str, Any] | None, test: dict[str, Any],
                 dev: dict[str, Any] | None = None) -> dict[str, Any]:
        m: dict[str, Any] = {"iteration": n, "model": self._model_path(n), "seed": self.cfg.seed, "timings_s": {}}
        for name, res in (("test", test), ("dev", dev)):
            if res is None:
                continue
            rows = res["rows"]
            groups: dict[str, list[bool]] = {}
            for r in rows:
                if r["group"] is not None:
                    groups.setdefault(r["group"], []).append(r["correct"])
            k = sum(r["correct"] for r in rows)
            m.update({
                f"{name}_n": len(rows),
                f"{name}_correct": k,
                f"{name}_accuracy": _acc(k, len(rows)),
                f"{name}_accuracy_by_group": {g: _acc(sum(v), len(v)) for g, v in sorted(groups.items())},
                f"{name}_correct_by_group": {g: [sum(v), len(v)] for g, v in sorted(groups.items())},
            })
            m["timings_s"][name] = res["wall_s"]
        if n > 0:
            correct = sum(r["correct"] for r in gen["rows"]) if gen else None
            rat_ok = sum(r["correct"] for r in rat["rows"]) if rat else 0
            m.update({
                "train_n": len(train),
                "train_correct_before_rationalization": correct,
                "train_accuracy_before_rationalization": _acc(correct, len(train)) if correct is not None else None,
                "rationalization_attempted": len(rat["rows"]) if rat else 0,
                "rationalization_correct": rat_ok,
                "rationalization_acceptance": _acc(rat_ok, len(rat["rows"])) if rat else None,
                "train_accuracy_after_rationalization": _acc((correct or 0) + rat_ok, len(train)) if correct is not None else None,
                "kept": len(records or []),
                "filter": read_json(self._filter_path(n)) if self._filter_path(n).exists() else None,
                "kept_rationalized": sum(r.rationalized for r in records or []),
                "steps": (train_stats or {}).get("steps"),
                "train_loss": (train_stats or {}).get("train_loss"),
            })
            m["timings_s"].update({"generate": gen["wall_s"] if gen else 0.0, "rationalize": rat["wall_s"] if rat else 0.0,
                                   "train": (train_stats or {}).get("wall_s", 0.0)})
            m["generation_tokens_per_s"] = gen["stats"]["tokens_per_s"] if gen else None
            m["train_target"] = "pseudo_label" if train and "gold_answer" in train[0].meta else "gold"
            if m["train_target"] == "pseudo_label" and gen:
                # the train_* accuracies above are against the pseudo-labels (what the filter kept); these against gold
                gold_gen = sum(bool(r.get("correct_vs_gold")) for r in gen["rows"])
                gold_rat = sum(bool(r.get("correct_vs_gold")) for r in (rat or {"rows": []})["rows"])
                m.update({"train_correct_vs_gold_before_rationalization": gold_gen,
                          "train_accuracy_vs_gold_before_rationalization": _acc(gold_gen, len(train)),
                          "rationalization_correct_vs_gold": gold_rat})
            if gen and self.task.groups(train[0]) is not None:
                by_g: dict[str, list[int]] = {}
                gmap = {p.id: self.task.groups(p) for p in train}
                rmap = {r["id"]: r["correct"] for r in (rat or {"rows": []})["rows"]}
                for r in gen["rows"]:
                    v = by_g.setdefault(gmap[r["id"]], [0, 0, 0])
                    v[0] += 1
                    v[1] += r["correct"]
                    v[2] += bool(rmap.get(r["id"]))
                m["train_by_group"] = {g: {"n": v[0], "correct": v[1], "rationalized_correct": v[2]} for g, v in sorted(by_g.items())}
        return m

    # ------------------------------------------------------------------ the loop
    def run(self) -> dict[str, Any]:
        dist.init()
        if dist.is_main():
            for old in self.out.glob(f"logs/{_FAILED}*"):  # left by an earlier attempt; the ranks meet after this
                old.unlink()
        try:
            self._prepare_out()
            self._open_store()
            return self._run()
        except BaseException as e:
            self._report_failure(e)
            raise
        finally:
            self._close_session()
            if self._store is not None:
                self._store.close()
                self._store = None

    def _run(self) -> dict[str, Any]:
        cfg = self.cfg
        if cfg.generation.threads:
            import torch

            torch.set_num_threads(cfg.generation.threads)
        test = self.task.load("test", cfg.seed)
        dev = self.task.load("dev", cfg.seed)
        all_metrics: list[dict[str, Any]] = []

        d0 = _iter_dir(self.out, 0)
        if not self._iteration_current(0, d0):
            dev0 = self._evaluate(0, d0, dev, "dev") if dev else None
            m0 = self._metrics(0, [], None, None, None, None, self._evaluate(0, d0, test), dev0)
            _write(d0 / "metrics.json", m0)
        all_metrics.append(read_json(d0 / "metrics.json"))
        if not (self.out / "metrics.json").exists():  # the summary exists from the first finished step on
            self._write_summary(all_metrics)

        n_iter = 0 if cfg.baseline == "fewshot" else cfg.iterations
        for n in range(1, n_iter + 1):
            d = _iter_dir(self.out, n)
            if self._iteration_current(n, d):
                all_metrics.append(read_json(d / "metrics.json"))
                continue
            d.mkdir(parents=True, exist_ok=True)
            train = self.task.train_problems(n, cfg.seed)
            if cfg.pseudo_labels.mode == "majority":
                train = self._pseudo_labels(n, d, train)
            gen = rat = None
            if not self.direct:
                gen = self._generate(n, d, train, hint=False)
                if cfg.rationalization:
                    by_id = {p.id: p for p in train}
                    wrong = [by_id[r["id"]] for r in gen["rows"] if not r["correct"]]
                    rat = self._generate(n, d, wrong, hint=True)
            records = self._dataset(n, d, train, gen, rat)
            self._close_session()  # an engine's GPU memory goes back before training
            train_stats = self._train(n, d, records)
            self._fingerprints.pop(self._model_path(n), None)  # M_n's files are new
            test_res = self._evaluate(n, d, test)
            dev_res = self._evaluate(n, d, dev, "dev") if dev else None
            m = self._metrics(n, train, gen, rat, records, train_stats, test_res, dev_res)
            if cfg.pseudo_labels.mode == "majority":
                rows = read_json(d / "pseudo_labels.json")["rows"]
                m["pseudo_labels"] = {"labelled": sum(r["label"] is not None for r in rows), "n": len(rows),
                                      "label_accuracy": _acc(sum(bool(r["label_correct"]) for r in rows), len(rows))}
            _write(d / "metrics.json", m)
            all_metrics.append(m)
            self._write_summary(all_metrics)
        summary = self._write_summary(all_metrics)
        return summary

    def _report_failure(self, e: BaseException) -> None:
        """Tell the other ranks: a rank waiting for this one's completions stops at once (:meth:`_failed_elsewhere`)."""
        try:
            marker = self.out / "logs" / f"{_FAILED}{dist.rank()}.txt"
            marker.parent.mkdir(parents=True, exist_ok=True)
            with atomic_write(marker) as fh:
                fh.write(f"rank {dist.rank()} failed: {type(e).__name__}: {e}"[:2000])
        except OSError as err:  # reporting never hides the failure itself
            log.warning("could not record the failure for the other ranks: %s", err)

    def _failed_elsewhere(self) -> str | None:
        """What another rank of this run failed with, if one did."""
        mine = f"{_FAILED}{dist.rank()}.txt"
        for marker in sorted(self.out.glob(f"logs/{_FAILED}*.txt")):
            if marker.name != mine:
                return marker.read_text(encoding="utf-8", errors="replace")
        return None

    def _write_summary(self, all_metrics: list[dict[str, Any]]) -> dict[str, Any]:
        summary = {"config": self.cfg.model_dump(mode="json"), "iterations": all_metrics}
        _write(self.out / "metrics.json", summary)
        if not dist.is_main():
            return summary
        try:
            from .plots import plot_run

            plot_run(summary, self.out)
        except Exception as e:  # plotting never breaks a run
            log.warning("plots not written: %s", e)
        return summary


def _free_memory() -> None:
    import gc

    gc.collect()
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_available():
        torch.cuda.empty_cache()


def run_star(cfg: StarConfig, out: str | Path, *, resume: bool = False, show_progress: bool = True) -> dict[str, Any]:
    """Run (or resume) STaR; returns ``{"config": ..., "iterations": [metrics per iteration]}``."""
    return StarRun(cfg, out, resume=resume, show_progress=show_progress).run()
