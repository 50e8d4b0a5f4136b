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
    the interval is over the questions, never over the non-independent samples (see ``_accuracy_table``).
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

Majority vote tie-breaking (documented contract): answers without an extractable value do not vote;
among the values with the most votes, the one that occurs *first* in the samples' order wins
(``[4, 3, 3, 4]`` -> 4); no votes at all -> no answer.  Numbers vote by value (rounded to 1e-6), text
by its normalized form.
"""

from __future__ import annotations

import contextlib
import csv
import logging
import math
import os
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .answers import get as type_of
from .extract import MODES, Extraction, Mode, extract, is_correct, sample_gold, vote_key
from .reasoning import CONTENT_EXTRACTION, DEFAULT_THINK_TAGS, reasoning_info, split_reasoning, strip_think
from .schema import ModelRecords, SampleSource, model_name
from .statistics import Z95 as Z95  # re-exported for one release: the estimators live in statistics.py
from .statistics import (
    bootstrap_interval,
    mean_over_k_subsets,
    pass_at_k,
    stderr_of_mean,
    wilson_interval,
    wilson_intervals,
)

if TYPE_CHECKING:
    import pandas as pd

log = logging.getLogger(__name__)

__all__ = [
    "COMBINATION",
    "Evaluation",
    "accuracy_by_length",
    "bootstrap_interval",
    "evaluate",
    "evaluate_frame",
    "majority_at_k",
    "majority_vote",
    "pass_at_k",
    "reasoning_lengths",
    "reasoning_table",
    "sampling_table",
    "scored_entries",
    "scored_samples",
    "set_correct_answers",
    "wilson_interval",
    "wilson_intervals",
    "write_tables",
]

#: The columns that define one evaluated combination.
COMBINATION = ["dataset", "split", "model", "instruction", "cot_trigger", "answer_extraction"]
DEFAULT_KS: tuple[int, ...] = (1, 3, 5, 10, 20, 40)
_META = (
    "dataset", "split", "sample_id", "type", "model", "instruction", "cot_trigger", "answer_extraction",
    "cot_index", "cot_id", "answer_id", "source", "truncated", "stored_correct",
)  # fmt: skip
#: The columns of ``Evaluation.answers`` (and answers.csv).
ANSWERS_COLUMNS = [*_META[:-1], "mode", "pred", "rule", "correct", "f1", "contradicts_thinking", "stored_correct"]


def _vote_key(value: Any, answer_type: str) -> Any:
    return vote_key(value, answer_type)


def majority_vote(values: Sequence[Any], answer_type: str = "number") -> Any:
    """The most frequent non-None value; ties go to the value that occurs first; None if nothing voted."""
    counts: dict[Any, int] = {}
    first: dict[Any, int] = {}
    rep: dict[Any, Any] = {}
    for i, v in enumerate(values):
        if v is None:
            continue
        key = _vote_key(v, answer_type)
        if key in counts:
            counts[key] += 1
        else:
            counts[key], first[key], rep[key] = 1, i, v
    if not counts:
        return None
    best = max(counts, key=lambda k: (counts[k], -first[k]))
    return rep[best]


def _fmt(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, frozenset):
        return "; ".join(sorted(value))
    if isinstance(value, float):
        return f"{value:g}" if value == value and abs(value) < 1e15 else str(value)
    return str(value)


@dataclass
class Evaluation:
    """The result of :func:`evaluate_frame`; see the module doc for the three frames."""

    #: one row per answer and mode; None when :func:`evaluate_frame` wrote it to ``answers_csv`` instead
    answers: pd.DataFrame | None
    accuracy: pd.DataFrame
    majority: pd.DataFrame
    mode: Mode = "strict"
    extractions: dict[str, list[Extraction]] = field(default_factory=dict, repr=False)
    #: pass@k and maj@k from n >= k samples per question (see :func:`sampling_table`); None without repeated samples
    sampling: pd.DataFrame | None = None
    #: one row per CoT: its reasoning length and whether it was cut off (:func:`reasoning_lengths`)
    lengths: pd.DataFrame | None = None
    #: per model: reasoning length distribution and truncation rate (:func:`reasoning_table`)
    reasoning: pd.DataFrame | None = None
    #: per mode, model and reasoning-length quartile: accuracy (:func:`accuracy_by_length`)
    by_length: pd.DataFrame | None = None
    #: without ``answers``: the answers as codes (combination, sample, correct, ...; see :class:`_Compact`), their names
    coded: pd.DataFrame | None = field(default=None, repr=False)
    names: dict[str, list[Any]] = field(default_factory=dict, repr=False)
    #: where the answers table was written (``evaluate_frame(answers_csv=...)``; None without answers)
    answers_csv: Path | None = None
    #: the models behind the CoTs scored, gathered in the scoring pass (results.json's ``models``, see
    #: :class:`~thoughtsource.schema.ModelRecords`); None: not gathered
    models: list[dict[str, Any]] | None = field(default=None, repr=False)

    def _answers_in(self, mode: str, *, scored_only: bool = True) -> pd.DataFrame:
        """The answers (or their codes) of ``mode``, in file order; only those scored unless ``scored_only`` is False."""
        if self.answers is not None:
            a = self.answers[self.answers["mode"] == mode]
        else:
            a = self.coded[self.coded["mode"] == self.names["mode"].index(mode)]  # type: ignore[index]
        return _scored(a) if scored_only else a

    @property
    def empty(self) -> bool:
        """No answer was scored."""
        return not len(self.answers if self.answers is not None else self.coded)  # type: ignore[arg-type]

    def _pooled(self, mode: Mode | None) -> list[tuple[tuple[str, str, str, str], int, int]]:
        """Per (model, instruction, CoT trigger, answer extraction), in sorted order: (names, correct, scored answers)
        in ``mode``, pooled over datasets and splits."""
        a = self._answers_in(mode or self.mode)
        if not len(a):
            return []
        keys = ["model", "instruction", "cot_trigger", "answer_extraction"] if self.answers is not None else ["combination"]
        sums: dict[tuple[str, ...], list[int]] = {}
        for key, (c, n) in a.groupby(keys, sort=False)["correct"].agg(["sum", "size"]).iterrows():
            shown = tuple(str(v) for v in (key if self.answers is not None else self.names["combination"][key][2:]))
            slot = sums.setdefault(shown, [0, 0])
            slot[0] += int(c)
            slot[1] += int(n)
        return [(key, c, n) for key, (c, n) in sorted(sums.items())]  # type: ignore[misc]

    @property
    def has_reasoning(self) -> bool:
        """Whether any CoT comes from a reasoning model (its reasoning tables and plot are written)."""
        return self.lengths is not None and bool(self.lengths["reasoning_model"].any())

    def by_model(self, mode: Mode | None = None) -> dict[str, dict[str, float]]:
        """``{model: {"<instruction>_<cot_trigger>_<answer_extraction>": accuracy}}`` for ``mode``, pooled over
        datasets and splits but never over models."""
        sums: dict[tuple[str, str], list[int]] = {}
        for (model, *prompt), c, n in self._pooled(mode):
            slot = sums.setdefault((model, "_".join(prompt)), [0, 0])
            slot[0] += c
            slot[1] += n
        out: dict[str, dict[str, float]] = {}
        for (model, key), (c, n) in sorted(sums.items()):
            out.setdefault(model, {})[key] = c / n
        return out

    def pooled_cells(self, mode: Mode | None = None) -> list[dict[str, Any]]:
        """What :meth:`by_model` holds, with the fields apart: one record per model, instruction, CoT trigger and
        answer extraction (pooled over datasets and splits, never over models) with its ``accuracy``."""
        keys = ["model", "instruction", "cot_trigger", "answer_extraction"]
        return [{**dict(zip(keys, key, strict=True)), "accuracy": c / n} for key, c, n in self._pooled(mode)]

    def to_dict(self, mode: Mode | None = None, *, by_model: bool | None = None) -> dict[str, Any]:
        """``{"accuracy": {"<instruction>_<cot_trigger>_<answer_extraction>": value}}`` for ``mode``.

        Accuracies are never pooled across models: with CoTs of one model this is the paper's flat form; with
        several (or ``by_model=True``) it is ``{"accuracy": {model: {key: value}}}``.
        """
        per_model = self.by_model(mode)
        if by_model or (by_model is None and len(per_model) > 1):
            return {"accuracy": per_model}
        if len(per_model) > 1:
            raise ValueError(f"the CoTs come from {len(per_model)} models ({', '.join(per_model)}): "
                             "their accuracies are not pooled; use by_model=True")
        return {"accuracy": next(iter(per_model.values()), {})}


def _iter_answers(collection: SampleSource, on_sample: Callable[[str, str, Any, Any], None] | None = None,
                  on_cot: Callable[[str, str, Any, int, Any], None] | None = None,
                  ) -> Iterable[tuple[str, str, Any, Any, int, Any, Any]]:
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


def _score(cache: _Memo | None, sample: Any, gold: Any, cot: Any, ans: Any, modes: Sequence[Mode],
           think_tags: tuple[str, str] | None) -> tuple[str, bool, list[tuple[Extraction, bool, bool, float]]]:
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
            contradiction = said is not None and _vote_key(said, t) != _vote_key(e.value, t)
        f1 = type_of(t).f1(e.value, gold) if e.value is not None else None
        out.append((e, contradiction, is_correct(e.value, t, gold), math.nan if f1 is None else f1))
    return source, truncated, out


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
    small ints (a few dozen bytes per answer, see :class:`_Compact`).  The tables are those of the default path.
    ``keep_answers=False`` does the same without writing the per-answer table anywhere.
    """
    import pandas as pd

    for m in (*modes, mode):
        if m not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {m!r}")
    if answers_csv is not None or not keep_answers:
        return _evaluate_compact(collection, modes, mode, ks, memo, think_tags,
                                 Path(answers_csv) if answers_csv is not None else None)
    meta: dict[str, list[Any]] = {k: [] for k in _META}
    per_mode: dict[str, dict[str, list[Any]]] = {
        m: {k: [] for k in ("pred", "rule", "correct", "f1", "contradicts_thinking")} for m in modes
    }
    values: dict[str, list[Any]] = {m: [] for m in modes}
    extractions: dict[str, list[Extraction]] = {m: [] for m in modes}
    # (dataset, split, sample id) -> (type, gold): what maj@k and pass@k score against, read in this one pass (a
    # sample without answers has gold None; a repeated id keeps its last sample, as a dict built over the file does)
    golds: dict[tuple[str, str, str], tuple[Any, ...]] = {}
    length_rows: list[tuple[Any, ...]] = []
    models = ModelRecords()

    def on_sample(d: str, s: str, sample: Any, gold: Any) -> None:
        golds[(d, s, sample.id)] = (sample.type, gold, tuple(sample.choices))

    def on_cot(d: str, s: str, sample: Any, ci: int, cot: Any) -> None:
        length_rows.append(_length_row(d, s, sample.id, ci, cot))
        models.add(cot)

    cache = _Memo(MEMO_SIZE) if memo else None
    for d, s, sample, gold, ci, cot, ans in _iter_answers(collection, on_sample, on_cot):
        source, truncated, scored = _score(cache, sample, gold, cot, ans, modes, think_tags)
        for k, v in zip(
            _META,
            (d, s, sample.id, sample.type, model_name(cot.model), str(cot.instruction), str(cot.cot_trigger),
             str(ans.answer_extraction), ci, cot.id, ans.id, source, truncated, ans.correct_answer),
            strict=True,
        ):  # fmt: skip
            meta[k].append(v)
        for m, (e, contradiction, correct, f1) in zip(modes, scored, strict=True):
            cols = per_mode[m]
            cols["contradicts_thinking"].append(contradiction)
            cols["pred"].append(_fmt(e.value))
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
    answers.loc[answers["truncated"], "correct"] = False  # not scored: left out of every table (see _scored)
    answers["stored_correct"] = answers["stored_correct"].astype(object)
    accuracy = _accuracy_table(answers)
    majority = _majority_table(answers, values, golds, ks)
    sampling = sampling_table(answers, values, golds, ks)
    lengths = _lengths_frame(length_rows)
    return Evaluation(answers=answers, accuracy=accuracy, majority=majority, mode=mode, extractions=extractions,
                      sampling=sampling, lengths=lengths, reasoning=reasoning_table(lengths),
                      by_length=accuracy_by_length(answers, lengths), models=models.records())


