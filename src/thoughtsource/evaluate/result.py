"""What :func:`~thoughtsource.evaluate.evaluate_frame` returns: :class:`Evaluation`, and the columns of its tables."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..extract import Extraction, Mode
from .scoring import without_truncated

if TYPE_CHECKING:
    import pandas as pd

#: The columns that define one evaluated combination.
COMBINATION = ["dataset", "split", "model", "instruction", "cot_trigger", "answer_extraction"]
#: The columns of ``Evaluation.answers`` that describe an answer (the rest are its score in one mode).
META_COLUMNS = (
    "dataset", "split", "sample_id", "type", "model", "instruction", "cot_trigger", "answer_extraction",
    "cot_index", "cot_id", "answer_id", "source", "truncated", "stored_correct",
)  # fmt: skip
#: The columns of ``Evaluation.answers`` (and answers.csv).
ANSWERS_COLUMNS = [*META_COLUMNS[:-1], "mode", "pred", "rule", "correct", "f1", "contradicts_thinking", "stored_correct"]


@dataclass
class Evaluation:
    """The result of :func:`evaluate_frame`; see :mod:`thoughtsource.evaluate` for the three frames."""

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
    #: without ``answers``: the answers as codes (combination, sample, correct, ...; see :class:`.compact.Compact`), their names
    coded: pd.DataFrame | None = field(default=None, repr=False)
    names: dict[str, list[Any]] = field(default_factory=dict, repr=False)
    #: where the answers table was written (``evaluate_frame(answers_csv=...)``; None without answers)
    answers_csv: Path | None = None
    #: the models behind the CoTs scored, gathered in the scoring pass (results.json's ``models``, see
    #: :class:`~thoughtsource.schema.ModelRecords`); None: not gathered
    models: list[dict[str, Any]] | None = field(default=None, repr=False)

    def answers_in(self, mode: str, *, scored_only: bool = True) -> pd.DataFrame:
        """The answers (or their codes) of ``mode``, in file order; only those scored unless ``scored_only`` is False."""
        if self.answers is not None:
            a = self.answers[self.answers["mode"] == mode]
        else:
            a = self.coded[self.coded["mode"] == self.names["mode"].index(mode)]  # type: ignore[index]
        return without_truncated(a) if scored_only else a

    @property
    def empty(self) -> bool:
        """No answer was scored."""
        return not len(self.answers if self.answers is not None else self.coded)  # type: ignore[arg-type]

    def _pooled(self, mode: Mode | None) -> list[tuple[tuple[str, str, str, str], int, int]]:
        """Per (model, instruction, CoT trigger, answer extraction), in sorted order: (names, correct, scored answers)
        in ``mode``, pooled over datasets and splits."""
        a = self.answers_in(mode or self.mode)
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
