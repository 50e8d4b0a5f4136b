"""The official ``openai`` client against ``serve-model`` on the embedded model: what OpenAI's API reference documents.

Chat and completions, ``n`` with a ``seed``, stop sequences, streaming, logprobs (with ``echo``), token-id prompts,
``/v1/models/{id}`` and the errors of malformed or unsupported requests, each through the client a user would use.
"""

from __future__ import annotations

import json

import httpx
import pytest

openai = pytest.importorskip("openai")
pytestmark = pytest.mark.slow

MODEL = "smollm2"  # the model_server fixture's served name


@pytest.fixture(scope="module")
def client(model_server):
    with openai.OpenAI(base_url=model_server.base_url, api_key="unused", max_retries=0, timeout=300) as c:
        yield c


def test_chat_completion(client):
    r = client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "Say OK."}], max_tokens=64,
                                       temperature=0)
    assert r.object == "chat.completion" and r.model == MODEL and r.id.startswith("chatcmpl-")
    (choice,) = r.choices
    assert choice.index == 0 and choice.message.role == "assistant" and choice.message.content.strip()
    # the model ended its answer itself, well before max_tokens: "stop", not "length"
    assert choice.finish_reason == "stop" and 0 < r.usage.completion_tokens < 64
    assert r.usage.total_tokens == r.usage.prompt_tokens + r.usage.completion_tokens
    short = client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "Say OK."}],
                                           max_completion_tokens=2, temperature=0)
    assert short.choices[0].finish_reason == "length" and short.usage.completion_tokens == 2


def test_completions_n_seed_and_stop(client):
    kw = {"model": MODEL, "prompt": "Q: Name a fruit.\nA:", "max_tokens": 6, "temperature": 1.0, "seed": 3, "n": 3}
    first = client.completions.create(**kw)
    again = client.completions.create(**kw)
    texts = [c.text for c in first.choices]
    assert first.object == "text_completion" and [c.index for c in first.choices] == [0, 1, 2]
    assert len(set(texts)) > 1 and texts == [c.text for c in again.choices]  # n samples differ, a seed repeats them
    counted = client.completions.create(model=MODEL, prompt="Count: 1, 2, 3,", max_tokens=16, temperature=0, stop=[" 6"])
    (c,) = counted.choices
    assert c.text.startswith(" 4, 5") and " 6" not in c.text and c.finish_reason == "stop"


def test_streaming_chat_and_completions_equal_the_plain_answer(client):
    messages = [{"role": "user", "content": "What is 2 + 2?"}]
    plain = client.chat.completions.create(model=MODEL, messages=messages, max_tokens=12, temperature=0)
    chunks = list(client.chat.completions.create(model=MODEL, messages=messages, max_tokens=12, temperature=0,
                                                 stream=True, stream_options={"include_usage": True}))
    assert all(ch.object == "chat.completion.chunk" for ch in chunks) and len(chunks) > 3
    text = "".join(ch.choices[0].delta.content or "" for ch in chunks if ch.choices)
    assert text == plain.choices[0].message.content
    assert chunks[0].choices[0].delta.role == "assistant"
    assert [ch.choices[0].finish_reason for ch in chunks if ch.choices][-1] == plain.choices[0].finish_reason
    assert chunks[-1].choices == [] and chunks[-1].usage.completion_tokens == plain.usage.completion_tokens
    kw = {"model": MODEL, "prompt": "Count: 1, 2, 3,", "max_tokens": 8, "temperature": 0}
    streamed = list(client.completions.create(**kw, stream=True))
    assert "".join(ch.choices[0].text for ch in streamed) == client.completions.create(**kw).choices[0].text
    assert streamed[-1].choices[0].finish_reason == "length"
    # n sampled choices interleave by index; a stop sequence is never sent, not even its first characters
    kw = {"model": MODEL, "prompt": "Count: 1, 2, 3,", "max_tokens": 16, "temperature": 0.7, "seed": 5, "n": 2, "stop": [", 6"]}
    plain_n = client.completions.create(**kw)
    chunks_n = list(client.completions.create(**kw, stream=True))
    for i in (0, 1):
        mine = [ch.choices[0] for ch in chunks_n if ch.choices[0].index == i]
        assert "".join(c.text for c in mine) == plain_n.choices[i].text and ", 6" not in plain_n.choices[i].text
        assert mine[-1].finish_reason == plain_n.choices[i].finish_reason and len(mine) > 3


def test_streaming_sends_tokens_while_decoding_and_a_disconnect_stops_the_generation(client, model_server):
    """The chunks leave as the tokens are chosen: a client that reads the first chunk and disconnects stops its row
    long before its 512 tokens.  Sent after generation, the row would have run to its end before the first chunk,
    and nothing would have been stopped (the backend's ``cancelled`` counts rows stopped before their end)."""
    backend = model_server.backend
    before = backend.counters.snapshot()
    body = {"model": MODEL, "prompt": "Count: 1, 2, 3,", "max_tokens": 512, "temperature": 0, "stream": True}
    with httpx.stream("POST", f"{model_server.base_url}/completions", json=body, timeout=300) as r:  # a client that leaves
        first = json.loads(next(line for line in r.iter_lines() if line.startswith("data: "))[len("data: "):])
    assert first["choices"][0]["text"] and first["choices"][0]["finish_reason"] is None
    after = client.completions.create(model=MODEL, prompt="Count:", max_tokens=1)  # decoded after the stopped row's batch
    now = backend.counters.snapshot()
    assert now["cancelled"] == before["cancelled"] + 1
    stopped_at = now["completion_tokens"] - before["completion_tokens"] - after.usage.completion_tokens
    assert 0 < stopped_at < 512