class _Codes:
    """Values as small ints, numbered in order of first sight; :meth:`ranked` renumbers them in sorted order, so that
    grouping and sorting by code is grouping and sorting by value."""

    def __init__(self) -> None:
        self.index: dict[Any, int] = {}
        self.names: list[Any] = []

    def __call__(self, value: Any) -> int:
        code = self.index.get(value)
        if code is None:
            code = self.index[value] = len(self.names)
            self.names.append(value)
        return code

    def ranked(self) -> tuple[Any, list[Any]]:
        """(an array: the sorted rank of each code, the values in sorted order)."""
        import numpy as np

        order = sorted(range(len(self.names)), key=self.names.__getitem__)
        rank = np.empty(len(order), dtype=np.int32)
        rank[order] = np.arange(len(order), dtype=np.int32)
        return rank, [self.names[i] for i in order]


class _Values:
    """Extracted values as small ints (equal values of one Python type share a code): what maj@k votes on."""

    def __init__(self) -> None:
        self.index: dict[tuple[type, Any], int] = {}
        self.reps: list[Any] = []

    def __call__(self, value: Any) -> int:
        key = (type(value), value)
        hashable = True
        try:
            code = self.index.get(key)
        except TypeError:  # unhashable: a code of its own
            hashable, code = False, None
        if code is None:
            code = len(self.reps)
            self.reps.append(value)
            if hashable:
                self.index[key] = code
        return code


