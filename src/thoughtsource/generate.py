"""Generate CoTs and answers for a collection: plan → store lookups → backend calls → attach.

Read top to bottom, :func:`generate` does:

1. **plan**: every sample × instruction × CoT trigger × ``n`` (self-consistency) is one stage-1
   request (question + instruction + trigger → CoT), with its store key;
2. **look up** the keys in the :class:`~thoughtsource.store.CompletionStore`;
3. **call** the backend for the missing keys only, concurrently and in batches; every finished
   completion is committed to the store before anything else happens with it;
4. **stage 2**: for every CoT and answer-extraction prompt, the CoT + extraction prompt → answer text
   (store first, backend only for missing keys, greedy);
5. **attach** ``GeneratedCot`` / ``Answer`` objects in plan order, with ids derived from the store
   keys, so a re-run attaches nothing twice and a killed run, resumed, gives the same collection.

A run killed at any point loses only the requests in flight; a finished run re-run makes zero calls.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import os
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, ValidationError, model_validator

from .backends.base import Backend, Request
from .chains import in_idx_range
from .config import published_to_ours
from .errors import BackendError, ConfigError
from .prompts import AUTO, Fragments, load_fragments
from .prompts.build import Prompt, answer_prompt, cot_prompt, exemplar_candidates, resolve_extraction
from .prompts.templates import DEFAULT_ANSWER, DEFAULT_COT, Templates
from .reasoning import CONTENT_EXTRACTION, ReasoningInfo
from .schema import Answer, GeneratedCot, Sample
from .store import CompletionStore, StoredCompletion, completion_key

if TYPE_CHECKING:
    from .collection import Collection

log = logging.getLogger(__name__)

CHARS_PER_TOKEN = 4.0  # dry-run estimate of prompt tokens from characters


class GenerateConfig(BaseModel):
    """What to generate and with which model.  Accepts the paper's Figure-3 dict as well."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    instruction_keys: list[str | None] = Field(default=[None], description="Instruction fragment ids (None: no instruction).")
    cot_trigger_keys: list[str] = Field(default=["kojima-01"], description="CoT trigger fragment ids ('none' for no trigger).")
    answer_extraction_keys: list[str] = Field(
        default=[AUTO], description="Answer-extraction fragment ids; 'auto' picks the one matching each sample's type."
    )
    author: str = Field(default="thoughtsource", description="Stored as the author of each CoT.")
    backend: str = Field(default="transformers", description="Backend name (see thoughtsource.backends.BACKENDS).")
    api_service: str | None = Field(default=None, description="Stored as api_service; default: the backend name.")
    model: str = Field(
        default="embedded", validation_alias=AliasChoices("model", "engine"), description="Model name or path ('embedded': SmolLM2)."
    )
    base_urls: list[str] = Field(default_factory=list, description="Servers of an OpenAI-compatible backend.")
    chat: bool = Field(default=False, description="Send chat messages (one user message) instead of a plain prompt.")
    temperature: float = Field(default=0.0, ge=0)
    top_p: float = Field(default=1.0, gt=0, le=1)
    max_tokens: int = Field(default=256, gt=0, description="Token limit of a CoT.")
    answer_max_tokens: int = Field(default=32, gt=0, description="Token limit of an extracted answer (greedy).")
    stop: list[str] = Field(default_factory=list, description="Stop sequences of the CoT step.")
    # the published library's keys (see thoughtsource.config.published_to_ours and prompts/templates.py)
    idx_range: tuple[int, int] | None = Field(default=None, description="Only samples whose index in their split is in [a, b).")
    template_cot_generation: str | None = Field(default=None, description="Published stage-1 template ({instruction}, {question}, ...).")
    template_answer_extraction: str | None = Field(default=None, description="Published stage-2 template (adds {cot}, {answer_extraction}).")
    multiple_choice_answer_format: Literal["Letters", "Numbers"] | None = Field(
        default="Letters", description="How choices are listed in published templates: A) ..., 1) ..., or bare.")
    n: int = Field(default=1, ge=1, description="CoTs per prompt (self-consistency); needs temperature > 0 when > 1.")
    seed: int = Field(default=0, description="Sampling seed; sample i of a prompt uses a seed derived from it and i.")
    few_shot: int = Field(default=0, ge=0, description="Exemplars with gold CoTs before the question (0: zero-shot).")
    few_shot_split: str = Field(default="train", description="Split of the same dataset the exemplars come from.")
    few_shot_seed: int = Field(default=0, description="Seed of the exemplar draw.")
    concurrency: int = Field(
        default=128, ge=1,
        description="Backend calls in flight at most (128: the best measured throughput, docs/benchmarks.md).",
    )
    batch_size: int = Field(
        default=1, ge=1,
        description="Requests per backend call; 1 stores each completion the moment it is done (backends batch concurrent calls).",
    )
    fragments_files: list[Path] = Field(default_factory=list, description="User fragment files added to the bundled ones.")
    backend_options: dict[str, Any] = Field(default_factory=dict, description="Extra options passed to the backend.")
    db: Path | None = Field(default=None, description="Completion store (default: $THOUGHTSOURCE_HOME/completions.sqlite).")
    allow_empty: bool = Field(
        default=False, description="Store empty completions; by default they are errors (retried by the backend, asked again on a re-run).",
    )

    @model_validator(mode="before")
    @classmethod
    def _paper_keys(cls, data: Any) -> Any:
        return published_to_ours(data, log) if isinstance(data, dict) else data

    @model_validator(mode="after")
    def _check(self) -> GenerateConfig:
        if self.n > 1 and self.temperature == 0:
            raise ValueError("n > 1 needs temperature > 0 (greedy decoding gives n identical CoTs)")
        for name in ("instruction_keys", "cot_trigger_keys", "answer_extraction_keys"):
            if not getattr(self, name):
                raise ValueError(f"{name} is empty")
        templates = self.templates()
        if templates is not None:
            problems = templates.problems()
            if problems:
                raise ValueError("; ".join(problems))
            if self.few_shot:
                raise ValueError("few_shot cannot be combined with published templates (they have no place for exemplars)")
        if self.idx_range is not None and not 0 <= self.idx_range[0] < self.idx_range[1]:
            raise ValueError(f"idx_range must be (a, b) with 0 <= a < b, got {self.idx_range}")
        return self

    def templates(self) -> Templates | None:
        """The published templates when the config sets any of their keys, else None (our prompt builder)."""
        fields = self.model_fields_set & {"template_cot_generation", "template_answer_extraction", "multiple_choice_answer_format"}
        if not fields:
            return None
        return Templates(self.template_cot_generation or DEFAULT_COT, self.template_answer_extraction or DEFAULT_ANSWER,
                         self.multiple_choice_answer_format)

    @classmethod
    def parse(cls, config: GenerateConfig | dict[str, Any] | None = None, /, **overrides: Any) -> GenerateConfig:
        """A config from a model, a dict (ours or the paper's) or nothing, with overrides on top.

        Raises :class:`ConfigError` listing every problem at once.
        """
        base: dict[str, Any]
        if config is None:
            base = {}
        elif isinstance(config, GenerateConfig):
            base = config.model_dump(exclude_unset=True)
        elif isinstance(config, dict):
            base = dict(config)
        else:
            raise ConfigError(f"a generate config is a GenerateConfig or a dict, got {type(config).__name__}")
        if "engine" in overrides and "model" in base:
            base.pop("model")
        if "model" in overrides:
            base.pop("engine", None)
        try:
            return cls.model_validate({**base, **overrides})
        except ValidationError as e:
            problems = [f"{'.'.join(str(p) for p in err['loc']) or 'config'}: {err['msg']}" for err in e.errors()]
            raise ConfigError("invalid generate config", problems=problems) from None

    def model_info(self, sample_index: int, name: str | None = None) -> dict[str, Any]:
        """What is stored as a CoT's ``model``: the name and the generation parameters."""
        from .embedded import EMBEDDED_NAME, is_embedded

        name = name or self.model
        # the file says which model wrote the CoT, not our alias for it
        info: dict[str, Any] = {"name": EMBEDDED_NAME if is_embedded(name) else name, "temperature": self.temperature,
                                "max_tokens": self.max_tokens}
        if self.top_p != 1.0:
            info["top_p"] = self.top_p
        if self.n > 1 or self.temperature > 0:
            info.update(seed=self.seed, n=self.n, sample_index=sample_index)
        if self.few_shot:
            info.update(few_shot=self.few_shot, few_shot_split=self.few_shot_split, few_shot_seed=self.few_shot_seed)
        return info


