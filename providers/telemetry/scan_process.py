"""The kernel-log scan in a process of its own beside each worker, made while the worker reads the job logs.

A `fast` request over local files reads two things that do not depend on each other: the scope's kernel logs (a
Collector) and the job's own logs. Both are Python work, and a worker's threads share one interpreter lock, so in one
process they are read one after the other. Each server worker forks one scan process right after it was forked
itself, while it has one thread (gunicorn's `post_fork`, conf/gunicorn.conf.py, calls Provider.after_fork); a
request hands it the scope, the window and the deadline, reads the job logs meanwhile, and then takes the collector.
The scan process keeps the source's caches (block summaries, file facts) between requests, as the worker would.
With kernel-log files alone, a large scope is split instead: the process scans one half while the worker scans the
other (TelemetryProvider._kernel_only), and what the process listed and read (a Proof) comes back beside its
collector, so that the answer can be kept over both halves' files.

- What crosses the pipe is JSON (Collector.to_wire): nothing is unpickled.
- What the scan logs (a file that cannot be read, say) is kept by the process and written by the worker in the
  request's own thread when the answer comes, so that each line carries the request's id as it would without the
  process (the original time kept; at most MAX_LOG_RECORDS lines a scan, then one saying how many more there were).
- A scan process serves one request at a time. A second request of the same worker meanwhile, and every request
  once the process is gone, scans the kernel logs in the worker, as without it.
- A scan that fails otherwise than by the deadline is made again in the worker, so that the request meets the same
  failure the same way as without a scan process.
- With job-log files beside the kernel logs, the process then reads a share of the job logs too: the worker hands
  it the read's plan, and each claims nodes from one end of it (job_log_share.py). Its answer comes after that.
- The process ends when its worker closes its end of the pipe (the provider's close, at the worker's exit) or dies;
  one that has not answered by the deadline and ANSWER_GRACE_S more is killed, and the worker scans with what is
  left of the deadline (nothing: its answer names the nodes unread or is the kernel logs' timeout).
"""

from __future__ import annotations

import gc
import json
import logging
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime
from multiprocessing.connection import Connection, Pipe
from typing import Any

from providers.base import Deadline, ProviderTimeoutError
from providers.telemetry.collection import collector_paused
from providers.telemetry.identity import NodeNames
from providers.telemetry.job_log_share import SharedState, WorkerShare, job_pipe, plan_message
from providers.telemetry.joblog.files import JobLogPlan
from providers.telemetry.kernel.collect import Collector
from providers.telemetry.kernel.sources.facts import Proof
from providers.telemetry.window import Window

log = logging.getLogger("attribution_adapter.telemetry")

#: seconds past a request's deadline the worker waits for the scan process's answer before it kills the process (the
#: scan keeps the deadline itself: it answers with what it read by then)
ANSWER_GRACE_S = 2.0
#: lines a scan's logging sends to the worker at most (a bounded read logs far fewer)
MAX_LOG_RECORDS = 256
#: seconds a closing worker waits for its idle scan process to end before it kills it
CLOSE_WAIT_S = 1.0
#: the signals a server's master and workers handle: the scan process takes their default actions (it is stopped by
#: its worker, or with it), and ignores SIGINT (a terminal's Ctrl-C reaches the worker, which closes the pipe)
_DEFAULT_SIGNALS = tuple(
    getattr(signal, name) for name in ("SIGTERM", "SIGHUP", "SIGQUIT", "SIGUSR1", "SIGUSR2", "SIGWINCH", "SIGTTIN",
                                       "SIGTTOU", "SIGCHLD", "SIGABRT")
)  # fmt: skip

#: the scan a process makes: the collector of the nodes in the window by the deadline (ProviderTimeoutError when
#: nothing was read in time); with a Proof, what it listed and read is recorded in it (kernel/sources/facts.py)
Scan = Callable[[NodeNames, Window, Deadline, Proof | None], Collector]
#: the process's share of a request's job logs: (the scope's nodes, the plan message, the shared state, the deadline,
#: where each part is sent): job_log_share.serve_share with the provider's job-log source
ShareJobLogs = Callable[[Sequence[str], Any, SharedState, Deadline, Callable[[bytes], None]], None]


