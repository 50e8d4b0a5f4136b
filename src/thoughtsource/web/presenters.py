"""Presenters: the view models of the list and sample pages, built from the served data and the database without HTTP.

A handler parses and authorizes, then asks a presenter for its page's context and renders it; the presenter
decides what the viewer sees (blind review's aliases, order and hidden fields, the viewer's own annotations and
the visible ones of others, the neighbours in the filtered list).  Unit-testable with a :class:`Viewer`, a
:class:`ServedData` and an :class:`AnnotationDB`.
"""

from __future__ import annotations

import hashlib
import hmac
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, urlencode

from ..reasoning import reasoning_info
from ..schema import model_name
from . import auth
from .agreement import progress
from .data import Filters, Item, ServedData, cot_correct, sample_done
from .db import STEP_KEY, AnnotationDB, AnnotationRow, User
from .traces import trace_parts

if TYPE_CHECKING:
    from ..schema import GeneratedCot, Sample
    from .settings import ServeSettings

LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"


# --------------------------------------------------------------------------- links
def sample_path(it: Item) -> str:
    return "/sample/" + "/".join(quote(p, safe="") for p in (it.dataset, it.split, it.sample.id))


def sample_href(it: Item, f: Filters) -> str:
    """The sample's page, keeping the list's filters."""
    q = f.query()
    return sample_path(it) + ("?" + urlencode(q) if q else "")


# --------------------------------------------------------------------------- blind review
def blind_alias(key: bytes, user: User, it: Item, cid: str) -> str:
    """The name of CoT ``cid`` of sample ``it`` on ``user``'s pages and API during blind review: ``b-`` + 16 hex
    digits of an HMAC keyed with the server's secret (over the user id, the sample and the CoT id).  The annotator
    knows everything but the key, so neither the name nor the order (:func:`blind_order`) tells the model or the
    file position: the id of a CoT from a file can name its model ("gpt4-0001"), and before, the shuffle was seeded
    with the user and sample names only, which the annotator could recompute."""
    msg = "\0".join((str(user.id), it.dataset, it.split, it.sample.id, cid)).encode()
    return "b-" + hmac.new(key, msg, hashlib.sha256).hexdigest()[:16]


def blind_order(key: bytes, user: User, it: Item) -> list[int]:
    """The file positions of the sample's CoTs in the order ``user`` sees them during blind review: sorted by their
    :func:`blind_alias`, so shuffled with the server's secret and the same on every visit (the page, its data and
    the similarity API use it alike)."""
    names = [blind_alias(key, user, it, cid) for cid in it.cot_ids]
    return sorted(range(len(names)), key=names.__getitem__)


@dataclass(frozen=True)
class Viewer:
    """Who looks at a page: the user, whether blind review applies to them, and the key of its aliases."""

    user: User
    blind: bool
    blind_key: bytes

    def shown_id(self, it: Item, cid: str) -> str:
        return blind_alias(self.blind_key, self.user, it, cid) if self.blind else cid

    def order(self, it: Item) -> list[int]:
        """The file positions of the sample's CoTs in the order this viewer sees them (:func:`blind_order` during
        blind review, else the file order).  Everything the page and the API derive from the CoTs (cards, the
        similarity data with its pairs, their order and sides, tie-breaks) is computed from the CoTs taken in this
        order, never renumbered from the file order afterwards."""
        return blind_order(self.blind_key, self.user, it) if self.blind else list(range(len(it.cot_ids)))

    def shows_gold(self, settings: ServeSettings) -> bool:
        """Whether the viewer is shown the gold answer and the reference CoT (which tell which CoTs are right)."""
        return not self.blind or settings.blind_show_gold

    def select(self, data: ServedData, db: AnnotationDB, f: Filters, settings: ServeSettings) -> list[Item]:
        """The samples of the viewer's list filtered by ``f``: only by what the viewer is shown (:meth:`hide_filters`;
        the search reads the reference CoT only when the page shows it)."""
        self.hide_filters(f)
        return data.select(f, db.annotated_samples(auth.visible_annotator(self.user, None)), self.shows_gold(settings))

    def hide_filters(self, f: Filters) -> None:
        """No filtering by what blind review hides."""
        if self.blind:
            f.model = f.trigger = f.correct = ""


