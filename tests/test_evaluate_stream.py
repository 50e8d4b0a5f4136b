"""``evaluate`` over a file read a sample at a time (``io.FileSamples``) gives the tables of the in-memory path."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from typer.testing import CliRunner

from thoughtsource.cli import app
from thoughtsource.collection import Collection
from thoughtsource.evaluate import Evaluation, evaluate_frame, set_correct_answers, write_tables
from thoughtsource.evaluate.verdicts import answer_verdicts
from thoughtsource.io import FileSamples
from thoughtsource.reporting.results import model_records, results_document, write_results
from thoughtsource.testing.scale import run_capped, run_cli_capped, write_replicated

runner = CliRunner()
RUNS = "model_runs"
GPT35_RUN = f"{RUNS}/thoughtsource_67_openai_chat_gpt-3.5-turbo_None_None-kojima-01-zhou-01.json"


def _assert_same(a: Evaluation, b: Evaluation) -> None:
    for name in ("answers", "accuracy", "majority", "sampling", "lengths", "reasoning", "by_length"):
        x, y = getattr(a, name), getattr(b, name)
        assert (x is None) == (y is None), name
        if x is not None:
            pd.testing.assert_frame_equal(x, y, check_dtype=False, obj=name)
    for m in a.extractions:
        assert [e.value for e in a.extractions[m]] == [e.value for e in b.extractions[m]]


@dataclass(frozen=True)
class RealRun:
    """A released run or annotated file and what the in-memory path gives on it (the file loaded once)."""

    file: Path
    has_answers: bool  # some generated CoT has an answer
    models: list[dict[str, Any]]  # model_records of the loaded file
    loaded: Evaluation  # evaluate_frame(Collection.load(file))


@pytest.fixture(scope="module")
def real_runs(examples_dir: Path) -> list[RealRun]:
    """Every real run and annotated file with its in-memory evaluation, computed once for the two tests that compare
    the streamed and the compact paths with it (each computed it again)."""
    files = sorted((examples_dir / RUNS).glob("*.json")) + sorted((examples_dir / "annotated").glob("*.json"))
    runs = []
    for f in files:
        c = Collection.load(f)
        has_answers = any(cot.answers for _, _, x in c.samples() for cot in x.generated_cot)
        runs.append(RealRun(f, has_answers, model_records(c), evaluate_frame(c)))
    return runs


def _self_consistency(src: Path, out: Path, copies: int = 4) -> Path:
    """The released GPT-3.5 run with ``copies`` samples of every prompt: copy i of a CoT answers with the answer of
    the CoT i places further in its split (real texts, votes that disagree), as a sampled run would."""
    obj = json.loads(src.read_text())
    for splits in obj.values():
        for xs in splits.values():
            cots = [c for x in xs for c in x["generated_cot"]]
            at = 0
            for x in xs:
                new = []
                for c in x["generated_cot"]:
                    for i in range(copies):
                        other = cots[(at + i) % len(cots)]
                        new.append(dict(c, id=f"{c['id']}-{i}", answers=[dict(a, id=f"{a['id']}-{i}") for a in other["answers"]]))
                    at += 1
                x["generated_cot"] = new
    out.write_text(json.dumps(obj))
    return out


KS = [1, 2, 3, 4]


@pytest.fixture(scope="module")
def self_consistency(examples_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], tuple[Path, Evaluation]]:
    """``fmt`` → :func:`_self_consistency` of the released GPT-3.5 run in ``fmt`` (json, jsonl or a parquet folder, each
    converted from the one JSON file) and the in-memory evaluation of the JSON file (``evaluate_frame(Collection.load(
    json), ks=KS)``, computed once): every format's streamed and compact paths must give what the in-memory path gives
    on the original, so a lossy conversion fails too."""
    folder = tmp_path_factory.mktemp("sc")
    src = _self_consistency(examples_dir / GPT35_RUN, folder / "sc.json")
    loaded = Collection.load(src)
    reference = evaluate_frame(loaded, ks=KS)
    made: dict[str, Path] = {"json": src}

    def get(fmt: str) -> tuple[Path, Evaluation]:
        if fmt not in made:
            made[fmt] = f = folder / ("sc.jsonl" if fmt == "jsonl" else "sc_pq")
            if fmt == "jsonl":
                loaded.to_jsonl(f)
            else:
                loaded.to_parquet(f)
        return made[fmt], reference

    return get


def test_streamed_evaluate_equals_in_memory_on_every_real_run(real_runs: list[RealRun]) -> None:
    runs = [r for r in real_runs if r.has_answers]
    assert len(runs) >= 4
    for r in runs:
        _assert_same(r.loaded, evaluate_frame(FileSamples(r.file)))


@pytest.mark.slow
@pytest.mark.parametrize("fmt", ["json", "jsonl", "parquet"])
def test_streamed_self_consistency_equals_in_memory(self_consistency: Callable[[str], tuple[Path, Evaluation]],
                                                    fmt: str) -> None:
    """maj@k and pass@k score each question against its gold: over a re-read file the samples are new objects whose
    ``id()`` is reused, so the gold must not be looked up by ``id(sample)`` (before, the streamed tables were wrong)."""
    f, mem = self_consistency(fmt)
    assert not mem.majority.empty and mem.sampling is not None and not mem.sampling.empty
    assert 0 < mem.majority["accuracy"].max() < 1
    _assert_same(mem, evaluate_frame(FileSamples(f), ks=KS))


def _assert_compact_same(loaded: Evaluation, compact: Evaluation, answers_csv: Path) -> None:
    """``evaluate_frame(..., answers_csv=...)`` (compact codes, the table written as it goes) against the per-answer
    DataFrame path: every table, answers.csv, the pooled accuracies and the verdicts ``--scored`` writes."""
    assert compact.answers is None and not compact.extractions
    assert answers_csv.read_text() == loaded.answers.to_csv(index=False)
    for name in ("accuracy", "majority", "sampling", "lengths", "reasoning", "by_length"):
        x, y = getattr(loaded, name), getattr(compact, name)
        assert (x is None) == (y is None), name
        if x is not None:
            pd.testing.assert_frame_equal(x, y, check_dtype=False, obj=name)
    for m in ("strict", "flexible"):
        assert compact.by_model(m) == loaded.by_model(m)
        assert compact.pooled_cells(m) == loaded.pooled_cells(m)
        assert list(answer_verdicts(compact, m)) == list(answer_verdicts(loaded, m))


def test_compact_evaluate_equals_the_per_answer_one_on_every_real_run(real_runs: list[RealRun], tmp_path: Path) -> None:
    """What the ``evaluate`` command now runs (``answers_csv=``: no per-answer DataFrame) gives what the per-answer path
    gave, on every real run and annotated file; a file without answers writes no answers.csv."""
    compared = 0
    for i, r in enumerate(real_runs):
        csv = tmp_path / str(i) / "answers.csv"
        loaded, compact = r.loaded, evaluate_frame(FileSamples(r.file), answers_csv=csv)
        # results.json's models, gathered in the scoring pass: what a second pass over the file gave
        assert compact.models == loaded.models == r.models
        if loaded.answers.empty:
            assert compact.empty and compact.answers_csv is None and not csv.parent.exists()
            continue
        assert compact.answers_csv == csv
        _assert_compact_same(loaded, compact, csv)
        compared += 1
    assert compared >= 8


@pytest.mark.slow
@pytest.mark.parametrize("fmt", ["json", "jsonl", "parquet"])
def test_compact_self_consistency_equals_the_per_answer_one(self_consistency: Callable[[str], tuple[Path, Evaluation]],
                                                            tmp_path: Path, fmt: str) -> None:
    """maj@k and pass@k from value codes and per-question golds: the same tables as from the answers' values."""
    f, loaded = self_consistency(fmt)
    assert not loaded.majority.empty and loaded.sampling is not None and not loaded.sampling.empty
    csv = tmp_path / "ev" / "answers.csv"
    _assert_compact_same(loaded, evaluate_frame(FileSamples(f), ks=KS, answers_csv=csv), csv)


