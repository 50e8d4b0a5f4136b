"""training-data: every format from real files, a STaR run folder and an annotation database; the cards, the
errors, the atomic folder; and the proof by real consumers: `datasets` loads each export and TRL's SFTTrainer,
DPOTrainer and PRMTrainer take one optimisation step on it with the embedded SmolLM2-135M on the CPU."""

from __future__ import annotations

import hashlib
import importlib.util
import json
from collections import Counter
from pathlib import Path

import pytest
from typer.testing import CliRunner

from cli_in_process import fresh_process_state
from thoughtsource.cli import app, main
from thoughtsource.collection import Collection
from thoughtsource.errors import DataError, ThoughtSourceError
from thoughtsource.io import write_json
from thoughtsource.schema import Answer, GeneratedCot, Sample
from thoughtsource.training_data import export, read_records
from thoughtsource.web.db import STEP_KEY, AnnotationDB, CotRef
from thoughtsource.web.similarity import sentences

GPT35 = "model_runs/thoughtsource_67_openai_chat_gpt-3.5-turbo_None_None-kojima-01-zhou-01.json"
GPT4 = "model_runs/thoughtsource_100_openai_chat_gpt-4_None_zhou-01.json"
ANNOTATED = "annotated/annotated_set.json"


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _load(folder: Path):
    datasets = pytest.importorskip("datasets")
    return datasets.load_dataset(str(folder), split="train")


# --------------------------------------------------------------------------- sources
@pytest.fixture(scope="module")
def gpt35(examples_dir: Path) -> Path:
    return examples_dir / GPT35


