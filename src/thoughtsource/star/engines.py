"""Generation engines of the STaR loop: one model (M_n) at a time, opened for a step and closed before training.

* ``transformers``: :class:`~thoughtsource.backends.transformers_local.TransformersBackend` in this
  process, on M_n loaded whole from its folder (:func:`~.loading.load_for_generation`) on each rank that generates;
* ``vllm``: ``vllm.LLM`` in this process on the iteration's checkpoint
  (:class:`~thoughtsource.backends.vllm.VLLMBackend`); closing
  it deletes the engine and frees the GPU memory before training;
* ``server``: a command started for each checkpoint (:class:`ServerProcess`, e.g. ``vllm serve
  {checkpoint} --port {port}``), health-checked on ``/v1/models``, checked to serve that checkpoint
  (its ``fingerprint`` or ``root``), used through the ``openai`` backend and stopped afterwards.

Every engine names its model by :func:`model_fingerprint` (a hash of the checkpoint's files), which
keys the completion store and is recorded in each step's JSON, so a resumed run never takes a step
produced by another model.  :data:`ENGINES` maps each engine's name to its backend (one of
:data:`~thoughtsource.backends.BACKENDS`), what keys its completions, and how its session opens.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shlex
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..backends import Backend, get_backend
from ..backends.base import Releases
from ..backends.transformers_local import folder_fingerprint
from ..embedded import resolve_model
from ..errors import ConfigError, EngineError
from . import dist
from .config import GenerationOptions, ServerEngine, StarConfig
from .loading import load_for_generation, resolved_placement, weights_digest

log = logging.getLogger(__name__)


# --------------------------------------------------------------------------- fingerprints
def model_fingerprint(path: str, *, memo: bool = True) -> str:
    """``sha256:...`` of config.json + safetensors of a model folder (memoised unless ``memo=False``); ``name:<path>``
    for anything else."""
    resolved = Path(resolve_model(path))
    if resolved.is_dir():
        return folder_fingerprint(resolved, memo=memo)
    return f"name:{path}"


# --------------------------------------------------------------------------- server (a process per checkpoint)
def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def server_argv(template: str, *, checkpoint: str, port: int, model_name: str) -> list[str]:
    """The command template split like a shell line, each word's placeholders filled (no shell)."""
    values = {"checkpoint": checkpoint, "port": port, "model_name": model_name}
    try:
        return [word.format(**values) for word in shlex.split(template)]
    except (KeyError, IndexError, ValueError) as e:
        raise ConfigError(f"generation.server.command {template!r}: bad placeholder {e}; "
                          "use {checkpoint}, {port}, {model_name}") from None


def _die_with_parent() -> None:
    """In the server's process (Linux): SIGTERM when the loop dies, even by SIGKILL, so no server outlives its run."""
    import ctypes

    with contextlib.suppress(Exception):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


#: what a launcher (torchrun, accelerate launch, SLURM) puts in each training process's environment: a server
#: that inherits it believes it is a rank of the training job (vLLM then hangs waiting for the other "ranks")
_LAUNCHER_VARS = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK", "GROUP_WORLD_SIZE", "ROLE_RANK",
                  "ROLE_WORLD_SIZE", "ROLE_NAME", "MASTER_ADDR", "MASTER_PORT", "NODE_RANK", "CROSS_RANK", "CROSS_SIZE")
_LAUNCHER_PREFIXES = ("TORCHELASTIC_", "TORCH_ELASTIC_", "ACCELERATE_", "FSDP_", "PMI_", "OMPI_COMM_WORLD_", "SLURM_PROCID",
                      "SLURM_LOCALID")


def visible_gpus() -> str:
    """The GPUs this job may use, as ``CUDA_VISIBLE_DEVICES`` says them: the launcher's list, else every GPU."""
    given = os.environ.get("CUDA_VISIBLE_DEVICES")
    if given is not None:
        return given
    try:
        import torch

        count = torch.cuda.device_count()
    except ImportError:  # pragma: no cover - torch is in the models extra
        count = 0
    return ",".join(str(i) for i in range(count))


def server_env(opts: ServerEngine, environ: dict[str, str] | None = None) -> dict[str, str]:
    """The server's environment: the launching process's without the launcher's rank variables, with an explicit
    ``CUDA_VISIBLE_DEVICES`` (``server.cuda_visible_devices``, else the job's GPUs), then ``server.env`` on top."""
    base = dict(os.environ if environ is None else environ)
    env = {k: v for k, v in base.items() if k not in _LAUNCHER_VARS and not k.startswith(_LAUNCHER_PREFIXES)}
    env["CUDA_VISIBLE_DEVICES"] = opts.cuda_visible_devices if opts.cuda_visible_devices is not None else visible_gpus()
    return {**env, **opts.env}


def _tail(path: Path, lines: int = 20) -> str:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-lines:])


