from __future__ import annotations

import json
from pathlib import Path

import pytest

from thoughtsource.collection import Collection
from thoughtsource.errors import ConfigError, UnknownNameError
from thoughtsource.prompts import KINDS, bundled_path, combination_name, combinations, load_fragments
from thoughtsource.prompts.build import (
    ANSWER_TEMPLATE,
    COT_TEMPLATE,
    COT_TEMPLATE_FEW_SHOT,
    answer_prompt,
    auto_extraction,
    chat_messages,
    cot_prompt,
    draw_exemplars,
    exemplar_text,
    format_choices,
)
from thoughtsource.schema import Sample


@pytest.fixture(scope="module")
def fragments():
    return load_fragments()


@pytest.fixture(scope="module")
def annotated(examples_dir: Path) -> Collection:
    return Collection.from_json(examples_dir / "annotated" / "annotated_set.json")


def test_bundled_fragments_match_the_published_file(examples_dir: Path, fragments):
    published = json.loads((examples_dir / "fragments.json").read_text())
    for kind in KINDS:
        ours = fragments.of_kind(kind)
        for key, text in published[kind].items():
            assert ours.get(key) == text, f"{kind}.{key}"
    # the paper's families are all there, plus our baselines
    triggers = fragments.cot_triggers
    assert [f"kojima-{i:02d}" for i in range(1, 15)] == [k for k in triggers if k.startswith("kojima-")]
    assert len([k for k in triggers if k.startswith("lievin-")]) == 28
    assert triggers["kojima-01"] == "Answer: Let's think step by step."
    assert triggers["none"] == "" and triggers["plain"] == "Answer:"
    assert fragments.answer_extractions["kojima-A-E"] == "Therefore, among A through E, the answer is"
    assert fragments.version == "0.01.1"
    assert bundled_path().name == "fragments.yaml"


def test_unknown_ids_suggest_close_matches(fragments):
    with pytest.raises(UnknownNameError, match=r"Did you mean: .*Available: kojima-01"):
        fragments.cot_trigger("kojima-1")  # not an id: the ids are two-digit
    assert fragments.check("answer_extractions", ["auto", "kojima-A-D", "kojima-Z"]) == [
        str(UnknownNameError("answer extraction", "kojima-Z", fragments.answer_extractions))
    ]
    assert fragments.instruction(None) == ""


def test_user_fragment_files_add_ids_and_refuse_silent_redefinition(tmp_path: Path):
    extra = tmp_path / "mine.yaml"
    extra.write_text("version: mine-1\ncot_triggers:\n  my-01: \"Answer: Let's check each option.\"\n")
    f = load_fragments([extra])
    assert f.cot_trigger("my-01") == "Answer: Let's check each option."
    assert f.cot_trigger("kojima-01") == "Answer: Let's think step by step."
    clash = tmp_path / "clash.json"
    clash.write_text(json.dumps({"cot_triggers": {"kojima-01": "Answer: something else"}}))
    with pytest.raises(ConfigError, match=r"cot_triggers.kojima-01 differs"):
        load_fragments([clash])
    broken = tmp_path / "broken.yaml"
    broken.write_text("cot_triggers: [a, b]\n")
    with pytest.raises(ConfigError, match="expected a mapping id -> text"):
        load_fragments([broken])


def test_combinations_and_names():
    combos = list(combinations([None, "qa-01"], ["kojima-01", "none"], ["kojima-A-D"]))
    assert len(combos) == 4 and combos[0] == (None, "kojima-01", "kojima-A-D")
    assert combination_name("qa-01", "kojima-01", "kojima-A-D") == "qa-01_kojima-01_kojima-A-D"