# --------------------------------------------------------------------------- the plan
@dataclass
class CotUnit:
    """One stage-1 request and the stage-2 extractions to run on its CoT."""

    dataset: str
    split: str
    sample: Sample
    instruction: str | None
    cot_trigger: str
    sample_index: int
    prompt: Prompt
    request: Request
    key: str
    extractions: list[str]
    cot: StoredCompletion | None = None
    answers: dict[str, tuple[Prompt, str, StoredCompletion]] = field(default_factory=dict)  # extraction -> (prompt, key, row)
    error: str | None = None


@dataclass
class GenerateReport:
    """What a run did (returned by :func:`generate`, printed by the CLI)."""

    cot_requests: int = 0
    answer_requests: int = 0
    cached: int = 0
    called: int = 0
    retries: int = 0
    errors: int = 0  # failed CoT units: cot_errors + answer_errors
    cot_errors: int = 0  # stage 1 failed: no CoT (its answers were not asked for)
    answer_errors: int = 0  # the CoT is there, at least one of its answer extractions failed
    attached_cots: int = 0
    attached_answers: int = 0
    est_prompt_tokens: int = 0
    est_completion_tokens: int = 0
    dry_run: bool = False
    error_messages: list[str] = field(default_factory=list)

    def summary(self) -> str:
        if self.dry_run:
            return (
                f"dry run: {self.called} backend calls to make ({self.cot_requests} CoT + {self.answer_requests} answer requests, "
                f"{self.cached} already in the store); estimated ~{self.est_prompt_tokens:,} prompt tokens and "
                f"≤ {self.est_completion_tokens:,} completion tokens"
            )
        return (
            f"{self.cot_requests} CoT + {self.answer_requests} answer requests: {self.cached} from the store, "
            f"{self.called} called ({self.retries} retries, {self.cot_errors} CoT and {self.answer_errors} answer failures); "
            f"attached {self.attached_cots} new CoTs and {self.attached_answers} new answers"
        )

    def failure_summary(self) -> str:
        """E.g. '2 CoT request(s) failed (their answers were not asked for) and 1 answer extraction(s) failed'."""
        parts = []
        if self.cot_errors:
            parts.append(f"{self.cot_errors} CoT request(s) failed (their answers were not asked for)")
        if self.answer_errors:
            parts.append(f"{self.answer_errors} CoT(s) lack an extracted answer (the answer request failed)")
        return " and ".join(parts) or "no failures"


