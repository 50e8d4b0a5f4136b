"""The OpenAI API as ``serve-model`` speaks it: request bodies, their checks, and the pieces of an answer.

Parsing only: nothing here touches a model (:mod:`.server_routes` does).  A request this server cannot honour is an
:class:`ApiError`, answered in OpenAI's error shape.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from .base import Completion

log = logging.getLogger(__name__)


#: parameters OpenAI clients may send that this server does not implement: refused (400) unless they carry the
#: value that means "not used"
UNSUPPORTED: dict[str, tuple[Any, ...]] = {
    "tools": (None, []),
    "tool_choice": (None, "none"),
    "functions": (None, []),
    "function_call": (None, "none"),
    "response_format": (None, {"type": "text"}),
    "best_of": (None, 1),
    "suffix": (None, ""),
    "logit_bias": (None, {}),
    "presence_penalty": (None, 0, 0.0),
    "frequency_penalty": (None, 0, 0.0),
    "audio": (None,),
    "modalities": (None, ["text"]),
    "prediction": (None,),
}


class ApiError(Exception):
    """An error answered in OpenAI's shape."""

    def __init__(self, status: int, message: str, param: str | None = None, code: str | None = None) -> None:
        super().__init__(message)
        self.status, self.message, self.param, self.code = status, message, param, code


