"""Moved to :mod:`thoughtsource.star.analysis.accuracy`; kept for one release (import from there)."""

# moved to thoughtsource.star.analysis.accuracy; kept for one release
from .analysis.accuracy import (
    ALPHA,
    LEARNT_SHARE,
    TEST_NAME,
    Best,
    Comparison,
    Proportion,
    Split,
    at_iteration,
    best_iteration,
    claim_points,
    compare,
    difference_interval,
    digits_of,
    fisher_exact,
    fmt_p,
    group_key,
    group_proportions,
    groups,
    iteration_stats,
    learnt_range,
    newcombe_interval,
    proportion,
    proportion_at,
    run_stats,
    wilson_interval,
)

__all__ = ["ALPHA", "LEARNT_SHARE", "TEST_NAME", "Best", "Comparison", "Proportion", "Split", "at_iteration", "best_iteration", "claim_points", "compare", "difference_interval", "digits_of", "fisher_exact", "fmt_p", "group_key", "group_proportions", "groups", "iteration_stats", "learnt_range", "newcombe_interval", "proportion", "proportion_at", "run_stats", "wilson_interval"]
