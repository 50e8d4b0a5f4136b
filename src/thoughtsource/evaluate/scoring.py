"""One answer scored: the text it is read from (the answer-extraction output, the CoT, a reasoning model's final
content), its extraction in each mode (memoized), whether it contradicts the thinking, its correctness and token F1;
and the one pass over a file's answers that every table is computed from.

Reasoning models: think blocks are stripped before extraction, as lm-evaluation-harness's ``think_end_token`` does;
a CoT cut off mid-thought (``truncated``) has no answer and is not scored (:func:`without_truncated`).
"""

from __future__ import annotations

import math
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING

from ..answers import get as type_of
from ..extract import Extraction, Mode, Source, extract, is_correct, sample_gold, vote_key
from ..reasoning import CONTENT_EXTRACTION, reasoning_info, split_reasoning, strip_think
from ..schema import Answer, GeneratedCot, Sample, SampleSource

if TYPE_CHECKING:
    import pandas as pd

#: One answer's score in one mode: (extraction, contradicts the thinking, correct, token F1 or NaN).
ModeScore = tuple[Extraction, bool, bool, float]
#: What an extraction is a pure function of: (text, answer type, mode, choices, source).
MemoKey = tuple[str | None, str, Mode, tuple[str, ...], Source]
#: Called with (dataset, split, sample, its gold in the form :func:`~thoughtsource.extract.extract` returns).
OnSample = Callable[[str, str, Sample, object], None]
#: Called with (dataset, split, sample, CoT index, CoT).
OnCot = Callable[[str, str, Sample, int, GeneratedCot], None]


def iter_answers(collection: SampleSource, on_sample: OnSample | None = None, on_cot: OnCot | None = None,
                 ) -> Iterator[tuple[str, str, Sample, object, int, GeneratedCot, Answer]]:
    """Every answer as ``(dataset, split, sample, gold, CoT index, CoT, answer)``, in file order, in one pass over
    ``collection.samples()`` (a streamed file's samples are new objects on every pass: nothing is keyed by
    ``id(sample)``).  With ``on_sample`` each sample's gold is read (None without answers) and handed to it with the
    sample; ``on_cot`` gets every CoT, in the same pass."""
    for d, s, sample in collection.samples():
        gold = None
        if on_sample is not None:
            answered = any(cot.answers for cot in sample.generated_cot)
            gold = sample_gold(sample) if answered else None
            on_sample(d, s, sample, gold)
        for ci, cot in enumerate(sample.generated_cot):
            if on_cot is not None:
                on_cot(d, s, sample, ci, cot)
            for ans in cot.answers:
                yield d, s, sample, gold, ci, cot, ans


def score_answer(cache: ExtractionMemo | None, sample: Sample, gold: object, cot: GeneratedCot, ans: Answer,
                 modes: Sequence[Mode], think_tags: tuple[str, str] | None) -> tuple[Source, bool, list[ModeScore]]:
    """One answer scored: its source, whether its CoT was cut off mid-thought, and per mode ``(extraction, contradicts
    the thinking, correct, token F1)``."""
    t, choices = sample.type, tuple(sample.choices)
    text, source, thinking, truncated = _answer_source(cot, ans, think_tags)
    out = []
    for m in modes:
        e = _extract_memo(cache, text, t, m, choices, source)
        contradiction = False
        if thinking and e.value is not None:
            said = _extract_memo(cache, thinking, t, m, choices, "cot").value
            contradiction = said is not None and vote_key(said, t) != vote_key(e.value, t)
        f1 = type_of(t).f1(e.value, gold) if e.value is not None else None
        out.append((e, contradiction, is_correct(e.value, t, gold), math.nan if f1 is None else f1))
    return source, truncated, out


def _answer_source(cot: GeneratedCot, ans: Answer, think_tags: tuple[str, str] | None,
                   ) -> tuple[str | None, Source, str | None, bool]:
    """(text to extract from, source, the thinking to compare with or None, cut off mid-thought) of one answer."""
    info = reasoning_info(cot)
    text: str | None
    source: Source
    thinking: str | None
    if ans.answer_extraction == CONTENT_EXTRACTION or info is not None:  # a reasoning model's final content
        text, source, thinking = ans.answer, "cot", cot.cot
    elif ans.answer and ans.answer.strip():
        text, source, thinking = ans.answer, "extraction", None
    else:
        text, source, thinking = cot.cot, "cot", None
    if think_tags is not None and text and (think_tags[0] in text or think_tags[1] in text):
        inline = split_reasoning(text, think_tags)
        thinking = inline.reasoning if thinking is None else thinking
        text = strip_think(text, think_tags)
    truncated = bool(info is not None and info.truncated) or (
        thinking is not None and not (text or "").strip() and info is None)
    return text, source, thinking, truncated


#: The extraction memo keeps the most recently used texts only: over a file of long reasoning traces it would otherwise
#: hold every text (extraction is a pure function of the key: the bound changes no result, only what is recomputed).
MEMO_SIZE = 4096


class ExtractionMemo(OrderedDict[MemoKey, Extraction]):
    """A least-recently-used dict of at most ``size`` extractions."""

    def __init__(self, size: int) -> None:
        super().__init__()
        self.size = size

    def get(self, key: MemoKey, default: Extraction | None = None) -> Extraction | None:  # type: ignore[override]
        e = super().get(key, default)
        if e is not None:
            self.move_to_end(key)
        return e

    def __setitem__(self, key: MemoKey, value: Extraction) -> None:
        super().__setitem__(key, value)
        if len(self) > self.size:
            self.popitem(last=False)


def _extract_memo(cache: ExtractionMemo | None, text: str | None, t: str, m: Mode, choices: tuple[str, ...],
                  source: Source) -> Extraction:
    ckey = (text, t, m, choices, source)
    e = cache.get(ckey) if cache is not None else None
    if e is None:
        e = extract(text, t, mode=m, choices=choices, source=source)
        if cache is not None:
            cache[ckey] = e
    return e


def without_truncated(answers: pd.DataFrame) -> pd.DataFrame:
    """The answers that are scored: all but those of CoTs cut off mid-thought."""
    return answers[~answers["truncated"]] if "truncated" in answers and answers["truncated"].any() else answers


def format_value(value: object) -> str | None:
    """An extracted value as the answers table shows it (``pred``): a set of letters joined, a float in ``%g``."""
    if value is None:
        return None
    if isinstance(value, frozenset):
        return "; ".join(sorted(value))
    if isinstance(value, float):
        return f"{value:g}" if value == value and abs(value) < 1e15 else str(value)
    return str(value)
