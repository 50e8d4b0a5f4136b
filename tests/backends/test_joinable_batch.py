"""Mode continuous (serve-model's default): a request joins the running batch at its next decoding step
(``backends/joinable_batch.py``).  Ordering, not timing: a 4-token request sent while a 150-token one decodes ends
while that one is still decoding (before, it waited for the whole batch: 10.27 s against 0.27 s alone, issue 45)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator

import pytest

from thoughtsource import interrupt
from thoughtsource.backends import Request
from thoughtsource.backends.transformers_local import TransformersBackend
from thoughtsource.interrupt import Interrupted

pytestmark = pytest.mark.slow

ESSAY = ({"role": "user", "content": "Write a long, detailed essay about the history of Rome, from its founding to the "
                                     "fall of the Western Empire."},)
SHORT = Request(prompt="2+2=", max_tokens=4, temperature=0)


@pytest.fixture(scope="module")
def joining() -> Iterator[TransformersBackend]:
    """A backend that loads its own copy of the embedded model in mode continuous (the joinable batch)."""
    backend = TransformersBackend("embedded", device="cpu", mode="continuous", threads=1)
    yield backend
    asyncio.run(backend.aclose())


def test_a_short_request_joins_a_long_one_that_is_decoding(joining: TransformersBackend) -> None:
    long = Request(messages=ESSAY, max_tokens=150, temperature=0)
    seen: list[int] = []
    running = threading.Event()

    def sink(token: int) -> bool:
        seen.append(token)
        if len(seen) >= 20:
            running.set()
        return True

    async def main() -> tuple:
        solo = (await joining.complete([SHORT]))[0]
        long_task = asyncio.ensure_future(joining.complete([long], sinks=[sink]))
        while not running.is_set():
            await asyncio.sleep(0.02)
        short = (await joining.complete([SHORT]))[0]
        tokens_when_short_ended = len(seen)
        long_done_then = long_task.done()
        (long_done,) = await long_task
        return solo, short, tokens_when_short_ended, long_done_then, long_done

    solo, short, at, long_done_then, long_done = asyncio.run(main())
    assert long_done.completion_tokens == 150, long_done  # it ran to its max_tokens
    assert not long_done_then and 20 <= at < 100, at  # the short one ended some steps after joining, long before 150
    assert short.text == solo.text and short.completion_tokens == solo.completion_tokens == 4
    assert joining.counters.completed >= 3


def test_greedy_rows_that_decode_together_are_the_tokens_generate_gives(joining: TransformersBackend,
                                                                       embedded_model: tuple, gsm8k_questions: list[str],
                                                                       cot_request) -> None:
    requests = [cot_request(q, max_tokens=24) for q in gsm8k_questions] + [SHORT]
    padded = TransformersBackend.from_loaded(*embedded_model, mode="generate", threads=1).complete_sync(requests)

    async def together() -> list:
        return list(await asyncio.gather(*(joining.complete([r]) for r in requests)))

    joined = [c for (c,) in asyncio.run(together())]
    assert [c.text for c in joined] == [c.text for c in padded]
    assert [c.raw["token_ids"] for c in joined] == [c.raw["token_ids"] for c in padded]
    assert [c.finish_reason for c in joined] == [c.finish_reason for c in padded]


def test_stop_strings_and_a_client_that_leaves_end_a_row_at_once(joining: TransformersBackend) -> None:
    (counted,) = joining.complete_sync([Request(prompt="Count: 1, 2, 3,", max_tokens=40, temperature=0, stop=(" 7",))])
    assert counted.text == " 4, 5, 6," and counted.finish_reason == "stop" and counted.completion_tokens < 12
    got: list[int] = []
    before = joining.counters.cancelled

    def leaves(token: int) -> bool:  # a streaming client that goes away after 3 tokens
        got.append(token)
        return len(got) < 3

    (left,) = asyncio.run(joining.complete([Request(messages=ESSAY, max_tokens=200, temperature=0)], sinks=[leaves]))
    assert len(got) == 3 and left.completion_tokens == 3 and joining.counters.cancelled == before + 1


def test_ctrl_c_stops_every_joined_row(joining: TransformersBackend) -> None:
    """A Ctrl-C (or serve-model's shutdown limit) cancels the rows in the running batch: each caller gets
    Interrupted, not a wait for 300 tokens; the batch takes requests again afterwards."""
    started = threading.Event()

    def sink(token: int) -> bool:
        started.set()
        return True

    def stop_when_decoding() -> None:
        if started.wait(600):
            interrupt.request_stop()

    stopper = threading.Thread(target=stop_when_decoding)
    stopper.start()
    requests = [Request(messages=ESSAY, max_tokens=300, temperature=0)] * 2
    with interrupt.graceful_sigint(), pytest.raises(Interrupted) as stopped:  # graceful_sigint clears the stop at its end
        asyncio.run(joining.complete(requests, sinks=[sink, None]))
    stopper.join()
    assert stopped.value.completions == {}  # neither row had finished
    assert not interrupt.requested()
    (again,) = joining.complete_sync([SHORT])
    assert again.completion_tokens == 4


def test_over_http_a_short_chat_request_ends_while_a_long_stream_goes_on(joining: TransformersBackend) -> None:
    """serve-model's path: chat requests (with the chat template's add_generation_prompt, as clients send it) on the
    server's own model; the short answer comes back while the long stream still has most of its chunks to send."""
    import json

    import httpx

    from thoughtsource.backends.server import run_model_server

    with run_model_server(joining, served_model_name="smol") as server, \
            httpx.Client(base_url=server.base_url, timeout=600) as client:
        body = {"model": "smol", "messages": list(ESSAY), "max_tokens": 150, "temperature": 0, "stream": True,
                "add_generation_prompt": True}
        with client.stream("POST", "/chat/completions", json=body) as stream:
            lines = stream.iter_lines()
            chunks = 0
            for line in lines:
                if line.startswith("data: {"):
                    chunks += 1
                if chunks >= 20:
                    break
            with httpx.Client(base_url=server.base_url, timeout=600) as other:
                short = other.post("/chat/completions", json={
                    "model": "smol", "messages": [{"role": "user", "content": "What is 2+2?"}], "max_tokens": 4,
                    "temperature": 0, "add_generation_prompt": True})
            assert short.status_code == 200 and short.json()["usage"]["completion_tokens"] == 4, short.text
            # the long row is still with the model (chunks already sent could be waiting in the socket: not a sign)
            metrics = httpx.get(server.base_url.removesuffix("/v1") + "/metrics").text
            assert "thoughtsource_queue_length 1\n" in metrics, metrics
            after = [json.loads(line[6:]) for line in lines if line.startswith("data: {")]
    assert after[-1]["choices"][0]["finish_reason"] == "length"


def test_a_seeded_sample_is_the_same_every_time_and_an_unseeded_one_joins(joining: TransformersBackend,
                                                                          embedded_model: tuple) -> None:
    """A sampled request with a seed is drawn from its own generator (it decodes apart, as in every other mode), so it
    is reproducible and equals the prefix decoder's sample (the CPU default mode); one without a seed joins the batch."""
    seeded = Request(prompt="Once upon a time", max_tokens=12, temperature=1.0, seed=7)
    a, b = (joining.complete_sync([seeded])[0] for _ in range(2))
    (ref,) = TransformersBackend.from_loaded(*embedded_model, mode="prefix", threads=1).complete_sync([seeded])
    assert a.text == b.text == ref.text and a.completion_tokens == 12
    free = Request(prompt="Once upon a time", max_tokens=12, temperature=1.0)
    got = [c for (c,) in asyncio.run(_together(joining, [free, SHORT]))]
    assert got[0].completion_tokens == 12 and got[1].text == joining.complete_sync([SHORT])[0].text


async def _together(backend: TransformersBackend, requests: list[Request]) -> list:
    return list(await asyncio.gather(*(backend.complete([r]) for r in requests)))
