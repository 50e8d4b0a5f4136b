"""Generate CoTs and answers for a collection: plan → store lookups → backend calls → attach.

Read top to bottom, :func:`generate` does:

1. **plan** (:mod:`.plan`): every sample × instruction × CoT trigger × ``n`` (self-consistency) is one stage-1
   request (question + instruction + trigger → CoT), with its store key;
2. **look up** the keys in the :class:`~thoughtsource.store.CompletionStore`;
3. **call** the backend for the missing keys only, concurrently and in batches (:class:`.runner.Runner`); every
   finished completion is committed to the store before anything else happens with it;
4. **stage 2**: for every CoT and answer-extraction prompt, the CoT + extraction prompt → answer text
   (store first, backend only for missing keys, greedy);
5. **attach** (:mod:`.attach`) ``GeneratedCot`` / ``Answer`` objects in plan order, with ids derived from the store
   keys, so a re-run attaches nothing twice and a killed run, resumed, gives the same collection.

A run killed at any point loses only the requests in flight; a finished run re-run makes zero calls.
The config is :class:`.config.GenerateConfig` (it also takes the published library's dict: :mod:`.published`);
the published library's chains and self-reflection are in :mod:`.chains`, on the same runner.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import os
from collections.abc import Iterable, Iterator
from typing import Any

from ..backends.base import Backend
from ..console import progress
from ..errors import BackendError, ConfigError
from ..interrupt import graceful_sigint
from ..io import Entry
from ..prompts import Fragments, load_fragments
from ..prompts.build import answer_prompt
from ..schema import SampleSource
from ..store import CompletionStore
from .attach import GenerateReport, attach_results, dry_run_report
from .config import GenerateConfig, make_backend
from .plan import CotUnit, answer_request, plan_units
from .runner import Runner, run_coroutine

__all__ = ["GenerateConfig", "GenerateReport", "generate", "generate_entries", "make_backend"]

log = logging.getLogger(__name__)


def generate(
    collection: SampleSource,
    config: GenerateConfig | dict[str, Any] | None = None,
    *,
    backend: Backend | str | None = None,
    store: CompletionStore | str | os.PathLike[str] | None = None,
    progress: bool = True,
    dry_run: bool = False,
    exemplar_pool: SampleSource | None = None,
    **overrides: Any,
) -> GenerateReport:
    """Generate CoTs (and extracted answers) for every sample of ``collection``, in place.

    ``config`` is a :class:`GenerateConfig`, a dict (ours, or the paper's Figure-3 dict) or None;
    ``overrides`` are config fields on top of it.  ``backend`` is a backend name (a config field) or
    a backend instance that replaces the one the config names (it is then not closed here); ``store`` is a store or its path (default: ``config.db``, else
    ``$THOUGHTSOURCE_HOME/completions.sqlite``).
    """
    session = _Session(config, backend, store, overrides)
    try:
        return session.run(collection, progress=progress, dry_run=dry_run, exemplar_pool=exemplar_pool, close_backend=True)
    finally:
        session.close(backend_closed=True)


#: Samples generated for at a time by :func:`generate_entries`.
CHUNK_SAMPLES = 256


def generate_entries(
    entries: Iterable[Entry],
    config: GenerateConfig | dict[str, Any] | None = None,
    *,
    report: GenerateReport,
    backend: Backend | str | None = None,
    store: CompletionStore | str | os.PathLike[str] | None = None,
    progress: bool = True,
    chunk: int | None = None,
    **overrides: Any,
) -> Iterator[Entry]:
    """:func:`generate` over a stream of a file's entries (``io.iter_entries``), ``chunk`` samples at a time: each
    entry is yielded once its chunk's CoTs and answers are attached, for ``io.write_entries`` to write as it goes, so
    memory does not grow with the file.  The counts of every chunk are added to ``report``.  One backend and store
    serve every chunk; as in :func:`generate`, every completion is in the store before it is attached, so a run killed
    at any point and started again asks only for what was in flight.  No few-shot exemplars and no ``idx_range``
    (both need the whole collection: :func:`generate` does them)."""
    session = _Session(config, backend, store, overrides)
    try:
        if session.cfg.few_shot or session.cfg.idx_range is not None:
            raise ConfigError("generating over a stream takes no few_shot and no idx_range; load the collection")
        for part in _chunks(entries, chunk or CHUNK_SAMPLES):
            samples = _Chunk(part)
            if samples.data:
                done = session.run(samples, progress=progress, dry_run=False, exemplar_pool=None, close_backend=False)
                for f in dataclasses.fields(GenerateReport):
                    if f.name not in ("dry_run", "store_consulted"):
                        setattr(report, f.name, getattr(report, f.name) + getattr(done, f.name))
            yield from part
    finally:
        session.close(backend_closed=False)


class _Chunk:
    """A few consecutive entries of a file as a :class:`~thoughtsource.schema.SampleSource`."""

    def __init__(self, entries: list[Entry]) -> None:
        self.data: dict[str, dict[str, list[Any]]] = {}
        for e in entries:
            if e.sample is not None and e.split is not None:
                self.data.setdefault(e.dataset, {}).setdefault(e.split, []).append(e.sample)

    def samples(self) -> Iterator[tuple[str, str, Any]]:
        for d, splits in self.data.items():
            for s, xs in splits.items():
                for x in xs:
                    yield d, s, x

    def in_idx_range(self, idx_range: tuple[int, int] | None) -> _Chunk:
        assert idx_range is None  # generate_entries refuses idx_range
        return self


def _chunks(entries: Iterable[Entry], size: int) -> Iterator[list[Entry]]:
    part: list[Entry] = []
    samples = 0
    for e in entries:
        part.append(e)
        samples += e.sample is not None
        if samples == size:
            yield part
            part, samples = [], 0
    if part:
        yield part


class _Session:
    """A run's config, fragments, backend and store, for one collection (:func:`generate`) or for every chunk of a
    stream (:func:`generate_entries`)."""

    def __init__(self, config: GenerateConfig | dict[str, Any] | None, backend: Backend | str | None,
                 store: CompletionStore | str | os.PathLike[str] | None, overrides: dict[str, Any]) -> None:
        if isinstance(backend, str):
            overrides["backend"], backend = backend, None
        self.cfg = cfg = GenerateConfig.parse(config, **overrides)
        self.fragments = fragments = load_fragments(cfg.fragments_files)
        problems = (fragments.check("instructions", cfg.instruction_keys) + fragments.check("cot_triggers", cfg.cot_trigger_keys)
                    + fragments.check("answer_extractions", cfg.answer_extraction_keys))
        if problems:
            raise ConfigError("unknown fragment ids in the generate config", problems=problems)
        self.passed = backend
        self.be = make_backend(cfg) if backend is None else backend
        self.own_store = not isinstance(store, CompletionStore)
        self.st = store if isinstance(store, CompletionStore) else CompletionStore(store if store is not None else cfg.db)
        self.ran = False

    def close(self, *, backend_closed: bool) -> None:
        """Close the store if it was opened here, and the backend if it was made here and a run has not closed it."""
        try:
            if self.passed is None and self.ran and not backend_closed:
                run_coroutine(self.be.aclose)
        finally:
            if self.own_store:
                self.st.close()

    def run(self, collection: SampleSource, *, progress: bool, dry_run: bool, exemplar_pool: SampleSource | None,
            close_backend: bool) -> GenerateReport:
        cfg, fragments, be, st, backend = self.cfg, self.fragments, self.be, self.st, self.passed
        cheap = getattr(be, "cache_identity_without_loading", None) if dry_run else None
        identity = cheap() if callable(cheap) else be.cache_identity()
        consult_store = identity is not None  # a dry run loads no model: without its fingerprint, no store keys
        if identity is None:
            identity = {"backend": be.name, "weights": "not computed (dry run)"}
        # 1. plan: the stage-1 requests and their store keys
        units = plan_units(collection.in_idx_range(cfg.idx_range), cfg, fragments, identity, exemplar_pool)
        if dry_run:
            report = dry_run_report(units, st, cfg, fragments, identity, consult_store=consult_store)
            log.debug("%s", report.summary())
            return report
        report = GenerateReport(cot_requests=len(units), answer_requests=sum(len(u.extractions) for u in units))

        async def main() -> None:  # 2.-4. store lookups, backend calls, stage 2 (on the runner)
            try:
                await _call(units, be, st, cfg, fragments, identity, report, progress)
            finally:
                if backend is None and close_backend:
                    await be.aclose()

        self.ran = True
        with graceful_sigint():  # Ctrl-C during in-process decoding: stop between steps, keep what finished
            run_coroutine(main)
        model_name, api_service = cfg.model, cfg.api_service or be.name
        if backend is not None and be.name != cfg.backend:  # the instance passed in is what ran
            model_name, api_service = str(identity.get("model") or cfg.model), be.name
            cfg = cfg.model_copy(update={"backend": be.name})
            log.info("generate: the %s backend passed in replaces backend '%s' of the config", be.name, cfg.backend)
        elif backend is not None:
            model_name = str(identity.get("model") or cfg.model)
        attach_results(units, cfg, fragments, api_service, model_name, report)  # 5. attach, in plan order
        log.info("generate: %s", report.summary())
        for msg in report.error_messages[:20]:
            log.warning("generate failed: %s", msg)
        return report


async def _call(units: list[CotUnit], backend: Backend, store: CompletionStore, cfg: GenerateConfig, fragments: Fragments,
                identity: dict[str, Any], report: GenerateReport, show_progress: bool) -> None:
    """Steps 2 to 4 for every unit: its CoT from the store or the backend, then each of its answer extractions."""
    counters = getattr(backend, "counters", None)
    retries_before = counters.retries if counters is not None else 0  # a backend passed in may have run before
    total = sum(1 + len(u.extractions) for u in units)
    with progress("retries", "errors", enabled=show_progress) as bar:
        task = bar.add_task("generate", total=total, retries=0, errors=0)

        def tick(n: int = 1) -> None:
            retries = counters.retries - retries_before if counters is not None else runner.retries
            bar.update(task, retries=retries, errors=report.errors)
            if n:
                bar.advance(task, n)

        runner = Runner(backend, store, identity, batch_size=cfg.batch_size, concurrency=cfg.concurrency,
                        on_done=lambda: tick(0), allow_empty=cfg.allow_empty)
        cot_hits = store.get_many(u.key for u in units)

        async def run_unit(u: CotUnit) -> None:
            try:
                u.cot, cached = await runner.get(u.key, u.request, cot_hits.get(u.key))
                report.cached += cached
                tick()
                if u.cot.reasoning is not None:  # a reasoning model: its final content is the answer, no extraction prompt
                    tick(len(u.extractions))
                    return
                prompts = {ex: answer_prompt(u.prompt, u.cot.text, fragments, ex) for ex in u.extractions}
                keys = {ex: runner.key(answer_request(cfg, p)) for ex, p in prompts.items()}
                hits = store.get_many(keys.values())
                for ex, p in prompts.items():
                    row, cached = await runner.get(keys[ex], answer_request(cfg, p), hits.get(keys[ex]))
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
        if runner.fatal is not None:
            raise runner.fatal
        report.called = runner.called
        report.retries = counters.retries - retries_before if counters is not None else runner.retries