def test_streamed_evaluate_warns_of_what_load_warns_of_once(examples_dir: Path, tmp_path: Path,
                                                          caplog: pytest.LogCaptureFixture) -> None:
    """A split with a repeated sample id: ``Collection.load`` logs it; the streamed evaluate logs the same, once."""
    obj = json.loads((examples_dir / GPT35_RUN).read_text())
    xs = next(iter(next(iter(obj.values())).values()))
    xs.append(xs[0])
    f = tmp_path / "dup.json"
    f.write_text(json.dumps(obj))
    with caplog.at_level("WARNING"):
        Collection.load(f)
    loaded = [r.getMessage() for r in caplog.records]
    assert loaded and any(xs[0]["id"] in m for m in loaded)
    caplog.clear()
    with caplog.at_level("WARNING"):
        evaluate_frame(FileSamples(f))
    assert [r.getMessage() for r in caplog.records] == loaded


def _outputs(folder: Path) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for p in sorted(folder.iterdir()):
        if p.suffix in (".csv", ".md"):
            out[p.name] = p.read_text()
        elif p.name == "results.json":
            doc = json.loads(p.read_text())
            doc.pop("date")
            ours = doc["thoughtsource"]
            ours.pop("date")
            ours["config"].pop("out_dir")
            ours["config"].pop("command")
            out[p.name] = doc
    return out


