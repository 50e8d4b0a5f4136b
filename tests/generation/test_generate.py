from __future__ import annotations

import json
import logging
from collections import Counter
from pathlib import Path

import pytest
from typer.testing import CliRunner

from thoughtsource.backends import get_backend
from thoughtsource.cli import app
from thoughtsource.collection import Collection
from thoughtsource.errors import ConfigError
from thoughtsource.generation import GenerateConfig, generate
from thoughtsource.prompts.build import draw_exemplars
from thoughtsource.store import CompletionStore
from thoughtsource.testing.fault_server import run_fault_server

FIGURE_3 = {
    "instruction_keys": ["qa-01"],
    "cot_trigger_keys": ["kojima-01"],
    "answer_extraction_keys": ["kojima-A-D"],
    "author": "your_name",
    "api_service": "openai",
    "engine": "text-davinci-002",
    "temperature": 0,
    "max_tokens": 512,
    "api_time_interval": 1.0,
    "verbose": False,
    "warn": True,
}
FAST_RETRIES = {"backoff_base_s": 0.01, "backoff_max_s": 0.05, "max_attempts": 12}


@pytest.fixture
def worldtree(examples_dir: Path) -> Collection:
    return Collection.from_json(examples_dir / "tests_unit_data" / "worldtree_100_dataset.json")


def test_figure_3_config_is_accepted(caplog: pytest.LogCaptureFixture):
    with caplog.at_level(logging.INFO, logger="thoughtsource.generation"):
        cfg = GenerateConfig.parse(FIGURE_3)
    assert (cfg.backend, cfg.model, cfg.max_tokens, cfg.author) == ("openai", "text-davinci-002", 512, "your_name")
    assert cfg.instruction_keys == ["qa-01"] and cfg.answer_extraction_keys == ["kojima-A-D"]
    notes = [r.getMessage() for r in caplog.records]
    assert sum("accepted and ignored" in m for m in notes) == 3
    assert GenerateConfig.parse({**FIGURE_3, "api_service": "openai_chat"}).chat is True
    assert GenerateConfig.parse(FIGURE_3, model="served").model == "served"


def test_config_errors_list_every_problem():
    with pytest.raises(ConfigError) as e:
        GenerateConfig.parse({"cot_triger_keys": ["kojima-01"], "temperature": -1})
    text = str(e.value)
    assert "cot_triger_keys: Extra inputs are not permitted" in text and "temperature" in text
    with pytest.raises(ConfigError, match="n > 1 needs temperature > 0"):
        GenerateConfig.parse(n=3)
    with pytest.raises(ConfigError, match="api_service 'palm' has no backend"):
        GenerateConfig.parse({**FIGURE_3, "api_service": "palm"})


def test_unknown_fragment_ids_fail_before_any_call(worldtree: Collection, tmp_path: Path):
    with pytest.raises(ConfigError, match="Unknown CoT trigger 'kojima-1'"):
        generate(worldtree, cot_trigger_keys=["kojima-1"], backend="openai", model="m", store=tmp_path / "s.sqlite")


def test_resilient_generation_through_faults(worldtree: Collection, tmp_path: Path):
    """429 (with Retry-After), 500 and dropped connections: every sample still gets its CoT and answer."""
    c = worldtree.select(split="train", number_samples=12, seed=1)
    with run_fault_server(latency_s=0.02, first_429=1, rate_500=0.2, rate_drop=0.15, retry_after_s=0.05, seed=3) as server:
        report = generate(c, FIGURE_3, base_urls=[server.base_url], model="fault-echo", backend_options=FAST_RETRIES,
                          store=tmp_path / "s.sqlite", progress=False)
        outcomes = Counter(r.outcome for r in server.requests)
        answered = server.answered_keys()
    assert report.errors == 0 and report.called == 24 and report.cached == 0
    assert outcomes["429"] == 24 and outcomes["500"] > 0 and outcomes["drop"] > 0
    assert report.retries == outcomes["429"] + outcomes["500"] + outcomes["drop"]
    assert len(answered) == 24 and set(answered.values()) == {1}  # no completion was requested twice
    for _, _, x in c.samples():
        assert len(x.generated_cot) == 1
        cot = x.generated_cot[0]
        assert cot.cot.startswith("First, restate the question") and cot.prompt_text.endswith("Answer: Let's think step by step.")
        assert (cot.instruction, cot.cot_trigger, cot.author, cot.api_service) == ("qa-01", "kojima-01", "your_name", "openai")
        assert cot.model == {"name": "fault-echo", "temperature": 0.0, "max_tokens": 512}
        assert len(cot.answers) == 1 and cot.answers[0].answer_extraction == "kojima-A-D"
        assert cot.answers[0].answer in {"A.", "B.", "C.", "D."}
        assert cot.answers[0].answer_extraction_text.endswith("Therefore, among A through D, the answer is")


