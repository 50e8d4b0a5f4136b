"""Agreement against a hand-computed example (Krippendorff's alpha by its coincidence matrix, Cohen's kappa by hand)."""

from __future__ import annotations

import math

import pytest

from thoughtsource.web.agreement import agreement, cohen_kappa, krippendorff_alpha, truthy
from thoughtsource.web.db import AnnotationRow, CotRef

LABEL = "Incorrect reasoning"


def row(n: int, unit: str, annotator: str, key: str, value, sample: str | None = None) -> AnnotationRow:
    ref = CotRef("worldtree", "test", sample or f"s-{unit}", unit)
    return AnnotationRow(n, ref, annotator, key, value, "2026-01-01", "2026-01-01")


def example_rows() -> list[AnnotationRow]:
    """Five CoTs u1..u5; label values  u1: A=1 B=1 | u2: A=0 B=1 C=0 | u3: A=0 B=0 | u4: A=1 C=1 | u5: B=0 C=1.

    A "0" is an annotator who annotated the CoT (here: marked it reviewed) without setting the label.
    By hand, the coincidence matrix is o00=3, o01=o10=2, o11=4 (n=11, n0=5, n1=6), so
    D_o = 4/11, D_e = 2*5*6/(11*10) = 6/11 and alpha = 1 - (4/11)/(6/11) = 1/3.
    Kappa A-B over u1,u2,u3: p_o = 2/3, p_e = 1/3*2/3 + 2/3*1/3 = 4/9, kappa = (2/9)/(5/9) = 0.4;
    A-C over u2,u4: perfect, 1.0;  B-C over u2,u5: always disagree with p_e = 1/2, kappa = -1.0.
    Preferred (separate rows): sample P1 both star c1, sample P2 A stars c1 and B c2: alpha = 1 - (2/4)/(2*3*1/(4*3)) = 0, kappa = 0.
    """
    vals = {"u1": {"A": True, "B": True}, "u2": {"A": False, "B": True, "C": False}, "u3": {"A": False, "B": False},
            "u4": {"A": True, "C": True}, "u5": {"B": False, "C": True}}
    rows = []
    for unit, byann in vals.items():
        for ann, v in byann.items():
            rows.append(row(len(rows) + 1, unit, ann, LABEL if v else "reviewed", True))
    rows.append(row(len(rows) + 1, "x1", "A", "Too verbose", True))  # a CoT only A annotated: not a unit
    return rows


def preferred_rows() -> list[AnnotationRow]:
    return [row(90, "c1", "A", "preferred", True, "P1"), row(91, "c1", "B", "preferred", True, "P1"),
            row(92, "c1", "A", "preferred", True, "P2"), row(93, "c2", "B", "preferred", True, "P2")]


def test_alpha_and_kappa_match_the_hand_computed_example() -> None:
    results = {r.label: r for r in agreement(example_rows(), [LABEL])}
    r = results[LABEL]
    assert r.units == 5
    assert r.annotators == ["A", "B", "C"]
    assert r.alpha == pytest.approx(1 / 3)
    kappas = {(k.a, k.b): (k.units, k.kappa) for k in r.kappas}
    assert kappas[("A", "B")] == (3, pytest.approx(0.4))
    assert kappas[("A", "C")] == (2, pytest.approx(1.0))
    assert kappas[("B", "C")] == (2, pytest.approx(-1.0))
    assert r.positive == 6

    assert results["preferred"].units == 0 and results["preferred"].alpha is None
    pref = {r.label: r for r in agreement(preferred_rows())}["preferred"]
    assert pref.units == 2
    assert pref.alpha == pytest.approx(0.0)
    assert [(k.a, k.b, k.units, k.kappa) for k in pref.kappas] == [("A", "B", 2, pytest.approx(0.0))]

    # "Too verbose" was set only on a CoT with one annotator, and never elsewhere: all units say "no" -> undefined
    tv = results["Too verbose"]
    assert tv.units == 5 and tv.alpha is None and all(k.kappa is None for k in tv.kappas)


def test_krippendorff_package_agrees_with_the_textbook_example() -> None:
    # Krippendorff (2011), "Computing Krippendorff's Alpha-Reliability", nominal example with missing values:
    # 4 coders, 12 units; alpha_nominal = 0.743.
    data = [
        [1, 2, 3, 3, 2, 1, 4, 1, 2, None, None, None],
        [1, 2, 3, 3, 2, 2, 4, 1, 2, 5, None, 3],
        [None, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, None],
        [1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, None],
    ]
    matrix = {u: {f"c{i}": data[i][u] for i in range(4) if data[i][u] is not None} for u in range(12)}
    assert krippendorff_alpha(matrix) == pytest.approx(0.743, abs=5e-4)


def test_undefined_cases_are_none_not_nan() -> None:
    assert krippendorff_alpha({}) is None
    assert krippendorff_alpha({"u": {"a": 1, "b": 1}, "v": {"a": 1, "b": 1}}) is None
    assert cohen_kappa([True, True], [True, True]) is None
    k = cohen_kappa([True, False, True], [True, False, False])
    assert k is not None and not math.isnan(k)


def test_original_annotator_values_are_read_as_booleans() -> None:
    assert truthy("true") and truthy("True") and truthy(True)
    assert not truthy("false") and not truthy(False) and not truthy("")
