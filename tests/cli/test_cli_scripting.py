"""Issue 22's scripting conventions on the real entry point, run in process (``run_cli``): ``--json`` on validate, runs compare
and generate; progress log lines on a pipe; flags, units and ``--out``; checks before work; messages."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from cli_in_process import run_cli

REPO = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "PYTHONPATH": f"{REPO / 'src'}{os.pathsep}{os.environ.get('PYTHONPATH', '')}", "OMP_NUM_THREADS": "1"}
ENV.pop("PYTEST_CURRENT_TEST", None)


def ts(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return run_cli(*args, env=env or ENV)


@pytest.fixture
def worldtree(examples_dir: Path) -> Path:
    return examples_dir / "tests_unit_data" / "worldtree_100_dataset.json"


def _mock_generate(src: Path, tmp_path: Path, *extra: str) -> list[str]:
    return ["generate", "--file", str(src), "--split", "train", "--limit", "3", "--triggers", "kojima-01",
            "--backend", "mock", "--db", str(tmp_path / "s.sqlite"), *extra]


# --------------------------------------------------------------------------- 1. --json
def test_validate_json(examples_dir: Path, tmp_path: Path) -> None:
    annotated = examples_dir / "annotated" / "annotated_wt_davinci.json"
    ok = ts("validate", str(annotated), "--json")
    assert ok.returncode == 0 and ok.stderr == "", ok.stderr
    assert json.loads(ok.stdout) == {"file": str(annotated), "valid": True, "samples": 100, "error": None, "problems": []}
    bad = tmp_path / "bad.json"
    data = json.loads(annotated.read_text())
    data["worldtree"]["test"][0]["answer"] = 5  # a list of strings is required
    bad.write_text(json.dumps(data))
    p = ts("validate", str(bad), "--json")
    assert p.returncode == 1
    verdict = json.loads(p.stdout)
    assert verdict["valid"] is False and verdict["file"] == str(bad) and (verdict["problems"] or verdict["error"])


def test_runs_compare_json(examples_dir: Path) -> None:
    runs = examples_dir / "model_runs"
    a = runs / "thoughtsource_67_openai_chat_gpt-3.5-turbo_None_None-kojima-01-zhou-01.json"
    b = runs / "thoughtsource_67_huggingface_endpoint_flan-T5-xxl_None_None-kojima-01-zhou-01.json"
    select = ("--select-a", "cot_trigger=zhou-01", "--select-b", "cot_trigger=zhou-01")
    text = ts("runs", "compare", str(a), str(b), *select)
    p = ts("runs", "compare", str(a), str(b), *select, "--json")
    assert p.returncode == 0, p.stderr
    result = json.loads(p.stdout)
    assert text.stdout.startswith(f"{result['pairs']} pairs: {result['fixed']} fixed, {result['broken']} broken, {result['same']} same")
    assert len(result["flipped"]) == result["fixed"] + result["broken"]
    assert (result["pairs"], result["fixed"], result["broken"]) == (402, 56, 80)
    assert {r["change"] for r in result["flipped"]} <= {"fixed", "broken"}


def test_generate_json_run_summary(worldtree: Path, tmp_path: Path) -> None:
    out = tmp_path / "out.json"
    p = ts(*_mock_generate(worldtree, tmp_path, "--out", str(out), "--json"))
    assert p.returncode == 0, p.stderr
    summary = json.loads(p.stdout)  # stdout is the summary alone
    assert summary["out"] == str(out) and summary["samples"] == 3 and summary["ok"] is True
    assert summary["cot_requests"] == 3 and summary["attached_cots"] == 3 and summary["errors"] == 0
    assert "wrote 3 samples" in p.stderr
    dry = json.loads(ts(*_mock_generate(worldtree, tmp_path, "--dry-run", "--json")).stdout)
    assert dry["dry_run"] is True and dry["out"] is None and dry["cached"] == summary["cot_requests"] + summary["answer_requests"]


# --------------------------------------------------------------------------- 2. progress lines on a pipe
def test_piped_generate_logs_progress_lines_not_a_bar(worldtree: Path, tmp_path: Path) -> None:
    env = {**ENV, "THOUGHTSOURCE_PROGRESS_INTERVAL": "0"}  # a line at every step, so that the test does not wait
    p = ts(*_mock_generate(worldtree, tmp_path, "--out", str(tmp_path / "o.json")), env=env)
    assert p.returncode == 0, p.stderr
    lines = [line for line in p.stderr.splitlines() if "generate: " in line]
    assert any("generate: 6/6 (100%)" in line for line in lines), p.stderr  # 3 CoTs + 3 answers
    assert "━" not in p.stderr and "\r" not in p.stderr and "\x1b[" not in p.stderr
    quiet = ts("-q", *_mock_generate(worldtree, tmp_path, "--out", str(tmp_path / "q.json")), env=env)
    assert quiet.returncode == 0 and quiet.stderr == ""


def test_progress_without_a_terminal_logs_lines(monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    """The helper STaR's generation and training use: advance/update/stop as the training callback calls them."""
    from thoughtsource import console

    monkeypatch.delenv("PYTEST_CURRENT_TEST", raising=False)
    monkeypatch.setenv("THOUGHTSOURCE_PROGRESS_INTERVAL", "0")
    caplog.set_level("INFO", logger="thoughtsource.progress")
    bar = console.progress("loss")
    bar.start()
    task = bar.add_task("train", total=4, loss="")
    for step in range(3):
        bar.advance(task)
        bar.update(task, loss=f"{1 / (step + 1):.4f}")
    bar.stop()
    lines = [r.getMessage() for r in caplog.records if r.name == "thoughtsource.progress"]
    assert [line.split(",")[0] for line in lines] == ["train: 1/4 (25%)", "train: 2/4 (50%)", "train: 3/4 (75%)"]
    assert "loss 1.0000" in lines[1] and "ETA" in lines[0]
    monkeypatch.setenv("THOUGHTSOURCE_PROGRESS_INTERVAL", "3600")  # nothing before the interval has passed
    caplog.clear()
    with console.progress() as bar2:
        t = bar2.add_task("generate", total=2)
        bar2.advance(t, 2)
    assert [r for r in caplog.records if r.name == "thoughtsource.progress"] == []


