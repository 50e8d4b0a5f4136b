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

:class:`StarRun` is the algorithm; the models, their engine and the store are :mod:`.models`'; the run
folder (step files, what a redone step invalidates, the ranks' failure markers, the rationales export)
is :mod:`.artifacts`'; the metrics and the summary are :mod:`.metrics`'.

Baselines in the same loop: ``baseline="fewshot"`` (iteration 0 only), ``baseline="direct"``
(fine-tune on question → answer, no rationales), ``rationalization=False`` (STaR without
rationalization), ``baseline="gold"`` (fine-tune on the dataset's reference rationales, an upper bound),
``sampling.k > 1`` (k rationales per problem at ``sampling.temperature``, each correct distinct one kept, as
ReST-EM does), ``sampling.accumulate`` (the kept rationales accumulated across iterations, each iteration
trained from the base on their union: :mod:`.accumulate`).  Every arm that trains runs ``steps.steps(n)``
optimizer steps of ``batch_size`` examples at iteration n whatever its data's size (matched compute).  ``pseudo_labels.mode="majority"``: the targets are the majority answers of k
sampled rationales (Appendix H), for questions without gold answers.
"""

from __future__ import annotations

import logging
import shutil
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from ..backends.vllm import free_memory
from ..embedded import check_model_source, load_model
from ..errors import ConfigError
from ..io import read_json
from . import dist
from .accumulate import accumulate, file_sha256
from .artifacts import RunFolder, checkpoint, has_checkpoint, iter_dir, rationales, read_jsonl, write, write_jsonl
from .config import StarConfig
from .filtering import filter_rationales
from .generation import Generator, GenStats
from .loading import outside_sharded_init
from .metrics import IterationResults, iteration_metrics, pseudo_label_metrics, write_summary
from .models import RunModels
from .tasks import Problem, Task, TrainingRecord, get_task
from .train import save_checkpoint, train

log = logging.getLogger(__name__)


def exemplars(cfg: StarConfig, task: Task, n: int) -> list[Problem]:
    """The few-shot exemplars in M_n's prompts (none for a trained model unless ``fewshot_after_training``)."""
    if cfg.fewshot_k == 0 or (n > 0 and not cfg.fewshot_after_training):
        return []
    return task.exemplars(cfg.fewshot_k)


def pseudo_labelled(train: list[Problem], rows: list[dict[str, Any]]) -> list[Problem]:
    """The training problems with a majority label (``pseudo_labels.json``'s rows), the label as their target."""
    labels = {r["id"]: r["label"] for r in rows}
    # the target becomes the label; the gold answer stays beside it (meta), for artifacts and metrics only
    return [replace(p, answer=str(labels[p.id]), meta={**p.meta, "gold_answer": p.answer, "pseudo_label": str(labels[p.id])})
            for p in train if labels.get(p.id) is not None]


class StarRun:
    """One run directory.  ``run()`` executes (or resumes) the whole loop."""

    def __init__(self, cfg: StarConfig, out: str | Path, *, resume: bool = False, show_progress: bool = True,
                 on_step: Callable[[int, str], None] | None = None, wrap_backend: Callable[[Any], Any] | None = None) -> None:
        self.cfg = cfg
        self.out = Path(out)
        self.resume = resume
        self.show_progress = show_progress
        self.on_step = on_step  # called after each finished step (tests, benchmarks)
        check_model_source(cfg.model)  # before the run folder is made
        if self.out.exists() and not self.out.is_dir():
            raise ConfigError(f"{self.out}: is a file; --out is the run's folder")
        self.task: Task = get_task(cfg.task, **cfg.task_options)
        self.done_steps: list[tuple[int, str]] = []  # steps computed (not loaded) in this process
        self.models = RunModels(cfg, self.out, show_progress=show_progress, wrap_backend=wrap_backend,
                                failed_elsewhere=lambda: self.folder.failed_elsewhere(),
                                calculator_rounds=self.task.calculator_rounds)
        self.folder = RunFolder(self.out, self.models.stale)
        self.redone_steps = self.folder.redone_steps  # artifacts found but made by another model: computed again

    @property
    def base_path(self) -> str:
        return self.models.base_path

    def _step_done(self, n: int, step: str) -> None:
        self.done_steps.append((n, step))
        log.info("iteration %d: %s done", n, step)
        if self.on_step is not None:
            self.on_step(n, step)

    # ------------------------------------------------------------------ the loop
    def run(self) -> dict[str, Any]:
        dist.init()
        self.folder.clear_failures()
        try:
            self.folder.prepare(self.cfg, resume=self.resume)
            self.models.open_store()
            return self._run()
        except BaseException as e:
            self.folder.report_failure(e)
            raise
        finally:
            self.models.close()

    def _run(self) -> dict[str, Any]:
        cfg = self.cfg
        if cfg.generation.threads:
            import torch

            torch.set_num_threads(cfg.generation.threads)
        test = self.task.load("test", cfg.seed)
        dev = self.task.load("dev", cfg.seed)
        all_metrics: list[dict[str, Any]] = []

        d0 = iter_dir(self.out, 0)
        if not self.folder.iteration_current(0):
            dev0 = self._evaluate(0, d0, dev, "dev") if dev else None
            m0 = iteration_metrics(cfg, self.task, IterationResults(n=0, model=self.models.path(0), test=self._evaluate(0, d0, test),
                                                                    dev=dev0))
            write(d0 / "metrics.json", m0)
        all_metrics.append(read_json(d0 / "metrics.json"))
        if not (self.out / "metrics.json").exists():  # the summary exists from the first finished step on
            write_summary(cfg, self.out, all_metrics)

        n_iter = 0 if cfg.baseline == "fewshot" else cfg.iterations
        for n in range(1, n_iter + 1):
            d = iter_dir(self.out, n)
            if self.folder.iteration_current(n):
                all_metrics.append(read_json(d / "metrics.json"))
                continue
            d.mkdir(parents=True, exist_ok=True)
            train = self.task.train_problems(n, cfg.seed)
            if cfg.pseudo_labels.mode == "majority":
                train = self._pseudo_labels(n, d, train)
            gen = rat = None
            if cfg.baseline == "star":
                gen = self._generate(n, d, train, hint=False)
                if cfg.rationalization:
                    by_id = {p.id: p for p in train}
                    wrong = [by_id[r["id"]] for r in gen["rows"] if not r["correct"]]
                    rat = self._generate(n, d, wrong, hint=True)
            records = self._dataset(n, d, train, gen, rat)
            self.models.close_session()  # an engine's GPU memory goes back before training
            train_stats = self._train(n, d, records)
            self.models.forget(n)  # M_n's files are new
            test_res = self._evaluate(n, d, test)
            dev_res = self._evaluate(n, d, dev, "dev") if dev else None
            filter_report = read_json(d / "filter.json") if (d / "filter.json").exists() else None
            m = iteration_metrics(cfg, self.task, IterationResults(n=n, model=self.models.path(n), test=test_res, dev=dev_res, train=train,
                                                                   gen=gen, rat=rat, records=records, train_stats=train_stats,
                                                                   filter_report=filter_report))
            if cfg.pseudo_labels.mode == "majority":
                m["pseudo_labels"] = pseudo_label_metrics(read_json(d / "pseudo_labels.json")["rows"])
            write(d / "metrics.json", m)
            all_metrics.append(m)
            write_summary(cfg, self.out, all_metrics)
        return write_summary(cfg, self.out, all_metrics)

    # ------------------------------------------------------------------ prompts
    @property
    def direct(self) -> bool:
        return self.cfg.baseline == "direct"

    def _exemplars(self, n: int) -> list[Problem]:
        return exemplars(self.cfg, self.task, n)

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
        if self.folder.load_step(path, n - 1) is None:
            stats = GenStats()
            t0 = time.perf_counter()
            texts = self._complete(self.models.generator(n - 1), train, n - 1, hint=False, description=f"iter {n}: sample x{pl.k}",
                                   stats=stats, temperature=pl.temperature, samples=pl.k)
            rows = []
            for p, samples in zip(train, texts, strict=True):
                preds = [self.task.predicted_answer(p, t, direct=self.direct) for t in samples]
                votes = Counter(x for x in preds if x is not None)
                # deterministic tie-break: most votes, then first seen
                label = max(votes, key=lambda a: (votes[a], -preds.index(a))) if votes else None
                rows.append({"id": p.id, "label": label, "votes": dict(votes), "gold": p.answer,
                             "label_correct": label is not None and self._same_answer(p, label)})
            write(path, {"rows": rows, "stats": stats.to_dict(), "wall_s": round(time.perf_counter() - t0, 3),
                         "model": self.models.info(n - 1), "world_size": dist.world_size()})
            self._step_done(n, "pseudo_labels")
        return pseudo_labelled(train, read_json(path)["rows"])

    def _gold_correct(self, p: Problem, text: str) -> bool | None:
        """For a pseudo-labelled problem, whether ``text`` reaches the GOLD answer (None without pseudo-labels)."""
        if "gold_answer" not in p.meta:
            return None
        return bool(self.task.is_correct(p.with_answer(p.meta["gold_answer"]), text, direct=self.direct))

    def _generate(self, n: int, d: Path, train: list[Problem], *, hint: bool) -> dict[str, Any]:
        name = "rationalize" if hint else "generate"
        path = d / f"{name}.json"
        if (done := self.folder.load_step(path, n - 1)) is not None:
            return done
        stats = GenStats()
        t0 = time.perf_counter()
        sampling = self.cfg.sampling
        k = 1 if hint else sampling.k  # rationalization: one hinted sample at generation.temperature
        texts = self._complete(self.models.generator(n - 1), train, n - 1, hint=hint, description=f"iter {n}: {name}", stats=stats,
                               temperature=sampling.temperature if k > 1 else None, samples=k)
        ex = self._exemplars(n - 1)
        rows = []
        for p, samples in zip(train, texts, strict=True):
            judged = [{"text": t, **self._judge(p, t)} for t in samples]
            # k > 1: the row's text is its first correct sample (else its first), "correct" whether any sample is
            first = next((j for j in judged if j["correct"]), judged[0])
            row = {"id": p.id, "answer": p.answer, "prompt": self.task.prompt(p, ex, hint=hint, direct=self.direct), **first}
            if k > 1:
                row["samples"] = judged
            if "gold_answer" in p.meta:  # "answer"/"correct" are the pseudo-label target; the gold ones beside them
                row.update(target="pseudo_label", gold_answer=p.meta["gold_answer"], correct_vs_gold=self._gold_correct(p, first["text"]))
            rows.append(row)
        result = {"rows": rows, "stats": stats.to_dict(), "wall_s": round(time.perf_counter() - t0, 3),
                  "model": self.models.info(n - 1), "world_size": dist.world_size()}
        write(path, result)
        self._step_done(n, name)
        return result

    def _dataset(self, n: int, d: Path, train: list[Problem], gen: dict[str, Any] | None,
                 rat: dict[str, Any] | None) -> list[TrainingRecord]:
        """D_n ∪ D_n^rat: the answer filter (the paper), or also the task's rationale check (``filter: verified``;
        :mod:`.filtering`, with its report ``filter.json``).  ``sampling.accumulate``: the records are the union with
        iteration n-1's."""
        path = d / "train.jsonl"
        if path.exists():
            return [TrainingRecord(**r) for r in read_jsonl(path)]
        records: list[TrainingRecord] = []
        train_ex = self.task.exemplars(self.cfg.fewshot_k) if self.cfg.train_with_fewshot and self.cfg.fewshot_k else []
        if self.direct:
            records = [self.task.training_record(p, None, exemplars=train_ex) for p in train]
        elif self.cfg.baseline == "gold":
            records = [self.task.gold_record(p, exemplars=train_ex) for p in train if p.rationale.strip()]
            if len(records) < len(train):
                log.warning("iteration %d: %d of %d training problems have no reference rationale; trained on the rest",
                            n, len(train) - len(records), len(train))
        else:
            assert gen is not None
            records, report, kept = filter_rationales(self.cfg, self.task, train, gen, rat, train_ex)
            if self.cfg.sampling.accumulate:
                records, report["accumulated"] = self._accumulate(n, records)
            write(d / "filter.json", report)
            write(d / "rationales.json", rationales(self.task, self.cfg, n, self.models.path(n - 1), train, gen, rat, kept))
        write_jsonl(path, [r.to_dict() for r in records])
        self._step_done(n, "dataset")
        return records

    def _accumulate(self, n: int, kept: list[TrainingRecord]) -> tuple[list[TrainingRecord], dict[str, Any]]:
        """Iteration n's kept records added to the union so far (iteration n-1's training set): the union and its report."""
        prev = iter_dir(self.out, n - 1)
        previous = [TrainingRecord(**r) for r in read_jsonl(prev / "train.jsonl")] if n > 1 else []
        union, report = accumulate(previous, kept, max_kept=self.cfg.sampling.max_kept)
        before = read_json(prev / "filter.json")["accumulated"]["new_by_iteration"] if n > 1 else {}
        report.update(new_by_iteration={**before, str(n): report["new"]},
                      previous_sha256=file_sha256(prev / "train.jsonl") if n > 1 else None)
        log.info("iteration %d: %d kept, %d new to the union of %d", n, len(kept), report["new"], len(union))
        return union, report

    def _train(self, n: int, d: Path, records: list[TrainingRecord]) -> dict[str, Any]:
        path = d / "train_stats.json"
        if path.exists() and has_checkpoint(self.out, n):
            return read_json(path)
        steps = self.cfg.steps.steps(n)
        t0 = time.perf_counter()
        if not records:
            log.warning("iteration %d: no correct rationales to train on; M_%d = the base model", n, n)
            if dist.is_main():  # one process reads and writes it; the others only wait
                with outside_sharded_init():
                    model, tok = load_model(self.models.base_path)
                save_checkpoint(model, tok, checkpoint(self.out, n))
                del model
            dist.barrier()
            stats: dict[str, Any] = {"steps": 0, "examples": 0, "note": "no training data: the base model is kept"}
        else:
            # the checkpoint is written whole (gathered under ZeRO-3/FSDP) by rank 0; no process keeps the trained
            # model: generation loads the checkpoint where it runs (every rank for transformers, none for a server)
            _, _, stats = train(self.cfg, self.models.base_path, records, steps, d / "trainer", checkpoint=checkpoint(self.out, n),
                                description=f"iter {n}: train", show_progress=self.show_progress,
                                metrics_path=self.out / "metrics.jsonl",
                                metrics_extra={"iteration": n}, run_name=f"{self.out.name}-iter{n}")
        free_memory()  # the trainer's memory goes back before an engine starts
        if dist.is_main():
            shutil.rmtree(d / "trainer", ignore_errors=True)
        stats["wall_s"] = round(time.perf_counter() - t0, 3)
        self.models.forget(n)
        stats["fingerprint"] = self.models.fingerprint(n)  # M_n as trained: what iteration n+1 must generate with
        write(path, stats)
        if not self.cfg.keep_checkpoints and n > 1:
            shutil.rmtree(checkpoint(self.out, n - 1), ignore_errors=True)
        self._step_done(n, "train")
        return stats

    def _evaluate(self, n: int, d: Path, test: list[Problem], name: str = "test") -> dict[str, Any]:
        path = d / f"{name}.json"
        if (done := self.folder.load_step(path, n)) is not None:
            return done
        stats = GenStats()
        t0 = time.perf_counter()
        texts = self._complete(self.models.generator(n), test, n, hint=False, description=f"iter {n}: {name}", stats=stats)
        rows = [{"id": p.id, "group": self.task.groups(p), "answer": p.answer, "text": t, **self._judge(p, t)}
                for p, (t,) in zip(test, texts, strict=True)]
        result = {"rows": rows, "stats": stats.to_dict(), "wall_s": round(time.perf_counter() - t0, 3),
                  "model": self.models.info(n), "world_size": dist.world_size()}
        write(path, result)
        self._step_done(n, name)
        return result


def run_star(cfg: StarConfig, out: str | Path, *, resume: bool = False, show_progress: bool = True) -> dict[str, Any]:
    """Run (or resume) STaR; returns ``{"config": ..., "iterations": [metrics per iteration]}``."""
    return StarRun(cfg, out, resume=resume, show_progress=show_progress).run()