class _QuestionGolds:
    """``(type, gold)`` of each question by its ranked code: :func:`_questions_by_mode`'s ``golds`` over codes."""

    def __init__(self, types: list[str], golds: list[Any]) -> None:
        self.types, self.golds = types, golds

    def get(self, key: tuple[Any, ...], default: Any = None) -> tuple[Any, Any]:
        return self.types[key[-1]], self.golds[key[-1]]


class _Compact:
    """Per answer and per CoT, what the tables are computed from, column by column in ``array`` arrays of small ints
    (strings are codes into :class:`_Codes` tables; the six fields of a combination are one code): about 15 bytes an
    answer and mode and 30 a CoT, where the answers table holds a row of Python objects (~1 KB).  A question is a
    (dataset, split, sample id)."""

    def __init__(self, modes: Sequence[Mode]) -> None:
        from array import array

        self.modes = list(modes)
        self.codes = {k: _Codes() for k in ("combination", "dataset", "split", "model")}
        self.questions = _Codes()
        self.q_type: list[str] = []
        self.q_gold: list[Any] = []  # a repeated sample id keeps its last sample's gold, as a dict over the file does
        self.values = _Values()
        self.answer = {k: array("i") for k in ("combination", "model", "sample_id", "cot_index")}
        self.truncated = array("b")
        self.per_mode: dict[Mode, dict[str, array[Any]]] = {
            m: {"correct": array("b"), "no_answer": array("b"), "contradicts_thinking": array("b"), "f1": array("d"),
                "value": array("i")} for m in modes}
        self.cot = {k: array("i") for k in ("dataset", "split", "sample_id", "cot_index", "model")}
        self.cot_flags = {k: array("b") for k in ("reasoning_model", "truncated")}
        self.tokens = array("d")
        self.words = array("q")

    def sample(self, d: str, s: str, sample: Any, gold: Any) -> None:
        q = self.questions((d, s, sample.id))
        if q == len(self.q_gold):
            self.q_type.append(sample.type)
            self.q_gold.append(gold)
        else:
            self.q_type[q], self.q_gold[q] = sample.type, gold

    def add_cot(self, d: str, s: str, sample: Any, ci: int, cot: Any) -> None:
        _, _, _, _, model, reasoning, tokens, words, truncated = _length_row(d, s, sample.id, ci, cot)
        for k, v in (("dataset", self.codes["dataset"](d)), ("split", self.codes["split"](s)),
                     ("sample_id", self.questions((d, s, sample.id))), ("cot_index", ci),
                     ("model", self.codes["model"](model))):
            self.cot[k].append(v)
        self.cot_flags["reasoning_model"].append(reasoning)
        self.cot_flags["truncated"].append(truncated)
        self.tokens.append(tokens)
        self.words.append(words)

    def add_answer(self, combination: tuple[str, ...], q: int, ci: int, truncated: bool,
                   scored: list[tuple[Extraction, bool, bool, float]]) -> None:
        self.answer["combination"].append(self.codes["combination"](combination))
        self.answer["model"].append(self.codes["model"](combination[2]))
        self.answer["sample_id"].append(q)
        self.answer["cot_index"].append(ci)
        self.truncated.append(truncated)
        for m, (e, contradiction, correct, f1) in zip(self.modes, scored, strict=True):
            cols = self.per_mode[m]
            cols["correct"].append(bool(correct) and not truncated)  # a truncated CoT is not scored (see _scored)
            cols["no_answer"].append(e.value is None)
            cols["contradicts_thinking"].append(contradiction)
            cols["f1"].append(f1)
            cols["value"].append(self.values(e.value))

    def frames(self) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame, dict[str, list[Any]], _QuestionGolds]:
        """(the answers as codes, one block per mode; the CoTs' lengths as codes; the same with their strings, as
        :func:`reasoning_lengths` has them; the names of the codes per column (``mode`` too); the golds by question
        code).  The arrays are emptied as they are turned into frames."""
        import numpy as np
        import pandas as pd

        ranked = {k: c.ranked() for k, c in self.codes.items()}
        names = {k: names for k, (_, names) in ranked.items()}
        names["mode"] = sorted(self.modes)
        q_rank, questions = self.questions.ranked()
        self.questions.index.clear()
        order = np.argsort(q_rank)
        golds = _QuestionGolds([self.q_type[i] for i in order], [self.q_gold[i] for i in order])
        self.q_type, self.q_gold = [], []

        def recode(arr: Any, rank: Any) -> Any:
            return rank[np.asarray(arr, dtype=np.int32)] if len(arr) else np.zeros(0, dtype=np.int32)

        base: dict[str, Any] = {k: recode(self.answer[k], ranked[k][0]) for k in ("combination", "model")}
        base["sample_id"] = recode(self.answer["sample_id"], q_rank)
        base["cot_index"] = np.asarray(self.answer["cot_index"], dtype=np.int32)
        base["truncated"] = np.asarray(self.truncated, dtype=bool)
        self.answer.clear()
        n = len(base["truncated"])
        columns: dict[str, Any] = {k: np.tile(v, len(self.modes)) for k, v in base.items()}  # one block per mode
        del base
        columns["mode"] = np.repeat(np.asarray([names["mode"].index(m) for m in self.modes], dtype=np.int8), n)
        for k, dtype in (("correct", bool), ("no_answer", bool), ("contradicts_thinking", bool), ("f1", float),
                         ("value", np.int32)):
            columns[k] = np.concatenate([np.asarray(self.per_mode[m].pop(k), dtype=dtype) for m in self.modes])
        scored = pd.DataFrame(columns)
        del columns
        cot = {k: recode(self.cot[k], ranked[k][0]) for k in ("dataset", "split", "model")}
        cot["sample_id"] = recode(self.cot["sample_id"], q_rank)
        cot["cot_index"] = np.asarray(self.cot["cot_index"], dtype=np.int64)
        flags = {k: np.asarray(v, dtype=bool) for k, v in self.cot_flags.items()}
        tokens, words = np.asarray(self.tokens, dtype=float), np.asarray(self.words, dtype=np.int64)
        self.cot.clear()
        cot_columns = ["dataset", "split", "sample_id", "cot_index", "model", "reasoning_model", "tokens", "words", "truncated"]
        coded = pd.DataFrame({**cot, **flags, "tokens": tokens, "words": words})[cot_columns]
        if not len(tokens):
            return scored, coded, _lengths_frame([]), names, golds
        ids = np.asarray([q[2] for q in questions], dtype=object)
        strings = {k: np.asarray(names[k], dtype=object)[cot[k]] for k in ("dataset", "split", "model")}
        lengths = pd.DataFrame({**strings, "sample_id": ids[cot["sample_id"]], "cot_index": cot["cot_index"], **flags,
                                "tokens": tokens, "words": words})[cot_columns]
        return scored, coded, lengths, names, golds


