"""Audit a STaR run by regeneration: the logged generations must be what the recorded checkpoints write.

A run's step files (``iter_n/generate.json``, ``rationalize.json``, ``test.json``, ``dev.json``) record each model's
text and the fingerprint of the model that wrote it; the training records are copied from them.  Checks that only read
those files (the records are the logged texts, judged right) cannot tell a text the model wrote from one the loop put
there: on arithmetic a right scratchpad is byte for byte the gold one.  :func:`regenerate_sample` asks the model again:

* each step's model, found independently of the log (M_0 the config's model, M_n ``iter_n/checkpoint``), is hashed
  afresh (no memo) and must have the fingerprint the step recorded; the train step's recorded fingerprint (runs from
  issue 41 on) must be the checkpoint's too;
* a seeded sample of the step's rows is generated again from that model, greedy, in this process (no completion
  store), from prompts rebuilt from the task (the logged prompt must be the rebuilt one) and compared byte for byte
  with the logged text;
* every row's logged verdict must be the task's verdict on its logged text, and the step must hold the rows it should
  (the iteration's training problems; rationalization: those generation got wrong; test and dev: the task's sets).

Only greedy steps are regenerated: sampled ones (``sampling.k`` > 1, ``temperature`` > 0) and ``pseudo_labels.json``
are reported as not checked.  A step made with another engine identity (device, dtype, engine options) than this
process would use is reported as not comparable, not as a mismatch.  A sample bounds what it misses: a share f of
forged rows escapes an n-row sample with probability (1 - f)^n; the seed should be one the run could not know.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from ..embedded import resolve_model
from ..errors import ConfigError
from ..io import read_json
from .artifacts import checkpoint, has_checkpoint, iter_dir
from .config import StarConfig
from .engines import Session, model_fingerprint, open_session, store_identity
from .generation import Generator
from .loop import exemplars, pseudo_labelled
from .tasks import Problem, Task, get_task

#: the generation steps of iteration n: the model each is made by (M_{n-1}: -1, M_n: 0) and whether its prompts are hinted
STEPS: tuple[tuple[str, int, bool], ...] = (("generate", -1, False), ("rationalize", -1, True), ("test", 0, False),
                                           ("dev", 0, False))
#: at most this many rows of a kind are listed in a report (the counts are whole)
LISTED = 20


class Mismatch(BaseModel):
    id: str
    logged: str
    regenerated: str


class StepAudit(BaseModel):
    """One step file of the run, checked against the model that should have made it."""

    iteration: int
    step: str
    model: int = Field(description="n of the model M_n that made the step")
    model_path: str
    recorded_fingerprint: str | None
    fingerprint: str | None = Field(description="the model's fingerprint now, hashed afresh (None: its files are gone)")
    rows: int
    checked: int = Field(0, description="rows generated again and compared")
    mismatches: list[Mismatch] = Field(default_factory=list, description="rows whose regenerated text differs (first LISTED)")
    n_mismatches: int = 0
    prompt_mismatches: list[str] = Field(default_factory=list, description="ids whose logged prompt is not the task's")
    verdict_mismatches: list[str] = Field(default_factory=list, description="ids whose logged verdict is not the task's")
    row_problems: list[str] = Field(default_factory=list, description="how the step's rows differ from the ones it should hold")
    not_checked: str | None = Field(None, description="why the texts were not regenerated")

    @property
    def ok(self) -> bool:
        return (self.not_checked is None and self.fingerprint is not None and self.fingerprint == self.recorded_fingerprint
                and not self.n_mismatches and not self.prompt_mismatches and not self.verdict_mismatches and not self.row_problems)

    def problems(self) -> list[str]:
        """One line per finding (empty: the step holds)."""
        where = f"iter_{self.iteration}/{self.step}.json"
        out = []
        if self.fingerprint is None:
            out.append(f"{where}: M_{self.model} ({self.model_path}) is gone: nothing to regenerate from")
        elif self.fingerprint != self.recorded_fingerprint:
            out.append(f"{where}: recorded as made by {self.recorded_fingerprint}, but M_{self.model} ({self.model_path}) "
                       f"is {self.fingerprint}")
        if self.not_checked:
            out.append(f"{where}: not regenerated: {self.not_checked}")
        if self.n_mismatches:
            out.append(f"{where}: {self.n_mismatches} of {self.checked} regenerated rows differ from the log: "
                       + ", ".join(m.id for m in self.mismatches))
        if self.prompt_mismatches:
            out.append(f"{where}: logged prompts that are not the task's: {', '.join(self.prompt_mismatches)}")
        if self.verdict_mismatches:
            out.append(f"{where}: logged verdicts that are not the task's on the logged text: {', '.join(self.verdict_mismatches)}")
        out += [f"{where}: {p}" for p in self.row_problems]
        return out


class AuditReport(BaseModel):
    run: str
    sample: int | None = Field(description="rows regenerated per step (None: all)")
    seed: int
    steps: list[StepAudit]
    train_fingerprints: list[str] = Field(default_factory=list, description="train steps whose recorded checkpoint is not the one on disk")

    @property
    def ok(self) -> bool:
        return bool(self.steps) and all(s.ok for s in self.steps) and not self.train_fingerprints

    @property
    def checked(self) -> int:
        return sum(s.checked for s in self.steps)

    @property
    def n_mismatches(self) -> int:
        return sum(s.n_mismatches for s in self.steps)

    def problems(self) -> list[str]:
        return [p for s in self.steps for p in s.problems()] + self.train_fingerprints

    def summary(self) -> str:
        head = (f"{self.run}: {len(self.steps)} steps, {self.checked} rows regenerated (seed {self.seed}), "
                f"{self.n_mismatches} differ")
        return "\n".join([head + (": ok" if self.ok else ""), *self.problems()])


def sample_indices(rows: int, n: int | None, seed: int, iteration: int, step: str) -> list[int]:
    """The rows of a step that are regenerated: ``n`` of them (all when None or more), seeded by seed, iteration, step."""
    if n is None or n >= rows:
        return list(range(rows))
    return sorted(random.Random(f"{seed}:{iteration}:{step}").sample(range(rows), n))


def model_path(cfg: StarConfig, out: Path, n: int) -> str:
    """M_n's folder as the run defines it (not as a step file says): the config's model, or ``iter_n/checkpoint``."""
    return resolve_model(cfg.model) if n == 0 else str(checkpoint(out, n))


def _fingerprint(cfg: StarConfig, out: Path, n: int) -> str | None:
    """M_n's fingerprint hashed afresh (no memo); None when its checkpoint is gone (``keep_checkpoints: false``)."""
    if n > 0 and not has_checkpoint(out, n):
        return None
    return model_fingerprint(model_path(cfg, out, n), memo=False)