def test_rerun_makes_zero_calls_and_attaches_nothing_twice(worldtree: Collection, tmp_path: Path):
    c = worldtree.select(split="train", number_samples=5, seed=2)
    db = tmp_path / "s.sqlite"
    cfg = {"cot_trigger_keys": ["kojima-01", "none"], "answer_extraction_keys": ["auto", "kojima-01"], "n": 3,
           "temperature": 0.8, "seed": 5}
    with run_fault_server() as server:
        first = generate(c, cfg, backend="openai", model="fault-echo", base_urls=[server.base_url], store=db, progress=False)
        sent = len(server.requests)
        snapshot = c.data["worldtree"]["train"][0].model_dump()
        # the same collection again, and a fresh copy of the data: no calls, same CoTs, nothing duplicated
        again = generate(c, cfg, backend="openai", model="fault-echo", base_urls=[server.base_url], store=db, progress=False)
        fresh = worldtree.select(split="train", number_samples=5, seed=2)
        third = generate(fresh, cfg, backend="openai", model="fault-echo", base_urls=[server.base_url], store=db, progress=False)
        assert len(server.requests) == sent
    assert first.cot_requests == 5 * 2 * 3 and first.answer_requests == 30 * 2 and first.called == 90
    assert again.called == 0 and again.cached == 90 and again.attached_cots == 0 and again.attached_answers == 0
    assert third.called == 0 and third.attached_cots == 30
    assert c.data["worldtree"]["train"][0].model_dump() == snapshot
    assert fresh == c
    x = c.data["worldtree"]["train"][0]
    assert len(x.generated_cot) == 6 and len({g.id for g in x.generated_cot}) == 6
    # self-consistency: 3 separately sampled CoTs per prompt
    k01 = [g for g in x.generated_cot if g.cot_trigger == "kojima-01"]
    assert [g.model["sample_index"] for g in k01] == [0, 1, 2]
    assert len({g.cot for g in k01}) == 3
    assert all([a.answer_extraction for a in g.answers] == ["kojima-A-D", "kojima-01"] for g in x.generated_cot)
    with CompletionStore(db) as st:
        assert len(st) == 90


def test_dry_run_counts_calls_and_tokens(worldtree: Collection, tmp_path: Path):
    c = worldtree.select(split="train", number_samples=4, seed=0)
    db = tmp_path / "s.sqlite"
    kw = dict(backend="openai", model="fault-echo", store=db, progress=False, cot_trigger_keys=["kojima-01", "plain"], max_tokens=100)
    with run_fault_server() as server:
        plan = generate(c, dry_run=True, base_urls=[server.base_url], **kw)
        assert server.requests == []
        assert (plan.called, plan.cot_requests, plan.answer_requests, plan.cached) == (16, 8, 8, 0)
        assert plan.est_completion_tokens == 8 * 100 + 8 * 32
        assert plan.est_prompt_tokens > 8 * 30
        assert c.data["worldtree"]["train"][0].generated_cot == []
        generate(c, base_urls=[server.base_url], **{**kw, "cot_trigger_keys": ["kojima-01"]})
        after = generate(c, dry_run=True, base_urls=[server.base_url], **kw)
    assert (after.called, after.cached) == (8, 8)


