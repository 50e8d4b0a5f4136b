"""Moved to :mod:`thoughtsource.star.analysis.bootstrap_experiment`; kept for one release (import from there)."""

# moved to thoughtsource.star.analysis.bootstrap_experiment; kept for one release
from .analysis.bootstrap_experiment import (
    ARM_ORDER,
    MIN_N,
    NEVER_SEEN_TARGET,
    Proportion,
    base_info,
    base_k,
    chosen_iteration,
    digits_of,
    find_runs,
    fmt_p,
    gold_ceiling,
    group_key,
    kept_audit,
    learnt_range,
    markdown,
    mcnemar_exact,
    paired,
    report,
    run_report,
    test_rows,
)

__all__ = ["ARM_ORDER", "MIN_N", "NEVER_SEEN_TARGET", "Proportion", "base_info", "base_k", "chosen_iteration", "digits_of", "find_runs", "fmt_p", "gold_ceiling", "group_key", "kept_audit", "learnt_range", "markdown", "mcnemar_exact", "paired", "report", "run_report", "test_rows"]