def lone_surrogate(value: Any, path: str = "") -> str | None:
    """The path (``messages.0.content``) of the first text in ``value`` (keys included) with a lone UTF-16 surrogate, which
    JSON's ``\\ud800`` escapes can carry but no Unicode text holds (a tokenizer, or encoding the answer, fails on it)."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return path or "body"
        return None
    if isinstance(value, dict):
        items: Any = value.items()
    elif isinstance(value, list):
        items = enumerate(value)
    else:
        return None
    for key, item in items:
        where = f"{path}.{key}" if path else str(key)
        if isinstance(key, str) and lone_surrogate(key) is not None:
            return path or "body"
        if (found := lone_surrogate(item, where)) is not None:
            return found
    return None


class Body(BaseModel):
    """A request body: text that is not Unicode is refused before anything reads it; ``null`` is a field's default (as
    vLLM takes it: clients send unset options as null)."""

    @model_validator(mode="before")
    @classmethod
    def _unicode_and_nulls(cls, data: Any) -> Any:
        if (where := lone_surrogate(data)) is not None:  # ApiError is no ValueError: pydantic lets it through to its handler
            param = where.split(".")[0] if where != "body" else None
            raise ApiError(400, f"{where}: a lone surrogate (such as \\ud800) is not valid Unicode text", param, "invalid_value")
        if isinstance(data, dict):
            return {k: v for k, v in data.items() if not (v is None and k in cls.model_fields)}
        return data


#: fields OpenAI clients send that change no completion (bookkeeping): accepted and ignored; any other field that is not
#: declared is refused (400 naming it), unless it carries its UNSUPPORTED value that means "not used"
BOOKKEEPING = frozenset({"user", "metadata", "store", "service_tier", "prompt_cache_key", "safety_identifier"})
#: below this a temperature is greedy decoding, as vLLM takes it (dividing by it would overflow the logits)
MIN_TEMPERATURE = 1e-5


class CommonBody(Body):
    # undeclared fields are kept, to refuse them by name (unsupported())
    model_config = ConfigDict(extra="allow")

    model: str
    max_tokens: int | None = Field(default=None, ge=0)
    max_completion_tokens: int | None = Field(default=None, ge=0)
    temperature: float = Field(default=1.0, ge=0, le=2)  # the OpenAI default
    top_p: float = Field(default=1.0, gt=0, le=1)
    stop: str | list[str] | None = None
    seed: int | None = Field(default=None, ge=-(2**63), le=2**63 - 1)
    n: int = Field(default=1, ge=1, le=128)
    stream: bool = False
    stream_options: dict[str, Any] | None = None
    # vLLM's sampling parameters (its defaults mean "not used")
    top_k: int = Field(default=0, ge=-1, description="-1 or 0: every token")
    min_p: float = Field(default=0.0, ge=0, le=1)
    repetition_penalty: float = Field(default=1.0, gt=0, le=10)
    min_tokens: int = Field(default=0, ge=0)
    ignore_eos: bool = False
    prompt_logprobs: int | None = Field(default=None, ge=0, le=20)

    def max_new(self, default_max_tokens: int) -> int:
        for value in (self.max_completion_tokens, self.max_tokens):
            if value is not None:
                return value
        return default_max_tokens

    def base_request(self, default_max_tokens: int) -> dict[str, Any]:
        stop = [self.stop] if isinstance(self.stop, str) else list(self.stop or [])
        if "" in stop:  # vLLM refuses it; taken as a stop string, every text would end before its first character
            raise ApiError(400, "stop: must not contain an empty string", "stop", "invalid_value")
        max_new = self.max_new(default_max_tokens)
        if self.min_tokens > max_new:
            raise ApiError(400, f"min_tokens: {self.min_tokens} is more than max_tokens ({max_new})", "min_tokens", "invalid_value")
        return {
            "max_tokens": max(1, max_new),  # 0 (echo only) generates one token, dropped
            "temperature": self.temperature if self.temperature >= MIN_TEMPERATURE else 0.0,
            "top_p": self.top_p,
            "stop": tuple(stop),
            "seed": self.seed,
            "top_k": max(0, self.top_k),
            "min_p": self.min_p,
            "repetition_penalty": self.repetition_penalty,
            "min_tokens": self.min_tokens,
            "ignore_eos": self.ignore_eos,
        }

    def unsupported(self) -> str | None:
        for name, value in (self.model_extra or {}).items():
            if name not in BOOKKEEPING and value not in UNSUPPORTED.get(name, ()):
                return name
        return None


class ChatBody(CommonBody):
    messages: list[dict[str, Any]] = Field(min_length=1)
    logprobs: bool = False
    top_logprobs: int | None = Field(default=None, ge=0, le=20)
    add_generation_prompt: bool = True  # vLLM's chat-template switches, with its defaults
    continue_final_message: bool = False


class CompletionBody(CommonBody):
    prompt: str | list[Any]  # a text, texts, token ids or token-id lists: checked by prompts_of, with one clear message
    echo: bool = False
    logprobs: int | None = Field(default=None, ge=0, le=20)


class TokenizeBody(Body):
    prompt: str
    add_special_tokens: bool = True


class DetokenizeBody(Body):
    tokens: list[int]


def error_type(status: int) -> str:
    return {401: "authentication_error", 403: "permission_error", 404: "invalid_request_error",
            429: "rate_limit_error"}.get(status, "server_error" if status >= 500 else "invalid_request_error")


def text_content(content: Any, where: str) -> str:
    """OpenAI message content: a string, a list of parts or null; only text parts are read (others: a 400, never
    dropped silently)."""
    if isinstance(content, str):
        return content
    if content is None:
        return ""
    if not isinstance(content, list):
        raise ApiError(400, f"{where}.content: must be a string or a list of content parts", "messages", "invalid_value")
    texts = []
    for j, part in enumerate(content):
        kind = part.get("type") if isinstance(part, dict) else None
        if kind != "text":
            what = f"{json.dumps(kind)} parts are" if isinstance(kind, str) else "a part without a type is"
            raise ApiError(400, f"{where}.content[{j}]: {what} not supported; this server's models read text parts only",
                           "messages", "unsupported_content")
        if not isinstance(part.get("text"), str):
            raise ApiError(400, f"{where}.content[{j}].text: must be a string", "messages", "invalid_value")
        texts.append(part["text"])
    return "".join(texts)


def chat_messages(body: ChatBody) -> tuple[dict[str, str], ...]:
    """The chat's messages as role and text; a message this server cannot read (tool calls, non-text parts, no role) is
    a 400 naming it, and a final message to continue must be the assistant's."""
    out = []
    for i, m in enumerate(body.messages):
        where = f"messages[{i}]"
        role = m.get("role")
        if not isinstance(role, str) or not role:
            raise ApiError(400, f"{where}.role: must be a non-empty string", "messages", "invalid_value")
        for name in ("tool_calls", "function_call", "audio"):
            if m.get(name):
                raise ApiError(400, f"{where}.{name}: not supported by this server", "messages", "unsupported_parameter")
        out.append({"role": role, "content": text_content(m.get("content"), where)})
    if body.continue_final_message and body.add_generation_prompt:
        raise ApiError(400, "continue_final_message: cannot be true with add_generation_prompt (set it to false)",
                       "continue_final_message", "invalid_value")
    if body.continue_final_message and out[-1]["role"] != "assistant":
        raise ApiError(400, f"continue_final_message: the final message is the {out[-1]['role']}'s, not the assistant's",
                       "continue_final_message", "invalid_value")
    return tuple(out)


