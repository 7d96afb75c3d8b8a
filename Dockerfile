# syntax=docker/dockerfile:1
# The Attribution Adapter's image: the pinned runtime requirements in a virtual environment, the service's own code
# in /app, gunicorn started as the Procfile says, as an unprivileged numeric user on a read-only root filesystem.
#
#   docker build -t attribution-adapter:0.1.0 .
#
# The base is python:3.11.16-slim-bookworm, pinned by the digest of its multi-platform index as the official
# images' record gives it (docker-library/repo-info, repos/python/remote/3.11.16-slim-bookworm.md). Override
# PYTHON_IMAGE to build on a mirror of the same image.
ARG PYTHON_IMAGE=python:3.11.16-slim-bookworm@sha256:0bee7276f83efd4a1ee05bbbf4281d95ed28e079220a9457f25a93e3f1e3c31b

# ---------------------------------------------------------------- build: the virtual environment and the code
FROM ${PYTHON_IMAGE} AS build

ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1 PYTHONDONTWRITEBYTECODE=1

# requirements.txt pins every runtime dependency, transitive ones included: --no-deps installs exactly those and
# `pip check` fails the build if the list ever misses one. Test tools (requirements-dev.txt) never enter the image.
COPY requirements.txt /tmp/requirements.txt
RUN python -m venv /opt/venv \
 && /opt/venv/bin/pip install --no-deps -r /tmp/requirements.txt \
 && /opt/venv/bin/pip check

# Only what the service runs: no tests, docs, benchmarks or sample logs (.dockerignore keeps them out of the
# context as well).
COPY wsgi.py /app/
COPY app/ /app/app/
COPY schemas/ /app/schemas/
COPY providers/ /app/providers/
COPY conf/gunicorn.conf.py /app/conf/
# The service's compiled parts (setup.py: the job-log reader's gap pass, the kernel-log block's stamp facts, the
# Loki client's reading of an answer's entries, the literal search) built beside their sources in /app against the base's Python, with the setuptools of
# requirements-build.txt in a virtual environment of its own that the runtime never sees (its intermediate files under
# /build); a C compiler and the literal search's library with its headers (Debian's Vectorscan, libvectorscan-dev)
# are installed for this stage only, where the base has none (the slim image has the Python headers).
COPY requirements-build.txt setup.py /build/
RUN missing=""; \
    command -v cc >/dev/null || missing="gcc libc6-dev"; \
    [ -e /usr/include/hs/hs.h ] || missing="$missing libvectorscan-dev"; \
    if [ -n "$missing" ]; then \
        apt-get update && apt-get install -y --no-install-recommends $missing && rm -rf /var/lib/apt/lists/*; \
    fi \
 && python -m venv /opt/build \
 && /opt/build/bin/pip install --no-deps -r /build/requirements-build.txt \
 && cd /app && /opt/build/bin/python /build/setup.py -q build_ext --inplace \
        --build-temp /build/temp --build-lib /build/lib
# Compiled here: at run time the root filesystem is read-only and nothing may be written beside the code.
RUN /opt/venv/bin/python -m compileall -q /app /opt/venv

# ---------------------------------------------------------------- runtime
FROM ${PYTHON_IMAGE}

# The library the literal search's compiled part links with (Debian's Vectorscan: libhs.so.5), where the base has none.
RUN if ! ldconfig -p | grep -q 'libhs\.so\.5 '; then \
        apt-get update && apt-get install -y --no-install-recommends libvectorscan5 && rm -rf /var/lib/apt/lists/*; \
    fi

# A fixed, numeric, unprivileged user: Kubernetes' runAsNonRoot can only verify a numeric USER, and the
# Deployment's runAsUser is the same 10001.
RUN groupadd --system --gid 10001 adapter \
 && useradd --system --uid 10001 --gid 10001 --home-dir /tmp --no-create-home --shell /usr/sbin/nologin adapter

COPY --from=build /opt/venv /opt/venv
COPY --from=build /app /app

# In a container the loopback default would make the API unreachable; the ports stay private to the pod's network.
# /tmp is the one writable path (a tmpfs or an emptyDir): gunicorn's heartbeat files and the metrics library's
# per-process files live there, as in deploy/kubernetes.
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    HOME=/tmp \
    PROMETHEUS_MULTIPROC_DIR=/tmp/prometheus-multiproc \
    ATTRIBUTION_BIND=0.0.0.0:8000 \
    ATTRIBUTION_METRICS_BIND=0.0.0.0:9464

WORKDIR /app
USER 10001:10001
EXPOSE 8000 9464
# The Procfile's web command.
CMD ["gunicorn", "-c", "conf/gunicorn.conf.py", "wsgi:app"]