# --------------------------------------------------------------------------- list page
def work_queue(data: ServedData, db: AnnotationDB, user: User) -> tuple[list[Item], bool]:
    """The user's work queue: their assigned samples in order, or every served sample when none are assigned."""
    assigned = db.assigned(user.name).get(user.name)
    if assigned is None:
        return data.items, False
    return [it for key in assigned if (it := data.index.get(key)) is not None], True


def _list_row(it: Item, f: Filters, blind: bool, mine: set[tuple[str, str, str]]) -> dict[str, Any]:
    marks = [cot_correct(c) for c in it.sample.generated_cot]
    return {
        "item": it,
        "question": it.sample.question if len(it.sample.question) <= 220 else it.sample.question[:217] + "…",
        "models": [] if blind else sorted({model_name(c) for c in it.sample.generated_cot if model_name(c)}),
        "n_cots": len(it.sample.generated_cot),
        "n_correct": 0 if blind else sum(1 for m in marks if m is True),
        "n_wrong": 0 if blind else sum(1 for m in marks if m is False),
        "mine": it.key in mine,
        "href": sample_href(it, f),
    }


def _progress(data: ServedData, own_rows: list[AnnotationRow], q: list[Item], assigned: bool) -> dict[str, Any]:
    """The viewer's own progress over all served CoTs, and over their queue when they have one."""
    prog = progress(own_rows, data.total_cots, len(data.items))
    done = {r.ref for r in own_rows}
    return {
        "progress": prog[0] if prog else {"cots": 0, "samples": 0, "annotations": 0, "total_cots": data.total_cots,
                                          "total_samples": len(data.items)},
        "queue": {"assigned": assigned, "total": len(q), "done": sum(1 for it in q if sample_done(it, done))} if assigned else None,
    }


def list_page(data: ServedData, db: AnnotationDB, f: Filters, viewer: Viewer, settings: ServeSettings, page: int,
              notice: str) -> dict[str, Any]:
    """The context of ``list.html``: page ``page`` of the samples filtered by ``f``, the viewer's progress and queue."""
    user = viewer.user
    items = viewer.select(data, db, f, settings)
    mine = db.annotated_samples(user.name)
    size = settings.page_size
    pages_n = max(1, math.ceil(len(items) / size))
    page = min(page, pages_n)
    rows = [_list_row(it, f, viewer.blind, mine) for it in items[(page - 1) * size : page * size]]
    q, assigned = work_queue(data, db, user)
    query = f.query()
    return {
        "rows": rows, "f": f, "facets": data.facets, "total": len(items), "page": page, "pages": pages_n,
        "page_href": lambda p: "/samples?" + urlencode({**query, "page": p}), "blind": viewer.blind,
        **_progress(data, db.annotations(annotator=user.name), q, assigned),
        "notice": "Your queue is done: every assigned sample has your annotations." if notice == "queue-done" else "",
    }


# --------------------------------------------------------------------------- sample page
def _provenance(c: GeneratedCot, hidden: bool) -> dict[str, Any]:
    """What tells a CoT's model or correctness: blank during blind review."""
    if hidden:
        return {"model": "", "trigger": "", "instruction": "", "prompt": "", "correct": None}
    return {
        "model": "unknown model" if c.model is None else model_name(c),
        "trigger": c.cot_trigger or "",
        "instruction": c.instruction or "",
        "prompt": c.prompt_text or c.cot_trigger_template or "",
        "correct": cot_correct(c),
    }


def _cot_card(i: int, shown_id: str, c: GeneratedCot, mine: dict[str, Any], others: list[AnnotationRow],
              viewer: Viewer) -> dict[str, Any]:
    """One CoT's column: its text in steps, in parts (thinking apart from the final answer, :func:`trace_parts`), the
    viewer's labels, and what blind review leaves visible."""
    steps = mine.get(STEP_KEY) or {}
    parts = trace_parts(c.cot or "", reasoning_info(c))
    n_steps = sum(p.steps for p in parts)
    return {
        "index": i,
        "id": shown_id,
        **_provenance(c, viewer.blind),
        "parts": parts,
        "step_labels": (list(steps.get("labels") or []) + [None] * n_steps)[:n_steps],
        "first_error": steps.get("first_error"),
        "answers": [{"text": (a.answer or "").strip(), "correct": None if viewer.blind else a.correct_answer}
                    for a in c.answers],
        "mine": mine,
        "file_annotations": c.annotations if viewer.user.is_admin else [],
        "others": others,
    }


