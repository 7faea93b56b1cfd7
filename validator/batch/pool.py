"""A pool of grading slots (separate processes), fed one submission at a time.

A slot that dies (the grader process itself, not a student's worker) is
replaced and its submission retried once; a second death is recorded as a
grader failure for that submission, and the batch goes on.
"""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

from validator.worker.client import PROJECT_ROOT
from validator.worker.protocol import ProtocolError, Reader, write_message

SLOT_STARTUP_S = 300.0


@dataclass
class Outcome:
    name: str
    report: dict[str, Any] | None
    error: str | None  # a grader failure (never the student's): traceback or description
    seconds: float


def usable_cpus() -> list[int]:
    """The CPUs this process may run on (none where the platform cannot say)."""
    try:
        return sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return []


def slot_cpus(slots: int, cpus: list[int]) -> list[int | None]:
    """The CPU each of ``slots`` slots is kept on: one each where there are exactly as many CPUs as slots
    (`validator grade`'s default), else None for each.

    A slot's grader and its worker take turns (the grader waits for each reply): kept on one CPU,
    each turn starts on a CPU whose caches still hold the other's state, and no wake-up crosses to
    another CPU (a round trip of a small call costs about a quarter less; `benchmarks/bench_batch.py
    --no-pin` measures a batch without). With CPUs to spare the scheduler is left to place the slots
    (a pinned slot could not move off a CPU that something else keeps busy), as it is with more slots
    than CPUs, or with ``VALIDATOR_PIN_SLOTS=0`` in the environment."""
    if len(cpus) != slots or os.environ.get("VALIDATOR_PIN_SLOTS", "1") == "0":
        return [None] * slots
    return list(cpus)


class SlotProcess:
    def __init__(self, config: dict[str, Any], cpu: int | None = None):
        self.cpu = cpu
        cmd_r, self.cmd_w = os.pipe()
        res_r, res_w = os.pipe()
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(PROJECT_ROOT), env.get("PYTHONPATH")]))
        env.setdefault("OMP_NUM_THREADS", "1")
        self.proc = subprocess.Popen([sys.executable, "-m", "validator.batch.slot", str(cmd_r), str(res_w)],
                                     pass_fds=(cmd_r, res_w), stdin=subprocess.DEVNULL, env=env,
                                     cwd=PROJECT_ROOT, start_new_session=True)
        if cpu is not None:  # before it starts its worker template: every worker forked later inherits the CPU
            try:
                os.sched_setaffinity(self.proc.pid, {cpu})
            except OSError:
                self.cpu = None
        os.close(cmd_r)
        os.close(res_w)
        self.reader = Reader(res_r)
        self.fd = res_r
        self.task: tuple | None = None  # (name, folder) or (name, folder, challenges)
        self.started = time.monotonic()
        self.ready = False
        self.degraded: list[str] = []
        write_message(self.cmd_w, config)

    def send(self, name: str, folder: str, challenges: list[str] | None = None) -> None:
        """Grade one submission; ``challenges`` narrows the slot's configured ones for this one task."""
        self.task = (name, folder) if challenges is None else (name, folder, challenges)
        self.started = time.monotonic()
        message = {"op": "grade", "name": name, "folder": folder}
        if challenges is not None:
            message["challenges"] = list(challenges)
        write_message(self.cmd_w, message)

    def read(self) -> dict:
        return self.reader.read(deadline=time.monotonic() + 120)

    def stop(self, *, force: bool = False) -> None:
        try:
            os.close(self.cmd_w)  # the slot exits when its command pipe closes
        except OSError:
            pass
        if not force:
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                force = True
        if force:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except OSError:
                pass
            self.proc.wait()
        try:
            os.close(self.fd)
        except OSError:
            pass


@dataclass
class Pool:
    config: dict[str, Any]
    workers: int
    watchdog_s: float  # a slot silent this long on one submission is killed (a grader hang)
    on_ready: Callable[[dict], None] = lambda message: None
    slots: list[SlotProcess] = field(default_factory=list)
    keep: bool = False  # leave the slots warm after run(), for a next run (the canary, then the batch); close()

    def start(self, count: int) -> None:
        """Start slots until there are ``count`` (their templates warm up in parallel)."""
        while len(self.slots) < count:
            self._add_slot()

    def _add_slot(self) -> None:
        """One more slot, kept on a CPU no live slot is kept on where slots are kept on one (:func:`slot_cpus`)."""
        taken = [s.cpu for s in self.slots]
        free = [c for c in slot_cpus(self.workers, usable_cpus()) if c is not None and c not in taken]
        self.slots.append(SlotProcess(self.config, free[0] if free else None))

    def close(self) -> None:
        for slot in self.slots:
            slot.stop(force=slot.task is not None)
        self.slots = []

    def run(self, tasks: Iterable[tuple], on_result: Callable[[Outcome], None]) -> None:
        """Grade each task, ``(name, folder)`` or ``(name, folder, challenges)``, on the first free slot."""
        pending = deque(tasks)
        tries: dict[str, int] = {}
        startup_failures = 0
        self.start(max(1, min(self.workers, len(pending))))
        try:
            while pending or any(s.task for s in self.slots):
                for slot in self.slots:
                    if slot.ready and slot.task is None and pending:
                        task = pending.popleft()
                        tries[task[0]] = tries.get(task[0], 0) + 1
                        slot.send(*task)
                readable, _, _ = select.select([s.fd for s in self.slots], [], [], 0.5)
                for slot in list(self.slots):
                    died = None
                    if slot.fd in readable:
                        try:
                            message = slot.read()
                        except (ProtocolError, OSError) as exc:
                            code = slot.proc.wait(timeout=30) if slot.proc.poll() is None else slot.proc.poll()
                            died = f"the grading process died ({exc}; exit status {code})"
                        else:
                            if message.get("op") == "ready":
                                slot.ready = True
                                self.on_ready(message)
                            elif message.get("op") == "failed":
                                raise RuntimeError(f"a grading process could not start:\n{message.get('error')}")
                            elif message.get("op") == "result" and slot.task is not None:
                                name = slot.task[0]
                                slot.task = None
                                on_result(Outcome(name, message.get("report"), message.get("internal_error"),
                                                  float(message.get("seconds", 0.0))))
                    elif slot.task is not None and time.monotonic() - slot.started > self.watchdog_s:
                        died = f"the grader made no progress for {self.watchdog_s:g} s"
                    elif not slot.ready and time.monotonic() - slot.started > SLOT_STARTUP_S:
                        died = f"a grading process did not start within {SLOT_STARTUP_S:g} s"
                    if died is None:
                        continue
                    slot.stop(force=True)
                    self.slots.remove(slot)
                    if slot.task is None:
                        startup_failures += 1
                        if startup_failures > 3:
                            raise RuntimeError(died)
                    else:
                        task = slot.task
                        name = task[0]
                        if tries.get(name, 0) < 2:
                            pending.appendleft(task)
                        else:
                            on_result(Outcome(name, None, died, time.monotonic() - slot.started))
                    if pending or any(s.task for s in self.slots):
                        self._add_slot()
        finally:
            if not self.keep or any(s.task for s in self.slots):
                self.close()