def _stable_id(*parts: str) -> str:
    return str(uuid.UUID(hex=hashlib.sha256("|".join(parts).encode()).hexdigest()[:32]))


def _make_request(cfg: GenerateConfig, prompt: Prompt, *, max_tokens: int, sampled: bool, sample_index: int, stop: Sequence[str]) -> Request:
    """A completion request; in chat mode stage 2 sends the CoT and the extraction phrase as the start of
    the assistant's message, which the model continues (as a completion model continues the text)."""
    return Request(
        prompt="" if cfg.chat else prompt.text,
        messages=prompt.messages() if cfg.chat else None,
        max_tokens=max_tokens,
        temperature=cfg.temperature if sampled else 0.0,
        top_p=cfg.top_p if sampled else 1.0,
        stop=tuple(stop),
        seed=cfg.seed if sampled and cfg.temperature > 0 else None,
        sample_index=sample_index,
    )


def _answer_request(cfg: GenerateConfig, prompt: Prompt) -> Request:
    return _make_request(cfg, prompt, max_tokens=cfg.answer_max_tokens, sampled=False, sample_index=0, stop=())


def plan(
    collection: Collection, cfg: GenerateConfig, fragments: Fragments, identity: dict[str, Any],
    exemplar_pool: Collection | None = None,
) -> list[CotUnit]:
    """Every stage-1 request of the run, in a fixed order (dataset, split, sample, instruction, trigger, i)."""
    pool_source = exemplar_pool if exemplar_pool is not None else collection
    drawn: dict[str, list[Sample]] = {}  # per dataset: k + 1 exemplars, drawn once
    units: list[CotUnit] = []
    for dataset, split, sample in collection.samples():
        exemplars: list[Sample] = []
        if cfg.few_shot:
            if dataset not in drawn:
                pool = pool_source.data.get(dataset, {}).get(cfg.few_shot_split)
                if not pool:
                    raise ConfigError(
                        f"few_shot={cfg.few_shot} needs the split '{cfg.few_shot_split}' of dataset '{dataset}' "
                        "(load it, or pass exemplar_pool=)"
                    )
                drawn[dataset] = exemplar_candidates(pool, cfg.few_shot, cfg.few_shot_seed)
            exemplars = [x for x in drawn[dataset] if x.id != sample.id][: cfg.few_shot]
        extractions = list(dict.fromkeys(resolve_extraction(k, sample, fragments) for k in cfg.answer_extraction_keys))
        for instruction in cfg.instruction_keys:
            for trigger in cfg.cot_trigger_keys:
                prompt = cot_prompt(sample, fragments, instruction, trigger, exemplars=exemplars, templates=cfg.templates())
                for i in range(cfg.n):
                    request = _make_request(cfg, prompt, max_tokens=cfg.max_tokens, sampled=True, sample_index=i, stop=cfg.stop)
                    units.append(CotUnit(dataset, split, sample, instruction, trigger, i, prompt, request,
                                         completion_key(identity, request), extractions))
    return units