def test_cli_generate_against_a_server(examples_dir: Path, tmp_path: Path):
    runner = CliRunner()
    src = examples_dir / "tests_unit_data" / "worldtree_100_dataset.json"
    out, db = tmp_path / "out.json", tmp_path / "s.sqlite"
    with run_fault_server(latency_s=0.01) as server:
        args = ["generate", "--file", str(src), "--split", "train", "--n-samples", "6", "--triggers", "kojima-01,none",
                "--backend", "openai", "--base-url", server.base_url, "--base-url", server.base_url, "--model", "fault-echo",
                "--out", str(out), "--db", str(db), "--concurrency", "4"]
        dry = runner.invoke(app, [*args, "--dry-run"])
        assert dry.exit_code == 0, dry.output
        assert "24 backend calls to make (12 CoT + 12 answer requests, 0 already in the store)" in " ".join(dry.output.split())
        assert not out.exists()
        r = runner.invoke(app, args)
        assert r.exit_code == 0, r.output
        assert len(server.requests) == 24
    data = json.loads(out.read_text())
    samples = data["worldtree"]["train"]
    assert len(samples) == 6
    assert all(sorted(g["cot_trigger"] for g in x["generated_cot"]) == ["kojima-01", "none"] for x in samples)
    assert Collection.from_json(out, validate=True) is not None


def test_backend_instance_can_be_passed(worldtree: Collection, tmp_path: Path):
    c = worldtree.select(split="train", number_samples=2)
    with run_fault_server() as server:
        backend = get_backend("openai", model="fault-echo", base_url=server.base_url)
        report = generate(c, {"cot_trigger_keys": ["kojima-01"], "chat": True}, backend=backend, store=tmp_path / "s.sqlite",
                          progress=False)
        paths = {r.path for r in server.requests}
    assert report.called == 4 and paths == {"/v1/chat/completions"}
    cot = c.data["worldtree"]["train"][0].generated_cot[0]
    assert cot.model["name"] == "fault-echo" and cot.api_service == "openai"


@pytest.mark.slow
def test_failed_requests_are_counted_and_the_cli_exits_1(examples_dir: Path, tmp_path: Path, worldtree: Collection):
    c = worldtree.select(split="train", number_samples=3)
    with run_fault_server(rate_500=1.0) as server:
        report = generate(c, base_urls=[server.base_url], backend="openai", model="fault-echo", store=tmp_path / "s.sqlite",
                          backend_options={**FAST_RETRIES, "max_attempts": 2}, progress=False)
        assert report.errors == 3 and report.called == 0 and len(server.requests) == 6
        assert "HTTP 500" in report.error_messages[0] and "worldtree/train/" in report.error_messages[0]
        assert all(x.generated_cot == [] for _, _, x in c.samples())
        out = tmp_path / "out.json"
        r = CliRunner().invoke(app, ["generate", "--file", str(examples_dir / "tests_unit_data" / "worldtree_1_merge.json"),
                                     "--backend", "openai", "--base-url", server.base_url, "--model", "fault-echo",
                                     "--out", str(out), "--db", str(tmp_path / "s2.sqlite")])
    assert r.exit_code == 1 and out.exists()  # what succeeded is written; the error says how to fill the gaps


async def test_generate_works_inside_a_running_event_loop(worldtree: Collection, tmp_path: Path):
    """As in a Jupyter notebook, where the paper's Figure-3 program usually runs."""
    c = worldtree.select(split="train", number_samples=2)
    with run_fault_server() as server:
        c.generate(FIGURE_3, base_urls=[server.base_url], model="fault-echo", store=tmp_path / "s.sqlite", progress=False)
    assert all(len(x.generated_cot) == 1 for _, _, x in c.samples())


