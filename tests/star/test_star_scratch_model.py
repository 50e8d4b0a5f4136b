"""``thoughtsource star base``: a from-scratch LLaMA-shaped model with a character tokenizer, saved as an ordinary
Hugging Face folder that ``star run``, ``generate`` and ``serve-model`` take as ``--model FOLDER``."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from cli_in_process import run_cli

pytest.importorskip("transformers")
pytest.importorskip("torch")

from thoughtsource.errors import ConfigError
from thoughtsource.star.scratch_model import ALPHABET, BaseConfig, build_base, build_model, build_tokenizer, training_problems

TINY = {
    "task_options": {
        "min_digits": 1,
        "max_digits": 4,
        "scratchpad": "compact",
        "n_test_per_digit": 20,
        "n_dev_per_digit": 10,
        "pool_size": 2000,
    },
    "architecture": {"layers": 1, "width": 32, "heads": 2, "intermediate": 64, "positions": "nope"},
    "data": {"digits": [1, 2], "examples": 400, "extra": {3: 0.05}, "hint_share": 0.25},
    "training": {"steps": 12, "batch_size": 16, "lr": 3e-3, "warmup_steps": 2, "checkpoint_every": 0},
    # 12 steps teach it nothing: the gate checks twice, and the unlearnt base is saved anyway (with a warning)
    "gate": {"every": 6, "required": False},
}


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return run_cli(*args, env={**os.environ, "OMP_NUM_THREADS": "1"})


@pytest.fixture(scope="module")
def tiny_base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("base")
    (root / "base.yaml").write_text(yaml.safe_dump(TINY))
    p = _cli("star", "base", "--config", str(root / "base.yaml"), "--out", str(root / "model"), "--threads", "1", "--json")
    assert p.returncode == 0, p.stderr[-3000:]
    info = json.loads(p.stdout)
    assert info["k"] == 2 and set(info["dev_correct_by_group"]) == {"1-digit", "2-digit", "3-digit", "4-digit"}
    return root / "model"


def test_character_tokenizer_round_trips_every_character(tmp_path: Path) -> None:
    from transformers import AutoTokenizer

    tok = build_tokenizer()
    text = "Input:\n624+259\nTarget: 883\n<scratch>\n4+9+0=13\n</scratch>\n883" + ALPHABET
    ids = tok(text, add_special_tokens=False)["input_ids"]
    assert len(ids) == len(text) and tok.unk_token_id not in ids  # one token per character, none unknown
    assert tok.decode(ids) == text
    tok.save_pretrained(tmp_path)
    again = AutoTokenizer.from_pretrained(tmp_path)
    assert again(text, add_special_tokens=False)["input_ids"] == ids and again.decode(ids) == text
    assert tok("7", add_special_tokens=True)["input_ids"] == tok("7", add_special_tokens=False)["input_ids"]  # no BOS added


@pytest.mark.parametrize(("positions", "rotary"), [("nope", False), ("rope", True)])
def test_positions_are_set_per_layer(positions: str, rotary: bool) -> None:
    import torch

    from thoughtsource.star.scratch_model import Architecture

    tok = build_tokenizer()
    model = build_model(Architecture(layers=3, width=32, heads=2, positions=positions), tok, seed=0)
    assert [layer.self_attn.use_rope for layer in model.model.layers] == [rotary] * 3
    # NoPE: one layer sees the earlier tokens only as a set (attention over their embeddings, no position signal), so
    # swapping two of them leaves the last position's output unchanged; RoPE changes it
    model = build_model(Architecture(layers=1, width=32, heads=2, positions=positions), tok, seed=0)
    a = torch.tensor([tok("1+2=", add_special_tokens=False)["input_ids"]])
    b = torch.tensor([tok("2+1=", add_special_tokens=False)["input_ids"]])
    with torch.no_grad():
        same = torch.allclose(model(a).logits[0, -1], model(b).logits[0, -1], atol=1e-5)
    assert same is (not rotary)


def test_training_problems_never_include_test_dev_or_their_twins() -> None:
    cfg = BaseConfig.from_dict(TINY)
    task = cfg.make_task()
    problems = training_problems(cfg, task)
    held = {(p.meta["a"], p.meta["b"]) for split in ("test", "dev") for p in task.load(split, 0)}
    pairs = {(p.meta["a"], p.meta["b"]) for p in problems}
    assert not pairs & held and not {(b, a) for a, b in pairs} & held
    counts = {d: sum(p.meta["digits"] == d for p in problems) for d in (1, 2, 3, 4)}
    assert counts == {1: 190, 2: 190, 3: 20, 4: 0}  # 5 % three-digit, the rest even over 1-2 digits


def test_base_folder_is_an_ordinary_hf_model(tiny_base: Path) -> None:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    for name in ("config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json", "thoughtsource_base.json"):
        assert (tiny_base / name).is_file(), name
    model = AutoModelForCausalLM.from_pretrained(tiny_base)
    tok = AutoTokenizer.from_pretrained(tiny_base)
    assert type(model).__name__ == "SmolLM3ForCausalLM" and model.config.no_rope_layers == [0]
    assert model.config.vocab_size == len(tok) and tok.eos_token_id == model.config.eos_token_id
    info = json.loads((tiny_base / "thoughtsource_base.json").read_text())
    assert info["parameters"] == sum(p.numel() for p in model.parameters())
    assert info["data"]["examples"] == 400 and 0 < info["data"]["with_hint"] < 400
    assert info["training"]["steps"] == 12 and info["config"] == BaseConfig.from_dict(TINY).model_dump(mode="json")
    # the gate checked dev at steps 6 and 12 (up to k + 1 digits); never learnt, so the cap ended the training
    assert info["gate"]["learnt_at_step"] is None and info["gate"]["checks"] == 2 and info["training"]["global_step"] == 12
    curve = [json.loads(line) for line in (tiny_base / "dev_curve.jsonl").read_text().splitlines()]
    assert [r["step"] for r in curve] == [6, 12] and set(curve[0]["dev_correct_by_group"]) == {"1-digit", "2-digit", "3-digit"}
    losses = [json.loads(line) for line in (tiny_base / "train_metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in losses if "loss" in r] == [3, 6, 9, 12]
    assert (tiny_base / "curves.png").stat().st_size > 0


def test_a_base_that_does_not_learn_its_range_is_one_clear_error(tmp_path: Path) -> None:
    """gate.required (the default): the cap reached unlearnt stops the build, naming the accuracies it reached."""
    (tmp_path / "base.yaml").write_text(yaml.safe_dump({**TINY, "training": {**TINY["training"], "steps": 4},
                                                        "gate": {"every": 2}}))
    p = _cli("star", "base", "--config", str(tmp_path / "base.yaml"), "--out", str(tmp_path / "model"), "--threads", "1")
    assert p.returncode == 1 and "Traceback" not in p.stderr, p.stderr[-3000:]
    assert "did not learn its range (1..2 digits" in p.stderr and "within 4 steps: at step 4 dev reached 1-digit" in p.stderr
    assert not (tmp_path / "model").exists()
    work = tmp_path / "model.work"  # the curves stay for a look
    assert [json.loads(line)["step"] for line in (work / "dev_curve.jsonl").read_text().splitlines()] == [2, 4]


def test_curves_of_a_resumed_training_keep_one_row_per_step(tmp_path: Path) -> None:
    from thoughtsource.star.scratch_model import read_curve

    path = tmp_path / "c.jsonl"
    rows = [{"step": 10, "loss": 1.0}, {"step": 20, "loss": 0.5}, {"step": 20, "train_runtime": 3.0}, {"step": 20, "loss": 0.4}]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert read_curve(path) == [{"step": 10, "loss": 1.0}, {"step": 20, "loss": 0.4}, {"step": 20, "train_runtime": 3.0}]
    assert read_curve(path, up_to=10) == [{"step": 10, "loss": 1.0}]


def test_rebuilding_needs_resume_and_the_same_recipe(tiny_base: Path) -> None:
    cfg = BaseConfig.from_dict(TINY)
    with pytest.raises(ConfigError, match="already holds a base model"):
        build_base(cfg, tiny_base)
    assert build_base(cfg, tiny_base, resume=True)["k"] == 2  # kept as it is, nothing trained
    other = BaseConfig.from_dict({**TINY, "seed": 1})
    with pytest.raises(ConfigError, match="another recipe"):
        build_base(other, tiny_base, resume=True)


def test_bad_recipes_are_one_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as e:
        BaseConfig.from_dict({"architecture": {"width": 30, "heads": 4}, "data": {"digits": [3, 1]}})
    assert "not a multiple of heads" in str(e.value) and "1 <= lo <= hi" in str(e.value)
    with pytest.raises(ConfigError, match="outside the task's digit range"):
        BaseConfig.from_dict({**TINY, "data": {"digits": [1, 5]}}).make_task()
    (tmp_path / "f").write_text("x")
    with pytest.raises(ConfigError, match="is a file"):
        build_base(BaseConfig.from_dict(TINY), tmp_path / "f")


def test_star_run_takes_the_base_folder(tiny_base: Path, tmp_path: Path) -> None:
    """A STaR iteration from the folder: generation, rationalization, training from it, evaluation per digit count."""
    run = {
        "model": str(tiny_base),
        "task": "arithmetic",
        "task_options": {**TINY["task_options"], "per_iteration": 40},
        "iterations": 1,
        "fewshot_k": 0,
        "steps": {"first": 3, "warmup_steps": 1},
        "batch_size": 8,
        "lr": 1e-3,
        "generation": {"batch_size": 64, "threads": 1},
    }
    (tmp_path / "run.yaml").write_text(yaml.safe_dump(run))
    p = _cli("star", "run", "--config", str(tmp_path / "run.yaml"), "--out", str(tmp_path / "out"), "--json")
    assert p.returncode == 0, p.stderr[-3000:]
    summary = json.loads(p.stdout)["summary"]
    it1 = summary["iterations"][1]
    assert it1["train_n"] == 40 and set(it1["test_correct_by_group"]) == {"1-digit", "2-digit", "3-digit", "4-digit"}
    prompts = [r["prompt"] for r in json.loads((tmp_path / "out" / "iter_1" / "generate.json").read_text())["rows"]]
    assert all(pr.startswith("Input:\n") and pr.endswith("\nTarget:\n") for pr in prompts)  # zero-shot


def test_generate_takes_the_base_folder(tiny_base: Path, tmp_path: Path) -> None:
    from thoughtsource import Collection

    sample = {"id": "q1", "question": "12+34", "type": "number", "answer": ["46"], "choices": [], "cot": [], "context": ""}
    (tmp_path / "in.json").write_text(json.dumps({"arith": {"test": [sample]}}))
    p = _cli(
        "generate",
        "--file",
        str(tmp_path / "in.json"),
        "--backend",
        "transformers",
        "--model",
        str(tiny_base),
        "--triggers",
        "none",
        "--max-tokens",
        "8",
        "--answer-max-tokens",
        "4",
        "--allow-empty",  # the barely trained model may write only special tokens: stored, not retried
        "--db",
        str(tmp_path / "store.sqlite"),
        "--out",
        str(tmp_path / "out.json"),
    )
    assert p.returncode in (0, 1), p.stderr[-3000:]  # 1: an empty answer of the barely trained model is a counted failure
    assert "cannot load" not in p.stderr and "Traceback" not in p.stderr
    ((_, _, sample_out),) = list(Collection.from_json(tmp_path / "out.json").samples())
    assert len(sample_out.generated_cot) == 1 and str(tiny_base) in json.dumps(sample_out.generated_cot[0].to_dict())


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
def test_serve_model_takes_the_base_folder(tiny_base: Path) -> None:
    pytest.importorskip("fastapi")
    import httpx

    port = _free_port()
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "thoughtsource", "serve-model", "--model", str(tiny_base), "--port", str(port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        base = f"http://127.0.0.1:{port}/v1"
        for _ in range(600):  # bounded: 600 tries of 0.5 s
            if proc.poll() is not None:
                pytest.fail(f"serve-model exited {proc.returncode}: {proc.stderr.read()[-2000:]}")
            try:
                if httpx.get(f"{base}/models", timeout=5).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            time.sleep(0.5)
        r = httpx.post(
            f"{base}/completions",
            json={"model": str(tiny_base), "prompt": "Input:\n12+34\nTarget:\n", "max_tokens": 6},
            timeout=120,
        )
        assert r.status_code == 200, r.text
        body = r.json()
        assert isinstance(body["choices"][0]["text"], str) and body["usage"]["completion_tokens"] <= 6
    finally:
        proc.terminate()
        proc.wait(timeout=60)
