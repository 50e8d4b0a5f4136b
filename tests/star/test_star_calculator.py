"""Calculator-executed rationales (:mod:`thoughtsource.star.calculator`): the parser refuses anything but arithmetic,
the decoding loop inserts results and keeps other "=", gold rationales execute to gold on the real files, the verified
filter (:func:`~thoughtsource.star.verify.verify_calc`) rejects what it must, and the transformers engine and a real
``serve-model`` process give byte-identical texts.

Gold rationales on the real files (``test_gold_rationales_execute_to_gold_on_the_real_files``): MAWPS 1,908 of 1,921
(13 fail: 8 raw records whose equation does not give their answer, 5 stored rounded, e.g. 0.3333 * 0.5 for 0.165),
ASDiv-A 1,190 of 1,218 (28 fail: divisions whose answer is a floor or ceiling, ``200/28=7 r4``), SVAMP 998 of
1,000 (chal-555 is a bare number, chal-680's equation gives 5 for its answer 1), GSM8K train 6,999 of 7,473 and test
1,208 of 1,319 (the last annotation is not the answer, or an annotation the calculator refuses: ``560//10``, a
variable).  Of those that execute, the grounded filter passes every MAWPS and ASDiv-A one and all but one SVAMP one
(chal-50: 415 - 149, where 149 is in no question text).
"""

from __future__ import annotations

import asyncio
import os
import sys
from fractions import Fraction
from pathlib import Path

import pytest

from thoughtsource.backends import Completion, Request
from thoughtsource.datasets._parse import parse_infix
from thoughtsource.errors import ConfigError
from thoughtsource.star.calculator import (
    CalculatorBackend,
    evaluate,
    expression_rationale,
    find_annotations,
    gold_rationale,
    leaf_operands,
    number_text,
    open_expression,
)
from thoughtsource.star.verify import verify_calc

SRC = str(Path(__file__).resolve().parents[2] / "src")


# --------------------------------------------------------------------------- the parser
@pytest.mark.parametrize("expr, value", [
    ("48/2", 24), ("36-12", 24), ("1+2*3", 7), ("(1+2)*3", 9), ("7-1/6", Fraction(41, 6)), ("30/1/6", 5),
    ("0.1+0.2", Fraction(3, 10)), (".5*4", 2), (" 3 + 4 ", 7), ("19-(-15)", 34), ("(23/3)*3", 23), ("-3*+2", -6),
])
def test_the_calculator_computes_exactly(expr: str, value: Fraction | int) -> None:
    assert evaluate(expr) == value


@pytest.mark.parametrize("expr", [
    "", "x+1", "__import__('os').system('id')", "2**3", "2^3", "9**9**9**9", "1e999", "2(3)", "1 1/2", "3%", "1,000",
    "560//10", "1/0", "1/(2-2)", "((((((((((((((((((1))))))))))))))))))", "(" * 5000 + "1" + ")" * 5000, "9" * 25,
    "99999999999*99999999999", "*".join(["999999"] * 30), "1+" * 150 + "1", "٣+1", "1_000", "3\n+4", "1.", "5 5",
    "(1", "1)", "0x10", "inf", "nan", "True", "abs(-1)", "1;2", "'1'",
])
def test_the_calculator_refuses_anything_but_bounded_arithmetic(expr: str) -> None:
    """Names, powers, implicit products, division by zero, nesting past 16, numbers or results past 20 digits, more
    than 200 characters, non-ASCII digits: None (no result inserted), never an exception."""
    assert evaluate(expr) is None
    assert leaf_operands(expr) is None


def test_results_print_as_integers_decimals_or_fractions() -> None:
    assert [number_text(Fraction(v)) for v in (24, -3, "5/2", "1/8", "23/3", "-7/4", "1/3")] == \
        ["24", "-3", "2.5", "0.125", "23/3", "-1.75", "1/3"]
    assert evaluate("24.0") == 24 and number_text(evaluate("12.50*2")) == "25"  # type: ignore[arg-type]


def test_operands_read_a_quotient_of_two_numbers_as_one_fraction_or_two_numbers() -> None:
    assert leaf_operands("(23/3)*3") == [(23, 3), 3]
    assert leaf_operands("48/2") == [(48, 2)]
    assert leaf_operands("6/2/3") == [(6, 2), 3] and leaf_operands("2*3/4") == [2, 3, 4]
    assert leaf_operands("19-(-15)") == [19, -15]


def test_an_open_annotation_is_found_at_the_end_only() -> None:
    assert open_expression("so 48/2 = <<48/2") == "48/2"
    assert open_expression("<<1+1=2>> and 3") is None and open_expression("no annotation") is None


