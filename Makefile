# sparkmv: everything installs from nothing into .venv.
#   make install      what sparkmv and `make demo` run: the package, its runtime libraries and
#                     DuckDB (the demo's independent check); no browser, no test tools
#   make install-dev  the tests, linters and docs on top: pytest, ruff, mypy, mutmut, MkDocs,
#                     Debian's chromium (browser test), graphviz and the PostgreSQL JDBC driver
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
DEV_STAMP := $(VENV)/.installed-dev

JDBC_JAR := /usr/share/java/postgresql.jar

.PHONY: install install-dev jdbc ui-deps jvm-archive demo docs screenshots test test-slow test-compat mutation lint lint-imports format typecheck bench clean

install: $(STAMP) jvm-archive

install-dev: install $(DEV_STAMP) jdbc ui-deps

# The class-data archive of the local Spark driver JVM (a cold run loads Spark's classes from
# it): built on this machine, once per Java runtime and Spark jars (sparkmv jvm-archive).
jvm-archive: $(STAMP)
	@$(BIN)/sparkmv jvm-archive --if-missing || echo "warning: no JVM archive (cold Spark starts are slower)"

# The PostgreSQL JDBC driver for refreshable tables with connector 'jdbc' (and their tests):
# Debian's package, installed only when its jar is missing (needs root or sudo).
jdbc:
	@test -f $(JDBC_JAR) || { SUDO=$$(test "$$(id -u)" = 0 || echo sudo); \
		$$SUDO apt-get update && $$SUDO apt-get install -y libpostgresql-jdbc-java; }

# sparkmv ui lays out its graph with Graphviz `dot` when installed (its own layout otherwise);
# the browser test drives Debian's chromium through Playwright (never `playwright install`).
# Installed only when missing.
ui-deps:
	@{ test -x /usr/bin/dot && test -x /usr/bin/chromium; } || { SUDO=$$(test "$$(id -u)" = 0 || echo sudo); \
		$$SUDO apt-get update && $$SUDO apt-get install -y graphviz chromium chromium-driver; }

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[demo]'
	touch $(STAMP)

$(DEV_STAMP): $(STAMP)
	$(BIN)/python -m pip install --quiet -e '.[demo,docs,dev]'
	touch $(DEV_STAMP)

demo: install
	SPARKMV_HOME=.sparkmv-demo $(BIN)/sparkmv demo --scale-factor $${SF:-1} --data data/tpch

# The documentation site (mkdocs.yml, docs/): --strict fails on a broken link, a missing page
# or a docstring the API reference cannot render. Output in site/.
docs: install-dev
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --site-dir site

# docs/ui-graph.png and docs/ui-mv-page.png: the browser test over the demo catalog saves them.
screenshots: install-dev
	SPARKMV_UI_SCREENSHOT_DIR=docs $(BIN)/python -m pytest -q -p no:cacheprovider \
		tests/ui/test_browser.py -k test_graph_object_page_and_live_progress

# Two workers (pytest-xdist): the suite waits on Py4J, subprocesses and servers about half the
# time, so two JVMs on 2 cores took 12 min 42 s against 23-25 min for one (bench/RESULTS.md).
# The tests of the session's Spark cluster and Connect server share one worker (loadgroup).
test: install-dev lint-imports
	$(BIN)/python -m pytest -q -p no:cacheprovider --durations=25 -m "not long" -n 2 --dist loadgroup

# The differential suite against DuckDB with ten times the hypothesis examples, and the
# tests marked `long` (left out of `make test` for time).
test-slow: install-dev
	SPARKMV_DIFF_PROFILE=slow $(BIN)/python -m pytest -q -p no:cacheprovider tests/differential
	$(BIN)/python -m pytest -q -p no:cacheprovider -m long

# Spark 4.1 still works: a second venv with the newest pyspark 4.1 runs the pipeline, refresh
# and cluster tests (make install picks the newest pyspark sparkmv supports, 4.3).
COMPAT_VENV := .venv-spark41
COMPAT_PYSPARK ?= pyspark>=4.1.1,<4.2
COMPAT_TESTS ?= tests/pipelines tests/refresh tests/cluster
test-compat: jdbc ui-deps
	test -x $(COMPAT_VENV)/bin/python || $(PYTHON) -m venv $(COMPAT_VENV)
	$(COMPAT_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(COMPAT_VENV)/bin/python -m pip install --quiet -e '.[demo,dev]' '$(COMPAT_PYSPARK)'
	$(COMPAT_VENV)/bin/python -c 'import pyspark; print("pyspark", pyspark.__version__)'
	$(COMPAT_VENV)/bin/python -m pytest -q -p no:cacheprovider -m "not long" -n 2 --dist loadgroup $(COMPAT_TESTS)

# The mutation score of the pure logic ([tool.mutmut] in pyproject.toml; not part of `test`):
# two workers so the machine stays usable; MUTANTS='sparkmv.analysis*' narrows the run.
# Results: `$(BIN)/mutmut results`; recorded in bench/RESULTS.md ("Mutation score").
mutation: install-dev
	$(BIN)/mutmut run --max-children $${MUTMUT_CHILDREN:-2} $${MUTANTS:-}
	$(BIN)/mutmut export-cicd-stats

lint: install-dev
	$(BIN)/ruff check src tests bench
	$(BIN)/ruff format --check src tests bench
	$(BIN)/mypy src
	$(BIN)/lint-imports

# The layer contract of shared/DESIGN.md ([tool.importlinter] in pyproject.toml).
lint-imports: install-dev
	$(BIN)/lint-imports

format: install-dev
	$(BIN)/ruff format src tests bench
	$(BIN)/ruff check --fix src tests bench

bench: install-dev
	$(BIN)/python bench/bench_pct.py
	$(BIN)/python bench/bench_iceberg_pct.py
	$(BIN)/python bench/bench_incremental.py
	$(BIN)/python bench/bench_resume.py --repeat 2 --write
	$(BIN)/python bench/bench_reload.py --append-results
	$(BIN)/python bench/bench_cli.py --append-results
	$(BIN)/python bench/bench_ui.py --write
	$(BIN)/python bench/bench_rewrite.py
	$(BIN)/python bench/bench_expectations.py --repeat 3

clean:
	rm -rf $(VENV) $(COMPAT_VENV) site .sparkmv .sparkmv-demo .pytest_cache .mypy_cache .ruff_cache mutants
