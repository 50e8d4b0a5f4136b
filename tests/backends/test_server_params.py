"""serve-model reads every request field it is sent, or refuses it by name (issue 45, findings 5 and 6).

``null`` is a field's default; ``stop: [""]`` is refused as vLLM refuses it; a final assistant message is continued only
with ``continue_final_message`` (vLLM's switches); a non-text content part is a 400; streamed logprobs come with each
chunk; vLLM's sampling parameters (``top_k``, ``min_p``, ``repetition_penalty``, ``min_tokens``, ``ignore_eos``,
``prompt_logprobs``) act, each checked against what it means (greedy, transformers' own generate, the token counts, the
echo scores), and anything else unimplemented (``guided_choice``, an unknown field) is refused by name.
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

pytestmark = pytest.mark.slow

MODEL = "smollm2"  # the model_server fixture's served name
ASK = [{"role": "user", "content": "What is 2 + 2?"}]


@pytest.fixture(scope="module")
def post(model_server):
    root = model_server.base_url

    def post(path: str, **body: Any) -> httpx.Response:
        return httpx.post(root + path, json={"model": MODEL, **body}, timeout=300)

    return post


def _events(r: httpx.Response) -> list[dict[str, Any]]:
    assert r.status_code == 200, r.text
    lines = [line[6:] for line in r.text.splitlines() if line.startswith("data: ")]
    assert lines[-1] == "[DONE]"
    return [json.loads(line) for line in lines[:-1]]


def _error(r: httpx.Response, param: str | None) -> str:
    assert r.status_code == 400, r.text
    error = r.json()["error"]
    assert error["param"] == param, error
    return error["message"]


def test_null_is_the_default(post):
    nulls = dict.fromkeys(["temperature", "top_p", "n", "stream", "max_tokens", "stop", "seed", "top_k", "min_p",
                           "repetition_penalty", "min_tokens", "ignore_eos", "prompt_logprobs"])
    chat = post("/chat/completions", messages=ASK, **nulls, logprobs=None, top_logprobs=None, add_generation_prompt=None,
                continue_final_message=None, max_completion_tokens=3)
    assert chat.status_code == 200, chat.text
    assert len(chat.json()["choices"]) == 1 and chat.json()["usage"]["completion_tokens"] <= 3
    text = post("/completions", prompt="Count: 1, 2, 3,", **{**nulls, "max_tokens": 3}, logprobs=None, echo=None)
    assert text.status_code == 200, text.text
    assert text.json()["choices"][0]["logprobs"] is None and not text.json()["choices"][0]["text"].startswith("Count")


def test_an_empty_stop_string_is_refused(post):
    for stop in ("", [""], [" 6", ""]):
        assert "empty string" in _error(post("/completions", prompt="Count: 1, 2, 3,", max_tokens=8, stop=stop), "stop")


def test_a_final_assistant_message_is_continued_only_when_asked(post, embedded_model):
    _, tok = embedded_model
    messages = [*ASK, {"role": "assistant", "content": "The answer is"}]

    def prompt_tokens(**kw: Any) -> int:
        return len(tok(tok.apply_chat_template(messages, tokenize=False, **kw), add_special_tokens=False)["input_ids"])

    plain = post("/chat/completions", messages=messages, max_tokens=4, temperature=0).json()
    assert plain["usage"]["prompt_tokens"] == prompt_tokens(add_generation_prompt=True)  # a new assistant turn
    cont = post("/chat/completions", messages=messages, max_tokens=4, temperature=0, continue_final_message=True,
                add_generation_prompt=False).json()
    assert cont["usage"]["prompt_tokens"] == prompt_tokens(continue_final_message=True)
    closed = post("/chat/completions", messages=messages, max_tokens=4, temperature=0, add_generation_prompt=False).json()
    assert closed["usage"]["prompt_tokens"] == prompt_tokens(add_generation_prompt=False)
    assert len({plain["usage"]["prompt_tokens"], cont["usage"]["prompt_tokens"], closed["usage"]["prompt_tokens"]}) == 3
    both = post("/chat/completions", messages=messages, continue_final_message=True)  # add_generation_prompt: true
    _error(both, "continue_final_message")
    _error(post("/chat/completions", messages=ASK, continue_final_message=True, add_generation_prompt=False),
           "continue_final_message")


def test_parts_that_are_not_text_are_refused(post):
    image = {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}}
    content = [{"type": "text", "text": "What does the image show?"}, image]
    assert "image_url" in _error(post("/chat/completions", messages=[{"role": "user", "content": content}]), "messages")
    text_only = post("/chat/completions", max_tokens=2, temperature=0,
                     messages=[{"role": "user", "content": [{"type": "text", "text": "What is"}, {"type": "text", "text": " 2 + 2?"}]}])
    assert text_only.status_code == 200, text_only.text
    assert text_only.json()["usage"] == post("/chat/completions", messages=ASK, max_tokens=2, temperature=0).json()["usage"]


def test_streamed_logprobs_come_with_each_chunk(post):
    plain = post("/chat/completions", messages=ASK, max_tokens=6, temperature=0, logprobs=True, top_logprobs=2).json()
    events = _events(post("/chat/completions", messages=ASK, max_tokens=6, temperature=0, logprobs=True, top_logprobs=2,
                          stream=True))
    content = [e["choices"][0] for e in events if e["choices"][0]["delta"].get("content")]
    assert len(content) > 2 and all(c["logprobs"] and c["logprobs"]["content"] for c in content)
    assert [x for c in content for x in c["logprobs"]["content"]] == plain["choices"][0]["logprobs"]["content"]
    assert "".join(c["delta"]["content"] for c in content) == plain["choices"][0]["message"]["content"]

    kw: dict[str, Any] = {"prompt": "Count: 1, 2, 3,", "max_tokens": 5, "temperature": 0, "logprobs": 1, "echo": True}
    whole = post("/completions", **kw).json()["choices"][0]
    chunks = [e["choices"][0] for e in _events(post("/completions", **kw, stream=True)) if e["choices"][0]["text"]]
    assert chunks[0]["text"] == "Count: 1, 2, 3," and all(c["logprobs"]["tokens"] for c in chunks)
    assert [t for c in chunks for t in c["logprobs"]["tokens"]] == whole["logprobs"]["tokens"]
    assert [t for c in chunks for t in c["logprobs"]["token_logprobs"]] == whole["logprobs"]["token_logprobs"]
    assert "".join(c["text"] for c in chunks) == whole["text"]


def test_top_k_and_min_p_narrow_sampling_to_the_greedy_token(post):
    greedy = post("/completions", prompt="Once upon a time", max_tokens=12, temperature=0).json()["choices"][0]["text"]
    sampled = {post("/completions", prompt="Once upon a time", max_tokens=12, temperature=1.5, seed=s).json()["choices"][0]["text"]
               for s in range(3)}
    assert greedy not in sampled or len(sampled) > 1  # at this temperature the samples are not the greedy text
    for narrow in ({"top_k": 1}, {"min_p": 1.0}):
        texts = {post("/completions", prompt="Once upon a time", max_tokens=12, temperature=1.5, seed=s, **narrow).json()["choices"][0]["text"]
                 for s in range(3)}
        assert texts == {greedy}, narrow


def test_repetition_penalty_is_transformers_own(post, embedded_model):
    import torch

    model, tok = embedded_model
    prompt = "Count: 1, 2, 3, 4, 5, 1, 2, 3, 4, 5, 1, 2,"
    ids = tok(prompt, return_tensors="pt")["input_ids"]
    with torch.inference_mode():
        out = model.generate(ids, do_sample=False, repetition_penalty=1.8, max_new_tokens=10, pad_token_id=tok.eos_token_id)
    expected = tok.decode(out[0, ids.shape[1]:], skip_special_tokens=True)
    plain = post("/completions", prompt=prompt, max_tokens=10, temperature=0).json()["choices"][0]["text"]
    penalised = post("/completions", prompt=prompt, max_tokens=10, temperature=0, repetition_penalty=1.8).json()["choices"][0]["text"]
    assert penalised == expected and penalised != plain


def test_min_tokens_and_ignore_eos_hold_the_end_back(post):
    short = post("/chat/completions", messages=[{"role": "user", "content": "Say OK."}], max_tokens=40, temperature=0).json()
    n = short["usage"]["completion_tokens"]
    assert short["choices"][0]["finish_reason"] == "stop" and n < 20  # the model ends early by itself
    held = post("/chat/completions", messages=[{"role": "user", "content": "Say OK."}], max_tokens=40, temperature=0,
                min_tokens=n + 8).json()
    assert held["usage"]["completion_tokens"] >= n + 8
    ignored = post("/chat/completions", messages=[{"role": "user", "content": "Say OK."}], max_tokens=30, temperature=0,
                   ignore_eos=True).json()
    assert ignored["usage"]["completion_tokens"] == 30 and ignored["choices"][0]["finish_reason"] == "length"
    assert "more than max_tokens" in _error(post("/completions", prompt="Hi", max_tokens=2, min_tokens=3), "min_tokens")


def test_prompt_logprobs_score_the_prompt(post):
    prompt = "The capital of France is Paris."
    echo = post("/completions", prompt=prompt, max_tokens=0, echo=True, logprobs=0).json()["choices"][0]["logprobs"]
    r = post("/completions", prompt=prompt, max_tokens=1, temperature=0, prompt_logprobs=2).json()
    scored = r["choices"][0]["prompt_logprobs"]
    assert scored[0] is None and len(scored) == len(echo["tokens"])
    for entry, token, lp in zip(scored[1:], echo["tokens"][1:], echo["token_logprobs"][1:], strict=True):
        (mine,) = [v for v in entry.values() if v["decoded_token"] == token]
        assert mine["logprob"] == pytest.approx(lp, abs=1e-4)
        assert 2 <= len(entry) <= 3 and sorted(v["rank"] for v in entry.values() if v["rank"]) == [1, 2]
    chat = post("/chat/completions", messages=ASK, max_tokens=1, prompt_logprobs=0).json()
    assert chat["prompt_logprobs"][0] is None and len(chat["prompt_logprobs"]) == chat["usage"]["prompt_tokens"]
    _error(post("/completions", prompt=prompt, prompt_logprobs=1, stream=True), "prompt_logprobs")


@pytest.mark.parametrize("field", ["guided_choice", "guided_json", "use_beam_search", "stop_token_ids", "logits_processors",
                                   "include_stop_str_in_output", "reasoning_effort", "no_such_field"])
def test_what_is_not_implemented_is_refused_by_name(post, field):
    r = post("/completions", prompt="Hi", max_tokens=1, **{field: ["yes", "no"]})
    assert "not supported" in _error(r, field)


def test_bookkeeping_fields_change_nothing(post):
    r = post("/completions", prompt="Hi", max_tokens=1, temperature=0, user="alice", metadata={"run": "1"}, store=False)
    assert r.status_code == 200, r.text


def test_a_non_streamed_request_whose_client_left_stops_decoding(model_server):
    """Issue 45, finding 8: a non-streamed request whose client had gone (a timeout) was computed to its end.  Now its
    row stops at its next token once the server sees the client gone (``cancelled`` counts it, and it generated far
    fewer than its 1500 tokens)."""
    backend = model_server.backend
    before = backend.counters.snapshot()
    body = {"model": MODEL, "prompt": "Once upon a time", "max_tokens": 1500, "ignore_eos": True, "temperature": 0}
    with pytest.raises(httpx.ReadTimeout):  # the client gives up long before 1500 tokens
        httpx.post(f"{model_server.base_url}/completions", json=body, timeout=httpx.Timeout(300, read=3))
    after = httpx.post(f"{model_server.base_url}/completions", json={"model": MODEL, "prompt": "Hi", "max_tokens": 1},
                       timeout=300).json()  # answered once the stopped row's batch is done
    now = backend.counters.snapshot()
    assert now["cancelled"] == before["cancelled"] + 1
    stopped_at = now["completion_tokens"] - before["completion_tokens"] - after["usage"]["completion_tokens"]
    assert 0 < stopped_at < 1500
