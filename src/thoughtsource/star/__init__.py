"""STaR, the Self-Taught Reasoner (Zelikman et al., 2022): rationale bootstrapping with rationalization.

``run_star(StarConfig(...), out)`` runs the loop of :mod:`.loop`; tasks live in :mod:`.tasks`,
the inner-loop fine-tuning in :mod:`.train`; the analysis of runs (accuracies, comparisons, plots, seeds,
the bootstrap experiment's report) in :mod:`.analysis`.  Nothing heavy is imported here.
"""

from __future__ import annotations

from typing import Any

from .config import StarConfig, StepSchedule

__all__ = ["StarConfig", "StepSchedule", "run_star"]


def run_star(cfg: StarConfig, out: Any, *, resume: bool = False, show_progress: bool = True) -> dict[str, Any]:
    # in the call: every CLI command imports this package (for StarConfig), and the loop with its tasks, engines and
    # backends would add ~0.2 s to each command's start
    from .loop import run_star as _run

    return _run(cfg, out, resume=resume, show_progress=show_progress)
