"""The grader's handle on a worker process running student code.

A request that times out, or a worker that dies (``os._exit``, a segfault, a
memory limit), raises :class:`WorkerFailure` with a sentence a student can
act on; the next request starts a fresh worker and reloads the student file.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, ContextManager

from validator.worker.main import PROFILER_NOISE  # torch profiler lines in a worker's log: nobody's output
from validator.worker.protocol import (HEADER_CAP_BYTES, MAX_HEADER_DEPTH, REPLY_CAP_BYTES, ChannelClosed,
                                       ChannelTimeout, ForgedReply, ProtocolError, Reader, channel, request_pipe,
                                       watch_process, write_message)

if TYPE_CHECKING:
    from validator.sandbox import Sandbox

PROJECT_ROOT = Path(__file__).resolve().parents[2]
OUTPUT_TAIL_BYTES = 1500


def reply_reader(fd: int, pid: int | None = None) -> Reader:
    """A reader for replies from student code: at most REPLY_CAP_BYTES, a small, shallow JSON header.

    With ``pid`` (the worker's), only bytes that process wrote are accepted (``fd`` is the grader's
    end of a :func:`~validator.worker.protocol.channel`), and its exit ends the channel.
    """
    sender = pid if pid is not None and _is_socket(fd) else None
    return Reader(fd, max_bytes=REPLY_CAP_BYTES, max_header=HEADER_CAP_BYTES, max_depth=MAX_HEADER_DEPTH,
                  sender=sender, exited=watch_process(pid) if sender is not None else None)


def _is_socket(fd: int) -> bool:
    import stat

    return stat.S_ISSOCK(os.fstat(fd).st_mode)


class WorkerFailure(Exception):
    """The worker could not answer: it hung, died, or sent garbage."""

    def __init__(self, reason: str, message: str):
        super().__init__(message)
        self.reason = reason  # "timeout" | "crash" | "protocol" | "device" | "forged"


# After an entry's first time-out, later calls to it get this long (then none, after a second one).
REPROBE_S = 3.0


class Worker:
    """One student-code process, restarted on demand after a failure."""

    def __init__(self, student_file: str | os.PathLike, *, startup_timeout: float = 60.0,
                 preexec: Callable[[], None] | None = None, env: dict[str, str] | None = None,
                 cwd: str | None = None, command: list[str] | None = None, package: dict | None = None):
        self.student_file = str(Path(student_file).resolve())
        # A student's package: {"root": staged copy, "targets": {"challenge.Entry": [module, attr]}} (see
        # validator.package); the load request imports those instead of layers.py.
        self.package = package
        self.startup_timeout = startup_timeout
        self.preexec = preexec
        self.extra_env = env or {}
        self.cwd = cwd
        self.command = command
        self.proc: subprocess.Popen | None = None
        self.reader: Reader | None = None
        self.req_fd: int | None = None
        self.load_reply: dict | None = None
        self.log = tempfile.TemporaryFile()
        self.restarts = 0
        self.seq = 0  # numbers each request; the worker echoes it, so a forged or extra reply is caught
        # Entries whose calls timed out (see request): after two time-outs they are not called again.
        self.timed_out: dict[str, tuple[str, int]] = {}  # entry -> (where it first timed out, time-outs)
        self.current_check: str | None = None  # set by the grading loop, named in those failures
        # Set once a reply came from another process than the worker: nothing more is asked of this
        # submission, and the batch grader voids its report for review (see validator.batch.slot).
        self.forged: str | None = None
        # Set once a batch of rehearsed calls failed (validator.rehearsal): every later call goes on its own.
        self.no_rehearsals = False
        self.fresh_interpreter = False  # set by use_device: never forked from this process

    def sibling(self) -> "Worker":
        """A new, unstarted worker for the same student file, with the same options."""
        twin = Worker(self.student_file, startup_timeout=self.startup_timeout, preexec=self.preexec,
                      env=self.extra_env, cwd=self.cwd, command=self.command, package=self.package)
        twin.fresh_interpreter = self.fresh_interpreter
        return twin

    def use_device(self, device: str) -> None:
        """The layers will run on ``device``. An accelerator's driver does not survive a fork, and this process
        may have started it (a notebook that asked ``torch.cuda.is_available()``): from now on the worker is a
        fresh interpreter, and one already forked from here is stopped (the next request starts another)."""
        if device.split(":", 1)[0] == "cpu" or self.fresh_interpreter:
            return
        self.fresh_interpreter = True
        if isinstance(self.proc, _ForkedChild):
            self.kill()
            self.restarts = 0

    # -- lifecycle -----------------------------------------------------------
    def start(self) -> None:
        """Start the process now: forked from this one where that is safe (torch already imported,
        no other thread), so it pays no second cold ``import torch``; otherwise a fresh interpreter
        that imports torch in the background."""
        if self.proc is not None:
            return
        req_r, req_w = request_pipe()
        resp_r, resp_w = channel()
        if self._can_fork():
            _warm_before_fork()
            self.proc = _fork_worker(req_r, resp_w, close=(req_w, resp_r), log_fd=self.log.fileno(),
                                     cwd=self.cwd or str(PROJECT_ROOT))
        else:
            self.proc = self._spawn(req_r, resp_w)
        os.close(req_r)
        os.close(resp_w)
        os.set_blocking(req_w, False)  # requests are written with a deadline (write_message)
        self.req_fd = req_w
        self.reader = reply_reader(resp_r, self.proc.pid)
        self.load_reply = None

    def _can_fork(self) -> bool:
        """Forking is only safe with one thread, and only worth it once torch is imported here."""
        return (hasattr(os, "fork") and not self.fresh_interpreter and self.command is None
                and self.preexec is None and not self.extra_env
                and os.environ.get("VALIDATOR_WORKER_START", "fork") == "fork"
                and "torch" in sys.modules and threading.active_count() == 1)

    def _spawn(self, req_r: int, resp_w: int) -> subprocess.Popen:
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(PROJECT_ROOT), env.get("PYTHONPATH")]))
        env.setdefault("OMP_NUM_THREADS", "1")
        env["PYTHONDONTWRITEBYTECODE"] = "1"
        env.update(self.extra_env)
        command = self.command or [sys.executable, "-m", "validator.worker.main"]
        return subprocess.Popen(
            command + [str(req_r), str(resp_w)], pass_fds=(req_r, resp_w),
            stdin=subprocess.DEVNULL, stdout=self.log, stderr=self.log,
            start_new_session=True, env=env, cwd=self.cwd or PROJECT_ROOT,
            preexec_fn=self.preexec)

    def _ensure_loaded(self) -> dict:
        self.start()
        if self.load_reply is None:
            self._roundtrip({"op": "hello"}, self.startup_timeout, "starting the worker")
            load = {"op": "load", "path": self.student_file}
            if self.package:
                load["package"] = self.package
            self.load_reply = self._roundtrip(load, self.startup_timeout,
                                              "importing your package" if self.package else "importing layers.py")
        return self.load_reply

    def load(self) -> dict:
        """Import the student file (once per process); the reply lists names or the import error."""
        return self._ensure_loaded()

    def request(self, message: dict, timeout: float, doing: str = "running your code") -> Any:
        """Send one request and return the reply.

        A hang costs about one time-out per entry point, not one per check. After a call to
        an entry has timed out, later calls to it get at most :data:`REPROBE_S` seconds: code
        that hangs only on some inputs (an empty tensor) still passes the checks that never
        give it those, while code that hangs everywhere times out a second, short time, after
        which requests that call the entry fail at once, naming the check where it first
        timed out, without reaching the worker.
        """
        if self.forged:
            raise WorkerFailure("forged", f"not run: {self.forged}")
        entries = _entries_called(message)
        probing = [e for e in entries if e in self.timed_out]
        for entry in probing:
            where, count = self.timed_out[entry]
            if count >= 2:
                raise WorkerFailure("timeout", f"not run: {entry} already timed out in {where}; see there")
        if probing:
            timeout = min(timeout, REPROBE_S)
        self._ensure_loaded()
        try:
            return self._roundtrip(message, timeout, doing)
        except WorkerFailure as exc:
            if exc.reason == "timeout":
                where = f"check {self.current_check}" if self.current_check else f"an earlier step ({doing})"
                for entry in entries:
                    first, count = self.timed_out.get(entry, (where, 0))
                    self.timed_out[entry] = (first, count + 1)
                if probing:
                    first = self.timed_out[probing[0]][0]
                    raise WorkerFailure("timeout", f"{exc} ({probing[0]} already timed out in {first}, so later "
                                        f"calls to it get {REPROBE_S:g} s; see there)") from None
            raise

    def _roundtrip(self, message: dict, timeout: float, doing: str) -> Any:
        if self.forged:
            raise WorkerFailure("forged", f"not run: {self.forged}")
        assert self.req_fd is not None and self.reader is not None
        self.seq += 1
        deadline = time.monotonic() + timeout
        try:
            write_message(self.req_fd, {**message, "seq": self.seq}, deadline)
            reply = self.reader.read(deadline=deadline)
            if not isinstance(reply, dict) or reply.pop("seq", None) != self.seq:
                # A reply the student's code wrote itself, or one left over from it: the stream is garbled.
                raise ProtocolError("a reply that does not answer the request sent (a forged or extra reply)")
        except ChannelTimeout:
            self.kill()
            raise WorkerFailure("timeout", f"no answer after {timeout:g} s while {doing}: "
                                "an infinite loop, a deadlock, or work far too slow for the input size") from None
        except (ChannelClosed, BrokenPipeError):
            code = self.kill()
            raise WorkerFailure("crash", f"the process running your code died while {doing} "
                                f"({self.describe_exit(code)}){self._output_tail()}") from None
        except ForgedReply as exc:
            self.kill()
            self.forged = (f"a reply to the grader was forged while {doing}: {exc}. Only the process that runs "
                           "your code may answer the grader (a process it started inherited the channel and "
                           "wrote on it), so nothing of this submission is credited and a person will review it")
            raise WorkerFailure("forged", self.forged) from None
        except ProtocolError as exc:
            self.kill()
            raise WorkerFailure("protocol", f"the worker sent a malformed reply while {doing}: {exc}") from None
        if isinstance(reply, dict) and reply.get("restart"):
            # The device is unusable in that process: stop this check (a later one starts afresh).
            self.kill()
            raise WorkerFailure("device", f"your code broke the device while {doing}: {_first_exception(reply)}")
        return reply

    def describe_exit(self, code: int | None) -> str:
        return _describe_exit(code)

    def _output_tail(self) -> str:
        try:
            self.log.seek(0, os.SEEK_END)
            size = self.log.tell()
            self.log.seek(max(0, size - OUTPUT_TAIL_BYTES))
            tail = "\n".join(line for line in self.log.read().decode("utf-8", "replace").splitlines()
                             if not line.startswith(PROFILER_NOISE)).strip()
        except OSError:
            return ""
        return f"; last output:\n{tail}" if tail else ""

    def kill(self) -> int | None:
        """Stop the worker and everything it started; return its exit code."""
        proc, self.proc = self.proc, None
        if self.req_fd is not None:
            _close_quietly(self.req_fd)
            self.req_fd = None
        if self.reader is not None:
            self.reader.close()
            self.reader = None
        self.load_reply = None
        if proc is None:
            return None
        self.restarts += 1
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        try:
            return proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            return None

    def paused(self) -> ContextManager[bool]:
        """Nothing of the student's runs inside the block (see :meth:`SandboxedWorker.paused`); yields whether
        that holds. A plain worker runs as the grader's own user, whose processes cannot all be stopped."""
        return contextlib.nullcontext(False)

    def close(self) -> None:
        if self.proc is not None and self.proc.poll() is None and self.req_fd is not None:
            try:
                write_message(self.req_fd, {"op": "exit"}, time.monotonic() + 2)
            except (OSError, ChannelTimeout):
                pass
        self.kill()
        self.restarts = 0
        self.log.close()

    def __enter__(self) -> "Worker":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class _ForkedChild:
    """The part of ``subprocess.Popen`` the worker uses, for a child made with ``os.fork``."""

    def __init__(self, pid: int):
        self.pid = pid
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None:
            try:
                pid, status = os.waitpid(self.pid, os.WNOHANG)
            except ChildProcessError:
                self.returncode = -1
                return self.returncode
            if pid:
                self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            if deadline is not None and time.monotonic() > deadline:
                raise subprocess.TimeoutExpired(f"worker {self.pid}", timeout)
            time.sleep(0.005)
        return self.returncode