def _decode(table: pd.DataFrame, names: dict[str, list[Any]], columns: Sequence[str] = ("combination", "mode")) -> pd.DataFrame:
    """A table computed over codes with its strings back: ``combination`` becomes the six :data:`COMBINATION` columns
    (in its place), the other ``columns`` their names."""
    import numpy as np
    import pandas as pd

    table = table.copy()
    for k in columns:
        if k == "combination":
            continue
        table[k] = np.asarray(names[k], dtype=object)[table[k].to_numpy(dtype=np.int64)] if len(table) else table[k]
    if "combination" in columns:
        at = list(table.columns).index("combination")
        codes = table.pop("combination").to_numpy(dtype=np.int64)
        fields: list[Sequence[Any]] = (list(zip(*[names["combination"][c] for c in codes], strict=True)) if len(codes)
                  else [[] for _ in COMBINATION])
        six = pd.DataFrame({k: pd.Series(v, index=table.index, dtype=object) for k, v in zip(COMBINATION, fields, strict=True)})
        table = pd.concat([table.iloc[:, :at], six, table.iloc[:, at:]], axis=1)
    return table


class _AnswersCsv:
    """answers.csv written as the answers are scored: each mode's rows go to a part file next to ``path`` (the table
    holds all the rows of the first mode, then those of the next), in chunks formatted as ``DataFrame.to_csv`` formats
    the whole table; :meth:`close` joins them into ``path``, atomically (nothing without answers).

    The rows go straight to a :func:`csv.writer` with ``to_csv``'s dialect (the writer pandas itself hands the table's
    cells to), a missing value (None, a NaN F1) as an empty cell and a float as its ``repr``, which is what ``to_csv``
    makes of these columns' values; building a DataFrame per chunk to format it took most of the table's time."""

    CHUNK = 2048

    def __init__(self, path: Path, modes: Sequence[Mode]) -> None:
        self.made = not path.parent.exists()  # removed again when there is nothing to write
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self.parts = {m: path.with_name(f".{path.name}.{os.getpid()}.{m}.part") for m in modes}
        self.files = {m: open(p, "w", encoding="utf-8", newline="") for m, p in self.parts.items()}  # noqa: SIM115
        self.writers = {m: csv.writer(fh, lineterminator="\n") for m, fh in self.files.items()}  # to_csv's dialect
        self.rows: dict[Mode, list[tuple[Any, ...]]] = {m: [] for m in modes}
        self.n = 0

    def add(self, meta: tuple[Any, ...], truncated: bool, stored: Any, scored: list[tuple[Extraction, bool, bool, float]]) -> None:
        for (m, rows), (e, contradiction, correct, f1) in zip(self.rows.items(), scored, strict=True):
            rows.append((*meta, truncated, m, _fmt(e.value), e.rule, False if truncated else correct,
                         None if f1 != f1 else float(f1), contradiction, stored))  # a NaN F1 is an empty cell
        self.n += 1
        if self.n % self.CHUNK == 0:
            self._flush()

    def _flush(self) -> None:
        for m, rows in self.rows.items():
            if rows:
                self.writers[m].writerows(rows)
                rows.clear()

    def close(self, *, keep: bool = True) -> Path | None:
        """Join the parts into the table (``keep`` and some answers), remove them; the table's path, or None."""
        import shutil

        import pandas as pd

        from .io import atomic_write

        try:
            if keep:
                self._flush()
            for fh in self.files.values():
                fh.close()
            if not (keep and self.n):
                return None
            with atomic_write(self.path) as out:
                out.write(pd.DataFrame(columns=ANSWERS_COLUMNS).to_csv(index=False))
                for part in self.parts.values():
                    with open(part, encoding="utf-8", newline="") as fh:
                        shutil.copyfileobj(fh, out, 1 << 20)
            return self.path
        finally:
            for fh in self.files.values():
                fh.close()
            for part in self.parts.values():
                part.unlink(missing_ok=True)
            if self.made and not (keep and self.n):
                with contextlib.suppress(OSError):
                    self.path.parent.rmdir()


