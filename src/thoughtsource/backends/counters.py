"""Live counters a backend exposes (``backend.counters``) for progress bars and run summaries."""

from __future__ import annotations

from dataclasses import asdict, dataclass


@dataclass
class Counters:
    """Monotonic counts since the backend was created.

    ``requests`` counts attempts sent (HTTP calls or generate rows), ``retries`` the attempts that
    were repeats, ``errors`` the failed attempts (429, 5xx, timeouts, dropped connections),
    ``completed`` the requests answered and ``failed`` those given up on (a BackendError).
    """

    requests: int = 0
    retries: int = 0
    errors: int = 0
    completed: int = 0
    failed: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0

    def snapshot(self) -> dict[str, int]:
        return asdict(self)


def request_seed(seed: int | None, sample_index: int) -> int:
    """The seed one sampled request runs with: distinct per ``sample_index``, reproducible, < 2**31.

    Shared by every backend so that ``sample_index`` means the same thing everywhere: the n
    self-consistency samples of one prompt differ, and each is the same on a re-run.
    """
    return ((seed or 0) * 1_000_003 + sample_index) % (2**31 - 1)
