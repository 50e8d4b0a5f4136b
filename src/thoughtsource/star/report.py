"""Moved to :mod:`thoughtsource.star.analysis.compare_runs`; kept for one release (import from there)."""

# moved to thoughtsource.star.analysis.compare_runs; kept for one release
from .analysis.compare_runs import (
    ALPHA,
    TEST_NAME,
    Best,
    Proportion,
    Runs,
    Table,
    accuracy_table,
    best_iteration,
    best_table,
    claim_points,
    compare,
    comparison,
    filter_examples,
    filter_table,
    fmt_p,
    group_proportions,
    group_table,
    groups,
    load_arms,
    load_run,
    markdown,
    parse_arm,
    proportion,
    proportion_at,
    reference_table,
    run_stats,
    seeds_table,
    tables,
    vs_first_table,
)

__all__ = ["ALPHA", "TEST_NAME", "Best", "Proportion", "Runs", "Table", "accuracy_table", "best_iteration", "best_table", "claim_points", "compare", "comparison", "filter_examples", "filter_table", "fmt_p", "group_proportions", "group_table", "groups", "load_arms", "load_run", "markdown", "parse_arm", "proportion", "proportion_at", "reference_table", "run_stats", "seeds_table", "tables", "vs_first_table"]