# --------------------------------------------------------------------------- gold rationales
def test_an_equation_becomes_annotation_lines_innermost_first() -> None:
    lines, value = expression_rationale(parse_infix("( ( 36.0 - 12.0 ) / 6.0 )"))
    assert lines == ["<<36-12=24>>", "<<24/6=4>>"] and value == 4
    lines, value = expression_rationale(parse_infix("( 19.0 - ( 4.0 - 19.0 ) )"))
    assert lines == ["<<4-19=-15>>", "<<19-(-15)=34>>"] and value == 34
    assert expression_rationale(parse_infix("( 46.0 / 6.0 )")) == (["<<46/6=23/3>>"], Fraction(23, 3))
    assert gold_rationale(parse_infix("8.0")) == ("", None)  # a bare number: no operation


def test_gsm8k_annotations_are_executed_again_and_a_refused_one_leaves_no_value() -> None:
    text, value = gold_rationale("She has 10/3 = <<10/3=3.33>>3.33 cups.\nSo 2*.5=<<2*.5=1>>1 left.")
    assert text == "She has 10/3 = <<10/3=10/3>>3.33 cups.\nSo 2*.5=<<2*.5=1>>1 left." and value == 1
    assert gold_rationale("It is 560//10 = <<560//10=56>>56")[1] is None


@pytest.mark.slow
def test_gold_rationales_execute_to_gold_on_the_real_files(shared_data: Path) -> None:
    from thoughtsource.datasets import equations, load
    from thoughtsource.extract import gold_value, is_correct

    expected = {("mawps", "train"): (1921, 1908, 0), ("asdiv", "train"): (1218, 1190, 0), ("svamp", "train"): (1000, 998, 1),
                ("gsm8k", "test"): (1319, 1208, None)}
    for (name, split), (total, executing, ungrounded) in expected.items():
        samples = load(name, split, shared_data)[split]
        found = equations(name, split, shared_data)
        ok, rejected = 0, []
        for s in samples:
            text, value = gold_rationale(found[s.id])
            if value is None or not is_correct(float(value), "number", gold_value("number", [s.answer[0]])):
                continue
            ok += 1
            question = None if name == "gsm8k" else s.question
            if (why := verify_calc(f"{text}\nThe answer is {s.answer[0]}.", s.answer[0], question=question)) is not None:
                rejected.append((s.id, why))
        assert (len(samples), ok) == (total, executing), name
        if ungrounded is not None:
            assert len(rejected) == ungrounded, rejected
    assert rejected == [("gsm8k-test-411", "false statement: $3/2 = $1.50+$3.00"),
                        ("gsm8k-test-502", "false statement: 364 / 4 = 273"),
                        ("gsm8k-test-738", "false statement: 14 plus 4 equals 30")]


# --------------------------------------------------------------------------- the verified filter
QUESTION = "There are 36 apples. 12 are eaten. The rest are shared among 6 kids. How many does each kid get?"
GOOD = "<<36-12=24>>\n<<24/6=4>>\nThe answer is 4."


@pytest.mark.parametrize("text, reason", [
    (GOOD, None),
    ("<<36-13=23>>\n<<23/6=23/6>>\nThe answer is 4.", "number not from the question: 13 in <<36-13=23>>"),
    ("<<36-12=24>>\n<<24/5=4.8>>\nThe answer is 4.8.", "number not from the question: 24/5 in <<24/5=4.8>>"),
    ("<<36-12=24>>\n<<24/8=3>>\nThe answer is 3.", "the executed answer 3 is not the gold answer 4"),
    ("<<36-12=24>>\n<<24/8=3>>\nThe answer is 4.", "the final answer 4 is not the executed answer 3"),
    ("<<36-12=25>>\n<<25/6=4>>\nThe answer is 4.", "<<36-12=25>> is not the calculator's result 24"),
    ("<<36-12**1=24>>\n<<24/6=4>>\nThe answer is 4.", "the calculator refuses <<36-12**1=24>>"),
    ("<<36-12=24>>\n<<24/6=", "an operation is left open (<< without >>)"),
    ("<<36-12 <<36-12=24>>\n<<24/6=4>>\nThe answer is 4.", "a malformed operation (<< or >> outside <<expr=result>>)"),
    ("<<36-12=24>>>>\n<<24/6=4>>\nThe answer is 4.", "a malformed operation (<< or >> outside <<expr=result>>)"),
    ("36 - 12 = 24, 24 / 6 = 4. The answer is 4.", "no calculator operation"),
    ("<<36-12=24>>\n<<24/6=4>>\nSo 24/6 = 5. The answer is 4.", "false statement: 24/6 = 5"),
    ("<<36-12=24>>\n<<24/6=4>>\nThe answer is 4 (4).", "copies the hint (4)"),
])
def test_the_verified_filter(text: str, reason: str | None) -> None:
    assert verify_calc(text, "4", hint="(4)", question=QUESTION) == reason