class ScanProcess:
    """A worker's kernel-log scan process: started once in the worker (`start`), asked by one request at a time."""

    def __init__(self) -> None:
        self._pid = 0
        self._owner = 0  # the worker that started it: a process forked later holds a copy of this object, not it
        self._conn: Connection | None = None
        self._busy = threading.Lock()
        self._asked = 0
        self._state: SharedState | None = None  # the job-log share's claims and bounds, when the process reads some
        self._jobs: Connection | None = None  # where the process's job-log parts come from

    @property
    def pid(self) -> int:
        """The scan process's pid while it serves this process, else 0."""
        return self._pid if self._conn is not None and self._owner == os.getpid() else 0

    def start(self, scan: Scan, descriptors: Sequence[int] = (), share: ShareJobLogs | None = None) -> None:
        """Fork the scan process. Call it where this process has one thread (a forked child holds only the thread
        that forked it); `descriptors` are closed in the child; with `share`, the process reads a share of the job
        logs of requests asked with `job_logs`. A failed fork is logged: requests scan here."""
        state, jobs, jobs_out = None, None, None
        if share is not None:
            try:
                state = SharedState()
                jobs, jobs_out = job_pipe()
            except OSError as exc:  # no shared memory or semaphore here (a full or missing /dev/shm, say)
                log.warning("the kernel-log scan process reads no job logs (%s): the worker reads them all", exc)
                share, state = None, None
        ours, theirs = Pipe()
        try:
            pid = os.fork()
        except OSError as exc:
            for conn in (ours, theirs, jobs, jobs_out):
                if conn is not None:
                    conn.close()
            log.warning("no kernel-log scan process (fork failed: %s): the worker scans the kernel logs", exc)
            return
        if pid == 0:  # the scan process: it never returns from here
            code = 1
            try:
                ours.close()
                if jobs is not None:
                    jobs.close()
                sharing = None if share is None else (share, state, jobs_out)
                _serve(theirs, scan, descriptors, sharing)  # type: ignore[arg-type]
                code = 0
            except BaseException:  # noqa: BLE001 - said, then the process ends; the worker scans from now on
                log.exception("the kernel-log scan process stopped")
            finally:
                os._exit(code)
        theirs.close()
        if jobs_out is not None:
            jobs_out.close()
        self._pid, self._owner, self._conn = pid, os.getpid(), ours
        self._state, self._jobs = state, jobs
        log.info("kernel-log scan process %d started beside worker %d", pid, self._owner)

    @contextmanager
    def asked(
        self, nodes: NodeNames, window: Window, deadline: Deadline, proof: bool = False, job_logs: bool = False
    ) -> Iterator[Pending | None]:
        """Hand the scan of `nodes` to the process (`proof`: it records what it listed and read, for a kept answer;
        `job_logs`: it then reads a share of the request's job logs, `Pending.partner`); yields what its answer is
        taken from, or None when there is no process or it serves another request (the caller then scans itself)."""
        if not self.pid or not self._busy.acquire(blocking=False):
            yield None
            return
        pending = None
        try:
            pending = self._send(nodes, window, deadline, proof, job_logs and self._state is not None)
            yield pending
        finally:
            if pending is not None:
                pending.no_plan()  # the process waits for a plan: it hears there is none, if none was sent
                pending.settle()
            self._busy.release()

    def _send(
        self, nodes: NodeNames, window: Window, deadline: Deadline, proof: bool, job_logs: bool
    ) -> Pending | None:
        if self._conn is None:  # lost since `asked` looked
            return None
        self._asked += 1
        ask = {
            "id": self._asked, "nodes": list(nodes.nodes), "start": window.start.isoformat(),
            "end": window.end.isoformat(), "expires_at": deadline.expires_at, "proof": proof, "job_logs": job_logs,
        }  # fmt: skip
        if not self._tell(ask):
            return None
        return Pending(self, self._asked, nodes, window, deadline, job_logs)

    def _tell(self, message: dict[str, Any]) -> bool:
        """Send the process a message (an ask, or word on a request it serves); False when it is lost."""
        conn = self._conn
        if conn is None:
            return False
        try:
            conn.send_bytes(json.dumps(message).encode())
            return True
        except OSError as exc:
            self._lost(f"the pipe cannot be written: {exc}")
            return False

    def _answer(self, pending: Pending) -> dict[str, Any] | None:
        """The process's answer to `pending` (answers to asks given up earlier are skipped), or None when it is lost
        or did not answer in time."""
        conn = self._conn
        if conn is None:
            return None
        try:
            while True:
                if not conn.poll(pending.deadline.remaining() + ANSWER_GRACE_S):
                    self._lost("it did not answer by the deadline")
                    return None
                answer = json.loads(conn.recv_bytes())
                if answer.get("id") == pending.id:
                    return answer
        except (EOFError, OSError, ValueError) as exc:
            self._lost(f"its answer could not be read: {exc!r}")
            return None

    def _lost(self, why: str) -> None:
        """The process serves no more: closed, killed if still running, and reaped; requests scan in the worker."""
        log.warning("the kernel-log scan process %d is stopped (%s): this worker scans the kernel logs", self._pid, why)
        self._stop(wait_s=0.0)

    def close(self) -> None:
        """Close the pipe: an idle process ends at once (it is killed after CLOSE_WAIT_S); reaped here."""
        if self.pid:
            self._stop(wait_s=CLOSE_WAIT_S)

    def _stop(self, wait_s: float) -> None:
        conn, pid, jobs = self._conn, self._pid, self._jobs
        self._conn = self._jobs = None
        if conn is not None:
            conn.close()
        if jobs is not None:
            jobs.close()
        if not pid or self._owner != os.getpid():
            return
        until = time.monotonic() + wait_s
        while True:
            try:
                done, _ = os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                return  # reaped already
            if done:
                return
            if time.monotonic() >= until:
                break
            time.sleep(0.01)
        try:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        except (ProcessLookupError, ChildProcessError):
            pass