def _evaluate_compact(collection: SampleSource, modes: Sequence[Mode], mode: Mode, ks: Sequence[int] | None, memo: bool,
                      think_tags: tuple[str, str] | None, answers_csv: Path | None) -> Evaluation:
    """:func:`evaluate_frame` with ``answers_csv`` or ``keep_answers=False``: one pass, the answers table written as it
    goes (or not at all), the other tables
    computed by the same functions over :class:`_Compact`'s codes, then given their strings back."""
    compact = _Compact(modes)
    table = _AnswersCsv(answers_csv, modes) if answers_csv is not None else None
    cache = _Memo(MEMO_SIZE) if memo else None
    models = ModelRecords()

    def on_cot(d: str, s: str, sample: Any, ci: int, cot: Any) -> None:
        compact.add_cot(d, s, sample, ci, cot)
        models.add(cot)

    done = False
    try:
        for d, s, sample, gold, ci, cot, ans in _iter_answers(collection, compact.sample, on_cot):
            source, truncated, scored = _score(cache, sample, gold, cot, ans, modes, think_tags)
            combination = (d, s, model_name(cot.model), str(cot.instruction), str(cot.cot_trigger), str(ans.answer_extraction))
            compact.add_answer(combination, compact.questions((d, s, sample.id)), ci, truncated, scored)
            if table is not None:
                table.add((d, s, sample.id, sample.type, *combination[2:], ci, cot.id, ans.id, source), truncated,
                          ans.correct_answer, scored)
        done = True
    finally:
        written = table.close(keep=done) if table is not None else None
    answers, coded_lengths, lengths, names, golds = compact.frames()
    values = {code: answers.loc[answers["mode"] == code, "value"].to_numpy() for code in range(len(names["mode"]))}
    coded_combination = ("combination",)
    accuracy = _decode(_accuracy_table(answers, coded_combination), names)
    majority = _decode(_majority_table(answers, values, golds, ks, compact.values.reps, coded_combination), names)
    sampling = _decode(sampling_table(answers, values, golds, ks, reps=compact.values.reps, combination=coded_combination),
                       names)
    by_length = _decode(accuracy_by_length(answers, coded_lengths, on=("sample_id", "cot_index")), names, ("mode", "model"))
    return Evaluation(answers=None, accuracy=accuracy, majority=majority, mode=mode, sampling=sampling, lengths=lengths,
                      reasoning=reasoning_table(lengths), by_length=by_length, coded=answers, names=names,
                      answers_csv=written, models=models.records())


# --------------------------------------------------------------------------- reasoning length
def reasoning_lengths(collection: SampleSource) -> pd.DataFrame:
    """One row per CoT: ``model``, ``reasoning_model`` (it has a reasoning record), ``tokens`` (the reasoning tokens
    that record counts; NaN without one), ``words`` (of the CoT, which is the reasoning of a reasoning model) and
    ``truncated`` (cut off mid-thought)."""
    return _lengths_frame([_length_row(d, s, sample.id, ci, cot) for d, s, sample in collection.samples()
                           for ci, cot in enumerate(sample.generated_cot)])


def _length_row(d: str, s: str, sample_id: str, ci: int, cot: Any) -> tuple[Any, ...]:
    info = reasoning_info(cot)
    tokens = float(info.reasoning_tokens) if info is not None and info.reasoning_tokens > 0 else math.nan
    return (d, s, sample_id, ci, model_name(cot.model), info is not None, tokens, len((cot.cot or "").split()),
            bool(info is not None and info.truncated))


def _lengths_frame(rows: list[tuple[Any, ...]]) -> pd.DataFrame:
    import pandas as pd

    return pd.DataFrame(rows, columns=["dataset", "split", "sample_id", "cot_index", "model", "reasoning_model", "tokens",
                                       "words", "truncated"])


def _length_unit(group: pd.DataFrame) -> str:
    """Tokens when every CoT of the model has a reasoning token count, else words."""
    return "tokens" if len(group) and group["tokens"].notna().all() else "words"


REASONING_COLUMNS = ["model", "cots", "reasoning_cots", "unit", "mean", "p10", "median", "p90", "max", "truncated",
                     "truncation_rate", "trunc_ci_low", "trunc_ci_high"]


def reasoning_table(lengths: pd.DataFrame) -> pd.DataFrame:
    """Per model: the distribution of reasoning lengths (mean, 10th / 50th / 90th percentile, max; in tokens when the
    model's records count them, else words) and the truncation rate (CoTs cut off mid-thought, 95% Wilson interval)."""
    import pandas as pd

    rows = []
    for model, g in lengths.groupby("model", sort=True):
        unit = _length_unit(g)
        x = g[unit].astype(float)
        k, n = int(g["truncated"].sum()), len(g)
        lo, hi = wilson_interval(k, n)
        rows.append((model, n, int(g["reasoning_model"].sum()), unit, x.mean(), x.quantile(0.1), x.median(), x.quantile(0.9),
                     x.max(), k, k / n, lo, hi))
    return pd.DataFrame(rows, columns=REASONING_COLUMNS)


BY_LENGTH_COLUMNS = ["mode", "model", "unit", "bin", "length_low", "length_high", "length_median", "n", "correct", "accuracy",
                     "ci_low", "ci_high"]


def accuracy_by_length(answers: pd.DataFrame, lengths: pd.DataFrame, bins: int = 4,
                       on: Sequence[str] = ("dataset", "split", "sample_id", "cot_index")) -> pd.DataFrame:
    """Accuracy against reasoning length: per mode and model, the scored answers split at the quantiles of their
    CoTs' reasoning length (``bins`` groups, fewer when lengths repeat), each with its 95% Wilson interval.
    CoTs cut off mid-thought are not scored (their rate is in :func:`reasoning_table`).  ``on``: what joins an answer
    to its CoT."""
    import pandas as pd

    keys = list(on)
    scored = _scored(answers)
    if scored.empty or lengths.empty:
        return pd.DataFrame(columns=BY_LENGTH_COLUMNS)
    joined = scored.merge(lengths[[*keys, "tokens", "words"]], on=keys, how="left")
    rows = []
    for model, g in lengths.groupby("model", sort=True):
        unit = _length_unit(g)
        mine = joined[joined["model"] == model]
        if mine.empty:
            continue
        edges = sorted(set(g[~g["truncated"]][unit].astype(float).quantile([i / bins for i in range(bins + 1)]).tolist()))
        if len(edges) < 2:  # one length only: one bin
            cut = pd.Series(0, index=mine.index)
        else:
            cut = pd.cut(mine[unit].astype(float), edges, include_lowest=True, labels=False).fillna(0).astype(int)
        for (mode, b), h in mine.groupby([mine["mode"], cut], sort=True):
            x = h[unit].astype(float)
            k = int(h["correct"].sum())
            lo, hi = wilson_interval(k, len(h))
            rows.append((mode, model, unit, int(b) + 1, x.min(), x.max(), x.median(), len(h), k, k / len(h), lo, hi))
    return pd.DataFrame(rows, columns=BY_LENGTH_COLUMNS)


