"""Evaluation of files larger than memory: :func:`evaluate_compact` scores in one pass, writes the answers table as it
goes (:class:`AnswersCsv`) or not at all, and keeps per answer only a few small ints (:class:`Compact`); the other
tables are computed by the same functions as in memory, over codes, then given their strings back."""

from __future__ import annotations

import contextlib
import csv
import os
import shutil
from array import array
from collections.abc import Hashable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, TypeVar, cast

from ..extract import Mode
from ..io import atomic_write
from ..schema import GeneratedCot, ModelRecords, Sample, SampleSource, model_name
from .accuracy import accuracy_frame
from .lengths import accuracy_by_length, length_row, lengths_frame, reasoning_table
from .result import ANSWERS_COLUMNS, COMBINATION, Evaluation
from .scoring import MEMO_SIZE, ExtractionMemo, ModeScore, format_value, iter_answers, score_answer
from .selfconsistency import majority_frame, sampling_table

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt
    import pandas as pd
    from _typeshed import SupportsRichComparison

K = TypeVar("K", bound="SupportsRichComparison")


class _Codes(Generic[K]):
    """Values as small ints, numbered in order of first sight; :meth:`ranked` renumbers them in sorted order, so that
    grouping and sorting by code is grouping and sorting by value."""

    def __init__(self) -> None:
        self.index: dict[K, int] = {}
        self.names: list[K] = []

    def __call__(self, value: K) -> int:
        code = self.index.get(value)
        if code is None:
            code = self.index[value] = len(self.names)
            self.names.append(value)
        return code

    def ranked(self) -> tuple[npt.NDArray[np.int32], list[K]]:
        """(an array: the sorted rank of each code, the values in sorted order)."""
        import numpy as np

        order = sorted(range(len(self.names)), key=self.names.__getitem__)
        rank = np.empty(len(order), dtype=np.int32)
        rank[order] = np.arange(len(order), dtype=np.int32)
        return rank, [self.names[i] for i in order]


class _Values:
    """Extracted values as small ints (equal values of one Python type share a code): what maj@k votes on."""

    def __init__(self) -> None:
        self.index: dict[tuple[type, object], int] = {}
        self.reps: list[object] = []

    def __call__(self, value: object) -> int:
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


class _GoldsByCode:
    """``(type, gold)`` of each question by its ranked code: a :class:`.selfconsistency.QuestionGolds` over codes."""

    def __init__(self, types: list[str], golds: list[object]) -> None:
        self.types, self.golds = types, golds

    def get(self, key: tuple[Hashable, Hashable, Hashable], default: object = None, /) -> tuple[str, object]:
        code = cast(int, key[-1])
        return self.types[code], self.golds[code]


