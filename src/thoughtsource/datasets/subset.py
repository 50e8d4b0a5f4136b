"""ThoughtSource-100-style subsets: a fixed-seed sample of N questions per dataset, with all attached CoTs.

Per dataset one split is sampled: the given one, else the first of test → validation → train whose raw
files are present and that has gold answers (CommonsenseQA's test split has none).  Only samples with a
gold answer are drawn.  The draw is ``random.Random(f"{seed}:{dataset}")``, so a dataset's sample does not
change when other datasets are added, and the same seed gives the same ids on every machine.  Samples
are kept whole (reference CoTs and any generated CoTs attached by the converter) and in source order.
"""

from __future__ import annotations

import logging
import os
import random
from collections.abc import Iterable

from ..errors import DataError
from ..io import Data
from ..schema import Sample
from . import available_splits, load, spec
from . import names as all_names

log = logging.getLogger(__name__)

SPLIT_PREFERENCE = ("test", "validation", "train")


def sample_split(samples: list[Sample], n: int, seed: int, dataset: str) -> list[Sample]:
    """``n`` samples with gold answers, drawn with a per-dataset seed, in source order."""
    pool = [i for i, s in enumerate(samples) if s.answer]
    chosen = sorted(random.Random(f"{seed}:{dataset}").sample(pool, min(n, len(pool))))
    return [samples[i] for i in chosen]


def build_subset(
    names: Iterable[str] | None = None,
    *,
    n: int = 100,
    seed: int = 0,
    split: str | None = None,
    data_dir: str | os.PathLike[str] | None = None,
) -> Data:
    """``{dataset: {split: [n samples]}}`` over ``names`` (default: every registered dataset whose files are present)."""
    if n < 1:
        raise ValueError("n must be at least 1")
    explicit = names is not None
    data: Data = {}
    for name in list(names) if names is not None else all_names():
        present = available_splits(name, data_dir)
        candidates = [split] if split else [s for s in SPLIT_PREFERENCE if s in spec(name).splits]
        candidates = [s for s in candidates if s in present]
        if not candidates:
            msg = f"{name}: no raw files present for split(s) {[split] if split else list(SPLIT_PREFERENCE)}"
            if explicit:
                raise DataError(msg + "; run 'thoughtsource datasets download " + name + "'", dataset=name)
            log.warning("subset: skipping %s", msg)
            continue
        for s in candidates:
            samples = load(name, [s], data_dir=data_dir)[s]
            if any(x.answer for x in samples):
                data[name] = {s: sample_split(samples, n, seed, name)}
                log.info("subset: %s/%s: %d of %d samples", name, s, len(data[name][s]), len(samples))
                break
        else:
            log.warning("subset: skipping %s: no split with gold answers among %s", name, candidates)
    return data
