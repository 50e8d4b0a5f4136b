"""The models of one STaR run and where their completions come from.

M_0 is the base model, M_n the checkpoint iteration n trained.  :class:`RunModels` knows where each one is, its
fingerprint (a hash of its files) and store identity (what keys its completions), keeps the one engine session open
on one model across that model's steps (:mod:`.engines`: started when a completion is missing, closed before
training or when another model is needed), opens the run's completion store (``OUT/completions.sqlite``) and makes
the :class:`~.generation.Generator` for a model.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..embedded import resolve_model
from ..store import CompletionStore
from . import dist
from .artifacts import checkpoint, has_checkpoint
from .calculator import CALCULATOR_VERSION, CalculatorBackend
from .config import StarConfig
from .engines import ENGINES, Session, model_fingerprint, open_session, store_identity
from .generation import Generator


class RunModels:
    """M_0..M_N of the run in ``out``: paths, fingerprints, identities, the open engine session and the store."""

    def __init__(self, cfg: StarConfig, out: Path, *, show_progress: bool = True,
                 wrap_backend: Callable[[Any], Any] | None = None,
                 failed_elsewhere: Callable[[], str | None] = lambda: None, calculator_rounds: int | None = None) -> None:
        self.cfg = cfg
        self.calculator_rounds = calculator_rounds  # the task's calculator (None: none), in every engine's decoding loop
        self.out = out
        self.show_progress = show_progress
        self.wrap_backend = wrap_backend  # tests: wraps each engine's backend (counting, failing)
        self.failed_elsewhere = failed_elsewhere  # what another rank failed with (its generation stops waiting)
        self._base_path: str | None = None
        self._session: Session | None = None  # the engine holding one model, kept across that model's steps
        self.store: CompletionStore | None = None
        self._fingerprints: dict[str, str] = {}

    @property
    def base_path(self) -> str:
        if self._base_path is None:
            self._base_path = resolve_model(self.cfg.model)
        return self._base_path

    def path(self, n: int) -> str:
        """Weights of M_n: the base model for n == 0 (and for every 'fewshot' evaluation)."""
        return self.base_path if n == 0 else str(checkpoint(self.out, n))

    def fingerprint(self, n: int) -> str | None:
        """M_n's fingerprint (hash of its files); None when its checkpoint was deleted (keep_checkpoints: false)."""
        path = self.path(n)
        if n > 0 and not has_checkpoint(self.out, n):
            return None
        if path not in self._fingerprints:
            self._fingerprints[path] = model_fingerprint(path)
        return self._fingerprints[path]

    def forget(self, n: int) -> None:
        """M_n's files are new (just trained): its fingerprint is computed again."""
        self._fingerprints.pop(self.path(n), None)

    def identity(self, n: int) -> dict[str, Any] | None:
        """What produced (or would produce) M_n's completions: the store key's identity (weights, engine, resolved
        device and dtype, a server's command and environment)."""
        fp = self.fingerprint(n)
        if fp is None:
            return None
        ident = store_identity(self.cfg, fp)
        if self.calculator_rounds is not None:  # keyed only when on, so the stores of runs without it stay valid
            ident["calculator"] = {"version": CALCULATOR_VERSION, "max_rounds": self.calculator_rounds}
        return ident

    def info(self, n: int) -> dict[str, Any]:
        """What a step's JSON records about M_n (engine, path, fingerprint, what a server reported, identity)."""
        if self._session is not None and self._session.n == n:
            info = self._session.describe()
        else:
            info = {"engine": self.cfg.generation.engine_name, "path": self.path(n), "fingerprint": self.fingerprint(n)}
        return {**info, "identity": self.identity(n)}

    def stale(self, data: dict[str, Any], n: int) -> str | None:
        """Why a step's artifact was not produced by M_n as it is generated now (None: it was)."""
        model = data.get("model") or {}
        recorded, expected = model.get("fingerprint"), self.fingerprint(n)
        if recorded is not None and expected is not None and recorded != expected:
            return f"produced by {recorded}, not by M_{n} ({expected})"
        identity, now = model.get("identity"), self.identity(n)
        if identity is not None and now is not None and identity != now:
            diffs = sorted(k for k in set(identity) | set(now) if identity.get(k) != now.get(k))
            return f"generated with other {', '.join(diffs)} ({', '.join(f'{identity.get(k)!r} -> {now.get(k)!r}' for k in diffs)})"
        return None

    # ------------------------------------------------------------------ the engine and the store
    def session(self, n: int) -> Session:
        """The engine on M_n: the open one if it holds M_n, else the open one is closed and M_n started."""
        if self._session is not None and self._session.n == n:
            return self._session
        self.close_session()
        fp = self.fingerprint(n)
        assert fp is not None, f"M_{n} has no checkpoint"
        # the transformers engine loads M_n in this process (whole, outside any ZeRO-3/FSDP init: .loading);
        # vllm and server load it themselves, from the checkpoint
        self._session = open_session(self.cfg, n, self.path(n), fp, log_dir=self.out / "logs")
        return self._session

    def close_session(self) -> None:
        session, self._session = self._session, None
        if session is not None:
            session.close()

    def open_store(self) -> None:
        """OUT/completions.sqlite: rank 0 creates it (WAL, migrations) before the other ranks open it."""
        if self.store is None and (self.cfg.generation.store or dist.world_size() > 1):
            if dist.is_main():
                self.store = CompletionStore(self.out / "completions.sqlite")
            dist.barrier()
            if not dist.is_main():
                self.store = CompletionStore(self.out / "completions.sqlite")

    def close(self) -> None:
        """The engine session and the store."""
        self.close_session()
        if self.store is not None:
            self.store.close()
            self.store = None

    def generator(self, n: int) -> Generator:
        """Completes prompts with M_n (its engine opened only when a completion is missing)."""
        fp = self.fingerprint(n)
        assert fp is not None, f"M_{n} has no checkpoint"
        shard = ENGINES[self.cfg.generation.engine_name].shards  # vllm and servers run on rank 0 only
        wrap = self.wrap_backend
        if self.calculator_rounds is not None:  # the calculator above the engine (and above a test's wrapper)
            rounds, inner = self.calculator_rounds, self.wrap_backend

            def wrap(backend: Any) -> Any:
                return CalculatorBackend(inner(backend) if inner is not None else backend, max_rounds=rounds)
        identity = self.identity(n)
        assert identity is not None
        return Generator(self.cfg, lambda: self.session(n), identity, store=self.store, shard=shard,
                         show_progress=self.show_progress, wrap=wrap, failed_elsewhere=self.failed_elsewhere)