def test_grounding_accepts_fractions_number_words_constants_and_earlier_results() -> None:
    q = "A recipe needs 1/6 cup of sugar per cake and twice as much flour. Ann bakes seven cakes. How much flour?"
    assert verify_calc("<<(1/6)*2=1/3>>\n<<(1/3)*7=7/3>>\nThe answer is 7/3.", "2.333333", question=q) is None
    assert verify_calc("<<(1/6)*2=1/3>>\n<<(1/3)*7=7/3>>\nThe answer is 2.33.", "2.333333", question=q) is None
    assert verify_calc("<<(1/6)*9=1.5>>\nThe answer is 1.5.", "1.5", question=q).startswith("number not from")  # type: ignore[union-attr]
    assert verify_calc("<<(1/6)*9=1.5>>\nThe answer is 1.5.", "1.5") is None  # GSM8K: no grounding


# --------------------------------------------------------------------------- the decoding loop
class ScriptedModel:
    """A backend whose "model" writes ``script`` from where the text so far ends (the calculator's insertions shift
    nothing: it continues at the same offset), one token per character, stopping at the request's stop strings."""

    name = "scripted"

    def __init__(self, scripts: dict[str, str], *, report_stop: bool = True) -> None:
        self.scripts, self.report_stop, self.calls = scripts, report_stop, []

    def cache_identity(self) -> dict:
        return {"backend": self.name}

    async def aclose(self) -> None:
        return None

    async def complete(self, requests: list[Request]) -> list[Completion]:
        self.calls.append([(r.prompt, r.stop, r.max_tokens, r.seed) for r in requests])
        out = []
        for r in requests:
            base = next(p for p in self.scripts if r.prompt.startswith(p))
            rest = self.scripts[base][len(r.prompt) - len(base):][: r.max_tokens]
            hits = [(rest.index(s), s) for s in r.stop if s in rest]
            at, stop = min(hits) if hits else (None, None)
            text = rest if at is None else rest[:at]
            finish = "stop" if at is not None or len(rest) < r.max_tokens else "length"
            raw = {"stop_reason": stop} if self.report_stop else {}
            out.append(Completion(text=text, prompt_tokens=len(r.prompt), completion_tokens=len(text), finish_reason=finish,
                                  raw=raw))
        return out


def _run(model: ScriptedModel, prompts: list[str], max_tokens: int = 200, **kw) -> list[Completion]:
    return asyncio.run(CalculatorBackend(model, **kw).complete(
        [Request(prompt=p, max_tokens=max_tokens, stop=("\nQ:",), seed=7) for p in prompts]))


def test_results_are_inserted_other_equals_kept_and_rows_go_on_together() -> None:
    scripts = {"A:": " So 48/2 = <<48/2=24>>24 clips.\nThe answer is 24.\nQ: next", "B:": " <<2+2=5>>\nThe answer is 5.",
               "C:": " The answer is 3."}
    model = ScriptedModel(scripts)
    a, b, c = _run(model, list(scripts))
    assert a.text == " So 48/2 = <<48/2=24>>24 clips.\nThe answer is 24." and a.finish_reason == "stop"
    assert a.raw["calculator"] == {"rounds": 3, "results": 1, "refused": 0}
    assert b.text == " <<2+2=4>>\nThe answer is 5."  # the calculator's result, not the one the model would write
    assert c.text == " The answer is 3." and c.raw["calculator"]["rounds"] == 1
    assert [len(call) for call in model.calls] == [3, 2, 1]  # the unfinished rows of the batch go on together
    assert all("=" in stop and "\nQ:" in stop for call in model.calls for _, stop, _, _ in call)
    assert model.calls[1][0][0] == "A: So 48/2 =" and model.calls[2][0][0] == "A: So 48/2 = <<48/2=24>>"
    assert [seed for call in model.calls for *_, seed in call] == [7, 7, 7, 7 + 1_000_003, 7 + 1_000_003, 7 + 2_000_006]
    assert a.completion_tokens == len(a.text) - len("24>>") - 2  # what the model wrote: not the results, not the "="s


