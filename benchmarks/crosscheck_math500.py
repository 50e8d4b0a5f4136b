"""Cross-check: our ``math`` answer type, math-verify and OpenAI's PRM800K grader on the 500 MATH-500 reference solutions.

Each solution (``../shared/data/math500/test.jsonl``, field ``solution``) is scored against its gold (field ``answer``)
three ways, each as its authors use it:

- **ours**: ``extract(solution, "math", mode, source="cot")`` then ``is_correct(value, "math", gold)``;
- **math-verify**: ``verify(parse("$" + gold + "$"), parse(solution))`` (its README's call; it extracts by itself);
- **PRM800K**: ``grader.grade_answer(answer, gold)`` from ``openai/prm800k``'s ``grading/`` folder, on the answer its
  pipeline takes from a text: the line under the last ``# Answer`` line (PRM800K's own format), else the last
  ``\\boxed{}`` as Hendrycks' MATH code finds it (``rfind("\\boxed")``, then its braces).

Three times: on the solutions as MATH writes them (the answer in the last ``\\boxed{}``); rewritten in PRM800K's format
(that box unwrapped, and ``\\n\\n# Answer\\n\\n<gold>`` appended, as PRM800K's generator ends its solutions); and in
PRM800K's format with the answer line written otherwise, by ``benchmarks/bench_math.py``'s rewrites of each gold
(``\\dfrac``, ``0.5`` for ``\\frac12``, ``10080`` for ``10,\\!080``, no ``\\text{}``, a reversed set: the same answer;
a reversed tuple, flipped interval bounds, another value: a different one).  It prints the agreement of the three
verdicts (a table of counts per pattern), per rewrite how often each is right, and examples where they disagree.

The PRM800K grader is not part of this repository (nor a dependency): give the folder that holds ``grader.py`` and
``math_normalize.py`` (``prm800k/grading`` of a clone of https://github.com/openai/prm800k; it needs ``sympy`` and
``pylatexenc``).

Usage: ``PYTHONPATH=src python benchmarks/crosscheck_math500.py PATH/TO/prm800k/grading [--json out.json]``
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import signal
import sys
import types
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from thoughtsource.extract import extract, gold_value, is_correct

DATA = Path(os.environ.get("THOUGHTSOURCE_DATA") or Path(__file__).resolve().parents[2] / "shared" / "data")
TIMEOUT_S = 10  # per call of a grader (sympy can hang); a call that runs out counts as "wrong"


def load_grader(folder: Path) -> Callable[[str | None, str], bool]:
    """``grade_answer`` of the PRM800K ``grading`` folder (imported as the package ``grading`` it expects to be)."""
    if not (folder / "grader.py").is_file() or not (folder / "math_normalize.py").is_file():
        raise SystemExit(f"{folder} holds no grader.py and math_normalize.py (give openai/prm800k's prm800k/grading)")
    package = types.ModuleType("grading")
    package.__path__ = [str(folder)]
    sys.modules["grading"] = package
    return importlib.import_module("grading.grader").grade_answer  # type: ignore[no-any-return]


def hendrycks_last_boxed(text: str) -> str | None:
    """The content of the last ``\\boxed`` (else ``\\fbox``) as Hendrycks' MATH code reads it, None if none."""
    idx = text.rfind("\\boxed")
    if idx < 0:
        idx = text.rfind("\\fbox")
        if idx < 0:
            return None
    if text.startswith("\\boxed ", idx):
        return text[idx + len("\\boxed ") :].split("$")[0].strip()
    depth, start = 0, text.find("{", idx)
    if start < 0:
        return None
    for i in range(start, len(text)):
        if text[i] == "{":
            depth += 1
        elif text[i] == "}":
            depth -= 1
            if depth == 0:
                return text[start + 1 : i]
    return None


def prm800k_answer(text: str) -> str | None:
    """The answer PRM800K's pipeline takes: the first non-blank line under the last ``# Answer`` line, else the last
    box."""
    _, sep, tail = text.rpartition("\n# Answer\n")
    if sep:
        for line in tail.splitlines():
            if line.strip():
                return line.strip()
        return None
    return hendrycks_last_boxed(text)


def unboxed_prm800k_style(solution: str, gold: str) -> str:
    """The solution in PRM800K's format: its last box unwrapped, the answer on the line under ``# Answer``."""
    idx = solution.rfind("\\boxed{")
    content = hendrycks_last_boxed(solution)
    if idx >= 0 and content is not None:
        solution = solution[:idx] + content + solution[idx + len("\\boxed{") + len(content) + 1 :]
    return f"{solution.rstrip()}\n\n# Answer\n\n{gold}"


def with_timeout(fn: Callable[[], Any], default: Any) -> Any:
    def _raise(*_: Any) -> None:
        raise TimeoutError

    old = signal.signal(signal.SIGALRM, _raise)
    signal.alarm(TIMEOUT_S)
    try:
        return fn()
    except Exception:
        return default
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def score(texts: list[str], golds: list[str], grade: Callable[[str | None, str], bool]) -> list[dict[str, Any]]:
    from math_verify import parse, verify

    rows = []
    for i, (text, gold) in enumerate(zip(texts, golds, strict=True)):
        g = gold_value("math", [gold])
        row: dict[str, Any] = {"line": i + 1, "gold": gold}
        for mode in ("strict", "flexible"):
            e = extract(text, "math", mode=mode, source="cot")
            row[f"ours_{mode}_answer"] = e.value
            row[f"ours_{mode}"] = is_correct(e.value, "math", g)
        parsed = with_timeout(lambda text=text: parse(text), [])
        row["mv_answer"] = parsed[-1] if parsed else None
        row["math_verify"] = bool(with_timeout(lambda gold=gold, parsed=parsed: verify(parse(f"${gold}$"), parsed), False))
        answer = prm800k_answer(text)
        row["prm_answer"] = answer
        row["prm800k"] = bool(with_timeout(lambda answer=answer, gold=gold: grade(answer, gold), False))
        rows.append(row)
    return rows


