"""Flexible chains (self_generate_extract, self_generate, self_extract) and self-reflection.

The chain logic is checked with the deterministic ``mock`` backend; self-reflection also runs on the real
embedded model (slow), and its revised answers are evaluated.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from thoughtsource import Collection
from thoughtsource.errors import ConfigError
from thoughtsource.generation import generate
from thoughtsource.generation.chains import (
    REFLECT_TEMPLATE,
    Target,
    reflection_changes,
    self_extract,
    self_generate,
    self_generate_extract,
    self_reflect,
)
from thoughtsource.store import CompletionStore

MOCK = {"backend": "mock", "backend_options": {"echo_choice": True}}


@pytest.fixture
def worldtree(examples_dir: Path) -> Collection:
    return Collection.from_json(examples_dir / "tests_unit_data" / "worldtree_100_dataset.json").select(split="train", number_samples=3)


def test_generate_extract_generate_only_and_extract_later(worldtree: Collection, tmp_path: Path) -> None:
    db = tmp_path / "s.sqlite"
    r = self_generate_extract(worldtree, MOCK, store=db)
    assert (r.attached_cots, r.attached_answers, r.called) == (3, 3, 6)
    r = self_generate(worldtree, {**MOCK, "author": "cot-only"}, store=db)
    assert (r.attached_cots, r.attached_answers) == (3, 0)
    for _, _, s in worldtree.samples():
        both, only = s.generated_cot
        assert both.model["chain"] == "self_generate_extract" and len(both.answers) == 1
        assert both.answers[0].answer_extraction == "kojima-A-D" and both.answers[0].answer.strip(" .") in "ABCD"
        assert only.model["chain"] == "self_generate" and only.answers == [] and only.author == "cot-only"
        assert both.prompt_text.startswith(s.question) and both.prompt_text.endswith("Answer: Let's think step by step.")
    r = self_extract(worldtree, MOCK, target=Target(author="cot-only"), store=db)  # only the CoTs without answers
    assert r.attached_answers == 3 and r.skipped == []
    for _, _, s in worldtree.samples():
        extracted = s.generated_cot[1].answers[0]
        assert extracted.extracted_by["chain"] == "self_extract"
        assert extracted.answer_extraction_text.endswith("Therefore, among A through D, the answer is")
        assert s.generated_cot[1].cot in extracted.answer_extraction_text
    again = self_generate_extract(worldtree, MOCK, store=db)
    assert again.called == 0 and again.attached_cots == 0  # from the store, nothing twice


def test_self_reflection_is_stored_with_provenance_and_evaluated(worldtree: Collection, tmp_path: Path) -> None:
    db = tmp_path / "s.sqlite"
    generate(worldtree, {**MOCK, "answer_extraction_keys": ["auto"]}, store=db, progress=False)
    r = self_reflect(worldtree, MOCK, store=db)
    assert r.attached_cots == r.attached_answers == 3
    for _, _, s in worldtree.samples():
        original, reflection = s.generated_cot
        assert reflection.instruction == "refl-01" and reflection.cot_trigger == original.cot_trigger
        assert reflection.model["reflects_on"] == original.id and reflection.model["answer_before"] == original.answers[0].id
        assert reflection.cot_trigger_template == REFLECT_TEMPLATE and "Critique:" in reflection.prompt_text
        assert original.cot in reflection.prompt_text and original.answers[0].answer in reflection.prompt_text
    result = worldtree.evaluate()
    assert set(result["accuracy"]) == {"None_kojima-01_kojima-A-D", "refl-01_kojima-01_kojima-A-D"}
    assert all(a.correct_answer is not None for _, _, s in worldtree.samples() for c in s.generated_cot for a in c.answers)
    changes = reflection_changes(worldtree)
    assert len(changes) == 3 and all(ch.before in "ABCD" and ch.after in "ABCD" for ch in changes)
    # a reflection is not reflected on again, and re-running attaches nothing
    assert self_reflect(worldtree, MOCK, store=db).attached_cots == 0


def test_chain_errors(worldtree: Collection, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"placeholder \{critic\}"):
        self_reflect(worldtree, MOCK, reflect_template="{question} {critic}", store=tmp_path / "s.sqlite")
    r = self_reflect(worldtree, MOCK, store=tmp_path / "s.sqlite")  # nothing to reflect on yet
    assert r.attached_cots == 0 and len(r.skipped) == 3


@pytest.mark.slow
def test_self_reflection_on_the_embedded_model(worldtree: Collection, tmp_path: Path) -> None:
    pytest.importorskip("transformers")
    from thoughtsource.backends import get_backend

    backend = get_backend("transformers", model="embedded", batch_size=8)
    db = tmp_path / "s.sqlite"
    cfg = {"chat": True, "max_tokens": 24, "answer_max_tokens": 8, "answer_extraction_keys": ["auto"]}
    generate(worldtree, cfg, backend=backend, store=db, progress=False)
    report = self_reflect(worldtree, cfg, backend=backend, store=db)
    assert report.attached_cots == 3 and report.called == 6
    for _, _, s in worldtree.samples():
        reflection = s.generated_cot[-1]
        assert reflection.model["chain"] == "self_reflect" and reflection.model["name"] == "SmolLM2-135M-Instruct"
        assert reflection.cot.strip() and s.question not in reflection.cot  # the model's own critique, not an echo
        assert reflection.api_service == "transformers"
    worldtree.evaluate()
    revised = [c.answers[0] for _, _, s in worldtree.samples() for c in s.generated_cot if c.instruction == "refl-01"]
    assert len(revised) == 3 and all(a.correct_answer is not None for a in revised)
    assert len(reflection_changes(worldtree)) <= 3
    with CompletionStore(db) as st:
        assert len(st) == 12  # 3 CoTs + 3 answers + 3 critiques + 3 revised answers


def test_chain_cli(examples_dir: Path, tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from thoughtsource.cli import app

    src = tmp_path / "in.json"
    Collection.from_json(examples_dir / "tests_unit_data" / "worldtree_100_dataset.json").select(split="train", number_samples=2).dump(src)
    runner = CliRunner()
    db = str(tmp_path / "s.sqlite")
    r = runner.invoke(app, ["runs", "chain", "generate-extract", str(src), "--out", str(tmp_path / "a.json"), "--backend", "mock", "--db", db])
    assert r.exit_code == 0, r.output
    r = runner.invoke(app, ["runs", "chain", "reflect", str(tmp_path / "a.json"), "--out", str(tmp_path / "b.json"), "--backend", "mock",
                            "--db", db])
    assert r.exit_code == 0, r.output
    assert "attached 2 CoTs" in r.output
    c = Collection.load(tmp_path / "b.json")
    assert [len(s.generated_cot) for _, _, s in c.samples()] == [2, 2]
    assert {cot.model["chain"] for _, _, s in c.samples() for cot in s.generated_cot} == {"self_generate_extract", "self_reflect"}
