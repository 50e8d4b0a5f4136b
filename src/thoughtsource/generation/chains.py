"""Flexible chains and self-reflection: the published library's ``self_generate_extract``, ``self_generate``,
``self_extract`` and ``self_reflect``, on our backends and completion store.

A chain is a few steps, each a template (the published placeholders ``{instruction}``, ``{question}``,
``{answer_choices}``, ``{cot_trigger}``, ``{cot}``, ``{answer_extraction}``, plus ``{answer}`` — the answer
being reflected on — ``{reflection}`` and ``{reflection_instruction}``) whose completion fills the next
step's placeholder.  Every completion goes through the store first (a re-run makes no calls), and results
are attached as ordinary :class:`~thoughtsource.schema.GeneratedCot` / :class:`~thoughtsource.schema.Answer`
objects with stable ids, so they are evaluated, viewed, merged and exported like every other CoT.

* :func:`self_generate_extract`: CoT, then the answer extracted from it (one new CoT with one answer);
* :func:`self_generate`: the CoT only (no answer);
* :func:`self_extract`: an answer for CoTs already there (chosen by :class:`Target`, not "the first one"),
  appended to each of them;
* :func:`self_reflect`: the meta-reasoning stage.  For each chosen CoT with an answer the model reads the
  question, its CoT and its answer and critiques them (the ``refl-01`` instruction: "…critique the answer.
  Based on the critique, reconsider the other answer options and give a single final answer."); then the
  final answer is extracted from the critique.  The critique is stored as a new CoT (``instruction`` =
  the reflection instruction, ``cot_trigger`` = that of the CoT reflected on) with the revised answer;
  ``model["reflects_on"]`` / ``model["answer_before"]`` name the CoT and answer it revises.
  :func:`reflection_changes` tells which answers reflection flipped (wrong → right, right → wrong).

Provenance of everything a chain attaches: ``model`` = {name, temperature, max_tokens, "chain": chain name,
"step templates"...}; ``author``, ``api_service``, ``date`` as for :func:`~thoughtsource.generation.generate`.
Every step's requests go through the one store-first :class:`~thoughtsource.generation.runner.Runner`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..backends.base import Backend
from ..errors import ConfigError
from ..extract import extract, is_correct, sample_gold
from ..prompts import AUTO, Fragments, load_fragments
from ..prompts.build import resolve_extraction
from ..prompts.templates import DEFAULT_ANSWER, DEFAULT_COT, format_choices, render, template_problems
from ..schema import Answer, GeneratedCot, Sample, SampleSource, model_name
from ..store import CompletionStore, StoredCompletion
from .attach import stable_id
from .config import GenerateConfig, make_backend
from .plan import chain_request
from .runner import Runner, run_coroutine

log = logging.getLogger(__name__)

#: the critique step: the question, the CoT and answer reflected on, and the reflection instruction
REFLECT_TEMPLATE = (
    "{question}\n{answer_choices}\n\n{cot_trigger}{cot}\n{answer_extraction}{answer}\n\n{reflection_instruction}\nCritique:"
)
#: the revised-answer step: the critique, then the answer-extraction prompt
REFLECT_ANSWER_TEMPLATE = REFLECT_TEMPLATE + "{reflection}\n{answer_extraction}"
CHAIN_VARIABLES = ("instruction", "question", "answer_choices", "cot_trigger", "cot", "answer_extraction", "context",
                   "answer", "reflection", "reflection_instruction")


@dataclass(frozen=True)
class Target:
    """Which existing generated CoTs a chain works on (``self_extract``, ``self_reflect``).

    Each field set must match; ``None`` matches anything.  ``with_answer`` requires an answer (reflection
    needs one); reflections themselves are never targets unless ``reflections=True``.
    """

    author: str | None = None
    model: str | None = None
    instruction: str | None = None
    cot_trigger: str | None = None
    cot_id: str | None = None
    with_answer: bool = False
    reflections: bool = False

    def matches(self, cot: GeneratedCot) -> bool:
        if not self.reflections and isinstance(cot.model, dict) and cot.model.get("chain") == "self_reflect":
            return False
        if self.with_answer and not any(a.answer and a.answer.strip() for a in cot.answers):
            return False
        return all(want is None or want == got for want, got in (
            (self.author, cot.author), (self.model, model_name(cot.model)), (self.instruction, cot.instruction),
            (self.cot_trigger, cot.cot_trigger), (self.cot_id, cot.id)))


@dataclass
class ChainReport:
    chain: str
    requests: int = 0
    cached: int = 0
    called: int = 0
    attached_cots: int = 0
    attached_answers: int = 0
    skipped: list[str] = field(default_factory=list)  # sample ids without a target CoT

    def summary(self) -> str:
        return (f"{self.chain}: {self.requests} requests ({self.cached} from the store, {self.called} called); "
                f"attached {self.attached_cots} CoTs and {self.attached_answers} answers; {len(self.skipped)} samples skipped")


@dataclass
class _Unit:
    """One run of a chain on one sample (and, for extract/reflect, one CoT of it)."""

    dataset: str
    split: str
    sample: Sample
    values: dict[str, str]
    extraction: str
    target: GeneratedCot | None = None
    target_answer: Answer | None = None
    outputs: dict[str, StoredCompletion] = field(default_factory=dict)
    texts: dict[str, str] = field(default_factory=dict)  # step output -> its rendered prompt


def _values(sample: Sample, fragments: Fragments, instruction: str | None, trigger: str | None) -> dict[str, str]:
    return {
        "instruction": fragments.instruction(instruction),
        "question": sample.question,
        "answer_choices": format_choices(sample.choices) if sample.choices else "",
        "cot_trigger": fragments.cot_trigger(trigger) if trigger else "",
        "context": sample.context or "",
    }


def _model_info(cfg: GenerateConfig, chain: str, templates: dict[str, str], name: str | None = None, **extra: Any) -> dict[str, Any]:
    return {**cfg.model_info(0, name), "chain": chain, "templates": templates, **extra}


def _run_chain(
    collection: SampleSource,
    chain: str,
    steps: Sequence[tuple[str, str, bool]],  # (output, template, sampled): output "cot" | "answer" | "reflection"
    make_units: Callable[[Fragments], tuple[list[_Unit], list[str]]],
    attach: Callable[[list[_Unit], Fragments, str, str], tuple[int, int]],
    config: GenerateConfig | dict[str, Any] | None,
    backend: Backend | None,
    store: CompletionStore | str | None,
    overrides: dict[str, Any],
) -> ChainReport:
    cfg = GenerateConfig.parse(config, **overrides)
    problems = [f"{out}: {p}" for out, tpl, _ in steps for p in template_problems(tpl, CHAIN_VARIABLES)]
    if problems:
        raise ConfigError(f"invalid {chain} templates", problems=problems)
    fragments = load_fragments(cfg.fragments_files)
    units, skipped = make_units(fragments)
    report = ChainReport(chain, skipped=skipped)
    be = backend or make_backend(cfg)
    st = store if isinstance(store, CompletionStore) else CompletionStore(store if store is not None else cfg.db)
    try:
        # chains store what the backend returns, empty completions included, one request per backend call
        runner = Runner(be, st, concurrency=cfg.concurrency, allow_empty=True)

        async def main() -> None:
            try:
                for output, template, sampled in steps:
                    texts = []
                    for u in units:
                        values = {**u.values, **{k: v.text for k, v in u.outputs.items()}}
                        values["answer_extraction"] = fragments.answer_extraction(u.extraction)
                        u.texts[output] = render(template, values)
                        texts.append(u.texts[output])
                    tokens = cfg.max_tokens if sampled else cfg.answer_max_tokens
                    rows = await runner.complete([chain_request(cfg, t, max_tokens=tokens, sampled=sampled) for t in texts])
                    report.requests += len(rows)
                    report.cached += sum(cached for _, cached in rows)
                    for u, (row, _) in zip(units, rows, strict=True):
                        u.outputs[output] = row
            finally:
                if backend is None:
                    await be.aclose()

        run_coroutine(main)
        report.called = runner.called
        api_service = cfg.api_service or be.name
        model_name = cfg.model if backend is None else str(runner.identity.get("model") or cfg.model)
        report.attached_cots, report.attached_answers = attach(units, fragments, api_service, model_name)
    finally:
        if not isinstance(store, CompletionStore):
            st.close()
    log.info("%s", report.summary())
    return report


def _targets(collection: SampleSource, target: Target) -> tuple[list[tuple[str, str, Sample, GeneratedCot]], list[str]]:
    found: list[tuple[str, str, Sample, GeneratedCot]] = []
    skipped: list[str] = []
    for d, s, sample in collection.samples():
        mine = [c for c in sample.generated_cot if target.matches(c)]
        if not mine:
            skipped.append(sample.id)
        found.extend((d, s, sample, c) for c in mine)
    return found, skipped


def _new_cot(u: _Unit, cfg: GenerateConfig, fragments: Fragments, *, cot_id: str, instruction: str | None, trigger: str | None,
             template: str, text_key: str, output: str, api_service: str, model: dict[str, Any], comment: str) -> GeneratedCot:
    row = u.outputs[output]
    return GeneratedCot(id=cot_id, fragments_version=fragments.version, instruction=instruction, cot_trigger=trigger,
                        cot_trigger_template=template, prompt_text=u.texts[text_key], cot=row.text.strip(), answers=[],
                        author=cfg.author, date=row.created_at, api_service=api_service, model=model, comment=comment,
                        annotations=[])


def self_generate_extract(
    collection: SampleSource, config: GenerateConfig | dict[str, Any] | None = None, *, extract: bool = True,
    cot_template: str = DEFAULT_COT, answer_template: str = DEFAULT_ANSWER, backend: Backend | None = None,
    store: CompletionStore | str | None = None, **overrides: Any,
) -> ChainReport:
    """For every sample × instruction × trigger of the config: a CoT and (``extract``) its answer, one chain each."""
    cfg = GenerateConfig.parse(config, **overrides)
    chain = "self_generate_extract" if extract else "self_generate"
    steps = [("cot", cot_template, True)] + ([("answer", answer_template, False)] if extract else [])
    templates = {out: tpl for out, tpl, _ in steps}

    def make_units(fragments: Fragments) -> tuple[list[_Unit], list[str]]:
        units = []
        for d, s, sample in collection.in_idx_range(cfg.idx_range).samples():
            for instruction in cfg.instruction_keys:
                for trigger in cfg.cot_trigger_keys:
                    ex = resolve_extraction(cfg.answer_extraction_keys[0], sample, fragments)
                    units.append(_Unit(d, s, sample, {**_values(sample, fragments, instruction, trigger),
                                                      "_instruction": instruction or "", "_trigger": trigger}, ex))
        return units, []

    def attach(units: list[_Unit], fragments: Fragments, api_service: str, model_name: str) -> tuple[int, int]:
        cots = answers = 0
        for u in units:
            cot_id = stable_id(chain, u.outputs["cot"].key, f"{u.dataset}/{u.split}/{u.sample.id}")
            if any(c.id == cot_id for c in u.sample.generated_cot):
                continue
            cot = _new_cot(u, cfg, fragments, cot_id=cot_id, instruction=u.values["_instruction"] or None,
                           trigger=u.values["_trigger"], template=cot_template, text_key="cot", output="cot",
                           api_service=api_service, model=_model_info(cfg, chain, templates, name=model_name), comment=chain)
            if extract:
                row = u.outputs["answer"]
                cot.answers.append(Answer(id=stable_id(row.key, cot_id), answer_extraction=u.extraction,
                                          answer_extraction_template=answer_template, answer_extraction_text=u.texts["answer"],
                                          answer=row.text.strip(), correct_answer=None))
                answers += 1
            u.sample.generated_cot.append(cot)
            cots += 1
        return cots, answers

    return _run_chain(collection, chain, steps, make_units, attach, cfg, backend, store, {})


def self_generate(collection: SampleSource, config: GenerateConfig | dict[str, Any] | None = None, **kwargs: Any) -> ChainReport:
    """CoTs only, no answers (answers can be added later with :func:`self_extract`)."""
    return self_generate_extract(collection, config, extract=False, **kwargs)


def self_extract(
    collection: SampleSource, config: GenerateConfig | dict[str, Any] | None = None, *, target: Target = Target(),
    answer_template: str = DEFAULT_ANSWER, backend: Backend | None = None, store: CompletionStore | str | None = None,
    **overrides: Any,
) -> ChainReport:
    """An answer (the config's first answer-extraction key; ``auto`` per sample) for every CoT ``target`` selects,
    appended to that CoT."""
    cfg = GenerateConfig.parse(config, **overrides)

    def make_units(fragments: Fragments) -> tuple[list[_Unit], list[str]]:
        found, skipped = _targets(collection, target)
        units = [_Unit(d, s, sample, {**_values(sample, fragments, cot.instruction, cot.cot_trigger), "cot": cot.cot or ""},
                       resolve_extraction(cfg.answer_extraction_keys[0], sample, fragments), target=cot)
                 for d, s, sample, cot in found]
        return units, skipped

    def attach(units: list[_Unit], fragments: Fragments, api_service: str, model_name: str) -> tuple[int, int]:
        added = 0
        for u in units:
            assert u.target is not None
            row = u.outputs["answer"]
            answer_id = stable_id("self_extract", row.key, str(u.target.id))
            if any(a.id == answer_id for a in u.target.answers):
                continue
            u.target.answers.append(Answer(id=answer_id, answer_extraction=u.extraction, answer_extraction_template=answer_template,
                                           answer_extraction_text=u.texts["answer"], answer=row.text.strip(), correct_answer=None,
                                           extracted_by=_model_info(cfg, "self_extract", {"answer": answer_template}, name=model_name)))
            added += 1
        return 0, added

    # the stored CoT text is the completion as it was: the trigger and the CoT join as in stage 2 of generate
    template = answer_template.replace("{cot_trigger}{cot}", "{cot_trigger} {cot}")
    return _run_chain(collection, "self_extract", [("answer", template, False)], make_units, attach, cfg, backend, store, {})


def self_reflect(
    collection: SampleSource, config: GenerateConfig | dict[str, Any] | None = None, *, target: Target = Target(),
    reflection_instruction: str = "refl-01", reflect_template: str = REFLECT_TEMPLATE,
    answer_template: str = REFLECT_ANSWER_TEMPLATE, backend: Backend | None = None, store: CompletionStore | str | None = None,
    **overrides: Any,
) -> ChainReport:
    """Self-reflection on every CoT ``target`` selects that has an answer: a critique, then a revised answer,
    attached as a new CoT (see the module docstring)."""
    cfg = GenerateConfig.parse(config, **overrides)
    chain = "self_reflect"
    wanted = Target(**{**target.__dict__, "with_answer": True})
    templates = {"reflection": reflect_template, "answer": answer_template}

    def make_units(fragments: Fragments) -> tuple[list[_Unit], list[str]]:
        instruction_text = fragments.instruction(reflection_instruction)
        found, skipped = _targets(collection, wanted)
        units = []
        for d, s, sample, cot in found:
            answer = next(a for a in cot.answers if a.answer and a.answer.strip())
            assert answer.answer is not None  # picked for a non-empty answer
            extraction = answer.answer_extraction if answer.answer_extraction in fragments.answer_extractions else \
                resolve_extraction(AUTO, sample, fragments)
            values = {**_values(sample, fragments, None, cot.cot_trigger if cot.cot_trigger in fragments.cot_triggers else None),
                      "cot": " " + (cot.cot or "").strip(), "answer": " " + answer.answer.strip(),
                      "reflection_instruction": instruction_text}
            units.append(_Unit(d, s, sample, values, extraction, target=cot, target_answer=answer))
        return units, skipped

    def attach(units: list[_Unit], fragments: Fragments, api_service: str, model_name: str) -> tuple[int, int]:
        cots = 0
        for u in units:
            assert u.target is not None and u.target_answer is not None
            cot_id = stable_id(chain, u.outputs["reflection"].key, str(u.target.id))
            if any(c.id == cot_id for c in u.sample.generated_cot):
                continue
            model = _model_info(cfg, chain, templates, name=model_name, reflects_on=u.target.id, answer_before=u.target_answer.id,
                                reflection_instruction=reflection_instruction)
            cot = _new_cot(u, cfg, fragments, cot_id=cot_id, instruction=reflection_instruction, trigger=u.target.cot_trigger,
                           template=reflect_template, text_key="reflection", output="reflection", api_service=api_service,
                           model=model, comment=f"self-reflection on CoT {u.target.id}")
            row = u.outputs["answer"]
            cot.answers.append(Answer(id=stable_id(row.key, cot_id), answer_extraction=u.extraction,
                                      answer_extraction_template=answer_template, answer_extraction_text=u.texts["answer"],
                                      answer=row.text.strip(), correct_answer=None))
            u.sample.generated_cot.append(cot)
            cots += 1
        return cots, cots

    steps = [("reflection", reflect_template, True), ("answer", answer_template, False)]
    return _run_chain(collection, chain, steps, make_units, attach, cfg, backend, store, {})


@dataclass(frozen=True)
class ReflectionChange:
    dataset: str
    split: str
    sample_id: str
    cot_id: str  # the CoT reflected on
    before: Any
    after: Any
    correct_before: bool
    correct_after: bool


def reflection_changes(collection: SampleSource, mode: str = "strict") -> list[ReflectionChange]:
    """For every self-reflection: the answer before and after, each scored (strict or flexible extraction)."""
    out = []
    for d, s, sample in collection.samples():
        by_id = {c.id: c for c in sample.generated_cot}
        gold = sample_gold(sample)
        for c in sample.generated_cot:
            if not (isinstance(c.model, dict) and c.model.get("chain") == "self_reflect") or not c.answers:
                continue
            original = by_id.get(c.model.get("reflects_on"))
            before = next((a for a in (original.answers if original else []) if a.id == c.model.get("answer_before")), None)
            if before is None:
                continue
            b = extract(before.answer or "", sample.type, mode=mode, choices=sample.choices).value  # type: ignore[arg-type]
            a = extract(c.answers[0].answer or "", sample.type, mode=mode, choices=sample.choices).value  # type: ignore[arg-type]
            out.append(ReflectionChange(d, s, sample.id, str(original.id if original else ""), b, a,
                                        bool(is_correct(b, sample.type, gold)), bool(is_correct(a, sample.type, gold))))
    return out
