"""Regenerate the counts table of docs/datasets.md from the dataset registry.

    PYTHONPATH=src python docs/gen_datasets.py          # rewrite the table in place
    PYTHONPATH=src python docs/gen_datasets.py --check  # exit 1 when the file is out of date

The table sits between the BEGIN/END markers; everything else in the file is hand-written.  Counts come
from each module's ``SPEC.counts`` (which tests/datasets/test_all.py checks against real conversions) and
``SPEC.paper_counts`` (Table 6 of the ThoughtSource paper).
"""

from __future__ import annotations

import sys
from pathlib import Path

DOC = Path(__file__).resolve().parent / "datasets.md"
BEGIN = "<!-- BEGIN GENERATED TABLE (docs/gen_datasets.py) -->"
END = "<!-- END GENERATED TABLE -->"


def table() -> str:
    from thoughtsource import datasets

    rows = [
        "| dataset | answer type | splits: samples we convert | total | Table 6 | difference | license |",
        "|---|---|---|---:|---:|---:|---|",
    ]
    for name in datasets.names():
        spec = datasets.spec(name)
        parts = []
        verified_total = 0
        for split in spec.splits:
            count = spec.counts.get(split)
            pinned = all(s.sha256 for s in spec.sources_for(split) if not s.optional)
            if count is None:
                parts.append(f"{split}: ?")
            elif pinned and spec.verified_on_real_data:
                parts.append(f"{split}: {count:,}")
                verified_total += count
            else:
                parts.append(f"{split}: ({count:,})†")
        paper = spec.paper_counts.get("total", sum(spec.paper_counts.values()))
        diff = verified_total - paper if paper else 0
        mark = "" if spec.verified_on_real_data else " ‡"
        rows.append(f"| {name}{mark} | {spec.answer_type} | {'; '.join(parts)} | {verified_total:,} | {paper:,} | "
                    f"{diff:+,} | {spec.license} |")
    rows += [
        "",
        "total = samples converted from raw files with a pinned sha256 (verified on this project's copies).  "
        "† the raw file could not be obtained: the count is the one its source documents, not verified.  "
        "‡ only tested on a synthetic fixture in the raw format (not verified on real data).",
    ]
    return "\n".join(rows)


def render(text: str) -> str:
    head, _, rest = text.partition(BEGIN)
    _, _, tail = rest.partition(END)
    return f"{head}{BEGIN}\n{table()}\n{END}{tail}"


def main() -> int:
    text = DOC.read_text(encoding="utf-8")
    if BEGIN not in text or END not in text:
        print(f"{DOC}: markers missing", file=sys.stderr)
        return 1
    new = render(text)
    if "--check" in sys.argv:
        if new != text:
            print(f"{DOC} is out of date: run PYTHONPATH=src python docs/gen_datasets.py", file=sys.stderr)
            return 1
        return 0
    DOC.write_text(new, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
