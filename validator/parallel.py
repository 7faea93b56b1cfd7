"""Grade a run's challenges in forked grader processes, one student worker each, results in order.

A student runs `submit-build` dozens of times, and the catalogue's challenges are independent:
after the grader has imported torch and loaded the reference, ``os.fork`` gives each child both
for free. Every child grades its share with its own worker and sends each ChallengeResult back
as soon as it is done; the parent hands them to ``on_challenge`` in catalogue order. Student code
never runs in these children (it runs in their workers), so what they send back is the grader's
own data: each result, and the cases its passing checks were given (``validator.checks.for_all``), so
that a run forked from the parent later (a ``--watch`` regrade) replays them instead of drawing them.
A child that dies leaves its challenges to the parent, which grades them itself.

Who grades what is decided as the run goes, not up front: challenges differ tenfold in cost (the
transformer embedding has 45 checks, softmax 17), so fixed shares leave one grader idle while
another finishes a long tail. Each challenge has one token; whoever takes it grades it. The parent
takes them in catalogue order, so the report streams from its top as before; each child takes the
costliest left first, so no large challenge is started last. What a challenge costs is the time
`validator regenerate` measured grading it (validator.case_store.seconds), else its number of checks.
"""

from __future__ import annotations

import os
import pickle
import selectors
import shutil
import signal
import struct
import tempfile
import time
from typing import Callable, Sequence

from validator.checks import remember_cases, remembered_keys, remembered_since
from validator.results import ChallengeResult
from validator.spec import Challenge
from validator.worker.client import Worker, flush_std_streams

_FRAME = struct.Struct("<IQ")  # challenge index, payload length (the payload itself is in the spool folder)


def default_jobs(n_challenges: int) -> int:
    """One grader per core, at most four (each holds a worker), never more than there are challenges."""
    return max(1, min(4, os.cpu_count() or 1, n_challenges))


def grade_all(selected: Sequence[Challenge], *, worker: Worker, jobs: int,
              grade_one: Callable[[Challenge, Worker], ChallengeResult],
              on_challenge: Callable[[ChallengeResult], None] | None = None,
              costs: Sequence[float] | None = None) -> list[ChallengeResult]:
    """``grade_one`` over ``selected``; in ``jobs`` forked graders when that is worth it, else here.
    ``costs``: each challenge's expected grading time (any unit); by default, its number of checks."""
    results: list[ChallengeResult | None] = [None] * len(selected)
    emitted = 0

    def emit_ready() -> None:
        nonlocal emitted
        while emitted < len(results) and results[emitted] is not None:
            if on_challenge:
                on_challenge(results[emitted])
            emitted += 1

    if jobs > 1 and len(selected) > 1 and hasattr(os, "fork"):
        claims = _Claims(len(selected))
        spool = tempfile.mkdtemp(prefix="validator-results-")
        try:
            cost = list(costs) if costs is not None and len(costs) == len(selected) else \
                [_cost(c) for c in selected]
            costliest = sorted(range(len(selected)), key=lambda i: (-cost[i], -i))
            own = claims.first(range(len(selected)))  # each grader starts with one challenge of its own
            firsts = [claims.first(costliest) for _ in range(min(jobs, len(selected)) - 1)]
            children = [_fork_grader(selected, first, costliest, claims, worker, grade_one, spool)
                        for first in firsts if first is not None]
            try:
                _collect(children, results, emit_ready, own, claims, selected, worker, grade_one, spool)
            finally:
                for pid, fd in children:
                    _reap(pid, fd)
        finally:
            claims.close()
            shutil.rmtree(spool, ignore_errors=True)
    for i, challenge in enumerate(selected):  # serial run, or what a dead child left undone
        if results[i] is None:
            results[i] = grade_one(challenge, worker)
            emit_ready()
    return [r for r in results if r is not None]


def _cost(challenge) -> int:
    """A challenge's expected grading time, in checks, where no recorded time says better (what fills a
    grader's time is their examples; but a transformer block's 31 checks take longer than softmax's 19)."""
    return len(getattr(challenge, "checks", None) or ())


class _Claims:
    """One token per challenge, each in its own pipe; whoever reads it grades that challenge.

    A one-byte read from a pipe is atomic, so two graders never take the same challenge, and
    with the write ends closed a token already taken reads as end of file: no lock to hold, none
    left held by a grader that died.
    """

    def __init__(self, n: int):
        self.fds: list[int] = []
        try:
            for _ in range(n):
                read_fd, write_fd = os.pipe()
                os.write(write_fd, b"+")
                os.close(write_fd)
                self.fds.append(read_fd)
        except BaseException:
            self.close()
            raise

    def take(self, index: int) -> bool:
        return os.read(self.fds[index], 1) == b"+"

    def first(self, order) -> int | None:
        """The first challenge in ``order`` nobody has taken; it is now the caller's."""
        return next((i for i in order if self.take(i)), None)

    def close(self) -> None:
        for fd in self.fds:
            try:
                os.close(fd)
            except OSError:
                pass
        self.fds = []


