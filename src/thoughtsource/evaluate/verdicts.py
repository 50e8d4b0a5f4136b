"""Verdicts written back: ``Answer.correct_answer`` set from an :class:`~.result.Evaluation`, on a collection in memory
(:func:`set_correct_answers`) or on a file streamed again in the same order (:func:`scored_entries`,
:func:`scored_samples`).  A CoT cut off mid-thought has no answer: its ``correct_answer`` is None, not False."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from ..extract import Mode
from ..io import Entry
from ..schema import Answer, Sample, SampleSource
from .result import Evaluation
from .scoring import iter_answers


def set_correct_answers(collection: SampleSource, result: Evaluation, *, mode: Mode = "strict", overwrite: bool = True) -> int:
    """Write ``result``'s verdicts (``mode``) into ``Answer.correct_answer``; returns how many stored values changed."""
    verdicts = answer_verdicts(result, mode)
    return sum(_set_verdict(ans, *next(verdicts), overwrite) for *_, ans in iter_answers(collection))


def scored_entries(entries: Iterable[Entry], result: Evaluation, *, mode: Mode = "strict", overwrite: bool = True,
                   ) -> Iterator[Entry]:
    """:func:`set_correct_answers` over a stream: the :class:`~thoughtsource.io.Entry` items of the file ``result``
    was computed from (in the same order), each sample with its verdicts set, for :func:`~thoughtsource.io.write_entries`."""
    verdicts = answer_verdicts(result, mode)
    for e in entries:
        if e.sample is not None:
            for cot in e.sample.generated_cot:
                for ans in cot.answers:
                    _set_verdict(ans, *next(verdicts), overwrite)
        yield e


def scored_samples(samples: Iterable[tuple[str, str, Sample]], result: Evaluation, *, mode: Mode = "strict",
                   overwrite: bool = True) -> Iterator[tuple[str, str, Sample]]:
    """:func:`set_correct_answers` over a stream of ``(dataset, split, sample)`` (a file ``result`` was computed from,
    read again in the same order): each sample with its verdicts set."""
    verdicts = answer_verdicts(result, mode)
    for d, s, sample in samples:
        for cot in sample.generated_cot:
            for ans in cot.answers:
                _set_verdict(ans, *next(verdicts), overwrite)
        yield d, s, sample


def answer_verdicts(result: Evaluation, mode: Mode) -> Iterator[tuple[bool, bool]]:
    """(correct, truncated) of every answer of ``result`` in ``mode``, in file order."""
    rows = result.answers_in(mode, scored_only=False)[["correct", "truncated"]]
    return iter(zip(rows["correct"].tolist(), rows["truncated"].tolist(), strict=True))


def _set_verdict(ans: Answer, correct: bool, truncated: bool, overwrite: bool) -> int:
    """Set one answer's ``correct_answer``; 1 if a stored value changed."""
    if truncated:  # cut off mid-thought: no answer, not a wrong one
        ans.correct_answer = None
        return 0
    ok = bool(correct)
    changed = 0
    if ans.correct_answer is None or overwrite:
        changed = int(ans.correct_answer is not None and ans.correct_answer != ok)
        ans.correct_answer = ok
    return changed