def cot_cards(it: Item, rows: list[AnnotationRow], viewer: Viewer) -> tuple[list[dict[str, Any]], dict[str, dict[str, Any]]]:
    """The sample's CoT columns in the viewer's order (:meth:`Viewer.order`: shuffled during blind review) and the
    viewer's own annotations per shown CoT id (the page's state, built in the same order)."""
    name = viewer.user.name
    cards: list[dict[str, Any]] = []
    state: dict[str, dict[str, Any]] = {}
    for shown, i in enumerate(viewer.order(it)):
        cid, c = it.cot_ids[i], it.sample.generated_cot[i]
        mine = {r.key: r.value for r in rows if r.annotator == name and r.ref.cot_id == cid}
        shown_id = viewer.shown_id(it, cid)
        state[shown_id] = mine
        others = [r for r in rows if r.annotator != name and r.ref.cot_id == cid]
        cards.append(_cot_card(shown, shown_id, c, mine, others, viewer))
    return cards, state


def neighbours(items: list[Item], it: Item) -> tuple[int | None, Item | None, Item | None]:
    """The sample's position in the filtered list and the samples before and after it (j/k); when the sample left
    the filter, the nearest ones in file order."""
    pos = next((i for i, y in enumerate(items) if y.key == it.key), None)
    if pos is not None:
        return pos, items[pos - 1] if pos > 0 else None, items[pos + 1] if pos + 1 < len(items) else None
    prev_it = next((y for y in reversed(items) if y.position < it.position), None)
    next_it = next((y for y in items if y.position > it.position), None)
    return None, prev_it, next_it


def choices(x: Sample, show_gold: bool) -> list[dict[str, Any]]:
    """The lettered answer choices; ``gold`` marks the right ones only when the gold may be shown."""
    return [{"letter": LETTERS[i] if i < 26 else str(i + 1), "text": ch, "gold": show_gold and ch in x.answer}
            for i, ch in enumerate(x.choices)]


def sample_page(data: ServedData, db: AnnotationDB, it: Item, f: Filters, viewer: Viewer, settings: ServeSettings,
                similarity: dict[str, Any], csrf: str) -> dict[str, Any]:
    """The context of ``sample.html``: question, gold data and all generated CoTs side by side, the viewer's
    annotations and the visible ones of others, and the links to the neighbours in the list filtered by ``f``.

    ``similarity``: :func:`similarity.pairwise` of the sample's CoTs taken in ``viewer.order(it)``.
    """
    user, x = viewer.user, it.sample
    visible = auth.visible_annotator(user, None)
    rows = db.annotations(dataset=it.dataset, split=it.split, sample_id=x.id, annotator=visible)
    cards, state = cot_cards(it, rows, viewer)
    items = viewer.select(data, db, f, settings)
    pos, prev_it, next_it = neighbours(items, it)
    page_data = {
        "ref": {"dataset": it.dataset, "split": it.split, "sample_id": x.id},
        "csrf": csrf,
        "cots": [c["id"] for c in cards],
        "labels": settings.labels,
        "state": state,
        "readonly": not user.can_write,
        "similarity": similarity,
        "threshold": settings.similarity_threshold,
        "prev": sample_href(prev_it, f) if prev_it else None,
        "next": sample_href(next_it, f) if next_it else None,
    }
    show_gold = viewer.shows_gold(settings)
    query = f.query()
    return {
        "it": it, "x": x, "cots": cards, "choices": choices(x, show_gold), "labels": settings.labels,
        "page_data": page_data, "show_gold": show_gold, "position": (pos + 1) if pos is not None else None,
        "total": len(items), "blind": viewer.blind, "back": "/samples" + ("?" + urlencode(query) if query else ""),
    }
