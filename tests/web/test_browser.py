"""Real-browser tests: Playwright driving Debian's chromium against uvicorn on 127.0.0.1 (port 0).

Log in, open a sample, annotate with keyboard shortcuts, reload: the annotations persist; the similarity
slider changes the highlighted sentences; script payloads in the data never run; step labels by keyboard only;
blind review; queues; adjudication; uploads.  Screenshots go to the test's tmp_path, and to docs/img/ only with
THOUGHTSOURCE_DOCS_SCREENSHOTS=1 (`make screenshots`): tests leave the working tree clean.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from urllib.parse import quote, unquote

import pytest

from thoughtsource.web.db import STEP_KEY
from thoughtsource.web.routes import blind_alias
from thoughtsource.web.similarity import DEFAULT_THRESHOLD, highlighted, pairwise, sentences

from .conftest import PASSWORD, add_user, live_server, login

CHROMIUM = Path("/usr/bin/chromium")
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
        "--disable-sync"]
DOCS_IMG = Path(__file__).resolve().parents[2] / "docs" / "img"


def shot_path(tmp_path: Path, name: str) -> Path:
    """Where a screenshot goes: tmp_path, or docs/img/ when THOUGHTSOURCE_DOCS_SCREENSHOTS=1 (tracked files)."""
    if os.environ.get("THOUGHTSOURCE_DOCS_SCREENSHOTS"):
        DOCS_IMG.mkdir(parents=True, exist_ok=True)
        return DOCS_IMG / name
    return tmp_path / name

pytestmark = [
    pytest.mark.browser,
    pytest.mark.slow,
    pytest.mark.skipif(not CHROMIUM.exists(), reason="Debian's chromium is not installed at /usr/bin/chromium (apt install chromium)"),
]


@pytest.fixture
def browser():
    sync_api = pytest.importorskip("playwright.sync_api")
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=str(CHROMIUM), args=ARGS, headless=True)
        try:
            yield b
        finally:
            b.close()


def _login(page, base: str, name: str) -> None:
    page.goto(base + "/samples")
    assert "/login" in page.url
    page.fill('input[name="name"]', name)
    page.fill('input[name="password"]', PASSWORD)
    page.click('button[type="submit"]')
    page.wait_for_url(re.compile(r".*/samples$"))


def _saved(page) -> None:
    # (wait_for_function would need eval, which the app's Content-Security-Policy forbids)
    from playwright.sync_api import expect

    expect(page.locator("#save-status")).to_have_text("saved", timeout=10_000)


def _n_highlighted(page) -> int:
    return page.locator(".sent.sim").count()


def _set_threshold(page, value: float) -> None:
    page.eval_on_selector("#sim-threshold", "(el, v) => { el.value = v; el.dispatchEvent(new Event('input')); }", str(value))


def test_annotate_with_keyboard_and_highlight_similarity(make_app, served, browser, tmp_path) -> None:
    app = make_app()
    add_user(app, "alice")
    errors: list[str] = []
    with live_server(app) as base:
        page = browser.new_page(viewport={"width": 1440, "height": 1000})
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        _login(page, base, "alice")
        page.goto(base + "/samples?dataset=commonsense_qa&model=gpt-3.5-turbo")
        assert page.locator("table.samples tbody tr").count() == 25

        page.locator("td.q a").first.click()
        page.wait_for_url(re.compile(r".*/sample/commonsense_qa/validation/.*"))
        url = page.url
        cots = page.locator("article.cot")
        assert cots.count() == 7
        # the first CoT has the focus: 1 toggles the first label there
        page.keyboard.press("1")
        _saved(page)
        # Tab moves to the second CoT: star it and set label 4, and write a comment
        page.keyboard.press("Tab")
        assert page.evaluate("document.activeElement.dataset.cot") == "1"
        page.keyboard.press("s")
        page.keyboard.press("4")
        _saved(page)
        cots.nth(1).locator("textarea").fill("verbose but right")
        page.keyboard.press("Escape")  # blur: saves the comment
        _saved(page)
        # star the third CoT instead: one star per sample
        page.keyboard.press("Tab")
        page.keyboard.press("s")
        _saved(page)

        page.reload()
        cots = page.locator("article.cot")
        assert cots.nth(0).locator('[data-key="Incorrect reasoning"]').get_attribute("aria-pressed") == "true"
        assert cots.nth(0).locator('[data-key="Too verbose"]').get_attribute("aria-pressed") == "false"
        assert cots.nth(1).locator('[data-key="Too verbose"]').get_attribute("aria-pressed") == "true"
        assert cots.nth(1).locator(".star").get_attribute("aria-pressed") == "false"
        assert cots.nth(2).locator(".star").get_attribute("aria-pressed") == "true"
        assert cots.nth(1).locator("textarea").input_value() == "verbose but right"
        rows = {(r.ref.cot_id, r.key): r.value for r in app.state.db.annotations(annotator="alice")}
        ids = [cots.nth(i).get_attribute("data-cot-id") for i in range(3)]
        assert rows == {(ids[0], "Incorrect reasoning"): True, (ids[1], "Too verbose"): True,
                        (ids[1], "comment"): "verbose but right", (ids[2], "preferred"): True}

        # toggling again with the keyboard turns the label off (kept as an explicit "no")
        page.locator("article.cot").first.focus()
        page.keyboard.press("1")
        _saved(page)
        rows = {(r.ref.cot_id, r.key): r.value for r in app.state.db.annotations(annotator="alice")}
        assert rows[(ids[0], "Incorrect reasoning")] is False

        # the similarity slider: fewer highlighted sentences at a higher threshold, more at a lower one,
        # and exactly the sentences the server-side rule (similarity.highlighted) picks
        sim = served.item(*url.split("?")[0].split("/sample/")[1].split("/", 2)).sample
        sim = pairwise([c.cot or "" for c in sim.generated_cot])
        at_default = _n_highlighted(page)
        assert at_default == len(highlighted(sim, "tfidf", DEFAULT_THRESHOLD))
        assert page.locator("#sim-value").text_content() == f"{DEFAULT_THRESHOLD:.2f}"
        _set_threshold(page, 0.9)
        at_high = _n_highlighted(page)
        _set_threshold(page, 0.05)
        at_low = _n_highlighted(page)
        assert at_low > at_default > at_high, (at_low, at_default, at_high)
        assert (at_high, at_low) == (len(highlighted(sim, "tfidf", 0.9)), len(highlighted(sim, "tfidf", 0.05)))
        assert page.locator("#sim-count").text_content() == f"{at_low} sentences highlighted"
        page.check('input[name="sim-method"][value="jaccard"]')
        _set_threshold(page, 0.25)
        assert _n_highlighted(page) == len(highlighted(sim, "jaccard", 0.25))
        page.check('input[name="sim-method"][value="tfidf"]')
        assert _n_highlighted(page) == len(highlighted(sim, "tfidf", 0.25))
        _set_threshold(page, DEFAULT_THRESHOLD)
        assert _n_highlighted(page) == at_default
        # hovering a highlighted sentence marks its partners in the other CoTs
        first = page.locator(".sent.sim").first
        first.hover()
        assert page.locator(".sent.partner").count() >= 1
        page.mouse.move(0, 0)
        page.screenshot(path=str(shot_path(tmp_path, "web_sample.png")), full_page=True)

        # j / k move to the next and previous sample of the filtered list
        page.locator("article.cot").first.focus()
        page.keyboard.press("j")
        page.wait_for_url(lambda u: u != url)
        assert "dataset=commonsense_qa" in page.url and "model=gpt-3.5-turbo" in page.url
        page.keyboard.press("k")
        page.wait_for_url(url)
        page.keyboard.press("ArrowRight")
        page.wait_for_url(lambda u: u != url)
        page.keyboard.press("ArrowLeft")
        page.wait_for_url(url)

        # back on the list: the sample is marked annotated and the progress meter moved
        page.click("text=← list")
        page.wait_for_url(re.compile(r".*/samples\?dataset=commonsense_qa&model=gpt-3.5-turbo$"))
        assert page.locator("table.samples tbody tr").first.locator(".tag.done").count() == 1
        assert page.locator("#my-progress").get_attribute("value") == "3"
        page.screenshot(path=str(shot_path(tmp_path, "web_list.png")))
    assert not errors, errors


def test_script_payloads_never_run_in_the_browser(make_app, xss_file, browser) -> None:
    app = make_app(data=None, files=[xss_file])
    add_user(app, "alice")
    dialogs: list[str] = []
    with live_server(app) as base:
        page = browser.new_page()
        page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
        _login(page, base, "alice")
        page.locator("td.q a").first.click()
        page.wait_for_url(re.compile(r".*/sample/.*"))
        assert page.locator("h1.qtext").text_content().startswith('<script>alert("q")</script>')
        assert page.locator(".cot-text").first.text_content().startswith("First </script><script>alert(6)</script>.")
        page.locator(".cot-text").first.hover()
        page.wait_for_timeout(300)
    assert dialogs == []


def _pressed_steps(page, cot) -> list[str]:
    return [s.get_attribute("data-label") for s in cot.locator(".step").all()]


def test_label_steps_with_the_keyboard_only(make_app, served, browser, tmp_path) -> None:
    app = make_app()
    add_user(app, "alice")
    it = next(x for x in served.items if len(x.sample.generated_cot) >= 2 and len(sentences(x.sample.generated_cot[0].cot)) >= 4)
    n = len(sentences(it.sample.generated_cot[0].cot))
    with live_server(app) as base:
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        _login(page, base, "alice")
        page.goto(base + f"/sample/{it.dataset}/{it.split}/{it.sample.id}")
        cot = page.locator("article.cot").first
        # the first CoT has the focus; ↓ puts the cursor on step 1; + labels it and moves on; 0, 0, then e marks step 4
        # (a - on step 3 would be a wrong step before the first error: the rule of step labels refuses that)
        page.keyboard.press("ArrowDown")
        page.keyboard.press("+")
        page.keyboard.press("0")
        page.keyboard.press("0")
        _saved(page)
        page.keyboard.press("e")
        _saved(page)
        assert _pressed_steps(page, cot)[:4] == ["1", "0", "0", "-1"]
        assert cot.locator(".step.first-error").count() == 1
        # ↑ back to step 3 and Delete clears it
        page.keyboard.press("ArrowUp")
        page.keyboard.press("Delete")
        _saved(page)
        page.screenshot(path=str(shot_path(tmp_path, "web_steps.png")))
        page.reload()
        cot = page.locator("article.cot").first
        assert _pressed_steps(page, cot)[:4] == ["1", "0", "", "-1"]
        rows = [r for r in app.state.db.annotations(annotator="alice") if r.key == STEP_KEY]
        assert len(rows) == 1 and rows[0].value == {"labels": [1, 0, None, -1] + [None] * (n - 4), "first_error": 3}


def test_blind_mode_hides_models_and_correctness(make_app, served, browser, tmp_path) -> None:
    app = make_app(blind=True)
    add_user(app, "alice")
    add_user(app, "bob")
    it = next(x for x in served.items if len(x.sample.generated_cot) >= 7)
    models = {m for m in served.facets["model"]}
    triggers = {t for t in served.facets["trigger"]}
    orders = {}
    with live_server(app) as base:
        for name in ("alice", "bob"):
            ctx = browser.new_context(viewport={"width": 1280, "height": 900})
            page = ctx.new_page()
            _login(page, base, name)
            for url in ("/samples", f"/sample/{it.dataset}/{it.split}/{it.sample.id}"):
                page.goto(base + url)
                html = page.content()
                for m in models:
                    assert m not in html, (url, m)
                for t in triggers:
                    assert f">{t}<" not in html and f'"{t}"' not in html, (url, t)
                for mark in ("✓", "✗", "correct</span>", "wrong</span>", 'class="answer ok', 'class="answer bad', "mark ok",
                             "mark bad", '"correct"', "Prompt</summary>"):
                    assert mark not in html, (url, mark)
            orders[name] = [page.locator("article.cot").nth(i).get_attribute("data-cot-id") for i in range(7)]
            page.reload()
            assert [page.locator("article.cot").nth(i).get_attribute("data-cot-id") for i in range(7)] == orders[name]
            if name == "alice":
                page.screenshot(path=str(shot_path(tmp_path, "web_blind.png")))
            assert page.request.get(base + "/export").status == 403
            ctx.close()
    file_order = [c.id for c in it.sample.generated_cot]
    real = {name: [{blind_alias(app, app.state.db.user(name), it, c): c for c in file_order}[a] for a in orders[name]]
            for name in orders}  # the page names CoTs by aliases only the server's secret maps back
    assert not set(orders["alice"]) & set(file_order)
    assert sorted(real["alice"]) == sorted(file_order) and real["alice"] != real["bob"]


def test_two_annotators_with_overlap_two_get_their_queues(make_app, served, browser, tmp_path) -> None:
    from typer.testing import CliRunner

    from thoughtsource.cli import app as cli_app

    f = tmp_path / "small.json"
    served.collection.select(split=None, number_samples=2, seed=3).dump(f)
    app = make_app(data=None, files=[f])
    for name in ("ann", "ben"):
        add_user(app, name)
    r = CliRunner().invoke(cli_app, ["tasks", "assign", str(f), "--overlap", "2", "--db", str(app.state.db.path)])
    assert r.exit_code == 0, r.output
    queues = app.state.db.assigned()
    total = len(queues["ann"])
    assert total == len(queues["ben"]) == len(app.state.data.items) >= 2
    with live_server(app) as base:
        for name in ("ann", "ben"):
            ctx = browser.new_context(viewport={"width": 1280, "height": 900})
            page = ctx.new_page()
            _login(page, base, name)
            assert page.locator("#queue-count").text_content() == f"0 / {total} samples done"
            page.click("text=Next for me →")
            page.wait_for_url(re.compile(r".*/sample/.*"))
            d, s, x = queues[name][0]
            assert page.url.split("?")[0].endswith("/" + "/".join(quote(p, safe="") for p in (d, s, x)))
            # finish the first sample: r (reviewed) on every CoT, then "next for me" goes to the second
            cots = page.locator("article.cot")
            for i in range(cots.count()):
                cots.nth(i).focus()
                page.keyboard.press("r")
                _saved(page)
            page.click(".samplenav >> text=Next for me →")
            page.wait_for_url(re.compile(r".*/sample/.*"))
            d, s, x = queues[name][1]
            assert x in unquote(page.url)
            page.goto(base + "/samples")
            assert page.locator("#queue-count").text_content() == f"1 / {total} samples done"
            ctx.close()


def test_admin_adjudicates_a_disagreement_and_the_export_has_the_final_label(make_app, served, browser) -> None:
    app = make_app()
    for name in ("alice", "bob"):
        add_user(app, name)
    add_user(app, "root", "admin")
    it = next(x for x in served.items if len(x.sample.generated_cot) >= 2)
    c0 = it.sample.generated_cot[0].id
    body = {"dataset": it.dataset, "split": it.split, "sample_id": it.sample.id, "cot_id": c0}
    for name, value in (("alice", True), ("bob", False)):
        client, csrf = login(app, name)
        client.put("/api/annotation", json={**body, "key": "Too verbose", "value": value}, headers={"X-CSRF-Token": csrf})
        client.put("/api/annotation", json={**body, "key": "reviewed", "value": True}, headers={"X-CSRF-Token": csrf})
    with live_server(app) as base:
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        _login(page, base, "root")
        page.goto(base + "/adjudicate")
        row = page.locator(f'tr.disagreement[data-cot-id="{c0}"][data-key="Too verbose"]')
        assert row.count() == 1
        assert page.locator('table.confusion[data-label="Too verbose"] caption').text_content().startswith("Too verbose (1 pair)")
        row.locator("text=final: yes").click()
        page.wait_for_url(re.compile(r".*/adjudicate\?msg=.*"))
        assert "final: " in page.locator(f'tr.disagreement[data-cot-id="{c0}"]').first.text_content()
        exported = page.request.get(base + "/export?format=thoughtsource-json").json()
    cot = next(c for c in exported[it.dataset][it.split] if c["id"] == it.sample.id)["generated_cot"][0]
    finals = [a for a in cot["annotations"] if a.get("adjudicated")]
    assert [(a["author"], a["key"], a["value"]) for a in finals] == [("root", "Too verbose", True)]
    assert {(a["author"], a["value"]) for a in cot["annotations"] if a["key"] == "Too verbose" and not a.get("adjudicated")} == {
        ("alice", True), ("bob", False)}


def test_malformed_upload_shows_the_error_and_changes_nothing(make_app, served, browser, tmp_path) -> None:
    app = make_app()
    add_user(app, "root", "admin")
    bad = tmp_path / "broken.json"
    bad.write_text('{"gsm8k": {"test": [{"id": "x1", "question": "?", "type": "number"')
    wrong = tmp_path / "wrong_schema.json"
    wrong.write_text(json.dumps({"gsm8k": {"test": [{"id": "x1", "type": "number"}]}}))
    good = tmp_path / "extra.json"
    good.write_text(json.dumps({"uploaded_ds": {"test": [{"id": "u1", "question": "2+2?", "type": "number", "choices": [],
                                                           "answer": ["4"], "generated_cot": []}]}}))
    before = len(app.state.data.items)
    with live_server(app) as base:
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        _login(page, base, "root")
        for f, words in ((bad, ("broken.json:1:", "invalid JSON")), (wrong, ("wrong_schema.json", "question"))):
            page.goto(base + "/admin/data")
            page.set_input_files('input[type="file"]', str(f))
            page.click("text=Upload")
            page.wait_for_url(re.compile(r".*/admin/data\?msg=.*"))
            msg = page.locator("#page-error").text_content()
            assert all(w in msg for w in words), msg
            assert str(tmp_path) not in msg
            assert len(app.state.data.items) == before
            assert not any(app.state.settings.upload_dir.glob("*")) if app.state.settings.upload_dir.exists() else True
        page.set_input_files('input[type="file"]', str(good))
        page.click("text=Upload")
        page.wait_for_url(re.compile(r".*/admin/data\?msg=.*"))
        assert len(app.state.data.items) == before + 1
        page.goto(base + "/sample/uploaded_ds/test/u1")
        assert page.locator("h1.qtext").text_content() == "2+2?"


def test_comment_typed_just_before_leaving_is_saved_and_a_dead_session_says_so(make_app, served, browser, tmp_path) -> None:
    app = make_app()
    add_user(app, "alice")
    it = next(x for x in served.items if len(x.sample.generated_cot) >= 2)
    with live_server(app) as base:
        ctx = browser.new_context(viewport={"width": 390, "height": 844})
        page = ctx.new_page()
        _login(page, base, "alice")
        url = base + f"/sample/{it.dataset}/{it.split}/{it.sample.id}"
        page.goto(url)
        # the header fits a 390 px phone: nothing wider than the viewport
        assert page.evaluate("document.documentElement.scrollWidth") <= 390
        assert page.locator("header.topbar").bounding_box()["width"] <= 390
        page.screenshot(path=str(shot_path(tmp_path, "web_390.png")))
        page.locator("article.cot").first.locator("textarea").type("last words")
        page.goto(base + "/samples")  # well within the 600 ms debounce
        page.wait_for_timeout(1500)
        rows = {(r.key, r.value) for r in app.state.db.annotations(annotator="alice")}
        assert ("comment", "last words") in rows
        # ... and just before the tab is closed
        tab = ctx.new_page()
        tab.goto(url)
        tab.locator("article.cot").nth(1).locator("textarea").type("closing now")
        tab.close(run_before_unload=True)
        page.wait_for_timeout(1500)
        rows = {(r.key, r.value) for r in app.state.db.annotations(annotator="alice")}
        assert ("comment", "closing now") in rows
        # the session ends (log-out in another tab removes the cookie): a label press says so and is undone
        page.goto(url)
        ctx.clear_cookies()
        page.locator("article.cot").first.focus()
        page.keyboard.press("1")
        from playwright.sync_api import expect

        expect(page.locator("#save-status")).to_contain_text("session has ended", timeout=10_000)
        assert page.locator("article.cot").first.locator('[data-key="Incorrect reasoning"]').get_attribute("aria-pressed") == "false"
        ctx.close()
