"""The end of a generate run: what it did (:class:`GenerateReport`), what it would do (:func:`dry_run`), and
its results attached to the samples (:func:`attach`) as ``GeneratedCot`` / ``Answer`` objects whose ids derive from
the store keys (:func:`stable_id`), so a re-run attaches nothing twice."""

from __future__ import annotations

import hashlib
import uuid
from dataclasses import dataclass, field
from typing import Any

from ..prompts import Fragments
from ..prompts.build import answer_prompt
from ..reasoning import CONTENT_EXTRACTION, ReasoningInfo
from ..schema import Answer, GeneratedCot
from ..store import CompletionStore, StoredCompletion, completion_key
from .config import GenerateConfig
from .plan import CotUnit, answer_request

CHARS_PER_TOKEN = 4.0  # dry-run estimate of prompt tokens from characters


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
    store_consulted: bool = True  # a dry run that would have had to load the model for the store keys did not
    error_messages: list[str] = field(default_factory=list)

    def summary(self) -> str:
        if self.dry_run:
            return (
                f"dry run: {self.called} backend calls to make ({self.cot_requests} CoT + {self.answer_requests} answer requests, "
                + (f"{self.cached} already in the store" if self.store_consulted else
                   "the store not consulted: its keys need the model's weights fingerprint, and a dry run loads no model")
                + f"); estimated ~{self.est_prompt_tokens:,} prompt tokens (characters / {CHARS_PER_TOKEN:g}) and "
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



def stable_id(*parts: str) -> str:
    """A uuid derived from ``parts`` (store keys and where a result goes): the same inputs give the same id, so a
    re-run attaches nothing twice."""
    return str(uuid.UUID(hex=hashlib.sha256("|".join(parts).encode()).hexdigest()[:32]))



def _estimate_tokens(text: str) -> int:
    return max(1, round(len(text) / CHARS_PER_TOKEN))


def dry_run_report(units: list[CotUnit], store: CompletionStore, cfg: GenerateConfig, fragments: Fragments,
                   identity: dict[str, Any], consult_store: bool = True) -> GenerateReport:
    """What a run would call; ``consult_store=False`` (the keys need a model loaded): every call counted as to make."""
    report = GenerateReport(dry_run=True, store_consulted=consult_store)
    hits = store.get_many(u.key for u in units) if consult_store else {}
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
                answer_keys.append(completion_key(identity, answer_request(cfg, p)))
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



def attach_results(units: list[CotUnit], cfg: GenerateConfig, fragments: Fragments, api_service: str, model_name: str,
            report: GenerateReport) -> None:
    """Attach results in plan order; ids derive from store keys, so nothing is attached twice."""
    for u in units:
        if u.cot is None:
            continue
        where = f"{u.dataset}/{u.split}/{u.sample.id}"
        cot_id = stable_id(u.key, where)
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
            answer_id = stable_id(u.key, cot_id, CONTENT_EXTRACTION)
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
            answer_id = stable_id(key, cot_id, ex)
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