# --------------------------------------------------------------------------- execution
class _Dispatcher:
    """Store-first completion of requests: batches of missing keys go to the backend, results to the store.

    Requests submitted in the same event-loop tick are batched together (up to ``batch_size``); at
    most ``concurrency`` backend calls run at once; a key asked for twice while in flight is called
    once.  Before a batch is sent its keys are claimed in the store, so another process generating
    into the same store waits for them instead of paying for them too (see ``store.py``).  An empty
    completion is an error, not a result (unless ``allow_empty``); a *fatal* backend error (no
    server reachable) fails every pending and later request at once.
    """

    def __init__(self, backend: Backend, store: CompletionStore, identity: dict[str, Any], batch_size: int,
                 concurrency: int, on_done: Any, allow_empty: bool = False) -> None:
        self.backend, self.store, self.identity = backend, store, identity
        self.batch_size, self.concurrency = batch_size, concurrency
        self.on_done = on_done
        self.allow_empty = allow_empty
        self.pending: list[tuple[str, Request, asyncio.Future[tuple[StoredCompletion, bool]]]] = []
        self.inflight: dict[str, asyncio.Future[tuple[StoredCompletion, bool]]] = {}
        self.active = 0
        self.called = 0
        self.retries = 0
        self.fatal: BackendError | None = None
        self._kick_scheduled = False
        self._tasks: set[asyncio.Task[None]] = set()

    async def get(self, key: str, request: Request, cached: StoredCompletion | None) -> tuple[StoredCompletion, bool]:
        """(row, came_from_store)."""
        if cached is not None:
            return cached, True
        if self.fatal is not None:
            raise self.fatal
        if key not in self.inflight:
            fut: asyncio.Future[tuple[StoredCompletion, bool]] = asyncio.get_running_loop().create_future()
            self.inflight[key] = fut
            self.pending.append((key, request, fut))
            if not self._kick_scheduled:
                self._kick_scheduled = True
                asyncio.get_running_loop().call_soon(self._kick)
        return await asyncio.shield(self.inflight[key])

    def _kick(self) -> None:
        self._kick_scheduled = False
        if self.fatal is not None:
            self._settle(self.pending, self.fatal)
            self.pending = []
            return
        while self.pending and self.active < self.concurrency:
            batch, self.pending = self.pending[: self.batch_size], self.pending[self.batch_size :]
            self.active += 1
            task = asyncio.create_task(self._run(batch))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
            task.add_done_callback(_retrieved)  # a Ctrl-C raised in it ends the run; asyncio need not log it again

    def _settle(self, batch: list[tuple[str, Request, asyncio.Future[tuple[StoredCompletion, bool]]]],
                error: BaseException) -> None:
        for key, _, fut in batch:
            if not fut.done():
                fut.set_exception(error)
                self.on_done()
            self.inflight.pop(key, None)

    async def _run(self, batch: list[tuple[str, Request, asyncio.Future[tuple[StoredCompletion, bool]]]]) -> None:
        original = batch
        try:
            wait = 0.05
            while batch:
                mine, done = self.store.claim(key for key, _, _ in batch)
                if done:  # committed by another process since we looked
                    rows = self.store.get_many(done)
                    for key, _, fut in batch:
                        if key in rows:
                            fut.set_result((rows[key], True))
                            self.on_done()
                if mine:
                    await self._send([b for b in batch if b[0] in mine])
                batch = [b for b in batch if b[0] not in mine and b[0] not in done]
                if batch:  # claimed by another live process: wait for its result or its release
                    await asyncio.sleep(wait)
                    wait = min(1.0, wait * 2)
        except BackendError as e:
            if e.fatal and self.fatal is None:
                self._stop(e)
            self._settle(original, e)
        except asyncio.CancelledError:
            if self.fatal is not None:  # stopped by _stop: the units waiting on this batch get the fatal error
                self._settle(original, self.fatal)
            raise
        except Exception as e:
            self._settle(original, e)
        finally:
            for key, _, fut in original:
                if fut.done() and not fut.exception():
                    self.inflight.pop(key, None)
            self.active -= 1
            self._kick()

    def _stop(self, error: BackendError) -> None:
        """A fatal error: fail what is pending and cancel the calls in flight (their retries cannot succeed)."""
        self.fatal = error
        self._settle(self.pending, error)
        self.pending = []
        current = asyncio.current_task()
        for task in self._tasks:
            if task is not current:
                task.cancel()

    async def _send(self, batch: list[tuple[str, Request, asyncio.Future[tuple[StoredCompletion, bool]]]]) -> None:
        """Call the backend for claimed keys; commit each completion, then resolve its future."""
        from .interrupt import Interrupted

        try:
            completions = await self.backend.complete([r for _, r, _ in batch])
            if len(completions) != len(batch):
                raise BackendError(f"returned {len(completions)} completions for {len(batch)} requests", backend=self.backend.name)
        except Interrupted as e:  # Ctrl-C stopped the in-process model: commit every completion that finished, then stop
            kept = set()
            for i, (key, request, _) in enumerate(batch):
                c = e.completions.get(i)
                if c is not None and (self.allow_empty or c.text.strip() or c.reasoning is not None):
                    self.store.put(key, self.backend.name, self.identity, request, c)
                    self.called += 1
                    kept.add(key)
            self.store.release(key for key, _, _ in batch if key not in kept)
            log.info("interrupted: kept %d finished completion(s) of the batch", len(kept))
            raise
        except BaseException:
            self.store.release(key for key, _, _ in batch)
            raise
        empty: list[str] = []
        for (key, request, fut), completion in zip(batch, completions, strict=True):
            self.retries += max(0, completion.attempts - 1)
            if not self.allow_empty and not completion.text.strip() and completion.reasoning is None:
                empty.append(key)
                fut.set_exception(BackendError(
                    f"empty completion (finish_reason {completion.finish_reason!r}); not stored, a re-run asks again "
                    "(allow_empty=True stores it)", backend=self.backend.name, attempts=completion.attempts))
                self.on_done()
                continue
            row = self.store.put(key, self.backend.name, self.identity, request, completion)  # committed first
            self.called += 1
            fut.set_result((row, False))
            self.on_done()
        if empty:
            self.store.release(empty)
            for key in empty:
                self.inflight.pop(key, None)


