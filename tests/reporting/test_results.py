"""results.json has lm-evaluation-harness's shape: lm-eval's own make_table renders it (no network: a pure function)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cli_in_process import run_cli
from thoughtsource.collection import Collection
from thoughtsource.schema import Answer, GeneratedCot, Sample

make_table = pytest.importorskip("lm_eval.utils", reason="lm-eval is a test dependency (the test extra)").make_table


def _evaluate(path: Path, out: Path, *args: str) -> dict:
    p = run_cli("evaluate", str(path), "--out", str(out), *args)
    assert p.returncode == 0, p.stderr
    return json.loads((out / "results.json").read_text())


def test_lm_eval_make_table_renders_our_results_json(examples_dir: Path, tmp_path: Path) -> None:
    f = examples_dir / "model_runs" / "thoughtsource_100_openai_chat_gpt-4_None_zhou-01.json"
    doc = _evaluate(f, tmp_path / "ev")
    task = "med_qa/test/gpt-4/None_zhou-01_kojima-A-E"
    cell = next(c for c in doc["thoughtsource"]["cells"] if c["dataset"] == "med_qa" and c["mode"] == "strict")
    assert doc["results"][task]["acc,none"] == cell["accuracy"] == 0.76
    assert doc["results"][task]["acc_stderr,none"] == pytest.approx((0.76 * 0.24 / 99) ** 0.5)  # sample sd / sqrt(n)
    assert doc["n-samples"][task] == {"original": 100, "effective": 100}
    assert doc["configs"][task]["metadata"]["model"] == "gpt-4" and doc["versions"][task] == 2
    table = make_table(doc)
    rows = [line for line in table.splitlines() if line.startswith("|") and "---" not in line]
    assert len(rows) == 1 + 6  # the header and one row per task (6 datasets)
    row = next(r for r in rows if task in r)
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[:2] == [task, "2"] and cells[2] == "none" and cells[4] == "acc" and cells[5] == "↑"
    assert float(cells[6]) == 0.76 and cells[7] == "±"  # pytablewriter trims "0.7600" to "0.76"
    assert float(cells[8]) == pytest.approx((0.76 * 0.24 / 99) ** 0.5, abs=5e-5)


def test_self_consistency_is_lm_eval_maj_at_k(tmp_path: Path) -> None:
    """Sampled prompts: acc over questions, and lm-eval's maj@k filter rows."""
    cots = {q: [GeneratedCot(id=f"{q}{i}", cot_trigger="kojima-01", cot="...", model="m",
                             answers=[Answer(id=f"a{q}{i}", answer=f" {v}.")]) for i, v in enumerate(vs)]
            for q, vs in (("q1", [3, 3, 4]), ("q2", [4, 4, 3]))}
    f = tmp_path / "sc.json"
    samples = [Sample(id=q, question="?", type="number", answer=["3"], generated_cot=c) for q, c in cots.items()]
    Collection(data={"toy": {"test": samples}}).dump(f)
    doc = _evaluate(f, tmp_path / "ev", "--k", "1,3")
    res = doc["results"]["toy/test/m/None_kojima-01_None"]
    assert res["acc,none"] == pytest.approx(0.5)  # q1 2/3, q2 1/3
    assert res["acc,maj@3"] == 0.5 and res["acc,maj@1"] == 0.5  # q1 right, q2 wrong
    assert doc["n-samples"]["toy/test/m/None_kojima-01_None"]["original"] == 2  # questions, not 6 samples
    table = make_table(doc)
    assert "maj@3" in table and "maj@1" in table and "none" in table
