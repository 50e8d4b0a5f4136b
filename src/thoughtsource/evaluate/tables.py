"""The tables as files: accuracy, majority, sampling, reasoning and accuracy-by-length as CSV and Markdown, and
answers.csv, written atomically; proportions in one unit and format everywhere (:func:`fmt_proportion`)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import TYPE_CHECKING

from ..io import atomic_write
from .accuracy import mean_over_datasets
from .result import Evaluation
from .selfconsistency import SAMPLING_COLUMNS

if TYPE_CHECKING:
    import pandas as pd

#: Accuracies, their intervals and other rates are proportions (0.820, not 82.0 %) in every table: CSV, Markdown, the
#: terminal and results.json (lm-evaluation-harness's unit), shown with this many decimals.
PROPORTION_DECIMALS = 3


def fmt_proportion(v: object) -> str:
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
    return str(shown.to_markdown(index=False, disable_numparse=True)) + "\n"  # "0.760" stays as written


def _accuracy_markdown(frame: pd.DataFrame) -> str:
    import pandas as pd

    mean = mean_over_datasets(frame)
    return _markdown(pd.concat([frame, mean], ignore_index=True) if not mean.empty else frame)


def write_tables(result: Evaluation, out_dir: str | os.PathLike[str]) -> list[Path]:
    """accuracy.csv/.md (the Markdown with a mean-over-datasets row per combination measured on several datasets),
    majority.csv/.md (when there are repeated samples), reasoning.csv/.md and
    accuracy_by_length.csv/.md (when a reasoning model wrote CoTs) and answers.csv, written atomically."""
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
            with atomic_write(path) as fh, open(result.answers_csv, encoding="utf-8", newline="") as src:
                shutil.copyfileobj(src, fh, 1 << 20)
        if result.answers_csv is not None:
            written.append(path)
        return written
    with atomic_write(path) as fh:
        fh.write(result.answers.to_csv(index=False))
    written.append(path)
    return written