@pytest.fixture(scope="module")
def sc_runs(examples_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    """Two self-consistency runs (4 sampled CoTs per prompt, two triggers) of two models on 8 WorldTree train samples,
    generated against the fault server (its sampled answers vary, so a prompt has correct and incorrect CoTs)."""
    from thoughtsource.generation import generate
    from thoughtsource.testing.fault_server import run_fault_server

    folder = tmp_path_factory.mktemp("sc")
    out = []
    with run_fault_server() as server:
        for model in ("fault-echo", "fault-other"):
            c = Collection.load(examples_dir / "tests_unit_data" / "worldtree_100_dataset.json").select(
                split="train", number_samples=8, seed=0)
            generate(c, backend="openai", model=model, base_urls=[server.base_url], store=folder / "s.sqlite",
                     progress=False, cot_trigger_keys=["kojima-01", "none"], n=4, temperature=0.7)
            out.append(folder / f"{model}.json")
            c.dump(out[-1])
    return out


@pytest.fixture
def step_db(examples_dir: Path, tmp_path: Path) -> tuple[Path, Path, list[tuple[CotRef, list[int | None]]]]:
    """An annotation database over the real annotated_set.json: step labels on three CoTs (alice and bob agree on
    one, bob alone labels one, they disagree on one), as the annotator stores them."""
    data = examples_dir / ANNOTATED
    c = Collection.load(data)
    cots = [(d, s, x, cot) for d, s, x in c.samples() for cot in x.generated_cot if len(sentences(cot.cot or "")) >= 3][:3]
    db = AnnotationDB(tmp_path / "annotations.sqlite")
    labelled = []
    for i, (d, s, x, cot) in enumerate(cots):
        ref = CotRef(d, s, x.id, cot.id)
        n = len(sentences(cot.cot or ""))
        labels: list[int | None] = [1] * (n - 2) + [-1, None] if i == 0 else [1, 0] + [None] * (n - 2)
        if i < 2:
            db.upsert(ref, "bob", STEP_KEY, {"labels": labels, "first_error": n - 2 if i == 0 else None})
        if i == 0:
            db.upsert(ref, "alice", STEP_KEY, {"labels": labels, "first_error": n - 2})
        if i == 2:  # a disagreement, not adjudicated: left out
            db.upsert(ref, "alice", STEP_KEY, {"labels": [1] * n, "first_error": None})
            db.upsert(ref, "bob", STEP_KEY, {"labels": [-1] * n, "first_error": 0})
        labelled.append((ref, labels))
    return db.path, data, labelled[:2]


def star_run(folder: Path) -> Path:
    """A STaR run folder as the loop writes it (config.json, iter_N/train.jsonl and rationales.json): in iteration 1,
    q1 was answered right at once, q2 wrongly and then rightly with the hint, q3 wrongly both times."""
    write_json(folder / "config.json", {"task": "arithmetic", "model": "embedded", "iterations": 1})
    it = folder / "iter_1"
    records = [
        {"id": "q1", "prompt": "Q: 2 + 3 =\nA:", "completion": " 2 + 3 = 5. The answer is 5.", "rationalized": False},
        {"id": "q2", "prompt": "Q: 4 + 4 =\nA:", "completion": " 4 + 4 = 8. The answer is 8.", "rationalized": True},
    ]
    it.mkdir(parents=True)
    (it / "train.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))

    def cot(kind: str, text: str, kept: bool, correct: bool) -> GeneratedCot:
        return GeneratedCot(
            id=f"star-iter1-{kind}",
            prompt_text="Q: ...",
            cot=text,
            author="star",
            model="embedded",
            answers=[Answer(id="a", answer_extraction="strict", answer=text[-2], correct_answer=correct)],
            star_iteration=1,
            rationalized=kind == "rationalize",
            kept_for_training=kept,
        )

    samples = [
        Sample(
            id="q1",
            question="2 + 3 =",
            type="number",
            answer=["5"],
            generated_cot=[cot("generate", "2 + 3 = 5. The answer is 5.", True, True)],
        ),
        Sample(
            id="q2",
            question="4 + 4 =",
            type="number",
            answer=["8"],
            generated_cot=[
                cot("generate", "4 + 4 = 9. The answer is 9.", False, False),
                cot("rationalize", "4 + 4 = 8. The answer is 8.", True, True),
            ],
        ),
        Sample(
            id="q3",
            question="7 + 6 =",
            type="number",
            answer=["13"],
            generated_cot=[
                cot("generate", "7 + 6 = 12. The answer is 12.", False, False),
                cot("rationalize", "7 + 6 = 14. The answer is 14.", False, False),
            ],
        ),
    ]
    write_json(it / "rationales.json", {"arithmetic": {"train": [s.to_dict() for s in samples]}})
    return folder


# --------------------------------------------------------------------------- formats
def test_sft_keeps_the_correct_cots_of_a_real_run_with_a_card(gpt35: Path, tmp_path: Path) -> None:
    out = tmp_path / "sft"
    result = export("sft", [gpt35], out, include_eval_splits=True)
    c = Collection.load(gpt35)
    marks = [all(a.correct_answer for a in cot.answers) for _, _, x in c.samples() for cot in x.generated_cot]
    assert result.records == sum(marks) and result.left_out == {"incorrect CoT": marks.count(False)}
    rows = read_records(out)
    first = next(x for _, _, x in c.samples())
    kept = [cot for cot in first.generated_cot if all(a.correct_answer for a in cot.answers)]
    r = rows[0]
    assert r["sample_id"] == first.id and r["cot_id"] == kept[0].id and r["model"] == "gpt-3.5-turbo"
    assert r["prompt"].startswith(first.question + "\nA) new perspective\n") and r["prompt"].endswith("E) tired eyes\n\n")
    assert r["completion"] == kept[0].cot.strip()  # the prompt ends in whitespace: no space added
    kojima = next(r for r in rows if r["prompt"].endswith("Answer: Let's think step by step."))  # filled in from kojima-01
    assert kojima["completion"].startswith(" ") and not kojima["completion"].startswith("  ")
    card = (out / "README.md").read_text()
    assert _sha256(gpt35) in card and f"| gpt-3.5-turbo | {result.records} |" in card
    assert f"left out, incorrect CoT: {marks.count(False)}" in card and "cots: correct only" in card
    ds = _load(out)
    assert ds.num_rows == result.records and ds[0]["completion"] == r["completion"]


def test_messages_are_a_user_and_an_assistant_turn(gpt35: Path, tmp_path: Path) -> None:
    export("messages", [gpt35], tmp_path / "m", all_cots=True, models=["gpt-3.5-turbo"], include_eval_splits=True)
    rows = read_records(tmp_path / "m")
    assert len(rows) == 6 * 201
    assert [m["role"] for m in rows[0]["messages"]] == ["user", "assistant"]
    assert not rows[0]["messages"][1]["content"].startswith(" ")
    assert _load(tmp_path / "m").num_rows == len(rows)


def test_eval_splits_are_left_out_unless_asked_for_and_the_card_lists_splits(gpt35: Path, tmp_path: Path) -> None:
    """`training-data sft` on a published run exported the CoTs of its test and validation samples as training data."""
    c = Collection.load(gpt35)
    per_split = {(d, s): sum(len(x.generated_cot) for x in xs) for d, splits in c.data.items() for s, xs in splits.items()}
    held_out = sum(n for (_, s), n in per_split.items() if s in ("test", "validation"))
    assert held_out == 1005 and per_split[("strategy_qa", "train")] == 201
    result = export("sft", [gpt35], tmp_path / "sft")
    rows = read_records(tmp_path / "sft")
    assert {(r["dataset"], r["split"]) for r in rows} == {("strategy_qa", "train")}
    assert result.left_out["CoT of a test/validation split (--include-eval-splits keeps them)"] == 1005
    card = (tmp_path / "sft" / "README.md").read_text()
    assert "## Splits" in card and f"| strategy_qa/train | {result.records} |" in card
    assert "test/validation splits: left out" in card and "| gpt-3.5-turbo |" in card
    everything = export("sft", [gpt35], tmp_path / "all", include_eval_splits=True)
    assert everything.splits["worldtree/test"] > 0 and "test/validation splits: included" in (tmp_path / "all" / "README.md").read_text()


def test_preference_pairs_are_of_one_model_and_one_prompt(sc_runs: list[Path], tmp_path: Path) -> None:
    """Pairs paired CoTs of different models and prompts although --help promised 'the same prompt'."""
    result = export("preference", sc_runs, tmp_path / "p", max_pairs_per_prompt=2)
    rows = read_records(tmp_path / "p")
    from thoughtsource.evaluate import evaluate

    cots = {}
    for path in sc_runs:
        c = Collection.load(path)
        evaluate(c, overwrite=False, warn=False)  # the strict verdicts the export judges unmarked answers by
        for d, s, x in c.samples():
            for t in x.generated_cot:
                cots[t.id] = (d, s, x.id, t)
    assert result.records == len(rows) > 0 and {r["model"] for r in rows} == {"fault-echo", "fault-other"}
    for r in rows:
        (d, s, sid, good), (d2, s2, sid2, bad) = cots[r["chosen_cot_id"]], cots[r["rejected_cot_id"]]
        assert (d, s, sid) == (d2, s2, sid2) == (r["dataset"], r["split"], r["sample_id"])
        assert good.prompt_text == bad.prompt_text == r["prompt"]  # one prompt: the same trigger
        assert good.model["name"] == bad.model["name"] == r["model"]  # one model
        assert all(a.correct_answer for a in good.answers) and not all(a.correct_answer for a in bad.answers)
        assert r["chosen"].strip() == good.cot.strip() and r["rejected"].strip() == bad.cot.strip()
    groups = {(r["sample_id"], r["model"], r["prompt"]) for r in rows}
    assert len(rows) <= 2 * len(groups) and len({p for _, _, p in groups}) > len({sid for sid, _, _ in groups})
    assert _load(tmp_path / "p").column_names[:3] == ["prompt", "chosen", "rejected"]


def test_star_run_sft_is_its_training_records_and_pairs_kept_against_rejected(tmp_path: Path) -> None:
    run = star_run(tmp_path / "run")
    export("sft", [run], tmp_path / "sft")
    sft = read_records(tmp_path / "sft")
    assert [(r["sample_id"], r["completion"]) for r in sft] == [
        ("q1", " 2 + 3 = 5. The answer is 5."),
        ("q2", " 4 + 4 = 8. The answer is 8."),
    ]
    result = export("preference", [run], tmp_path / "pref")
    pairs = read_records(tmp_path / "pref")
    assert [(r["prompt"], r["chosen"], r["rejected"]) for r in pairs] == [
        ("Q: 4 + 4 =\nA:", " 4 + 4 = 8. The answer is 8.", " 4 + 4 = 9. The answer is 9.")
    ]
    assert result.left_out == {"question without a rejected rationale": 1, "question without a kept rationale": 1}
    card = (tmp_path / "pref" / "README.md").read_text()
    for name in ("config.json", "iter_1/train.jsonl", "iter_1/rationales.json"):
        assert f"| {run / name} | `{_sha256(run / name)}` |" in card
    assert "| embedded | 1 |" in card and "star_iteration: all" in card


def test_stepwise_and_prm800k_from_an_annotation_database(step_db, tmp_path: Path) -> None:
    db, data, labelled = step_db
    result = export("stepwise", [db, data], tmp_path / "s", include_eval_splits=True)
    assert result.left_out == {"CoT whose annotators disagree (not adjudicated)": 1}
    rows = sorted(read_records(tmp_path / "s"), key=lambda r: r["cot_id"])
    expected = sorted(labelled, key=lambda t: t[0].cot_id)
    for r, (ref, labels) in zip(rows, expected, strict=True):
        n = labels.index(None)
        assert r["cot_id"] == ref.cot_id and r["labels"] == [v >= 0 for v in labels[:n]] and len(r["completions"]) == n
    ds = _load(tmp_path / "s")
    assert ds.column_names[:3] == ["prompt", "completions", "labels"]

    export("prm800k", [db, data], tmp_path / "k", include_eval_splits=True)
    recs = {r["thoughtsource"]["cot_id"]: r for r in read_records(tmp_path / "k")}
    ref, labels = labelled[0]
    rec = recs[ref.cot_id]
    assert [s["completions"][0]["rating"] for s in rec["label"]["steps"]] == labels[:-1]
    assert rec["label"]["finish_reason"] == "found_error" and rec["label"]["steps"][-1]["chosen_completion"] is None
    assert rec["thoughtsource"]["annotators"] == ["alice", "bob"]
    assert (tmp_path / "k" / "data" / "train.jsonl").is_file() and _load(tmp_path / "k").num_rows == 2


def test_step_labels_inside_a_file_need_no_database(step_db, tmp_path: Path) -> None:
    db, data, _ = step_db
    runner = CliRunner()
    exported = tmp_path / "exported.json"
    res = runner.invoke(app, ["annotations", "export", str(data), "--db", str(db), "-o", str(exported)])
    assert res.exit_code == 0, res.output
    export("stepwise", [exported], tmp_path / "a", include_eval_splits=True)
    export("stepwise", [db, data], tmp_path / "b", include_eval_splits=True)
    assert read_records(tmp_path / "a") == read_records(tmp_path / "b")


# --------------------------------------------------------------------------- the command and its errors
def _cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    """The real entry point (errors become one line and an exit code): (exit code, stderr)."""
    try:
        with fresh_process_state(["training-data", *args]):
            main(["training-data", *args])
        code = 0
    except SystemExit as e:
        code = int(e.code or 0)
    return code, " ".join(capsys.readouterr().err.split())


def test_cli_writes_the_folder_and_refuses_to_overwrite_without_force(gpt35: Path, tmp_path: Path, capsys) -> None:
    out = tmp_path / "sft"
    code, err = _cli(capsys, "sft", str(gpt35), "-o", str(out))
    assert code == 0 and f"wrote 126 sft record(s) to {out} (left out: 1005 CoT of a test/validation split" in err
    code, err = _cli(capsys, "sft", str(gpt35), "-o", str(out), "--force", "--include-eval-splits")
    assert code == 0 and f"wrote 831 sft record(s) to {out} (left out: 375 incorrect CoT)" in err
    code, err = _cli(capsys, "sft", str(gpt35), "-o", str(out))
    assert code == 1 and err == f"error: {out}: exists and is not an empty folder; pass --force to replace it"
    code, err = _cli(capsys, "sft", str(gpt35), "-o", str(out), "--force", "--model", "gpt-4", "--include-eval-splits")
    assert code == 1 and "no sft records (1206 other model)" in err
    assert len(read_records(out)) == 831  # the old export is untouched
    code, err = _cli(capsys, "sft", str(gpt35), "-o", str(out), "--force", "--all-cots", "--include-eval-splits")
    assert code == 0 and len(read_records(out)) == 1206
    assert (f"with `thoughtsource training-data sft {gpt35} --out {out} --all-cots --include-eval-splits`."
            in (out / "README.md").read_text())
    assert [p.name for p in tmp_path.iterdir()] == ["sft"]  # no temp folder left behind
    code, err = _cli(capsys, "dpo", str(gpt35), "-o", str(out))
    assert code == 2 and "'dpo' is not one of 'sft', 'messages', 'preference', 'stepwise', 'prm800k'" in err


@pytest.mark.parametrize("fmt", ["sft", "messages"])
def test_streamed_export_writes_the_records_of_the_loaded_sources(fmt: str, examples_dir: Path, sc_runs: list[Path],
                                                                  tmp_path: Path) -> None:
    """sft and messages read each file a sample at a time (unmarked answers judged in a first pass without a per-answer
    table) and write the Parquet file a batch at a time: the records, in order, and what was left out are those of the
    loaded files, over real runs (unmarked: judged), an annotated file (marked) and self-consistency runs."""
    from collections import Counter

    from thoughtsource import training_data as td

    files = [examples_dir / GPT35, examples_dir / GPT4, examples_dir / ANNOTATED, *sc_runs]
    for everything in (False, True):
        kw = {"all_cots": everything, "include_eval_splits": everything, "star_iteration": "last"}
        loaded_left: Counter[str] = Counter()
        loaded = list(td.BUILDERS[fmt](td.load_sources(files), left_out=loaded_left, **kw))
        assert not any(isinstance(c, Collection) for _, c in td.load_sources(files, stream=True).collections)
        out = tmp_path / f"{fmt}-{everything}"
        result = export(fmt, files, out, all_cots=everything, include_eval_splits=everything)
        assert len(loaded) > 50 and result.records == len(loaded)
        assert list(read_records(out)) == loaded
        assert result.left_out == dict(loaded_left.most_common())


def test_bad_inputs_say_which_file_record_and_what_was_expected(gpt35: Path, step_db, tmp_path: Path) -> None:
    db, _, _ = step_db
    with pytest.raises(DataError, match="no such file or folder"):
        export("sft", [tmp_path / "missing.json"], tmp_path / "o")
    with pytest.raises(DataError, match="needs the ThoughtSource files that were annotated"):
        export("stepwise", [db], tmp_path / "o")
    with pytest.raises(DataError, match=f"{GPT35}: no step labels: no CoT has a 'step_labels' annotation"):
        export("stepwise", [gpt35], tmp_path / "o")  # no step labels at all
    run = star_run(tmp_path / "run")
    with pytest.raises(DataError, match="a STaR run has no step labels"):
        export("stepwise", [run], tmp_path / "o")
    with pytest.raises(ThoughtSourceError, match="Unknown training-data format 'dpo'"):
        export("dpo", [gpt35], tmp_path / "o")
    (run / "iter_1" / "train.jsonl").write_text('{"id": "q1", "prompt": "Q", "completion": 5}\n')
    with pytest.raises(DataError, match=r"train.jsonl:1: q1: field 'completion': expected a string, got 5"):
        export("sft", [run], tmp_path / "o")
    (run / "iter_1" / "train.jsonl").write_text('{"id": "q1",\n')
    with pytest.raises(DataError, match=r"train.jsonl:1:\d+: broken JSON"):
        export("sft", [run], tmp_path / "o")
    with pytest.raises(DataError, match="no iteration 3 with training data"):
        (run / "iter_1" / "train.jsonl").write_text("")
        export("sft", [run], tmp_path / "o", star_iteration="3")
    assert not (tmp_path / "o").exists()


# --------------------------------------------------------------------------- real consumers: one TRL step each
requires_trl = pytest.mark.skipif(
    importlib.util.find_spec("trl") is None, reason="trl is not installed (pip install 'thoughtsource[models]')"
)


@pytest.fixture(scope="module")
def model_dir() -> Path:
    from thoughtsource.embedded import embedded_model_dir

    return embedded_model_dir()


def _args(config_cls, out: Path, **kw):
    return config_cls(
        output_dir=str(out),
        max_steps=1,
        per_device_train_batch_size=2,
        learning_rate=1e-4,
        report_to="none",
        use_cpu=True,
        bf16=False,
        fp16=False,
        gradient_checkpointing=False,
        save_strategy="no",
        logging_steps=1,
        seed=0,
        dataloader_num_workers=0,
        **kw,
    )


def _changed(model, before: dict) -> bool:
    return any(not p.detach().equal(before[n]) for n, p in model.named_parameters() if p.requires_grad)


def _snapshot(model) -> dict:
    return {n: p.detach().clone() for n, p in model.named_parameters()}


def _train(trainer) -> float:
    before = _snapshot(trainer.model)
    trainer.train()
    assert _changed(trainer.model, before), "the optimisation step changed no parameter"
    losses = [h["loss"] for h in trainer.state.log_history if "loss" in h]
    assert trainer.state.global_step == 1 and losses and losses[0] == losses[0]  # a finite, logged loss
    return losses[0]


@pytest.mark.slow
@requires_trl
@pytest.mark.parametrize("fmt", ["sft", "messages"])
def test_sft_trainer_takes_a_step_on_the_export(fmt: str, gpt35: Path, model_dir: Path, tmp_path: Path) -> None:
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import SFTConfig, SFTTrainer

    export(fmt, [gpt35], tmp_path / fmt, include_eval_splits=True)
    ds = _load(tmp_path / fmt).select(range(4))
    tok = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir)
    trainer = SFTTrainer(
        model=model, args=_args(SFTConfig, tmp_path / "trainer", max_length=96), train_dataset=ds, processing_class=tok
    )
    _train(trainer)


@pytest.mark.slow
@requires_trl
def test_dpo_trainer_takes_a_step_on_correct_vs_incorrect_and_star_pairs(sc_runs: list[Path], model_dir: Path, tmp_path: Path) -> None:
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import DPOConfig, DPOTrainer

    from datasets import concatenate_datasets

    export("preference", sc_runs, tmp_path / "pairs", max_pairs_per_prompt=1)
    export("preference", [star_run(tmp_path / "run")], tmp_path / "star")
    cols = ["prompt", "chosen", "rejected"]
    ds = concatenate_datasets(
        [_load(tmp_path / "pairs").select(range(1)).select_columns(cols), _load(tmp_path / "star").select_columns(cols)]
    )
    tok = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir)
    trainer = DPOTrainer(
        model=model, args=_args(DPOConfig, tmp_path / "trainer", max_length=96), train_dataset=ds, processing_class=tok
    )
    _train(trainer)


