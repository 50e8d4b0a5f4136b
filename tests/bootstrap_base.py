"""Where the committed bootstrap base lies: ``tests/star/fixtures/bootstrap_base``, a 0.37M-parameter model that
``thoughtsource star base`` built on 1-2-digit sums with the compact scratchpad (its recipe in its
``thoughtsource_base.json``).  The STaR tests whose point is the loop's mechanism start from it; runs from it use the
compact scratchpad and zero-shot prompts (it answers nothing after a few-shot prefix): :func:`from_the_base`."""

from pathlib import Path
from typing import Any

BOOTSTRAP_BASE = Path(__file__).resolve().parent / "star" / "fixtures" / "bootstrap_base"


def from_the_base(cfg: dict[str, Any]) -> dict[str, Any]:
    """The STaR run config ``cfg`` (its arithmetic ``task_options`` and training settings) started from the base: its
    model, the task and scratchpad it was trained on, zero-shot prompts."""
    return {**cfg, "model": str(BOOTSTRAP_BASE), "task": "arithmetic", "fewshot_k": 0,
            "task_options": {**cfg["task_options"], "scratchpad": "compact"}}
