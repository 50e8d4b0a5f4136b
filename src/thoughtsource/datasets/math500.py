"""MATH-500: the 500 MATH test problems of Lightman et al. (2023), the benchmark reported for reasoning models.

Raw format (JSON lines): ``{"problem", "solution", "answer", "subject", "level"}``; ``solution`` is the MATH
reference solution with its final answer in the last ``\\boxed{}``, ``answer`` that answer in LaTeX
(``\\frac{14}{3}``, ``\\left( 3, \\frac{\\pi}{2} \\right)``, ``\\text{Evelyn}``).  Answer type ``math`` (LaTeX answers
compared with math-verify, see :func:`thoughtsource.extract.math_equal`); reference CoT: the solution's lines;
``subject`` (one of the 7 MATH subjects) and ``level`` (1-5) are kept on the sample.  Ids:
``math500-test-<line number>`` (1-based; the file has no MATH ``unique_id``).  One split, ``test``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from ..schema import Sample
from ._base import DatasetSpec, SourceFile
from ._parse import split_lines
from ._records import iter_jsonl, require

SPEC = DatasetSpec(
    name="math500",
    description="500 competition math problems (MATH test subset of Lightman et al.) with LaTeX answers, "
    "the standard benchmark for reasoning models.",
    homepage="https://github.com/openai/prm800k",
    citation="""@inproceedings{hendrycks2021math,
  title={Measuring Mathematical Problem Solving With the {MATH} Dataset},
  author={Hendrycks, Dan and Burns, Collin and Kadavath, Saurav and Arora, Akul and Basart, Steven and Tang, Eric and
          Song, Dawn and Steinhardt, Jacob},
  booktitle={NeurIPS Datasets and Benchmarks},
  year={2021}
}
@article{lightman2023verify,
  title={Let's Verify Step by Step},
  author={Lightman, Hunter and Kosaraju, Vineet and Burda, Yura and Edwards, Harri and Baker, Bowen and Lee, Teddy and
          Leike, Jan and Schulman, John and Sutskever, Ilya and Cobbe, Karl},
  journal={arXiv preprint arXiv:2305.20050},
  year={2023}
}""",
    license="MIT",
    answer_type="math",
    splits=("test",),
    sources=(
        SourceFile(
            "math500/test.jsonl",
            url="https://raw.githubusercontent.com/jincan333/MAS-TTS/ae8f961818d4/data/math500/test.jsonl",
            sha256="34943b1a3660c7dc63c7bc89b5ecefc0ffdeeee32501c2ad161cdec34d7a4b4c",
            size=420439,
            format="jsonl",
        ),
    ),
    converter_version=1,
    counts={"test": 500},
)


def convert(files: dict[str, Path], split: str) -> Iterator[Sample]:
    path = files["math500/test.jsonl"]
    for where, rec in iter_jsonl(path, "math500", split):
        rid = f"math500-{split}-{where.line}"
        where = where.at(record=rid)
        problem = require(rec, "problem", where, str)
        solution = require(rec, "solution", where, str)
        answer = require(rec, "answer", where, str)
        subject = require(rec, "subject", where, str)
        level = require(rec, "level", where, int)
        if not answer.strip():
            raise where.error("empty answer", field="answer")
        yield Sample(
            id=rid,
            question=problem.strip(),
            type="math",
            cot=split_lines(solution),
            answer=[answer.strip()],
            subject=subject,  # type: ignore[call-arg]  # kept as extra fields of the sample
            level=level,  # type: ignore[call-arg]
        )