def _retrieved(task: asyncio.Task[None]) -> None:
    """Marks a task's exception as seen (it propagated out of the event loop: Ctrl-C)."""
    if not task.cancelled():
        task.exception()


def _estimate_tokens(text: str) -> int:
    return max(1, round(len(text) / CHARS_PER_TOKEN))


def _dry_run(units: list[CotUnit], store: CompletionStore, cfg: GenerateConfig, fragments: Fragments, identity: dict[str, Any]) -> GenerateReport:
    report = GenerateReport(dry_run=True)
    hits = store.get_many(u.key for u in units)
    answer_keys: list[str] = []
    for u in units:
        report.cot_requests += 1
        row = hits.get(u.key)
        if row is None:
            report.called += 1
            report.est_prompt_tokens += _estimate_tokens(u.prompt.text)
            report.est_completion_tokens += cfg.max_tokens
            for ex in u.extractions:  # the stage-2 prompt holds the CoT: estimate it as max_tokens long
                report.called += 1
                report.answer_requests += 1
                report.est_prompt_tokens += _estimate_tokens(u.prompt.text + fragments.answer_extraction(ex)) + cfg.max_tokens
                report.est_completion_tokens += cfg.answer_max_tokens
        else:
            report.cached += 1
            for ex in u.extractions:
                p = answer_prompt(u.prompt, row.text, fragments, ex)
                answer_keys.append(completion_key(identity, _answer_request(cfg, p)))
                report.answer_requests += 1
                report.est_prompt_tokens += _estimate_tokens(p.text)
                report.est_completion_tokens += cfg.answer_max_tokens
    have = store.get_many(answer_keys)
    report.cached += len(have)
    report.called += len(answer_keys) - len(have)
    # tokens of answers already stored are not spent
    for k in answer_keys:
        if k in have:
            report.est_completion_tokens -= cfg.answer_max_tokens
    return report


