"""Offline checks of the Dockerfile and .dockerignore: what can be known about the image without building it.

The test machines reach no container registry, so the pinned base cannot be pulled and the build itself is not
run here. What is checked instead: every file the Dockerfile copies exists and survives .dockerignore, the base
image is pinned by tag and digest, only requirements.txt is installed where the service runs (the compiled parts'
build tools in a build-only environment), the final stage runs the Procfile's command as a numeric non-root user,
and the writable paths are the ones the Kubernetes Deployment mounts.
"""

from __future__ import annotations

import fnmatch
import json
import re
import shlex
import subprocess
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
DOCKERFILE = ROOT / "Dockerfile"
DOCKERIGNORE = ROOT / ".dockerignore"
DEPLOYMENT = ROOT / "deploy" / "kubernetes" / "base" / "deployment.yaml"
PINNED_BASE = re.compile(r"^(?:docker\.io/library/)?python:3\.11\.\d+-slim(?:-[a-z]+)?@sha256:[0-9a-f]{64}$")
# Files that must never be in the image: tests, docs, benchmarks, sample logs, developer tooling.
NEVER_COPIED = ("tests/", "docs/", "bench/", "deploy/", "conf/samples/", "requirements-dev.txt", ".git/", ".venv/")


@dataclass
class Stage:
    base: str
    name: str | None
    instructions: list[tuple[str, str]] = field(default_factory=list)

    def all(self, keyword: str) -> list[str]:
        return [args for word, args in self.instructions if word == keyword]


def _instructions(text: str) -> list[tuple[str, str]]:
    """(KEYWORD, arguments) of each instruction, continuation lines joined and comments dropped."""
    logical: list[str] = []
    pending = ""
    for line in text.splitlines():
        stripped = line.strip()
        if not pending and (not stripped or stripped.startswith("#")):
            continue
        if pending and stripped.startswith("#"):
            continue  # a comment inside a continued instruction
        if stripped.endswith("\\"):
            pending += stripped[:-1] + " "
            continue
        logical.append(pending + stripped)
        pending = ""
    assert not pending, "the Dockerfile ends inside a continued instruction"
    result = []
    for item in logical:
        keyword, _, args = item.partition(" ")
        result.append((keyword.upper(), args.strip()))
    return result


def _parse(text: str) -> tuple[dict[str, str], list[Stage]]:
    """Global ARG defaults, and the stages with each FROM's image resolved from them."""
    args: dict[str, str] = {}
    stages: list[Stage] = []
    for keyword, rest in _instructions(text):
        if keyword == "FROM":
            words = rest.split()
            image = re.sub(r"\$\{(\w+)\}|\$(\w+)", lambda m: args[m.group(1) or m.group(2)], words[0])
            name = words[2] if len(words) == 3 and words[1].upper() == "AS" else None
            stages.append(Stage(image, name))
        elif not stages:
            assert keyword == "ARG", f"{keyword} before the first FROM"
            name, _, default = rest.partition("=")
            args[name] = default
        else:
            stages[-1].instructions.append((keyword, rest))
    return args, stages


@pytest.fixture(scope="module")
def stages() -> list[Stage]:
    return _parse(DOCKERFILE.read_text(encoding="utf-8"))[1]


@pytest.fixture(scope="module")
def final(stages: list[Stage]) -> Stage:
    return stages[-1]


def _copy_sources(stages: list[Stage]) -> list[str]:
    """The build-context paths of every COPY without --from."""
    sources = []
    for stage in stages:
        for args in stage.all("COPY"):
            words = shlex.split(args)
            if any(w.startswith("--from") for w in words):
                continue
            flags = [w for w in words if w.startswith("--")]
            sources.extend(w for w in words[len(flags) : -1])
    return sources


# ---------------------------------------------------------------- .dockerignore, read as Docker reads it


def _ignore_rules() -> list[tuple[bool, str]]:
    """(is_exception, pattern) in file order; the last rule that matches a path decides."""
    rules = []
    for line in DOCKERIGNORE.read_text(encoding="utf-8").splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        exception = line.startswith("!")
        pattern = line[1:].strip() if exception else line
        rules.append((exception, pattern.strip("/")))
    return rules


def _pattern_regex(pattern: str) -> re.Pattern[str]:
    """Docker's matching: `*` and `?` stay inside one path element, `**` spans any number of them."""
    out = ""
    i = 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out += "(?:.*/)?"
            i += 3
        elif pattern.startswith("**", i):
            out += ".*"
            i += 2
        elif pattern[i] == "*":
            out += "[^/]*"
            i += 1
        elif pattern[i] == "?":
            out += "[^/]"
            i += 1
        else:
            out += re.escape(pattern[i])
            i += 1
    return re.compile(out + r"\Z")


