"""Admin-side review features with exact values: the adjudication page's confusion matrices and the final
label in the exports, blind review switched by the admin (and per server), the export of one input file,
and the progress per annotator on the agreement page.  Everything goes through the HTTP routes."""

from __future__ import annotations

import csv
import io
import itertools
import json
import re
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient

from thoughtsource.schema import model_name
from thoughtsource.web.data import Item, ServedData, cot_correct
from thoughtsource.web.db import STEP_KEY, CotRef
from thoughtsource.web.routes import blind_alias
from thoughtsource.web.similarity import highlighted, sentences

from .conftest import add_user, login, page_data

CotKey = tuple[str, str, str, str]  # dataset, split, sample id, CoT id


class Tables(HTMLParser):
    """Every ``<table>`` of a page: its attributes, caption and rows of cell texts (``th`` and ``td`` alike)."""

    def __init__(self, html: str) -> None:
        super().__init__()
        self.tables: list[dict[str, Any]] = []
        self._text: list[str] | None = None
        self.feed(html)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "table":
            self.tables.append({"attrs": dict(attrs), "caption": "", "rows": []})
        elif tag == "tr":
            self.tables[-1]["rows"].append([])
        elif tag in ("td", "th", "caption"):
            self._text = []

    def handle_endtag(self, tag: str) -> None:
        if tag in ("td", "th", "caption") and self._text is not None:
            text = " ".join("".join(self._text).split())
            if tag == "caption":
                self.tables[-1]["caption"] = text
            else:
                self.tables[-1]["rows"][-1].append(text)
            self._text = None

    def handle_data(self, data: str) -> None:
        if self._text is not None:
            self._text.append(data)


def _ref(it: Item, i: int) -> dict[str, str]:
    return {"dataset": it.dataset, "split": it.split, "sample_id": it.sample.id, "cot_id": it.sample.generated_cot[i].id}


def _put(client: TestClient, csrf: str, it: Item, i: int, key: str, value: object) -> None:
    r = client.put("/api/annotation", json={**_ref(it, i), "key": key, "value": value}, headers={"X-CSRF-Token": csrf})
    assert r.status_code == 200, r.text


def _confusions(html: str) -> dict[str, dict[str, Any]]:
    """``{label: {"caption": ..., "counts": [[int]]}}`` from the adjudication page's confusion tables."""
    out = {}
    for t in Tables(html).tables:
        if "confusion" in (t["attrs"].get("class") or "").split():
            header, *body = t["rows"]
            assert [row[0] for row in body] == header[1:]  # a square matrix, rows and columns the same values
            out[t["attrs"]["data-label"]] = {
                "caption": t["caption"],
                "values": header[1:],
                "counts": [[int(n) for n in row[1:]] for row in body],
            }
    return out


def _disagreements(html: str) -> list[tuple[str, str]]:
    return re.findall(r'<tr class="disagreement" data-cot-id="([^"]+)" data-key="([^"]+)">', html)


def _mixed_sample(served: ServedData, steps: int = 0) -> Item:
    """A sample with at least 7 CoTs of different models, some marked correct and some wrong; its first CoT
    has at least ``steps`` steps (sentences)."""
    return next(
        it
        for it in served.items
        if len(it.sample.generated_cot) >= 7
        and {cot_correct(c) for c in it.sample.generated_cot} >= {True, False}
        and len(sentences(it.sample.generated_cot[0].cot or "")) >= steps
    )


