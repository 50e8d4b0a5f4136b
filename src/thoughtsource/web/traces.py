"""How the sample page shows a CoT: its thinking apart from its final answer, each with its length, long parts collapsed.

A reasoning model's CoT may carry its thought inline, between think tags (``<think>…</think>``), or cut off with a
``<think>`` that never closes; a backend of this package stores the thought alone as the CoT and marks it with a
``reasoning`` record (:func:`thoughtsource.reasoning.reasoning_info`).  :func:`trace_parts` cuts the CoT's sentences
(:func:`thoughtsource.web.similarity.segments`, the steps the annotator labels and the sentences the similarity
highlighting names) into parts: thinking, the final answer after it, other text outside the thinking, or, for a CoT
without a thought, the chain of thought itself.  Every sentence stays one step, in order, so step labels and
similarity pairs keep their indices; the tags are not shown as text: a sentence that is only a tag stays a (hidden)
step, a tag at the start or end of a sentence is dropped from what is shown.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Literal

from ..reasoning import DEFAULT_THINK_TAGS, ReasoningInfo
from .similarity import segments

#: A part longer than this many characters is shown collapsed, with a "show all" control.
COLLAPSE_CHARS = 2000

PartKind = Literal["thinking", "answer", "text", "cot"]
_OPEN, _CLOSE = DEFAULT_THINK_TAGS
_TAG = re.compile("|".join(re.escape(t) for t in DEFAULT_THINK_TAGS), re.IGNORECASE)
_WORDS = re.compile(r"\S+")


@dataclass(frozen=True)
class Piece:
    """A segment of the CoT as shown: a sentence (``index`` >= 0, one step) or the whitespace between two (-1).
    ``tag``: a sentence that is only think tags, kept as a hidden step so that the steps keep their numbers."""

    text: str
    index: int
    tag: bool = False


@dataclass
class TracePart:
    """One part of a CoT: ``thinking`` (``closed``: its end tag came), the final ``answer`` after the thinking,
    ``text`` outside the thinking before or between thoughts, or the whole ``cot`` of a CoT without a thought."""

    kind: PartKind
    pieces: list[Piece] = field(default_factory=list)
    closed: bool = True

    @property
    def text(self) -> str:
        return "".join(p.text for p in self.pieces if not p.tag).strip()

    @property
    def chars(self) -> int:
        return len(self.text)

    @property
    def words(self) -> int:
        return len(_WORDS.findall(self.text))

    @property
    def long(self) -> bool:
        return self.chars > COLLAPSE_CHARS

    @property
    def steps(self) -> int:
        return sum(1 for p in self.pieces if p.index >= 0)


def _trim(pieces: list[Piece]) -> list[Piece]:
    """The pieces without the whitespace before the first shown sentence and after the last (the text is shown with
    its line breaks); the hidden steps stay where they are."""
    shown = [i for i, p in enumerate(pieces) if p.index >= 0 and not p.tag]
    first, last = (shown[0], shown[-1]) if shown else (len(pieces), -1)
    return [p for i, p in enumerate(pieces) if p.index >= 0 or first < i < last]


def trace_parts(text: str, reasoning: ReasoningInfo | None = None) -> list[TracePart]:
    """The parts of CoT ``text`` in order; joined, their pieces hold every sentence of :func:`segments` once, in order.

    Without think tags the CoT is one part: ``thinking`` when ``reasoning`` says a reasoning model's thought was
    stored alone (``closed`` unless it was cut off), else ``cot``.  With tags: text before a ``<think>`` and between
    thoughts is ``text``, inside is ``thinking`` (not ``closed`` when its ``</think>`` never comes: cut off), after
    the last ``</think>`` is the final ``answer`` (kept, maybe empty, so that the page can say there is none).  An
    end tag before any start tag means the CoT began inside the thought (R1's chat template opens it in the prompt).
    """
    segs = segments(text)
    if not _TAG.search(text):
        if reasoning is not None:
            return [TracePart("thinking", [Piece(s.text, s.index) for s in segs], closed=not reasoning.truncated)]
        return [TracePart("cot", [Piece(s.text, s.index) for s in segs])]
    parts = [TracePart("text")]
    seen_thought = False

    def switch(tag: str) -> None:
        nonlocal seen_thought
        cur = parts[-1]
        if tag == _OPEN and cur.kind != "thinking":
            parts.append(TracePart("thinking", closed=False))
            seen_thought = True
        elif tag == _CLOSE and cur.kind == "thinking":
            cur.closed = True
            parts.append(TracePart("text"))
        elif tag == _CLOSE and not seen_thought:  # the CoT began inside the thought
            cur.kind, cur.closed, seen_thought = "thinking", True, True
            parts.append(TracePart("text"))
        # a second <think> inside a thought, or a stray </think> after one: nothing changes

    for seg in segs:
        tags = list(_TAG.finditer(seg.text)) if seg.index >= 0 else []
        if not tags:
            parts[-1].pieces.append(Piece(seg.text, seg.index))
            continue
        names = [m.group(0).lower() for m in tags]
        rest = _TAG.sub("", seg.text)
        if not rest.strip():
            # only tags: a hidden step, in the thought it opens or closes
            if names[0] == _CLOSE:
                parts[-1].pieces.append(Piece(seg.text, seg.index, tag=True))
                for t in names:
                    switch(t)
            else:
                for t in names:
                    switch(t)
                parts[-1].pieces.append(Piece(seg.text, seg.index, tag=True))
            continue
        # tags before the sentence's first word act before it, the others after it; a tag between words stays text
        k = 0
        while k < len(tags) and not seg.text[tags[k - 1].end() if k else 0 : tags[k].start()].strip():
            switch(names[k])
            k += 1
        start = tags[k - 1].end() if k else 0
        end = len(seg.text)
        trailing = len(tags)
        while trailing > k and not seg.text[tags[trailing - 1].end() : end].strip():
            trailing -= 1
            end = tags[trailing].start()
        parts[-1].pieces.append(Piece(seg.text[start:end].strip(), seg.index))
        for t in names[k:]:
            switch(t)

    last_thought = max((i for i, p in enumerate(parts) if p.kind == "thinking"), default=-1)
    out: list[TracePart] = []
    for i, p in enumerate(parts):
        p.pieces = _trim(p.pieces)
        if i > last_thought >= 0 and p.kind == "text":
            p.kind = "answer"
        if p.pieces or p.kind == "answer":
            out.append(p)
    return out