@pytest.mark.slow
@requires_trl
def test_prm_trainer_takes_a_step_on_the_stepwise_export(step_db, model_dir: Path, tmp_path: Path) -> None:
    from transformers import AutoModelForTokenClassification, AutoTokenizer

    prm = pytest.importorskip("trl.experimental.prm", reason="this trl has no PRMTrainer (removed in trl 1.14)")
    db, data, _ = step_db
    export("stepwise", [db, data], tmp_path / "steps", include_eval_splits=True)
    ds = _load(tmp_path / "steps").select_columns(["prompt", "completions", "labels"])
    tok = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForTokenClassification.from_pretrained(model_dir, num_labels=2)
    model.config.pad_token_id = tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id
    trainer = prm.PRMTrainer(
        model=model, args=_args(prm.PRMConfig, tmp_path / "trainer", max_length=128), train_dataset=ds, processing_class=tok
    )
    _train(trainer)


@pytest.mark.slow
def test_sft_export_finishes_under_a_memory_cap_that_loading_exceeds(gpt35_replicated: tuple, tmp_path: Path) -> None:
    """``training-data sft`` of a 300 MB run (215,000 short real CoTs, unmarked: each is judged) under RLIMIT_AS of
    700 MB; before, the file was loaded whole (``Collection.load`` of it alone needs ~1.4 GB) and every record built
    before the Parquet file was written."""
    from thoughtsource.testing.scale import run_cli_capped

    big, written = gpt35_replicated
    out = tmp_path / "sft"
    p = run_cli_capped(["training-data", "sft", str(big), "--out", str(out), "--all-cots", "--include-eval-splits"], 700)
    assert p.returncode == 0, p.stderr[-3000:]
    import pyarrow.parquet as pq

    assert pq.ParquetFile(out / "data" / "train-00000-of-00001.parquet").metadata.num_rows == written.cots