_WARM = False


def _warm_before_fork() -> None:
    """Pay torch's lazy first-use costs once, here, before the first fork: the first backward, the
    first dispatch-mode trace and the first profiler start each import or initialise hundreds of
    modules. The grader and every worker forked after this share them instead of paying twice."""
    global _WARM
    if not _WARM:
        from validator.worker.main import _prepare_template

        _prepare_template()  # torch's profiler notices on fd 2 are dropped there
        _WARM = True
        from validator import lifetime

        lifetime.freeze_heap()  # torch, the grader, the spec: alive until exit (0.1 s a forked grader saves)


def warm_for_regrades() -> None:
    """Make this process the template of many short workers (``submit-build --watch`` forks one per regrade).

    Besides :func:`_warm_before_fork`'s warm-up: the first operation on the meta device, which a layer's
    ``device="meta"`` check runs, imports sympy for torch's meta kernels (a third of an ``import torch``);
    done here, once, every worker forked later has it. Only torch's own operations run here, never student
    code, and only after the warm-up has switched off the dynamo shims (no dynamo import).
    """
    from validator.worker.main import warm_meta_device

    _warm_before_fork()
    warm_meta_device()


def flush_std_streams() -> None:
    """Before a fork: what this process buffered must not be written twice, once by each side."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError, AttributeError):
            pass


def _fork_worker(req_r: int, resp_w: int, *, close: tuple[int, ...], log_fd: int, cwd: str) -> _ForkedChild:
    """Fork a worker from this process: it serves requests with the torch this process imported.

    The child gets its own session (so a kill reaches everything it starts), stdin from
    /dev/null, stdout and stderr to the worker log, no other file descriptor, default
    signal handlers, and leaves with ``os._exit`` so none of this process's exit code runs.
    """
    flush_std_streams()
    pid = os.fork()
    if pid:
        return _ForkedChild(pid)
    code = 0
    try:  # pragma: no cover - child
        os.setsid()
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGPIPE):
            signal.signal(sig, signal.SIG_DFL)
        for fd in close:
            os.close(fd)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(log_fd, 1)
        os.dup2(log_fd, 2)
        from validator.sandbox import close_fds_except

        close_fds_except([0, 1, 2, req_r, resp_w])
        import io

        sys.stdin = io.TextIOWrapper(io.FileIO(0, "r", closefd=False))
        sys.stdout = io.TextIOWrapper(io.FileIO(1, "w", closefd=False), line_buffering=True)
        sys.stderr = io.TextIOWrapper(io.FileIO(2, "w", closefd=False), line_buffering=True)
        sys.dont_write_bytecode = True
        os.chdir(cwd)
        from validator.worker.main import serve

        serve(req_r, resp_w)
    except BaseException:  # noqa: BLE001 - the child must never return into the grader's code
        code = 70
    finally:
        os._exit(code)


def _entries_called(message: dict) -> list[str]:
    """The entry points (class or function names) a request runs or inspects."""
    if message.get("op") == "describe":
        return sorted(n for n in message.get("names") or [] if isinstance(n, str))
    calls = [message.get("call")] if message.get("op") == "execute" else message.get("calls") or []
    return sorted({c["entry"] for c in calls if isinstance(c, dict) and isinstance(c.get("entry"), str)})


def _first_exception(reply: dict) -> str:
    for item in [reply, *(reply.get("results") or [])]:
        info = item.get("exception") if isinstance(item, dict) else None
        if info:
            return f"{info.get('type', 'an exception')}: {info.get('message', '')}"
    return "an accelerator error"


def _describe_exit(code: int | None) -> str:
    if code is None:
        return "exit status unknown"
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        hint = {"SIGKILL": "killed: often a memory limit", "SIGSEGV": "a segmentation fault",
                "SIGABRT": "aborted"}.get(name, "")
        return f"{name}{': ' + hint if hint else ''}"
    return f"exit status {code}: did your code call sys.exit() or os._exit()?"


def _close_quietly(fd: int) -> None:
    try:
        os.close(fd)
    except OSError:
        pass


class TemplateDied(RuntimeError):
    """The template process is gone: a grader failure, not the student's."""