# --------------------------------------------------------------------------- 5. flags and units
def test_accuracy_has_one_unit_in_csv_markdown_and_the_terminal(examples_dir: Path, tmp_path: Path) -> None:
    """0.820 everywhere (a proportion, as results.json and lm-eval have it), not 0.82 in the CSV and 82.0 on screen."""
    import csv

    f = examples_dir / "model_runs" / "thoughtsource_100_openai_chat_gpt-4_None_zhou-01.json"
    p = ts("evaluate", str(f), "--out", str(tmp_path / "ev"))
    assert p.returncode == 0, p.stderr
    rows = [r for r in csv.DictReader((tmp_path / "ev" / "accuracy.csv").open()) if r["mode"] == "strict"]
    med = next(r for r in rows if r["dataset"] == "med_qa")
    acc, lo, hi = (float(med[k]) for k in ("accuracy", "ci_low", "ci_high"))
    assert 0 < lo < acc < hi < 1
    shown = f"{acc:.3f} ({lo:.3f}–{hi:.3f})"
    line = next(x for x in p.stdout.splitlines() if "med_qa" in x)
    assert shown in line, line
    md = next(x for x in (tmp_path / "ev" / "accuracy.md").read_text().splitlines() if "med_qa" in x and "strict" in x)
    cells = [c.strip() for c in md.strip("|").split("|")]
    assert f"{acc:.3f}" in cells and f"{lo:.3f}" in cells and f"{hi:.3f}" in cells
    assert f"{100 * acc:.1f}" not in p.stdout + md  # no percentages beside proportions
    pooled = next(x for x in p.stdout.splitlines() if x.startswith("pooled"))
    assert "%" not in pooled and ": 0.880 (flexible 0.880)" in pooled


def test_limit_is_how_many_samples_and_n_stays_cots_per_prompt(worldtree: Path, tmp_path: Path) -> None:
    p = ts(*_mock_generate(worldtree, tmp_path, "--n", "2", "--temperature", "0.7", "--out", str(tmp_path / "o.json"), "--json"))
    assert p.returncode == 0, p.stderr
    summary = json.loads(p.stdout)
    assert summary["samples"] == 3 and summary["cot_requests"] == 3 * 2  # --limit 3 samples, --n 2 CoTs each
    old = ts(*[a if a != "--limit" else "--n-samples" for a in _mock_generate(worldtree, tmp_path, "--dry-run", "--json")])
    assert old.returncode == 0 and json.loads(old.stdout)["samples"] == 3  # the old name still works
    both = ts(*_mock_generate(worldtree, tmp_path, "--n-samples", "2", "--dry-run"))
    assert both.returncode == 2 and "--limit or its old name --n-samples" in both.stderr
    help_text = ts("generate", "--help").stdout
    assert "--limit" in help_text and "--n-samples" not in help_text


