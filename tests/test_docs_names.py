"""Every code name the docs cite exists: in README.md, CONTRIBUTING.md, docs/**/*.md (not the data files of
docs/star-results/) and the docstrings of the package, each backticked name of this package imports or is an
attribute, and each backticked path is a file (with that test in it).

A name of this package is ``thoughtsource.x.y``, a relative ``:func:`.result.Evaluation``` in a docstring (to its
module, then its package), or one that starts with the name of one of its modules (``answers.base.AnswerType``,
``base.answer_spans``, ``store.put``: a module's attribute, or a member of a class of the module, as a method of an
instance is cited), except the words in :data:`OTHER_MEANINGS`.  A path has a folder: ``src/thoughtsource/x.py``,
``tests/x.py::test_name``, ``answers/number.py`` (under src/thoughtsource/); a bare ``main.py`` or ``results.json``
may be a file of another project or one a run writes, and is not checked."""

from __future__ import annotations

import ast
import importlib
import pkgutil
import re
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from types import ModuleType

import pytest

import thoughtsource

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "src" / "thoughtsource"
DOCS = [ROOT / "README.md", ROOT / "CONTRIBUTING.md",
        *sorted(p for p in (ROOT / "docs").rglob("*.md") if "star-results" not in p.relative_to(ROOT / "docs").parts[:-1])]
#: The folders a cited path may start from (``answers/number.py`` is under src/thoughtsource/, ``thoughtsource/x.py``
#: under src/), besides the citing file's own folder.
PATH_ROOTS = [ROOT, PACKAGE, ROOT / "src"]
#: The first words of dotted names that the docs also use for something other than the module of that name: the
#: sections of a YAML config (``generation.temperature``, ``server.port``, ``config.seed``), objects at run time
#: (FastAPI's ``app.state``, a run's ``report``, the variable ``collection``, ``data`` of a scratch-model example,
#: ``stats`` of a STaR step's JSON),
#: tables and columns of the web app's database (``users.removed``, ``db.uploads``) and Hugging Face ``datasets``.
OTHER_MEANINGS = {"generation", "server", "config", "app", "report", "collection", "data", "users", "db", "stats"}
OTHER_NAMES = {"datasets.load_dataset", "datasets.DatasetDict",  # Hugging Face datasets
               "vllm.LLM", "vllm.RequestOutput"}  # vLLM's classes, which backends/vllm.py wraps
#: A cited file by its name: a dotted word ending in one of these is a file, not a module attribute.
FILE_EXTENSIONS = {"py", "md", "json", "jsonl", "csv", "png", "svg", "pdf", "yaml", "yml", "toml", "cfg", "txt", "log", "html",
                   "css", "js", "parquet", "arrow", "sqlite", "db", "gguf", "bin", "safetensors", "pt", "sh", "gz", "zip",
                   "tar", "lock", "ini", "tsv", "xml", "ipynb", "wal", "shm", "part", "tmp"}

_ROLE = re.compile(r":(?:py:)?(?:mod|func|class|meth|attr|data|exc|obj|const)?:`([^`]+)`")
_DOUBLE = re.compile(r"``([^`]+)``")
_SINGLE = re.compile(r"(?<!`)`([^`\n]+)`(?!`)")
_FENCE = re.compile(r"^(```|~~~).*?^\1", re.M | re.S)
_DOTTED = re.compile(r"\.?[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*")
_PATH = re.compile(r"[\w.-]+(?:/[\w.-]+)*\.[A-Za-z0-9]+(?:::[\w\[\]-]+)?")
_TOP_DIRS = ("src/", "tests/", "docs/", "benchmarks/", "experiments/", "thoughtsource/")


@cache
def _module_names() -> dict[str, list[str]]:
    """Every module of the package by its last name (``base`` -> answers.base, backends.base, ...)."""
    out: dict[str, list[str]] = {}
    for info in pkgutil.walk_packages(thoughtsource.__path__, "thoughtsource."):
        out.setdefault(info.name.rsplit(".", 1)[-1], []).append(info.name)
    return out


def _resolve(name: str) -> bool:
    """Whether the dotted ``name`` (``thoughtsource.x.y.Z.attr``) is a module or an attribute of one."""
    parts = name.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj: object = importlib.import_module(".".join(parts[:i]))
        except ModuleNotFoundError:
            continue
        for attr in parts[i:]:
            if isinstance(obj, ModuleType):
                try:
                    obj = importlib.import_module(f"{obj.__name__}.{attr}")
                    continue
                except ModuleNotFoundError:
                    pass
            if not hasattr(obj, attr) and attr not in getattr(obj, "__annotations__", {}) \
                    and attr not in getattr(obj, "model_fields", {}) and attr not in getattr(obj, "__dataclass_fields__", {}):
                return False
            obj = getattr(obj, attr, None)
        return True
    return False


def _in_a_class(module: str, attr: str) -> bool:
    """Whether a class defined in ``module`` has ``attr`` (``store.put``: the method of a store)."""
    mod = importlib.import_module(module)
    return any(_resolve(f"{module}.{name}.{attr}") for name, obj in vars(mod).items()
               if isinstance(obj, type) and obj.__module__ == module)


