"""Moved to :mod:`thoughtsource.star.analysis.plots`; kept for one release (import from there)."""

# moved to thoughtsource.star.analysis.plots; kept for one release
from .analysis.plots import (
    Best,
    Proportion,
    best_iteration,
    group_key,
    group_proportions,
    groups,
    plot_aggregate,
    plot_base_curves,
    plot_compare,
    plot_digits,
    plot_run,
    proportion,
)

__all__ = ["Best", "Proportion", "best_iteration", "group_key", "group_proportions", "groups", "plot_aggregate", "plot_base_curves", "plot_compare", "plot_digits", "plot_run", "proportion"]
