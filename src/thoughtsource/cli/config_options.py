"""Command-line options made from pydantic config models, and the generic ``--set KEY=VALUE`` override.

A command lists which fields of its config it offers as named options (:class:`ConfigOption`: the field's dotted
path, and the option's name where it is not ``--`` + the field's name in kebab case); the option's type comes from the
field's annotation (a ``Literal`` is a choice, a ``bool`` a ``--x/--no-x`` pair) and its help from the field's
``description``, so the config model is the one place a field is described.  Every named option defaults to None:
not given, and the YAML config (or the model's default) wins.  :func:`config_options` adds the options to a typer
command and hands the command a :class:`GivenOptions`: what was given, by field path.

``--set KEY=VALUE`` (repeatable) reaches every field, named option or not: KEY is a dotted path (``lr``,
``generation.temperature``, ``task_options.n_dev_per_digit``), VALUE is read as YAML (``null``, ``[a, b]``,
``{x: 1}``) and validated with the field's type (a value the YAML reading does not fit is taken as the plain string).
An unknown key is one error line naming the key and the valid ones.

Precedence, lowest first: the model's defaults, the YAML config (``--config``; ``star run --resume``: the run's
config.json), ``--set`` in the order given, the named options.
"""

from __future__ import annotations

import enum
import functools
import inspect
import types
import typing
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, TypeVar

import typer
from pydantic import BaseModel, TypeAdapter, ValidationError
from pydantic.fields import FieldInfo

F = TypeVar("F", bound=Callable[..., Any])

SET_HELP = ("Set any config field: KEY=VALUE, KEY a field or a dotted path into a section (section.field=value), VALUE "
            "read as YAML; repeatable. Precedence: the YAML config, then --set, then the named options.")


@dataclass(frozen=True)
class ConfigOption:
    """One named option that sets the field at ``path`` (dotted) of ``model``."""

    model: type[BaseModel]
    path: str
    #: the option's name; default ``--`` + the last part of ``path`` in kebab case
    name: str | None = None
    short: str | None = None
    #: a bool field offered only as ``--no-NAME`` (given: the field is False)
    off_only: bool = False
    #: the command-line type where it is not the field's (``report_to``: one comma-separated string)
    type: Any = None
    #: a list field: the option is repeatable, and with ``csv`` each value is split on commas
    csv: bool = False
    hidden: bool = False
    #: the help where it is not the field's description (a deprecated alias)
    help: str | None = None

    @property
    def option(self) -> str:
        return self.name or "--" + self.path.rsplit(".", 1)[-1].replace("_", "-")

    @property
    def param(self) -> str:
        """The command function's parameter name (``--gen-batch-size``: gen_batch_size)."""
        return self.option.removeprefix("--no-" if self.off_only else "--").replace("-", "_")

    @property
    def field(self) -> FieldInfo:
        return field_at(self.model, self.path)

    def cli_type(self) -> tuple[Any, bool]:
        """(the type typer parses the option with, whether the option is repeatable)."""
        if self.type is not None:
            return self.type, False
        annotation = _optional_inner(self.field.annotation)
        if typing.get_origin(annotation) is list:
            (item,) = typing.get_args(annotation)
            return _scalar_type(_optional_inner(item), self.path), True
        return _scalar_type(annotation, self.path), False

    def parameter(self) -> inspect.Parameter:
        cli_type, multiple = self.cli_type()
        help_text = self.help if self.help is not None else self.field.description
        if self.csv and help_text:
            help_text += " Comma-separated, repeatable."
        if self.off_only:
            info = typer.Option(False, self.option, help=help_text, hidden=self.hidden)
            return inspect.Parameter(self.param, inspect.Parameter.KEYWORD_ONLY, default=info, annotation=bool)
        decls = [self.option]
        if cli_type is bool:
            decls = [f"{self.option}/--no-{self.option.removeprefix('--')}"]
        if self.short:
            decls.append(self.short)
        info = typer.Option(None, *decls, help=help_text, hidden=self.hidden)
        annotation = list[cli_type] if multiple else cli_type | None  # type: ignore[valid-type]
        return inspect.Parameter(self.param, inspect.Parameter.KEYWORD_ONLY, default=info, annotation=annotation)

    def value(self, given: Any) -> tuple[bool, Any]:
        """(whether the option was given, the field's value) from what typer parsed."""
        if self.off_only:
            return bool(given), False
        if isinstance(given, list | tuple):
            values = [v.value if isinstance(v, enum.Enum) else v for v in given]
            if self.csv:
                values = [part.strip() for v in values for part in str(v).split(",") if part.strip()]
            return bool(values), values
        if given is None:
            return False, None
        return True, given.value if isinstance(given, enum.Enum) else given