# --------------------------------------------------------------------------- 1. adjudication: confusion matrices
def test_adjudication_confusion_matrices_count_each_pair_and_the_final_label_is_exported(app, served) -> None:
    for name in ("alice", "bob"):
        add_user(app, name)
    add_user(app, "root", "admin")
    it = _mixed_sample(served, steps=4)
    alice, a = login(app, "alice")
    bob, b = login(app, "bob")
    # "Too verbose" per CoT, (alice, bob); None = annotated the CoT (marked reviewed) without setting the label
    pattern: list[tuple[bool | None, bool | None]] = [(True, True), (True, False), (False, True), (None, None), (True, True)]
    for i, pair in enumerate(pattern):
        for (client, csrf), value in zip(((alice, a), (bob, b)), pair, strict=True):
            _put(client, csrf, it, i, "reviewed", True)
            if value is not None:
                _put(client, csrf, it, i, "Too verbose", value)
    # CoT 1 only: alice sets the label then clears it again (null deletes: counts as "no")
    _put(alice, a, it, 1, "Incorrect reasoning", True)
    _put(alice, a, it, 1, "Incorrect reasoning", None)
    _put(bob, b, it, 3, "Incorrect reasoning", True)  # CoT 3: alice no, bob yes
    _put(alice, a, it, 5, "Too verbose", True)  # CoT 5: alice alone, not a pair anywhere
    # step labels of CoT 0: step 0 both +1, step 1 alice +1 / bob 0, step 2 both -1; step 3 only alice
    for client, csrf, labels in ((alice, a, [1, 1, -1, 0]), (bob, b, [1, 0, -1])):
        for step, label in enumerate(labels):
            r = client.put("/api/steps", json={**_ref(it, 0), "step": step, "label": label}, headers={"X-CSRF-Token": csrf})
            assert r.status_code == 200, r.text
    root, rc = login(app, "root")
    html = root.get("/adjudicate").text
    matrices = _confusions(html)
    assert list(matrices) == [
        "Incorrect reasoning",
        "Insufficient knowledge",
        "Incorrect reading comprehension",
        "Too verbose",
        "step labels",
    ]
    # rows: alice (first by name), columns: bob; values yes/no
    assert matrices["Too verbose"] == {
        "caption": "Too verbose (5 pairs)",
        "values": ["true", "false"],
        "counts": [[2, 1], [1, 1]],
    }
    assert matrices["Incorrect reasoning"]["counts"] == [[0, 0], [1, 4]]
    assert matrices["Insufficient knowledge"]["counts"] == [[0, 0], [0, 5]]
    assert matrices["step labels"] == {
        "caption": "step labels (3 pairs)",
        "values": ["1", "0", "-1"],
        "counts": [[1, 1, 0], [0, 0, 0], [0, 0, 1]],
    }
    c = [x.id for x in it.sample.generated_cot]
    assert sorted(_disagreements(html)) == sorted(
        [(c[1], "Too verbose"), (c[2], "Too verbose"), (c[3], "Incorrect reasoning"), (c[0], STEP_KEY)]
    )
    assert "4 CoT labels where annotators disagree, 4 without a final label" in html

    # the admin decides "no" on CoT 1, then changes their mind to "yes": one final label, the last one
    for value in ("false", "true"):
        r = root.post(
            "/adjudicate", data={**_ref(it, 1), "key": "Too verbose", "value": value, "csrf_token": rc}, follow_redirects=False
        )
        assert r.status_code == 303 and r.headers["location"].startswith("/adjudicate?msg=")
        assert "final label saved" in root.get(r.headers["location"]).text
    html = root.get("/adjudicate").text
    assert "4 CoT labels where annotators disagree, 3 without a final label" in html
    assert _disagreements(html)[-1] == (c[1], "Too verbose")  # decided rows go last
    assert "final: <code>yes</code>" in html
    assert _confusions(html) == matrices  # the matrices count the annotators' judgements, not the final label
    assert [(r.ref.cot_id, r.key, r.value, r.annotator) for r in app.state.db.adjudications()] == [
        (c[1], "Too verbose", True, "root")
    ]

    body = root.get("/export?format=thoughtsource-json").json()
    sample = next(x for x in body[it.dataset][it.split] if x["id"] == it.sample.id)
    anns = {
        x["id"]: sorted((y["author"], y["key"], y["value"], y.get("adjudicated", False)) for y in x["annotations"])
        for x in sample["generated_cot"]
    }
    assert anns[c[1]] == [
        ("alice", "Too verbose", True, False),
        ("alice", "reviewed", True, False),
        ("bob", "Too verbose", False, False),
        ("bob", "reviewed", True, False),
        ("root", "Too verbose", True, True),
    ]
    assert not any(adj for cid, xs in anns.items() if cid != c[1] for *_, adj in xs)
    table = list(csv.reader(io.StringIO(root.get("/export?format=csv").text)))
    assert [(r[3], r[5], r[7], r[8]) for r in table if r[9] == "yes"] == [(c[1], "root", "Too verbose", "true")]
    # an annotator's own export carries their labels only, never the final ones
    mine = alice.get("/export?format=csv").text
    assert "root" not in mine and ",yes\r\n" not in mine