class Pending:
    """A scan handed to the process: `collector` waits for it; with job logs, `partner` shares their read."""

    def __init__(
        self, process: ScanProcess, ask: int, nodes: NodeNames, window: Window, deadline: Deadline,
        job_logs: bool = False,
    ) -> None:
        self.process, self.id, self.nodes, self.window, self.deadline = process, ask, nodes, window, deadline
        self._planned = not job_logs  # the process waits for one plan (or word that there is none) after the scan
        self._sending: threading.Thread | None = None
        self._share: WorkerShare | None = None

    def partner(self) -> Pending | None:
        """What shares the request's job-log read with the process (`joblog.scan.Partner`), when it was asked to."""
        return None if self._planned else self

    def begin(self, plan: JobLogPlan) -> WorkerShare | None:
        """Hand `plan` to the process: its byte bounds become shared, and both claim its nodes from then on; None
        when the process is lost (the plan is then read here alone)."""
        process, state = self.process, self.process._state
        if self._planned or state is None or process._jobs is None:
            return None
        conn = process._conn
        if conn is None:
            return None
        self._planned = True
        gen = state.begin(plan)
        plan.budget, plan.reserve = state.bytes()
        message = json.dumps({"id": self.id, **plan_message(gen, plan)}).encode()
        # The process takes the plan up once its scan is done: a plan larger than the pipe's buffer would keep this
        # thread waiting until then, so a thread of its own sends it. A process that is gone fails the send, and the
        # worker then reads every part (its parts never come: WorkerShare.finish).
        self._sending = threading.Thread(target=_send_quietly, args=(conn, message), name="job-log-plan", daemon=True)
        self._sending.start()
        self._share = WorkerShare(state, gen, plan, process._jobs, process._lost, ANSWER_GRACE_S)
        return self._share

    def settle(self) -> None:
        """Before the pipes take another request: a share given up before its end is ended (`WorkerShare.abandon`:
        the process, once it has the plan, claims nothing and says it is done), and the plan is sent whole (the
        process reads it once its scan is done, by the deadline; one that has not by then and ANSWER_GRACE_S more
        is stopped)."""
        share, sending = self._share, self._sending
        if share is not None and self.process.pid:
            share.abandon(self.deadline)
        if sending is not None:
            sending.join(max(self.deadline.remaining(), 0.0) + ANSWER_GRACE_S)
            if sending.is_alive():
                self.process._lost("it did not take the job-log plan by the deadline")

    def no_plan(self) -> None:
        """Tell the process this request shares no job-log read with it (once; nothing when a plan was sent)."""
        if not self._planned:
            self._planned = True
            self.process._tell({"id": self.id, "plan": None})

    def collector(self, zone: object, proof: Proof | None = None) -> Collector | None:
        """The scan's collector; None when the process failed, is lost or did not answer in time (the caller then
        scans itself); ProviderTimeoutError when the scan read nothing by the deadline, as a scan here would. With
        `proof` (asked with `proof=True`), what the process listed and read is added to it."""
        self.no_plan()  # the process answers once it has the plan, or word that there is none
        answer = self.process._answer(self)
        if answer is None:
            return None
        if "collector" not in answer and "timeout" not in answer:
            return None  # it failed: the caller's own scan meets the failure (and logs it) as without the process
        _replay(answer.get("logs") or [])
        if "timeout" in answer:
            raise ProviderTimeoutError(str(answer["timeout"]))
        try:
            collector = Collector.from_wire(self.nodes, self.window, zone, answer["collector"])
            if proof is not None:
                seen = answer.get("proof")
                if seen is None:
                    proof.sound = False  # nothing vouches for what the process read
                else:
                    proof.items.extend((str(path), tuple(map(int, identity))) for path, identity in seen["items"])
                    proof.sound = proof.sound and seen["sound"] is True
            return collector
        except (KeyError, TypeError, ValueError) as exc:
            self.process._lost(f"its collector could not be read: {exc!r}")
            return None