async def _execute(units: list[CotUnit], backend: Backend, store: CompletionStore, cfg: GenerateConfig, fragments: Fragments,
                   identity: dict[str, Any], report: GenerateReport, show_progress: bool) -> None:
    from .console import progress

    counters = getattr(backend, "counters", None)
    retries_before = counters.retries if counters is not None else 0  # a backend passed in may have run before
    total = sum(1 + len(u.extractions) for u in units)
    batch_size = cfg.batch_size
    with progress("retries", "errors", enabled=show_progress) as bar:
        task = bar.add_task("generate", total=total, retries=0, errors=0)

        def tick(n: int = 1) -> None:
            retries = counters.retries - retries_before if counters is not None else dispatcher.retries
            bar.update(task, retries=retries, errors=report.errors)
            if n:
                bar.advance(task, n)

        dispatcher = _Dispatcher(backend, store, identity, batch_size, cfg.concurrency, lambda: tick(0), cfg.allow_empty)
        cot_hits = store.get_many(u.key for u in units)

        async def run_unit(u: CotUnit) -> None:
            try:
                u.cot, cached = await dispatcher.get(u.key, u.request, cot_hits.get(u.key))
                report.cached += cached
                tick()
                if u.cot.reasoning is not None:  # a reasoning model: its final content is the answer, no extraction prompt
                    tick(len(u.extractions))
                    return
                prompts = {ex: answer_prompt(u.prompt, u.cot.text, fragments, ex) for ex in u.extractions}
                keys = {ex: completion_key(identity, _answer_request(cfg, p)) for ex, p in prompts.items()}
                hits = store.get_many(keys.values())
                for ex, p in prompts.items():
                    row, cached = await dispatcher.get(keys[ex], _answer_request(cfg, p), hits.get(keys[ex]))
                    report.cached += cached
                    u.answers[ex] = (p, keys[ex], row)
                    tick()
            except BackendError as e:
                u.error = str(e)
                report.errors += 1
                stage = "CoT" if u.cot is None else "answer"
                if u.cot is None:
                    report.cot_errors += 1
                else:
                    report.answer_errors += 1
                report.error_messages.append(
                    f"{u.dataset}/{u.split}/{u.sample.id} ({u.instruction}, {u.cot_trigger}, #{u.sample_index}) {stage}: {e}")
                tick(1 + len(u.extractions) - len(u.answers) - (u.cot is not None))

        await asyncio.gather(*(run_unit(u) for u in units))
        if dispatcher.fatal is not None:
            raise dispatcher.fatal
        report.called = dispatcher.called
        report.retries = counters.retries - retries_before if counters is not None else dispatcher.retries