# --------------------------------------------------------------------------- 2. blind review
def _cot_page(client: TestClient, it: Item) -> tuple[str, list[str]]:
    html = client.get(f"/sample/{it.dataset}/{it.split}/{it.sample.id}").text
    order = page_data(html)["cots"]
    assert re.findall(r'<article class="cot card"[^>]* data-cot-id="([^"]+)"', html) == order
    return html, order


def _real(app, name: str, it: Item, shown: list[str]) -> list[str]:
    """The file ids of the CoTs a blind page names by their aliases (which only the server's secret maps back)."""
    user = app.state.db.user(name)
    real = {blind_alias(app, user, it, c.id): c.id for c in it.sample.generated_cot}
    return [real[a] for a in shown]


def _reveals(html: str, it: Item, served: ServedData) -> dict[str, bool]:
    """Which of model, trigger, prompt and correctness the sample page shows."""
    cots = it.sample.generated_cot
    return {
        "model": any(f'<span class="model">{model_name(c)}</span>' in html for c in cots)
        or any(m in html for m in served.facets["model"]),
        "trigger": any(f'<span class="tag">{t}</span>' in html for t in served.facets["trigger"]),
        "prompt": "Prompt</summary>" in html or "{instruction}" in html,
        "correct": any(m in html for m in ('class="mark ok"', 'class="mark bad"', 'class="answer ok"', 'class="answer bad"')),
    }


