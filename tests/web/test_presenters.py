"""The sample page's presenter, without HTTP: the real merged model runs, a real annotation database, a viewer."""

from __future__ import annotations

from pathlib import Path

from thoughtsource.schema import model_name
from thoughtsource.web import presenters
from thoughtsource.web.app import ServeSettings
from thoughtsource.web.data import Filters, ServedData
from thoughtsource.web.db import STEP_KEY, AnnotationDB, User
from thoughtsource.web.presenters import Viewer, neighbours, sample_page
from thoughtsource.web.similarity import pairwise

KEY = b"k" * 32


def _setup(tmp_path: Path, served: ServedData) -> tuple[AnnotationDB, ServeSettings, User, User]:
    db = AnnotationDB(tmp_path / "a.sqlite")
    alice = db.add_user("alice", "h", "annotator")
    root = db.add_user("root", "h", "admin")
    return db, ServeSettings(files=served.files, db=db.path), alice, root


def _multi_cot_item(served: ServedData):
    return next(it for it in served.items if len(it.sample.generated_cot) >= 3 and it.sample.choices)


def test_the_page_shows_cots_in_file_order_with_own_and_visible_annotations(tmp_path: Path, served: ServedData) -> None:
    db, settings, alice, root = _setup(tmp_path, served)
    it = _multi_cot_item(served)
    first, second = (served.cot_ref(it.dataset, it.split, it.sample.id, cid) for cid in it.cot_ids[:2])
    db.upsert(first, "alice", settings.labels[0], True)
    db.set_step(first, "alice", 5, 0, label=1)
    db.upsert(second, "root", "comment", "look again")
    sim = pairwise([c.cot or "" for c in it.sample.generated_cot])

    page = sample_page(served, db, it, Filters(), Viewer(alice, False, KEY), settings, sim, csrf="t")
    cards = page["cots"]
    assert [c["id"] for c in cards] == it.cot_ids and [c["index"] for c in cards] == list(range(len(cards)))
    assert cards[0]["mine"][settings.labels[0]] is True and cards[0]["mine"][STEP_KEY]["labels"][0] == 1
    assert cards[0]["step_labels"][0] == 1 and len(cards[0]["step_labels"]) == sum(p.steps for p in cards[0]["parts"])
    assert cards[1]["others"] == []  # an annotator sees only their own annotations
    assert [c["model"] for c in cards] == [model_name(c) if c.model is not None else "unknown model"
                                          for c in it.sample.generated_cot]
    assert page["page_data"]["state"][it.cot_ids[0]] == cards[0]["mine"] and page["page_data"]["similarity"] is sim
    assert page["page_data"]["readonly"] is False and page["page_data"]["csrf"] == "t" and page["show_gold"] is True
    assert [ch["gold"] for ch in page["choices"]] == [ch in it.sample.answer for ch in it.sample.choices]
    assert page["total"] == len(served.items) and page["position"] == served.items.index(it) + 1

    as_admin = sample_page(served, db, it, Filters(), Viewer(root, False, KEY), settings, sim, csrf="t")
    assert [(r.annotator, r.key) for r in as_admin["cots"][1]["others"]] == []  # root's own row is "mine", not "others"
    assert as_admin["cots"][1]["mine"] == {"comment": "look again"}
    assert [(r.annotator, r.key) for r in as_admin["cots"][0]["others"]] == [("alice", settings.labels[0]),
                                                                             ("alice", STEP_KEY)]


def test_blind_review_hides_models_renames_and_reorders_the_cots(tmp_path: Path, served: ServedData) -> None:
    db, settings, alice, _ = _setup(tmp_path, served)
    it = _multi_cot_item(served)
    order = presenters.blind_order(KEY, alice, it)
    assert Viewer(alice, True, KEY).order(it) == order and Viewer(alice, False, KEY).order(it) == list(range(len(order)))
    sim = pairwise([it.sample.generated_cot[i].cot or "" for i in order])  # computed in the shown order
    f = Filters(model="gpt-4", q="")
    page = sample_page(served, db, it, f, Viewer(alice, True, KEY), settings, sim, csrf="")
    cards = page["cots"]
    assert [c["id"] for c in cards] == [presenters.blind_alias(KEY, alice, it, it.cot_ids[i]) for i in order]
    assert [c["index"] for c in cards] == list(range(len(cards)))  # shown positions, never file positions
    assert all(c["model"] == "" and c["trigger"] == "" and c["correct"] is None for c in cards)
    assert f.model == "" and page["blind"] is True and page["show_gold"] is False
    assert not any(ch["gold"] for ch in page["choices"])
    assert page["page_data"]["similarity"] is sim
    assert list(page["page_data"]["state"]) == [c["id"] for c in cards]  # the state in the shown order too
    # another annotator sees other names (the key covers the user)
    bob = db.add_user("bob", "h", "annotator")
    assert presenters.blind_alias(KEY, bob, it, it.cot_ids[0]) != presenters.blind_alias(KEY, alice, it, it.cot_ids[0])


def test_neighbours_fall_back_to_file_order_when_the_sample_left_the_filter(served: ServedData) -> None:
    items = served.items[:10]
    assert neighbours(items, items[3]) == (3, items[2], items[4])
    assert neighbours(items, items[0]) == (0, None, items[1])
    kept = [items[1], items[5]]
    assert neighbours(kept, items[3]) == (None, items[1], items[5])


def test_the_list_page_pages_the_filtered_samples_and_counts_the_queue(tmp_path: Path, served: ServedData) -> None:
    db, settings, alice, _ = _setup(tmp_path, served)
    page = presenters.list_page(served, db, Filters(), Viewer(alice, False, KEY), settings, 10_000, "")
    n = len(served.items)
    assert (page["total"], page["pages"], page["page"]) == (n, -(-n // 25), -(-n // 25))  # a page past the end: the last
    assert [r["item"] for r in page["rows"]] == served.items[(page["page"] - 1) * 25:]
    assert page["queue"] is None and page["progress"]["cots"] == 0 and page["page_href"](2).endswith("page=2")
    first = page["rows"][0]["item"]
    assert page["rows"][0]["models"] == sorted({model_name(c) for c in first.sample.generated_cot if model_name(c)})

    queue = served.items[:3]
    db.replace_assignments([(it.dataset, it.split, it.sample.id, "alice") for it in queue])
    for cid in queue[1].cot_ids:  # every CoT of the second sample annotated: that sample is done
        db.upsert(served.cot_ref(queue[1].dataset, queue[1].split, queue[1].sample.id, cid), "alice", "reviewed", True)
    f = Filters(model="gpt-4")
    page = presenters.list_page(served, db, f, Viewer(alice, True, KEY), settings, 1, "queue-done")
    assert page["queue"] == {"assigned": True, "total": 3, "done": 1} and f.model == ""  # blind: no model filter
    assert all(r["models"] == [] and r["n_correct"] == r["n_wrong"] == 0 for r in page["rows"])
    assert page["rows"][1]["mine"] is True and page["notice"].startswith("Your queue is done")
    assert presenters.work_queue(served, db, alice) == (queue, True)