def _attach(units: list[CotUnit], cfg: GenerateConfig, fragments: Fragments, api_service: str, model_name: str,
            report: GenerateReport) -> None:
    """Attach results in plan order; ids derive from store keys, so nothing is attached twice."""
    for u in units:
        if u.cot is None:
            continue
        where = f"{u.dataset}/{u.split}/{u.sample.id}"
        cot_id = _stable_id(u.key, where)
        existing = next((c for c in u.sample.generated_cot if c.id == cot_id), None)
        if existing is None:
            existing = GeneratedCot(
                id=cot_id,
                fragments_version=fragments.version,
                instruction=u.instruction,
                cot_trigger=u.cot_trigger,
                cot_trigger_template=u.prompt.template,
                prompt_text=u.prompt.text,
                cot=(u.cot.reasoning if u.cot.reasoning is not None else u.cot.text).strip(),
                answers=[],
                author=cfg.author,
                date=u.cot.created_at,
                api_service=api_service,
                model=cfg.model_info(u.sample_index, model_name),
                comment="",
                annotations=[],
            )
            if u.cot.reasoning is not None:
                existing.reasoning = _reasoning_record(u.cot)  # type: ignore[attr-defined]  # an extra key of the schema
            u.sample.generated_cot.append(existing)
            report.attached_cots += 1
        have = {a.id for a in existing.answers}
        if u.cot.reasoning is not None:
            answer_id = _stable_id(u.key, cot_id, CONTENT_EXTRACTION)
            if answer_id not in have:
                existing.answers.append(Answer(
                    id=answer_id, answer_extraction=CONTENT_EXTRACTION, answer=u.cot.text.strip(), correct_answer=None,
                ))
                report.attached_answers += 1
            continue
        for ex in u.extractions:
            if ex not in u.answers:
                continue
            prompt, key, row = u.answers[ex]
            answer_id = _stable_id(key, cot_id, ex)
            if answer_id in have:
                continue
            existing.answers.append(Answer(
                id=answer_id, answer_extraction=ex, answer_extraction_template=prompt.template,
                answer_extraction_text=prompt.text, answer=row.text.strip(), correct_answer=None,
            ))
            have.add(answer_id)
            report.attached_answers += 1


def _reasoning_record(row: StoredCompletion) -> dict[str, Any]:
    """The ``reasoning`` key of a reasoning model's GeneratedCot (see thoughtsource.reasoning.ReasoningInfo)."""
    info = ReasoningInfo(
        source=row.reasoning_source or "tags",  # type: ignore[arg-type]
        reasoning_tokens=row.reasoning_tokens,
        answer_tokens=max(0, row.completion_tokens - row.reasoning_tokens),
        truncated=row.to_completion().cut_off_in_reasoning,
        finish_reason=row.finish_reason,
    )
    return info.model_dump(mode="json")


