"""Training data out: collections, STaR runs and annotation databases as the datasets trainers read.

One export per format (TRL's dataset formats, and OpenAI's PRM800K):

* ``sft``: ``prompt``/``completion`` (standard prompt-completion; TRL's SFTTrainer trains on the completion);
* ``messages``: ``messages`` (conversational: the user's prompt, the assistant's completion);
* ``preference``: ``prompt``/``chosen``/``rejected`` (DPOTrainer): a correct against an incorrect CoT of one model
  for the same prompt, or a STaR run's kept rationale against a rejected one of the same question (V-STaR's verifier data);
* ``stepwise``: ``prompt``/``completions``/``labels`` (stepwise supervision, PRMTrainer), from the annotator's
  step labels;
* ``prm800k``: PRM800K's JSON lines (``question``, ``label.steps[].completions[].rating``), from the same labels.

Sources: a ThoughtSource file (JSON, JSONL, Parquet), a STaR run folder (``config.json`` + ``iter_N/``), or an
annotation database (SQLite; the files it annotated are given beside it).  Every export is a folder that
``datasets.load_dataset(folder)`` reads: ``data/train-00000-of-00001.parquet`` (``data/train.jsonl`` for
PRM800K) and a dataset card ``README.md`` naming the source files with their sha256, the models, the filters
and the counts.  The folder is written beside its final place and renamed into it: never half-written.

What a record holds:

* the prompt is the CoT's ``prompt_text``, filled in from its fragment ids when a file left it empty
  (:func:`~thoughtsource.reporting.runs.full_text_prompts`), else the question block;
* the completion is the CoT; a reasoning model's is ``<think>reasoning</think>`` and its final content;
* CoTs of test and validation samples are left out (and counted) unless ``include_eval_splits``: training on them
  contaminates every later evaluation on those splits;
* correct means every answer of the CoT is marked correct; unmarked answers are judged as ``evaluate`` judges
  them (strict); CoTs cut off mid-thought, empty CoTs and unmarked ones are left out and counted;
* STaR: ``sft`` is exactly ``iter_N/train.jsonl`` (what the model of iteration N was trained on); pairs take the
  kept record against every rationale of the same question and iteration that was not kept (``rationales.json``);
* step labels: +1 and 0 (neutral: no mistake) are ``True``, -1 ``False``; a CoT's steps are cut before its
  first unlabelled step (PRM800K: ratings +1 / 0 / -1 as given).
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import logging
import os
import re
import shutil
import tempfile
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from . import __version__
from .collection import Collection, MergeIndex
from .errors import DataError, ThoughtSourceError, UnknownNameError
from .evaluate import evaluate, evaluate_frame, scored_samples
from .io import FileSamples, read_json
from .prompts import load_fragments
from .prompts.build import question_block
from .reasoning import CONTENT_EXTRACTION, DEFAULT_THINK_TAGS, reasoning_info
from .reporting.runs import fill_texts, full_text_prompts, warn_unknown
from .schema import GeneratedCot, Sample, model_name
from .web.data import Item, NotFound, ServedData, prm_records, rows_from_collection
from .web.db import STEP_KEY, AnnotationDB, CotRef

log = logging.getLogger(__name__)

Format = Literal["sft", "messages", "preference", "stepwise", "prm800k"]
FORMATS: tuple[str, ...] = ("sft", "messages", "preference", "stepwise", "prm800k")

#: What each format's records hold (the dataset card's "Format" section).
DESCRIPTIONS = {
    "sft": "TRL standard prompt-completion: `prompt`, `completion` (SFTTrainer; the loss on the completion).",
    "messages": "TRL conversational language modeling: `messages` (a user turn with the prompt, an assistant turn with the completion).",
    "preference": "TRL standard preference: `prompt`, `chosen`, `rejected` (DPOTrainer, reward models).",
    "stepwise": "TRL stepwise supervision: `prompt`, `completions` (the steps), `labels` (one bool per step; PRMTrainer).",
    "prm800k": "PRM800K JSON lines: `question` (`problem`, `ground_truth_answer`, ...), `label.steps[].completions[].rating` (+1/0/-1).",
}
SQLITE_MAGIC = b"SQLite format 3\x00"
STAR_ITERATION = re.compile(r"^iter_(\d+)$")


# --------------------------------------------------------------------------- sources
@dataclass
class Sources:
    """What the export reads: collections, STaR run folders, an annotation database, and every file read."""

    #: each file's samples: a loaded :class:`Collection`, or (``load_sources(stream=True)``) an ``io.FileSamples``
    collections: list[tuple[Path, Any]] = field(default_factory=list)
    star_runs: list[Path] = field(default_factory=list)
    database: Path | None = None
    files: dict[Path, str] = field(default_factory=dict)  # every file read → sha256

    def read(self, path: Path) -> Path:
        """Note ``path`` (and its sha256) as read; returns it."""
        self.files[path] = sha256_file(path)
        return path


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def is_star_run(path: Path) -> bool:
    return path.is_dir() and (path / "config.json").is_file() and any(STAR_ITERATION.match(p.name) for p in path.iterdir())


def is_sqlite(path: Path) -> bool:
    if not path.is_file():
        return False
    with path.open("rb") as fh:
        return fh.read(len(SQLITE_MAGIC)) == SQLITE_MAGIC


def load_sources(paths: Sequence[str | os.PathLike[str]], *, stream: bool = False) -> Sources:
    """Sort ``paths`` into collections, STaR runs and (at most one) annotation database; load the collections (with
    ``stream``, each is read a sample at a time on every pass instead: ``io.FileSamples``)."""
    def load(path: Path) -> Any:
        return FileSamples(path) if stream else Collection.load(path)

    if not paths:
        raise ThoughtSourceError("no sources given: name ThoughtSource files, STaR run folders or an annotation database")
    src = Sources()
    for raw in paths:
        path = Path(raw)
        if not path.exists():
            raise DataError("no such file or folder", path=str(path))
        if is_star_run(path):
            src.star_runs.append(path)
        elif path.is_dir():  # a Parquet collection (Collection.load names what it lacks)
            src.collections.append((path, load(path)))
            for f in sorted(path.rglob("*")):
                if f.is_file():
                    src.read(f)
        elif is_sqlite(path):
            if src.database is not None:
                raise DataError(
                    f"a second annotation database (the first was {src.database}); export one at a time", path=str(path)
                )
            src.database = src.read(path)
        else:
            src.collections.append((path, load(src.read(path))))
    if src.database is not None and not src.collections:
        raise DataError(
            "an annotation database needs the ThoughtSource files that were annotated, named beside it", path=str(src.database)
        )
    return src


def _star_iterations(run: Path, which: str) -> list[Path]:
    """The ``iter_N`` folders (N >= 1) of a STaR run that have training data: the last one, all of them, or N."""
    found = sorted(
        (
            (int(m.group(1)), p)
            for p in run.iterdir()
            if (m := STAR_ITERATION.match(p.name)) and int(m.group(1)) > 0 and (p / "train.jsonl").is_file()
        ),
        key=lambda t: t[0],
    )
    if not found:
        raise DataError("a STaR run without training data yet (no iter_N/train.jsonl)", path=str(run))
    if which == "all":
        return [p for _, p in found]
    if which == "last":
        return [found[-1][1]]
    if not which.isdigit():
        raise ThoughtSourceError(f"--star-iteration: expected 'last', 'all' or an iteration number, got {which!r}")
    chosen = [p for n, p in found if n == int(which)]
    if not chosen:
        raise DataError(f"no iteration {which} with training data (have {', '.join(str(n) for n, _ in found)})", path=str(run))
    return chosen


def _read_jsonl(src: Sources, path: Path, required: Sequence[str]) -> list[dict[str, Any]]:
    rows = []
    for i, line in enumerate(src.read(path).read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as e:
            raise DataError(f"broken JSON: {e.msg}", path=str(path), line=i, column=e.colno) from None
        if not isinstance(row, dict):
            raise DataError(f"expected a JSON object, got {type(row).__name__}", path=str(path), line=i)
        for key in required:
            if not isinstance(row.get(key), str):
                raise DataError(
                    f"field '{key}': expected a string, got {row.get(key)!r:.80}",
                    path=str(path),
                    line=i,
                    record=str(row.get("id", "")) or None,
                )
        rows.append(row)
    return rows


# --------------------------------------------------------------------------- one CoT as prompt + completion
def cot_prompt(sample: Sample, cot: GeneratedCot) -> str:
    return cot.prompt_text or question_block(sample)


def cot_completion(cot: GeneratedCot, prompt: str) -> str:
    """The CoT as the model wrote it: ``<think>…</think>`` and the final content for a reasoning model; a space
    after a prompt that does not end in one."""
    text = (cot.cot or "").strip()
    if reasoning_info(cot) is not None:
        content = next((a.answer or "" for a in cot.answers if a.answer_extraction == CONTENT_EXTRACTION), "")
        start, end = DEFAULT_THINK_TAGS
        text = f"{start}\n{text}\n{end}\n\n{content.strip()}".rstrip()
    return text if not prompt or prompt[-1].isspace() else " " + text


def cot_correct(cot: GeneratedCot) -> bool | None:
    """True when every marked answer is correct, False when one is wrong, None when none is marked."""
    marks = [a.correct_answer for a in cot.answers if a.correct_answer is not None]
    return all(marks) if marks else None


def _mark_unmarked(collection: Collection) -> None:
    """Judge answers that carry no correctness mark, as ``evaluate`` does (strict); marks already there stay."""
    if any(a.correct_answer is None for _, _, x in collection.samples() for _, a in x.iter_answers()):
        evaluate(collection, overwrite=False, warn=False)


@dataclass
class Cot:
    """One CoT of a collection, ready for a trainer."""

    source: str
    dataset: str
    split: str
    sample_id: str
    cot_id: str
    model: str
    prompt: str
    completion: str
    correct: bool | None

    def meta(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "dataset": self.dataset,
            "split": self.split,
            "sample_id": self.sample_id,
            "cot_id": self.cot_id,
            "model": self.model,
        }


#: splits whose samples measure a model: their CoTs are not training data unless asked for (--include-eval-splits)
EVAL_SPLIT_NAMES = ("test", "validation", "valid", "val", "dev", "eval")
EVAL_LEFT_OUT = "CoT of a test/validation split (--include-eval-splits keeps them)"


def is_eval_split(split: str) -> bool:
    """test, validation, dev, ... and their variants (test_socratic, validation_matched)."""
    s = split.lower()
    return s in EVAL_SPLIT_NAMES or s.startswith(("test", "valid", "dev", "eval"))


def _prepared(collection: Any) -> Iterator[tuple[str, str, Sample]]:
    """The samples of a source with their prompt texts filled in and their unmarked answers judged (strict, as
    ``evaluate``; marks already there stay).  A loaded collection is changed in place; a file read a sample at a time
    is judged in a first pass without a per-answer table and given its verdicts as it is read again."""
    if isinstance(collection, Collection):
        full_text_prompts(collection)
        _mark_unmarked(collection)
        yield from collection.samples()
        return
    samples: Iterable[tuple[str, str, Sample]] = collection.samples()
    if any(a.correct_answer is None for _, _, x in collection.samples() for _, a in x.iter_answers()):
        result = evaluate_frame(collection, mode="strict", keep_answers=False)
        samples = scored_samples(collection.samples(), result, mode="strict", overwrite=False)
    fragments = load_fragments(())
    unknown: set[str] = set()
    for d, s, sample in samples:
        fill_texts(sample, fragments, unknown)
        yield d, s, sample
    warn_unknown(unknown)


def collection_cots(src: Sources, models: Sequence[str], left_out: Counter[str], include_eval_splits: bool = False,
                    ) -> Iterator[Cot]:
    """Every usable CoT of the collections (the model and split filters applied); what is left out is counted by
    reason.  CoTs of test and validation samples are left out unless ``include_eval_splits``: a model trained on them
    is then evaluated on what it was trained on (the published CoTs of GSM8K's test split, say)."""
    for path, collection in src.collections:
        for d, s, sample in _prepared(collection):
            if not include_eval_splits and is_eval_split(s):
                left_out[EVAL_LEFT_OUT] += len(sample.generated_cot)
                continue
            for i, cot in enumerate(sample.generated_cot):
                name = model_name(cot)
                if models and name not in models:
                    left_out["other model"] += 1
                    continue
                info = reasoning_info(cot)
                if info is not None and info.truncated:
                    left_out["cut off mid-thought"] += 1
                    continue
                if not (cot.cot or "").strip():
                    left_out["empty CoT"] += 1
                    continue
                prompt = cot_prompt(sample, cot)
                yield (
                    Cot(
                        path.name,
                        d,
                        s,
                        sample.id,
                        cot.id or f"cot-{i}",
                        name,
                        prompt,
                        cot_completion(cot, prompt),
                        cot_correct(cot),
                    )
                )


# --------------------------------------------------------------------------- STaR runs
def star_sft(src: Sources, run: Path, iterations: str) -> list[dict[str, Any]]:
    """The training records of a STaR run (``iter_N/train.jsonl``)."""
    model = _star_model(src, run)
    out = []
    for d in _star_iterations(run, iterations):
        for r in _read_jsonl(src, d / "train.jsonl", ("id", "prompt", "completion")):
            out.append(
                {
                    "prompt": r["prompt"],
                    "completion": r["completion"],
                    "source": run.name,
                    "dataset": "star",
                    "split": d.name,
                    "sample_id": r["id"],
                    "cot_id": "rationalize" if r.get("rationalized") else "generate",
                    "model": model,
                }
            )
    return out


def star_pairs(src: Sources, run: Path, iterations: str, left_out: Counter[str]) -> list[dict[str, Any]]:
    """Kept against rejected rationales of the same question and iteration (V-STaR's verifier data)."""
    model = _star_model(src, run)
    out = []
    for d in _star_iterations(run, iterations):
        kept = {r["id"]: r for r in _read_jsonl(src, d / "train.jsonl", ("id", "prompt", "completion"))}
        path = d / "rationales.json"
        if not path.is_file():
            raise DataError("a STaR iteration without rationales.json (the rejected rationales)", path=str(d))
        for _, _, sample in Collection.load(src.read(path)).samples():
            rejected = [
                c for c in sample.generated_cot if getattr(c, "kept_for_training", None) is False and (c.cot or "").strip()
            ]
            record = kept.get(sample.id)
            if record is None:
                left_out["question without a kept rationale"] += 1
                continue
            if not rejected:
                left_out["question without a rejected rationale"] += 1
                continue
            lead = record["completion"][: len(record["completion"]) - len(record["completion"].lstrip())]
            for c in rejected:
                out.append(
                    {
                        "prompt": record["prompt"],
                        "chosen": record["completion"],
                        "rejected": lead + (c.cot or "").strip(),
                        "source": run.name,
                        "dataset": "star",
                        "split": d.name,
                        "sample_id": sample.id,
                        "chosen_cot_id": "rationalize" if record.get("rationalized") else "generate",
                        "rejected_cot_id": c.id or "",
                        "model": model,
                    }
                )
    return out


def _star_model(src: Sources, run: Path) -> str:
    cfg = read_json(src.read(run / "config.json"))
    if not isinstance(cfg, dict):
        raise DataError("expected a JSON object (the STaR config)", path=str(run / "config.json"))
    return str(cfg.get("model") or "")


# --------------------------------------------------------------------------- builders, one per format
def sft_records(
    src: Sources,
    *,
    models: Sequence[str] = (),
    all_cots: bool = False,
    star_iteration: str = "last",
    left_out: Counter[str],
    include_eval_splits: bool = False,
    **_: Any,
) -> Iterator[dict[str, Any]]:
    """The records one at a time (the export writes them as they come)."""
    for c in collection_cots(src, models, left_out, include_eval_splits):
        if c.correct is not True and not all_cots:
            left_out["incorrect CoT" if c.correct is False else "CoT without a correctness mark"] += 1
            continue
        yield {"prompt": c.prompt, "completion": c.completion, **c.meta()}
    for run in src.star_runs:
        yield from star_sft(src, run, star_iteration)


def messages_records(src: Sources, **kw: Any) -> Iterator[dict[str, Any]]:
    return (
        {
            "messages": [{"role": "user", "content": r["prompt"]}, {"role": "assistant", "content": r["completion"].lstrip()}],
            **{k: v for k, v in r.items() if k not in ("prompt", "completion")},
        }
        for r in sft_records(src, **kw)
    )


def preference_records(
    src: Sources,
    *,
    models: Sequence[str] = (),
    max_pairs_per_prompt: int | None = None,
    star_iteration: str = "all",
    left_out: Counter[str],
    include_eval_splits: bool = False,
    work_dir: str | os.PathLike[str] | None = None,
    **_: Any,
) -> Iterator[dict[str, Any]]:
    """Every correct × incorrect pair of CoTs of one model for the same prompt (the first ``max_pairs_per_prompt``
    of each): chosen and rejected differ only in what the model wrote, not in the model or in the instruction and
    trigger it was asked with.

    The records one at a time.  A prompt's CoTs may come from several files, so the CoTs are grouped on disk first: each
    goes to a SQLite file in ``work_dir`` (the system's temp folder if None) under its group (dataset, split, sample,
    model, prompt), numbered in order of first appearance; the groups are then read back one at a time, in that order
    (memory: one group; disk: the CoTs' texts)."""
    import sqlite3

    with tempfile.TemporaryDirectory(prefix=".preference.", dir=work_dir) as tmp:
        db = sqlite3.connect(Path(tmp) / "groups.sqlite", isolation_level=None)
        try:
            db.execute("PRAGMA journal_mode=OFF")
            db.execute("PRAGMA synchronous=OFF")
            db.execute("CREATE TABLE groups (g INTEGER PRIMARY KEY, key BLOB UNIQUE)")
            db.execute("CREATE TABLE cots (n INTEGER PRIMARY KEY, g INTEGER, cot TEXT)")
            db.execute("BEGIN")
            for c in collection_cots(src, models, left_out, include_eval_splits):
                if c.correct is None:
                    left_out["CoT without a correctness mark"] += 1
                    continue
                key = hashlib.sha256(json.dumps([c.dataset, c.split, c.sample_id, c.model, c.prompt]).encode()).digest()
                row = db.execute("SELECT g FROM groups WHERE key = ?", (key,)).fetchone()
                g = row[0] if row is not None else db.execute("INSERT INTO groups (key) VALUES (?)", (key,)).lastrowid
                db.execute("INSERT INTO cots (g, cot) VALUES (?, ?)", (g, json.dumps(c.__dict__, ensure_ascii=False)))
            db.execute("COMMIT")
            db.execute("CREATE INDEX cots_g ON cots (g, n)")
            cots: list[Cot] = []
            group = None
            for g, doc in db.execute("SELECT g, cot FROM cots ORDER BY g, n"):
                if g != group and cots:
                    yield from _pairs(cots, max_pairs_per_prompt, left_out)
                    cots = []
                group = g
                cots.append(Cot(**json.loads(doc)))
            if cots:
                yield from _pairs(cots, max_pairs_per_prompt, left_out)
        finally:
            db.close()
    for run in src.star_runs:
        yield from star_pairs(src, run, star_iteration, left_out)


def _pairs(cots: list[Cot], max_pairs_per_prompt: int | None, left_out: Counter[str]) -> Iterator[dict[str, Any]]:
    """The preference records of one group of CoTs (one model, one prompt)."""
    good = [c for c in cots if c.correct]
    bad = [c for c in cots if not c.correct]
    if not good or not bad:
        left_out["CoT without a CoT of the other verdict (same model and prompt)"] += len(cots)
        return
    for g, b in [(g, b) for g in good for b in bad][:max_pairs_per_prompt]:
        yield {
            "prompt": g.prompt,
            "chosen": g.completion,
            "rejected": b.completion,
            "source": g.source if g.source == b.source else f"{g.source} / {b.source}",
            "dataset": g.dataset,
            "split": g.split,
            "sample_id": g.sample_id,
            "chosen_cot_id": g.cot_id,
            "rejected_cot_id": b.cot_id,
            "model": g.model,
        }


class _IndexedCots:
    """The lookup of samples and CoTs that ``web.data.prm_records`` needs, over an on-disk :class:`MergeIndex` of the
    files (as ``ServedData`` merges them in memory): each sample read back when asked for."""

    def __init__(self, index: Any) -> None:
        self.index = index

    def item(self, dataset: str, split: str, sample_id: str) -> Any:
        sample = self.index.get(dataset, split, sample_id)
        if sample is None:
            raise NotFound("no such sample in the served data")
        return Item(0, dataset, split, sample)

    def cot(self, ref: Any) -> GeneratedCot:
        return self.item(ref.dataset, ref.split, ref.sample_id).cot(ref.cot_id)


def step_records(src: Sources, *, models: Sequence[str] = (), left_out: Counter[str],
                 include_eval_splits: bool = False, work_dir: str | os.PathLike[str] | None = None) -> list[dict[str, Any]]:
    """The step labels (adjudicated, else agreed) of the database or of the files, as ``ServedData.prm_records``
    gives them, with the prompt; CoTs whose steps carry no label are left out.

    Files read a sample at a time (``io.FileSamples``) are merged by sample id on disk (:class:`MergeIndex` in
    ``work_dir``, the system's temp folder if None) and the labelled samples looked up there: memory holds the labels
    and the records (of the labelled CoTs only), not the files."""
    import contextlib

    if src.star_runs:
        raise DataError(
            "a STaR run has no step labels; step labels come from ThoughtSource files or an annotation database",
            path=str(src.star_runs[0]),
        )
    with contextlib.ExitStack() as stack:
        if all(isinstance(c, Collection) for _, c in src.collections):
            data: Any = ServedData.from_collections(src.collections)
        else:
            index = stack.enter_context(MergeIndex(work_dir if work_dir is not None else tempfile.gettempdir()))
            for _, c in src.collections:
                index.add(c.samples())
            data = _IndexedCots(index)
        return _step_records(src, data, models, left_out, include_eval_splits)


def _step_records(src: Sources, data: Any, models: Sequence[str], left_out: Counter[str],
                  include_eval_splits: bool) -> list[dict[str, Any]]:
    """:func:`step_records` over ``data`` (``ServedData`` or :class:`_IndexedCots`)."""
    if src.database is not None:
        db = AnnotationDB(src.database)
        rows, final = db.annotations(), db.adjudications()
    else:
        rows, final = [], []
        for _, c in src.collections:
            c_rows, c_final = rows_from_collection(c)
            rows += c_rows
            final += c_final
    records, unresolved = prm_records(data, rows, final)
    if not records and not unresolved:
        where = src.database or ", ".join(str(p) for p, _ in src.collections)
        raise DataError(
            f"no step labels: no CoT has a '{STEP_KEY}' annotation (label steps in `thoughtsource serve`)", path=str(where)
        )
    if unresolved:
        left_out["CoT whose annotators disagree (not adjudicated)"] += unresolved
    out = []
    for r in records:
        if not include_eval_splits and is_eval_split(r["split"]):
            left_out[EVAL_LEFT_OUT] += 1
            continue
        if models and r["model"] not in models:
            left_out["other model"] += 1
            continue
        n = next((i for i, v in enumerate(r["labels"]) if v is None), len(r["labels"]))
        if n == 0:
            left_out["CoT whose first step is not labelled"] += 1
            continue
        for i, v in enumerate(r["labels"][:n]):
            if v not in (-1, 0, 1):
                raise DataError(
                    f"step {i + 1}: expected a label of +1, 0 or -1, got {v!r}",
                    dataset=r["dataset"],
                    split=r["split"],
                    record=f"{r['sample_id']}/{r['cot_id']}",
                    field="labels",
                )
        item = data.item(r["dataset"], r["split"], r["sample_id"])
        cot = data.cot(_ref(r))
        out.append({**r, "steps": r["steps"][:n], "labels": r["labels"][:n], "prompt": cot_prompt(item.sample, cot)})
    return out


def _ref(r: dict[str, Any]) -> Any:
    return CotRef(r["dataset"], r["split"], r["sample_id"], r["cot_id"])


def stepwise_records(src: Sources, **kw: Any) -> list[dict[str, Any]]:
    return [
        {
            "prompt": r["prompt"],
            "completions": r["steps"],
            "labels": [v >= 0 for v in r["labels"]],
            "dataset": r["dataset"],
            "split": r["split"],
            "sample_id": r["sample_id"],
            "cot_id": r["cot_id"],
            "model": r["model"],
            "annotator": r["annotator"],
        }
        for r in step_records(src, models=kw.get("models", ()), left_out=kw["left_out"],
                              include_eval_splits=kw.get("include_eval_splits", False), work_dir=kw.get("work_dir"))
    ]


def prm800k_records(src: Sources, **kw: Any) -> list[dict[str, Any]]:
    out = []
    for r in step_records(src, models=kw.get("models", ()), left_out=kw["left_out"],
                          include_eval_splits=kw.get("include_eval_splits", False), work_dir=kw.get("work_dir")):
        steps = [
            {
                "completions": [{"text": s, "rating": v, "flagged": False}],
                "human_completion": None,
                "chosen_completion": None if v < 0 else 0,
            }
            for s, v in zip(r["steps"], r["labels"], strict=True)
        ]
        finish = "found_error" if -1 in r["labels"] else "solution"
        out.append(
            {
                "labeler": r["annotator"],
                "timestamp": None,
                "generation": None,
                "is_quality_control_question": False,
                "is_initial_screening_question": False,
                "question": {
                    "problem": r["prompt"],
                    "ground_truth_answer": "; ".join(r["gold_answer"]),
                    "pre_generated_steps": r["steps"],
                    "pre_generated_answer": "; ".join(a or "" for a in r["final_answer"]),
                },
                "label": {"steps": steps, "total_time": None, "finish_reason": finish},
                "thoughtsource": {
                    k: r[k] for k in ("dataset", "split", "sample_id", "cot_id", "model", "annotators", "adjudicated_by")
                },
            }
        )
    return out


#: each builder takes the Sources and keyword options (``models``, ``left_out``, ...) and gives the records
BUILDERS: dict[str, Callable[..., Iterable[dict[str, Any]]]] = {
    "sft": sft_records,
    "messages": messages_records,
    "preference": preference_records,
    "stepwise": stepwise_records,
    "prm800k": prm800k_records,
}


# --------------------------------------------------------------------------- writing
@dataclass
class Export:
    """What an export wrote."""

    format: str
    out: Path
    records: int
    left_out: dict[str, int]
    models: dict[str, int]
    files: dict[str, str]
    splits: dict[str, int] = field(default_factory=dict)  # "dataset/split" → records


def export(
    format: str,
    sources: Sequence[str | os.PathLike[str]],
    out: str | os.PathLike[str],
    *,
    models: Sequence[str] = (),
    all_cots: bool = False,
    max_pairs_per_prompt: int | None = None,
    star_iteration: str | None = None,
    force: bool = False,
    command: str = "",
    include_eval_splits: bool = False,
) -> Export:
    """Write the ``format`` dataset of ``sources`` to the folder ``out`` (see the module docstring)."""
    if format not in BUILDERS:
        raise UnknownNameError("training-data format", format, FORMATS)
    out = Path(out)
    if out.exists() and not (out.is_dir() and (force or not any(out.iterdir()))):
        raise DataError("exists and is not an empty folder; pass --force to replace it", path=str(out))
    src = load_sources(sources, stream=format in STREAMED_READ)
    left_out: Counter[str] = Counter()
    iteration = star_iteration or ("all" if format == "preference" else "last")
    kwargs: dict[str, Any] = {
        "models": tuple(models),
        "left_out": left_out,
        "all_cots": all_cots,
        "max_pairs_per_prompt": max_pairs_per_prompt,
        "star_iteration": iteration,
        "include_eval_splits": include_eval_splits,
        "work_dir": out.parent,
    }
    records = BUILDERS[format](src, **kwargs)
    model_counts: Counter[str] = Counter()
    split_counts: Counter[str] = Counter()

    def counted() -> Iterator[dict[str, Any]]:
        for r in records:
            model_counts[_record_model(format, r)] += 1
            split_counts[_record_split(format, r)] += 1
            yield r

    filters: dict[str, Any] = {"models": list(models) or "all", "star_iteration": iteration if src.star_runs else None,
               "test/validation splits": "included" if include_eval_splits else "left out"}
    if format in ("sft", "messages"):
        filters["cots"] = "all" if all_cots else "correct only"
    if format == "preference":
        filters["max_pairs_per_prompt"] = max_pairs_per_prompt
    done: list[Export] = []

    def card(n: int) -> str:
        """The dataset card, once every record is written (or the error that there are none)."""
        if not n:
            reasons = ", ".join(f"{k} {why}" for why, k in left_out.most_common()) or "nothing to export"
            raise DataError(f"no {format} records ({reasons})", path=", ".join(str(p) for p in sources))
        done.append(Export(format, out, n, dict(left_out.most_common()), dict(model_counts.most_common()),
                           {str(p): h for p, h in src.files.items()}, dict(sorted(split_counts.items()))))
        return dataset_card(done[0], filters, command)

    _write_folder(out, counted(), card, jsonl=format == "prm800k", streamed=format in STREAMED)
    result = done[0]
    log.debug(
        "%s: %d %s record(s) from %d file(s); left out: %s", out, result.records, format, len(src.files), dict(left_out) or "none"
    )
    return result


def _record_split(format: str, r: dict[str, Any]) -> str:
    where = r["thoughtsource"] if format == "prm800k" else r
    return f"{where.get('dataset', '?')}/{where.get('split', '?')}" if "split" in where else "(STaR run)"


def _record_model(format: str, r: dict[str, Any]) -> str:
    return r["thoughtsource"]["model"] if format == "prm800k" else r.get("model", "")


#: Formats whose records are written as they are made: memory does not follow the sources (files read a sample at a
#: time, the Parquet file written RECORD_BATCH records at a time); the others build their records first.
STREAMED = ("sft", "messages", "preference")
#: Formats whose sources are read a sample at a time (stepwise / prm800k: the labelled samples looked up in an on-disk
#: index; their records, of the labelled CoTs only, are built before they are written)
STREAMED_READ = (*STREAMED, "stepwise", "prm800k")
RECORD_BATCH = 4096
#: ... or fewer: a batch ends when its texts reach this many characters (800 records of 20 KB reasoning traces)
BATCH_CHARS = 16_000_000


def _write_folder(out: Path, records: Iterable[dict[str, Any]], card: Callable[[int], str], *, jsonl: bool,
                  streamed: bool = False) -> None:
    """Write data, then ``card(number of records)``, into a temp folder beside ``out``, then rename it into place (an
    old ``out`` goes last).  ``streamed``: the Parquet file is written a batch of records at a time (a row group of at
    most :data:`RECORD_BATCH` records and :data:`BATCH_CHARS` characters of text; the schema is the first batch's)."""
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", suffix=".tmp", dir=out.parent))
    try:
        (tmp / "data").mkdir()
        n = 0
        if jsonl:
            with (tmp / "data" / "train.jsonl").open("w", encoding="utf-8") as fh:
                for r in records:
                    fh.write(json.dumps(r, ensure_ascii=False) + "\n")
                    n += 1
        else:
            import pyarrow as pa
            import pyarrow.parquet as pq

            path = tmp / "data" / "train-00000-of-00001.parquet"
            if not streamed:
                rows = list(records)
                n = len(rows)
                if n:
                    pq.write_table(pa.Table.from_pylist(rows), path)
            else:
                writer = None
                try:
                    for batch in _batches(records, RECORD_BATCH, BATCH_CHARS):
                        table = pa.Table.from_pylist(batch, schema=writer.schema if writer is not None else None)
                        writer = writer or pq.ParquetWriter(path, table.schema)
                        writer.write_table(table)
                        n += len(batch)
                finally:
                    if writer is not None:
                        writer.close()
        (tmp / "README.md").write_text(card(n), encoding="utf-8")
        for f in (*(tmp / "data").iterdir(), tmp / "README.md"):
            with f.open("rb") as fh:
                os.fsync(fh.fileno())
        old = None
        if out.exists():
            old = out.with_name(f".{out.name}.{os.getpid()}.old")
            os.replace(out, old)
        os.replace(tmp, out)
        if old is not None:
            shutil.rmtree(old)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def _batches(records: Iterable[dict[str, Any]], size: int, chars: int) -> Iterator[list[dict[str, Any]]]:
    """Lists of at most ``size`` records and about ``chars`` characters of text (a record's strings, and those of its
    lists of messages)."""
    batch: list[dict[str, Any]] = []
    held = 0
    for r in records:
        batch.append(r)
        held += sum(len(v) if isinstance(v, str) else sum(len(str(m)) for m in v) if isinstance(v, list) else 0
                    for v in r.values())
        if len(batch) == size or held >= chars:
            yield batch
            batch, held = [], 0
    if batch:
        yield batch


def dataset_card(result: Export, filters: dict[str, Any], command: str = "") -> str:
    """The README.md of an export: a YAML header, then sources, models, filters and counts.

    The header names no ``configs``: ``datasets`` then finds ``data/train…`` by its file name and caches it by the
    files' modification times, where a ``configs`` pattern is cached by the pattern alone (a second export with
    the same folder name would load the first one from the cache)."""
    lines = [
        "---",
        "tags:",
        "- thoughtsource",
        "- trl",
        "---",
        "",
        f"# ThoughtSource training data: {result.format}",
        "",
        DESCRIPTIONS[result.format],
        "",
        f"Written by thoughtsource {__version__} on {_dt.datetime.now(_dt.timezone.utc).strftime('%Y-%m-%d %H:%M UTC')}"
        + (f" with `{command}`." if command else "."),
        "",
        "## Sources",
        "",
        "| file | sha256 |",
        "|---|---|",
    ]
    lines += [f"| {_cell(p)} | `{h}` |" for p, h in result.files.items()]
    lines += ["", "## Models", "", "| model | records |", "|---|---:|"]
    lines += [f"| {_cell(m or '(unnamed)')} | {n} |" for m, n in result.models.items()]
    lines += ["", "## Splits", "", "| dataset/split | records |", "|---|---:|"]
    lines += [f"| {_cell(k)} | {n} |" for k, n in result.splits.items()]
    lines += ["", "## Filters", ""]
    lines += [f"- {k}: {v}" for k, v in filters.items() if v is not None]
    lines += ["", "## Counts", "", f"- records: {result.records}"]
    lines += [f"- left out, {why}: {n}" for why, n in result.left_out.items()]
    lines += ["", 'Load it with `datasets.load_dataset("path/to/this/folder", split="train")`.', ""]
    return "\n".join(lines)


def _cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def read_records(out: str | os.PathLike[str]) -> Iterable[dict[str, Any]]:
    """The records of an export (without ``datasets``): for tests and quick looks."""
    folder = Path(out) / "data"
    if (folder / "train.jsonl").is_file():
        return [json.loads(line) for line in (folder / "train.jsonl").read_text(encoding="utf-8").splitlines()]
    import pyarrow.parquet as pq

    return pq.read_table(folder / "train-00000-of-00001.parquet").to_pylist()