def _loaded_preference(files: list[Path], max_pairs: int | None, include: bool) -> tuple[list[dict], Counter]:
    """The preference records as built before issue 33 streamed them: the loaded files' CoTs grouped in a dict."""
    from thoughtsource import training_data as td

    left: Counter[str] = Counter()
    groups: dict[tuple, list] = {}
    for c in td.collection_cots(td.load_sources(files), (), left, include):
        if c.correct is None:
            left["CoT without a correctness mark"] += 1
            continue
        groups.setdefault((c.dataset, c.split, c.sample_id, c.model, c.prompt), []).append(c)
    return [r for cots in groups.values() for r in td._pairs(cots, max_pairs, left)], left


def test_streamed_preference_writes_the_pairs_of_the_loaded_sources(examples_dir: Path, sc_runs: list[Path],
                                                                   tmp_path: Path) -> None:
    """preference reads each file a sample at a time and groups the CoTs of a prompt on disk (they may come from
    several files): the pairs, in order, and what was left out are those of the loaded files grouped in memory, over
    real runs, an annotated file and self-consistency runs, one of them split over two files (a prompt's sampled CoTs
    half in each, so its pairs join CoTs of both files)."""
    from thoughtsource import training_data as td
    from thoughtsource.io import write_json

    doc = json.loads(sc_runs[0].read_text())
    halves = []
    for h in (0, 1):
        part = {d: {s: [dict(x, generated_cot=x["generated_cot"][h::2]) for x in xs] for s, xs in sp.items()} for d, sp in doc.items()}
        halves.append(tmp_path / f"half{h}.json")
        write_json(halves[-1], part)
    files = [examples_dir / GPT35, examples_dir / ANNOTATED, sc_runs[1], *halves]
    for max_pairs, include in ((None, False), (2, True)):
        loaded, left = _loaded_preference(files, max_pairs, include)
        assert not any(isinstance(c, Collection) for _, c in td.load_sources(files, stream=True).collections)
        out = tmp_path / f"pref-{max_pairs}"
        result = export("preference", files, out, max_pairs_per_prompt=max_pairs, include_eval_splits=include)
        assert len(loaded) > 20 and result.records == len(loaded)
        assert list(read_records(out)) == loaded
        assert result.left_out == dict(left.most_common())
        assert any(" / " in r["source"] for r in loaded)  # pairs across the two halves
    assert sorted(p.name for p in tmp_path.iterdir()) == ["half0.json", "half1.json", "pref-2", "pref-None"]  # no index left


