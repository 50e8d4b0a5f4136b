"""Session fixtures for backend tests: a real model server on the embedded model (``embedded_model``, loaded once per
session, is in tests/conftest.py), gsm8k questions."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from thoughtsource.backends import Request


@pytest.fixture(scope="session")
def model_server(embedded_model: tuple) -> Iterator:
    """A real OpenAI-compatible server (``serve-model``'s app) on the embedded model, on a free localhost port."""
    from thoughtsource.backends.server import run_model_server
    from thoughtsource.backends.transformers_local import TransformersBackend

    backend = TransformersBackend.from_loaded(*embedded_model, name="embedded", batch_size=8)
    with run_model_server(backend, served_model_name="smollm2") as handle:
        yield handle


@pytest.fixture(scope="session")
def gsm8k_questions(shared_data: Path) -> list[str]:
    """The first three questions of the real GSM8K test split."""
    lines = (shared_data / "gsm8k" / "test.jsonl").read_text().splitlines()[:3]
    return [json.loads(line)["question"] for line in lines]


def _cot_request(question: str, max_tokens: int = 24, **kw) -> Request:
    return Request(messages=({"role": "user", "content": f"{question}\nLet's think step by step."},), max_tokens=max_tokens, **kw)


@pytest.fixture(scope="session")
def cot_request():
    """Builds a zero-shot CoT request in chat form (Kojima et al.'s trigger), as the generator sends it."""
    return _cot_request