def _answer_source(cot: Any, ans: Any, think_tags: tuple[str, str] | None) -> tuple[str | None, str, str | None, bool]:
    """(text to extract from, source, the thinking to compare with or None, cut off mid-thought) of one answer."""
    info = reasoning_info(cot)
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


class _Memo(OrderedDict[tuple[Any, ...], Extraction]):
    """A least-recently-used dict of at most ``size`` extractions."""

    def __init__(self, size: int) -> None:
        super().__init__()
        self.size = size

    def get(self, key: tuple[Any, ...], default: Any = None) -> Any:  # type: ignore[override]
        e = super().get(key, default)
        if e is not None:
            self.move_to_end(key)
        return e

    def __setitem__(self, key: tuple[Any, ...], value: Extraction) -> None:
        super().__setitem__(key, value)
        if len(self) > self.size:
            self.popitem(last=False)


def _extract_memo(cache: dict[tuple[Any, ...], Extraction] | None, text: str | None, t: str, m: str,
                  choices: tuple[str, ...], source: str) -> Extraction:
    ckey = (text, t, m, choices, source)
    e = cache.get(ckey) if cache is not None else None
    if e is None:
        e = extract(text, t, mode=m, choices=choices, source=source)  # type: ignore[arg-type]
        if cache is not None:
            cache[ckey] = e
    return e


def _scored(answers: pd.DataFrame) -> pd.DataFrame:
    """The answers that are scored: all but those of CoTs cut off mid-thought."""
    return answers[~answers["truncated"]] if "truncated" in answers and answers["truncated"].any() else answers


def _wilson_columns(frame: pd.DataFrame) -> pd.DataFrame:
    frame["accuracy"], frame["ci_low"], frame["ci_high"] = wilson_intervals(frame["correct"], frame["n"])
    return frame


ACCURACY_COLUMNS = ["n", "questions", "correct", "accuracy", "ci_low", "ci_high", "stderr", "no_answer", "f1", "truncated",
                    "contradictions"]


def _accuracy_table(answers: pd.DataFrame, combination: Sequence[str] = COMBINATION) -> pd.DataFrame:
    """Accuracy per combination, scored per question.

    With one answer per question this is the binomial proportion and its Wilson interval.  With several
    (self-consistency samples of one prompt) the answers of a question are not independent: the accuracy is
    the mean over questions of each question's mean over its samples, and the interval is over the
    ``questions``, not over the ``n`` answers (the Wilson score interval at n = questions, which is
    conservative because a per-question mean varies no more than a single 0/1 answer).  ``stderr`` is the
    standard error of the mean over questions (lm-evaluation-harness's ``acc_stderr``).
    """
    import pandas as pd

    keys = [*combination, "mode"]
    everything = answers
    answers = _scored(answers)
    if answers.empty:
        return pd.DataFrame(columns=[*keys, *ACCURACY_COLUMNS])
    no_answer = answers["no_answer"] if "no_answer" in answers else answers["pred"].isna()
    g = answers.assign(no_answer=no_answer).groupby(keys, sort=True, dropna=False)
    table = g.agg(n=("correct", "size"), correct=("correct", "sum"), no_answer=("no_answer", "sum"), f1=("f1", "mean"),
                  contradictions=("contradicts_thinking", "sum"))
    table = table.join(everything.groupby(keys, sort=True, dropna=False)["truncated"].sum())
    per_question = answers.groupby([*keys, "sample_id"], sort=True, dropna=False)["correct"].mean()
    q = per_question.groupby(level=list(range(len(keys))), sort=True, dropna=False).agg(["size", "mean", "std"])
    table = table.join(q).reset_index()
    questions = table["size"].to_numpy(dtype=float)
    mean = table["mean"].to_numpy(dtype=float)
    table["questions"] = table.pop("size").astype(int)
    _, low, high = wilson_intervals(mean * questions, questions)
    table["accuracy"], table["ci_low"], table["ci_high"] = mean, low, high
    table["stderr"] = stderr_of_mean(table.pop("std").to_numpy(dtype=float), questions)
    table = table.drop(columns=["mean"])
    return table[[*keys, *ACCURACY_COLUMNS]]


MEAN_OVER_DATASETS = "mean over datasets"


def mean_over_datasets(accuracy: pd.DataFrame) -> pd.DataFrame:
    """One row per model, instruction, CoT trigger and mode whose accuracy was measured on two or more datasets (or
    splits): the unweighted mean of their accuracies (the macro average the ThoughtSource papers report), ``dataset``
    :data:`MEAN_OVER_DATASETS`, ``n``/``questions``/``correct``/``no_answer`` summed, no interval (a mean of
    proportions over different question sets has no binomial one).  The answer extraction usually differs per
    dataset (Kojima's per-type prompts) and is left empty; where one dataset was scored with several extractions,
    the mean is taken per extraction."""
    import numpy as np
    import pandas as pd

    keys = ["model", "instruction", "cot_trigger", "mode"]
    if accuracy.empty:
        return accuracy.iloc[0:0]
    groups: list[pd.DataFrame] = []
    for _, g in accuracy.groupby(keys, sort=True, dropna=False):
        if g.duplicated(["dataset", "split"]).any():
            groups.extend(sub for _, sub in g.groupby("answer_extraction", sort=True, dropna=False))
        else:
            groups.append(g)
    rows = []
    for g in groups:
        if len(g) < 2:
            continue
        first = g.iloc[0]
        row: dict[str, Any] = {k: first[k] for k in keys}
        extractions = g["answer_extraction"].unique()
        row.update(dataset=MEAN_OVER_DATASETS, split="", answer_extraction=extractions[0] if len(extractions) == 1 else "")
        for col in ("n", "questions", "correct", "no_answer", "truncated", "contradictions"):
            if col in g:
                row[col] = int(g[col].sum())
        row["accuracy"] = float(g["accuracy"].mean())
        row["f1"] = float(g["f1"].mean()) if "f1" in g and g["f1"].notna().any() else np.nan
        for col in ("ci_low", "ci_high", "stderr"):
            row[col] = np.nan
        rows.append(row)
    return pd.DataFrame(rows, columns=accuracy.columns) if rows else accuracy.iloc[0:0]


