# The Attribution Adapter's commands. `make test` is the one CI runs.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: venv test lint openapi run docs load-long fuzz-deep bench clean image image-test

$(STAMP): requirements.txt requirements-dev.txt requirements-build.txt
	@echo "make: installing requirements-dev.txt into $(VENV) (the first time only; pip shows each package)"
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --disable-pip-version-check --progress-bar off -r requirements-dev.txt
	touch $(STAMP)

## The compiled parts (setup.py: the job-log reader's candidate lines, gap pass and watchdog lines, the Loki source's
## buffer of a node's entries, the Loki client's reading of an answer's entries, the kernel-log block's stamp facts,
## the literal search), built in place beside their
## sources with the C compiler and the Python headers of the machine, the literal search against Debian's Vectorscan
## (libvectorscan-dev); made again when a source changes.
COMPILED_SOURCES := providers/telemetry/joblog/_candidates.c \
	providers/telemetry/joblog/_gaps.c providers/telemetry/joblog/_kind_lines.c \
	providers/telemetry/joblog/_loki_buffer.c providers/telemetry/loki/_entries.c \
	providers/telemetry/kernel/sources/_stamps.c providers/telemetry/_literals.c
COMPILED := $(VENV)/.built-compiled
$(COMPILED): setup.py $(COMPILED_SOURCES)
	@echo '#include <hs/hs.h>' | $${CC:-cc} -E -x c - >/dev/null 2>&1 || { echo "make: the compiler finds no hs/hs.h: the literal search builds against Vectorscan's libhs (Debian: apt-get install libvectorscan-dev)" >&2; exit 1; }
	$(PY) setup.py -q build_ext --inplace
	touch $@

venv: $(STAMP) $(COMPILED)

## test: create the virtual environment, install requirements-dev.txt, build the compiled parts and run every test
test: $(STAMP) $(COMPILED)
	$(PY) -m pytest -q -W error

lint: $(STAMP)
	$(VENV)/bin/ruff check .

## openapi: write the OpenAPI document to docs/openapi.json (checked in; a test compares it to a fresh export)
openapi: $(STAMP) $(COMPILED)
	$(PY) -m app.openapi > docs/openapi.json

## clean: remove what the commands make: the virtual environment, the docs site, caches, the compiled parts built in
## place and the build/ folder setuptools leaves
clean:
	rm -rf $(VENV) site .pytest_cache .ruff_cache build *.egg-info $(COMPILED_SOURCES:.c=.*.so)

## run: serve the API on 127.0.0.1:8000 with the open telemetry provider on the sample telemetry in conf/samples.
## Installs requirements.txt only. Every ATTRIBUTION_* variable of the environment reaches the service as it is;
## the five below are defaults for when one is not set, e.g. `ATTRIBUTION_KERNEL_LOG_DIR=/srv/logs make run`.
RUN_STAMP := $(VENV)/.installed-runtime

$(RUN_STAMP): requirements.txt requirements-build.txt
	@echo "make: installing requirements.txt into $(VENV) (the first time only; pip shows each package)"
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --disable-pip-version-check --progress-bar off -r requirements.txt -r requirements-build.txt
	touch $(RUN_STAMP)

run: export ATTRIBUTION_PROVIDER ?= telemetry
run: export ATTRIBUTION_KERNEL_LOG_SOURCE ?= files
run: export ATTRIBUTION_KERNEL_LOG_DIR ?= conf/samples/kernel-logs
run: export ATTRIBUTION_EPILOG_DIR ?= conf/samples/epilog
run: export ATTRIBUTION_JOB_LOG_DIR ?= conf/samples/job-logs
run: $(RUN_STAMP) $(COMPILED)
	exec $(VENV)/bin/gunicorn -c conf/gunicorn.conf.py wsgi:app

## docs: lint docs/openapi.json, build the static reference into site/ (Redocly CLI on the Node.js LTS pinned in
## docs/package.json) and load it in headless Chromium with the network off (SITE_SCREENSHOT=x.png keeps a picture)
docs:
	bash docs/build-site.sh

## load-long: the 60 s, 32-client load test with a worker killed under load (not run in CI)
load-long: $(STAMP) $(COMPILED)
	ATTRIBUTION_LOAD_SECONDS=60 $(PY) -m pytest -q -W error -s tests/load

## fuzz-deep: schemathesis with 2000 examples per operation against real gunicorn, and 2000 mutated kernel logs, 500
## mutated journal files and 4000 mutated job logs (tests/telemetry/test_mutated_logs.py) (not run in CI)
fuzz-deep: $(STAMP) $(COMPILED)
	ATTRIBUTION_FUZZ_EXAMPLES=2000 $(PY) -m pytest -q -W error tests/robustness/test_fuzz_openapi.py \
		tests/telemetry/test_mutated_logs.py

## bench: print the benchmark figures: throughput per provider vs bare Flask (wrk), the maximal request over HTTP,
## workers' peak RSS, the provider benchmarks (bench/all.py), then the concurrency sweep. Needs wrk (apt-get install wrk).
bench: $(STAMP) $(COMPILED)
	@command -v wrk >/dev/null 2>&1 || { echo "make bench: wrk is not installed (Debian/Ubuntu: apt-get install wrk); nothing was measured" >&2; exit 1; }
	$(PY) bench/all.py
	$(PY) bench/framing.py
	$(PY) bench/concurrency.py
	$(PY) bench/kernel_scan.py
	$(PY) bench/hostile.py
	$(PY) bench/loki_scope.py

## image: build the Dockerfile as $(IMAGE) with docker where its engine runs, else with buildah (BUILDER=buildah or
## BUILDER=docker to choose). PYTHON_IMAGE=<image> builds on another base than the pinned default (a mirror of it).
VERSION := $(shell sed -n 's/^__version__ = "\(.*\)"$$/\1/p' app/__init__.py)
IMAGE ?= attribution-adapter:$(VERSION)
PYTHON_IMAGE ?=
BUILDER ?=
IMAGE_ARGS := $(if $(PYTHON_IMAGE),--build-arg PYTHON_IMAGE=$(PYTHON_IMAGE))

image:
	@builder="$(BUILDER)"; \
	if [ -z "$$builder" ]; then \
	    if docker info >/dev/null 2>&1; then builder=docker; elif command -v buildah >/dev/null 2>&1; then builder=buildah; fi; \
	fi; \
	case "$$builder" in \
	    docker) set -x; docker build $(IMAGE_ARGS) -t $(IMAGE) . ;; \
	    buildah) set -x; buildah bud --layers $(IMAGE_ARGS) -t $(IMAGE) . ;; \
	    *) echo "make image: no running docker engine and no buildah (Debian: apt-get install buildah)" >&2; exit 1 ;; \
	esac

## image-test: build the image on a local debootstrap base with buildah and run it with podman, read-only, as its
## user (tests/image). Needs root, buildah, podman, runc and debootstrap (.ci/run installs them).
image-test: $(STAMP) $(COMPILED)
	ATTRIBUTION_IMAGE_TEST=1 $(PY) -m pytest -q -W error tests/image