def _run_coroutine(factory: Any) -> None:
    """Run ``factory()`` to completion, also when called from a running event loop (Jupyter)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        asyncio.run(factory())
        return
    import concurrent.futures

    with concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="thoughtsource-generate") as pool:
        pool.submit(lambda: asyncio.run(factory())).result()


def make_backend(cfg: GenerateConfig) -> Backend:
    """The backend a config names, with the config's model, servers and concurrency."""
    from .backends import get_backend

    options = dict(cfg.backend_options)
    options.setdefault("model", cfg.model)
    if cfg.backend == "openai":
        if cfg.base_urls:
            options.setdefault("base_url", cfg.base_urls)
        options.setdefault("concurrency", cfg.concurrency)
        options.setdefault("allow_empty", cfg.allow_empty)
    try:
        return get_backend(cfg.backend, **options)
    except ValidationError as e:
        problems = [f"{'.'.join(str(p) for p in err['loc'])}: {err['msg']}" for err in e.errors()]
        raise ConfigError(f"invalid options for backend '{cfg.backend}'", problems=problems) from None


def generate(
    collection: Collection,
    config: GenerateConfig | dict[str, Any] | None = None,
    *,
    backend: Backend | str | None = None,
    store: CompletionStore | str | os.PathLike[str] | None = None,
    progress: bool = True,
    dry_run: bool = False,
    exemplar_pool: Collection | None = None,
    **overrides: Any,
) -> GenerateReport:
    """Generate CoTs (and extracted answers) for every sample of ``collection``, in place.

    ``config`` is a :class:`GenerateConfig`, a dict (ours, or the paper's Figure-3 dict) or None;
    ``overrides`` are config fields on top of it.  ``backend`` is a backend name (a config field) or
    a backend instance that replaces the one the config names (it is then not closed here); ``store`` is a store or its path (default: ``config.db``, else
    ``$THOUGHTSOURCE_HOME/completions.sqlite``).
    """
    if isinstance(backend, str):
        overrides["backend"], backend = backend, None
    cfg = GenerateConfig.parse(config, **overrides)
    fragments = load_fragments(cfg.fragments_files)
    problems = (fragments.check("instructions", cfg.instruction_keys) + fragments.check("cot_triggers", cfg.cot_trigger_keys)
                + fragments.check("answer_extractions", cfg.answer_extraction_keys))
    if problems:
        raise ConfigError("unknown fragment ids in the generate config", problems=problems)

    own_backend = backend is None
    be = make_backend(cfg) if backend is None else backend
    own_store = not isinstance(store, CompletionStore)
    st = store if isinstance(store, CompletionStore) else CompletionStore(store if store is not None else cfg.db)
    try:
        identity = be.cache_identity()
        units = plan(in_idx_range(collection, cfg.idx_range), cfg, fragments, identity, exemplar_pool)
        if dry_run:
            report = _dry_run(units, st, cfg, fragments, identity)
            log.debug("%s", report.summary())
            return report
        report = GenerateReport(cot_requests=len(units), answer_requests=sum(len(u.extractions) for u in units))

        async def main() -> None:
            try:
                await _execute(units, be, st, cfg, fragments, identity, report, progress)
            finally:
                if own_backend:
                    await be.aclose()

        from .interrupt import graceful_sigint

        with graceful_sigint():  # Ctrl-C during in-process decoding: stop between steps, keep what finished
            _run_coroutine(main)
        model_name, api_service = cfg.model, cfg.api_service or be.name
        if backend is not None and be.name != cfg.backend:  # the instance passed in is what ran
            model_name, api_service = str(identity.get("model") or cfg.model), be.name
            log.info("generate: the %s backend passed in replaces backend '%s' of the config", be.name, cfg.backend)
        elif backend is not None:
            model_name = str(identity.get("model") or cfg.model)
        _attach(units, cfg, fragments, api_service, model_name, report)
    finally:
        if own_store:
            st.close()
    log.info("generate: %s", report.summary())
    for msg in report.error_messages[:20]:
        log.warning("generate failed: %s", msg)
    return report