def _excluded(path: str, rules: list[tuple[bool, str]]) -> bool:
    """Whether the context leaves `path` out: a pattern matches a path or any directory above it."""
    parts = path.split("/")
    prefixes = ["/".join(parts[: i + 1]) for i in range(len(parts))]
    excluded = False
    for exception, pattern in rules:
        regex = _pattern_regex(pattern)
        if any(regex.match(prefix) for prefix in prefixes):
            excluded = not exception
    return excluded


def _tracked_files() -> list[str]:
    listing = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True)
    return [p for p in listing.stdout.splitlines() if (ROOT / p).is_file()]


def test_the_ignore_reader_follows_dockers_rules():
    # Guards the checks below: the reader must exclude, re-include and re-exclude as Docker does.
    rules = [(False, "*"), (True, "app"), (False, "**/__pycache__"), (True, "conf/gunicorn.conf.py")]
    assert _excluded("tests/test_x.py", rules)
    assert not _excluded("app/service.py", rules)
    assert _excluded("app/__pycache__/service.cpython-311.pyc", rules)
    assert not _excluded("conf/gunicorn.conf.py", rules)
    assert _excluded("conf/samples/kernel-logs/kern.log", rules)


def test_every_copied_path_exists_and_is_sent_to_the_builder(stages: list[Stage]):
    rules = _ignore_rules()
    sources = _copy_sources(stages)
    assert sources, "the Dockerfile copies nothing from the context"
    tracked = _tracked_files()
    for source in sources:
        path = ROOT / source
        assert path.exists(), f"COPY {source}: no such file in the repository"
        files = [p for p in tracked if p == source.rstrip("/") or p.startswith(source.rstrip("/") + "/")]
        assert files, f"COPY {source}: nothing tracked there"
        for name in files:
            assert not _excluded(name, rules), f"COPY {source}: .dockerignore leaves out {name}"


def test_nothing_but_the_runtime_reaches_the_build_context():
    rules = _ignore_rules()
    sent = [p for p in _tracked_files() if not _excluded(p, rules)]
    for name in sent:
        assert not name.startswith(NEVER_COPIED) and name not in NEVER_COPIED, f"{name} would be sent to the builder"
    # What the service imports at run time is sent.
    for needed in ("wsgi.py", "app/__init__.py", "schemas/request.py", "providers/base.py", "conf/gunicorn.conf.py"):
        assert needed in sent, needed


def test_every_stage_builds_on_python_311_slim_pinned_by_tag_and_digest(stages: list[Stage]):
    assert len(stages) >= 2, "the image is built in stages: build, then a runtime without build leftovers"
    for stage in stages:
        assert PINNED_BASE.match(stage.base), f"FROM {stage.base} is not python:3.11.x-slim pinned by digest"
    assert len({stage.base for stage in stages}) == 1, "the virtual environment must run on the Python it was made on"


def test_only_requirements_txt_is_installed_where_the_runtime_runs(stages: list[Stage]):
    installs = [run for stage in stages for run in stage.all("RUN") if re.search(r"\bpip3? install\b", run)]
    assert installs, "the Dockerfile installs no requirements"
    into_runtime = 0
    for run in installs:
        for command in re.split(r"&&|;", run):
            words = shlex.split(command)
            if "install" not in words or not any(w.endswith(("pip", "pip3")) for w in words):
                continue
            arguments = words[words.index("install") + 1 :]
            assert "--no-deps" in arguments, command
            targets = [Path(w).name for w in arguments if not w.startswith("-")]
            if targets == ["requirements-build.txt"]:
                # the compiled parts' build tools go into a virtual environment of the build stage's own
                assert not words[0].startswith("/opt/venv/"), f"build tools in the runtime's environment: {command}"
                continue
            assert targets == ["requirements.txt"], f"installs more than that: {command}"
            assert words[0].startswith("/opt/venv/"), command
            into_runtime += 1
    assert into_runtime == 1
    copied = _copy_sources(stages)
    assert "requirements.txt" in copied and "requirements-dev.txt" not in copied
    # the runtime takes from the build stage only the service's environment and its code
    for args in stages[-1].all("COPY"):
        words = shlex.split(args)
        if any(w.startswith("--from") for w in words):
            assert words[-2:] in (["/opt/venv", "/opt/venv"], ["/app", "/app"]), args