def test_few_shot_prompts_carry_gold_exemplars(examples_dir: Path, tmp_path: Path):
    full = Collection.from_json(examples_dir / "annotated" / "annotated_set.json")
    c = full.select(split="train", number_samples=3)  # strategy_qa's train split only
    assert c.names == ["strategy_qa"]
    with run_fault_server() as server:
        kw = dict(backend="openai", model="fault-echo", base_urls=[server.base_url], store=tmp_path / "s.sqlite", progress=False)
        generate(c, {"few_shot": 2, "few_shot_seed": 1}, exemplar_pool=full, **kw)
        with pytest.raises(ConfigError, match="needs the split 'dev' of dataset 'strategy_qa'"):
            generate(c, {"few_shot": 2, "few_shot_split": "dev"}, **kw)
    pool = full["strategy_qa"]["train"]
    for _, _, x in c.samples():
        ours = [g for g in x.generated_cot if isinstance(g.model, dict)]  # the file's own CoTs store model as a string
        assert len(ours) == 1 and len(x.generated_cot) > 1
        cot = ours[0]
        assert cot.model["few_shot"] == 2 and cot.cot_trigger_template.startswith("{instruction}\n\n{exemplars}")
        shots = [e for e in pool if e.id != x.id and " ".join(e.cot) in cot.prompt_text]
        assert {e.id for e in shots} == {e.id for e in draw_exemplars(pool, 2, seed=1, exclude_id=x.id)}
        assert cot.prompt_text.count("Therefore, the answer (Yes or No) is") == 2
        assert cot.prompt_text.endswith(f"{x.question}\n\nAnswer: Let's think step by step.")


def test_cli_generate_from_a_registered_dataset(shared_data: Path, tmp_path: Path):
    """The issue's command: --dataset gsm8k --split test --n-samples 20 --triggers kojima-01,none (raw files from shared data)."""
    out = tmp_path / "gsm8k_20.json"
    with run_fault_server() as server:
        r = CliRunner().invoke(app, ["generate", "--dataset", "gsm8k", "--data-dir", str(shared_data), "--split", "test",
                                     "--n-samples", "20", "--triggers", "kojima-01,none", "--backend", "openai",
                                     "--base-url", server.base_url, "--model", "fault-echo", "--out", str(out),
                                     "--db", str(tmp_path / "s.sqlite")])
        assert r.exit_code == 0, r.output
        assert len(server.requests) == 80
    samples = json.loads(out.read_text())["gsm8k"]["test"]
    assert len(samples) == 20 and all(x["type"] == "number" for x in samples)
    for x in samples:
        # the published zero-shot-CoT of Kojima et al. comes attached first; then ours, one per trigger
        published = [g for g in x["generated_cot"] if g["author"] == "kojima"]
        ours = [g for g in x["generated_cot"] if g["author"] != "kojima"]
        assert len(published) == 1
        assert [g["cot_trigger"] for g in ours] == ["kojima-01", "none"]
        assert all(g["answers"][0]["answer_extraction"] == "kojima-numerals" for g in ours)
        assert ours[0]["prompt_text"].endswith(f"{x['question'].strip()}\n\nAnswer: Let's think step by step.")


def test_dry_run_loads_no_model(examples_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """--dry-run counted calls by loading the model for its weights fingerprint (65 s for a hub model); now it loads
    none: a model only the hub has (not downloadable here) is not even looked for, and the report says the store was
    not consulted.  The embedded model, converted on disk, keeps its store lookups (a folder's files are hashed)."""
    from thoughtsource.backends.transformers_local import TransformersBackend

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    loads: list[str] = []
    monkeypatch.setattr(TransformersBackend, "load", lambda self: loads.append(self.options.model))
    src = examples_dir / "tests_unit_data" / "worldtree_100_dataset.json"
    base = ["generate", "--file", str(src), "--split", "train", "--n-samples", "3", "--triggers", "kojima-01",
            "--backend", "transformers", "--db", str(tmp_path / "s.sqlite"), "--dry-run"]
    r = CliRunner().invoke(app, [*base, "--model", "HuggingFaceTB/no-such-model-here"])
    assert r.exit_code == 0, r.output
    text = " ".join(r.output.split())
    assert "6 backend calls to make (3 CoT + 3 answer requests, the store not consulted" in text
    assert "(characters / 4)" in text
    pytest.importorskip("transformers")
    from thoughtsource.embedded import embedded_model_dir

    embedded_model_dir()  # converted once (as any use of the embedded model does)
    r = CliRunner().invoke(app, [*base, "--model", "embedded"])
    assert r.exit_code == 0 and "0 already in the store" in " ".join(r.output.split()), r.output
    assert loads == []
