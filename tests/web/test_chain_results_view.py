"""Chain and self-reflection results are served by the viewer like every other generated CoT."""

from __future__ import annotations

from pathlib import Path

from thoughtsource import Collection
from thoughtsource.generation.chains import self_generate_extract, self_reflect

from .conftest import add_user, login

MOCK = {"backend": "mock", "backend_options": {"echo_choice": True}, "author": "chain-test"}


def test_reflection_is_shown_on_the_sample_page(make_app, examples_dir: Path, tmp_path: Path) -> None:
    c = Collection.from_json(examples_dir / "tests_unit_data" / "worldtree_100_dataset.json").select(split="train", number_samples=2)
    self_generate_extract(c, MOCK, store=tmp_path / "s.sqlite")
    self_reflect(c, MOCK, store=tmp_path / "s.sqlite")
    path = tmp_path / "reflected.json"
    c.dump(path)
    app = make_app(data=None, files=[path])
    add_user(app, "alice")
    client, _ = login(app, "alice")
    sample = c["worldtree"]["train"][0]
    page = client.get(f"/sample/worldtree/train/{sample.id}")
    assert page.status_code == 200
    reflection = sample.generated_cot[-1]
    assert reflection.instruction == "refl-01"
    assert "refl-01" in page.text and reflection.answers[0].answer in page.text
    assert client.get("/samples?trigger=kojima-01").status_code == 200