class Template:
    """A pre-warmed process (torch and the worker imported, no student code) that forks sandboxed workers.

    It runs as the grader's user with a minimal environment, so nothing secret
    is in the memory a forked worker inherits. Requests go over a private
    socket that every worker closes before it runs student code.
    """

    ENV_KEEP = ("PATH", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "VIRTUAL_ENV")

    def __init__(self, *, startup_timeout: float = 120.0):
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        env = {k: os.environ[k] for k in self.ENV_KEEP if k in os.environ}
        env.update(PYTHONPATH=str(PROJECT_ROOT), PYTHONDONTWRITEBYTECODE="1", OMP_NUM_THREADS="1",
                   MKL_NUM_THREADS="1", PYTHONHASHSEED="0")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "validator.worker.main", "--template", str(theirs.fileno())],
            pass_fds=(theirs.fileno(),), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            start_new_session=True, env=env, cwd=PROJECT_ROOT)
        theirs.close()
        self.sock = ours
        self.lock = threading.Lock()
        self.pid = self.call({"op": "hello"}, timeout=startup_timeout)["pid"]

    def call(self, message: dict, fds: tuple[int, ...] = (), timeout: float = 60.0) -> dict:
        with self.lock:
            try:
                self.sock.settimeout(timeout)
                socket.send_fds(self.sock, [json.dumps(message).encode()], list(fds))
                data = self.sock.recv(1 << 20)
            except (OSError, socket.timeout) as exc:
                raise TemplateDied(f"the worker template stopped answering ({exc})") from None
        if not data:
            raise TemplateDied(f"the worker template exited (status {self.proc.poll()})")
        reply = json.loads(data)
        if not reply.get("ok"):
            raise TemplateDied(f"the worker template failed: {reply.get('error')}")
        return reply

    def spawn(self, sandbox: "Sandbox", fds: tuple[int, int, int], student: str = "layers.py") -> int:
        return self.call({"op": "spawn", "sandbox": sandbox.to_dict(), "student": student}, fds)["pid"]

    def wait(self, pid: int, timeout: float) -> dict:
        """``status``: the exit code, None while it runs, "unknown"; once ended, what its cgroup saw
        (``oom``: the out-of-memory killer ran in it, ``peak_mb``)."""
        return self.call({"op": "wait", "pid": pid, "timeout": timeout}, timeout=timeout + 30)

    def sweep(self, uid: int) -> int:
        return self.call({"op": "sweep", "uid": uid})["rounds"]

    def close(self) -> None:
        try:
            self.call({"op": "exit"}, timeout=30)
        except TemplateDied:
            pass
        self.sock.close()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()

    def __enter__(self) -> "Template":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class _Forked:
    """The part of ``subprocess.Popen`` that :class:`Worker` uses, for a worker the template forked."""

    def __init__(self, template: Template, pid: int):
        self.template, self.pid, self.returncode = template, pid, None
        self.oom = False  # its cgroup's out-of-memory killer ran (known once it ended)
        self.peak_mb = 0  # the most memory its cgroup held (known once it ended; 0 without a cgroup)

    def poll(self) -> int | None:
        return self.wait(0.0, raise_timeout=False)

    def wait(self, timeout: float | None = None, raise_timeout: bool = True) -> int | None:
        if self.returncode is None:
            ended = self.template.wait(self.pid, 3600.0 if timeout is None else timeout)
            status = ended["status"]
            self.oom = bool(ended.get("oom"))
            self.peak_mb = int(ended.get("peak_mb") or 0)
            if status is None:
                if raise_timeout:
                    raise subprocess.TimeoutExpired(f"worker {self.pid}", timeout)
                return None
            self.returncode = status if isinstance(status, int) else -signal.SIGKILL
        return self.returncode


