"""``thoughtsource evaluate FILE``: rich tables, results.json, CSV/Markdown tables and PNG plots."""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from cli_in_process import run_cli
from thoughtsource.cli import app
from thoughtsource.collection import Collection
from thoughtsource.datasets.cot_logs import log_to_samples, read_kojima_log_file
from thoughtsource.errors import ConfigError

runner = CliRunner()


def test_evaluate_model_run(examples_dir: Path, tmp_path: Path) -> None:
    f = examples_dir / "model_runs" / "thoughtsource_100_openai_chat_gpt-4_None_zhou-01.json"
    out = tmp_path / "ev"
    r = runner.invoke(app, ["evaluate", str(f), "--out", str(out), "--scored", str(tmp_path / "scored.json")])
    assert r.exit_code == 0, r.output
    assert "accuracy (strict)" in r.output and "med_qa" in r.output
    assert {p.name for p in out.iterdir()} == {
        "results.json",
        "accuracy.csv",
        "accuracy.md",
        "answers.csv",
        "accuracy.png",
        "trigger_heatmap.png",
    }
    assert (out / "accuracy.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    csv = (out / "accuracy.csv").read_text().splitlines()
    assert csv[0].startswith(
        "dataset,split,model,instruction,cot_trigger,answer_extraction,mode,n,questions,correct,accuracy,ci_low,ci_high,stderr"
    )
    assert len(csv) == 1 + 2 * 6  # 6 datasets x 2 modes
    scored = Collection.load(tmp_path / "scored.json")
    flags = [a.correct_answer for _, _, s in scored.samples() for _, a in s.iter_answers()]
    assert len(flags) == 600 and sum(flags) == 492  # 82.0%, as printed


def test_evaluate_numbers_flexible(shared_data: Path, tmp_path: Path) -> None:
    log = read_kojima_log_file(shared_data / "kojima_logs" / "multiarith_zero_shot_cot.log")
    f = tmp_path / "multiarith.json"
    Collection(data={"multiarith": {"test": log_to_samples(log)}}).dump(f)
    r = runner.invoke(app, ["evaluate", str(f), "--mode", "flexible", "--out", str(tmp_path / "o")])
    assert r.exit_code == 0, r.output
    assert "accuracy (flexible)" in r.output and "0.798" in r.output  # 479/600, see docs/evaluation.md
    md = (tmp_path / "o" / "accuracy.md").read_text()
    assert "| multiarith" in md and "0.798" in md


def test_a_plot_that_fails_is_a_warning_and_the_results_are_written(examples_dir: Path, tmp_path: Path) -> None:
    f = examples_dir / "model_runs" / "thoughtsource_100_openai_chat_gpt-4_None_zhou-01.json"
    out = tmp_path / "ev"
    (out / "accuracy.png").mkdir(parents=True)  # the plot cannot be written there
    r = run_cli("evaluate", str(f), "--out", str(out))
    assert r.returncode == 0, r.stderr
    assert "plot accuracy.png not written" in " ".join(r.stderr.split())
    assert "accuracy (strict)" in r.stdout
    assert {"results.json", "accuracy.csv", "trigger_heatmap.png"} <= {p.name for p in out.iterdir()}


def test_bad_k_is_a_config_error(examples_dir: Path, tmp_path: Path) -> None:
    f = examples_dir / "model_runs" / "thoughtsource_100_openai_chat_gpt-4_None_zhou-01.json"
    r = runner.invoke(app, ["evaluate", str(f), "--k", "a,b", "--out", str(tmp_path)])
    assert isinstance(r.exception, ConfigError)


def test_evaluate_prints_self_consistency(tmp_path: Path) -> None:
    from thoughtsource.schema import Answer, GeneratedCot, Sample

    cots = [
        GeneratedCot(id=f"c{i}", cot_trigger="kojima-01", cot="...", model="m", answers=[Answer(id=f"a{i}", answer=f" {v}.")])
        for i, v in enumerate([3, 3, 4, 4, 3])
    ]
    f = tmp_path / "sc.json"
    Collection(data={"toy": {"test": [Sample(id="q", question="?", type="number", answer=["3"], generated_cot=cots)]}}).dump(f)
    r = runner.invoke(app, ["evaluate", str(f), "--k", "1,5", "--out", str(tmp_path / "o")])
    assert r.exit_code == 0, r.output
    assert "maj@k" in r.output
    maj = (tmp_path / "o" / "majority.csv").read_text().splitlines()
    assert len(maj) == 1 + 2 * 2  # k in (1, 5) x 2 modes
    assert any(",strict,5,1,1,1.0," in line for line in maj)  # maj@5 of [3, 3, 4, 4, 3] is 3: right


def test_results_json_records_config_versions_and_every_cell(examples_dir: Path, tmp_path: Path) -> None:
    """results.json: lm-eval's keys, and under 'thoughtsource' the config, versions, git commit, models, every cell."""
    f = examples_dir / "model_runs" / "thoughtsource_100_openai_chat_gpt-4_None_zhou-01.json"
    out = tmp_path / "ev"
    p = run_cli("evaluate", str(f), "--out", str(out), "--k", "1")
    assert p.returncode == 0, p.stderr
    full = json.loads((out / "results.json").read_text())
    assert {"results", "configs", "versions", "n-samples", "config", "git_hash", "higher_is_better"} <= set(full)
    assert len(full["results"]) == 6  # one task per dataset (one model, one prompt), in the chosen mode
    doc = full["thoughtsource"]
    assert doc["schema"] == "thoughtsource/evaluate-results/v2"
    assert doc["config"]["file"] == {"path": str(f), "bytes": f.stat().st_size, "sha256": hashlib.sha256(f.read_bytes()).hexdigest()}
    assert doc["config"]["mode"] == "strict" and doc["config"]["ks"] == [1]
    assert doc["config"]["command"][:2] == ["thoughtsource", "evaluate"]
    versions = doc["package_versions"]
    assert versions["thoughtsource"] and versions["python"] == ".".join(map(str, sys.version_info[:3])) and versions["pandas"]
    if (Path(__file__).resolve().parents[2] / ".git").exists():
        assert len(doc["git"]["commit"]) == 40 and full["git_hash"] == doc["git"]["commit"][:7]
    assert [(m["name"], m["cots"]) for m in doc["models"]] == [("gpt-4", 600)]
    strict = [c for c in doc["cells"] if c["mode"] == "strict"]
    assert len(strict) == 6 and len(doc["cells"]) == 12  # 6 datasets x 2 modes
    assert sum(c["n"] for c in strict) == 600 and sum(c["correct"] for c in strict) == 492  # 82.0%, as in the table
    for c in doc["cells"]:
        assert c["accuracy"] == c["correct"] / c["n"] and c["questions"] == c["n"]
        assert c["interval"]["method"] == "wilson" and c["interval"]["level"] == 0.95
        assert c["interval"]["low"] <= c["accuracy"] <= c["interval"]["high"]
        assert c["no_answer_rate"] == c["no_answer"] / c["n"]
    assert doc["pooled_by_model"]["strict"] == {
        "gpt-4": {"None_zhou-01_kojima-A-D": 0.88, "None_zhou-01_kojima-A-E": 0.74, "None_zhou-01_kojima-yes-no": 0.8}}
    # the same document on stdout with --json, and nothing else there
    j = run_cli("evaluate", str(f), "--out", str(tmp_path / "ev2"), "--k", "1", "--json")
    assert j.returncode == 0, j.stderr
    printed = json.loads(j.stdout)
    assert printed["results"] == full["results"] and printed["thoughtsource"]["cells"] == doc["cells"]
    assert "wrote results.json" in j.stderr


def test_json_without_answers_is_still_a_document(examples_dir: Path, tmp_path: Path) -> None:
    f = examples_dir / "tests_unit_data" / "worldtree_100_dataset.json"
    p = run_cli("evaluate", str(f), "--out", str(tmp_path / "ev"), "--json")
    assert p.returncode == 0 and "no generated answers to evaluate" in p.stderr
    doc = json.loads(p.stdout)
    assert doc["results"] == {} and doc["thoughtsource"]["models"] == [] and doc["thoughtsource"]["config"]["file"]["path"] == str(f)


def test_piped_tables_are_neither_cut_nor_truncated(tmp_path: Path) -> None:
    """To a pipe, rows keep every character (at 80 columns the long model names of maj@k rows became '…')."""
    import os

    from thoughtsource.schema import Answer, GeneratedCot, Sample

    model = "organisation-with-a-long-name/a-model-with-a-long-name-Instruct-v0.3-" + "x" * 30
    cots = [GeneratedCot(id=f"c{i}", cot_trigger="kojima-01", cot="...", model={"name": model, "temperature": 0.7},
                         answers=[Answer(id=f"a{i}", answer=f" {v}.")]) for i, v in enumerate([3, 3, 4])]
    f = tmp_path / "sc.json"
    Collection(data={"toy": {"test": [Sample(id="q", question="?", type="number", answer=["3"], generated_cot=cots)]}}).dump(f)
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    p = run_cli("evaluate", str(f), "--k", "1,3", "--out", str(tmp_path / "o"), env=env)
    assert p.returncode == 0, p.stderr
    assert "…" not in p.stdout
    rows = [line for line in p.stdout.splitlines() if model in line]
    assert len(rows) >= 2 and any("│ 3 " in r or " 3 │" in r for r in rows)  # the maj@3 row, whole, on one line


def test_evaluate_reports_reasoning_length_truncation_and_accuracy_by_length(tmp_path: Path) -> None:
    import matplotlib.image as mpimg

    from test_evaluate import _reasoning_collection  # tests/ is on sys.path (rootdir-relative, no package)

    src = tmp_path / "reasoning.json"
    _reasoning_collection().dump(src)
    out = tmp_path / "ev"
    r = runner.invoke(app, ["evaluate", str(src), "--out", str(out)])
    assert r.exit_code == 0, r.output
    assert "reasoning length per model" in r.output
    table = r.output.split("reasoning length per model")[1]
    row = next(line for line in table.splitlines() if line.strip("│ ").startswith("r1"))
    assert [c.strip() for c in row.strip("│ ").split("│")][1:] == ["10", "tokens", "136", "19", "55", "500", "500",
                                                                   "0.200 (0.057–0.510)"]
    for name in ("reasoning.csv", "reasoning.md", "accuracy_by_length.csv", "accuracy_by_length.md", "reasoning.png"):
        assert (out / name).exists(), name
    assert mpimg.imread(out / "reasoning.png").shape[1] > 1000
    doc = json.loads((out / "results.json").read_text())["thoughtsource"]
    assert {c["model"]: c["truncation_rate"] for c in doc["reasoning"]} == {"plain": 0.0, "r1": 0.2}
    strict = [c for c in doc["accuracy_by_length"] if c["mode"] == "strict" and c["model"] == "r1"]
    assert [(c["bin"], c["length_median"], c["accuracy"]) for c in strict] == [(1, 15, 1), (2, 35, 1), (3, 55, 0), (4, 75, 0)]


def test_evaluate_without_reasoning_models_writes_no_reasoning_tables(tmp_path: Path, examples_dir: Path) -> None:
    out = tmp_path / "ev"
    r = runner.invoke(app, ["evaluate", str(examples_dir / "annotated" / "annotated_wt_davinci.json"), "--out", str(out)])
    assert r.exit_code == 0, r.output
    assert "reasoning length" not in r.output and not (out / "reasoning.csv").exists() and not (out / "reasoning.png").exists()


def test_an_unknown_answer_type_is_one_line_naming_file_sample_and_type(tmp_path: Path) -> None:
    path = tmp_path / "bad.json"
    path.write_text(json.dumps({"mydata": {"train": [
        {"id": "s1", "question": "q?", "type": "number", "answer": ["1"]},
        {"id": "s2", "question": "q?", "type": "latex", "answer": ["1"]},
    ]}}), encoding="utf-8")  # fmt: skip
    p = run_cli("evaluate", str(path))
    assert p.returncode == 1 and "Traceback" not in p.stderr and p.stdout == ""
    (line,) = p.stderr.strip().splitlines()
    assert str(path) in line and "mydata/train/s2" in line and "'latex'" in line and "'math'" in line


@pytest.mark.slow
def test_generate_and_evaluate_math500_on_the_embedded_model(shared_data: Path, tmp_path: Path) -> None:
    """The issue's commands: generate --dataset math500 --limit 5 (embedded SmolLM2), then evaluate the file."""
    out = tmp_path / "m500.json"
    r = runner.invoke(app, ["generate", "--dataset", "math500", "--data-dir", str(shared_data), "--limit", "5",
                            "--max-tokens", "48", "--out", str(out), "--db", str(tmp_path / "s.sqlite")])
    assert r.exit_code == 0, r.output
    samples = json.loads(out.read_text())["math500"]["test"]
    assert len(samples) == 5 and all(x["type"] == "math" and x["generated_cot"] for x in samples)
    assert all({"subject", "level"} <= set(x) for x in samples)
    r = runner.invoke(app, ["evaluate", str(out), "--out", str(tmp_path / "ev"), "--json"])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert json.dumps(doc).count("math500") >= 1
    answers = (tmp_path / "ev" / "answers.csv").read_text(encoding="utf-8")
    assert "math:" in answers  # read by the math type's rules
