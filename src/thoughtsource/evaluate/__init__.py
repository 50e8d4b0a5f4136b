"""Scoring of generated CoTs: correct_answer, accuracy with Wilson intervals, self-consistency.

:func:`evaluate_frame` extracts every answer of a :class:`~thoughtsource.collection.Collection` in
both modes (``strict`` and ``flexible``, see :mod:`thoughtsource.extract`) and returns an
:class:`Evaluation` holding three pandas DataFrames:

``answers``
    one row per (answer, mode): dataset, split, sample, type, model, instruction, cot_trigger,
    answer_extraction, the source read (``extraction`` = the answer-extraction output, ``cot`` = the
    CoT itself when there was none), the predicted value, the rule that found it, ``correct``, token F1
    (text answers) and the ``correct_answer`` the file stored before scoring (``stored_correct``).
``accuracy``
    one row per (dataset, split, model, instruction, cot_trigger, answer_extraction, mode): n (answers),
    questions, correct, accuracy, the 95% interval, the standard error, the number of answers without an
    extractable answer.  Scored per question: with several samples of a prompt per question
    (self-consistency) the accuracy is the mean over questions of each question's mean over its samples and
    the interval is over the questions, never over the non-independent samples (see
    :func:`.accuracy.accuracy_frame`).
``majority``
    self-consistency: for every prompt that was sampled several times (the same sample, model,
    instruction, trigger and extraction), the majority answer of its first ``k`` samples (maj@k).

:func:`evaluate` (what ``Collection.evaluate()`` calls) also sets ``Answer.correct_answer`` (mode
``strict`` unless told otherwise) and returns the ThoughtSource paper's form
``{"accuracy": {"<instruction>_<cot_trigger>_<answer_extraction>": value}}`` (``None`` spelled
``"None"``, pooled over the datasets and splits of the collection; the per-dataset numbers are in
:attr:`Evaluation.accuracy`).  Models are never pooled: a collection with CoTs of several models gets
``{"accuracy": {model: {key: value}}}``.  Unlike the published ThoughtSource evaluation, ``number``, ``text``
and ``collection`` answers are scored, not counted as wrong.

Majority vote tie-breaking is a documented contract: see :mod:`.selfconsistency`.

One module per concern: :mod:`.scoring` (one answer: its source, extraction and score), :mod:`.result`
(:class:`Evaluation`), :mod:`.accuracy`, :mod:`.selfconsistency` (maj@k, pass@k), :mod:`.lengths` (reasoning
length), :mod:`.compact` (files larger than memory), :mod:`.verdicts` (``correct_answer`` written back),
:mod:`.tables` (the files) and :mod:`.frame` (the entry points).  This module is their public API.
"""

from __future__ import annotations

from .accuracy import MEAN_OVER_DATASETS, mean_over_datasets
from .frame import evaluate, evaluate_frame
from .lengths import accuracy_by_length, reasoning_lengths, reasoning_table
from .result import COMBINATION, Evaluation
from .selfconsistency import majority_at_k, majority_vote, sampling_table
from .tables import fmt_proportion, write_tables
from .verdicts import scored_entries, scored_samples, set_correct_answers

__all__ = [
    "COMBINATION",
    "MEAN_OVER_DATASETS",
    "Evaluation",
    "accuracy_by_length",
    "evaluate",
    "evaluate_frame",
    "fmt_proportion",
    "majority_at_k",
    "majority_vote",
    "mean_over_datasets",
    "reasoning_lengths",
    "reasoning_table",
    "sampling_table",
    "scored_entries",
    "scored_samples",
    "set_correct_answers",
    "write_tables",
]