def _questions_by_mode(
    answers: pd.DataFrame,
    values: dict[Any, Any],
    golds: Any,
    ks: Sequence[int] | None,
    reps: Sequence[Any] | None = None,
    combination: Sequence[str] = COMBINATION,
) -> Iterator[tuple[Any, list[int], list[tuple[tuple[Any, ...], list[Any], list[bool], str, Any]]]]:
    """Per answer mode with some question sampled more than once: the ks to report (``ks``, or the defaults plus
    the largest sample count) and every question as ``(combination key, answers in file order, their correctness,
    answer type, gold)``: what maj@k and pass@k are computed from.  ``golds``: ``(type, gold)`` by (dataset, split,
    sample id); with ``reps``, ``values`` holds codes of the values ``reps`` lists (:class:`_Compact`)."""
    import pandas as pd

    if answers.empty:
        return
    for m, vals in values.items():
        sub = answers[answers["mode"] == m]
        series = pd.Series(vals, index=sub.index, dtype=object if reps is None else None)
        sub = _scored(sub)
        by_question = sub.groupby([*combination, "sample_id"], sort=True, dropna=False)
        largest = int(by_question.size().max()) if len(sub) else 0
        if largest < 2:
            continue
        groups = by_question.indices
        wanted = sorted(k for k in set(ks or DEFAULT_KS) | ({largest} if ks is None else set()) if k >= 1)
        questions = []
        for gkey, ix in groups.items():
            labels = sub.index[ix]
            t, gold = golds.get((gkey[0], gkey[1], gkey[-1]), (None, None, ()))[:2]
            ordered = series.loc[labels].tolist()
            questions.append((tuple(gkey[:-1]), ordered if reps is None else [reps[c] for c in ordered],
                              [bool(x) for x in sub.loc[labels, "correct"].tolist()], t or "number", gold))
        yield m, wanted, questions


def _majority_table(
    answers: pd.DataFrame,
    values: dict[Any, Any],
    golds: Any,
    ks: Sequence[int] | None,
    reps: Sequence[Any] | None = None,
    combination: Sequence[str] = COMBINATION,
) -> pd.DataFrame:
    import pandas as pd

    keys = [*combination, "mode", "k"]
    columns = [*keys, "n", "correct", "accuracy", "ci_low", "ci_high"]
    rows: list[tuple[Any, ...]] = []
    for m, wanted, questions in _questions_by_mode(answers, values, golds, ks, reps, combination):
        agg: dict[tuple[Any, ...], list[int]] = {}
        for ckey, ordered, _, t, gold in questions:
            for k in wanted:
                if len(ordered) < k:
                    continue
                ok = is_correct(majority_vote(ordered[:k], t), t, gold)  # the first k in file order, i.e. sample order
                slot = agg.setdefault((*ckey, m, k), [0, 0])
                slot[0] += 1
                slot[1] += int(ok)
        rows.extend((*key, n, c) for key, (n, c) in agg.items())
    if not rows:
        return pd.DataFrame(columns=columns)
    table = pd.DataFrame(rows, columns=[*keys, "n", "correct"]).sort_values(keys, kind="stable").reset_index(drop=True)
    return _wilson_columns(table)[columns]


def majority_at_k(values: Sequence[Any], correct: Sequence[bool], k: int, answer_type: str, gold: Any, *,
                  resamples: int = 200, rng: Any = None) -> float:
    """maj@k averaged over random k-subsets of the n samples (not the first k): the expected accuracy of a
    majority vote of k samples.  Exact for k = 1 (the mean) and k = n (one subset); else ``resamples`` subsets
    drawn without replacement.  Ties go to the value that occurs first in the drawn order (:func:`majority_vote`).
    The estimator is :func:`thoughtsource.statistics.mean_over_k_subsets`; this is its vote and gold.
    """

    def vote_is_correct(pick: Sequence[int]) -> bool:
        return is_correct(majority_vote([values[i] for i in pick], answer_type), answer_type, gold)

    return mean_over_k_subsets(correct, k, vote_is_correct, resamples=resamples, rng=rng)


SAMPLING_COLUMNS = ["questions", "samples", "pass_at_k", "pass_ci_low", "pass_ci_high", "maj_at_k", "maj_ci_low", "maj_ci_high"]


def sampling_table(
    answers: pd.DataFrame,
    values: dict[Any, Any],
    golds: Any,
    ks: Sequence[int] | None,
    *,
    reps: Sequence[Any] | None = None,
    combination: Sequence[str] = COMBINATION,
    resamples: int = 200,
    bootstrap_iters: int = 1000,
    seed: int = 0,
) -> pd.DataFrame:
    """pass@k and maj@k per combination, mode and k, from the questions with at least k samples.

    Per question: the unbiased pass@k (:func:`pass_at_k`) and maj@k averaged over resamples
    (:func:`majority_at_k`); the table holds their means over ``questions`` and 95% percentile bootstrap
    intervals over questions (``bootstrap_iters`` resamples of the questions).  ``samples`` is the mean
    number of samples per question.  Every random draw is seeded: the table is reproducible.
    """
    import numpy as np
    import pandas as pd

    keys = [*combination, "mode", "k"]
    columns = [*keys, *SAMPLING_COLUMNS]
    rows: list[tuple[Any, ...]] = []
    for m, wanted, questions in _questions_by_mode(answers, values, golds, ks, reps, combination):
        per_cell: dict[tuple[Any, ...], dict[int, tuple[list[float], list[float], list[int]]]] = {}
        for ckey, ordered, correct, t, gold in questions:
            n, c = len(ordered), sum(correct)
            rng = np.random.default_rng([seed, n, c, len(per_cell)])
            cell = per_cell.setdefault(ckey, {})
            for k in wanted:
                if k > n:
                    continue
                slot = cell.setdefault(k, ([], [], []))
                slot[0].append(pass_at_k(n, c, k))
                slot[1].append(majority_at_k(ordered, correct, k, t, gold, resamples=resamples, rng=rng))
                slot[2].append(n)
        for ckey, by_k in per_cell.items():
            for k, (passes, majs, ns) in by_k.items():
                p_low, p_high = bootstrap_interval(passes, iters=bootstrap_iters, seed=seed)
                m_low, m_high = bootstrap_interval(majs, iters=bootstrap_iters, seed=seed)
                rows.append((*ckey, m, k, len(passes), float(np.mean(ns)), float(np.mean(passes)), p_low, p_high,
                             float(np.mean(majs)), m_low, m_high))
    if not rows:
        return pd.DataFrame(columns=columns)
    return pd.DataFrame(rows, columns=columns).sort_values(keys, kind="stable").reset_index(drop=True)


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