def usage(completions: list[Completion], n: int) -> dict[str, int]:
    """Usage of one response; the n samples of a prompt count its prompt tokens once."""
    prompt = sum(c.prompt_tokens for c in completions[::n])
    done = sum(c.completion_tokens for c in completions)
    return {"prompt_tokens": prompt, "completion_tokens": done, "total_tokens": prompt + done}


def is_token_id(x: Any) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def check_ids(ids: list[Any], where: str, param: str, vocab: int | None) -> tuple[int, ...]:
    """``ids`` as token ids of the model: integers from 0 to vocab - 1 (a 400 naming the first that is not)."""
    for j, t in enumerate(ids):
        if not is_token_id(t):
            raise ApiError(400, f"{where}[{j}]: {json.dumps(t)} is not a token id (an integer)", param, "invalid_value")
        if t < 0 or (vocab is not None and t >= vocab):
            size = f"this model's vocabulary has {vocab} tokens (ids 0 to {vocab - 1})" if vocab else "token ids are >= 0"
            raise ApiError(400, f"{where}[{j}]: token id {t} is out of vocabulary; {size}", param, "invalid_value")
    return tuple(ids)


def prompts_of(body: CompletionBody, vocab: int | None) -> list[str | tuple[int, ...]]:
    """The prompts of a completions request: texts, or token-id tuples (each id in the model's vocabulary)."""
    p = body.prompt
    if not p:  # an empty text has no token to start from
        raise ApiError(400, "prompt: must not be empty", "prompt", "invalid_value")
    if isinstance(p, str):
        return [p]
    if all(isinstance(x, str) for x in p):
        if (k := p.index("") if "" in p else None) is not None:
            raise ApiError(400, f"prompt[{k}]: must not be empty", "prompt", "invalid_value")
        return list(p)
    if all(is_token_id(x) for x in p):
        return [check_ids(p, "prompt", "prompt", vocab)]
    if all(isinstance(x, list) for x in p):
        if any(not x for x in p):
            raise ApiError(400, "prompt: a token-id prompt must not be empty", "prompt", "invalid_value")
        return [check_ids(x, f"prompt[{k}]", "prompt", vocab) for k, x in enumerate(p)]
    raise ApiError(400, "prompt: must be a string, a list of strings, a list of token ids or a list of token-id lists",
                   "prompt", "invalid_value")


class TextStream:
    """A streamed row's text, piece by piece as its tokens come: never past a stop string, never inside an unfinished
    character, and without the last characters that may be the start of a stop string (sent once they are not)."""

    def __init__(self, decode: Callable[[list[int]], str], stop: tuple[str, ...]) -> None:
        self.decode, self.stop = decode, stop
        self.hold = max((len(s) for s in stop if s), default=1) - 1
        self.ids: list[int] = []
        self.sent = ""
        self.stopped = False

    def add(self, token: int) -> str:
        """The text that ``token`` makes safe to send ("" for none)."""
        if self.stopped:
            return ""
        self.ids.append(token)
        text = self.decode(self.ids)
        if text.endswith("\ufffd"):  # inside a multi-byte character
            return ""
        hits = [text.index(s) for s in self.stop if s and s in text]
        if hits:
            self.stopped, end = True, min(hits)
        else:
            end = len(text) - self.hold
        if end <= len(self.sent) or not text.startswith(self.sent):
            return ""
        piece, self.sent = text[len(self.sent):end], text[:end]
        return piece

    def rest(self, final: str) -> str:
        """What the completion's final text adds to what was sent."""
        if not final.startswith(self.sent):  # cannot happen with the backends' decoding; the sent text stands
            log.warning("streamed text %r is not a prefix of the completion %r", self.sent, final)
            return ""
        return final[len(self.sent):]


def sse(obj: Any) -> str:
    return f"data: {json.dumps(obj)}\n\n"
