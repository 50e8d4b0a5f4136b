"""``generate --file F --out O`` over every sample of F reads, generates for and writes a chunk of samples at a time
(``generation.generate_entries``): the output is the in-memory path's, memory does not follow the file."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

import thoughtsource.generation as generation
from thoughtsource.cli import app
from thoughtsource.collection import Collection
from thoughtsource.errors import ConfigError
from thoughtsource.generation import GenerateReport, generate, generate_entries
from thoughtsource.io import iter_entries
from thoughtsource.testing.scale import run_capped, run_cli_capped

runner = CliRunner()
WORLDTREE = "tests_unit_data/worldtree_100_dataset.json"
FLAGS = ["--backend", "mock", "--triggers", "kojima-01,none", "--extractions", "auto"]
CONFIG = {"backend": "mock", "cot_trigger_keys": ["kojima-01", "none"], "answer_extraction_keys": ["auto"]}




def test_streamed_generate_writes_what_the_in_memory_path_writes(examples_dir: Path, tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch, without_dates: Any) -> None:
    """Every sample of a real file (its three splits), 7 samples a chunk: the file the in-memory path writes (dates
    aside), with the same report; run again on the same store, no call and the same file."""
    src = examples_dir / WORLDTREE
    monkeypatch.setattr(generation, "CHUNK_SAMPLES", 7)
    out, db = tmp_path / "streamed.json", tmp_path / "s.sqlite"
    r = runner.invoke(app, ["generate", "--file", str(src), *FLAGS, "--db", str(db), "--out", str(out), "--json"])
    assert r.exit_code == 0, r.output
    summary = json.loads(r.stdout)
    c = Collection.load(src)
    report = generate(c, CONFIG, store=tmp_path / "ref.sqlite", progress=False)
    c.dump(tmp_path / "loaded.json")
    assert without_dates(out) == without_dates(tmp_path / "loaded.json")
    assert summary["samples"] == len(c) and summary["cot_requests"] == report.cot_requests > 100
    assert (summary["called"], summary["attached_cots"], summary["attached_answers"]) == (
        report.called, report.attached_cots, report.attached_answers)
    r = runner.invoke(app, ["generate", "--file", str(out), *FLAGS, "--db", str(db), "--out", str(tmp_path / "again.json"),
                            "--json"])
    assert r.exit_code == 0, r.output
    again = json.loads(r.stdout)
    assert again["called"] == 0 and again["attached_cots"] == 0 and again["cached"] == report.cot_requests + report.answer_requests
    assert without_dates(tmp_path / "again.json") == without_dates(out)


def test_generate_entries_refuses_what_needs_the_whole_collection(examples_dir: Path, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no few_shot and no idx_range"):
        list(generate_entries(iter_entries(examples_dir / WORLDTREE), {**CONFIG, "few_shot": 2}, report=GenerateReport(),
                              store=tmp_path / "s.sqlite"))


@pytest.mark.slow
def test_streamed_generate_finishes_under_a_memory_cap_that_loading_exceeds(examples_dir: Path, tmp_path: Path) -> None:
    """100,000 real WorldTree samples (the unit file's 100, new ids; 68 MB) generated for with the mock backend under
    RLIMIT_AS of 700 MB: every CoT and answer is written.  The in-memory path (load, plan every request, attach,
    dump) runs out of memory under the same cap (measured on 10,000 samples: 57 MB peak RSS streamed, 134 MB loaded,
    growing ~8 KB a sample)."""
    obj = json.loads((examples_dir / WORLDTREE).read_text())
    xs = [x for split in obj["worldtree"].values() for x in split]
    big = tmp_path / "big.json"
    n = 100_000
    with big.open("w", encoding="utf-8") as fh:
        fh.write('{"worldtree": {"train": [')
        fh.write(",".join(json.dumps(dict(xs[i % len(xs)], id=f"wt-{i}")) for i in range(n)))
        fh.write("]}}")
    out = tmp_path / "out.json"
    p = run_cli_capped(["-q", "generate", "--file", str(big), "--backend", "mock", "--triggers", "kojima-01", "--db",
                        str(tmp_path / "s.sqlite"), "--out", str(out), "--json"], 700, timeout=1200)
    assert p.returncode == 0, p.stderr[-3000:]
    summary = json.loads(p.stdout)
    assert summary["samples"] == n and summary["attached_cots"] == n and summary["errors"] == 0
    p = run_capped("from thoughtsource.collection import Collection\nfrom thoughtsource.generation import generate\n"
                   f"c = Collection.load({str(big)!r})\n"
                   f"generate(c, backend='mock', cot_trigger_keys=['kojima-01'], store={str(tmp_path / 's.sqlite')!r}, "
                   f"progress=False)\nc.dump({str(tmp_path / 'loaded.json')!r})", 700, timeout=1200)
    # out of memory shows as a MemoryError, or as SIGSEGV/SIGABRT where a C extension's allocation fails under the cap
    assert p.returncode in (-11, -6) or (p.returncode != 0 and "MemoryError" in p.stderr), (p.returncode, p.stderr[-3000:])