class ServerProcess:
    """A model server started for one checkpoint; ``start()`` returns once it serves that checkpoint."""

    def __init__(self, opts: ServerEngine, checkpoint: str, fingerprint: str, log_path: Path) -> None:
        self.opts, self.checkpoint, self.fingerprint, self.log_path = opts, checkpoint, fingerprint, log_path
        self.port = opts.port or free_port(opts.host)
        self.argv = server_argv(opts.command, checkpoint=checkpoint, port=self.port, model_name=opts.model_name)
        self.proc: subprocess.Popen[bytes] | None = None
        self.served: dict[str, Any] = {}

    @property
    def base_url(self) -> str:
        host = f"[{self.opts.host}]" if ":" in self.opts.host else self.opts.host
        return f"http://{host}:{self.port}/v1"

    def start(self) -> dict[str, Any]:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        log.info("starting the model server for %s: %s (log: %s)", self.checkpoint, shlex.join(self.argv), self.log_path)
        with self.log_path.open("ab") as fh:
            try:
                self.proc = subprocess.Popen(self.argv, stdout=fh, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                             env=server_env(self.opts), start_new_session=True,
                                             preexec_fn=_die_with_parent if sys.platform == "linux" else None)
            except OSError as e:
                raise EngineError(f"cannot start the model server {shlex.join(self.argv)}: {e}") from None
        try:
            entry = self._wait_healthy()
            self.served = self._check(entry)
        except BaseException:
            self.stop()
            raise
        return self.served

    def _fail(self, why: str) -> EngineError:
        tail = _tail(self.log_path)
        return EngineError(f"model server {shlex.join(self.argv)} {why}" + (f"; its last output:\n{tail}" if tail else ""))

    def _wait_healthy(self) -> dict[str, Any]:
        import httpx

        deadline = time.monotonic() + self.opts.startup_timeout_s
        assert self.proc is not None
        while True:
            code = self.proc.poll()
            if code is not None:
                raise self._fail(f"exited with status {code} before serving")
            try:
                r = httpx.get(f"{self.base_url}/models", timeout=5.0)
                if r.status_code == 200:
                    data = r.json().get("data") or []
                    entry = next((m for m in data if m.get("id") == self.opts.model_name), None)
                    if entry is None:
                        raise self._fail(f"serves {[m.get('id') for m in data]}, not {self.opts.model_name!r} "
                                         "(pass --served-model-name {model_name} in the command)")
                    return dict(entry)
            except (httpx.HTTPError, ValueError):
                pass
            if time.monotonic() > deadline:
                raise self._fail(f"did not answer {self.base_url}/models within {self.opts.startup_timeout_s:g} s")
            time.sleep(0.5)

    def _check(self, entry: dict[str, Any]) -> dict[str, Any]:
        """The server must serve this checkpoint: its reported fingerprint (serve-model) or root (vLLM) says so."""
        served = {"id": entry.get("id"), "fingerprint": entry.get("fingerprint"), "root": entry.get("root")}
        if served["fingerprint"] is not None and self.fingerprint.startswith("sha256:"):  # a folder's files were hashed
            if served["fingerprint"] != self.fingerprint:
                raise self._fail(f"serves weights {served['fingerprint']}, not the checkpoint {self.checkpoint} "
                                 f"({self.fingerprint}); does the command pass {{checkpoint}}?")
        elif served["root"] is not None:
            if Path(str(served["root"])).resolve() != Path(self.checkpoint).resolve():
                raise self._fail(f"serves {served['root']}, not the checkpoint {self.checkpoint}; "
                                 "does the command pass {checkpoint}?")
        else:
            log.warning("the model server reports neither fingerprint nor root: cannot check that it serves %s", self.checkpoint)
        return served

    def stop(self) -> None:
        """Terminate the server's process group; kill it after the grace period."""
        proc, self.proc = self.proc, None
        if proc is None or proc.poll() is not None:
            return
        for sig, wait in ((signal.SIGTERM, self.opts.stop_grace_s), (signal.SIGKILL, 30.0)):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, sig) if sys.platform != "win32" else proc.send_signal(sig)
            try:
                proc.wait(timeout=wait)
                break
            except subprocess.TimeoutExpired:
                log.warning("the model server (pid %d) did not stop after %s; killing it", proc.pid, sig.name)
        log.info("model server for %s stopped", self.checkpoint)


# --------------------------------------------------------------------------- sessions
@dataclass
class Session:
    """One model (M_n) in one engine: the backend to complete with, what identifies the model, how to close it."""

    n: int
    engine: str
    model_path: str
    fingerprint: str
    backend: Backend
    served: dict[str, Any] | None = None
    weights: str | None = None  # digest of the weights in this process (in-process engines): the ranks compare theirs
    _closers: list[Any] = field(default_factory=list)

    def describe(self) -> dict[str, Any]:
        """What a step's JSON records about the model that produced it."""
        d: dict[str, Any] = {"engine": self.engine, "path": self.model_path, "fingerprint": self.fingerprint}
        if self.served is not None:
            d["served"] = self.served
        return d

    def close(self) -> None:
        while self._closers:
            self._closers.pop()()