class SandboxedWorker(Worker):
    """A :class:`Worker` forked from a :class:`Template` into a sandbox, with a wall-time budget.

    The budget covers the whole submission: every request's timeout is capped by
    what is left of it, and once it is spent the remaining checks are not run.
    A failed import is remembered, so each challenge does not wait for it again.
    """

    def __init__(self, student_file: str | os.PathLike, *, template: Template, sandbox: "Sandbox",
                 budget_s: float | None = None, startup_timeout: float = 60.0, package: dict | None = None):
        super().__init__(student_file, startup_timeout=startup_timeout, package=package)
        self.template = template
        self.sandbox = sandbox
        self.budget_s = budget_s
        self.deadline: float | None = None
        self.load_failure: dict | None = None
        self.oom_killed = False  # the last worker that ended was stopped by its cgroup's memory limit
        self.peak_mb = 0  # the most memory one of its workers' cgroups held (0 without a cgroup)

    def start(self) -> None:
        if self.proc is not None:
            return
        if self.deadline is None and self.budget_s:
            self.deadline = time.monotonic() + self.budget_s
        req_r, req_w = request_pipe()
        resp_r, resp_w = channel()
        try:
            pid = self.template.spawn(self.sandbox, (req_r, resp_w, self.log.fileno()))
        except BaseException:
            _close_quietly(req_w)
            _close_quietly(resp_r)
            raise
        finally:
            os.close(req_r)
            os.close(resp_w)
        self.proc = _Forked(self.template, pid)  # type: ignore[assignment]
        os.set_blocking(req_w, False)
        self.req_fd = req_w
        self.reader = reply_reader(resp_r, pid)
        self.load_reply = None

    def load(self) -> dict:
        if self.load_failure is not None:
            return self.load_failure
        try:
            return super().load()
        except WorkerFailure as exc:
            kind = {"timeout": "TimeoutError", "crash": "WorkerCrashed"}.get(exc.reason, "WorkerFailure")
            self.load_failure = {"ok": False, "names": [],
                                 "exception": {"type": kind, "mro": [kind], "message": str(exc), "where": []}}
            return self.load_failure

    def paused(self) -> ContextManager[bool]:
        """Every process of the submission (its sandbox uid's) stopped for the block: what the grader times of
        its own then competes with nothing the student left running (:func:`validator.sandbox.paused`)."""
        from validator import sandbox

        return sandbox.paused(self.sandbox.uid)

    def _roundtrip(self, message: dict, timeout: float, doing: str) -> Any:
        if self.deadline is None:
            return super()._roundtrip(message, timeout, doing)
        left = self.deadline - time.monotonic()
        if left <= 0:
            self.kill()
            raise WorkerFailure("timeout", f"not run: the submission used up its {self.budget_s:g} s "
                                "wall-time limit")
        try:
            return super()._roundtrip(message, min(timeout, left), doing)
        except WorkerFailure as exc:
            if exc.reason == "timeout" and left < timeout:
                raise WorkerFailure("timeout", f"killed after {self.budget_s:g} s wall time (the limit for a "
                                    f"whole submission) while {doing}") from None
            raise

    def kill(self) -> int | None:
        proc = self.proc
        code = super().kill()
        self.oom_killed = bool(getattr(proc, "oom", False))
        self.peak_mb = max(self.peak_mb, int(getattr(proc, "peak_mb", 0)))
        if self.sandbox.uid is not None:
            try:
                self.template.sweep(self.sandbox.uid)
            except TemplateDied:
                pass
        return code

    def describe_exit(self, code: int | None) -> str:
        from validator.sandbox import describe_signal

        if code is not None and code < 0:
            meaning = describe_signal(-code, self.sandbox.limits, oom=self.oom_killed and code == -signal.SIGKILL)
            if meaning:
                return f"{signal.Signals(-code).name}: {meaning}"
        return super().describe_exit(code)