def test_multiple_choice_prompt_follows_the_paper(annotated: Collection, fragments):
    sample = annotated["commonsense_qa"]["validation"][0]
    p = cot_prompt(sample, fragments, "qa-01", "kojima-01")
    assert p.template == COT_TEMPLATE
    assert p.text == (
        "Answer the following question through step-by-step reasoning.\n\n"
        "The kitten had nothing to dig it's claws into, so when it tried to stop it slid across what?\n"
        "A) living room\nB) floor\nC) warm place\nD) carpet\nE) farmhouse\n\n"
        "Answer: Let's think step by step."
    )
    assert auto_extraction(sample, fragments) == "kojima-A-E"
    a = answer_prompt(p, "\nThe kitten slid on the floor.", fragments, "kojima-A-E")
    assert a.template == ANSWER_TEMPLATE
    assert a.text.endswith("Answer: Let's think step by step. The kitten slid on the floor.\nTherefore, among A through E, the answer is")
    # no instruction, no trigger: the parts are left out with their separators
    bare = cot_prompt(sample, fragments, None, "none")
    assert bare.text.startswith("The kitten had") and bare.text.endswith("E) farmhouse\n\n")
    assert chat_messages(bare.text) == ({"role": "user", "content": bare.text.strip()},)


def test_auto_extraction_per_answer_type(annotated: Collection, shared_data: Path, fragments):
    strategy = annotated["strategy_qa"]["train"][0]
    assert strategy.type == "bool" and auto_extraction(strategy, fragments) == "kojima-yes-no"
    assert "\nA) True" not in cot_prompt(strategy, fragments, None, "kojima-01").text  # bool: no lettered choices
    worldtree = annotated["worldtree"]["test"][0]
    assert auto_extraction(worldtree, fragments) == "kojima-A-D"
    line = json.loads((shared_data / "gsm8k" / "test.jsonl").read_text().splitlines()[0])
    gsm = Sample(id="gsm8k-0", question=line["question"], type="number", answer=[line["answer"].split("####")[-1].strip()])
    assert gsm.answer == ["18"] and auto_extraction(gsm, fragments) == "kojima-numerals"
    text = Sample(id="t", question="Name a color.", type="text")
    assert auto_extraction(text, fragments) == "kojima-01"
    eleven = Sample(id="m", question="?", type="multiplechoice", choices=[str(i) for i in range(11)])
    assert auto_extraction(eleven, fragments) == "kojima-01"  # no "among A through K" prompt
    assert format_choices(["x", "y"]) == "A) x\nB) y"


def test_few_shot_exemplars_are_seeded_and_exclude_the_target(annotated: Collection, fragments):
    pool = annotated["strategy_qa"]["train"]
    a = draw_exemplars(pool, 3, seed=7)
    assert [x.id for x in a] == [x.id for x in draw_exemplars(pool, 3, seed=7)]
    assert [x.id for x in a] != [x.id for x in draw_exemplars(pool, 3, seed=8)]
    target = a[0]
    without = draw_exemplars(pool, 3, seed=7, exclude_id=target.id)
    assert len(without) == 3 and target.id not in {x.id for x in without}
    p = cot_prompt(target, fragments, "qa-01", "kojima-01", exemplars=without)
    assert p.template == COT_TEMPLATE_FEW_SHOT
    first = exemplar_text(without[0], fragments.cot_trigger("kojima-01"), fragments.answer_extraction("kojima-yes-no"))
    assert p.text.startswith("Answer the following question through step-by-step reasoning.\n\n" + first)
    assert " ".join(without[0].cot) in first
    gold = "Yes" if without[0].answer[0] == "True" else "No"
    assert first.endswith(f"Therefore, the answer (Yes or No) is {gold}.")
    assert p.text.endswith(f"{target.question}\n\nAnswer: Let's think step by step.")


def test_stage_two_chat_messages_continue_the_assistant_answer(annotated: Collection, fragments):
    from thoughtsource.prompts.build import answer_prompt, cot_prompt

    sample = next(x for _, _, x in annotated.samples() if x.type == "multiplechoice")
    stage1 = cot_prompt(sample, fragments, None, "kojima-01")
    assert stage1.messages() == ({"role": "user", "content": stage1.text.strip()},)
    stage2 = answer_prompt(stage1, "First, ... so it is B.", fragments, "kojima-A-E")
    user, assistant = stage2.messages()
    assert user == {"role": "user", "content": stage1.text.strip()}
    assert assistant["role"] == "assistant"
    assert assistant["content"] == "First, ... so it is B.\nTherefore, among A through E, the answer is"
    assert stage2.text.startswith(stage1.text) and stage2.text.endswith(assistant["content"])
