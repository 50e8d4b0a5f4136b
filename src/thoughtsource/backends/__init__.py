"""Registry of model backends: ``BACKENDS = {name: "module:Class"}``, imported only when chosen.

It is the one registry of model runners: ``generate`` (``--backend``), ``serve-model`` and STaR's engines
(:data:`thoughtsource.star.engines.ENGINES`) all build their backend from it.
"""

from __future__ import annotations

import importlib
from typing import Any, cast

from ..errors import UnknownNameError
from .base import Backend, BackendClass, BackendSettings, Completion, Request

BACKENDS: dict[str, str] = {
    "openai": "thoughtsource.backends.openai_compat:OpenAIBackend",
    "transformers": "thoughtsource.backends.transformers_local:TransformersBackend",
    "mock": "thoughtsource.backends.mock:MockBackend",
    "vllm": "thoughtsource.backends.vllm:VLLMBackend",
}

__all__ = ["BACKENDS", "Backend", "BackendSettings", "Completion", "Request", "backend_class", "get_backend"]


def backend_class(name: str) -> BackendClass:
    """The class registered as ``name`` (its module imported now)."""
    if name not in BACKENDS:
        raise UnknownNameError("backend", name, BACKENDS)
    module, _, cls = BACKENDS[name].partition(":")
    return cast(BackendClass, getattr(importlib.import_module(module), cls))


def get_backend(name: str, **options: Any) -> Backend:
    """The backend registered as ``name``, built with ``options``."""
    return backend_class(name)(**options)