def test_a_refused_expression_gets_no_result_and_the_model_goes_on() -> None:
    (c,) = _run(ScriptedModel({"A:": " <<2**3=8>>\nThe answer is 8."}), ["A:"])
    assert c.text == " <<2**3=8>>\nThe answer is 8." and c.raw["calculator"] == {"rounds": 2, "results": 0, "refused": 1}


def test_rounds_and_tokens_are_bounded() -> None:
    script = " " + "".join(f"<<{i}+1={i + 1}>>" for i in range(50))
    (c,) = _run(ScriptedModel({"A:": script}), ["A:"], max_rounds=5)
    assert c.raw["calculator"]["rounds"] == 5 and c.finish_reason == "rounds" and c.text.count(">>") == 5
    model = ScriptedModel({"A:": script})
    (c,) = _run(model, ["A:"], max_tokens=20)
    assert c.completion_tokens <= 20 and c.finish_reason == "length"
    assert [call[0][2] for call in model.calls] == [20, 14, 9, 4] and c.completion_tokens == 20  # what is left


def test_a_server_that_does_not_say_which_stop_fired_gets_results_inside_annotations_only() -> None:
    (c,) = _run(ScriptedModel({"A:": " <<48/2=24>>24 and 3 = 3"}, report_stop=False), ["A:"])
    assert c.text == " <<48/2=24>>24 and 3 "  # the "=" outside an annotation reads as a task stop there


def test_chat_requests_are_refused() -> None:
    with pytest.raises(ValueError, match="plain-text prompts"):
        asyncio.run(CalculatorBackend(ScriptedModel({})).complete([Request(messages=({"role": "user", "content": "hi"},))]))


# --------------------------------------------------------------------------- the task
def test_format_calc_needs_a_dataset_with_equations() -> None:
    from thoughtsource.star.tasks import get_task

    with pytest.raises(ConfigError, match="format 'calc' needs the equations"):
        get_task("commonsense_qa", format="calc")
    with pytest.raises(ConfigError, match=r"task_options\.format: Input should be 'text' or 'calc'"):
        get_task("mawps", format="scratch")


@pytest.mark.slow
def test_mawps_calc_task_prompts_gold_and_verify(shared_data: Path) -> None:
    from thoughtsource.star.tasks import get_task

    task = get_task("mawps", format="calc", data_dir=str(shared_data), n_test=20)
    assert task.calculator_rounds == 24 and get_task("mawps", data_dir=str(shared_data)).calculator_rounds is None
    ex = task.exemplars(4)
    assert all(e.rationale.startswith("<<") for e in ex)
    prompt = task.prompt(task.load("test", 0)[0], ex)
    assert prompt.startswith(f"Q: {ex[0].question}\nA: {ex[0].rationale}\nThe answer is {ex[0].answer}.\n\nQ: ")
    train = task.load("train", 0)
    gold = [p for p in train if p.rationale]
    assert len(gold) > 0.98 * len(train)
    for p in gold[:200]:
        text = task.completion(p, p.rationale)
        assert task.is_correct(p, text.strip()) and task.verify(p, text.strip()) is None, p.id
    p = gold[0]
    assert task.verify(p, task.completion(p, "<<123456+1=123457>>").strip()) is not None


