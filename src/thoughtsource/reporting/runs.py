"""Working with many runs: compare two runs, merge or evaluate every file of a folder, export the full-text
prompts, find CoTs of outlying length, and mark the best cell of an evaluation table.

These are what the published library offered as notebook helpers, made testable and usable from the CLI
(``thoughtsource runs ...``).  Every function takes a :class:`~thoughtsource.collection.Collection` or a
path (ThoughtSource JSON, JSONL or Parquet).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from ..collection import Collection, MergeIndex
from ..errors import DataError
from ..evaluate import evaluate_frame
from ..io import FileSamples, atomic_write, write_entries
from ..prompts import load_fragments
from ..prompts.templates import DEFAULT_ANSWER, DEFAULT_COT, VARIABLES, Templates, template_problems
from ..schema import model_name
from .plots import row_label

if TYPE_CHECKING:
    import pandas as pd

log = logging.getLogger(__name__)

SAMPLE_KEY = ["dataset", "split", "sample_id"]
COMBINATION_KEY = ["instruction", "cot_trigger", "answer_extraction"]


def _collection(obj: Any) -> Collection:
    return obj if isinstance(obj, Collection) else Collection.load(obj)


def _files(paths: str | os.PathLike[str] | Sequence[str | os.PathLike[str]], pattern: str) -> list[Path]:
    """Files named, and the files of folders named (those matching ``pattern``, sorted), in order."""
    items = [paths] if isinstance(paths, (str, os.PathLike)) else list(paths)
    files: list[Path] = []
    for item in items:
        p = Path(item)
        if p.is_dir():
            found = sorted(x for x in p.glob(pattern) if x.is_file())
            if not found:
                raise DataError(f"no files matching {pattern!r}", path=str(p))
            files.extend(found)
        elif p.is_file():
            files.append(p)
        else:
            raise DataError("no such file or folder", path=str(p))
    if not files:
        raise DataError("no files given")
    return files


# --------------------------------------------------------------------------- compare two runs


@dataclass
class RunComparison:
    """Per sample and combination: correct in run A, in run B, and what changed (``fixed``, ``broken``, ``same``)."""

    table: pd.DataFrame
    only_a: int = 0  # answers in A with no counterpart in B
    only_b: int = 0
    shared_samples: int = 0  # samples answered in both runs, whatever the prompts
    combinations_a: list[str] = field(default_factory=list)  # "instruction / trigger / extraction" of A's answers
    combinations_b: list[str] = field(default_factory=list)

    def hint(self) -> str | None:
        """Why nothing was paired although both runs answered the same samples (different prompts), and what to do."""
        if len(self.table) or not self.shared_samples:
            return None
        return (f"the runs answer {self.shared_samples} of the same samples, but with no prompt combination in common "
                f"(instruction / CoT trigger / answer extraction; A: {'; '.join(self.combinations_a)}; B: "
                f"{'; '.join(self.combinations_b)}): pick one of each with --select-a KEY=VALUE --select-b KEY=VALUE, "
                "e.g. --select-a cot_trigger=… --select-b cot_trigger=…")

    def counts(self) -> dict[str, int]:
        return {k: int(v) for k, v in self.table["change"].value_counts().items()}

    def flipped(self) -> pd.DataFrame:
        return self.table[self.table["change"] != "same"]


def _first_answers(frame: pd.DataFrame, keys: list[str], where: Mapping[str, str] | None) -> pd.DataFrame:
    if where:
        for col, value in where.items():
            if col not in frame.columns:
                raise DataError(f"cannot select on {col!r}; columns: {', '.join(frame.columns)}")
            frame = frame[frame[col].astype(str) == str(value)]
    frame = frame.sort_values(["cot_index"], kind="stable")
    return frame.drop_duplicates(keys, keep="first")[[*keys, "model", "pred", "correct"]]


def compare_runs(
    a: Any, b: Any, *, mode: Literal["strict", "flexible"] = "strict", select_a: Mapping[str, str] | None = None,
    select_b: Mapping[str, str] | None = None,
) -> RunComparison:
    """Which samples flipped between two runs (files or collections).

    Without selections, answers are paired by sample and combination (instruction, CoT trigger, answer
    extraction), so two models run with the same prompts compare directly.  With ``select_a`` /
    ``select_b`` (e.g. ``{"cot_trigger": "kojima-01"}`` vs ``{"cot_trigger": "zhou-01"}``, or
    ``{"instruction": "refl-01"}`` for self-reflection) the selected answers are paired by sample only, so
    two prompts of one file can be compared.  The first CoT's answer of each pair key is used.
    """
    frames = []
    for run in (a, b):
        answers = evaluate_frame(_collection(run), modes=(mode,), mode=mode).answers
        assert answers is not None  # kept: no answers_csv, keep_answers=True
        frames.append(answers[answers["mode"] == mode])
    keys = SAMPLE_KEY if (select_a or select_b) else SAMPLE_KEY + COMBINATION_KEY
    left = _first_answers(frames[0], keys, select_a)
    right = _first_answers(frames[1], keys, select_b)
    merged = left.merge(right, on=keys, how="outer", suffixes=("_a", "_b"), indicator=True)
    only_a = int((merged["_merge"] == "left_only").sum())
    only_b = int((merged["_merge"] == "right_only").sum())
    both = merged[merged["_merge"] == "both"].drop(columns="_merge").copy()
    ca, cb = both["correct_a"].astype(bool), both["correct_b"].astype(bool)
    both["change"] = "same"
    both.loc[~ca & cb, "change"] = "fixed"
    both.loc[ca & ~cb, "change"] = "broken"
    shared = len(left[SAMPLE_KEY].drop_duplicates().merge(right[SAMPLE_KEY].drop_duplicates(), on=SAMPLE_KEY))
    return RunComparison(both.reset_index(drop=True), only_a, only_b, shared, _combinations(frames[0]), _combinations(frames[1]))


def _combinations(frame: pd.DataFrame) -> list[str]:
    combos = frame[COMBINATION_KEY].drop_duplicates().astype(str).itertuples(index=False)
    return sorted(" / ".join(c) for c in combos)


# --------------------------------------------------------------------------- folders


@dataclass
class FolderMerge:
    collection: Collection
    files: list[Path]
    conflicts: list[str] = field(default_factory=list)


def merge_folder(folder: str | os.PathLike[str] | Sequence[str | os.PathLike[str]], pattern: str = "*.json") -> FolderMerge:
    """Every file of a folder (or of several files and folders) merged into one collection (same sample: CoTs
    combined; conflicts listed, never overwritten)."""
    files = _files(folder, pattern)
    merged = Collection(data={})
    for path in files:
        merged = merged.merge(Collection.load(path))
    return FolderMerge(merged, files, list(merged.merge_conflicts))


@dataclass
class StreamedMerge:
    files: list[Path]
    samples: int
    conflicts: list[str] = field(default_factory=list)


def merge_files(paths: str | os.PathLike[str] | Sequence[str | os.PathLike[str]], out: str | os.PathLike[str],
                pattern: str = "*.json", fmt: Literal["json", "jsonl"] = "json") -> StreamedMerge:
    """:func:`merge_folder` written to ``out`` without holding the files: the same file, byte for byte, and the same
    conflicts, in memory independent of the number of samples.

    Each file is read a sample at a time (:class:`~thoughtsource.io.FileSamples`) into an on-disk index next to ``out``
    (:class:`~thoughtsource.collection.MergeIndex`: as much free disk as the output), then written out in order of
    first appearance (:func:`~thoughtsource.io.write_entries`), grouped by dataset and split as the merged collection is.
    """
    files = _files(paths, pattern)
    out = Path(out)
    conflicts: list[str] = []
    with MergeIndex(out.parent) as index:
        for path in files:
            conflicts.extend(index.add(FileSamples(path).samples()))
        n, _ = write_entries(index.entries(), out, fmt)
    return StreamedMerge(files, n, conflicts)


def evaluate_folder(folder: str | os.PathLike[str] | Sequence[str | os.PathLike[str]], pattern: str = "*.json", *,
                    mode: Literal["strict", "flexible"] = "strict") -> pd.DataFrame:
    """The accuracy table of every file of a folder (or of several files and folders), one block per file (column ``file``).
    Each file is read a sample at a time and scored without a per-answer table: memory does not follow the files."""
    import pandas as pd

    tables = []
    for path in _files(folder, pattern):
        acc = evaluate_frame(FileSamples(path), modes=(mode,), mode=mode, keep_answers=False).accuracy
        tables.append(acc.assign(file=path.name)[["file", *acc.columns]])
    return pd.concat(tables, ignore_index=True)


# --------------------------------------------------------------------------- full-text prompts


def _template(text: str | None, default: str, allowed: Sequence[str]) -> str:
    """A stored template, or the published default when the field holds no usable template (older files wrote
    the literal "cot_trigger_template")."""
    if text and "{" in text and not template_problems(text, allowed):
        return text
    return default


def full_text_prompts(collection: Any, *, prompt_text: bool = True, answer_extraction_text: bool = True,
                      overwrite: bool = False, fragments_files: Sequence[str | os.PathLike[str]] = ()) -> int:
    """Fill in ``prompt_text`` / ``answer_extraction_text`` of generated CoTs from their templates and fragment ids
    (published files left them empty); returns how many texts were written.  Existing texts are kept unless
    ``overwrite``.  A CoT whose fragment ids are unknown is left alone (logged)."""
    c = _collection(collection)
    fragments = load_fragments(fragments_files)
    unknown: set[str] = set()
    written = sum(fill_texts(sample, fragments, unknown, prompt_text=prompt_text,
                             answer_extraction_text=answer_extraction_text, overwrite=overwrite)
                  for _, _, sample in c.samples())
    warn_unknown(unknown)
    return written


def fill_texts(sample: Any, fragments: Any, unknown: set[str], *, prompt_text: bool = True,
               answer_extraction_text: bool = True, overwrite: bool = False) -> int:
    """:func:`full_text_prompts` for one sample (a file read a sample at a time): the texts it wrote; the fragment
    combinations with unknown ids are added to ``unknown`` (:func:`warn_unknown` names them)."""
    written = 0
    for cot in sample.generated_cot:
        instruction, trigger = cot.instruction or None, cot.cot_trigger or None
        if (instruction and instruction not in fragments.instructions) or (trigger and trigger not in fragments.cot_triggers):
            unknown.add(f"{instruction}/{trigger}")
            continue
        templates = Templates(_template(cot.cot_trigger_template, DEFAULT_COT, VARIABLES), DEFAULT_ANSWER)
        values = templates.values(sample, fragments, instruction, trigger)
        if prompt_text and (overwrite or not cot.prompt_text):
            cot.prompt_text = templates.cot_text(values)
            written += 1
        if not answer_extraction_text:
            continue
        for ans in cot.answers:
            if not ans.answer_extraction or ans.answer_extraction not in fragments.answer_extractions:
                continue
            if overwrite or not ans.answer_extraction_text:
                tpl = Templates(templates.cot, _template(ans.answer_extraction_template, DEFAULT_ANSWER, VARIABLES))
                ans.answer_extraction_text = tpl.answer_text(values, cot.cot or "", fragments.answer_extraction(ans.answer_extraction))
                written += 1
    return written


def warn_unknown(unknown: set[str]) -> None:
    """The warning :func:`full_text_prompts` gives about fragment combinations with unknown ids."""
    if unknown:
        log.warning("full_text_prompts: left %d fragment combination(s) with unknown ids alone: %s", len(unknown), sorted(unknown)[:20])


def export_prompts(collection: Any, out: str | os.PathLike[str], **kwargs: Any) -> int:
    """Write every CoT and answer-extraction prompt (filled in as :func:`full_text_prompts` does) as JSON lines:
    ``{dataset, split, sample_id, cot_id, answer_id, stage, prompt}``.  Returns the number of lines."""
    import json

    c = _collection(collection)
    full_text_prompts(c, **kwargs)
    n = 0
    with atomic_write(out) as fh:
        for d, s, sample in c.samples():
            for cot in sample.generated_cot:
                rows = [(None, "cot", cot.prompt_text)] + [(a.id, "answer", a.answer_extraction_text) for a in cot.answers]
                for answer_id, stage, text in rows:
                    if text:
                        fh.write(json.dumps({"dataset": d, "split": s, "sample_id": sample.id, "cot_id": cot.id,
                                             "answer_id": answer_id, "stage": stage, "prompt": text}, ensure_ascii=False) + "\n")
                        n += 1
    return n


# --------------------------------------------------------------------------- length outliers


def length_outliers(collection: Any, *, which: Literal["generated", "reference"] = "generated", k: float = 1.5) -> pd.DataFrame:
    """CoTs whose length in words lies outside [Q1 − k·IQR, Q3 + k·IQR] of their group (dataset, and for generated
    CoTs model + instruction + trigger): truncated, empty or run-away generations.  Sorted by how far out."""
    import pandas as pd

    rows = []
    for d, s, sample in _collection(collection).samples():
        if which == "reference":
            rows.append((d, s, sample.id, "", "reference", len(" ".join(sample.cot).split())))
            continue
        for cot in sample.generated_cot:
            group = f"{model_name(cot.model)}|{cot.instruction}|{cot.cot_trigger}"
            rows.append((d, s, sample.id, cot.id or "", group, len((cot.cot or "").split())))
    frame = pd.DataFrame(rows, columns=["dataset", "split", "sample_id", "cot_id", "group", "words"])
    if frame.empty:
        return frame.assign(low=[], high=[], distance=[])
    stats = frame.groupby(["dataset", "group"])["words"].quantile([0.25, 0.75]).unstack()
    stats.columns = ["q1", "q3"]
    stats["low"] = stats["q1"] - k * (stats["q3"] - stats["q1"])
    stats["high"] = stats["q3"] + k * (stats["q3"] - stats["q1"])
    frame = frame.join(stats[["low", "high"]], on=["dataset", "group"])
    frame["distance"] = (frame["low"] - frame["words"]).clip(lower=0) + (frame["words"] - frame["high"]).clip(lower=0)
    out = frame[frame["distance"] > 0].sort_values("distance", ascending=False, kind="stable")
    return out.reset_index(drop=True)


# --------------------------------------------------------------------------- best cells


def best_cells(table: pd.DataFrame, *, axis: Literal["row", "column"] = "row", higher_is_better: bool = True) -> set[tuple[Any, Any]]:
    """(row label, column label) of the best value in each row (or column) of a numeric table; ties all count."""
    import pandas as pd

    numeric = table.apply(pd.to_numeric, errors="coerce")
    best: set[tuple[Any, Any]] = set()
    lines: Iterable[tuple[Any, pd.Series]] = numeric.iterrows() if axis == "row" else numeric.items()
    for label, values in lines:
        values = values.dropna()
        if values.empty:
            continue
        target = values.max() if higher_is_better else values.min()
        for other in values[values == target].index:
            best.add((label, other) if axis == "row" else (other, label))
    return best


def highlight_best(table: pd.DataFrame, *, axis: Literal["row", "column"] = "row", higher_is_better: bool = True,
                   fmt: str = "{:.3f}", style: Literal["markdown", "html"] = "markdown") -> str:
    """The table as Markdown (best cells in **bold**) or HTML (best cells in ``<b>``), e.g. accuracy per dataset × prompt."""
    marked = best_cells(table, axis=axis, higher_is_better=higher_is_better)
    left, right = ("**", "**") if style == "markdown" else ("<b>", "</b>")

    def cell(row: Any, col: Any, value: Any) -> str:
        text = fmt.format(value) if isinstance(value, (int, float)) and value == value else ("" if value != value else str(value))
        return f"{left}{text}{right}" if (row, col) in marked else text

    header = [str(table.index.name or ""), *map(str, table.columns)]
    body = [[str(row), *(cell(row, col, table.at[row, col]) for col in table.columns)] for row in table.index]
    if style == "html":
        head = "".join(f"<th>{h}</th>" for h in header)
        rows = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in r) + "</tr>" for r in body)
        return f"<table><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>"
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(r) + " |" for r in body]
    return "\n".join(lines)


def accuracy_pivot(accuracy: pd.DataFrame, *, rows: str = "dataset",
                   columns: Sequence[str] = ("model", "instruction", "cot_trigger")) -> pd.DataFrame:
    """An evaluation accuracy table as rows × columns (default dataset × model/instruction/trigger; the answer
    extraction, which ``auto`` picks per answer type, is averaged over), for :func:`highlight_best`."""
    frame = accuracy.copy()
    frame["column"] = [row_label(r, list(columns)) for r in frame[list(columns)].to_dict("records")]  # names its fields
    return frame.pivot_table(index=rows, columns="column", values="accuracy", aggfunc="mean")