def set_correct_answers(collection: SampleSource, result: Evaluation, *, mode: Mode = "strict", overwrite: bool = True) -> int:
    """Write ``result``'s verdicts (``mode``) into ``Answer.correct_answer``; returns how many stored values changed."""
    verdicts = _verdicts(result, mode)
    return sum(_set_verdict(ans, *next(verdicts), overwrite) for *_, ans in _iter_answers(collection))


def scored_entries(entries: Iterable[Any], result: Evaluation, *, mode: Mode = "strict", overwrite: bool = True) -> Iterator[Any]:
    """:func:`set_correct_answers` over a stream: the :class:`~thoughtsource.io.Entry` items of the file ``result``
    was computed from (in the same order), each sample with its verdicts set, for :func:`~thoughtsource.io.write_entries`."""
    verdicts = _verdicts(result, mode)
    for e in entries:
        if e.sample is not None:
            for cot in e.sample.generated_cot:
                for ans in cot.answers:
                    _set_verdict(ans, *next(verdicts), overwrite)
        yield e


def scored_samples(samples: Iterable[tuple[str, str, Any]], result: Evaluation, *, mode: Mode = "strict",
                   overwrite: bool = True) -> Iterator[tuple[str, str, Any]]:
    """:func:`set_correct_answers` over a stream of ``(dataset, split, sample)`` (a file ``result`` was computed from,
    read again in the same order): each sample with its verdicts set."""
    verdicts = _verdicts(result, mode)
    for d, s, sample in samples:
        for cot in sample.generated_cot:
            for ans in cot.answers:
                _set_verdict(ans, *next(verdicts), overwrite)
        yield d, s, sample


def _verdicts(result: Evaluation, mode: Mode) -> Iterator[tuple[Any, Any]]:
    rows = result._answers_in(mode, scored_only=False)[["correct", "truncated"]]
    return iter(zip(rows["correct"].tolist(), rows["truncated"].tolist(), strict=True))


def _set_verdict(ans: Any, correct: Any, truncated: Any, overwrite: bool) -> int:
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


#: Accuracies, their intervals and other rates are proportions (0.820, not 82.0 %) in every table: CSV, Markdown, the
#: terminal and results.json (lm-evaluation-harness's unit), shown with this many decimals.
PROPORTION_DECIMALS = 3


def fmt_proportion(v: Any) -> str:
    """A proportion as every table shows it (``0.820``); NaN or None (no data) as an empty cell."""
    if v is None or v != v:
        return ""
    return f"{v:.{PROPORTION_DECIMALS}f}" if isinstance(v, int | float) else str(v)


def _markdown(frame: pd.DataFrame) -> str:
    shown = frame.copy()
    for col in ("accuracy", "ci_low", "ci_high", "stderr", "no_answer_rate", "truncation_rate", "trunc_ci_low",
                "trunc_ci_high", *SAMPLING_COLUMNS[2:]):
        if col in shown:
            shown[col] = shown[col].map(fmt_proportion)
    if "f1" in shown:
        shown["f1"] = shown["f1"].map(lambda v: "" if v != v else f"{v:.3f}")
    return shown.to_markdown(index=False, disable_numparse=True) + "\n"  # "0.760" stays as written


def _accuracy_markdown(frame: pd.DataFrame) -> str:
    import pandas as pd

    mean = mean_over_datasets(frame)
    return _markdown(pd.concat([frame, mean], ignore_index=True) if not mean.empty else frame)


def write_tables(result: Evaluation, out_dir: str | os.PathLike[str]) -> list[Path]:
    """accuracy.csv/.md (the Markdown with a mean-over-datasets row per combination measured on several datasets),
    majority.csv/.md (when there are repeated samples), reasoning.csv/.md and
    accuracy_by_length.csv/.md (when a reasoning model wrote CoTs) and answers.csv, written atomically."""
    from .io import atomic_write

    out = Path(out_dir)
    written: list[Path] = []
    tables = [("accuracy", result.accuracy), ("majority", result.majority)]
    if result.sampling is not None:
        tables.append(("sampling", result.sampling))
    if result.has_reasoning:
        tables += [("reasoning", result.reasoning), ("accuracy_by_length", result.by_length)]
    for name, frame in tables:
        if name != "accuracy" and frame.empty:
            continue
        # the accuracy's Markdown is the paper's table: a mean-over-datasets row per combination
        md = _accuracy_markdown if name == "accuracy" else _markdown
        for ext, render in (("csv", lambda f: f.to_csv(index=False)), ("md", md)):
            path = out / f"{name}.{ext}"
            with atomic_write(path) as fh:
                fh.write(render(frame))
            written.append(path)
    path = out / "answers.csv"
    if result.answers is None:  # written as it was computed
        if result.answers_csv is not None and result.answers_csv.resolve() != path.resolve():
            import shutil

            with atomic_write(path) as fh, open(result.answers_csv, encoding="utf-8", newline="") as src:
                shutil.copyfileobj(src, fh, 1 << 20)
        if result.answers_csv is not None:
            written.append(path)
        return written
    with atomic_write(path) as fh:
        fh.write(result.answers.to_csv(index=False))
    written.append(path)
    return written
