"""STaR inner loop: the completion-only loss really masks the prompt; the step schedule never gives 0 steps."""

from __future__ import annotations

from pathlib import Path

import pytest

from bootstrap_base import BOOTSTRAP_BASE
from thoughtsource.star.config import StarConfig, StepSchedule
from thoughtsource.star.tasks.base import TrainingRecord


# --------------------------------------------------------------------------- step schedule
def test_paper_schedule_40_then_plus_20_percent() -> None:
    s = StepSchedule()
    assert [s.steps(n) for n in (1, 2, 3, 4)] == [40, 48, 58, 70]  # ceil(40 * 1.2**k)


def test_additive_schedule_of_the_arithmetic_runs() -> None:
    s = StepSchedule(first=300, growth="additive", increase=20)
    assert [s.steps(n) for n in (1, 2, 5)] == [300, 320, 380]


@pytest.mark.parametrize("first", [1, 2, 3, 7, 40])
@pytest.mark.parametrize("increase", [0.0, 0.01, 0.2, 1.0])
@pytest.mark.parametrize("growth", ["multiplicative", "additive"])
def test_schedule_never_gives_zero_steps(first: int, increase: float, growth: str) -> None:
    s = StepSchedule(first=first, increase=increase, growth=growth)
    steps = [s.steps(n) for n in range(1, 60)]
    assert min(steps) >= 1
    assert steps == sorted(steps)  # never shrinks


def test_schedule_rejects_zero_first_steps_and_caps() -> None:
    from thoughtsource.errors import ConfigError

    with pytest.raises(ConfigError):
        StarConfig.from_dict({"steps": {"first": 0}})
    with pytest.raises(ConfigError) as e:
        StarConfig.from_dict({"steps": {"frist": 3}, "itrations": 2})  # typos are errors (extra="forbid")
    assert "frist" in str(e.value) and "itrations" in str(e.value)
    assert StepSchedule(first=40, max_steps=50).steps(5) == 50


# --------------------------------------------------------------------------- masked loss
@pytest.mark.slow
def test_prompt_tokens_contribute_zero_loss_and_zero_gradient(embedded_model) -> None:
    """On the embedded model and its tokenizer, as loaded once a session (conftest ``embedded_model``): the gradient is
    taken w.r.t. detached logits, so the shared weights are never touched."""
    import torch

    from thoughtsource.star.train import IGNORE_INDEX, collator, tokenize_record

    model, tok = embedded_model
    recs = [TrainingRecord("a", "Input:\n1 2 + 3 4\nTarget:\n", "<scratch>\n1 2 + 3 4 , C: 0\n</scratch>\n4 6"),
            TrainingRecord("b", "Input:\n5 + 7\nTarget:\n", "<scratch>\n, 2 C: 1\n1 2\n</scratch>\n1 2")]
    feats = [tokenize_record(r, tok, 512) for r in recs]
    n_prompt = [len(tok(r.prompt, add_special_tokens=False)["input_ids"]) for r in recs]
    for f, k in zip(feats, n_prompt, strict=True):
        assert f["labels"][:k] == [IGNORE_INDEX] * k
        assert all(x != IGNORE_INDEX for x in f["labels"][k:])
    batch = collator(tok)(feats)
    model.eval()

    out = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"])
    logits = out.logits.detach().requires_grad_(True)

    def loss_of(labels: torch.Tensor) -> torch.Tensor:
        shift_logits = logits[:, :-1].reshape(-1, logits.size(-1))
        return torch.nn.functional.cross_entropy(shift_logits, labels[:, 1:].reshape(-1), ignore_index=IGNORE_INDEX)

    labels = batch["labels"]
    loss = loss_of(labels)
    # the model's own loss with the masked labels is the same number
    with torch.no_grad():
        assert torch.allclose(model(**batch).loss, loss, atol=1e-5)
    loss.backward()
    grad = logits.grad
    # gradient w.r.t. the logits that predict prompt tokens (and padding) is exactly zero
    for row, k in enumerate(n_prompt):
        assert torch.count_nonzero(grad[row, : k - 1]) == 0
        assert torch.count_nonzero(grad[row, k - 1 : k - 1 + 3]) > 0  # the first completion tokens do learn
    pad_rows = labels == IGNORE_INDEX
    assert pad_rows.any()

    # changing what the masked positions "are" (another prompt) changes nothing: the loss is over the
    # completion only, so it equals a manual sum over completion positions
    manual = []
    for row, k in enumerate(n_prompt):
        n_tok = int((labels[row] != IGNORE_INDEX).sum())
        lp = torch.log_softmax(logits[row].detach(), -1)
        targets = labels[row, k : k + n_tok]
        manual.extend((-lp[k - 1 : k - 1 + n_tok].gather(-1, targets[:, None])).squeeze(-1).tolist())
    assert abs(sum(manual) / len(manual) - loss.item()) < 1e-4

    # and un-masking the prompt would change the loss: the mask is really applied
    unmasked = labels.clone()
    for row, k in enumerate(n_prompt):
        unmasked[row, :k] = batch["input_ids"][row, :k]
    assert abs(loss_of(unmasked).item() - loss.item()) > 1e-3