def test_datasets_export_out_is_the_folder_not_its_parent(shared_data: Path, tmp_path: Path) -> None:
    if not (shared_data / "gsm8k").is_dir():
        pytest.skip("no gsm8k raw files")
    env = {**ENV, "THOUGHTSOURCE_DATA": str(shared_data), "THOUGHTSOURCE_OFFLINE": "1"}
    out = tmp_path / "gsm8k"
    p = ts("datasets", "export", "gsm8k", "--split", "test", "--format", "parquet", "--out", f"{out}/", env=env)
    assert p.returncode == 0, p.stderr
    assert sorted(x.name for x in out.iterdir()) == ["test.parquet"]  # not gsm8k/gsm8k/test.parquet
    info = json.loads(ts("info", str(out), "--json").stdout)
    assert [(r["dataset"], r["split"], r["samples"]) for r in info["splits"]] == [("gsm8k", "test", 1319)]
    as_file = ts("datasets", "export", "gsm8k", "--split", "test", "--out", str(tmp_path / "g.jsonl"), env=env)
    assert as_file.returncode == 0 and (tmp_path / "g.jsonl").is_file()  # --out names the file, its suffix the format
    subset = ts("datasets", "subset", "--limit", "5", "-d", "gsm8k", "--out", str(tmp_path / "s.json"), env=env)
    assert subset.returncode == 0, subset.stderr
    assert json.loads(ts("info", str(tmp_path / "s.json"), "--json").stdout)["splits"][0]["samples"] == 5


# --------------------------------------------------------------------------- 6. check before work
def test_an_unwritable_out_is_refused_before_generation(worldtree: Path, tmp_path: Path) -> None:
    in_the_way = tmp_path / "taken"
    in_the_way.write_text("a file, not a folder")
    cases = [in_the_way / "out.json", tmp_path]  # a file stands where a folder is needed; a folder where the file goes
    if os.geteuid() != 0:  # root writes anywhere
        locked = tmp_path / "locked"
        locked.mkdir(mode=0o500)
        cases.append(locked / "out.json")
    for out in cases:
        p = ts(*_mock_generate(worldtree, tmp_path, "--out", str(out)))
        assert p.returncode == 1 and "Traceback" not in p.stderr, p.stderr
        lines = p.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith(f"error: {out}: "), p.stderr
        assert not (tmp_path / "s.sqlite").exists()  # refused before the store was opened: nothing was generated
    p = ts("evaluate", str(worldtree), "--out", str(in_the_way / "ev"))
    assert p.returncode == 1 and "is a file, where a folder is needed" in p.stderr


# --------------------------------------------------------------------------- 7. messages and labels
def test_an_empty_file_and_a_csv_get_their_own_messages(tmp_path: Path) -> None:
    empty, blank, table = tmp_path / "run.json", tmp_path / "run.jsonl", tmp_path / "accuracy.csv"
    empty.write_text("")
    blank.write_text("\n\n")
    table.write_text("dataset,split,model,accuracy\ngsm8k,test,m,0.5\n")
    csv_named_json = tmp_path / "table.json"
    csv_named_json.write_text(table.read_text())
    for path, message in [(empty, "the file is empty"), (blank, "the file is empty"), (table, "this is a CSV table"),
                          (csv_named_json, "this is a CSV table")]:
        for command in (["info", str(path)], ["evaluate", str(path), "--out", str(tmp_path / "ev")]):
            p = ts(*command)
            assert p.returncode == 1, p.stderr
            assert p.stderr.strip().splitlines() == [p.stderr.strip()]  # one line
            assert p.stderr.startswith(f"error: {path}: {message}") and "Expecting value" not in p.stderr


def test_table_row_labels_name_their_fields(examples_dir: Path, tmp_path: Path) -> None:
    f = examples_dir / "model_runs" / "thoughtsource_100_openai_chat_gpt-4_None_zhou-01.json"
    p = ts("evaluate", str(f), "--out", str(tmp_path / "ev"))
    pooled = next(x for x in p.stdout.splitlines() if x.startswith("pooled"))
    assert pooled.startswith("pooled (model: gpt-4): instruction: none · trigger: zhou-01 · extraction: kojima-A-D: 0.880")
    assert "None" not in p.stdout.replace(f.name, "")  # no bare None (but in the file name): "instruction: none"
    best = ts("runs", "best", str(f)).stdout
    assert "| dataset | model: gpt-4 · instruction: none · trigger: zhou-01 |" in best