def test_logprobs_with_echo_score_the_prompt_as_the_model_does(client, model_server, embedded_model):
    import torch

    model, tok = embedded_model
    prompt = "The capital of France is Paris"
    r = client.completions.create(model=MODEL, prompt=prompt, max_tokens=0, echo=True, logprobs=2, temperature=0)
    (c,) = r.choices
    ids = tok(prompt)["input_ids"]
    assert c.text == prompt and "".join(c.logprobs.tokens) == prompt and len(c.logprobs.tokens) == len(ids)
    assert c.logprobs.token_logprobs[0] is None and c.logprobs.top_logprobs[0] is None  # nothing before the first token
    with torch.inference_mode():
        expected = torch.log_softmax(model(input_ids=torch.tensor([ids])).logits[0, :-1].float(), -1)
    want = [expected[j, ids[j + 1]].item() for j in range(len(ids) - 1)]
    assert c.logprobs.token_logprobs[1:] == pytest.approx(want, abs=1e-4)
    # the top-2 is computed in the server's batch and `want` in a separate forward pass: equal to 1e-4, not bit for bit
    assert all(len(top) == 2 and max(top.values()) >= lp - 1e-4
               for top, lp in zip(c.logprobs.top_logprobs[1:], want, strict=True))
    assert c.logprobs.top_logprobs[-1][" Paris"] == pytest.approx(want[-1], abs=1e-4)  # the model's first choice
    # a prompt given as token ids is the same prompt; with max_tokens 1, the generated token comes last
    by_ids = client.completions.create(model=MODEL, prompt=ids, max_tokens=1, echo=True, logprobs=1, temperature=0)
    lp = by_ids.choices[0].logprobs
    assert lp.token_logprobs[1 : len(ids)] == pytest.approx(want, abs=1e-4) and len(lp.tokens) == len(ids) + 1
    assert by_ids.usage.prompt_tokens == len(ids) and by_ids.choices[0].text.startswith(prompt)
    chat = client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "Say OK."}], max_tokens=6,
                                          temperature=0, logprobs=True, top_logprobs=3)
    content = chat.choices[0].logprobs.content
    assert "".join(t.token for t in content) == chat.choices[0].message.content
    assert len(content) == chat.usage.completion_tokens
    # greedy: each token is the most likely one at its place
    assert all(len(t.top_logprobs) == 3 and t.top_logprobs[0].logprob == pytest.approx(t.logprob) for t in content)


def test_token_ids_outside_the_vocabulary_are_a_400_naming_the_id(client, model_server):
    """A token id the model has no embedding for failed generation with a 500 (IndexError; a negative id an
    OverflowError), and failed every other request batched with it; now it is refused up front."""
    cases = {
        "[0]: token id 99999 is out of vocabulary; this model's vocabulary has 49152 tokens (ids 0 to 49151)": [99999],
        "[2]: token id -1 is out of vocabulary": [1, 2, -1],
        "[1][0]: token id 49152 is out of vocabulary": [[1, 2], [49152]],
        ": must be a string, a list of strings, a list of token ids or a list of token-id lists": [1.5, 2],
        ": must not be empty": [],
        ": a token-id prompt must not be empty": [[1], []],
    }
    for message, prompt in cases.items():
        with pytest.raises(openai.BadRequestError) as info:
            client.completions.create(model=MODEL, prompt=prompt, max_tokens=1)
        assert info.value.status_code == 400 and info.value.param == "prompt"
        assert info.value.message.startswith("Error code: 400") and f"prompt{message}" in info.value.body["message"]
    root = model_server.base_url.removesuffix("/v1")
    r = httpx.post(f"{root}/detokenize", json={"tokens": [1, 99999]})
    assert r.status_code == 400 and "tokens[1]: token id 99999 is out of vocabulary" in r.json()["error"]["message"]
    assert client.completions.create(model=MODEL, prompt=[1, 49151], max_tokens=1).choices[0].finish_reason


def test_models_and_errors(client):
    assert [m.id for m in client.models.list()] == [MODEL]
    assert client.models.retrieve(MODEL).id == MODEL
    with pytest.raises(openai.NotFoundError) as missing:
        client.models.retrieve("gpt-4")
    assert missing.value.status_code == 404 and missing.value.code == "model_not_found"
    with pytest.raises(openai.NotFoundError):
        client.chat.completions.create(model="gpt-4", messages=[{"role": "user", "content": "hi"}])
    with pytest.raises(openai.BadRequestError) as empty:
        client.chat.completions.create(model=MODEL, messages=[])
    assert empty.value.status_code == 400 and empty.value.param == "messages"
    with pytest.raises(openai.BadRequestError) as bad_temperature:
        client.completions.create(model=MODEL, prompt="hi", temperature=5)
    assert bad_temperature.value.param == "temperature"
    tool = {"type": "function", "function": {"name": "add", "parameters": {"type": "object", "properties": {}}}}
    refused = {
        "tools": lambda: client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "hi"}], tools=[tool]),
        "response_format": lambda: client.chat.completions.create(
            model=MODEL, messages=[{"role": "user", "content": "hi"}], response_format={"type": "json_object"}),
        "best_of": lambda: client.completions.create(model=MODEL, prompt="hi", best_of=3, n=1),
        "suffix": lambda: client.completions.create(model=MODEL, prompt="hi", suffix="!"),
    }
    with pytest.raises(openai.BadRequestError) as too_long:  # SmolLM2 reads 8192 tokens
        client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "hi"}], max_tokens=9000)
    assert too_long.value.code == "context_length_exceeded" and "maximum context length is 8192" in too_long.value.message
    for param, call in refused.items():
        with pytest.raises(openai.BadRequestError) as info:
            call()
        assert info.value.param == param and param in info.value.message  # refused, never silently ignored
