"""Large ThoughtSource JSON files built from real ones, for the bounded-memory tests and ``benchmarks/bench_scale.py``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass
class Replicated:
    """What :func:`write_replicated` wrote: samples, generated CoTs and their answers."""

    samples: int = 0
    cots: int = 0
    answers: int = 0


def write_replicated(collection: dict[str, Any], out: Path, size: int, *, trace_chars: int | None = None) -> Replicated:
    """Write a ThoughtSource JSON file of at least ``size`` bytes into ``out``, streaming, from ``collection``
    (``{dataset: {split: [sample, ...]}}``): each split's samples repeated in turn, each copy with a new id, until the
    split holds its share of ``size``.  ``trace_chars``: every CoT repeated to about that many characters, as a
    reasoning model's trace."""
    groups = [(d, s, xs) for d, sp in collection.items() for s, xs in sp.items() if xs]
    per_group = size // len(groups)
    stats = Replicated()
    with open(out, "w", encoding="utf-8") as fh:
        fh.write("{")
        for gi, (d, s, xs) in enumerate(groups):
            fh.write(("," if gi else "") + f"\n{json.dumps(d)}: {{{json.dumps(s)}: [")
            written = 0
            while written < per_group:
                x = xs[stats.samples % len(xs)]
                x = dict(x, id=f"{x['id']}-{stats.samples}")
                if trace_chars:
                    x["generated_cot"] = [dict(c, cot=(c["cot"] + "\n") * max(1, trace_chars // max(1, len(c["cot"] or ""))))
                                          for c in x["generated_cot"]]
                stats.cots += len(x["generated_cot"])
                stats.answers += sum(len(c["answers"]) for c in x["generated_cot"])
                text = ("," if written else "") + json.dumps(x, ensure_ascii=False)
                fh.write(text)
                written += len(text)
                stats.samples += 1
            fh.write("]}")
        fh.write("}\n")
    return stats


def run_capped(code: str, cap_mb: int, *, timeout: float = 900) -> subprocess.CompletedProcess[str]:
    """Run Python ``code`` in a fresh interpreter whose address space is capped at ``cap_mb`` MB (``RLIMIT_AS``), with one
    OpenMP / BLAS thread (a thread pool reserves address space): how the bounded-memory tests show what fits."""
    cap = cap_mb << 20
    prog = f"import resource\nresource.setrlimit(resource.RLIMIT_AS, ({cap}, {cap}))\n{code}"
    env = {**os.environ, "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}
    return subprocess.run([sys.executable, "-c", prog], capture_output=True, text=True, timeout=timeout, env=env)


def run_cli_capped(argv: list[str], cap_mb: int, *, timeout: float = 900) -> subprocess.CompletedProcess[str]:
    """``thoughtsource ARGV`` under :func:`run_capped`."""
    return run_capped(f"import sys\nfrom thoughtsource.cli import main\nsys.argv = {['thoughtsource', *argv]!r}\nmain()", cap_mb,
                      timeout=timeout)