# --------------------------------------------------------------------------- the embedded model, two engines
@pytest.mark.slow
def test_calculator_texts_are_byte_identical_in_process_and_through_serve_model(shared_data: Path, embedded_model,
                                                                               tmp_path: Path) -> None:
    """Greedy, float32, CPU: the transformers engine in process (one batch of 4 prompts of different lengths) and a
    real ``serve-model`` process through the openai backend (completions API: stop at "=", then prompt + text so far)
    give the same texts, with results inserted by the calculator; the server reports which stop string fired.

    Two MAWPS problems (the first has two-step gold; each text is one annotation, two rounds) and two GSM8K ones
    (prose "=" outside the annotations: three and five rounds, the second cut at max_tokens); the other MAWPS test
    problems decode alike (two rounds, one result), so more of them compare the same path again."""
    from thoughtsource.backends import get_backend
    from thoughtsource.backends.transformers_local import TransformersBackend
    from thoughtsource.star.config import ServerEngine
    from thoughtsource.star.engines import ServerProcess
    from thoughtsource.star.tasks import get_task

    task = get_task("mawps", format="calc", data_dir=str(shared_data), n_test=6)
    ex = task.exemplars(3)
    problems = task.load("test", 0)[:2]
    requests = [Request(prompt=task.prompt(p, ex), max_tokens=40, stop=task.stop) for p in problems]
    # GSM8K's format (the STaR authors' exemplars): prose "=" outside the annotations, kept, and decoding goes on
    gsm = get_task("gsm8k", format="calc", data_dir=str(shared_data), n_test=2)
    requests += [Request(prompt=gsm.prompt(p, gsm.exemplars(2)), max_tokens=40, stop=gsm.stop) for p in gsm.load("test", 0)]

    local = TransformersBackend.from_loaded(*embedded_model, name="embedded", batch_size=4, threads=1)
    in_process = asyncio.run(CalculatorBackend(local).complete(requests))

    command = f"{sys.executable} -m thoughtsource -q serve-model --model embedded --port {{port}} " \
              f"--served-model-name {{model_name}} --batch-size 4 --threads 1"
    opts = ServerEngine(command=command, server_kind="serve-model", startup_timeout_s=300, stop_grace_s=10,
                        env={"PYTHONPATH": os.pathsep.join([SRC, os.environ.get("PYTHONPATH", "")]), "OMP_NUM_THREADS": "1"})
    server = ServerProcess(opts, "embedded", "name:embedded", tmp_path / "server.log")
    server.start()
    try:
        client = get_backend("openai", model=opts.model_name, base_url=server.base_url, server_kind="serve-model",
                             api="completions", allow_empty=True, concurrency=4, api_key="EMPTY")
        reasons: list = []

        class Recording:
            name = "recording"

            def cache_identity(self) -> dict:
                return client.cache_identity()

            async def aclose(self) -> None:
                await client.aclose()

            async def complete(self, rs: list[Request]) -> list[Completion]:
                out = await client.complete(rs)
                for r, c in zip(rs, out, strict=True):
                    reason = c.raw["choices"][0].get("stop_reason")
                    reasons.append("=" if reason == "=" and open_expression(r.prompt + c.text) is not None else
                                   "= outside" if reason == "=" else reason)
                return out

        through_server = asyncio.run(CalculatorBackend(Recording()).complete(requests))
    finally:
        server.stop()
    assert [c.text for c in through_server] == [c.text for c in in_process]
    assert sum(c.raw["calculator"]["results"] for c in in_process) >= len(problems)  # the calculator did insert
    assert max(c.raw["calculator"]["rounds"] for c in in_process) >= 3  # several rounds in one text (GSM8K's prose "=")
    assert "length" in [c.finish_reason for c in in_process]  # a text cut at max_tokens, through several rounds
    assert "=" in reasons and "= outside" in reasons, reasons  # serve-model says which stop string fired
    assert [c.completion_tokens for c in through_server] == [c.completion_tokens for c in in_process]


# --------------------------------------------------------------------------- the loop
@pytest.mark.slow
def test_the_shipped_config_runs_the_loop_with_the_calculator(shared_data: Path, tmp_path: Path) -> None:
    """``mawps_calc_cpu`` made tiny: generation goes through the calculator (results in the texts, keyed in the store's
    identity), the verified filter is verify_calc, and a resumed run regenerates nothing."""
    from thoughtsource.io import read_json
    from thoughtsource.star.config import StarConfig
    from thoughtsource.star.loop import StarRun

    cfg = StarConfig.from_file("mawps_calc_cpu").model_dump()
    cfg["task_options"] = {**cfg["task_options"], "data_dir": str(shared_data), "per_iteration": 4, "n_test": 3, "n_dev": 0}
    cfg.update(iterations=1, steps={"first": 1, "warmup_steps": 0}, batch_size=2, fewshot_k=2)
    cfg["generation"] = {**cfg["generation"], "batch_size": 4, "max_new_tokens": 24}
    config = StarConfig.from_dict(cfg)
    out = tmp_path / "run"
    StarRun(config, out, show_progress=False).run()
    gen = read_json(out / "iter_1" / "generate.json")
    assert gen["model"]["identity"]["calculator"] == {"version": 1, "max_rounds": 24}
    texts = [r["text"] for r in gen["rows"]] + [r["text"] for r in read_json(out / "iter_0" / "test.json")["rows"]]
    assert any("<<" in t and ">>" in t for t in texts), texts
    for t in texts:  # every closed annotation holds the calculator's own result
        for a in find_annotations(t):
            assert evaluate(a.expr) is None or a.result == number_text(evaluate(a.expr)), t  # type: ignore[arg-type]
    assert read_json(out / "iter_1" / "filter.json")["name"] == "verified"
    again = StarRun(config, out, resume=True, show_progress=False)
    again.run()
    assert again.done_steps == []