def options(model: type[BaseModel], *items: str | ConfigOption | dict[str, Any]) -> list[ConfigOption]:
    """``ConfigOption``s of ``model``: a field path, or ``{"path": ..., "name": ..., ...}`` for the other settings."""
    out = []
    for item in items:
        if isinstance(item, ConfigOption):
            out.append(item)
        elif isinstance(item, str):
            out.append(ConfigOption(model, item))
        else:
            out.append(ConfigOption(model, **item))
    for o in out:
        o.field  # noqa: B018 - a path that names no field fails at import, not when the option is used
    return out


@dataclass(frozen=True)
class GivenOptions:
    """What a command was given: the named options (by model and field path) and the ``--set`` items."""

    values: dict[tuple[type[BaseModel], str], Any]
    sets: tuple[str, ...] = ()

    def fields(self, model: type[BaseModel]) -> dict[str, Any]:
        """``{field path: value}`` of the named options of ``model`` that were given."""
        return {path: v for (m, path), v in self.values.items() if m is model}

    def apply(self, model: type[BaseModel], data: dict[str, Any]) -> None:
        """``--set`` then the named options of ``model`` over ``data`` (a config as a dict), in place."""
        apply_sets(model, data, self.sets)
        for path, value in self.fields(model).items():
            set_path(data, path, value)


def config_options(specs: Sequence[ConfigOption], *, after: str, set_option: bool = True) -> Callable[[F], F]:
    """Add ``specs`` (and ``--set``) to a typer command, after its parameter ``after``; the command takes them as
    ``given: GivenOptions`` (a keyword parameter it declares last)."""

    def decorate(func: F) -> F:
        sig = inspect.signature(func, eval_str=True)
        own = [p for name, p in sig.parameters.items() if name != "given"]
        generated = [s.parameter() for s in specs]
        if set_option:
            generated.insert(0, inspect.Parameter(
                "set_", inspect.Parameter.KEYWORD_ONLY, annotation=list[str],
                default=typer.Option(None, "--set", metavar="KEY=VALUE", help=SET_HELP)))
        names = [p.name for p in own]
        clash = set(names) & {p.name for p in generated}
        if clash or after not in names or "given" not in sig.parameters:
            raise TypeError(f"{func.__name__}: generated options clash with {sorted(clash)} or no '{after}'/'given' parameter")
        i = names.index(after) + 1
        params = [p.replace(kind=inspect.Parameter.KEYWORD_ONLY) for p in own]
        params = params[:i] + generated + params[i:]

        @functools.wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            values: dict[tuple[type[BaseModel], str], Any] = {}
            for spec in specs:
                given, value = spec.value(kwargs.pop(spec.param))
                if given:
                    values[(spec.model, spec.path)] = value
            sets = tuple(kwargs.pop("set_", None) or ()) if set_option else ()
            return func(*args, **kwargs, given=GivenOptions(values, sets))

        wrapper.__signature__ = sig.replace(parameters=params)  # type: ignore[attr-defined]
        return wrapper  # type: ignore[return-value]

    return decorate


# --------------------------------------------------------------------------- fields, types, --set
def _optional_inner(annotation: Any) -> Any:
    """``X | None`` → X; anything else as it is."""
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        if len(args) == 1:
            return args[0]
    return annotation


