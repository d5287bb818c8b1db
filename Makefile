# Two commands set everything up: `make run` and `make test`. Both create .venv when missing.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
STORE ?= ./store
PORT ?= 8081
NAMESRV_PORT ?= 9876
# more mqbroker flags for `make run`, e.g. ARGS="-o metricsExporterType=PROM"
ARGS ?=

.PHONY: venv test lint typecheck unit run bench bench-peers-install protos docs-config clean

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
	$(BIN)/mypy orbitmq broker namesrv oms plugins transports spark_connector pyspark_rocketmq dashboard

unit: $(STAMP)
	$(BIN)/pytest -q $(PYTEST_ARGS)

test: lint typecheck unit

run: $(STAMP)
	$(BIN)/mqbroker --standalone --store $(STORE) --port $(PORT) --namesrv-port $(NAMESRV_PORT) $(ARGS)

bench: $(STAMP)
	$(BIN)/python -m benchmarks.run_all

# Redis, RabbitMQ and NATS servers (Debian packages, needs root) and their clients (extra `bench`) for the peer
# section of the e2e bench; without them `make bench` still runs and reports each peer as "not installed".
bench-peers-install: $(STAMP)
	VENV=$(VENV) bash scripts/install_peers.sh

protos: $(STAMP)
	$(BIN)/python scripts/gen_protos.py

# docs/configuration.md's key reference, from the config dataclasses (a key's comment is its meaning)
docs-config: $(STAMP)
	$(BIN)/python scripts/gen_config_docs.py

clean:
	rm -rf $(VENV) build *.egg-info .mypy_cache .pytest_cache .ruff_cache