class _Kept(logging.Handler):
    """What a scan logs, as `[time, level, logger, message]`, MAX_LOG_RECORDS at most, then a count of the rest."""

    def __init__(self) -> None:
        super().__init__()
        self.records: list[list[Any]] = []
        self.more = 0

    def emit(self, record: logging.LogRecord) -> None:
        if len(self.records) >= MAX_LOG_RECORDS:
            self.more += 1
            return
        message = record.getMessage()
        if record.exc_info:
            message += "\n" + logging.Formatter().formatException(record.exc_info)
        self.records.append([record.created, record.levelno, record.name, message])

    def sent(self) -> list[list[Any]]:
        if self.more:
            more = f"{self.more} more log line(s) of the kernel-log scan process were left out"
            return [*self.records, [time.time(), logging.WARNING, log.name, more]]
        return self.records


@contextmanager
def _logs_kept() -> Iterator[_Kept]:
    """Every logger's lines go to one _Kept for the block (the scan process has one thread), then as before."""
    kept = _Kept()
    loggers = [logging.root, *(x for x in logging.root.manager.loggerDict.values() if isinstance(x, logging.Logger))]
    saved = [(logger, logger.handlers) for logger in loggers]
    for logger in loggers:
        logger.handlers = [kept] if logger is logging.root or not logger.propagate else []
    try:
        yield kept
    finally:
        for logger, handlers in saved:
            logger.handlers = handlers


def _replay(records: list[list[Any]]) -> None:
    """Write the scan process's log lines in this thread (its request's id on them), at their own time."""
    for created, level, name, message in records:
        logger = logging.getLogger(str(name))
        if logger.isEnabledFor(int(level)):
            record = logger.makeRecord(logger.name, int(level), "(scan process)", 0, str(message), (), None)
            record.created, record.msecs = float(created), (float(created) % 1) * 1000
            logger.handle(record)


def _send_quietly(conn: Connection, message: bytes) -> None:
    """Send `message`; a pipe closed meanwhile (the process lost, and stopped by the worker) ends it silently."""
    try:
        conn.send_bytes(message)
    except (OSError, ValueError):
        pass


def _serve(
    conn: Connection, scan: Scan, descriptors: Sequence[int],
    sharing: tuple[ShareJobLogs, SharedState, Connection] | None = None,
) -> None:
    """The scan process's loop: an ask, the scan (and its share of the job logs), the answer, until the worker's end
    of the pipe closes."""
    for number in _DEFAULT_SIGNALS:
        signal.signal(number, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.set_wakeup_fd(-1)
    for fd in descriptors:
        try:
            os.close(fd)
        except OSError:
            pass
    gc.freeze()  # what the worker held stays out of this process's collections (and its pages shared)
    while True:
        try:
            ask = json.loads(conn.recv_bytes())
        except (EOFError, OSError):
            return  # the worker closed the pipe or is gone
        if "plan" in ask:
            continue  # a plan that came after this process stopped waiting for it
        answer: dict[str, Any] = {"id": ask["id"]}
        window = Window(datetime.fromisoformat(ask["start"]), datetime.fromisoformat(ask["end"]))
        proof = Proof() if ask.get("proof") else None
        with _logs_kept() as kept:
            try:
                with collector_paused():
                    collector = scan(NodeNames(ask["nodes"]), window, Deadline(ask["expires_at"]), proof)
                answer["collector"] = collector.to_wire()
                if proof is not None:
                    answer["proof"] = {"items": proof.items, "sound": proof.sound}
            except ProviderTimeoutError as exc:
                answer["timeout"] = str(exc)
            except Exception as exc:  # noqa: BLE001 - the worker scans again and meets it itself
                answer["failed"] = f"{type(exc).__name__}: {exc}"
            if sharing is not None and ask.get("job_logs"):
                if not _share(conn, ask, *sharing):
                    return
        answer["logs"] = kept.sent()
        try:
            conn.send_bytes(json.dumps(answer).encode())
        except OSError:
            return


def _share(
    conn: Connection, ask: dict[str, Any], share: ShareJobLogs, state: SharedState, out: Connection
) -> bool:
    """The process's share of the ask's job logs: wait for the worker's plan (or word that there is none), then read
    parts of it (`share`). False when the worker is gone."""
    deadline = Deadline(ask["expires_at"])
    try:
        while True:
            if not conn.poll(max(deadline.remaining(), 0.0) + ANSWER_GRACE_S):
                return True  # no plan came: the worker read the job logs alone
            message = json.loads(conn.recv_bytes())
            if "plan" in message and message.get("id") == ask["id"]:
                break
        if message["plan"] is None:
            return True
        with collector_paused():
            share(ask["nodes"], message, state, deadline, out.send_bytes)
    except (EOFError, OSError):
        return False
    except Exception:  # noqa: BLE001 - said; the worker reads every part the process did not hand over
        log.exception("the scan process could not take its share of the job logs")
    return True


__all__ = ["ANSWER_GRACE_S", "Pending", "ScanProcess"]
