"""Where the committed bootstrap base lies: ``tests/star/fixtures/bootstrap_base``, a 0.37M-parameter model that
``thoughtsource star base`` built on 1-2-digit sums with the compact scratchpad (its recipe in its
``thoughtsource_base.json``).  The STaR tests whose point is the loop's mechanism start from it; runs from it use the
compact scratchpad and zero-shot prompts (it answers nothing after a few-shot prefix)."""

from pathlib import Path

BOOTSTRAP_BASE = Path(__file__).resolve().parent / "star" / "fixtures" / "bootstrap_base"