@functools.cache
def _choices(name: str, values: tuple[str, ...]) -> type[enum.Enum]:
    return enum.Enum(name, {v: v for v in values}, type=str)  # type: ignore[return-value]


def _scalar_type(annotation: Any, path: str) -> Any:
    if typing.get_origin(annotation) is Literal:
        return _choices("".join(p.title() for p in path.replace(".", "_").split("_")), tuple(typing.get_args(annotation)))
    if annotation in (str, int, float, bool, Path):
        return annotation
    raise TypeError(f"{path}: no command-line type for {annotation!r}; give ConfigOption(type=...)")


def _model_of(annotation: Any) -> type[BaseModel] | None:
    inner = _optional_inner(annotation)
    return inner if isinstance(inner, type) and issubclass(inner, BaseModel) else None


def field_at(model: type[BaseModel], path: str) -> FieldInfo:
    """The pydantic field at dotted ``path`` of ``model`` (through nested models)."""
    *parents, last = path.split(".")
    for part in parents:
        nested = _model_of(model.model_fields[part].annotation)
        if nested is None:
            raise KeyError(f"{path}: {part} is not a nested model")
        model = nested
    return model.model_fields[last]


def _bad_set(message: str) -> typer.BadParameter:
    return typer.BadParameter(message, param_hint="'--set'")


def key_type(model: type[BaseModel], key: str) -> Any:
    """The type a ``--set`` value of ``key`` (dotted) is validated with: the field's annotation, through nested models
    and into ``dict`` fields (``task_options.x``: the dict's value type).  An unknown key is a usage error naming it
    and the valid keys where it went wrong."""
    current: Any = model
    parts = key.split(".")
    for depth, part in enumerate(parts):
        where = ".".join(parts[:depth])
        nested = _model_of(current)
        if nested is not None:
            if part not in nested.model_fields:
                known = ", ".join(nested.model_fields)
                raise _bad_set(f"unknown key '{key}': {f'{where} has' if where else 'the config has'} no field '{part}'; "
                               f"valid: {known}")
            current = nested.model_fields[part].annotation
        elif typing.get_origin(_optional_inner(current)) is dict:
            current = typing.get_args(_optional_inner(current))[1]
        else:
            raise _bad_set(f"unknown key '{key}': {where} is a value, not a section with fields")
    return current


def parse_value(annotation: Any, key: str, raw: str) -> Any:
    """``raw`` read as YAML and validated with ``annotation`` (else as the plain string), as plain data (json mode)."""
    import yaml

    try:
        loaded = yaml.safe_load(raw) if raw.strip() else raw
    except yaml.YAMLError:
        loaded = raw
    if annotation is Any:
        return loaded
    adapter: TypeAdapter[Any] = TypeAdapter(annotation)
    error: ValidationError | None = None
    for candidate in (loaded, raw) if loaded is not raw else (raw,):
        try:
            return adapter.dump_python(adapter.validate_python(candidate), mode="json")
        except ValidationError as e:
            error = error or e
    assert error is not None
    raise _bad_set(f"{key}={raw}: {error.errors()[0]['msg']}")


def set_path(data: dict[str, Any], path: str, value: Any) -> None:
    """``data[a][b][c] = value`` for path ``a.b.c``, making the sections that are missing."""
    *parents, last = path.split(".")
    for p in parents:
        section = data.get(p)
        if not isinstance(section, dict):
            section = data[p] = {}
        data = section
    data[last] = value


def apply_sets(model: type[BaseModel], data: dict[str, Any], sets: Sequence[str]) -> list[str]:
    """Each ``KEY=VALUE`` of ``sets`` over ``data`` (a config of ``model`` as a dict), in order; returns the keys."""
    keys = []
    for item in sets:
        key, eq, raw = item.partition("=")
        key = key.strip()
        if not eq or not key or any(not p for p in key.split(".")):
            raise _bad_set(f"expected KEY=VALUE (KEY a dotted field path), got '{item}'")
        set_path(data, key, parse_value(key_type(model, key), key, raw))
        keys.append(key)
    return keys
