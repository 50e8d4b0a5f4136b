"""The ``mock`` backend: a deterministic fake model (the published library's ``api_service="mock_api"``).

Every request gets the same text (by default the published mock's " Test mock chain of thought."), at no
cost and without a model, so that a config, a pipeline or a notebook can be run end to end offline.  With
``echo_choice`` the completion of an answer-extraction prompt is instead a letter picked from a hash of the
prompt (stable across runs and machines), so that evaluation has something to score.
"""

from __future__ import annotations

import hashlib
import re
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from .base import BackendSettings, Completion, Request
from .counters import Counters

_CHOICE_RANGE = re.compile(r"among (?:\(?A\)?) through \(?([B-Z])\)?", re.IGNORECASE)


class MockOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")

    model: str = Field(default="mock", description="Stored as the model name.")
    text: str = Field(default=" Test mock chain of thought.", description="The completion of every request.")
    echo_choice: bool = Field(default=False, description="Answer 'among A through X' prompts with a hash-picked letter.")


class MockBackend:
    name = "mock"

    def __init__(self, **options: Any) -> None:
        self.options = MockOptions(**options)
        self.counters = Counters()

    @classmethod
    def options_from(cls, settings: BackendSettings) -> dict[str, Any]:
        """A generate config gives the model name (stored)."""
        return {"model": settings.model}

    def cache_identity(self) -> dict[str, Any]:
        return {"backend": self.name, **self.options.model_dump()}

    def _text(self, request: Request) -> str:
        prompt = request.prompt or "\n".join(m.get("content", "") for m in request.messages or ())
        m = _CHOICE_RANGE.search(prompt[-200:]) if self.options.echo_choice else None
        if m:
            letters = [chr(c) for c in range(ord("A"), ord(m.group(1).upper()) + 1)]
            digest = hashlib.sha256(f"{prompt}|{request.sample_index}".encode()).digest()
            return f" {letters[digest[0] % len(letters)]}."
        return self.options.text

    async def complete(self, requests: list[Request]) -> list[Completion]:
        self.counters.requests += len(requests)
        return [Completion(text=self._text(r), prompt_tokens=len((r.prompt or "").split()), completion_tokens=5,
                           finish_reason="stop") for r in requests]

    async def aclose(self) -> None:
        return None