def _problems(cfg: StarConfig, task: Task, out: Path, n: int, step: str, gen_rows: list[dict[str, Any]] | None) -> list[Problem]:
    """The problems a step should hold, in order, as the loop poses them."""
    if step in ("test", "dev"):
        return task.load(step, cfg.seed)
    train = task.train_problems(n, cfg.seed)
    if cfg.pseudo_labels.mode == "majority":
        train = pseudo_labelled(train, read_json(iter_dir(out, n) / "pseudo_labels.json")["rows"])
    if step == "rationalize":
        wrong = {r["id"] for r in gen_rows or [] if not r["correct"]}
        train = [p for p in train if p.id in wrong]
    return train


def _sampled(cfg: StarConfig, step: str) -> bool:
    if step == "generate" and cfg.sampling.k > 1:
        return True
    return cfg.generation.temperature > 0


class _Audit:
    """The run's config and task, and one model's engine, opened for the first step that regenerates with it."""

    def __init__(self, out: Path) -> None:
        self.out = out
        self.cfg = StarConfig.model_validate(read_json(out / "config.json"))
        self.task = get_task(self.cfg.task, **self.cfg.task_options)
        self.direct = self.cfg.baseline == "direct"
        self.session: Session | None = None

    def close(self) -> None:
        session, self.session = self.session, None
        if session is not None:
            session.close()

    def open(self, m: int, fp: str) -> Session:
        if self.session is None or self.session.n != m:
            self.close()
            self.session = open_session(self.cfg, m, model_path(self.cfg, self.out, m), fp, log_dir=self.out / "logs" / "audit")
        return self.session

    def check_rows(self, audit: StepAudit, rows: list[dict[str, Any]], problems: list[Problem], hint: bool) -> None:
        """The step holds the problems it should, in order, each with the task's prompt and the task's verdict."""
        by_id = {p.id: p for p in problems}
        ids = [r["id"] for r in rows]
        if ids != [p.id for p in problems]:
            extra, missing = set(ids) - set(by_id), set(by_id) - set(ids)
            audit.row_problems.append(f"its rows are not the {len(problems)} problems it should hold, in order "
                                      f"({len(extra)} extra, {len(missing)} missing)")
        ex = exemplars(self.cfg, self.task, audit.model)
        for r in rows:
            p = by_id.get(r["id"])
            if p is None:
                continue
            if "prompt" in r and r["prompt"] != self.task.prompt(p, ex, hint=hint, direct=self.direct):
                audit.prompt_mismatches.append(r["id"])
            if bool(r["correct"]) != bool(self.task.is_correct(p, r["text"], direct=self.direct)):
                audit.verdict_mismatches.append(r["id"])

    def regenerate(self, audit: StepAudit, data: dict[str, Any], problems: list[Problem], hint: bool, n: int | None,
                   seed: int) -> None:
        """``n`` of the step's rows generated again by its model (greedy, no store) and compared with the log."""
        assert audit.fingerprint is not None
        identity = store_identity(self.cfg, audit.fingerprint)
        recorded = (data.get("model") or {}).get("identity")
        if _sampled(self.cfg, audit.step):
            audit.not_checked = "sampled generations (only greedy ones are regenerated)"
            return
        if recorded is not None and recorded != identity:
            diffs = sorted(k for k in set(identity) | set(recorded) if identity.get(k) != recorded.get(k))
            audit.not_checked = "made with another " + ", ".join(f"{k} ({recorded.get(k)!r}; here {identity.get(k)!r})"
                                                                 for k in diffs)
            return
        rows = data["rows"]
        by_id = {p.id: p for p in problems}
        chosen = [i for i in sample_indices(len(rows), n, seed, audit.iteration, audit.step) if rows[i]["id"] in by_id]
        session = self.open(audit.model, audit.fingerprint)
        gen = Generator(self.cfg, lambda: session, identity, store=None, shard=False, show_progress=False)
        ps = [by_id[rows[i]["id"]] for i in chosen]
        ex = exemplars(self.cfg, self.task, audit.model)
        g = self.cfg.generation
        texts = gen.complete([self.task.prompt(p, ex, hint=hint, direct=self.direct) for p in ps],
                             [g.max_new_tokens or self.task.max_new_tokens(p, direct=self.direct) for p in ps],
                             stop=self.task.stop, temperature=0.0)
        audit.checked = len(chosen)
        for i, (c,) in zip(chosen, texts, strict=True):
            again = self.task.trim(c.text)
            if again != rows[i]["text"]:
                audit.n_mismatches += 1
                if len(audit.mismatches) < LISTED:
                    audit.mismatches.append(Mismatch(id=rows[i]["id"], logged=rows[i]["text"], regenerated=again))


