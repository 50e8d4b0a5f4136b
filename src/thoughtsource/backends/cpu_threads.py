"""How many torch threads a CPU generate uses: ``threads="auto"`` measures it.

More threads only help when cores are idle: on a 2-core machine under load 5-7, one thread generated 8 CoTs in
21.2-22.7 s and two in 23.5-25.1 s (benchmarks/bench_threads.py), while on an idle machine two are faster.  The core
count, or the load average alone, guesses; :class:`MeasuredThreads` times the model's own forward pass at each count
from 1 to the cap (the cores, or ``$OMP_NUM_THREADS`` when set by hand) and takes the fastest, preferring fewer
threads unless more are at least 5 % faster.  It measures again when the 1-minute load average has moved by a core or
more since the last measurement (at most once a minute), so a server started on an idle machine adapts when a
training run starts beside it.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable

log = logging.getLogger(__name__)

#: more threads must be this much faster to be chosen
MARGIN = 0.05
#: measure again when the load average has moved by this much ...
REMEASURE_LOAD = 1.0
#: ... and this long has passed since the last measurement
REMEASURE_AFTER_S = 60.0


def thread_cap(cores: int | None = None) -> int:
    """The most threads ``auto`` tries: the cores, or fewer where ``$OMP_NUM_THREADS`` says so (a cap set by hand)."""
    cores = cores or os.cpu_count() or 1
    omp = os.environ.get("OMP_NUM_THREADS", "")
    return max(1, min(cores, int(omp))) if omp.isdigit() and int(omp) > 0 else cores


def load_average() -> float | None:
    try:
        return os.getloadavg()[0]
    except OSError:  # not available on this platform
        return None


def fastest(timings: dict[int, float], margin: float = MARGIN) -> int:
    """The thread count to use: the fewest whose time no count beats by more than ``margin``."""
    best = min(timings.values())
    return min(n for n, s in timings.items() if s <= best * (1 + margin))


class MeasuredThreads:
    """Chooses torch's thread count by timing ``step`` (one forward pass of the model) at each count.

    ``set_threads`` and ``clock`` are torch.set_num_threads and time.perf_counter unless given."""

    def __init__(self, step: Callable[[], None], cap: int, *, set_threads: Callable[[int], None] | None = None,
                 clock: Callable[[], float] = time.perf_counter, repeats: int = 3) -> None:
        self.step, self.cap, self.clock, self.repeats = step, cap, clock, repeats
        self.set_threads = set_threads or _torch_set_threads
        self.timings: dict[int, float] = {}
        self.chosen: int | None = None
        self._measured_at: float | None = None
        self._load: float | None = None

    def choose(self, load: float | None = None, now: float | None = None) -> int:
        """The thread count for the next generate (measuring first when due)."""
        if self.cap <= 1:
            return 1
        load = load_average() if load is None else load
        now = time.monotonic() if now is None else now
        if self.chosen is None or self._due(load, now):
            self.measure()
            self._measured_at, self._load = now, load
        assert self.chosen is not None
        return self.chosen

    def _due(self, load: float | None, now: float) -> bool:
        if load is None or self._load is None or self._measured_at is None:
            return False
        return abs(load - self._load) >= REMEASURE_LOAD and now - self._measured_at >= REMEASURE_AFTER_S

    def measure(self) -> dict[int, float]:
        """Seconds of one step at each count from 1 to the cap (the best of ``repeats``, after one untimed step)."""
        timings = {}
        for n in range(1, self.cap + 1):
            self.set_threads(n)
            self.step()  # warm: the thread pool grows, caches fill
            best = float("inf")
            for _ in range(self.repeats):
                t = self.clock()
                self.step()
                best = min(best, self.clock() - t)
            timings[n] = best
        self.timings, self.chosen = timings, fastest(timings)
        log.info("threads auto: %s -> %d", ", ".join(f"{n}: {s * 1000:.1f} ms" for n, s in timings.items()), self.chosen)
        return timings


def _torch_set_threads(n: int) -> None:
    import torch

    torch.set_num_threads(n)
