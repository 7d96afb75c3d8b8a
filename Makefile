# The Attribution Adapter's commands. `make test` is the one CI runs.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: venv test lint openapi run clean

$(STAMP): requirements.txt requirements-dev.txt
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -r requirements-dev.txt
	touch $(STAMP)

venv: $(STAMP)

## test: create the virtual environment, install requirements-dev.txt and run every test
test: $(STAMP)
	$(PY) -m pytest -q -W error

lint: $(STAMP)
	$(VENV)/bin/ruff check .

## openapi: write the OpenAPI document to docs/openapi.json (checked in; a test compares it to a fresh export)
openapi: $(STAMP)
	$(PY) -m app.openapi > docs/openapi.json

clean:
	rm -rf $(VENV) site .pytest_cache .ruff_cache
