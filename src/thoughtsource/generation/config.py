"""What to generate and with which model: :class:`GenerateConfig`, and the backend it names (:func:`make_backend`).

The config also accepts the published ThoughtSource library's Figure-3 dict, mapped onto ours by
:func:`~thoughtsource.generation.published.published_to_ours`.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from ..backends import backend_class
from ..backends.base import Backend
from ..embedded import EMBEDDED_NAME, is_embedded
from ..errors import ConfigError, validation_problems
from ..prompts import AUTO
from ..prompts.templates import DEFAULT_ANSWER, DEFAULT_COT, Templates
from .published import MODEL_KEYS, published_to_ours

log = logging.getLogger(__name__)


class GenerateConfig(BaseModel):
    """What to generate and with which model.  Accepts the paper's Figure-3 dict as well."""

    model_config = ConfigDict(extra="forbid")

    instruction_keys: list[str | None] = Field(default=[None], description="Instruction fragment ids ('none' or None: no instruction).")
    cot_trigger_keys: list[str] = Field(default=["kojima-01"], description="CoT trigger fragment ids, e.g. kojima-01 ('none': no trigger).")
    answer_extraction_keys: list[str] = Field(
        default=[AUTO], description="Answer-extraction fragment ids; 'auto' picks the one matching each sample's type."
    )
    author: str = Field(default="thoughtsource", description="Stored as the author of each CoT.")
    backend: str = Field(default="transformers", description="Backend: openai (any OpenAI-compatible server) or transformers (thoughtsource.backends.BACKENDS).")
    api_service: str | None = Field(default=None, description="Stored as api_service; default: the backend name.")
    model: str = Field(default="embedded", description="Model name (server) or path/'embedded' (transformers; SmolLM2).")
    base_urls: list[str] = Field(default_factory=list, description="Server URLs of the openai backend; several spread the load.")
    chat: bool = Field(default=False, description="Send chat messages (one user message) instead of a plain prompt.")
    temperature: float = Field(default=0.0, ge=0, description="Sampling temperature (0: greedy).")
    top_p: float = Field(default=1.0, gt=0, le=1)
    max_tokens: int = Field(default=256, gt=0, description="Token limit of a CoT.")
    answer_max_tokens: int = Field(default=32, gt=0, description="Token limit of an extracted answer (greedy).")
    stop: list[str] = Field(default_factory=list, description="Stop sequences of the CoT step.")
    # the published library's keys (see .published.published_to_ours and prompts/templates.py)
    idx_range: tuple[int, int] | None = Field(default=None, description="Only samples whose index in their split is in [a, b).")
    template_cot_generation: str | None = Field(default=None, description="Published stage-1 template ({instruction}, {question}, ...).")
    template_answer_extraction: str | None = Field(default=None, description="Published stage-2 template (adds {cot}, {answer_extraction}).")
    multiple_choice_answer_format: Literal["Letters", "Numbers"] | None = Field(
        default="Letters", description="How choices are listed in published templates: A) ..., 1) ..., or bare.")
    n: int = Field(default=1, ge=1, description="CoTs per prompt (self-consistency); needs temperature > 0 when > 1.")
    seed: int = Field(default=0, description="Sampling seed; sample i of a prompt uses a seed derived from it and i.")
    few_shot: int = Field(default=0, ge=0, description="Exemplars with gold CoTs (from few_shot_split) before the question (0: zero-shot).")
    few_shot_split: str = Field(default="train", description="Split of the same dataset the exemplars come from.")
    few_shot_seed: int = Field(default=0, description="Seed of the exemplar draw.")
    concurrency: int = Field(
        default=128, ge=1,
        description="Backend calls in flight at most (128: the best measured throughput, docs/benchmarks.md).",
    )
    batch_size: int = Field(
        default=1, ge=1,
        description="Requests per backend call; 1 stores each completion the moment it is done (backends batch concurrent calls).",
    )
    fragments_files: list[Path] = Field(default_factory=list, description="User fragment files added to the bundled ones.")
    backend_options: dict[str, Any] = Field(default_factory=dict, description="Extra options passed to the backend.")
    db: Path | None = Field(default=None, description="Completion store (default: $THOUGHTSOURCE_HOME/completions.sqlite).")
    allow_empty: bool = Field(
        default=False, description="Store empty completions; by default they are errors (retried by the backend, asked again on a re-run).",
    )

    @model_validator(mode="before")
    @classmethod
    def _paper_keys(cls, data: Any) -> Any:
        return published_to_ours(data, log) if isinstance(data, dict) else data

    @model_validator(mode="after")
    def _check(self) -> GenerateConfig:
        if self.n > 1 and self.temperature == 0:
            raise ValueError("n > 1 needs temperature > 0 (greedy decoding gives n identical CoTs)")
        for name in ("instruction_keys", "cot_trigger_keys", "answer_extraction_keys"):
            if not getattr(self, name):
                raise ValueError(f"{name} is empty")
        templates = self.templates()
        if templates is not None:
            problems = templates.problems()
            if problems:
                raise ValueError("; ".join(problems))
            if self.few_shot:
                raise ValueError("few_shot cannot be combined with published templates (they have no place for exemplars)")
        if self.idx_range is not None and not 0 <= self.idx_range[0] < self.idx_range[1]:
            raise ValueError(f"idx_range must be (a, b) with 0 <= a < b, got {self.idx_range}")
        return self

    def templates(self) -> Templates | None:
        """The published templates when the config sets any of their keys, else None (our prompt builder)."""
        fields = self.model_fields_set & {"template_cot_generation", "template_answer_extraction", "multiple_choice_answer_format"}
        if not fields:
            return None
        return Templates(self.template_cot_generation or DEFAULT_COT, self.template_answer_extraction or DEFAULT_ANSWER,
                         self.multiple_choice_answer_format)

    @classmethod
    def parse(cls, config: GenerateConfig | dict[str, Any] | None = None, /, **overrides: Any) -> GenerateConfig:
        """A config from a model, a dict (ours or the paper's) or nothing, with overrides on top.

        Raises :class:`ConfigError` listing every problem at once.
        """
        base: dict[str, Any]
        if config is None:
            base = {}
        elif isinstance(config, GenerateConfig):
            base = config.model_dump(exclude_unset=True)
        elif isinstance(config, dict):
            base = dict(config)
        else:
            raise ConfigError(f"a generate config is a GenerateConfig or a dict, got {type(config).__name__}")
        if overrides.keys() & MODEL_KEYS:  # the model of the overrides wins, by either of its names
            for key in MODEL_KEYS:
                base.pop(key, None)
        try:
            return cls.model_validate({**base, **overrides})
        except ValidationError as e:
            raise ConfigError("invalid generate config", problems=validation_problems(e, root="config")) from None

    def model_info(self, sample_index: int, name: str | None = None) -> dict[str, Any]:
        """What is stored as a CoT's ``model``: the name and the generation parameters."""
        name = name or self.model
        info: dict[str, Any] = {"name": name, "temperature": self.temperature, "max_tokens": self.max_tokens}
        if is_embedded(name):
            if self.backend == "openai":  # a server was asked for this name (as its store keys say): kept, the weights beside it
                info["weights"] = EMBEDDED_NAME
            else:  # loaded here: the file says which model wrote the CoT, not our alias for it
                info["name"] = EMBEDDED_NAME
        if self.top_p != 1.0:
            info["top_p"] = self.top_p
        if self.n > 1 or self.temperature > 0:
            info.update(seed=self.seed, n=self.n, sample_index=sample_index)
        if self.few_shot:
            info.update(few_shot=self.few_shot, few_shot_split=self.few_shot_split, few_shot_seed=self.few_shot_seed)
        return info



def make_backend(cfg: GenerateConfig) -> Backend:
    """The backend a config names, with the options its class takes from the config (``options_from``: the model,
    and for a server its URLs and concurrency) and ``backend_options`` on top."""
    cls = backend_class(cfg.backend)
    options = {**cls.options_from(cfg), **cfg.backend_options}
    try:
        return cls(**options)
    except ValidationError as e:
        raise ConfigError(f"invalid options for backend '{cfg.backend}'", problems=validation_problems(e, root="")) from None