def _check_name(token: str, module: str | None, role: bool) -> str | None:
    """Why a cited code name does not resolve; None if it does or is not one of the package's names.  ``role``: cited
    as ``:func:`x```, where a relative ``.x`` is a name (elsewhere ``.json`` or ``.item()`` is not)."""
    token = token.strip().lstrip("~!").removesuffix("()")
    token = re.sub(r"\(.*\)$", "", token)
    if not _DOTTED.fullmatch(token):
        return None
    if token.startswith("."):  # relative, in a docstring: to the module itself, then to its package
        if module is None or not role:
            return None
        package = module if hasattr(importlib.import_module(module), "__path__") else module.rsplit(".", 1)[0]
        bases = [module, package] if module != package else [module]
        if any(_resolve(base + token) for base in bases):
            return None
        return f"{token!r} is not in {module}"
    parts = token.split(".")
    if len(parts) < 2 or parts[-1] in FILE_EXTENSIONS:
        return None
    if parts[0] == "thoughtsource":
        return None if _resolve(token) else f"{token!r} does not exist"
    candidates = _module_names().get(parts[0], [])
    if not candidates or parts[0] in OTHER_MEANINGS or token in OTHER_NAMES:
        return None
    if any(_resolve(".".join([c, *parts[1:]])) for c in candidates):
        return None
    if len(parts) == 2 and any(_in_a_class(c, parts[1]) for c in candidates):
        return None
    return f"{token!r} is in none of {', '.join(candidates)}"


def _check_path(token: str, here: Path) -> str | None:
    """Why a cited path is not a file (or its ``::test`` not in it); None if it is, or if it is not a path."""
    token = token.strip()
    if any(c in token for c in "<>*{}…$ ") or not _PATH.fullmatch(token):
        return None
    path, _, test = token.partition("::")
    if "/" not in path:
        return None  # main.py, results.json: a file of another project or one a run writes
    if not path.startswith(_TOP_DIRS) and path.split("/", 1)[0] not in {p.name for p in PACKAGE.iterdir()}:
        return None  # a path of something else (a model's files, a URL's tail, a data folder)
    found = [p for p in (r / path for r in [*PATH_ROOTS, here.parent]) if p.exists()]
    if not found:
        return f"{path!r} does not exist"
    if test and not any(p.is_file() and re.search(rf"^(?:async )?def {re.escape(test)}\b", p.read_text(), re.M) for p in found):
        return f"{path!r} has no test {test!r}"
    return None


def _tokens(text: str) -> Iterator[tuple[str, bool]]:
    """The backticked words of a text, each with whether it is a role (``:func:`x```): roles, double and single
    backticks."""
    yield from ((m.group(1), True) for m in _ROLE.finditer(text))
    rest = _ROLE.sub("", text)
    yield from ((m.group(1), False) for m in _DOUBLE.finditer(rest))
    yield from ((m.group(1), False) for m in _SINGLE.finditer(_DOUBLE.sub("", rest)))


def _problems(text: str, here: Path, module: str | None) -> list[str]:
    out = []
    for token, role in _tokens(text):
        for word in {token, token.split(" ", 1)[0]}:  # "``evaluate_frame(answers_csv=...)``", "`x.py PATH`"
            why = _check_path(word, here) or _check_name(word, module, role)
            if why:
                out.append(why)
    return sorted(set(out))


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_the_docs_cite_only_names_that_exist(doc: Path) -> None:
    text = _FENCE.sub("", doc.read_text(encoding="utf-8"))
    assert _problems(text, doc, None) == []


def _docstrings(path: Path) -> Iterator[tuple[int, str]]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in [tree, *ast.walk(tree)]:
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            doc = ast.get_docstring(node, clean=False)
            if doc:
                yield getattr(node, "lineno", 1), doc


def test_the_docstrings_cite_only_names_that_exist() -> None:
    problems = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE.parent).with_suffix("")
        module = ".".join(rel.parts[:-1] if rel.name == "__init__" else rel.parts)
        for line, doc in _docstrings(path):
            problems.extend(f"{path.relative_to(ROOT)}:{line}: {why}" for why in _problems(doc, path, module))
    assert sorted(set(problems)) == []


@pytest.mark.parametrize("text, problem", [
    ("using `base._spans`/`_clean`", "'base._spans' is in none of"),
    ("``tests/answers/test_conformance.py`` runs every type", "'tests/answers/test_conformance.py' does not exist"),
    ("`thoughtsource.evaluate.no_such_function`", "'thoughtsource.evaluate.no_such_function' does not exist"),
    ("`tests/test_extract.py::test_no_such_test`", "'tests/test_extract.py' has no test 'test_no_such_test'"),
    (":func:`.no_such_name`", "'.no_such_name' is not in thoughtsource.extract"),
])
def test_a_stale_name_is_caught(text: str, problem: str) -> None:
    (found,) = _problems(text, PACKAGE / "extract.py", "thoughtsource.extract")
    assert found.startswith(problem)


def test_names_that_exist_pass() -> None:
    text = ("`answers.base.AnswerType`, `base.answer_spans`, `thoughtsource.evaluate.evaluate_frame`, "
            "`src/thoughtsource/extract.py`, `answers/number.py`, `tests/test_extract.py::test_bad_arguments_raise`, "
            "`results.json`, `Answer.correct_answer`, :func:`~thoughtsource.extract.extract`, `store.put`, "
            ":func:`.extract`, :mod:`.answers.base`, ``.json``, `generation.temperature`")
    assert _problems(text, PACKAGE / "extract.py", "thoughtsource.extract") == []
