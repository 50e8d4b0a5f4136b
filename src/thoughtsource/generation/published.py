"""The published ThoughtSource library's generate config (``cot.config.Config``): its keys and its
``api_service`` values, mapped onto :class:`~thoughtsource.generation.config.GenerateConfig`'s.

The published library takes a dict of these keys; every one of them is accepted by ``GenerateConfig``
and mapped here onto ours (:func:`published_to_ours`, called by its validator).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..prompts import load_fragments

log = logging.getLogger(__name__)

#: Keys of the published config that do not apply here: accepted, ignored, noted in the log.
IGNORED_PAPER_KEYS = {
    "api_time_interval": "requests are paced by the backend's concurrency and rate limits instead",
    "verbose": "progress is shown with a progress bar (progress=True) and the log level",
    "warn": "no interactive warning before calling an API (use dry_run=True to see the number of calls)",
    "debug": "the published generator never read it; api_service 'mock_api' is the way to run without a model",
}

#: The published default config (``cot.config.Config()``), as a dict.
PUBLISHED_DEFAULTS: dict[str, Any] = {
    "idx_range": "all",
    "multiple_choice_answer_format": "Letters",
    "instruction_keys": None,
    "cot_trigger_keys": ["kojima-01"],
    "answer_extraction_keys": ["kojima-01"],
    "template_cot_generation": "{instruction}\n\n{question}\n{answer_choices}\n\n{cot_trigger}",
    "template_answer_extraction": "{instruction}\n\n{question}\n{answer_choices}\n\n{cot_trigger}{cot}\n{answer_extraction}",
    "author": "",
    "api_service": "huggingface_hub",
    "engine": "google/flan-t5-xl",
    "temperature": 0.0,
    "max_tokens": 128,
    "api_time_interval": 1.0,
    "debug": True,
    "verbose": True,
    "warn": True,
}

#: the model's keys: ours, then the published config's (``engine``), mapped onto ours by :func:`published_to_ours`
MODEL_KEYS = ("model", "engine")

HF_ROUTER = "https://router.huggingface.co/v1"  # Hugging Face's OpenAI-compatible inference endpoint
COHERE_COMPAT = "https://api.cohere.ai/compatibility/v1"  # Cohere's OpenAI-compatible API
HF_TOKEN_ENV = "HUGGINGFACEHUB_API_TOKEN"  # the variable the published library (LangChain) read
COHERE_KEY_ENV = "COHERE_API_KEY"


@dataclass(frozen=True)
class Service:
    """How a published ``api_service`` runs here: one of our backends, and what it needs set."""

    backend: str
    chat: bool | None = None  # None: the config's own ``chat``
    base_url: str | None = None  # None: the config's ``base_urls`` or the backend's default
    api_key_env: str | None = None
    server_kind: str | None = None
    note: str = ""


#: ``api_service`` → how it runs here (``huggingface_hub`` and ``huggingface_endpoint`` depend on the engine:
#: see :func:`service_for`).
API_SERVICES: dict[str, Service] = {
    "openai": Service("openai"),
    "openai_chat": Service("openai", chat=True),
    "transformers": Service("transformers"),
    "local": Service("transformers"),
    "huggingface_hub": Service("openai", chat=True, base_url=HF_ROUTER, api_key_env=HF_TOKEN_ENV, server_kind="huggingface",
                               note="a local transformers model when the engine is a decoder-only model on disk, else Hugging Face's inference router"),
    "huggingface_endpoint": Service("openai", api_key_env=HF_TOKEN_ENV, server_kind="huggingface-endpoint",
                                    note="the engine is the endpoint's URL (text-generation-inference, OpenAI-compatible /v1)"),
    "cohere": Service("openai", chat=True, base_url=COHERE_COMPAT, api_key_env=COHERE_KEY_ENV, server_kind="cohere"),
    "mock_api": Service("mock", note="a deterministic fake model: no calls"),
}


def _local_config(engine: str) -> Path | None:
    """The config.json of ``engine`` when it is a model folder on disk or a repo id in the local HF cache."""
    if not engine:
        return None
    folder = Path(engine).expanduser()
    if folder.is_dir():
        return folder / "config.json" if (folder / "config.json").is_file() else None
    if engine.count("/") != 1 or "://" in engine:
        return None
    try:
        from huggingface_hub import try_to_load_from_cache
    except ImportError:
        return None
    try:
        found = try_to_load_from_cache(engine, "config.json")
    except Exception:  # an invalid repo id
        return None
    return Path(found) if isinstance(found, str) else None


def local_model_available(engine: str) -> bool:
    """Whether ``engine`` can run on the local transformers backend: a decoder-only model (the backend has no
    encoder-decoder generation, so flan-t5 goes to the hosted endpoint) on disk or in the local HF cache."""
    import json

    path = _local_config(engine)
    if path is None:
        return False
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    if config.get("is_encoder_decoder"):
        log.info("api_service huggingface_hub: %s is an encoder-decoder model; the local backend cannot run it", engine)
        return False
    return True


def service_for(api_service: str, engine: str) -> Service:
    """The :class:`Service` an ``api_service`` value maps to for this engine; ValueError for an unknown one."""
    if api_service not in API_SERVICES:
        raise ValueError(
            f"api_service {api_service!r} has no backend here; use one of {', '.join(API_SERVICES)} or set 'backend'"
        )
    service = API_SERVICES[api_service]
    if api_service == "huggingface_hub" and local_model_available(engine):
        return Service("transformers", note=f"{engine} is on disk: run locally")
    if api_service == "huggingface_endpoint":
        if not engine.startswith(("http://", "https://")):
            raise ValueError(f"api_service 'huggingface_endpoint' takes the endpoint's URL as engine, got {engine!r}")
        return Service("openai", base_url=engine.rstrip("/") + ("" if engine.rstrip("/").endswith("/v1") else "/v1"),
                       api_key_env=HF_TOKEN_ENV, server_kind="huggingface-endpoint")
    return service


def _expand_keys(value: Any, kind: str, fragments_files: Any, *, none_as: str | None) -> Any:
    """The published "all" (None first, then every fragment id of the kind) and None entries, in our terms."""
    if value == "all":
        value = [None, *load_fragments(list(fragments_files or [])).of_kind(kind)]
    if isinstance(value, list):
        value = [none_as if k in (None, "none", "None") else k for k in value]
    return value


def published_to_ours(data: dict[str, Any], logger: logging.Logger = log) -> dict[str, Any]:
    """A generate-config dict with the published library's keys and values mapped onto ``GenerateConfig``'s.

    ``engine`` is the model (given with ``model``, it is refused); ``api_service`` picks the backend (:func:`service_for`) unless ``backend`` is set
    and is kept as the stored ``api_service``; ``idx_range`` "all" means every sample; "all" and None in the
    key lists mean what they meant there; the templates and ``multiple_choice_answer_format`` select the
    published prompt rendering (:mod:`thoughtsource.prompts.templates`).  Ignored keys are logged.
    """
    data = dict(data)
    for key, why in IGNORED_PAPER_KEYS.items():
        if key in data:
            logger.info("generate config: '%s' is accepted and ignored (%s)", key, why)
            data.pop(key)
    if data.get("idx_range") == "all":
        data.pop("idx_range")
    if "instruction_keys" in data and data["instruction_keys"] is None:
        data["instruction_keys"] = [None]
    files = data.get("fragments_files")
    data["instruction_keys"] = _expand_keys(data.get("instruction_keys", [None]), "instructions", files, none_as=None)
    if "cot_trigger_keys" in data:
        data["cot_trigger_keys"] = _expand_keys(data["cot_trigger_keys"], "cot_triggers", files, none_as="none")
    if "answer_extraction_keys" in data:
        keys = _expand_keys(data["answer_extraction_keys"], "answer_extractions", files, none_as=None)
        data["answer_extraction_keys"] = [k for k in keys if k is not None] if isinstance(keys, list) else keys
    service = data.get("api_service")
    if service is not None and "backend" not in data:
        engine = str(data.get("engine", data.get("model", "")))
        chosen = service_for(service, engine)
        data["backend"] = chosen.backend
        if chosen.chat is not None:
            data.setdefault("chat", chosen.chat)
        if chosen.base_url and not data.get("base_urls"):
            data["base_urls"] = [chosen.base_url]
        options = dict(data.get("backend_options") or {})
        if chosen.api_key_env:
            options.setdefault("api_key_env", chosen.api_key_env)
        if chosen.server_kind:
            options.setdefault("server_kind", chosen.server_kind)
        if service == "huggingface_endpoint":
            data.pop("engine", None)
            data.setdefault("model", "tgi")  # text-generation-inference serves one model under this name
        if options:
            data["backend_options"] = options
    if "engine" in data and "model" not in data:  # the published name of the model (both given: an unknown key 'engine')
        data["model"] = data.pop("engine")
    return data