def test_blind_review_switched_by_the_admin_hides_models_and_shuffles_per_annotator(app, make_app, served) -> None:
    for name in ("alice", "bob"):
        add_user(app, name)
    add_user(app, "root", "admin")
    it = _mixed_sample(served)
    file_order = [c.id for c in it.sample.generated_cot]
    assert {model_name(c) for c in it.sample.generated_cot} >= {"command-xlarge-nightly", "flan-T5-xxl", "gpt-3.5-turbo"}
    alice, _ = login(app, "alice")
    bob, _ = login(app, "bob")
    root, rc = login(app, "root")
    everything = {"model": True, "trigger": True, "prompt": True, "correct": True}
    nothing = dict.fromkeys(everything, False)

    def check_open() -> None:
        for client in (alice, bob, root):
            html, order = _cot_page(client, it)
            assert _reveals(html, it, served) == everything and order == file_order
        marks = re.findall(r'<span class="mark (ok|bad)"', _cot_page(alice, it)[0])
        assert marks == [{True: "ok", False: "bad"}[cot_correct(c)] for c in it.sample.generated_cot]
        assert '<p class="count">600 samples' in alice.get("/samples?model=gpt-4").text
        assert alice.get("/export?format=csv").status_code == 200

    check_open()
    assert app.state.db.setting("blind") is None and "Turn blind review on" in root.get("/admin/data").text
    r = root.post("/admin/blind", data={"on": "true", "csrf_token": rc}, follow_redirects=False)
    assert r.status_code == 303 and app.state.db.setting("blind") is True
    assert '<strong id="blind-state">on</strong>' in root.get("/admin/data").text

    orders = {}
    for name, client in (("alice", alice), ("bob", bob)):
        html, aliases = _cot_page(client, it)
        assert _reveals(html, it, served) == nothing, name
        assert not set(aliases) & set(file_order)  # the file's ids (they can name the model) are not on the page
        assert _cot_page(client, it)[1] == aliases  # the same order on every visit
        order = _real(app, name, it, aliases)
        assert sorted(order) == sorted(file_order)
        orders[name] = order
        # the page names CoTs by shown position only: the file position (it groups CoTs by model) does not leak
        assert re.findall(r'<article class="cot card"[^>]* data-cot="(\d+)"', html) == [str(i) for i in range(len(order))]
        shown = {file_order.index(cid): k for k, cid in enumerate(order)}
        sim, open_sim = page_data(html)["similarity"], page_data(_cot_page(root, it)[0])["similarity"]
        assert sim["sentences"] == [open_sim["sentences"][file_order.index(cid)] for cid in order]
        # computed on the shown order (which CoT is "a" in a pair follows it, not the file order): the same values
        # for the same sentences, and the same sentences highlighted at every threshold
        def ends(a: int, sa: int, b: int, sb: int) -> frozenset:
            return frozenset({(a, sa), (b, sb)})

        opened = {ends(shown[a], sa, shown[b], sb): rest for a, sa, b, sb, *rest in open_sim["pairs"]}
        assert all(p[0] < p[2] for p in sim["pairs"]) and sim["pairs"] == sorted(sim["pairs"])
        assert all(opened.get(ends(*p[:4]), p[4:]) == p[4:] for p in sim["pairs"])
        for method, threshold in itertools.product(("tfidf", "jaccard"), (0.1, 0.3, 0.5, 0.8)):
            assert highlighted(sim, method, threshold) == {(shown[c], s) for c, s in highlighted(open_sim, method, threshold)}
        listing = client.get("/samples?model=gpt-4").text  # the model filter is ignored: every sample is listed
        assert '<p class="count">1302 samples' in listing and "<th>Models</th>" not in listing
        assert not any(m in listing for m in served.facets["model"])
        assert client.get("/export?format=csv").status_code == 403
    assert orders["alice"] != orders["bob"] and file_order not in orders.values()
    html, order = _cot_page(root, it)  # the admin sees everything in file order
    assert _reveals(html, it, served) == everything and order == file_order
    # a restarted server (same database) keeps the switch and each annotator's order
    again = make_app()
    alice2, _ = login(again, "alice")
    html, order = _cot_page(alice2, it)
    assert _real(again, "alice", it, order) == orders["alice"] and _reveals(html, it, served) == nothing

    r = root.post("/admin/blind", data={"on": "false", "csrf_token": rc}, follow_redirects=False)
    assert r.status_code == 303 and app.state.db.setting("blind") is False
    check_open()


def test_blind_review_per_server_cannot_be_switched_off_by_the_admin(make_app, served) -> None:
    app = make_app(blind=True)
    add_user(app, "alice")
    add_user(app, "root", "admin")
    it = _mixed_sample(served)
    app.state.db.set_setting("blind", False)
    alice, _ = login(app, "alice")
    root, _ = login(app, "root")
    html, order = _cot_page(alice, it)
    assert _reveals(html, it, served) == dict.fromkeys(("model", "trigger", "prompt", "correct"), False)
    assert sorted(_real(app, "alice", it, order)) == sorted(c.id for c in it.sample.generated_cot)
    assert _cot_page(alice, it)[1] == order
    data_page = root.get("/admin/data").text
    assert '<strong id="blind-state">on</strong> (set for this server with <code>serve --blind</code>)' in data_page
    assert 'action="/admin/blind"' not in data_page


# --------------------------------------------------------------------------- 3. export per input file
def _exported(body: dict) -> tuple[set[tuple[str, str, str]], set[CotKey], set[tuple[str, str, str, Any, bool]]]:
    """The samples, the CoTs and the annotations (CoT id, author, key, value, adjudicated) of an exported file."""
    samples, cots, anns = set(), set(), set()
    for d, splits in body.items():
        for s, xs in splits.items():
            for x in xs:
                samples.add((d, s, x["id"]))
                for c in x["generated_cot"]:
                    cots.add((d, s, x["id"], c["id"]))
                    for y in c["annotations"]:
                        anns.add((c["id"], y["author"], y["key"], json.dumps(y["value"]), y.get("adjudicated", False)))
    return samples, cots, anns