@pytest.mark.slow
def test_cli_streamed_evaluate_writes_what_the_in_memory_one_writes(examples_dir: Path, tmp_path: Path) -> None:
    """``evaluate FILE --scored S`` streams: the tables, results.json and the scored file are those of the in-memory path
    (``Collection.load``, ``evaluate_frame``, ``set_correct_answers``, ``Collection.dump``), byte for byte."""
    f = _self_consistency(examples_dir / GPT35_RUN, tmp_path / "sc.json", copies=3)
    r = runner.invoke(app, ["evaluate", str(f), "--out", str(tmp_path / "streamed"), "--scored", str(tmp_path / "s.json")])
    assert r.exit_code == 0, r.output
    assert "maj@k" in r.output
    c = Collection.load(f)
    ref = tmp_path / "loaded"
    ref.mkdir()
    result = evaluate_frame(c, mode="strict")
    write_results(ref / "results.json", results_document(result, c, file=f, mode="strict", ks=None, out_dir=ref))
    write_tables(result, ref)
    assert set_correct_answers(c, result, mode="strict") > 0  # the copies' answers were moved: verdicts change
    c.dump(tmp_path / "loaded.json")
    streamed, loaded = _outputs(tmp_path / "streamed"), _outputs(ref)
    assert {"accuracy.csv", "majority.csv", "sampling.csv", "answers.csv", "results.json"} <= set(streamed)
    assert streamed == loaded
    assert (tmp_path / "s.json").read_bytes() == (tmp_path / "loaded.json").read_bytes()


CAP_MB = 700  # address space of the whole process: the interpreter, pandas, numpy, matplotlib take ~460 MB of it


@pytest.mark.slow
def test_evaluate_finishes_under_a_memory_cap_on_a_file_three_times_larger(examples_dir: Path, tmp_path: Path) -> None:
    """A JSON file of 2.1 GB (the released GPT-3.5 run's samples, new ids, each CoT repeated to ~30 KB like a reasoning
    trace) is evaluated under RLIMIT_AS of 700 MB: every answer is scored and the tables are written.  What still grows
    with the number of answers is the per-answer table (~2 KB an answer, see docs/large-files.md)."""
    obj = json.loads((examples_dir / GPT35_RUN).read_text())
    big = tmp_path / "big.json"
    written = write_replicated(obj, big, 3 * CAP_MB << 20, trace_chars=30_000)
    answers, cots = written.answers, written.cots
    assert big.stat().st_size > 3 * CAP_MB << 20
    out = tmp_path / "ev"
    prog = (f"import resource, sys; resource.setrlimit(resource.RLIMIT_AS, ({CAP_MB << 20}, {CAP_MB << 20}))\n"
            f"from thoughtsource.cli import main; sys.argv = ['thoughtsource', 'evaluate', {str(big)!r}, '--out', {str(out)!r}]\n"
            "main()")
    env = {**os.environ, "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}  # a BLAS thread pool reserves address space
    p = subprocess.run([sys.executable, "-c", prog], capture_output=True, text=True, timeout=600, env=env)
    assert p.returncode == 0, p.stderr[-3000:]
    doc = json.loads((out / "results.json").read_text())
    assert sum(c["n"] for c in doc["thoughtsource"]["cells"] if c["mode"] == "strict") == answers
    assert sum(m["cots"] for m in doc["thoughtsource"]["models"]) == cots
    assert (out / "answers.csv").is_file() and (out / "accuracy.md").is_file()


@pytest.mark.slow
def test_evaluate_of_short_cots_finishes_under_a_cap_the_per_answer_path_exceeds(gpt35_replicated: tuple, tmp_path: Path) -> None:
    """Issue 33: memory no longer grows by a DataFrame row of Python objects per answer.  A 300 MB file of 215,000 short
    real CoTs (the released GPT-3.5 run's samples, new ids) is evaluated by the command under RLIMIT_AS of 700 MB: every
    answer is scored, answers.csv has every row.  The per-answer path the command ran before (``evaluate_frame`` without
    ``answers_csv``, then ``write_tables``) runs out of memory under the same cap (measured: 0.70 GB peak RSS, against
    0.30 GB now; docs/large-files.md)."""
    big, written = gpt35_replicated
    assert written.answers > 200_000
    out = tmp_path / "ev"
    p = run_cli_capped(["evaluate", str(big), "--out", str(out)], CAP_MB)
    assert p.returncode == 0, p.stderr[-3000:]
    doc = json.loads((out / "results.json").read_text())
    assert sum(c["n"] for c in doc["thoughtsource"]["cells"] if c["mode"] == "strict") == written.answers
    with open(out / "answers.csv", encoding="utf-8") as fh:
        assert sum(1 for _ in fh) == 1 + 2 * written.answers  # no answer text spans lines in this run
    old = tmp_path / "old"
    p = run_capped("from thoughtsource.evaluate import evaluate_frame, write_tables\n"
                   "from thoughtsource.io import FileSamples\n"
                   f"write_tables(evaluate_frame(FileSamples({str(big)!r})), {str(old)!r})", CAP_MB)
    assert p.returncode != 0 and "MemoryError" in p.stderr, p.stderr[-3000:]
