"""CLI options made from the pydantic configs (``cli/config_options.py``): ``star run`` and ``generate`` keep every
option name they had, their help is the field's description, and ``--set KEY=VALUE`` reaches any field, validated with
its type, with the order YAML < --set < named options; an unknown key is one usage error naming the valid ones."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from thoughtsource.cli import app
from thoughtsource.cli.config_options import apply_sets, key_type, parse_value
from thoughtsource.generation.config import GenerateConfig
from thoughtsource.star.config import StarConfig

runner = CliRunner()
WIDE = {"COLUMNS": "250", "NO_COLOR": "1", "TERM": "dumb"}

#: the options of the two commands before their options were made from the configs (hidden ones: still accepted)
STAR_RUN = [
    "--out", "--task", "--model", "--iterations", "-n", "--config", "--no-rationalization", "--baseline", "--samples",
    "--pseudo-labels", "--pseudo-k", "--digits", "--n-train", "--n-test", "--fewshot-k", "--steps-first",
    "--warmup-steps", "--batch-size", "--lr", "--lora", "--no-lora", "--gen-batch-size", "--max-new-tokens",
    "--engine", "--server-command", "--filter", "--train-with-fewshot", "--no-train-with-fewshot", "--per-iteration",
    "--pool-size", "--n-dev", "--threads", "--report-to", "--checkpoint-every", "--prompts", "--seed", "--seeds",
    "--resume", "--json",
]
GENERATE = [
    "--dataset", "-d", "--file", "-f", "--data-dir", "--split", "--limit", "--select-seed", "--out", "-o", "--config",
    "--instructions", "--triggers", "--extractions", "--backend", "--base-url", "--model", "--chat", "--no-chat",
    "--n", "--temperature", "--max-tokens", "--answer-max-tokens", "--few-shot", "--few-shot-split", "--concurrency",
    "--batch-size", "--fragments", "--author", "--seed", "--db", "--dry-run", "--json", "--allow-empty",
    "--no-allow-empty", "--reasoning-effort", "--reasoning-max-tokens", "--think-tags",
]


class Resolved(Exception):
    """Raised in place of running: carries the resolved config."""


@pytest.fixture
def star_config(monkeypatch: pytest.MonkeyPatch) -> Any:
    """``star run ARGS`` → the StarConfig the loop would get (the loop is not run), or the CliRunner result on an error."""
    from thoughtsource.star import loop

    def fake(cfg: StarConfig, out: Any, **_: Any) -> Any:
        raise Resolved(cfg)

    monkeypatch.setattr(loop, "run_star", fake)

    def run(tmp: Path, *args: str) -> Any:
        r = runner.invoke(app, ["star", "run", "--out", str(tmp / "o"), *args], env=WIDE)
        return r.exception.args[0] if isinstance(r.exception, Resolved) else r

    return run


@pytest.fixture
def generate_config(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Any:
    """``generate --file F --dry-run ARGS`` → the GenerateConfig the command resolves (nothing is generated)."""
    parse = GenerateConfig.parse.__func__  # type: ignore[attr-defined]

    def resolved(cls: type[GenerateConfig], *args: Any, **kwargs: Any) -> Any:
        raise Resolved(parse(cls, *args, **kwargs))

    monkeypatch.setattr(GenerateConfig, "parse", classmethod(resolved))
    src = tmp_path / "in.json"
    src.write_text("{}")

    def run(*args: str) -> Any:
        r = runner.invoke(app, ["generate", "--file", str(src), "--dry-run", *args], env=WIDE)
        return r.exception.args[0] if isinstance(r.exception, Resolved) else r

    return run


@pytest.mark.parametrize(("command", "names"), [(["star", "run"], STAR_RUN), (["generate"], GENERATE)])
def test_help_lists_every_option_it_had_and_set(command: list[str], names: list[str]) -> None:
    r = runner.invoke(app, [*command, "--help"], env=WIDE)
    assert r.exit_code == 0
    listed = set(re.findall(r"(?<![\w-])(-{1,2}[a-z][a-z-]*)", r.output))
    assert set(names) | {"--set"} <= listed


def test_help_is_the_fields_description() -> None:
    r = runner.invoke(app, ["star", "run", "--help"], env=WIDE)
    flat = " ".join(r.output.split())
    for path in ("lr", "sampling.k", "generation.max_new_tokens", "checkpoint_every"):
        section, _, name = path.rpartition(".")
        model: Any = StarConfig
        for part in filter(None, section.split(".")):
            model = model.model_fields[part].annotation
        assert " ".join(model.model_fields[name].description.split()) in flat
    r = runner.invoke(app, ["generate", "--help"], env=WIDE)
    assert " ".join(GenerateConfig.model_fields["max_tokens"].description.split()) in " ".join(r.output.split())


def test_set_reaches_nested_fields_and_task_options(tmp_path: Path, star_config: Any) -> None:
    cfg = star_config(tmp_path, "--set", "lr=0.001", "--set", "generation.temperature=0.5", "--set", "lora.enabled=true",
                      "--set", "task_options.n_dev_per_digit=40", "--set", "report_to=[tensorboard]",
                      "--set", "generation.max_new_tokens=null", "--set", "model=01")
    assert isinstance(cfg, StarConfig), cfg.output
    assert cfg.lr == 0.001 and cfg.generation.temperature == 0.5 and cfg.lora.enabled is True
    assert cfg.task_options == {"n_dev_per_digit": 40} and cfg.report_to == ["tensorboard"]
    assert cfg.generation.max_new_tokens is None and cfg.model == "01"  # a YAML number where a string is wanted: the text


def test_precedence_yaml_then_set_then_named_options(tmp_path: Path, star_config: Any) -> None:
    yaml = tmp_path / "c.yaml"
    yaml.write_text("lr: 0.1\niterations: 5\ngeneration: {batch_size: 3}\n")
    cfg = star_config(tmp_path, "--config", str(yaml))
    assert (cfg.lr, cfg.iterations, cfg.generation.batch_size) == (0.1, 5, 3)
    cfg = star_config(tmp_path, "--config", str(yaml), "--set", "lr=0.2", "--set", "generation.batch_size=4", "--set", "lr=0.25")
    assert (cfg.lr, cfg.iterations, cfg.generation.batch_size) == (0.25, 5, 4)  # later --set wins
    cfg = star_config(tmp_path, "--config", str(yaml), "--set", "lr=0.2", "--lr", "0.3", "--set", "generation.batch_size=4",
                      "--gen-batch-size", "6")
    assert (cfg.lr, cfg.iterations, cfg.generation.batch_size) == (0.3, 5, 6)


@pytest.mark.parametrize(("item", "message"), [
    ("generation.batchsize=3", "unknown key 'generation.batchsize': generation has no field 'batchsize'; valid: engine, batch_size, max_new_tokens"),
    ("itterations=3", "unknown key 'itterations': the config has no field 'itterations'; valid: model, task, task_options"),
    ("lr.x=3", "unknown key 'lr.x': lr is a value, not a section with fields"),
    ("lr=fast", "lr=fast: Input should be a valid number"),
    ("lr", "expected KEY=VALUE"),
])
def test_a_bad_set_is_one_usage_error(tmp_path: Path, star_config: Any, item: str, message: str) -> None:
    r = star_config(tmp_path, "--set", item)
    assert not isinstance(r, StarConfig) and r.exit_code == 2
    assert message in " ".join(r.output.replace("│", " ").split()), r.output
    assert not (tmp_path / "o").exists()


def test_star_run_task_options_reach_the_tasks_own_options(tmp_path: Path, star_config: Any) -> None:
    """--n-test / --n-dev are arithmetic's per-digit counts and a dataset task's totals; an option a task does not take is
    a usage error naming the task (what Task.cli_options declared, now read from the task's keyword options)."""
    cfg = star_config(tmp_path, "--n-test", "5", "--n-dev", "6", "--digits", "2-3")
    assert cfg.task_options == {"n_test_per_digit": 5, "n_dev_per_digit": 6, "min_digits": 2, "max_digits": 3}
    cfg = star_config(tmp_path, "--task", "gsm8k", "--n-test", "5", "--n-dev", "6", "--prompts", "star")
    assert cfg.task_options == {"n_test": 5, "n_dev": 6, "prompts": "star"}
    for args, task in ((["--prompts", "star"], "arithmetic"), (["--task", "gsm8k", "--pool-size", "9"], "gsm8k")):
        r = star_config(tmp_path, *args)
        assert r.exit_code == 2 and f"not {task}: it takes no" in " ".join(r.output.replace("│", " ").split())


def test_generate_set_and_flags(generate_config: Any, tmp_path: Path) -> None:
    yaml = tmp_path / "g.yaml"
    yaml.write_text("engine: old-model\ntemperature: 0.5\nn: 2\n")
    cfg = generate_config("--config", str(yaml), "--set", "model=new", "--set", "backend_options.foo=1",
                          "--set", "cot_trigger_keys=[a, b]", "--set", "temperature=0.7", "--triggers", "c,d", "--triggers", "e")
    assert isinstance(cfg, GenerateConfig), cfg.output
    assert cfg.model == "new" and cfg.backend_options == {"foo": 1} and cfg.temperature == 0.7 and cfg.n == 2
    assert cfg.cot_trigger_keys == ["c", "d", "e"]  # the named option over --set
    r = generate_config("--set", "engine=x")
    assert r.exit_code == 2 and "unknown key 'engine'" in r.output


def test_key_type_and_parse_value() -> None:
    assert key_type(StarConfig, "generation.server.port") == int | None
    assert key_type(StarConfig, "task_options.anything") is Any
    assert parse_value(key_type(StarConfig, "generation.server.env"), "generation.server.env", "{A: x}") == {"A": "x"}
    assert parse_value(Any, "k", "[1, x]") == [1, "x"] and parse_value(str, "k", "yes") == "yes"
    assert parse_value(bool, "k", "yes") is True and parse_value(Path, "k", "/a/b") == "/a/b"
    data: dict[str, Any] = {"generation": {"batch_size": 2}}
    assert apply_sets(StarConfig, data, ["generation.server.port=80", "steps.first=5"]) == ["generation.server.port", "steps.first"]
    assert data == {"generation": {"batch_size": 2, "server": {"port": 80}}, "steps": {"first": 5}}


def test_hidden_old_names_still_work(tmp_path: Path, star_config: Any, generate_config: Any) -> None:
    """``generate --n-samples`` stays accepted, hidden from --help; ``star run --backend`` (the old name of --engine) is
    gone."""
    assert "--backend" not in runner.invoke(app, ["star", "run", "--help"], env=WIDE).output
    r = star_config(tmp_path, "--backend", "transformers")
    assert r.exit_code == 2 and "No such option: --backend" in r.output
    cfg = generate_config("--n-samples", "1", "--model", "m")
    assert isinstance(cfg, GenerateConfig) and cfg.model == "m"
