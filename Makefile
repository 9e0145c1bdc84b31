# sparkmv: everything installs from nothing into .venv.
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: install demo test test-slow lint format typecheck bench clean

install: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

demo: install
	SPARKMV_HOME=.sparkmv-demo $(BIN)/sparkmv demo --scale-factor $${SF:-1} --data data/tpch

test: install
	$(BIN)/python -m pytest -q -p no:cacheprovider

# The differential suite against DuckDB with ten times the hypothesis examples.
test-slow: install
	SPARKMV_DIFF_PROFILE=slow $(BIN)/python -m pytest -q -p no:cacheprovider tests/differential

lint: install
	$(BIN)/ruff check src tests bench
	$(BIN)/ruff format --check src tests bench
	$(BIN)/mypy src

format: install
	$(BIN)/ruff format src tests bench
	$(BIN)/ruff check --fix src tests bench

bench: install
	$(BIN)/python bench/bench_pct.py
	$(BIN)/python bench/bench_resume.py --repeat 2 --write
	$(BIN)/python bench/bench_reload.py --append-results

clean:
	rm -rf $(VENV) .sparkmv .sparkmv-demo .pytest_cache .mypy_cache .ruff_cache
