"""Each gunicorn worker's kernel-log scan process (`ATTRIBUTION_KERNEL_LOG_SCAN_PROCESS`), on real gunicorn.

The servers serve the sample telemetry (kernel-log files and job-log files, as `make run` does); every answer is
compared with the answer the Flask test client gets from a provider built from the same settings in this process,
where no scan process exists.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import requests

from app import create_app
from app.cli import sample_settings
from app.settings import Settings
from providers.telemetry import TelemetryProvider
from tests.gunicorn_process import ROOT, children, running
from tests.process.test_operator import json_lines
from tests.process.test_renamed_provider import PER_REQUEST, URL, _readme_request
from tests.telemetry.conftest import DETECTED, at, fast_body, healthy_lines, rsyslog, write_lines, xid

STARTED = "kernel-log scan process {} started beside worker {}"


def _cpu_ns(pid: int) -> int:
    """The CPU time `pid` has used, in nanoseconds (the scheduler's own count)."""
    return int(Path(f"/proc/{pid}/schedstat").read_text().split()[0])


def _listening_inode(port: int) -> str:
    """The socket inode of the listener on 127.0.0.1:`port`, from /proc/net/tcp."""
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        if fields[1] == f"0100007F:{port:04X}" and fields[3] == "0A":
            return fields[9]
    raise AssertionError(f"nothing listens on 127.0.0.1:{port}")


def _socket_inodes(pid: int) -> set[str]:
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except FileNotFoundError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    return inodes


def _without_ids(answer: dict) -> dict:
    return {k: v for k, v in answer.items() if k not in PER_REQUEST}


def _post(server, body: dict) -> dict:  # noqa: ANN001 - tests.gunicorn_process.Gunicorn
    response = requests.post(f"{server.base_url}{URL}", json=body, timeout=15)
    assert response.status_code == 200, response.text
    return _without_ids(response.json())


def _expected(body: dict, **extra: str) -> dict:
    """The answer of a provider that scans in this process (the Flask test client, no scan process)."""
    options = {k: v for k, v in {**sample_settings(), **extra}.items() if k != "ATTRIBUTION_PROVIDER" and v}
    client = create_app(Settings(provider="telemetry"), TelemetryProvider.from_options(options)).test_client()
    response = client.post(URL, json=body)
    assert response.status_code == 200
    return _without_ids(response.get_json())


#: how long a worker may take to fork its scan process after the server answers (`post_fork` runs in each worker
#: after its fork; /healthz may answer from another worker before)
FORK_WAIT_S = 10.0


def _scan_processes(server) -> dict[int, int]:  # noqa: ANN001
    """Each worker's one child, the scan process, once every worker has forked it (the test fails when a worker has
    another number of children within FORK_WAIT_S)."""
    deadline = time.monotonic() + FORK_WAIT_S
    kids = {worker: children(worker) for worker in server.worker_pids()}
    while any(len(k) != 1 for k in kids.values()) and time.monotonic() < deadline:
        time.sleep(0.05)
        kids = {worker: children(worker) for worker in server.worker_pids()}
    for worker, k in kids.items():
        assert len(k) == 1, (worker, k)
    return {worker: k[0] for worker, k in kids.items()}


def test_each_worker_forks_one_scan_process_that_scans_for_it_and_the_answer_is_the_test_clients(gunicorn):
    server = gunicorn({**sample_settings(), "ATTRIBUTION_WORKERS": "2"})
    body = _readme_request()
    expected = _expected(body)
    assert expected["attributions"], "the README's request has a finding on the samples"
    helpers = _scan_processes(server)
    assert len(helpers) == 2
    listener = _listening_inode(server.port)
    for worker, helper in helpers.items():
        assert Path(f"/proc/{helper}/cmdline").read_bytes() == Path(f"/proc/{worker}/cmdline").read_bytes()
        assert listener in _socket_inodes(worker)
        assert listener not in _socket_inodes(helper), "the scan process must not keep the server's port bound"
    messages = [entry["message"] for entry in json_lines(server.output())]
    for worker, helper in helpers.items():
        assert messages.count(STARTED.format(helper, worker)) == 1

    before = {helper: _cpu_ns(helper) for helper in helpers.values()}
    for _ in range(6):  # the workers take turns: each scan process scans for some of them
        assert _post(server, body) == expected
    assert any(_cpu_ns(helper) > used for helper, used in before.items()), "no scan process scanned"
    assert _scan_processes(server) == helpers, "the scan processes serve request after request"


def test_the_journal_source_is_scanned_in_the_scan_process_too(gunicorn, tmp_path):
    journals = tmp_path / "journals"
    subprocess.run(["sh", str(ROOT / "conf/samples/journal/make-journals.sh"), str(journals)], check=True,
                   capture_output=True, timeout=60)  # fmt: skip
    journal = {"ATTRIBUTION_KERNEL_LOG_SOURCE": "journal", "ATTRIBUTION_JOURNAL_DIR": str(journals)}
    settings = {k: v for k, v in sample_settings().items() if k != "ATTRIBUTION_KERNEL_LOG_DIR"}
    server = gunicorn({**settings, **journal, "ATTRIBUTION_WORKERS": "1"})
    body = _readme_request()
    expected = _expected(body, ATTRIBUTION_KERNEL_LOG_DIR="", **journal)
    assert expected["attributions"], "the README's request has a finding on the journal samples"
    ((_, helper),) = _scan_processes(server).items()
    before = _cpu_ns(helper)
    assert _post(server, body) == expected
    assert _cpu_ns(helper) > before


def test_what_the_scan_process_logs_is_written_by_the_worker_with_the_request_s_id(gunicorn, tmp_path):
    # A host folder whose only file is in no known format: the scan warns, naming the file, in the scan process.
    (tmp_path / "kernel" / "worker-01").mkdir(parents=True)
    (tmp_path / "kernel" / "worker-01" / "kern.log").write_text("hello there\nnot a kernel log line\n")
    (tmp_path / "jobs").mkdir()
    server = gunicorn({
        "ATTRIBUTION_PROVIDER": "telemetry", "ATTRIBUTION_KERNEL_LOG_SOURCE": "files",
        "ATTRIBUTION_KERNEL_LOG_DIR": str(tmp_path / "kernel"), "ATTRIBUTION_JOB_LOG_DIR": str(tmp_path / "jobs"),
        "ATTRIBUTION_WORKERS": "1",
    })  # fmt: skip
    ((worker, helper),) = _scan_processes(server).items()
    body = {**_readme_request(), "scope": {"nodes": ["worker-01"], "ranks": []}}
    ids = []
    for _ in range(2):
        before = _cpu_ns(helper)
        answer = requests.post(f"{server.base_url}{URL}", json=body, timeout=15)
        assert answer.status_code == 200 and answer.json()["error"]["type"] == "insufficient_telemetry"
        assert _cpu_ns(helper) > before, "the scan process scanned"
        ids.append(answer.headers["X-Request-ID"])
    server.stop()
    warnings = [entry for entry in json_lines(server.output()) if "kern.log" in entry["message"]]
    assert [entry["request_id"] for entry in warnings] == ids
    assert all(entry["level"] == "warning" and "worker-01/kern.log" in entry["message"] for entry in warnings)
    assert all(entry["logger"] == "attribution_adapter.telemetry" for entry in warnings)


def test_with_the_setting_0_the_worker_scans_itself_and_answers_the_same(gunicorn):
    server = gunicorn({**sample_settings(), "ATTRIBUTION_WORKERS": "1", "ATTRIBUTION_KERNEL_LOG_SCAN_PROCESS": "0"})
    body = _readme_request()
    assert _post(server, body) == _expected(body)
    (worker,) = server.worker_pids()
    assert children(worker) == []
    assert not [e for e in json_lines(server.output()) if "scan process" in e["message"]]


def test_a_worker_whose_scan_process_was_killed_says_so_once_and_scans_itself(gunicorn):
    server = gunicorn({**sample_settings(), "ATTRIBUTION_WORKERS": "1"})
    body = _readme_request()
    expected = _expected(body)
    ((worker, helper),) = _scan_processes(server).items()
    os.kill(helper, signal.SIGKILL)
    for _ in range(3):
        assert _post(server, body) == expected
    assert children(worker) == [], "the killed process is reaped, and no other is forked from a threaded worker"
    stopped = [
        (e["level"], e["message"]) for e in json_lines(server.output()) if "scan process" in e["message"]
        and "stopped" in e["message"]
    ]  # fmt: skip
    assert len(stopped) == 1, stopped
    assert stopped[0][0] == "warning"
    assert stopped[0][1].startswith(f"the kernel-log scan process {helper} is stopped (")
    assert stopped[0][1].endswith("): this worker scans the kernel logs")


def test_requests_side_by_side_in_one_worker_share_its_scan_process_or_scan_themselves(gunicorn):
    server = gunicorn({**sample_settings(), "ATTRIBUTION_WORKERS": "1", "ATTRIBUTION_THREADS": "4"})
    body = _readme_request()
    expected = _expected(body)
    ((_, helper),) = _scan_processes(server).items()
    with ThreadPoolExecutor(4) as pool:
        answers = list(pool.map(lambda _: _post(server, body), range(12)))
    assert answers == [expected] * 12
    assert running(helper)


def test_the_scan_process_ends_with_its_worker(gunicorn):
    server = gunicorn({**sample_settings(), "ATTRIBUTION_WORKERS": "1"})
    ((worker, helper),) = _scan_processes(server).items()
    os.kill(worker, signal.SIGTERM)  # the master forks a new worker, with a scan process of its own
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and (running(worker) or running(helper)):
        time.sleep(0.05)
    assert not running(helper) and not running(worker)
    server.wait_ready()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and not all(children(w) for w in server.worker_pids()):
        time.sleep(0.05)
    ((new_worker, new_helper),) = _scan_processes(server).items()
    assert new_worker != worker and new_helper != helper
    assert _post(server, _readme_request()) == _expected(_readme_request())

    server.stop()
    assert server.process.returncode == 0
    assert not running(new_helper) and not running(new_worker)


def test_a_scan_process_whose_worker_was_killed_ends_too(gunicorn):
    server = gunicorn({**sample_settings(), "ATTRIBUTION_WORKERS": "1"})
    ((worker, helper),) = _scan_processes(server).items()
    os.kill(worker, signal.SIGKILL)  # no exit hook runs: the pipe's end closes with the worker
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and running(helper):
        time.sleep(0.05)
    assert not running(helper)


def _kernel_tree(root: Path, hosts: int) -> list[str]:
    """A per-host file for each of `hosts` hosts around the failure, an Xid 79 on one (at 3/4 of the scope)."""
    names = [f"gpu-{n:03d}" for n in range(hosts)]
    for n, name in enumerate(names):
        lines = healthy_lines(name, at(-30), at(5))
        if n == hosts * 3 // 4:
            lines = sorted([*lines, rsyslog(at(-1), name, xid(79, "GPU has fallen off the bus."))])
        write_lines(root / f"{name}.log", lines)
    return names


def test_kernel_logs_alone_a_large_scope_is_split_with_the_scan_process_and_its_answer_kept(gunicorn, tmp_path):
    names = _kernel_tree(tmp_path, 40)
    settings = {"ATTRIBUTION_KERNEL_LOG_SOURCE": "files", "ATTRIBUTION_KERNEL_LOG_DIR": str(tmp_path)}
    server = gunicorn({"ATTRIBUTION_PROVIDER": "telemetry", **settings, "ATTRIBUTION_WORKERS": "1"})
    ((_, helper),) = _scan_processes(server).items()
    time.sleep(2.1)  # the files settle: an answer over them can be kept (kernel/sources/facts.py, CACHE_SETTLE_NS)
    body = fast_body(names, DETECTED.strftime("%Y-%m-%dT%H:%M:%SZ"))
    options = {**settings, "ATTRIBUTION_KERNEL_LOG_DIR": str(tmp_path), "ATTRIBUTION_JOB_LOG_DIR": "",
               "ATTRIBUTION_EPILOG_DIR": ""}  # fmt: skip
    expected = _expected(body, **options)
    findings = [(f["target"]["name"], f["error_category"]) for f in expected["attributions"]]
    assert findings == [("gpu-030", "gpu_off_bus")]

    before = _cpu_ns(helper)
    assert _post(server, body) == expected
    scanned = _cpu_ns(helper)
    assert scanned > before, "half of the scope was scanned by the scan process"
    # The same request again: answered from the kept answer, its proof holding what both halves read.
    assert _post(server, body) == expected
    assert _cpu_ns(helper) == scanned
    # A file the scan process read changes: the kept answer no longer holds, and the request is scanned again.
    with (tmp_path / f"{names[-1]}.log").open("a") as log:
        log.write(rsyslog(at(1), names[-1], "IPv6: ADDRCONF(NETDEV_CHANGE): ib0: link becomes ready") + "\n")
    assert _post(server, body) == expected
    assert _cpu_ns(helper) > scanned


def test_kernel_logs_alone_a_small_scope_is_scanned_by_the_worker(gunicorn, tmp_path):
    names = _kernel_tree(tmp_path, 8)
    settings = {"ATTRIBUTION_KERNEL_LOG_SOURCE": "files", "ATTRIBUTION_KERNEL_LOG_DIR": str(tmp_path)}
    server = gunicorn({"ATTRIBUTION_PROVIDER": "telemetry", **settings, "ATTRIBUTION_WORKERS": "1"})
    ((_, helper),) = _scan_processes(server).items()
    before = _cpu_ns(helper)
    body = fast_body(names, DETECTED.strftime("%Y-%m-%dT%H:%M:%SZ"))
    assert _post(server, body) == _expected(body, **settings, ATTRIBUTION_JOB_LOG_DIR="", ATTRIBUTION_EPILOG_DIR="")
    assert _cpu_ns(helper) == before


def test_job_logs_read_by_the_worker_and_its_scan_process_together_are_answered_as_by_one_reader(gunicorn, tmp_path):
    """Kernel logs and job logs of 96 nodes: the scan process scans the kernel logs, then reads job logs from the
    scope's end while the worker reads from its start; the answer is the test client's (one reader), and what the
    reading logs (a corrupt rotated file near the scope's end) is written by the worker with each request's id."""
    from bench.joblog_scan import _failure, _training_block
    from tests.joblog.support import write_tree

    names = _kernel_tree(tmp_path / "kernel", 96)
    logs: dict[str, str | bytes] = {}
    for n, name in enumerate(names):
        logs[f"{name}.log"] = "".join(_training_block(n, step) for step in range(40)) + _failure(n)
    folder = write_tree(tmp_path / "jobs", logs, "12345", 0)
    (folder / f"{names[-2]}.log.1.gz").write_bytes(b"not gzip")
    settings = {
        "ATTRIBUTION_PROVIDER": "telemetry", "ATTRIBUTION_KERNEL_LOG_SOURCE": "files",
        "ATTRIBUTION_KERNEL_LOG_DIR": str(tmp_path / "kernel"), "ATTRIBUTION_JOB_LOG_DIR": str(tmp_path / "jobs"),
    }  # fmt: skip
    server = gunicorn({**settings, "ATTRIBUTION_WORKERS": "1"})
    ((_, helper),) = _scan_processes(server).items()
    body = fast_body(names, DETECTED.strftime("%Y-%m-%dT%H:%M:%SZ"), range(96 * 8))
    expected = _expected(body, **settings, ATTRIBUTION_EPILOG_DIR="")
    assert [(f["target"]["name"], f["error_category"]) for f in expected["attributions"]][:1] == [
        ("gpu-072", "gpu_off_bus")
    ]
    ids = []
    for _ in range(2):
        response = requests.post(f"{server.base_url}{URL}", json=body, timeout=15)
        assert response.status_code == 200
        assert _without_ids(response.json()) == expected
        ids.append(response.headers["X-Request-ID"])
    assert running(helper)
    server.stop()
    skipped = [e for e in json_lines(server.output()) if e["message"].startswith("skipped job-log file")]
    assert [e["request_id"] for e in skipped] == ids
    assert all(e["message"] == f"skipped job-log file 12345/0/{names[-2]}.log.1.gz: BadGzipFile" for e in skipped)
