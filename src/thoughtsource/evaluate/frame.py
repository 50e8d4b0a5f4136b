"""The two entry points: :func:`evaluate_frame` (every answer extracted and scored in every mode, all tables, in one
pass) and :func:`evaluate` (that, the verdicts set and the paper's ``{"accuracy": {...}}``)."""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..extract import MODES, Extraction, Mode
from ..reasoning import DEFAULT_THINK_TAGS
from ..schema import GeneratedCot, ModelRecords, Sample, SampleSource, model_name
from .accuracy import accuracy_frame
from .compact import evaluate_compact
from .lengths import LengthRow, accuracy_by_length, length_row, lengths_frame, reasoning_table
from .result import ANSWERS_COLUMNS, META_COLUMNS, Evaluation
from .scoring import MEMO_SIZE, ExtractionMemo, format_value, iter_answers, score_answer
from .selfconsistency import majority_frame, sampling_table
from .tables import write_tables
from .verdicts import set_correct_answers

log = logging.getLogger(__package__)  # "thoughtsource.evaluate", as before the split


def evaluate_frame(
    collection: SampleSource,
    *,
    modes: Sequence[Mode] = MODES,  # type: ignore[assignment]
    mode: Mode = "strict",
    ks: Sequence[int] | None = None,
    memo: bool = True,
    think_tags: tuple[str, str] | None = DEFAULT_THINK_TAGS,
    answers_csv: str | os.PathLike[str] | None = None,
    keep_answers: bool = True,
) -> Evaluation:
    """Extract and score every answer in every mode; accuracy per combination; maj@k self-consistency.

    ``memo`` reuses the extraction of a text already seen in this call (same text, type, choices,
    source and mode), which is common with self-consistency samples and short extraction outputs.

    Reasoning models: think blocks (``think_tags``; None keeps them) are stripped before extraction, as
    lm-evaluation-harness's ``think_end_token`` does; the final content of a reasoning CoT is read as a CoT
    (answer phrases); an answer that differs from the last answer stated in the thinking is flagged
    (``contradicts_thinking``); a CoT cut off mid-thought (``truncated``) has no answer and is not scored:
    it is left out of accuracy and maj@k and counted apart.

    ``answers_csv``: for files larger than memory.  The per-answer table is written to that file as it is computed
    (what :func:`write_tables` writes as ``answers.csv``; not written when there are no answers) instead of being kept:
    ``Evaluation.answers`` is None and ``extractions`` empty, and every other table is computed from compact arrays of
    small ints (a few dozen bytes per answer, see :class:`.compact.Compact`).  The tables are those of the default path.
    ``keep_answers=False`` does the same without writing the per-answer table anywhere.
    """
    import pandas as pd

    for m in (*modes, mode):
        if m not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {m!r}")
    if answers_csv is not None or not keep_answers:
        return evaluate_compact(collection, modes, mode, ks, memo, think_tags,
                                Path(answers_csv) if answers_csv is not None else None)
    meta: dict[str, list[Any]] = {k: [] for k in META_COLUMNS}
    per_mode: dict[str, dict[str, list[Any]]] = {
        m: {k: [] for k in ("pred", "rule", "correct", "f1", "contradicts_thinking")} for m in modes
    }
    values: dict[str, list[object]] = {m: [] for m in modes}
    extractions: dict[str, list[Extraction]] = {m: [] for m in modes}
    # (dataset, split, sample id) -> (type, gold): what maj@k and pass@k score against, read in this one pass (a
    # sample without answers has gold None; a repeated id keeps its last sample, as a dict built over the file does)
    golds: dict[tuple[str, str, str], tuple[str, object, tuple[str, ...]]] = {}
    length_rows: list[LengthRow] = []
    models = ModelRecords()

    def on_sample(d: str, s: str, sample: Sample, gold: object) -> None:
        golds[(d, s, sample.id)] = (sample.type, gold, tuple(sample.choices))

    def on_cot(d: str, s: str, sample: Sample, ci: int, cot: GeneratedCot) -> None:
        length_rows.append(length_row(d, s, sample.id, ci, cot))
        models.add(cot)

    cache = ExtractionMemo(MEMO_SIZE) if memo else None
    for d, s, sample, gold, ci, cot, ans in iter_answers(collection, on_sample, on_cot):
        source, truncated, scored = score_answer(cache, sample, gold, cot, ans, modes, think_tags)
        for k, v in zip(
            META_COLUMNS,
            (d, s, sample.id, sample.type, model_name(cot.model), str(cot.instruction), str(cot.cot_trigger),
             str(ans.answer_extraction), ci, cot.id, ans.id, source, truncated, ans.correct_answer),
            strict=True,
        ):  # fmt: skip
            meta[k].append(v)
        for m, (e, contradiction, correct, f1) in zip(modes, scored, strict=True):
            cols = per_mode[m]
            cols["contradicts_thinking"].append(contradiction)
            cols["pred"].append(format_value(e.value))
            cols["rule"].append(e.rule)
            cols["correct"].append(correct)
            cols["f1"].append(f1)
            values[m].append(e.value)
            extractions[m].append(e)
    base = pd.DataFrame(meta)
    frames = [base.assign(mode=m, **per_mode[m]) for m in modes]
    answers = pd.concat(frames, ignore_index=True) if frames else base
    answers = answers[ANSWERS_COLUMNS]
    answers["truncated"] = answers["truncated"].astype(bool)
    answers.loc[answers["truncated"], "correct"] = False  # not scored: left out of every table (see without_truncated)
    answers["stored_correct"] = answers["stored_correct"].astype(object)
    accuracy = accuracy_frame(answers)
    majority = majority_frame(answers, values, golds, ks)
    sampling = sampling_table(answers, values, golds, ks)
    lengths = lengths_frame(length_rows)
    return Evaluation(answers=answers, accuracy=accuracy, majority=majority, mode=mode, extractions=extractions,
                      sampling=sampling, lengths=lengths, reasoning=reasoning_table(lengths),
                      by_length=accuracy_by_length(answers, lengths), models=models.records())


def evaluate(
    collection: SampleSource,
    *,
    mode: Mode = "strict",
    overwrite: bool = True,
    warn: bool = True,
    out_dir: str | os.PathLike[str] | None = None,
    ks: Sequence[int] | None = None,
    by_model: bool | None = None,
) -> dict[str, Any]:
    """Score every answer, set ``Answer.correct_answer``, return ``{"accuracy": {...}}`` (the paper's form).

    With CoTs of several models (or ``by_model=True``) the accuracies are keyed by model first:
    ``{"accuracy": {model: {key: value}}}`` (see :meth:`Evaluation.to_dict`).

    ``overwrite=False`` keeps a ``correct_answer`` that a file already holds.  ``out_dir`` also writes the
    tables (:func:`write_tables`).  Use :func:`evaluate_frame` for the DataFrames.
    """
    result = evaluate_frame(collection, mode=mode, ks=ks)
    changed = set_correct_answers(collection, result, mode=mode, overwrite=overwrite)
    if warn and changed:
        log.warning("evaluate: %d stored correct_answer values changed (mode %s)", changed, mode)
    if out_dir is not None:
        write_tables(result, out_dir)
    return result.to_dict(mode, by_model=by_model)