def report(name: str, rows: list[dict[str, Any]]) -> dict[str, Any]:
    n = len(rows)
    print(f"\n## {name}: {n} solutions")
    right = {k: sum(r[k] for r in rows) for k in ("ours_strict", "ours_flexible", "math_verify", "prm800k")}
    print("right: " + ", ".join(f"{k} {v}/{n}" for k, v in right.items()))
    patterns = Counter((r["ours_strict"], r["math_verify"], r["prm800k"]) for r in rows)
    print("\n| ours (strict) | math-verify | PRM800K grader | solutions |\n|---|---|---|---|")
    for (o, m, p), c in sorted(patterns.items(), key=lambda kv: -kv[1]):
        print(f"| {'right' if o else 'wrong'} | {'right' if m else 'wrong'} | {'right' if p else 'wrong'} | {c} |")
    same_answer = sum(r["ours_strict_answer"] == r["prm_answer"] for r in rows)
    print(f"\nour strict answer is the PRM800K pipeline's answer string in {same_answer}/{n}")
    disagree = [r for r in rows if len({r["ours_strict"], r["math_verify"], r["prm800k"]}) > 1]
    for r in disagree[:12]:
        print(f"- line {r['line']}: gold {r['gold']!r}; ours {r['ours_strict_answer']!r} ({r['ours_strict']}), "
              f"math-verify {str(r['mv_answer'])!r} ({r['math_verify']}), PRM800K {r['prm_answer']!r} ({r['prm800k']})")
    return {"n": n, "right": right, "patterns": {f"{o}/{m}/{p}": c for (o, m, p), c in patterns.items()},
            "same_answer_string": same_answer, "disagreements": disagree}


def rewrites(records: list[dict[str, Any]]) -> list[tuple[str, str, str, bool, str]]:
    """(category, gold, prediction, equivalent, text) for bench_math's rewrites of each gold, the prediction written
    on the "# Answer" line of the solution in PRM800K's format (not its think-block cases: PRM800K has none)."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from bench_math import pairs

    out = []
    for r in records:
        for category, gold, pred, equivalent in pairs([r["answer"]]):
            if not category.startswith("think-block"):
                out.append((category, gold, pred, equivalent, unboxed_prm800k_style(r["solution"], pred)))
    return out


def report_rewrites(rows: list[dict[str, Any]], corpus: list[tuple[str, str, str, bool, str]]) -> dict[str, Any]:
    print(f"\n## PRM800K format, the answer line rewritten: {len(rows)} answers\n")
    print("| rewrite | same answer | n | ours right | math-verify right | PRM800K right |\n|---|---|---|---|---|---|")
    table: dict[str, dict[str, int]] = {}
    for row, (category, _, _, equivalent, _) in zip(rows, corpus, strict=True):
        t = table.setdefault(category, {"equivalent": equivalent, "n": 0, "ours": 0, "math_verify": 0, "prm800k": 0})
        t["n"] += 1
        for k, v in (("ours", row["ours_strict"]), ("math_verify", row["math_verify"]), ("prm800k", row["prm800k"])):
            t[k] += v == equivalent
    for category, t in table.items():
        print(f"| {category} | {'yes' if t['equivalent'] else 'no'} | {t['n']} | {t['ours']} | {t['math_verify']} | {t['prm800k']} |")
    total = {k: sum(t[k] for t in table.values()) for k in ("n", "ours", "math_verify", "prm800k")}
    print(f"| all | | {total['n']} | {total['ours']} | {total['math_verify']} | {total['prm800k']} |")
    split = [(row, c) for row, c in zip(rows, corpus, strict=True)
             if len({row["ours_strict"], row["math_verify"], row["prm800k"]}) > 1]
    for row, (category, gold, pred, equivalent, _) in split[:15]:
        print(f"- {category}: gold {gold!r}, answer line {pred!r} ({'same' if equivalent else 'different'}): ours "
              f"{row['ours_strict']}, math-verify {row['math_verify']} (read {str(row['mv_answer'])!r}), PRM800K {row['prm800k']}")
    return {"table": table, "total": total, "split": [dict(r, category=c[0], prediction=c[2]) for r, c in split]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("grading", type=Path, help="openai/prm800k's prm800k/grading folder (grader.py, math_normalize.py)")
    ap.add_argument("--data", type=Path, default=DATA / "math500" / "test.jsonl")
    ap.add_argument("--json", type=Path, help="write every verdict here")
    args = ap.parse_args()
    grade = load_grader(args.grading.resolve())
    records = [json.loads(line) for line in args.data.read_text().splitlines() if line.strip()]
    golds = [r["answer"] for r in records]
    results = {}
    for name, texts in (
        ("MATH format (last \\boxed{})", [r["solution"] for r in records]),
        ("PRM800K format (# Answer line)", [unboxed_prm800k_style(r["solution"], r["answer"]) for r in records]),
    ):
        results[name] = report(name, score(texts, golds, grade))
    corpus = rewrites(records)
    results["rewritten"] = report_rewrites(score([c[4] for c in corpus], [c[1] for c in corpus], grade), corpus)
    if args.json:
        args.json.write_text(json.dumps(results, indent=1, default=str))


if __name__ == "__main__":
    main()
