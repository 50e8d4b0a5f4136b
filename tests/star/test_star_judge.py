"""STaR's answer filter (star/judge.py) reads answers as evaluation does: a rationale cut off while it states its
answer does not pass, and a restated answer does not replace the one stated first."""

from __future__ import annotations

from thoughtsource.star import judge
from thoughtsource.star.tasks.base import Problem


def test_a_rationale_cut_off_mid_answer_does_not_pass_the_filter() -> None:
    p = Problem(id="svamp-1", question="How many boxes?", answer="6", type="number")
    # "... 600. The answer is 6" (the SVAMP output, cut at the token limit): not an answer.
    assert not judge.is_correct(p, "She has 6 boxes of 100 pencils, 600 in all. 6 x 100 = 600. The answer is 6")
    assert judge.extract_answer(p, "6 x 100 = 600. The answer is 6") is None
    assert judge.is_correct(p, "6 x 100 = 600. Therefore, the answer is 6.")


def test_a_restated_answer_does_not_replace_the_first() -> None:
    p = Problem(id="gsm8k-137", question="What percent?", answer="25", type="number")
    assert judge.is_correct(p, " 25%. The answer (as a fraction) is 1/4.", "extraction")
