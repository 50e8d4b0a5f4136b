"""lm-evaluation-harness against ``serve-model``, side by side with its own ``hf`` model on the same weights.

Two small tasks, defined by local task YAML over ``../shared/data`` (no hub access): CommonsenseQA as a
multiple-choice task (log-likelihood of each answer, what ``local-completions`` reads from ``echo`` + ``logprobs``)
and GSM8K as a greedy generation task.  lm-eval runs in-process with ``hf`` on the embedded model and with
``local-completions`` / ``local-chat-completions`` against ``serve-model`` serving that model: the choices,
log-likelihoods, generated outputs and metrics are the same.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from thoughtsource.testing.lm_eval_tasks import GEN_TASK, MC_TASK

pytest.importorskip("lm_eval")
pytest.importorskip("tenacity", reason="lm-eval's API models need lm-eval[api] (the test extra)")
pytestmark = pytest.mark.slow

LIMIT = 8  # documents per task: the comparison is per document, a few are enough


@pytest.fixture(scope="module")
def task_manager(shared_data: Path, tmp_path_factory: pytest.TempPathFactory):
    from lm_eval.tasks import TaskManager

    folder = tmp_path_factory.mktemp("lm_eval_tasks")
    (folder / "ts_commonsense_qa.yaml").write_text(MC_TASK.format(data=shared_data))
    (folder / "ts_gsm8k.yaml").write_text(GEN_TASK.format(data=shared_data))
    return TaskManager(include_path=str(folder))


def _evaluate(model, task_manager, tasks: list[str], **kw) -> dict:
    import lm_eval

    return lm_eval.simple_evaluate(model=model, tasks=tasks, limit=LIMIT, task_manager=task_manager, log_samples=True,
                                   **kw)


def _resps(out: dict, task: str) -> list:
    return [s["filtered_resps"] for s in sorted(out["samples"][task], key=lambda s: s["doc_id"])]


def test_lm_eval_local_completions_matches_hf(embedded_model, model_server, task_manager):
    from lm_eval.models.huggingface import HFLM

    model, tok = embedded_model
    tasks = ["ts_commonsense_qa", "ts_gsm8k"]
    hf = _evaluate(HFLM(pretrained=model, tokenizer=tok, batch_size=1), task_manager, tasks)
    # as README's example: no tokenizer named, lm-eval finds the server's /tokenizer_info and /tokenize and sends
    # token-id prompts (its default)
    from lm_eval.api.registry import get_model

    lm = get_model("local-completions").create_from_arg_string(
        f"model={model_server.model},base_url={model_server.base_url}/completions")
    assert lm.tokenizer_backend == "remote" and lm.tokenized_requests
    api = _evaluate(lm, task_manager, tasks)
    # multiple choice: the same log-likelihood of every choice (to float32 noise), so the same choice and accuracy
    for ours, theirs in zip(_resps(api, tasks[0]), _resps(hf, tasks[0]), strict=True):
        assert [lp for lp, _ in ours] == pytest.approx([lp for lp, _ in theirs], abs=1e-3)
        assert [g for _, g in ours] == [g for _, g in theirs]
        assert max(range(len(ours)), key=lambda i: ours[i][0]) == max(range(len(theirs)), key=lambda i: theirs[i][0])
    assert api["results"][tasks[0]]["acc,none"] == hf["results"][tasks[0]]["acc,none"]
    # greedy generation: the same text
    assert _resps(api, tasks[1]) == _resps(hf, tasks[1]) and all(r[0].strip() for r in _resps(api, tasks[1]))
    assert api["results"][tasks[1]]["exact_match,none"] == hf["results"][tasks[1]]["exact_match,none"]


def test_lm_eval_local_chat_completions_matches_hf_with_the_chat_template(embedded_model, model_server, task_manager):
    from lm_eval.models.huggingface import HFLM

    model, tok = embedded_model
    hf = _evaluate(HFLM(pretrained=model, tokenizer=tok, batch_size=1), task_manager, ["ts_gsm8k"], apply_chat_template=True)
    api = _evaluate("local-chat-completions", task_manager, ["ts_gsm8k"], apply_chat_template=True,
                    model_args=f"model={model_server.model},base_url={model_server.base_url}/chat/completions")
    assert _resps(api, "ts_gsm8k") == _resps(hf, "ts_gsm8k") and all(r[0].strip() for r in _resps(api, "ts_gsm8k"))
    assert api["results"]["ts_gsm8k"]["exact_match,none"] == hf["results"]["ts_gsm8k"]["exact_match,none"]
