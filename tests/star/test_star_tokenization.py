"""One tokenization for generation and training, on a tokenizer that adds BOS (the Llama family's habit).

The tokenizer and a tiny random Llama are built here: no download.  Before the fix, generation fed
``<s> prompt`` while training taught ``prompt → completion`` without the ``<s>``.
"""

from __future__ import annotations

import asyncio

import pytest

pytest.importorskip("transformers")
tokenizers = pytest.importorskip("tokenizers")

from thoughtsource.backends.base import Request  # noqa: E402
from thoughtsource.backends.prompt_tokens import prompt_token_ids  # noqa: E402
from thoughtsource.backends.transformers_local import TransformersBackend  # noqa: E402
from thoughtsource.star.tasks.base import TrainingRecord  # noqa: E402
from thoughtsource.star.train import IGNORE_INDEX, tokenize_record  # noqa: E402

WORDS = ["Q", ":", "what", "is", "2", "+", "3", "?", "A", ":", "the", "answer", "is", "5", ".", "<scratch>", "</scratch>", "1", "4", "6", "7", "8", "9", "0"]
SPECIAL = ["<pad>", "<s>", "</s>", "<unk>"]


def _tokenizer(*, bos: bool = True, eos: bool = False):  # type: ignore[no-untyped-def]
    from tokenizers import Tokenizer, models, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    vocab = {t: i for i, t in enumerate(SPECIAL + WORDS)}
    raw = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    raw.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    template = " ".join([*(["<s>"] if bos else []), "$A", *(["</s>"] if eos else [])])
    raw.post_processor = processors.TemplateProcessing(single=template, special_tokens=[("<s>", 1), ("</s>", 2)])
    return PreTrainedTokenizerFast(tokenizer_object=raw, bos_token="<s>", eos_token="</s>", pad_token="<pad>",
                                   unk_token="<unk>")


PROMPT = "Q : what is 2 + 3 ? A :"
COMPLETION = " the answer is 5 ."


def test_the_prompt_keeps_the_bos_the_tokenizer_adds_and_no_trailing_eos() -> None:
    tok = _tokenizer(bos=True, eos=True)
    ids, n_special = prompt_token_ids(tok, PROMPT)
    assert ids[0] == tok.bos_token_id and n_special == 1
    assert tok.eos_token_id not in ids  # the completion follows the prompt, not an EOS
    assert ids[1:] == tok(PROMPT, add_special_tokens=False)["input_ids"]
    plain = _tokenizer(bos=False)
    assert prompt_token_ids(plain, PROMPT) == (plain(PROMPT)["input_ids"], 0)


def test_training_sees_the_prompt_exactly_as_generation_feeds_it() -> None:
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    tok = _tokenizer()
    torch.manual_seed(0)
    model = LlamaForCausalLM(LlamaConfig(vocab_size=len(SPECIAL) + len(WORDS), hidden_size=16, intermediate_size=32,
                                         num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=2,
                                         bos_token_id=1, eos_token_id=2, pad_token_id=0)).eval()
    backend = TransformersBackend.from_loaded(model, tok, name="tiny-bos", threads=1)
    fed = backend._row(Request(prompt=PROMPT, max_tokens=3)).ids  # what the model is asked with
    (done,) = asyncio.run(backend.complete([Request(prompt=PROMPT, max_tokens=3)]))
    assert done.prompt_tokens == len(fed)

    rec = tokenize_record(TrainingRecord(id="x", prompt=PROMPT, completion=COMPLETION), tok, max_len=64)
    n_prompt = sum(1 for label in rec["labels"] if label == IGNORE_INDEX)
    assert fed[0] == tok.bos_token_id
    assert rec["input_ids"][:n_prompt] == fed  # BOS included, same ids
    assert rec["input_ids"][n_prompt:] == [*tok(COMPLETION, add_special_tokens=False)["input_ids"], tok.eos_token_id]


def test_an_overlong_prompt_is_cut_after_its_bos() -> None:
    tok = _tokenizer()
    rec = tokenize_record(TrainingRecord(id="x", prompt=PROMPT, completion=COMPLETION), tok, max_len=10)
    completion = [*tok(COMPLETION, add_special_tokens=False)["input_ids"], tok.eos_token_id]
    assert len(rec["input_ids"]) == 10 and rec["input_ids"][0] == tok.bos_token_id
    assert rec["input_ids"][-len(completion):] == completion
    full, _ = prompt_token_ids(tok, PROMPT)
    assert rec["input_ids"][1:10 - len(completion)] == full[len(full) - (9 - len(completion)):]  # the prompt's tail
