# Two commands set everything up: `make run` and `make test`. Both create .venv when missing.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
STORE ?= ./store
PORT ?= 8081

.PHONY: venv test lint typecheck unit run bench protos clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[dev]'
	touch $(STAMP)

venv: $(STAMP)

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: $(STAMP)
	$(BIN)/mypy common broker namesrv oms plugins transports spark_connector

unit: $(STAMP)
	$(BIN)/pytest -q $(PYTEST_ARGS)

test: lint typecheck unit

run: $(STAMP)
	$(BIN)/mqbroker --standalone --store $(STORE) --port $(PORT)

bench: $(STAMP)
	$(BIN)/python -m benchmarks.run_all

protos: $(STAMP)
	$(BIN)/python scripts/gen_protos.py

clean:
	rm -rf $(VENV) build *.egg-info .mypy_cache .pytest_cache .ruff_cache