@pytest.mark.parametrize("fmt", ["stepwise", "prm800k"])
def test_streamed_step_exports_write_the_records_of_the_loaded_sources(fmt: str, step_db, examples_dir: Path,
                                                                       tmp_path: Path) -> None:
    """stepwise and prm800k read the files a sample at a time, merge them on disk and look the labelled samples up
    there (before: the annotator's ServedData merged them in memory): the records and what was left out are the
    loaded sources', with the labels in an annotation database or inside the exported file, the annotated file given
    beside another real run that shares none of its samples and beside a copy of itself (every sample merged)."""
    from thoughtsource import training_data as td

    db, data, _ = step_db
    exported = tmp_path / "exported.json"
    res = CliRunner().invoke(app, ["annotations", "export", str(data), "--db", str(db), "-o", str(exported)])
    assert res.exit_code == 0, res.output
    copy = tmp_path / "copy.json"
    copy.write_bytes(exported.read_bytes())
    for sources in ([db, data, examples_dir / GPT35], [exported, examples_dir / GPT35, copy]):
        for include in (True, False):
            left: Counter[str] = Counter()
            loaded = td.BUILDERS[fmt](td.load_sources(sources), left_out=left, include_eval_splits=include)
            assert not any(isinstance(c, Collection) for _, c in td.load_sources(sources, stream=True).collections)
            out = tmp_path / f"{fmt}-{len(sources)}-{include}-{sources[0].suffix}"
            try:
                result = export(fmt, sources, out, include_eval_splits=include)
            except DataError as e:  # none left: the same for the loaded sources
                assert not loaded and "no " in str(e)
                continue
            assert len(loaded) >= 2 and result.records == len(loaded)
            assert list(read_records(out)) == loaded
            assert result.left_out == dict(left.most_common())
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no index left