def test_export_of_one_input_file_has_exactly_its_samples_and_annotations(make_app, model_run_files: list[Path]) -> None:
    gpt4, cohere = (next(f for f in model_run_files if key in f.name) for key in ("gpt-4", "cohere"))
    data = ServedData.load([gpt4, cohere])
    app = make_app(data=data)
    own: list[tuple[set[tuple[str, str, str]], set[CotKey]]] = []
    for _, collection in data.sources:
        xs = list(collection.samples())
        own.append(({(d, s, x.id) for d, s, x in xs}, {(d, s, x.id, c.id) for d, s, x in xs for c in x.generated_cot}))
    assert len(own[0][0]) == 600 and len(own[1][0]) == 1002 and len(own[0][0] & own[1][0]) == 300
    assert not own[0][1] & own[1][1]

    def cot_in(file: int, *, shared: bool) -> tuple[Item, int]:
        other = own[1 - file][0]
        for it in data.items:
            if (it.key in other) == shared:
                for i, c in enumerate(it.sample.generated_cot):
                    if (*it.key, c.id) in own[file][1]:
                        return it, i
        raise AssertionError("no such CoT")

    s0, s1 = cot_in(0, shared=True), cot_in(1, shared=True)  # the GPT-4 and the Cohere CoT of shared samples
    g, c = cot_in(0, shared=False), cot_in(1, shared=False)  # a GPT-4-only and a Cohere-only sample
    for name in ("alice", "bob"):
        add_user(app, name)
    add_user(app, "root", "admin")
    alice, a = login(app, "alice")
    bob, b = login(app, "bob")
    root, rc = login(app, "root")
    _put(alice, a, *s0, "Too verbose", True)
    _put(alice, a, *g, "Incorrect reasoning", True)
    _put(alice, a, *s1, "comment", "the Cohere one")
    r = alice.put("/api/steps", json={**_ref(*c), "step": 0, "label": -1}, headers={"X-CSRF-Token": a})
    assert r.status_code == 200, r.text
    _put(bob, b, *s1, "Too verbose", False)
    _put(bob, b, *g, "reviewed", True)
    r = root.post(
        "/adjudicate", data={**_ref(*s1), "key": "Too verbose", "value": "true", "csrf_token": rc}, follow_redirects=False
    )
    assert r.status_code == 303
    cid = {k: it.sample.generated_cot[i].id for k, (it, i) in {"s0": s0, "s1": s1, "g": g, "c": c}.items()}
    steps = json.dumps(next(r.value for r in app.state.db.annotations(annotator="alice") if r.key == STEP_KEY))
    expected = [
        {
            (cid["s0"], "alice", "Too verbose", "true", False),
            (cid["g"], "alice", "Incorrect reasoning", "true", False),
            (cid["g"], "bob", "reviewed", "true", False),
        },
        {
            (cid["s1"], "alice", "comment", '"the Cohere one"', False),
            (cid["c"], "alice", STEP_KEY, steps, False),
            (cid["s1"], "bob", "Too verbose", "false", False),
            (cid["s1"], "root", "Too verbose", "true", True),
        },
    ]
    for file, (name, _) in enumerate(data.sources):
        r = root.get(f"/export?format=thoughtsource-json&file={file}")
        assert r.status_code == 200
        assert r.headers["content-disposition"] == f'attachment; filename="{name.rsplit(".", 1)[0]}.annotated.json"'
        samples, cots, anns = _exported(r.json())
        assert samples == own[file][0] and cots == own[file][1]
        assert anns == expected[file]
        # an annotator's export of the file: only her own annotations in it
        samples, cots, anns = _exported(alice.get(f"/export?format=thoughtsource-json&file={file}").json())
        assert samples == own[file][0] and cots == own[file][1]
        assert anns == {x for x in expected[file] if x[1] == "alice"}
    samples, cots, anns = _exported(root.get("/export?format=thoughtsource-json").json())  # without file: both
    assert samples == own[0][0] | own[1][0] and cots == own[0][1] | own[1][1] and anns == expected[0] | expected[1]
    assert root.get("/export?format=thoughtsource-json&file=2").status_code == 404
    assert '<a href="/export?format=thoughtsource-json&amp;file=1">' in root.get("/admin/data").text


