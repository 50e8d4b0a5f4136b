"""Issue 42, finding 4 in Chromium: pressing e then + on one step stored a first error on a +1 step (and showed it
after a reload).  The save of + is refused (422) and the page shows the step as it was stored: -1, the first error."""

from __future__ import annotations

from playwright.sync_api import expect

from thoughtsource.web.db import STEP_KEY, step_labels_problem
from thoughtsource.web.similarity import sentences

from .conftest import add_user, live_server
from .test_browser import _login, _pressed_steps, _saved, browser, pytestmark  # noqa: F401  (the fixture and marks)


def test_e_then_plus_on_one_step_never_stores_a_first_error_on_a_correct_step(make_app, served, browser) -> None:  # noqa: F811
    app = make_app()
    add_user(app, "alice")
    it = next(x for x in served.items if len(x.sample.generated_cot) >= 2 and len(sentences(x.sample.generated_cot[0].cot)) >= 4)
    n = len(sentences(it.sample.generated_cot[0].cot))
    with live_server(app) as base:
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        _login(page, base, "alice")
        page.goto(base + f"/sample/{it.dataset}/{it.split}/{it.sample.id}")
        cot = page.locator("article.cot").first
        page.keyboard.press("ArrowDown")  # the cursor on step 1
        page.keyboard.press("+")  # step 1 correct, the cursor on step 2
        _saved(page)
        page.keyboard.press("e")  # step 2 the first error (-1)
        _saved(page)
        page.keyboard.press("+")  # and then correct?
        expect(page.locator("#save-status")).to_contain_text("not saved: 422", timeout=10_000)
        expect(page.locator("#save-status")).to_contain_text("first error")
        assert _pressed_steps(page, cot)[:2] == ["1", "-1"] and cot.locator(".step").nth(1).get_attribute("class").count("first-error") == 1
        page.reload()
        cot = page.locator("article.cot").first
        assert _pressed_steps(page, cot)[:2] == ["1", "-1"]
        assert cot.locator(".step.first-error").count() == 1 and "first-error" in cot.locator(".step").nth(1).get_attribute("class")
        # e again unmarks it; now + is a plain label
        page.keyboard.press("ArrowDown")
        page.keyboard.press("ArrowDown")
        page.keyboard.press("e")
        _saved(page)
        page.keyboard.press("+")
        _saved(page)
    [row] = [r for r in app.state.db.annotations(annotator="alice") if r.key == STEP_KEY]
    assert row.value == {"labels": [1, 1] + [None] * (n - 2), "first_error": None}
    assert step_labels_problem(row.value, n) is None
