"""The published library's generate config: every key, every ``api_service``, its templates and its mock.

The rendering reference below is written from the published generator's documented behaviour (each
``{placeholder}`` replaced by its value, "" when missing or None; choices as ``A) text`` lines; leading white
space stripped) and compared with ours on the samples and generated CoTs of ``thoughtsource_examples``,
with the fragment texts of the published ``fragments.json``.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from thoughtsource import Collection
from thoughtsource.errors import ConfigError
from thoughtsource.generation import GenerateConfig, generate
from thoughtsource.generation.published import API_SERVICES, PUBLISHED_DEFAULTS, published_to_ours, service_for
from thoughtsource.prompts import load_fragments
from thoughtsource.prompts.build import answer_prompt, cot_prompt
from thoughtsource.prompts.templates import VARIABLES, Templates

PLACEHOLDERS = ("instruction", "question", "answer_choices", "cot_trigger", "cot", "answer_extraction")


def reference_render(template: str, values: dict[str, str | None]) -> str:
    out = template
    for name in PLACEHOLDERS:
        out = out.replace("{" + name + "}", values.get(name) or "")
    return out.lstrip()


def reference_choices(choices: list[str]) -> str:
    return "\n".join(f"{chr(ord('A') + i)}) {c}" for i, c in enumerate(choices))


@pytest.fixture(scope="module")
def published_fragments(examples_dir: Path) -> dict[str, dict[str, str]]:
    return json.loads((examples_dir / "fragments.json").read_text())


@pytest.fixture
def worldtree(examples_dir: Path) -> Collection:
    return Collection.from_json(examples_dir / "tests_unit_data" / "worldtree_100_dataset.json")


def test_bundled_fragments_have_the_published_texts(published_fragments: dict) -> None:
    ours = load_fragments()
    for kind in ("instructions", "cot_triggers", "answer_extractions"):
        for key, text in published_fragments[kind].items():
            assert ours.of_kind(kind)[key] == text, (kind, key)


def test_templates_render_the_published_prompt_text(examples_dir: Path, published_fragments: dict) -> None:
    """Stage 1 and stage 2 of every generated CoT of the published model runs (4,014 CoTs), re-rendered here."""
    fragments = load_fragments()
    checked = 0
    for path in sorted((examples_dir / "model_runs").glob("*.json")):
        c = Collection.from_json(path)
        for _, _, sample in c.samples():
            for gen in sample.generated_cot:
                templates = Templates(gen.cot_trigger_template or PUBLISHED_DEFAULTS["template_cot_generation"],
                                      PUBLISHED_DEFAULTS["template_answer_extraction"])
                values = {
                    "instruction": published_fragments["instructions"].get(gen.instruction) if gen.instruction else None,
                    "question": sample.question,
                    "answer_choices": reference_choices(sample.choices),
                    "cot_trigger": published_fragments["cot_triggers"].get(gen.cot_trigger) if gen.cot_trigger else None,
                }
                p1 = cot_prompt(sample, fragments, gen.instruction, gen.cot_trigger, templates=templates)
                assert p1.text == reference_render(templates.cot, values), (path.name, sample.id)
                for ans in gen.answers:
                    if not ans.answer_extraction:
                        continue
                    p2 = answer_prompt(p1, gen.cot, fragments, ans.answer_extraction)
                    expected = reference_render(templates.answer, {
                        **values, "cot": gen.cot, "answer_extraction": published_fragments["answer_extractions"][ans.answer_extraction]})
                    assert p2.text == expected, (path.name, sample.id, ans.answer_extraction)
                checked += 1
    assert checked == 600 + 1002 + 1206 + 1206


def test_template_literal_example(worldtree: Collection) -> None:
    sample = worldtree["worldtree"]["train"][0]
    p = cot_prompt(sample, load_fragments(), None, "kojima-01", templates=Templates())
    choices = "\n".join(f"{'ABCD'[i]}) {c}" for i, c in enumerate(sample.choices))
    assert p.text == f"{sample.question}\n{choices}\n\nAnswer: Let's think step by step."  # no instruction: its blank lines go
    p2 = answer_prompt(p, " It is B.", load_fragments(), "kojima-A-D")
    assert p2.text == p.text + " It is B.\nTherefore, among A through D, the answer is"
    assert p2.messages()[0]["content"] == p.text  # chat: the stage-1 text is the user's message


def test_published_default_config_passes_a_dry_run(worldtree: Collection, tmp_path: Path) -> None:
    cfg = GenerateConfig.parse(PUBLISHED_DEFAULTS)
    assert (cfg.api_service, cfg.model, cfg.max_tokens, cfg.backend) == ("huggingface_hub", "google/flan-t5-xl", 128, "openai")
    assert cfg.base_urls == ["https://router.huggingface.co/v1"] and cfg.backend_options["api_key_env"] == "HUGGINGFACEHUB_API_TOKEN"
    assert cfg.instruction_keys == [None] and cfg.templates() is not None and cfg.idx_range is None
    c = worldtree.select(split="train", number_samples=5)
    report = generate(c, PUBLISHED_DEFAULTS, store=tmp_path / "s.sqlite", dry_run=True, progress=False)
    assert report.dry_run and report.cot_requests == 5 and report.answer_requests == 5 and report.called == 10
    assert all(not s.generated_cot for _, _, s in c.samples())


ENGINES = {"huggingface_endpoint": "https://my-flan.endpoints.huggingface.cloud", "transformers": "embedded", "local": "embedded"}


@pytest.mark.parametrize("service", sorted(API_SERVICES))
def test_each_api_service_passes_a_dry_run(service: str, worldtree: Collection, tmp_path: Path) -> None:
    config = {**PUBLISHED_DEFAULTS, "api_service": service, "engine": ENGINES.get(service, PUBLISHED_DEFAULTS["engine"])}
    c = worldtree.select(split="train", number_samples=3)
    report = generate(c, config, store=tmp_path / "s.sqlite", dry_run=True, progress=False)
    assert report.cot_requests == 3 and report.called == 6
    cfg = GenerateConfig.parse(config)
    assert cfg.api_service == service
    expected = {"huggingface_endpoint": ("openai", ["https://my-flan.endpoints.huggingface.cloud/v1"], "tgi"),
                "cohere": ("openai", ["https://api.cohere.ai/compatibility/v1"], "google/flan-t5-xl"),
                "mock_api": ("mock", [], "google/flan-t5-xl")}
    if service in expected:
        assert (cfg.backend, cfg.base_urls, cfg.model) == expected[service]
    if service == "cohere":
        assert cfg.backend_options["api_key_env"] == "COHERE_API_KEY" and cfg.chat


def test_huggingface_hub_runs_a_model_on_disk_locally(tmp_path: Path) -> None:
    model_dir = tmp_path / "smol"
    model_dir.mkdir()
    (model_dir / "config.json").write_text(json.dumps({"model_type": "llama", "architectures": ["LlamaForCausalLM"]}))
    assert service_for("huggingface_hub", str(model_dir)).backend == "transformers"
    assert service_for("huggingface_hub", "google/flan-t5-xl").backend == "openai"  # not in the local HF cache
    t5 = tmp_path / "flan"
    t5.mkdir()
    (t5 / "config.json").write_text(json.dumps({"model_type": "t5", "is_encoder_decoder": True}))
    assert service_for("huggingface_hub", str(t5)).backend == "openai"  # the local backend generates decoder-only
    cfg = GenerateConfig.parse({**PUBLISHED_DEFAULTS, "engine": str(model_dir)})
    assert (cfg.backend, cfg.model, cfg.base_urls) == ("transformers", str(model_dir), [])


def test_mock_api_runs_end_to_end_with_templates(worldtree: Collection, tmp_path: Path) -> None:
    c = worldtree.select(split="train", number_samples=4)
    config = {**PUBLISHED_DEFAULTS, "api_service": "mock_api", "instruction_keys": ["qa-01"], "answer_extraction_keys": ["kojima-A-D"],
              "author": "me"}
    report = generate(c, config, store=tmp_path / "s.sqlite", progress=False)
    assert report.attached_cots == 4 and report.attached_answers == 4 and report.errors == 0
    instruction = load_fragments().instruction("qa-01")
    for _, _, s in c.samples():
        cot = s.generated_cot[0]
        assert (cot.api_service, cot.author, cot.instruction, cot.cot_trigger) == ("mock_api", "me", "qa-01", "kojima-01")
        assert cot.cot == "Test mock chain of thought." and cot.cot_trigger_template == PUBLISHED_DEFAULTS["template_cot_generation"]
        values = {"instruction": instruction, "question": s.question, "answer_choices": reference_choices(s.choices),
                  "cot_trigger": "Answer: Let's think step by step."}
        assert cot.prompt_text == reference_render(PUBLISHED_DEFAULTS["template_cot_generation"], values)
        ans = cot.answers[0]
        assert ans.answer_extraction_text == reference_render(PUBLISHED_DEFAULTS["template_answer_extraction"], {
            **values, "cot": " Test mock chain of thought.", "answer_extraction": "Therefore, among A through D, the answer is"})
    result = c.evaluate()
    assert result  # evaluated like any run (the mock's text is no answer: all wrong)
    again = generate(c, config, store=tmp_path / "s.sqlite", progress=False)
    assert again.called == 0 and again.attached_cots == 0


def test_published_keys_and_bad_templates(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO):
        cfg = GenerateConfig.parse({**PUBLISHED_DEFAULTS, "idx_range": (2, 5), "cot_trigger_keys": [None, "kojima-01"],
                                    "instruction_keys": "all", "answer_extraction_keys": [None, "kojima-01"],
                                    "multiple_choice_answer_format": "Numbers"})
    assert cfg.idx_range == (2, 5) and cfg.cot_trigger_keys == ["none", "kojima-01"] and cfg.answer_extraction_keys == ["kojima-01"]
    assert cfg.instruction_keys[0] is None and "qa-01" in cfg.instruction_keys and len(cfg.instruction_keys) > 10
    assert cfg.templates().choice_format == "Numbers"
    assert sum("accepted and ignored" in r.getMessage() for r in caplog.records) == 4  # api_time_interval, debug, verbose, warn
    with pytest.raises(ConfigError, match=r"template_cot_generation: placeholder \{answer\} is not allowed"):
        GenerateConfig.parse({**PUBLISHED_DEFAULTS, "template_cot_generation": "{question} {answer}"})
    with pytest.raises(ConfigError, match="few_shot cannot be combined"):
        GenerateConfig.parse({**PUBLISHED_DEFAULTS, "few_shot": 2})
    with pytest.raises(ConfigError, match="api_service 'palm' has no backend"):
        GenerateConfig.parse({**PUBLISHED_DEFAULTS, "api_service": "palm"})
    with pytest.raises(ConfigError, match="endpoint's URL"):
        GenerateConfig.parse({**PUBLISHED_DEFAULTS, "api_service": "huggingface_endpoint"})
    assert set(VARIABLES) >= set(PLACEHOLDERS)
    assert published_to_ours({"idx_range": "all"}) == {"instruction_keys": [None]}


def test_idx_range_generates_for_those_samples_only(worldtree: Collection, tmp_path: Path) -> None:
    c = worldtree.select(split="train", number_samples=6)
    generate(c, {**PUBLISHED_DEFAULTS, "api_service": "mock_api", "idx_range": (1, 3)}, store=tmp_path / "s.sqlite", progress=False)
    assert [bool(s.generated_cot) for s in c["worldtree"]["train"]] == [False, True, True, False, False, False]