@pytest.mark.slow
def test_last_partial_batch_is_kept_and_training_moves_the_weights(tmp_path) -> None:
    """3 examples, batch 2, 2 steps = exactly one epoch only if the partial batch of 1 is kept.  The Trainer's batching,
    the same on any model: on the committed 0.37M bootstrap base (a real model ``star base`` built), not the 135M
    embedded one."""
    import torch

    from thoughtsource.embedded import load_model
    from thoughtsource.star.train import save_checkpoint, train

    cfg = StarConfig(batch_size=2, lr=1e-4, steps=StepSchedule(first=2, warmup_steps=0))
    recs = [TrainingRecord(str(i), f"Input:\n{i} + {i}\nTarget:\n", f"{2 * i}") for i in range(1, 4)]
    model, tok, stats = train(cfg, str(BOOTSTRAP_BASE), recs, 2, tmp_path / "work", show_progress=False)
    assert stats["steps"] == 2 and stats["examples"] == 3
    assert stats["epochs"] == pytest.approx(1.0)
    base, _ = load_model(str(BOOTSTRAP_BASE))
    name = "model.embed_tokens.weight"
    assert not torch.equal(dict(model.named_parameters())[name], dict(base.named_parameters())[name])
    ckpt = save_checkpoint(model, tok, tmp_path / "ckpt")
    assert (ckpt / "config.json").exists() and not list(tmp_path.glob(".ckpt-*"))


def test_train_seed_changes_only_the_training_run(tmp_path) -> None:
    """``train_seed`` is the Trainer's seed alone: the same value as ``seed`` gives the same weights as leaving it unset,
    another value another data order (other weights); a run made before the field resumes (its fields compare equal)."""
    import torch

    from thoughtsource.star.train import train

    base = Path(__file__).resolve().parents[2] / "docs" / "star-results" / "bootstrap_v2" / "base_0"
    recs = [TrainingRecord(str(i), f"Input:\n{i} + {i + 3}\nTarget:\n", f"{2 * i + 3}") for i in range(12)]

    def weights(**seeds: int | None) -> dict[str, torch.Tensor]:
        cfg = StarConfig(batch_size=2, lr=1e-3, steps=StepSchedule(first=4, warmup_steps=0), checkpoint_every=0, **seeds)
        model, _, _ = train(cfg, str(base), recs, 4, tmp_path / f"work_{seeds}", show_progress=False)
        return {k: v.detach().clone() for k, v in model.named_parameters()}

    default, same, other = weights(seed=3), weights(seed=3, train_seed=3), weights(seed=3, train_seed=7)
    assert all(torch.equal(default[k], same[k]) for k in default)
    assert any(not torch.equal(default[k], other[k]) for k in default)
    assert "train_seed" not in StarConfig(seed=3).result_fields()
    assert StarConfig(seed=3, train_seed=7).result_fields()["train_seed"] == 7
    assert StarConfig(seed=3, train_seed=7).training_seed == 7 and StarConfig(seed=3).training_seed == 3
