"""Long reasoning traces in a real browser (Playwright, Debian's chromium, a live server): a long CoT is collapsed and
"show all" shows it; a thought is folded and labelled, the final answer shown apart, both with their lengths; the
step keys still label the right steps in a folded, collapsed trace.  The screenshot goes to docs/img/web_traces.png
with `make screenshots`."""

from __future__ import annotations

import json
from pathlib import Path

from thoughtsource.reasoning import split_reasoning
from thoughtsource.testing.traces import MODELS, long_trace_collection, math500, thought
from thoughtsource.web.data import ServedData
from thoughtsource.web.db import STEP_KEY
from thoughtsource.web.similarity import sentences

from .conftest import add_user, live_server
from .test_browser import _login, _saved, browser, pytestmark, shot_path  # noqa: F401 (the fixture and the marks)

DATA = Path(__file__).resolve().parents[2].parent / "shared" / "data"
CHARS = 6000  # 3x over the collapse limit; the page's similarity (every sentence pair, in Python) stays cheap


def _long_file(tmp_path: Path) -> tuple[Path, dict]:
    """One MATH-500 problem with the three reasoning traces of testing.traces and a plain CoT as long (no tags)."""
    col = long_trace_collection(DATA, trace_chars=CHARS)
    x = col["math500"]["test"][0]
    x["generated_cot"].append({"id": "plain-0", "cot": thought(math500(DATA), 0, seed=99, trace_chars=CHARS),
                               "model": {"name": "gpt-4"}, "answers": [], "annotations": []})
    path = tmp_path / "long.json"
    path.write_text(json.dumps(col))
    return path, x


def _clipped(locator) -> bool:
    """Whether the element shows less than its content (a collapsed part)."""
    return locator.evaluate("el => el.scrollHeight > el.clientHeight + 1")


def test_long_traces_are_folded_collapsed_and_show_all_expands(make_app, browser, tmp_path) -> None:  # noqa: F811 (the fixture)
    path, x = _long_file(tmp_path)
    app = make_app(data=ServedData.load([path]))
    add_user(app, "alice")
    with live_server(app) as base:
        page = browser.new_page(viewport={"width": 1440, "height": 1000})
        errors: list[str] = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        _login(page, base, "alice")
        page.goto(base + "/sample/math500/test/math500-0")
        cards = page.locator("article.cot")
        assert cards.count() == len(MODELS) + 1
        for i, c in enumerate(x["generated_cot"][: len(MODELS)]):
            card, want = cards.nth(i), split_reasoning(c["cot"])
            # the thought: folded (a closed <details>), labelled with its length; no think tag shown anywhere
            thinking = card.locator("details.part-thinking")
            assert thinking.count() == 1 and not thinking.evaluate("el => el.open")
            summary = thinking.locator("summary").inner_text()
            assert summary.startswith("THINKING") or summary.startswith("Thinking"), summary
            assert f"{len(want.reasoning):,} chars · {len(want.reasoning.split()):,} words" in summary
            thinking.locator("summary").click()  # unfolded: the thought's text, and no think tag shown in any part
            assert thinking.locator(".cot-text").inner_text().strip().startswith(want.reasoning[:200])
            assert not any("think>" in t for t in card.locator(".cot-text").all_inner_texts())
            thinking.locator("summary").click()
            if want.truncated:
                assert "cut off: no </think>" in summary and card.locator(".part-answer").count() == 0
                assert "No final answer" in card.inner_text()
            else:
                # the final answer apart, not folded, with its length
                answer = card.locator(".part-answer")
                assert answer.is_visible() and answer.locator(".cot-text").inner_text().strip() == want.answer
                head = answer.locator(".part-head").inner_text()
                assert f"{len(want.answer):,} chars · {len(want.answer.split()):,} words" in head
        # the plain long CoT: collapsed, "show all" shows all of it and "show less" collapses it again
        plain = cards.nth(len(MODELS))
        text, more = plain.locator(".cot-text"), plain.locator(".show-all")
        assert plain.locator("details").count() == 0 and _clipped(text)
        assert more.inner_text() == f"show all ({len(x['generated_cot'][-1]['cot'].strip()):,} chars)"
        assert more.get_attribute("aria-expanded") == "false"
        more.click()
        assert not _clipped(text) and more.inner_text() == "show less" and more.get_attribute("aria-expanded") == "true"
        more.click()
        assert _clipped(text)
        # a thought unfolded is still collapsed until "show all"
        first = cards.nth(0)
        first.locator("details.part-thinking summary").click()
        body = first.locator("details.part-thinking .cot-text")
        assert body.is_visible() and _clipped(body)
        page.screenshot(path=str(shot_path(tmp_path, "web_traces.png")), full_page=True)
        first.locator("details.part-thinking .show-all").click()
        assert not _clipped(body)
        assert errors == []


def test_step_keys_label_the_right_steps_in_a_folded_collapsed_trace(make_app, browser, tmp_path) -> None:  # noqa: F811 (the fixture)
    path, x = _long_file(tmp_path)
    app = make_app(data=ServedData.load([path]))
    add_user(app, "alice")
    cot = x["generated_cot"][0]["cot"]
    n = len(sentences(cot))
    with live_server(app) as base:
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        _login(page, base, "alice")
        page.goto(base + "/sample/math500/test/math500-0")
        card = page.locator("article.cot").first
        thinking, body = card.locator("details.part-thinking"), card.locator("details.part-thinking .cot-text")
        assert sentences(cot)[0] == "<think>"  # a hidden step: the cursor passes it by
        # the first CoT has the focus: ↓ puts the cursor on step 1 and unfolds the thought, still collapsed
        page.keyboard.press("ArrowDown")
        assert card.locator(".step.cur").get_attribute("data-s") == "1"
        assert thinking.evaluate("el => el.open") and _clipped(body)
        # ... down past the fold: the part shows all, the cursor's step is on screen
        far = 40
        for _ in range(far - 1):
            page.keyboard.press("ArrowDown")
        cur = card.locator(".step.cur")
        assert cur.get_attribute("data-s") == str(far) and not _clipped(body) and cur.is_visible()
        box, view = cur.bounding_box(), page.viewport_size
        assert box is not None and box["y"] >= 0 and box["y"] + box["height"] <= view["height"]
        page.keyboard.press("+")
        page.keyboard.press("0")
        page.keyboard.press("-")
        _saved(page)
        assert [card.locator(f'.step[data-s="{k}"]').get_attribute("data-label") for k in (far, far + 1, far + 2)] == ["1", "0", "-1"]
        # ↑ all the way up stops on step 1, never on the hidden <think>; + labels it
        for _ in range(far + 5):
            page.keyboard.press("ArrowUp")
        assert card.locator(".step.cur").get_attribute("data-s") == "1"
        page.keyboard.press("+")
        _saved(page)
        page.reload()
        card = page.locator("article.cot").first
        labels = {int(s.get_attribute("data-s")): s.get_attribute("data-label") for s in card.locator(".step").all()}
        assert {k: v for k, v in labels.items() if v} == {1: "1", far: "1", far + 1: "0", far + 2: "-1"}
    rows = [r for r in app.state.db.annotations(annotator="alice") if r.key == STEP_KEY]
    want = [None] * n
    want[1], want[far], want[far + 1], want[far + 2] = 1, 1, 0, -1
    assert len(rows) == 1 and rows[0].ref.cot_id == "deepseek-r1-0" and rows[0].value == {"labels": want, "first_error": None}