# --------------------------------------------------------------------------- 4. progress per annotator
def _progress(html: str) -> dict[str, list[str]]:
    table = Tables(html).tables[0]
    header, *rows = table["rows"]
    assert header == ["Annotator", "Annotations", "CoTs", "Samples", "CoTs done", "Queue done"]
    return {row[0]: row[1:4] + row[5:] for row in rows}


def test_admin_progress_per_annotator_counts_exactly_what_was_labelled(app, served) -> None:
    for name in ("alice", "bob", "carol"):
        add_user(app, name)
    add_user(app, "root", "admin")
    first, second, third = [it for it in served.items if len(it.sample.generated_cot) >= 3][:3]
    n_first = len(first.sample.generated_cot)
    total = f"{served.total_cots}"
    samples = f"{len(served.items)}"
    assert (total, samples) == ("4014", "1302")
    root, _ = login(app, "root")
    assert _progress(root.get("/agreement").text) == {"No annotations yet.": []}
    # alice: every CoT of the first sample reviewed, two labels and a comment on its CoT 0, a label she set and
    # cleared, and one CoT of the second sample: n_first + 4 annotations on n_first + 1 CoTs of 2 samples
    alice, a = login(app, "alice")
    for i in range(n_first):
        _put(alice, a, first, i, "reviewed", True)
    _put(alice, a, first, 0, "Too verbose", True)
    _put(alice, a, first, 0, "Incorrect reasoning", True)
    _put(alice, a, first, 0, "comment", "long")
    _put(alice, a, first, 1, "Too verbose", True)
    _put(alice, a, first, 1, "Too verbose", None)
    _put(alice, a, second, 2, "preferred", True)
    # bob: two CoTs of the third sample, one with step labels
    bob, b = login(app, "bob")
    _put(bob, b, third, 0, "Insufficient knowledge", True)
    r = bob.put("/api/steps", json={**_ref(third, 1), "step": 0, "label": 1}, headers={"X-CSRF-Token": b})
    assert r.status_code == 200, r.text
    # an annotation of a CoT that is not served (an old import) is not counted
    app.state.db.upsert(CotRef("gone", "test", "x1", "c1"), "bob", "Too verbose", True)
    # queues: alice has the first and the second sample (the first finished), carol one untouched sample
    app.state.db.replace_assignments([(*first.key, "alice"), (*second.key, "alice"), (*third.key, "carol")])
    progress = _progress(root.get("/agreement").text)
    assert progress == {  # carol, assigned a sample but not started, is listed with her zeros
        "alice": [str(n_first + 4), f"{n_first + 1} / {total}", f"2 / {samples}", "1 / 2"],
        "bob": ["2", f"2 / {total}", f"1 / {samples}", "—"],
        "carol": ["0", f"0 / {total}", f"0 / {samples}", "0 / 1"],
    }
    assert re.search(
        rf'<tr><td>alice</td>.*?<meter min="0" max="{total}" value="{n_first + 1}">', root.get("/agreement").text, re.S
    )
    # bob finishes the CoTs of the third sample; alice deletes her comment
    for i in range(2, len(third.sample.generated_cot)):
        _put(bob, b, third, i, "reviewed", True)
    _put(alice, a, first, 0, "comment", "")
    n_third = len(third.sample.generated_cot)
    assert _progress(root.get("/agreement").text) == {
        "alice": [str(n_first + 3), f"{n_first + 1} / {total}", f"2 / {samples}", "1 / 2"],
        "bob": [str(n_third), f"{n_third} / {total}", f"1 / {samples}", "—"],
        "carol": ["0", f"0 / {total}", f"0 / {samples}", "0 / 1"],
    }
    assert bob.get("/agreement").status_code == 403
