"""Utilities over runs, on the published model runs of ``thoughtsource_examples/model_runs``."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from thoughtsource import Collection
from thoughtsource.cli import app
from thoughtsource.errors import DataError
from thoughtsource.evaluate import evaluate_frame
from thoughtsource.reporting.runs import (
    accuracy_pivot,
    best_cells,
    compare_runs,
    evaluate_folder,
    export_prompts,
    full_text_prompts,
    highlight_best,
    length_outliers,
    merge_files,
    merge_folder,
)
from thoughtsource.testing.scale import run_cli_capped, write_replicated

FLAN = "thoughtsource_67_huggingface_endpoint_flan-T5-xxl_None_None-kojima-01-zhou-01.json"
GPT35 = "thoughtsource_67_openai_chat_gpt-3.5-turbo_None_None-kojima-01-zhou-01.json"


@pytest.fixture(scope="module")
def runs(examples_dir: Path) -> Path:
    return examples_dir / "model_runs"


def test_compare_two_models_on_the_same_prompts(runs: Path) -> None:
    ab = compare_runs(runs / FLAN, runs / GPT35)
    doc = json.loads((runs / FLAN).read_text())
    expected_pairs = sum(len({(c["instruction"], c["cot_trigger"], a["answer_extraction"]) for c in s["generated_cot"] for a in c["answers"]})
                         for sp in doc.values() for xs in sp.values() for s in xs)
    assert len(ab.table) == expected_pairs == 402 * 3 and ab.only_a == ab.only_b == 0
    counts = ab.counts()
    assert counts["fixed"] > 0 and counts["broken"] > 0 and sum(counts.values()) == expected_pairs
    ba = compare_runs(runs / GPT35, runs / FLAN)
    assert (ba.counts()["fixed"], ba.counts()["broken"]) == (counts["broken"], counts["fixed"])
    assert set(compare_runs(runs / FLAN, runs / FLAN).table["change"]) == {"same"}
    flipped = ab.flipped()
    assert ((flipped["change"] == "fixed") == (~flipped["correct_a"].astype(bool) & flipped["correct_b"].astype(bool))).all()


def test_compare_runs_with_no_prompt_in_common_says_why_and_how(runs: Path) -> None:
    gpt4, cohere = runs / "thoughtsource_100_openai_chat_gpt-4_None_zhou-01.json", runs / "thoughtsource_167_cohere_command-xlarge-nightly_None_None.json"
    r = compare_runs(gpt4, cohere)
    assert len(r.table) == 0 and (r.only_a, r.only_b, r.shared_samples) == (600, 1002, 300)
    assert r.combinations_a == ["None / zhou-01 / kojima-A-D", "None / zhou-01 / kojima-A-E", "None / zhou-01 / kojima-yes-no"]
    assert {c.split(" / ")[1] for c in r.combinations_b} == {"None"}
    assert r.hint() is not None and "300 of the same samples" in r.hint() and "--select-a" in r.hint()
    picked = compare_runs(gpt4, cohere, select_a={"cot_trigger": "zhou-01"}, select_b={"cot_trigger": "None"})
    assert len(picked.table) == 300 and picked.hint() is None
    assert compare_runs(runs / FLAN, runs / GPT35).hint() is None  # paired: nothing to explain


def test_compare_two_prompts_of_one_run(runs: Path) -> None:
    r = compare_runs(runs / GPT35, runs / GPT35, select_a={"cot_trigger": "kojima-01"}, select_b={"cot_trigger": "zhou-01"})
    assert len(r.table) == 402 and r.only_a == r.only_b == 0
    with pytest.raises(DataError, match="cannot select on 'colour'"):
        compare_runs(runs / GPT35, runs / GPT35, select_a={"colour": "x"})


def test_merge_and_evaluate_a_folder(runs: Path, tmp_path: Path) -> None:
    for name in (FLAN, GPT35):
        shutil.copy(runs / name, tmp_path / name)
    merged = merge_folder(tmp_path)
    assert len(merged.files) == 2 and len(merged.collection) == 402 and merged.conflicts == []
    assert sum(len(s.generated_cot) for _, _, s in merged.collection.samples()) == 1206 * 2
    table = evaluate_folder(tmp_path)
    assert set(table["file"]) == {FLAN, GPT35}
    assert table.groupby("file")["n"].sum().to_dict() == {FLAN: 1206, GPT35: 1206}
    with pytest.raises(DataError, match="no files matching"):
        merge_folder(tmp_path, "*.parquet")
    assert len(merge_folder([tmp_path / FLAN, tmp_path / GPT35]).collection) == 402  # files instead of a folder
    with pytest.raises(DataError, match="no such file"):
        merge_folder([tmp_path / "missing.json"])


def test_evaluate_folder_streams_the_tables_of_the_loaded_files(runs: Path) -> None:
    """``runs evaluate`` reads each file a sample at a time, without a per-answer table: the same accuracy blocks as
    ``evaluate_frame`` over each loaded file, on every released run, in both modes."""
    files = sorted(runs.glob("*.json"))
    for mode in ("strict", "flexible"):
        table = evaluate_folder(runs, mode=mode)
        blocks = []
        for f in files:
            acc = evaluate_frame(Collection.load(f), modes=(mode,), mode=mode).accuracy
            blocks.append(acc.assign(file=f.name)[["file", *acc.columns]])
        pd.testing.assert_frame_equal(table, pd.concat(blocks, ignore_index=True), check_dtype=False)


@pytest.mark.slow
def test_runs_evaluate_finishes_under_a_memory_cap_that_loading_exceeds(runs: Path, tmp_path: Path,
                                                                         gpt35_replicated: tuple[Path, Any]) -> None:
    """A folder with a 300 MB run (215,000 short real CoTs: the session's ``gpt35_replicated``, hard-linked in) is
    evaluated by ``runs evaluate`` under RLIMIT_AS of 700 MB; before, each file was loaded whole (``Collection.load``
    of this file alone needs ~1.4 GB)."""
    folder = tmp_path / "runs"
    folder.mkdir()
    big, written = gpt35_replicated
    os.link(big, folder / "big.json")
    shutil.copy(runs / FLAN, folder / FLAN)
    p = run_cli_capped(["runs", "evaluate", str(folder), "--json"], 700)
    assert p.returncode == 0, p.stderr[-3000:]
    rows = json.loads(p.stdout)
    assert sum(r["n"] for r in rows if r["file"] == "big.json") == written.answers
    assert sum(r["n"] for r in rows if r["file"] == FLAN) == 1206


def test_full_text_prompts_and_export(runs: Path, tmp_path: Path, examples_dir: Path) -> None:
    c = Collection.load(runs / FLAN)
    assert all(not cot.prompt_text for _, _, s in c.samples() for cot in s.generated_cot)  # published files left them empty
    written = full_text_prompts(c)
    cots = [(s, cot) for _, _, s in c.samples() for cot in s.generated_cot]
    assert written == len(cots) + sum(len(cot.answers) for _, cot in cots)
    fragments = json.loads((examples_dir / "fragments.json").read_text())
    sample, cot = next((s, cot) for s, cot in cots if cot.cot_trigger == "kojima-01" and s.choices)
    choices = "\n".join(f"{chr(65 + i)}) {x}" for i, x in enumerate(sample.choices))
    assert cot.prompt_text == f"{sample.question}\n{choices}\n\n{fragments['cot_triggers']['kojima-01']}"
    ans = cot.answers[0]
    assert ans.answer_extraction_text == f"{cot.prompt_text}{cot.cot}\n{fragments['answer_extractions'][ans.answer_extraction]}"
    assert full_text_prompts(c) == 0  # kept unless overwrite
    out = tmp_path / "prompts.jsonl"
    n = export_prompts(runs / FLAN, out)
    lines = [json.loads(x) for x in out.read_text().splitlines()]
    assert n == len(lines) == written and {x["stage"] for x in lines} == {"cot", "answer"}


def test_length_outliers(runs: Path) -> None:
    c = Collection.load(runs / GPT35)
    s = c["commonsense_qa"]["validation"][0]
    s.generated_cot[0].cot = "word " * 3000  # a run-away generation
    table = length_outliers(c)
    assert table.iloc[0]["sample_id"] == s.id and table.iloc[0]["words"] == 3000
    # every row lies outside the IQR fence of its group, computed here with numpy
    first = s.generated_cot[0]
    group = [len((cot.cot or "").split()) for d, _, x in c.samples() if d == "commonsense_qa" for cot in x.generated_cot
             if (cot.cot_trigger, cot.instruction) == (first.cot_trigger, first.instruction)]
    q1, q3 = np.percentile(group, [25, 75])
    assert table.iloc[0]["high"] == pytest.approx(q3 + 1.5 * (q3 - q1))
    for row in table.itertuples():
        assert row.words < row.low or row.words > row.high
    ref = length_outliers(c, which="reference")
    assert set(ref["group"]) <= {"reference"}


def test_best_cells_and_highlight() -> None:
    table = pd.DataFrame({"kojima-01": [0.5, 0.9, np.nan], "zhou-01": [0.7, 0.9, 0.2]}, index=pd.Index(["cqa", "medqa", "obqa"], name="dataset"))
    assert best_cells(table) == {("cqa", "zhou-01"), ("medqa", "kojima-01"), ("medqa", "zhou-01"), ("obqa", "zhou-01")}
    assert best_cells(table, axis="column") == {("medqa", "kojima-01"), ("medqa", "zhou-01")}
    assert best_cells(table, higher_is_better=False) == {("cqa", "kojima-01"), ("medqa", "kojima-01"), ("medqa", "zhou-01"), ("obqa", "zhou-01")}
    md = highlight_best(table)
    assert "| cqa | 0.500 | **0.700** |" in md and "| obqa |  | **0.200** |" in md
    assert "<b>0.700</b>" in highlight_best(table, style="html")


def test_best_on_a_real_evaluation(runs: Path) -> None:
    from thoughtsource.evaluate import evaluate_frame

    acc = evaluate_frame(Collection.load(runs / GPT35), modes=("strict",)).accuracy
    pivot = accuracy_pivot(acc)
    assert list(pivot.index) == sorted(acc["dataset"].unique()) and pivot.shape[1] == 3
    for row, col in best_cells(pivot):
        assert pivot.at[row, col] == pivot.loc[row].max()


def test_runs_cli(runs: Path, tmp_path: Path) -> None:
    runner = CliRunner()
    r = runner.invoke(app, ["runs", "compare", str(runs / FLAN), str(runs / GPT35), "--out", str(tmp_path / "c.csv")])
    assert r.exit_code == 0, r.output
    assert "1206 pairs" in r.output and len(pd.read_csv(tmp_path / "c.csv")) == 1206
    r = runner.invoke(app, ["runs", "compare", str(runs / GPT35), str(runs / GPT35), "--select-a", "cot_trigger=kojima-01",
                            "--select-b", "cot_trigger=zhou-01"])
    assert r.exit_code == 0 and "402 pairs" in r.output
    shutil.copy(runs / FLAN, tmp_path / FLAN)
    r = runner.invoke(app, ["runs", "merge", str(tmp_path), "--out", str(tmp_path / "m.jsonl"), "--pattern", "thoughtsource_*.json"])
    assert r.exit_code == 0 and "402 samples" in r.output
    r = runner.invoke(app, ["runs", "evaluate", str(tmp_path), "--pattern", "thoughtsource_*.json"])
    assert r.exit_code == 0 and "commonsense_qa" in r.output
    r = runner.invoke(app, ["runs", "prompts", str(runs / FLAN), "--out", str(tmp_path / "p.jsonl")])
    assert r.exit_code == 0 and (tmp_path / "p.jsonl").read_text().count("\n") > 1206
    r = runner.invoke(app, ["runs", "outliers", str(runs / FLAN)])
    assert r.exit_code == 0 and "outliers" in r.output
    r = runner.invoke(app, ["runs", "best", str(runs / GPT35)])
    assert r.exit_code == 0 and "**" in r.output


def test_runs_evaluate_has_evaluates_columns_units_and_mode(runs: Path, tmp_path: Path) -> None:
    """runs evaluate: --mode as evaluate's, accuracy with its interval in three decimals, a mean-over-datasets row."""
    runner = CliRunner()
    gpt4 = "thoughtsource_100_openai_chat_gpt-4_None_zhou-01.json"
    for mode in ("strict", "flexible"):
        r = runner.invoke(app, ["runs", "evaluate", str(runs / gpt4), "--mode", mode])
        assert r.exit_code == 0, r.output
        assert f"accuracy ({mode})" in r.output and "accuracy (95% CI)" in r.output
        assert "0.720 (0.625–0.799)" in r.output  # commonsense_qa, as evaluate prints it
        assert "mean over datasets" in r.output and "0.820" in r.output
    r = runner.invoke(app, ["runs", "evaluate", str(runs / gpt4), "--mode", "lenient"])
    assert r.exit_code == 2
    r = runner.invoke(app, ["evaluate", str(runs / gpt4), "--out", str(tmp_path / "ev")])
    assert r.exit_code == 0 and "mean over datasets" in r.output


def _real_runs(examples_dir: Path) -> list[Path]:
    return sorted((examples_dir / "model_runs").glob("*.json")) + sorted((examples_dir / "annotated").glob("*.json"))


@pytest.mark.slow
@pytest.mark.parametrize("fmt", ["json", "jsonl"])
def test_streamed_merge_writes_what_the_loaded_merge_writes(examples_dir: Path, tmp_path: Path, fmt: str) -> None:
    """``runs merge`` reads each file a sample at a time into an on-disk index (issue 33): the file it writes is the
    loaded merge's, byte for byte, with the same conflicts in the same order, over every released run and annotated
    file (samples shared between files, CoTs with the same id and different annotations), in either order, with a
    JSONL input among them and a file merged with itself (every sample merged again)."""
    files = _real_runs(examples_dir)
    edited = Collection.load(examples_dir / "model_runs" / GPT35)  # a JSONL copy that differs: conflicts to report
    samples = [x for _, _, x in edited.samples()]
    samples[0].question = "edited"
    samples[1].generated_cot[0].cot = "edited"
    samples[2].generated_cot[0].answers[0].answer = "edited"
    jsonl = tmp_path / "gpt35.jsonl"
    edited.to_jsonl(jsonl)
    for order in ([*files, jsonl, files[0]], [files[0], jsonl, *reversed(files)]):
        loaded = merge_folder(order)
        expected = tmp_path / f"loaded.{fmt}"
        loaded.collection.to_jsonl(expected) if fmt == "jsonl" else loaded.collection.dump(expected)
        streamed = merge_files(order, tmp_path / f"streamed.{fmt}", fmt=fmt)
        assert (tmp_path / f"streamed.{fmt}").read_bytes() == expected.read_bytes()
        assert streamed.conflicts == loaded.conflicts and streamed.samples == len(loaded.collection)
        assert streamed.files == loaded.files
    assert len(loaded.conflicts) >= 3  # the edited copy against the others
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["gpt35.jsonl", f"loaded.{fmt}", f"streamed.{fmt}"])  # no index left


