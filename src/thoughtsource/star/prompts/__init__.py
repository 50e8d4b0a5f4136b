"""The STaR authors' few-shot prompts for CommonsenseQA and GSM8K, shipped as package data.

Copied verbatim from github.com/ezelikman/STaR (commit 6ffd3c4743da; Apache License 2.0, see
``LICENSE.txt`` and ``ATTRIBUTION.txt`` in this folder):

=======================================  ======================================================
file here                                upstream
=======================================  ======================================================
``cqa_prompts.txt``                      ``commonsenseqa/prompts.txt`` (Appendix B, 7 exemplars)
``cqa_prompts_answer_key.txt``           ``commonsenseqa/prompts_answer_key.txt`` (rationalization)
``cqa_prompts_direct.txt``               ``commonsenseqa/prompts_direct.txt``
``cqa_prompts_direct_answer_key.txt``    ``commonsenseqa/prompts_direct_answer_key.txt``
``gsm_prompts.txt``                      ``gsm/prompts.txt`` (Appendix I, 6 exemplars)
``gsm_prompts_answer_key.txt``           ``gsm/prompts_answer_key.txt`` (rationalization)
=======================================  ======================================================

Upstream's ``gsm/prompts_direct_answer_key.txt`` holds CommonsenseQA questions (a mix-up in that
repository), so there is no authors' direct prompt for GSM8K and it is not shipped.

:func:`read_prompt` reads one; :mod:`thoughtsource.star.tasks.exemplars` parses them into the tasks'
problems.
"""

from __future__ import annotations

from importlib import resources

__all__ = ["PROMPT_FILES", "read_prompt"]

#: task name → (rationale prompt, its answer-key variant)
PROMPT_FILES: dict[str, tuple[str, str]] = {
    "commonsense_qa": ("cqa_prompts.txt", "cqa_prompts_answer_key.txt"),
    "gsm8k": ("gsm_prompts.txt", "gsm_prompts_answer_key.txt"),
}


def read_prompt(filename: str) -> str:
    """The text of one shipped prompt file."""
    return (resources.files(__package__) / filename).read_text(encoding="utf-8")