def test_the_build_tools_are_pinned_as_the_packages_build_system_pins_them():
    pins = [
        line.strip()
        for line in (ROOT / "requirements-build.txt").read_text(encoding="utf-8").splitlines()
        if line.strip() and not line.startswith("#")
    ]
    assert pins and all(re.fullmatch(r"[A-Za-z0-9_.-]+==[0-9][0-9A-Za-z.]*", pin) for pin in pins), pins
    assert sorted(pins) == sorted(tomllib.loads((ROOT / "pyproject.toml").read_text())["build-system"]["requires"])


def test_requirements_txt_holds_no_test_tool():
    runtime = {
        line.split("==")[0].strip().lower()
        for line in (ROOT / "requirements.txt").read_text().splitlines()
        if "==" in line and not line.startswith("#")
    }
    for tool in ("pytest", "hypothesis", "schemathesis", "ruff", "responses", "kubernetes-validate"):
        assert tool not in runtime, tool


def _procfile_web() -> list[str]:
    for line in (ROOT / "Procfile").read_text(encoding="utf-8").splitlines():
        process, _, command = line.partition(":")
        if process.strip() == "web":
            return shlex.split(command)
    raise AssertionError("Procfile has no web process")


def test_the_image_starts_the_procfile_command_from_the_code_directory(final: Stage):
    (cmd,) = final.all("CMD")
    assert json.loads(cmd) == _procfile_web(), "CMD must be the Procfile's web command in exec form"
    assert not final.all("ENTRYPOINT")
    deployment = yaml.safe_load(DEPLOYMENT.read_text(encoding="utf-8"))
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    assert final.all("WORKDIR")[-1] == container["workingDir"]
    assert container["command"] == _procfile_web()


def test_the_final_stage_runs_as_a_fixed_numeric_non_root_user(final: Stage):
    user = final.all("USER")[-1]
    uid, _, gid = user.partition(":")
    assert uid.isdigit() and int(uid) != 0, f"USER {user} is not a numeric non-root user"
    assert gid.isdigit() and int(gid) != 0, f"USER {user} has no numeric non-root group"
    deployment = yaml.safe_load(DEPLOYMENT.read_text(encoding="utf-8"))
    security = deployment["spec"]["template"]["spec"]["securityContext"]
    assert (int(uid), int(gid)) == (security["runAsUser"], security["runAsGroup"])
    # Nothing after USER switches back to root.
    keywords = [word for word, _ in final.instructions]
    assert "RUN" not in keywords[keywords.index("USER") :]


def _env(stage: Stage) -> dict[str, str]:
    env: dict[str, str] = {}
    for args in stage.all("ENV"):
        for word in shlex.split(args):
            key, _, value = word.partition("=")
            env[key] = value
    return env


def test_writable_paths_are_those_the_deployment_mounts(final: Stage):
    env = _env(final)
    deployment = yaml.safe_load(DEPLOYMENT.read_text(encoding="utf-8"))
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    pod_env = {item["name"]: item["value"] for item in container["env"] if "value" in item}
    mounts = {m["mountPath"] for m in container["volumeMounts"] if not m.get("readOnly", False)}
    assert env["PROMETHEUS_MULTIPROC_DIR"] == pod_env["PROMETHEUS_MULTIPROC_DIR"]
    assert env["HOME"] == pod_env["HOME"]
    for path in (env["PROMETHEUS_MULTIPROC_DIR"], env["HOME"]):
        assert any(Path(path).is_relative_to(m) for m in mounts), f"{path} is not on a writable mount"
    assert env["PYTHONDONTWRITEBYTECODE"] == "1"
    # Bytecode is compiled at build time, since nothing can be written beside the code at run time.
    assert any("compileall" in run for stage in _parse(DOCKERFILE.read_text())[1] for run in stage.all("RUN"))


def test_the_container_listens_on_all_its_interfaces_on_the_deployments_ports(final: Stage):
    env = _env(final)
    assert env["ATTRIBUTION_BIND"] == "0.0.0.0:8000"
    assert env["ATTRIBUTION_METRICS_BIND"] == "0.0.0.0:9464"
    assert sorted(final.all("EXPOSE")[0].split()) == ["8000", "9464"]


def test_the_dockerfile_copies_no_sample_or_test_path(stages: list[Stage]):
    for source in _copy_sources(stages):
        assert not fnmatch.fnmatch(source, "conf/samples*") and not source.startswith(NEVER_COPIED), source
