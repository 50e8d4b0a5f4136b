"""The plan of a generate run: its units of work (one stage-1 request each, with the stage-2 extractions to run on
its CoT) and the requests they send, each with its store key."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ..backends.base import Request
from ..errors import ConfigError
from ..prompts import Fragments
from ..prompts.build import Prompt, chat_messages, cot_prompt, exemplar_candidates, resolve_extraction
from ..schema import Sample, SampleSource
from ..store import StoredCompletion, completion_key
from .config import GenerateConfig


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



def make_request(cfg: GenerateConfig, prompt: Prompt, *, max_tokens: int, sampled: bool, sample_index: int, stop: Sequence[str]) -> Request:
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


def answer_request(cfg: GenerateConfig, prompt: Prompt) -> Request:
    return make_request(cfg, prompt, max_tokens=cfg.answer_max_tokens, sampled=False, sample_index=0, stop=())



def chain_request(cfg: GenerateConfig, text: str, *, max_tokens: int, sampled: bool) -> Request:
    """A request of one chain step (:mod:`.chains`): the rendered template as the prompt, or as one user message in
    chat mode; a sampled step uses the config's temperature, top_p, stop sequences and seed, the others are greedy."""
    return Request(prompt="" if cfg.chat else text, messages=chat_messages(text) if cfg.chat else None,
                   max_tokens=max_tokens, temperature=cfg.temperature if sampled else 0.0,
                   top_p=cfg.top_p if sampled else 1.0, stop=tuple(cfg.stop) if sampled else (),
                   seed=cfg.seed if sampled and cfg.temperature > 0 else None)


def plan_units(
    collection: SampleSource, cfg: GenerateConfig, fragments: Fragments, identity: dict[str, Any],
    exemplar_pool: SampleSource | None = None,
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
                    request = make_request(cfg, prompt, max_tokens=cfg.max_tokens, sampled=True, sample_index=i, stop=cfg.stop)
                    units.append(CotUnit(dataset, split, sample, instruction, trigger, i, prompt, request,
                                         completion_key(identity, request), extractions))
    return units

