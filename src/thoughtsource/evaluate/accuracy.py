"""Accuracy per combination (dataset, split, model, instruction, CoT trigger, answer extraction) and mode, scored per
question with 95% Wilson intervals; the mean over datasets the ThoughtSource papers report."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ..statistics import stderr_of_mean, wilson_intervals
from .result import COMBINATION
from .scoring import without_truncated

if TYPE_CHECKING:
    import pandas as pd


ACCURACY_COLUMNS = ["n", "questions", "correct", "accuracy", "ci_low", "ci_high", "stderr", "no_answer", "f1", "truncated",
                    "contradictions"]


def accuracy_frame(answers: pd.DataFrame, combination: Sequence[str] = COMBINATION) -> pd.DataFrame:
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
    answers = without_truncated(answers)
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
