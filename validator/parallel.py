"""Grade a run's challenges in forked grader processes, one student worker each, results in order.

A student runs `submit-build` dozens of times, and the catalogue's challenges are independent:
after the grader has imported torch and loaded the reference, ``os.fork`` gives each child both
for free. Every child grades its share with its own worker and sends each ChallengeResult back
as soon as it is done; the parent hands them to ``on_challenge`` in catalogue order. Student code
never runs in these children (it runs in their workers), so what they send back is the grader's
own data. A child that dies leaves its challenges to the parent, which grades them itself.
"""

from __future__ import annotations

import os
import pickle
import selectors
import signal
import struct
from typing import Callable, Sequence

from validator.results import ChallengeResult
from validator.spec import Challenge
from validator.worker.client import Worker, flush_std_streams

_FRAME = struct.Struct("<IQ")  # challenge index, payload length


def default_jobs(n_challenges: int) -> int:
    """One grader per core, at most four (each holds a worker), never more than there are challenges."""
    return max(1, min(4, os.cpu_count() or 1, n_challenges))


def grade_all(selected: Sequence[Challenge], *, worker: Worker, jobs: int,
              grade_one: Callable[[Challenge, Worker], ChallengeResult],
              on_challenge: Callable[[ChallengeResult], None] | None = None) -> list[ChallengeResult]:
    """``grade_one`` over ``selected``; in ``jobs`` forked graders when that is worth it, else here."""
    results: list[ChallengeResult | None] = [None] * len(selected)
    emitted = 0

    def emit_ready() -> None:
        nonlocal emitted
        while emitted < len(results) and results[emitted] is not None:
            if on_challenge:
                on_challenge(results[emitted])
            emitted += 1

    if jobs > 1 and len(selected) > 1 and hasattr(os, "fork"):
        shares = [list(range(i, len(selected), jobs)) for i in range(min(jobs, len(selected)))]
        shares[0], own = [], shares[0]  # the parent grades one share itself, with the worker it was given
        children = [_fork_grader(selected, share, worker, grade_one) for share in shares if share]
        try:
            _collect(children, results, emit_ready, own, selected, worker, grade_one)
        finally:
            for pid, fd in children:
                _reap(pid, fd)
    for i, challenge in enumerate(selected):  # serial run, or what a dead child left undone
        if results[i] is None:
            results[i] = grade_one(challenge, worker)
            emit_ready()
    return [r for r in results if r is not None]


def _collect(children, results, emit_ready, own, selected, worker, grade_one) -> None:
    """Grade the parent's own share while reading the children's results as they arrive."""
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
                chunk = os.read(fd, 1 << 20)
            except BlockingIOError:
                continue
            if not chunk:
                sel.unregister(fd)
                continue
            buf = buffers[fd]
            buf += chunk
            while len(buf) >= _FRAME.size:
                index, size = _FRAME.unpack_from(buf)
                if len(buf) < _FRAME.size + size:
                    break
                results[index] = pickle.loads(bytes(buf[_FRAME.size:_FRAME.size + size]))
                del buf[:_FRAME.size + size]
        emit_ready()

    for index in own:
        drain(0)
        results[index] = grade_one(selected[index], worker)
        emit_ready()
    while sel.get_map():
        drain(None)
    sel.close()


def _fork_grader(selected, share: list[int], worker: Worker, grade_one) -> tuple[int, int]:
    read_fd, write_fd = os.pipe()
    flush_std_streams()
    pid = os.fork()
    if pid:
        os.close(write_fd)
        return pid, read_fd
    code = 0
    try:  # pragma: no cover - child
        os.close(read_fd)
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        own = worker.sibling()
        try:
            for index in share:
                payload = pickle.dumps(grade_one(selected[index], own), protocol=pickle.HIGHEST_PROTOCOL)
                data = _FRAME.pack(index, len(payload)) + payload
                view = memoryview(data)
                while view:
                    view = view[os.write(write_fd, view):]
        finally:
            own.close()
    except BaseException:  # noqa: BLE001 - the child never returns into the caller's code
        code = 1
    finally:
        os._exit(code)


def _reap(pid: int, fd: int) -> None:
    try:
        os.close(fd)
    except OSError:
        pass
    try:
        done, _ = os.waitpid(pid, os.WNOHANG)
        if not done:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
    except (ChildProcessError, ProcessLookupError):
        pass
