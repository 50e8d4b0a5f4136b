"""errors.validation_problems: the one formatter of pydantic errors, and the four configs that list their problems with it."""

from __future__ import annotations

import pytest
from pydantic import BaseModel, ConfigDict, ValidationError, model_validator

from thoughtsource.errors import ConfigError, validation_problems
from thoughtsource.generation.config import GenerateConfig, make_backend
from thoughtsource.star.config import StarConfig
from thoughtsource.star.scratch_model import BaseConfig


class _Inner(BaseModel):
    model_config = ConfigDict(extra="forbid")
    size: int


class _Outer(BaseModel):
    model_config = ConfigDict(extra="forbid")
    inner: _Inner
    items: list[int] = []

    @model_validator(mode="after")
    def _check(self) -> _Outer:
        if self.inner.size == 13:
            raise ValueError("no 13")
        return self


def _error(data: dict[str, object]) -> ValidationError:
    with pytest.raises(ValidationError) as e:
        _Outer.model_validate(data)
    return e.value


def test_every_problem_one_line_with_its_dotted_location() -> None:
    problems = validation_problems(_error({"inner": {"size": "x", "colour": 1}, "items": [1, "two"]}))
    assert problems == [
        "inner.size: Input should be a valid integer, unable to parse string as an integer",
        "inner.colour: Extra inputs are not permitted",
        "items.1: Input should be a valid integer, unable to parse string as an integer",
    ]


def test_a_problem_of_the_whole_model_is_named_by_root() -> None:
    e = _error({"inner": {"size": 13}})
    assert validation_problems(e) == ["(root): Value error, no 13"]
    assert validation_problems(e, root="config") == ["config: Value error, no 13"]
    assert validation_problems(e, root="") == [": Value error, no 13"]


def test_the_configs_list_their_problems_as_before() -> None:
    with pytest.raises(ConfigError) as e:
        StarConfig.from_dict({"iterations": "many", "colour": 1}, path="run.yaml")
    assert str(e.value).startswith("run.yaml: invalid STaR config\n")
    assert e.value.problems[-1] == "colour: Extra inputs are not permitted" and e.value.problems[0].startswith("iterations: ")
    with pytest.raises(ConfigError) as e:
        BaseConfig.from_dict({"gate": {"share": 2}}, path="base.yaml")
    assert e.value.problems == ["gate.share: Input should be less than or equal to 1"]
    assert str(e.value) == "base.yaml: invalid base-model config\n  - gate.share: Input should be less than or equal to 1"
    with pytest.raises(ConfigError) as e:
        GenerateConfig.parse({"temperature": "hot"})
    assert str(e.value).startswith("invalid generate config\n  - temperature: Input should be a valid number")
    with pytest.raises(ConfigError) as e:
        GenerateConfig.parse({"n": 2, "temperature": 0})
    assert e.value.problems == ["config: Value error, n > 1 needs temperature > 0 (greedy decoding gives n identical CoTs)"]
    with pytest.raises(ConfigError) as e:
        make_backend(GenerateConfig.parse({"backend": "openai", "backend_options": {"colour": 1}}))
    assert str(e.value).startswith("invalid options for backend 'openai'\n  - colour: ")
