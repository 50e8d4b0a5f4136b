"""The modules moved by issue 34 (star/base.py, stats, report, plots, seeds, bootstrap) still import from their
old paths for one release, and each old name is the very object of its new home."""

from __future__ import annotations

import importlib

import pytest

MOVED = {
    "thoughtsource.star.base": ["thoughtsource.star.scratch_model", "thoughtsource.star.analysis.accuracy"],
    "thoughtsource.star.stats": ["thoughtsource.star.analysis.accuracy"],
    "thoughtsource.star.report": ["thoughtsource.star.analysis.compare_runs"],
    "thoughtsource.star.plots": ["thoughtsource.star.analysis.plots"],
    "thoughtsource.star.bootstrap": ["thoughtsource.star.analysis.bootstrap_experiment"],
    "thoughtsource.star.seeds": ["thoughtsource.star.analysis.seed_aggregate"],
}


@pytest.mark.parametrize("old", sorted(MOVED))
def test_an_old_path_re_exports_its_new_home(old: str) -> None:
    module = importlib.import_module(old)
    homes = [importlib.import_module(n) for n in MOVED[old]]
    assert module.__all__
    for name in module.__all__:
        obj = getattr(module, name)
        if any(getattr(h, name, None) is obj for h in homes):
            continue
        assert old == "thoughtsource.star.seeds" and name in {"Runner", "parse_seeds", "run_seeds", "seed_dir"}, name