def _collect(children, results, emit_ready, own, claims, selected, worker, grade_one, spool: str) -> None:
    """Grade challenges here, in catalogue order, while reading the children's results as they arrive."""
    sel = selectors.DefaultSelector()
    buffers: dict[int, bytearray] = {}
    for _, fd in children:
        os.set_blocking(fd, False)
        sel.register(fd, selectors.EVENT_READ)
        buffers[fd] = bytearray()

    def drain(timeout: float | None) -> None:
        for key, _ in sel.select(timeout):
            fd = key.fd
            try:
                chunk = os.read(fd, 1 << 16)
            except BlockingIOError:
                continue
            if not chunk:
                sel.unregister(fd)
                continue
            buf = buffers[fd]
            buf += chunk
            while len(buf) >= _FRAME.size:
                index, size = _FRAME.unpack_from(buf)
                del buf[:_FRAME.size]
                results[index], remembered = pickle.loads(_take_spooled(spool, index, size))
                remember_cases(remembered)  # a later run forked from here (a --watch regrade) replays them
        emit_ready()

    index = own
    while index is not None:
        drain(0)
        results[index] = grade_one(selected[index], worker)
        emit_ready()
        index = claims.first(range(index + 1, len(selected)))
    while sel.get_map():
        drain(None)
    sel.close()


def _spooled(spool: str, index: int) -> str:
    return os.path.join(spool, f"{index}.pickle")


def _take_spooled(spool: str, index: int, size: int) -> bytes:
    path = _spooled(spool, index)
    with open(path, "rb") as f:
        data = f.read()
    os.unlink(path)
    if len(data) != size:
        raise RuntimeError(f"a child grader's result for challenge {index} holds {len(data)} bytes, not {size}")
    return data


def _fork_grader(selected, first: int, order: list[int], claims: _Claims, worker: Worker,
                 grade_one, spool: str) -> tuple[int, int]:
    """A child grader. Each result goes to a file in ``spool`` and only its frame through the pipe: a result
    carries the cases it remembers and is often larger than a pipe holds (0.8 MB), and a child whose write
    waited for the parent to finish its own challenge sat idle (on two cores it did a fifth of the work)."""
    read_fd, write_fd = os.pipe()
    flush_std_streams()
    pid = os.fork()
    if pid:
        os.close(write_fd)
        return pid, read_fd
    code = 0
    try:  # pragma: no cover - child
        os.close(read_fd)
        # Stopped (Ctrl-C, or the parent's _reap), the child still closes its worker on the way out.
        signal.signal(signal.SIGINT, _stop)
        signal.signal(signal.SIGTERM, _stop)
        own = worker.sibling()
        try:
            index: int | None = first
            while index is not None:
                known = remembered_keys()
                result = grade_one(selected[index], own)
                payload = pickle.dumps((result, remembered_since(known)), protocol=pickle.HIGHEST_PROTOCOL)
                with open(_spooled(spool, index), "wb") as f:
                    f.write(payload)
                view = memoryview(_FRAME.pack(index, len(payload)))
                while view:
                    view = view[os.write(write_fd, view):]
                index = claims.first(order)
        finally:
            own.close()
    except BaseException:  # noqa: BLE001 - the child never returns into the caller's code
        code = 1
    finally:
        os._exit(code)


def _stop(signum, frame):  # pragma: no cover - child
    """Leave through the ``finally`` that closes the worker; a second signal must not cut that short."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    raise SystemExit(128 + signum)


def _reap(pid: int, fd: int, grace_s: float = 5.0) -> None:
    """Wait for a child grader; one still running (the run was interrupted) is asked to stop, which
    closes its worker, and killed if it has not within ``grace_s``."""
    try:
        os.close(fd)
    except OSError:
        pass
    try:
        done, _ = os.waitpid(pid, os.WNOHANG)
        if done:
            return
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + grace_s
        while time.monotonic() < deadline:
            done, _ = os.waitpid(pid, os.WNOHANG)
            if done:
                return
            time.sleep(0.01)
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    except (ChildProcessError, ProcessLookupError):
        pass