def store_identity(cfg: StarConfig, fingerprint: str) -> dict[str, Any]:
    """What keys a STaR completion besides the request: the engine, the weights, and everything else that changes
    outputs, resolved: ``dtype: auto`` is bf16 on a GPU and fp32 on the CPU, so the device and dtype it resolves
    to are keyed (a CPU resume of a GPU run regenerates); a server's command and environment are keyed (other
    flags, other outputs)."""
    g = cfg.generation
    ident: dict[str, Any] = {"star": 2, "engine": g.engine_name, "weights": fingerprint, "options": g.options}
    ident.update(ENGINES[g.engine_name].identity(g))
    return ident


def open_session(cfg: StarConfig, n: int, model_path: str, fingerprint: str, *, log_dir: Path) -> Session:
    """Start the configured engine on ``model_path`` (M_n)."""
    return ENGINES[cfg.generation.engine_name].open(cfg, n, model_path, fingerprint, log_dir)


# --------------------------------------------------------------------------- the engines
def _transformers_identity(g: GenerationOptions) -> dict[str, Any]:
    ident: dict[str, Any] = dict(resolved_placement(g.dtype))
    ident["prefix_cache"] = g.prefix_cache
    if g.decoder != "default":  # keyed only when set, so the stores of runs made before the field stay valid
        ident["decoder"] = g.decoder
    return ident


def _transformers_session(cfg: StarConfig, n: int, model_path: str, fingerprint: str, log_dir: Path) -> Session:
    g = cfg.generation
    model, tok = load_for_generation(model_path, g.dtype)  # whole, outside any ZeRO-3/FSDP init, on this rank's device
    options = dict(g.options)
    if g.decoder == "graph":
        options["mode"] = "graph"
    if not g.prefix_cache:
        options.setdefault("mode", "generate")
    if g.threads:
        options.setdefault("threads", g.threads)
    backend = get_backend(ENGINES["transformers"].backend, model=model, tokenizer=tok, batch_size=g.batch_size,
                          fingerprint=fingerprint, **options)
    return Session(n, "transformers", model_path, fingerprint, backend, weights=weights_digest(model))


def _vllm_identity(g: GenerationOptions) -> dict[str, Any]:
    return {"dtype": g.dtype}  # vLLM resolves "auto" from the checkpoint's config, which the fingerprint covers


def _vllm_session(cfg: StarConfig, n: int, model_path: str, fingerprint: str, log_dir: Path) -> Session:
    g = cfg.generation
    if dist.world_size() > 1:
        raise ConfigError("engine vllm (in process) cannot run under a multi-process `accelerate launch`: vLLM sets up "
                          "its own torch.distributed; use engine: server (started by rank 0) instead")
    backend = get_backend(ENGINES["vllm"].backend, model_path=model_path, fingerprint=fingerprint, seed=cfg.seed,
                          dtype=g.dtype, options=g.options, destroy_distributed=dist.world_size() == 1)
    return Session(n, "vllm", model_path, fingerprint, backend,
                   _closers=[backend.release] if isinstance(backend, Releases) else [])


def _server_identity(g: GenerationOptions) -> dict[str, Any]:
    return {"server_kind": g.server.server_kind, "command": g.server.command, "env": g.server.env}


def _server_session(cfg: StarConfig, n: int, model_path: str, fingerprint: str, log_dir: Path) -> Session:
    g = cfg.generation
    server = ServerProcess(g.server, model_path, fingerprint, log_dir / f"server-M{n}.log")
    served = server.start()
    backend = get_backend(ENGINES["server"].backend, model=g.server.model_name, base_url=server.base_url,
                          server_kind=g.server.server_kind, concurrency=g.server.concurrency, api_key="EMPTY",
                          api="completions", allow_empty=True)
    return Session(n, "server", model_path, fingerprint, backend, served=served, _closers=[server.stop])


@dataclass(frozen=True)
class Engine:
    """How the STaR loop runs a model on a checkpoint: ``backend``, its name in
    :data:`~thoughtsource.backends.BACKENDS`; ``identity``, what else keys its completions; ``open``, its session;
    ``shards``: each rank generates its share (else rank 0 generates for all)."""

    backend: str
    identity: Callable[[GenerationOptions], dict[str, Any]]
    open: Callable[[StarConfig, int, str, str, Path], Session]
    shards: bool = False


#: ``generation.engine`` → how it runs; each engine is one of :data:`~thoughtsource.backends.BACKENDS`
ENGINES: dict[str, Engine] = {
    "transformers": Engine("transformers", _transformers_identity, _transformers_session, shards=True),
    "vllm": Engine("vllm", _vllm_identity, _vllm_session),
    "server": Engine("openai", _server_identity, _server_session),  # a server started per checkpoint
}
