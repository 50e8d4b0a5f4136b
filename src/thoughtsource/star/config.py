"""StarConfig: everything one STaR run needs, validated at the edge (pydantic, ``extra="forbid"``).

The resolved config is written next to the outputs (``OUT/config.json``); ``--resume`` refuses to
continue a run whose config changed in a way that changes its results.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from ..config import read_yaml_mapping
from ..errors import ConfigError, validation_problems

#: experiment trackers the Trainer reports to (``--report-to``); offline modes: WANDB_MODE=offline, a local MLflow
#: tracking URI (the default ./mlruns), TensorBoard event files under the trainer's logging_dir, trackio locally
ReportTo = Literal["none", "tensorboard", "wandb", "mlflow", "trackio"]


def _no_trackers() -> list[ReportTo]:
    return ["none"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class StepSchedule(_Strict):
    """Training steps of the inner loop per outer iteration.

    The paper: 40 steps at the first iteration, +20% each iteration, after a learning-rate warm-up
    (``growth="multiplicative"``); for arithmetic with rationalization also 300 steps + 20 per
    iteration (``growth="additive"``, ``first=300``, ``increase=20``).  The published code's default
    gave 0 steps; here every iteration trains at least ``first >= 1`` steps (a test checks it).
    """

    first: int = Field(40, ge=1, description="Training steps at iteration 1 (then growing by increase per iteration: +20% by default).")
    growth: Literal["multiplicative", "additive"] = "multiplicative"
    increase: float = Field(0.2, ge=0, description="fraction (multiplicative) or steps (additive) added per iteration")
    max_steps: int | None = Field(None, ge=1, description="cap (the paper capped GSM8K at iteration 30)")
    warmup_steps: int = Field(10, ge=0, description="Linear learning-rate warm-up steps, then constant.")

    def steps(self, iteration: int) -> int:
        """Steps for 1-based ``iteration``; never below 1."""
        if iteration < 1:
            raise ConfigError(f"iterations are numbered from 1, got {iteration}")
        n = iteration - 1
        if self.growth == "multiplicative":
            raw = self.first * (1.0 + self.increase) ** n
        else:
            raw = self.first + self.increase * n
        steps = max(1, math.ceil(raw - 1e-9))
        if self.max_steps is not None:
            steps = min(steps, self.max_steps)
        return steps


class ServerEngine(_Strict):
    """``engine: server``: the loop starts this command for each iteration's checkpoint and stops it afterwards.

    Placeholders: ``{checkpoint}`` (the model folder of M_n), ``{port}``, ``{model_name}``.  The server
    must answer ``GET /v1/models``; if it reports ``fingerprint`` (``thoughtsource serve-model``) or
    ``root`` (vLLM), the loop checks that it serves the checkpoint it was started for.
    """

    command: str = Field("vllm serve {checkpoint} --port {port} --served-model-name {model_name}",
                         description="engine server: the command started per checkpoint, e.g. 'vllm serve {checkpoint} --port {port} "
                                     "--served-model-name {model_name}' (split like a shell line; no shell).")
    model_name: str = Field("star-current", description="the name the server serves the model under")
    host: str = "127.0.0.1"
    port: int | None = Field(None, ge=1, le=65535, description="None: a free port per start")
    startup_timeout_s: float = Field(900.0, gt=0, description="seconds to wait for /v1/models to answer")
    stop_grace_s: float = Field(30.0, ge=0, description="seconds between terminate and kill when stopping")
    server_kind: str = Field("vllm", description="part of the openai backend's identity (vllm, serve-model, ...)")
    env: dict[str, str] = Field(default_factory=dict, description="extra environment variables for the server")
    cuda_visible_devices: str | None = Field(
        None, description="the server's CUDA_VISIBLE_DEVICES (e.g. '0,1'); None: the GPUs of the job (the launcher's "
                          "CUDA_VISIBLE_DEVICES, else all). The launcher's rank variables are never passed on")
    concurrency: int = Field(64, ge=1, description="requests in flight to the server")


#: fields GenerationOptions no longer has (GenerationOptions._removed_fields names what replaced each)
_REMOVED = ("backend", "base_url", "served_model")


class GenerationOptions(_Strict):
    """How rationales are generated: ``engine`` transformers (in process), vllm (in process) or server.

    The removed fields ``backend`` (now ``engine``), ``base_url`` and ``served_model`` (a server the loop did not
    start, which kept serving an old model; now ``engine: server``) are refused with the key that replaces them;
    null, as the ``config.json`` of runs made before wrote them, means not given.
    """

    engine: Literal["transformers", "vllm", "server"] | None = Field(
        None, description="transformers or vllm (in process), or server (server.command, started per checkpoint); None: transformers.")
    batch_size: int = Field(16, ge=1, description="Generation batch size: prompts per engine call; a kill loses at most the batch in flight.")
    max_new_tokens: int | None = Field(None, ge=1, description="Override the task's generation length (None: the task's default).")
    temperature: float = Field(0.0, ge=0)
    server: ServerEngine = Field(default_factory=ServerEngine)
    dtype: Literal["auto", "float32", "bfloat16", "float16"] = "auto"
    prefix_cache: bool = Field(True, description="transformers: compute the shared few-shot prefix once per batch group and reuse its KV cache")
    decoder: Literal["default", "graph"] = Field(
        "default", description="transformers: 'graph' decodes with a static KV cache, each step a CUDA graph on a GPU "
                               "(backends/graph_decode.py; docs/star-gpu.md); 'default' keeps prefix_cache's choice")
    threads: int | None = Field(None, ge=1, description="torch CPU threads for generation (None: leave torch's default); 1 when arms run side by side.")
    store: bool = Field(True, description="keep every completion in OUT/completions.sqlite, so a resumed run asks only for missing ones")
    options: dict[str, Any] = Field(default_factory=dict, description="extra keyword options for the backend (vllm: for vllm.LLM)")
    wait_timeout_s: float = Field(
        3600.0, gt=0, description="a rank waiting for completions another rank makes (engine vllm/server: rank 0) gives up "
                                  "after this many seconds without a new one")

    @model_validator(mode="before")
    @classmethod
    def _removed_fields(cls, data: Any) -> Any:
        if not isinstance(data, dict) or not any(k in data for k in _REMOVED):
            return data
        given = {k: data[k] for k in _REMOVED if data.get(k) is not None}
        if given.get("backend") == "openai" or "base_url" in given or "served_model" in given:
            raise ValueError(
                "backend: openai (base_url, served_model) is no longer supported: a server the loop does not restart keeps "
                "serving an old model. Use engine: server with server.command, e.g. "
                "'vllm serve {checkpoint} --port {port} --served-model-name {model_name}' (started per iteration's checkpoint), "
                "or engine: vllm (in process)")
        if given:
            raise ValueError(f"the key backend was renamed to engine (backend: {given['backend']} -> engine: {given['backend']})")
        return {k: v for k, v in data.items() if k not in _REMOVED}

    @model_validator(mode="after")
    def _engine(self) -> GenerationOptions:
        if self.engine is None:
            self.engine = "transformers"
        if self.decoder != "default":
            if self.engine != "transformers":
                raise ValueError(f"decoder {self.decoder!r} is a decoder of the transformers engine, not of {self.engine!r}")
            if self.options.get("mode", self.decoder) != self.decoder:
                raise ValueError(f"decoder {self.decoder!r} and options.mode {self.options['mode']!r} disagree; give decoder only")
        return self

    @property
    def engine_name(self) -> str:
        return self.engine or "transformers"


class PseudoLabels(_Strict):
    """Appendix H: questions without gold answers get the majority answer of k sampled rationales."""

    mode: Literal["none", "majority"] = Field("none", description="majority: the majority answer of k samples as the target.")
    k: int = Field(5, ge=1, description="Samples per question for pseudo-label majority.")
    temperature: float = Field(0.7, gt=0)


class Sampling(_Strict):
    """k rationales per training problem at temperature > 0 (as ReST-EM does), each request with its own seed.

    Every sample whose answer passes the filter becomes a training record (identical texts once;
    ``max_kept`` caps the records per problem).  ``k = 1`` is the paper's one rationale per problem at
    ``generation.temperature``.  Rationalization stays one hinted sample at ``generation.temperature``
    (greedy by default) per problem with no correct sample; test and dev are always decoded at
    ``generation.temperature``.

    ``accumulate: true`` keeps the k samples across iterations (RFT; ReST-EM): the distinct rationales that pass the
    run's filter are deduplicated (per problem, up to white space) and accumulated, and iteration n trains from the
    base on the union of what iterations 1..n kept (``iter_n/train.jsonl`` is that union, written whole and atomically
    each iteration, so a killed and resumed run loses and double-counts nothing; :mod:`.accumulate`).  ``max_kept``
    then caps the union's records per problem.  Each iteration's metrics report pass@k and valid-pass@k of the k
    samples (a right answer; a right answer that also passes the task's rationale check) and the union's size and
    the records new to it (``accumulated``).  False (the default): each iteration trains on its own kept records,
    as the paper does.
    """

    k: int = Field(1, ge=1, description="Rationales sampled per training problem (at sampling.temperature).")
    temperature: float = Field(1.0, gt=0, description="sampling temperature of the k rationales (k > 1 only)")
    max_kept: int | None = Field(None, ge=1, description="at most this many kept records per problem (None: all distinct)")
    accumulate: bool = Field(False, description="Keep the distinct kept rationales across iterations: iteration n trains "
                                                "from the base on the union of iterations 1..n (RFT, ReST-EM).")


class LoraOptions(_Strict):
    enabled: bool = Field(False, description="Train a LoRA adapter (merged into the checkpoint).")
    r: int = Field(16, ge=1)
    alpha: int = Field(32, ge=1)
    dropout: float = Field(0.0, ge=0, lt=1)
    target_modules: list[str] | str = "all-linear"


class StarConfig(_Strict):
    model: str = Field("embedded", description='"embedded" (SmolLM2-135M-Instruct) or a transformers model folder.')
    task: str = Field("arithmetic", min_length=1, description="arithmetic, gsm8k, commonsense_qa, a registered dataset or a ThoughtSource file.")
    task_options: dict[str, Any] = Field(default_factory=dict, description="task keyword options (digits, n_train, n_test, split names...)")
    iterations: int = Field(3, ge=0, description="Outer-loop iterations; 0: evaluate the base model few-shot only.")
    baseline: Literal["star", "direct", "fewshot", "gold"] = Field(
        "star", description="star; direct: fine-tune on answers without rationales; fewshot: no training; gold: fine-tune on the "
                            "dataset's reference rationales (an upper bound), in the format the model generates")
    rationalization: bool = Field(True, description="Rationalization: the answer as a hint for problems no rationale solved (false: STaR without it).")
    fewshot_k: int = Field(3, ge=0, description="Few-shot exemplars per prompt (arithmetic: per digit count).")
    fewshot_after_training: bool = Field(True, description="keep the few-shot prompt when generating with fine-tuned models (the paper's default)")
    train_with_fewshot: bool = Field(False, description="Put the few-shot prompt into the training examples too (the paper's best CQA setting).")
    filter: Literal["answer", "verified"] = Field(
        "answer", description="answer: keep rationales whose answer is right (the paper); verified: the rationale must also pass the task's check"
    )
    pseudo_labels: PseudoLabels = Field(default_factory=PseudoLabels)
    sampling: Sampling = Field(default_factory=Sampling)
    steps: StepSchedule = Field(default_factory=StepSchedule)
    batch_size: int = Field(8, ge=1, description="Training batch size per device.")
    gradient_accumulation_steps: int = Field(1, ge=1)
    lr: float = Field(1e-5, gt=0, description="Learning rate.")
    lr_scheduler: Literal["constant_with_warmup", "cosine", "linear"] = Field(
        "constant_with_warmup", description="after the warm-up: constant (the paper), or decaying to 0 at the last step")
    weight_decay: float = Field(0.0, ge=0)
    max_seq_len: int = Field(1024, ge=16)
    bf16: bool = Field(False, description="bf16 mixed-precision training: fp32 master weights, bf16 autocast")
    lora: LoraOptions = Field(default_factory=LoraOptions)
    seed: int = Field(0, description="The run's seed.")
    train_seed: int | None = Field(
        None, description="Seed of fine-tuning alone (the Trainer's data order, dropout); None: the run's seed. Another value is "
                          "another training run on the same problems, prompts and generation seeds.")
    generation: GenerationOptions = Field(default_factory=GenerationOptions)
    keep_checkpoints: bool = Field(True, description="False: delete iteration N-1's checkpoint once iteration N is trained")
    checkpoint_every: int = Field(
        100, ge=0, description="Save the trainer state every K optimizer steps, so a killed training resumes there (0: never).")
    report_to: list[ReportTo] = Field(
        default_factory=_no_trackers,
        description="Training trackers: tensorboard, wandb, mlflow, trackio or none (comma-separated); OUT/metrics.jsonl is written "
                    "always.")

    @field_validator("report_to", mode="before")
    @classmethod
    def _report_to(cls, v: Any) -> Any:
        return [x.strip() for x in v.split(",") if x.strip()] if isinstance(v, str) else v

    @property
    def training_seed(self) -> int:
        """The Trainer's seed: ``train_seed``, else the run's ``seed``."""
        return self.seed if self.train_seed is None else self.train_seed

    def report_to_list(self) -> list[str]:
        """The Trainer's ``report_to``: [] for none."""
        return [x for x in self.report_to if x != "none"]

    @model_validator(mode="after")
    def _check(self) -> StarConfig:
        if self.baseline == "direct" and self.pseudo_labels.mode != "none":
            raise ValueError("pseudo-labels need rationales: not with baseline 'direct'")
        if self.baseline == "gold" and self.pseudo_labels.mode != "none":
            raise ValueError("baseline 'gold' trains on the reference rationales of gold answers: not with pseudo-labels")
        for name, on in (("sampling.k > 1", self.sampling.k > 1), ("sampling.accumulate", self.sampling.accumulate)):
            if on and (self.baseline != "star" or self.pseudo_labels.mode != "none"):
                raise ValueError(f"{name} is for the rationales of baseline 'star' without pseudo-labels, not for baseline "
                                 f"{self.baseline!r}" + (" with pseudo-labels" if self.pseudo_labels.mode != "none" else ""))
        return self

    # ------------------------------------------------------------------ io
    @classmethod
    def from_dict(cls, data: dict[str, Any], *, path: str | None = None) -> StarConfig:
        try:
            return cls.model_validate(data)
        except ValidationError as e:
            raise ConfigError("invalid STaR config", path=path, problems=validation_problems(e)) from None

    @classmethod
    def from_file(cls, path: str | Path) -> StarConfig:
        """A YAML run config: a file, or the name of one shipped in the package (``arithmetic_fresh``, see :func:`config_path`)."""
        path = config_path(path)
        return cls.from_dict(read_yaml_mapping(path, "a mapping of options"), path=str(path))

    def result_fields(self) -> dict[str, Any]:
        """The fields that define the run, compared on resume: a change is refused.

        How generation runs (batch size, threads, wait timeout) does not change results; where it runs (the
        generation dtype, resolved per machine, the transformers decoder, and a server's command and environment) changes them but is no
        reason to refuse a resume: those are part of every completion's store key and every step's record, so a
        resume on another dtype or server regenerates what they produced (and what was built on it).
        """
        d = self.model_dump(mode="json")
        for k in ("iterations", "keep_checkpoints", "checkpoint_every", "report_to"):
            d.pop(k)
        if d["train_seed"] is None:  # the default, as runs made before the field compare
            d.pop("train_seed")
        for k in ("batch_size", "threads", "store", "dtype", "wait_timeout_s", "decoder"):
            d["generation"].pop(k)
        server = d["generation"].pop("server")
        if self.generation.engine == "server":
            d["generation"]["server_kind"] = server["server_kind"]
        return d


#: The run configs shipped in the package (``thoughtsource star configs`` lists them).
CONFIGS_DIR = Path(__file__).resolve().parent / "configs"


def config_names() -> list[str]:
    """The names of the shipped run configs (``arithmetic_fresh``, ``gsm8k_gpu``, ...)."""
    return sorted(p.stem for p in CONFIGS_DIR.glob("*.yaml"))


def config_path(value: str | Path) -> Path:
    """``--config``'s file: a YAML file that exists, else a shipped config by name (``arithmetic_fresh`` or
    ``arithmetic_fresh.yaml``); anything else is a :class:`ConfigError` listing the names."""
    path = Path(value)
    if path.is_file():
        return path
    name = path.name.removesuffix(".yaml").removesuffix(".yml")
    shipped = CONFIGS_DIR / f"{name}.yaml"
    if path.parent == Path(".") and shipped.is_file():
        return shipped
    import difflib

    close = difflib.get_close_matches(name, config_names(), n=3)
    hint = f" Did you mean: {', '.join(close)}?" if close else ""
    raise ConfigError(f"no STaR config '{value}': not a file, nor a shipped config.{hint} "
                      f"Shipped: {', '.join(config_names())} (thoughtsource star configs)")