def regenerate_sample(run_dir: str | Path, n: int | None = 64, seed: int = 0, *, threads: int | None = 1) -> AuditReport:
    """Regenerate ``n`` rows of every generation step of the run in ``run_dir`` (None: every row) from the model that
    should have made it, and compare them with the log byte for byte (module docstring).  ``threads``: torch CPU
    threads while generating (1: what the loop's CPU runs use; restored afterwards)."""
    out = Path(run_dir)
    if not (out / "config.json").is_file():
        raise ConfigError(f"{out}: not a STaR run folder (no config.json)")
    if n is not None and n < 1:
        raise ConfigError(f"sample {n}: give at least one row per step")
    a = _Audit(out)
    report = AuditReport(run=str(out), sample=n, seed=seed, steps=[])
    # each step file with the model that should have made it, in the order of the models (each is loaded once)
    todo: list[tuple[int, int, str, bool]] = []
    iterations = sorted(int(d.name[5:]) for d in out.glob("iter_*") if d.name[5:].isdigit())
    for it in iterations:
        todo += [(it + offset, it, step, hint) for step, offset, hint in STEPS if (iter_dir(out, it) / f"{step}.json").is_file()]
        stats = iter_dir(out, it) / "train_stats.json"
        recorded = read_json(stats).get("fingerprint") if it > 0 and stats.is_file() else None
        if recorded is not None and (now := _fingerprint(a.cfg, out, it)) != recorded:
            report.train_fingerprints.append(f"iter_{it}/train_stats.json: trained {recorded}, but iter_{it}/checkpoint is {now}")
    import torch

    before = torch.get_num_threads()
    if threads:
        torch.set_num_threads(threads)
    fingerprints: dict[int, str | None] = {}
    try:
        for m, it, step, hint in sorted(todo):
            if m not in fingerprints:
                fingerprints[m] = _fingerprint(a.cfg, out, m)
            data = read_json(iter_dir(out, it) / f"{step}.json")
            audit = StepAudit(iteration=it, step=step, model=m, model_path=model_path(a.cfg, out, m), rows=len(data["rows"]),
                              recorded_fingerprint=(data.get("model") or {}).get("fingerprint"), fingerprint=fingerprints[m])
            report.steps.append(audit)
            gen_rows = read_json(iter_dir(out, it) / "generate.json")["rows"] if step == "rationalize" else None
            problems = _problems(a.cfg, a.task, out, it, step, gen_rows)
            a.check_rows(audit, data["rows"], problems, hint)
            if audit.fingerprint is not None:
                a.regenerate(audit, data, problems, hint, n, seed)
    finally:
        a.close()
        torch.set_num_threads(before)
    return report