def test_cli_merge_streams_and_reports(examples_dir: Path, tmp_path: Path) -> None:
    runs = examples_dir / "model_runs"
    out = tmp_path / "merged.json"
    r = CliRunner().invoke(app, ["runs", "merge", str(runs / FLAN), str(runs / GPT35), "--out", str(out)])
    assert r.exit_code == 0, r.output
    assert "merged 2 files: 402 samples, 0 conflicts" in r.output
    merged = Collection.load(out)
    assert len(merged) == 402 and sum(len(s.generated_cot) for _, _, s in merged.samples()) == 1206 * 2
    r = CliRunner().invoke(app, ["runs", "merge", str(tmp_path / "missing.json"), "--out", str(tmp_path / "m.json")])
    assert isinstance(r.exception, DataError) and "no such file" in str(r.exception)  # main() prints it as one line
    assert not (tmp_path / "m.json").exists()


@pytest.mark.slow
def test_merge_finishes_under_a_memory_cap_the_loaded_merge_exceeds(examples_dir: Path, tmp_path: Path) -> None:
    """Two 40 MB runs of the same 9,564 samples (the released GPT-3.5 run's, new ids), so that every sample of the
    second is merged into the first's, are merged by ``runs merge`` under RLIMIT_AS of 300 MB; the loaded merge
    (``merge_folder``, what the command ran before) runs out of memory under the same cap (measured: 59 MB peak RSS
    streamed, 452 MB loaded; docs/large-files.md)."""
    from thoughtsource.testing.scale import run_capped

    obj = json.loads((examples_dir / "model_runs" / GPT35).read_text())
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    written = write_replicated(obj, a, 40 << 20)
    shutil.copy(a, b)
    out = tmp_path / "merged.json"
    p = run_cli_capped(["runs", "merge", str(a), str(b), "--out", str(out)], 300)
    assert p.returncode == 0, p.stderr[-3000:]
    assert f"merged 2 files: {written.samples} samples, 0 conflicts" in p.stderr + p.stdout
    merged = json.loads(out.read_text())
    assert sum(len(x["generated_cot"]) for sp in merged.values() for xs in sp.values() for x in xs) == written.cots
    p = run_capped(f"from thoughtsource.reporting.runs import merge_folder\nmerge_folder([{str(a)!r}, {str(b)!r}])", 300)
    assert p.returncode != 0 and "MemoryError" in p.stderr, p.stderr[-3000:]
