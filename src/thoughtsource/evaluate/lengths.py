"""Reasoning length: per CoT its length (reasoning tokens where the model's record counts them, else words) and
whether it was cut off mid-thought; per model the length distribution and truncation rate; accuracy by length."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

from ..reasoning import reasoning_info
from ..schema import GeneratedCot, SampleSource, model_name
from ..statistics import wilson_interval
from .scoring import without_truncated

if TYPE_CHECKING:
    import pandas as pd

#: One CoT: (dataset, split, sample id, CoT index, model, reasoning model, reasoning tokens or NaN, words, truncated).
LengthRow = tuple[str, str, str, int, str, bool, float, int, bool]


def reasoning_lengths(collection: SampleSource) -> pd.DataFrame:
    """One row per CoT: ``model``, ``reasoning_model`` (it has a reasoning record), ``tokens`` (the reasoning tokens
    that record counts; NaN without one), ``words`` (of the CoT, which is the reasoning of a reasoning model) and
    ``truncated`` (cut off mid-thought)."""
    return lengths_frame([length_row(d, s, sample.id, ci, cot) for d, s, sample in collection.samples()
                           for ci, cot in enumerate(sample.generated_cot)])


def length_row(d: str, s: str, sample_id: str, ci: int, cot: GeneratedCot) -> LengthRow:
    """One CoT's row of :func:`reasoning_lengths`."""
    info = reasoning_info(cot)
    tokens = float(info.reasoning_tokens) if info is not None and info.reasoning_tokens > 0 else math.nan
    return (d, s, sample_id, ci, model_name(cot.model), info is not None, tokens, len((cot.cot or "").split()),
            bool(info is not None and info.truncated))


def lengths_frame(rows: list[LengthRow]) -> pd.DataFrame:
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
    scored = without_truncated(answers)
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