class Compact:
    """Per answer and per CoT, what the tables are computed from, column by column in ``array`` arrays of small ints
    (strings are codes into :class:`_Codes` tables; the six fields of a combination are one code): about 15 bytes an
    answer and mode and 30 a CoT, where the answers table holds a row of Python objects (~1 KB).  A question is a
    (dataset, split, sample id)."""

    def __init__(self, modes: Sequence[Mode]) -> None:
        self.modes = list(modes)
        self.codes: dict[str, _Codes[Any]] = {k: _Codes() for k in ("combination", "dataset", "split", "model")}
        self.questions: _Codes[tuple[str, str, str]] = _Codes()
        self.q_type: list[str] = []
        self.q_gold: list[object] = []  # a repeated sample id keeps its last sample's gold, as a dict over the file does
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

    def sample(self, d: str, s: str, sample: Sample, gold: object) -> None:
        """Take a sample's type and gold (an ``on_sample`` of :func:`.scoring.iter_answers`)."""
        q = self.questions((d, s, sample.id))
        if q == len(self.q_gold):
            self.q_type.append(sample.type)
            self.q_gold.append(gold)
        else:
            self.q_type[q], self.q_gold[q] = sample.type, gold

    def add_cot(self, d: str, s: str, sample: Sample, ci: int, cot: GeneratedCot) -> None:
        """Take a CoT's length row (an ``on_cot`` of :func:`.scoring.iter_answers`)."""
        _, _, _, _, model, reasoning, tokens, words, truncated = length_row(d, s, sample.id, ci, cot)
        for k, v in (("dataset", self.codes["dataset"](d)), ("split", self.codes["split"](s)),
                     ("sample_id", self.questions((d, s, sample.id))), ("cot_index", ci),
                     ("model", self.codes["model"](model))):
            self.cot[k].append(v)
        self.cot_flags["reasoning_model"].append(reasoning)
        self.cot_flags["truncated"].append(truncated)
        self.tokens.append(tokens)
        self.words.append(words)

    def add_answer(self, combination: tuple[str, ...], q: int, ci: int, truncated: bool, scored: list[ModeScore]) -> None:
        """Take an answer's scores (:func:`.scoring.score_answer`): ``q`` is its question's code."""
        self.answer["combination"].append(self.codes["combination"](combination))
        self.answer["model"].append(self.codes["model"](combination[2]))
        self.answer["sample_id"].append(q)
        self.answer["cot_index"].append(ci)
        self.truncated.append(truncated)
        for m, (e, contradiction, correct, f1) in zip(self.modes, scored, strict=True):
            cols = self.per_mode[m]
            cols["correct"].append(bool(correct) and not truncated)  # a truncated CoT is not scored (see without_truncated)
            cols["no_answer"].append(e.value is None)
            cols["contradicts_thinking"].append(contradiction)
            cols["f1"].append(f1)
            cols["value"].append(self.values(e.value))

    def frames(self) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame, dict[str, list[Any]], _GoldsByCode]:
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
        golds = _GoldsByCode([self.q_type[i] for i in order], [self.q_gold[i] for i in order])
        self.q_type, self.q_gold = [], []

        def recode(arr: array[int], rank: npt.NDArray[np.int32]) -> npt.NDArray[np.int32]:
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
            return scored, coded, lengths_frame([]), names, golds
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


class AnswersCsv:
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
        self.rows: dict[Mode, list[tuple[object, ...]]] = {m: [] for m in modes}
        self.n = 0

    def add(self, meta: tuple[str | int | None, ...], truncated: bool, stored: bool | None, scored: list[ModeScore]) -> None:
        """One answer's rows (``meta``: its :data:`.result.META_COLUMNS` up to ``truncated``; ``stored``: the
        ``correct_answer`` the file held), one per mode."""
        for (m, rows), (e, contradiction, correct, f1) in zip(self.rows.items(), scored, strict=True):
            rows.append((*meta, truncated, m, format_value(e.value), e.rule, False if truncated else correct,
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
        import pandas as pd

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


def evaluate_compact(collection: SampleSource, modes: Sequence[Mode], mode: Mode, ks: Sequence[int] | None, memo: bool,
                     think_tags: tuple[str, str] | None, answers_csv: Path | None) -> Evaluation:
    """:func:`~thoughtsource.evaluate.evaluate_frame` with ``answers_csv`` or ``keep_answers=False``: one pass, the
    answers table written as it goes (or not at all), the other tables computed by the same functions over
    :class:`Compact`'s codes, then given their strings back."""
    compact = Compact(modes)
    table = AnswersCsv(answers_csv, modes) if answers_csv is not None else None
    cache = ExtractionMemo(MEMO_SIZE) if memo else None
    models = ModelRecords()

    def on_cot(d: str, s: str, sample: Sample, ci: int, cot: GeneratedCot) -> None:
        compact.add_cot(d, s, sample, ci, cot)
        models.add(cot)

    done = False
    try:
        for d, s, sample, gold, ci, cot, ans in iter_answers(collection, compact.sample, on_cot):
            source, truncated, scored = score_answer(cache, sample, gold, cot, ans, modes, think_tags)
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
    accuracy = _decode(accuracy_frame(answers, coded_combination), names)
    majority = _decode(majority_frame(answers, values, golds, ks, compact.values.reps, coded_combination), names)
    sampling = _decode(sampling_table(answers, values, golds, ks, reps=compact.values.reps, combination=coded_combination),
                       names)
    by_length = _decode(accuracy_by_length(answers, coded_lengths, on=("sample_id", "cot_index")), names, ("mode", "model"))
    return Evaluation(answers=None, accuracy=accuracy, majority=majority, mode=mode, sampling=sampling, lengths=lengths,
                      reasoning=reasoning_table(lengths), by_length=by_length, coded=answers, names=names,
                      answers_csv=written, models=models.records())
