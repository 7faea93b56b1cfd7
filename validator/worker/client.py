"""The grader's handle on a worker process running student code.

A request that times out, or a worker that dies (``os._exit``, a segfault, a
memory limit), raises :class:`WorkerFailure` with a sentence a student can
act on; the next request starts a fresh worker and reloads the student file.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

from validator.worker.protocol import ChannelClosed, ChannelTimeout, ProtocolError, Reader, write_message

PROJECT_ROOT = Path(__file__).resolve().parents[2]
OUTPUT_TAIL_BYTES = 1500


class WorkerFailure(Exception):
    """The worker could not answer: it hung, died, or sent garbage."""

    def __init__(self, reason: str, message: str):
        super().__init__(message)
        self.reason = reason  # "timeout" | "crash" | "protocol"


class Worker:
    """One student-code process, restarted on demand after a failure."""

    def __init__(self, student_file: str | os.PathLike, *, startup_timeout: float = 60.0,
                 preexec: Callable[[], None] | None = None, env: dict[str, str] | None = None,
                 cwd: str | None = None, command: list[str] | None = None):
        self.student_file = str(Path(student_file).resolve())
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

    # -- lifecycle -----------------------------------------------------------
    def start(self) -> None:
        """Spawn the process now (it imports torch in the background)."""
        if self.proc is not None:
            return
        req_r, req_w = os.pipe()
        resp_r, resp_w = os.pipe()
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(PROJECT_ROOT), env.get("PYTHONPATH")]))
        env.setdefault("OMP_NUM_THREADS", "1")
        env["PYTHONDONTWRITEBYTECODE"] = "1"
        env.update(self.extra_env)
        command = self.command or [sys.executable, "-m", "validator.worker.main"]
        self.proc = subprocess.Popen(
            command + [str(req_r), str(resp_w)], pass_fds=(req_r, resp_w),
            stdin=subprocess.DEVNULL, stdout=self.log, stderr=self.log,
            start_new_session=True, env=env, cwd=self.cwd or PROJECT_ROOT,
            preexec_fn=self.preexec)
        os.close(req_r)
        os.close(resp_w)
        self.req_fd = req_w
        self.reader = Reader(resp_r)
        self.load_reply = None

    def _ensure_loaded(self) -> dict:
        self.start()
        if self.load_reply is None:
            self._roundtrip({"op": "hello"}, self.startup_timeout, "starting the worker")
            self.load_reply = self._roundtrip({"op": "load", "path": self.student_file},
                                              self.startup_timeout, "importing layers.py")
        return self.load_reply

    def load(self) -> dict:
        """Import the student file (once per process); the reply lists names or the import error."""
        return self._ensure_loaded()

    def request(self, message: dict, timeout: float, doing: str = "running your code") -> Any:
        self._ensure_loaded()
        return self._roundtrip(message, timeout, doing)

    def _roundtrip(self, message: dict, timeout: float, doing: str) -> Any:
        assert self.req_fd is not None and self.reader is not None
        try:
            write_message(self.req_fd, message)
            return self.reader.read(deadline=time.monotonic() + timeout)
        except ChannelTimeout:
            self.kill()
            raise WorkerFailure("timeout", f"no answer after {timeout:g} s while {doing}: "
                                "an infinite loop, a deadlock, or work far too slow for the input size") from None
        except (ChannelClosed, BrokenPipeError):
            code = self.kill()
            raise WorkerFailure("crash", f"the process running your code died while {doing} "
                                f"({_describe_exit(code)}){self._output_tail()}") from None
        except ProtocolError as exc:
            self.kill()
            raise WorkerFailure("protocol", f"the worker sent a malformed reply while {doing}: {exc}") from None

    def _output_tail(self) -> str:
        try:
            self.log.seek(0, os.SEEK_END)
            size = self.log.tell()
            self.log.seek(max(0, size - OUTPUT_TAIL_BYTES))
            tail = self.log.read().decode("utf-8", "replace").strip()
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
            _close_quietly(self.reader.fd)
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

    def close(self) -> None:
        if self.proc is not None and self.proc.poll() is None and self.req_fd is not None:
            try:
                write_message(self.req_fd, {"op": "exit"})
            except OSError:
                pass
        self.kill()
        self.restarts = 0
        self.log.close()

    def __enter__(self) -> "Worker":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


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
