"""Self-consistency: the majority vote, maj@k of a prompt sampled several times, and pass@k.

Majority vote tie-breaking (documented contract): answers without an extractable value do not vote; among the values
with the most votes, the one that occurs *first* in the samples' order wins (``[4, 3, 3, 4]`` -> 4); no votes at all
-> no answer.  Numbers vote by value (rounded to 1e-6), text by its normalized form.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from ..extract import is_correct, vote_key
from ..statistics import bootstrap_interval, mean_over_k_subsets, pass_at_k, wilson_intervals
from .result import COMBINATION
from .scoring import without_truncated

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt
    import pandas as pd

DEFAULT_KS: tuple[int, ...] = (1, 3, 5, 10, 20, 40)

V = TypeVar("V")
#: Per mode, the extracted value of each of its answers in the answers table's order: the values themselves (by mode
#: name), or (by mode code, :class:`.compact.Compact`) codes into the values a ``reps`` list holds.
ModeValues = Mapping[str, Sequence[object]] | Mapping[int, "npt.NDArray[np.int32]"]
#: One question sampled several times: (combination key, its answers' values in file order, their correctness,
#: answer type, gold).
Question = tuple[tuple[Hashable, ...], list[object], list[bool], str, object]


class QuestionGolds(Protocol):
    """``(type, gold, ...)`` of a question by ``(dataset, split, sample id)`` (or their codes), ``default`` when unknown."""

    def get(self, key: tuple[Any, Any, Any], default: tuple[None, None, tuple[()]], /) -> tuple[Any, ...]: ...


def majority_vote(values: Sequence[V | None], answer_type: str = "number") -> V | None:
    """The most frequent non-None value; ties go to the value that occurs first; None if nothing voted."""
    counts: dict[Hashable, int] = {}
    first: dict[Hashable, int] = {}
    rep: dict[Hashable, V] = {}
    for i, v in enumerate(values):
        if v is None:
            continue
        key = vote_key(v, answer_type)
        if key in counts:
            counts[key] += 1
        else:
            counts[key], first[key], rep[key] = 1, i, v
    if not counts:
        return None
    best = max(counts, key=lambda k: (counts[k], -first[k]))
    return rep[best]


def _wilson_columns(frame: pd.DataFrame) -> pd.DataFrame:
    frame["accuracy"], frame["ci_low"], frame["ci_high"] = wilson_intervals(frame["correct"], frame["n"])
    return frame


def _questions_by_mode(
    answers: pd.DataFrame,
    values: ModeValues,
    golds: QuestionGolds,
    ks: Sequence[int] | None,
    reps: Sequence[object] | None = None,
    combination: Sequence[str] = COMBINATION,
) -> Iterator[tuple[str | int, list[int], list[Question]]]:
    """Per answer mode with some question sampled more than once: the ks to report (``ks``, or the defaults plus
    the largest sample count) and every question as ``(combination key, answers in file order, their correctness,
    answer type, gold)``: what maj@k and pass@k are computed from.  ``golds``: ``(type, gold)`` by (dataset, split,
    sample id); with ``reps``, ``values`` holds codes of the values ``reps`` lists (:class:`.compact.Compact`)."""
    import pandas as pd

    if answers.empty:
        return
    for m, vals in values.items():
        sub = answers[answers["mode"] == m]
        series = pd.Series(vals, index=sub.index, dtype=object if reps is None else None)
        sub = without_truncated(sub)
        by_question = sub.groupby([*combination, "sample_id"], sort=True, dropna=False)
        largest = int(by_question.size().max()) if len(sub) else 0
        if largest < 2:
            continue
        groups = by_question.indices
        wanted = sorted(k for k in set(ks or DEFAULT_KS) | ({largest} if ks is None else set()) if k >= 1)
        questions: list[Question] = []
        for gkey, ix in groups.items():
            labels = sub.index[ix]
            t, gold = golds.get((gkey[0], gkey[1], gkey[-1]), (None, None, ()))[:2]
            ordered = series.loc[labels].tolist()
            questions.append((tuple(gkey[:-1]), ordered if reps is None else [reps[c] for c in ordered],
                              [bool(x) for x in sub.loc[labels, "correct"].tolist()], t or "number", gold))
        yield m, wanted, questions


def majority_frame(
    answers: pd.DataFrame,
    values: ModeValues,
    golds: QuestionGolds,
    ks: Sequence[int] | None,
    reps: Sequence[object] | None = None,
    combination: Sequence[str] = COMBINATION,
) -> pd.DataFrame:
    """maj@k per combination, mode and k: the majority vote of each question's first k samples (in file order, i.e.
    sample order), scored, with 95% Wilson intervals over the questions with at least k samples."""
    import pandas as pd

    keys = [*combination, "mode", "k"]
    columns = [*keys, "n", "correct", "accuracy", "ci_low", "ci_high"]
    rows: list[tuple[Any, ...]] = []
    for m, wanted, questions in _questions_by_mode(answers, values, golds, ks, reps, combination):
        agg: dict[tuple[Hashable, ...], list[int]] = {}
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


def majority_at_k(values: Sequence[object], correct: Sequence[bool], k: int, answer_type: str, gold: object, *,
                  resamples: int = 200, rng: np.random.Generator | None = None) -> float:
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
    values: ModeValues,
    golds: QuestionGolds,
    ks: Sequence[int] | None,
    *,
    reps: Sequence[object] | None = None,
    combination: Sequence[str] = COMBINATION,
    resamples: int = 200,
    bootstrap_iters: int = 1000,
    seed: int = 0,
) -> pd.DataFrame:
    """pass@k and maj@k per combination, mode and k, from the questions with at least k samples.

    Per question: the unbiased pass@k (:func:`~thoughtsource.statistics.pass_at_k`) and maj@k averaged over resamples
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
        per_cell: dict[tuple[Hashable, ...], dict[int, tuple[list[float], list[float], list[int]]]] = {}
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
