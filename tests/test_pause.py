"""While the grader times the reference, nothing of the submission runs (``validator.sandbox.paused``).

A submission could leave processes busy on the CPU (or wake them just before its reply) so that the
reference's timed runs, in the grader's process, share the machine with them and the time ratio of the
speed check shrinks. The grader stops every process of the worker's uid for those runs. Here real
processes of a leased uid burn CPU: inside the block none of them is scheduled (their CPU time stands
still), their children are caught too, and afterwards each runs again, except one the submission had
stopped itself, which stays as it was.
"""

from __future__ import annotations

import os
import signal
import time

import pytest

from validator import sandbox

caps = sandbox.capabilities()
pytestmark = pytest.mark.skipif(not caps["setuid"], reason="pausing another uid's processes needs root")


def _cpu_ticks(pid: int) -> int:
    with open(f"/proc/{pid}/stat") as fh:
        fields = fh.read().rpartition(")")[2].split()
    return int(fields[11]) + int(fields[12])  # utime + stime


def _state(pid: int) -> str:
    with open(f"/proc/{pid}/stat") as fh:
        return fh.read().rpartition(")")[2].split()[0]


def _spin() -> None:
    while True:
        pass


@pytest.fixture
def busy_uid():
    """A leased uid running a busy process, a busy child of it, and a process that stopped itself."""
    lease = sandbox.UidLease()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - child
        try:
            os.setsid()
            os.setgroups([])
            os.setresgid(lease.uid, lease.uid, lease.uid)
            os.setresuid(lease.uid, lease.uid, lease.uid)
            if os.fork() == 0:
                _spin()
            if os.fork() == 0:
                os.kill(os.getpid(), signal.SIGSTOP)
                os._exit(0)
            _spin()
        finally:
            os._exit(0)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:  # all three started; the self-stopped one has stopped
        states = sandbox._states_of(lease.uid)
        if len(states) == 3 and sorted(states.values()).count("T") == 1:
            break
        time.sleep(0.01)
    yield lease.uid
    try:
        os.killpg(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    os.waitpid(pid, 0)
    sandbox.sweep(lease.uid)
    lease.release()


def test_every_process_of_the_uid_is_stopped_inside_the_block_and_runs_after(busy_uid):
    states = sandbox._states_of(busy_uid)
    assert len(states) == 3, states
    self_stopped = next(pid for pid, state in states.items() if state == "T")
    busy = [pid for pid in states if pid != self_stopped]
    with sandbox.paused(busy_uid) as done:
        assert done
        assert {_state(pid) for pid in states} == {"T"}
        before = {pid: _cpu_ticks(pid) for pid in busy}
        time.sleep(0.3)  # 30 clock ticks: a busy process that ran at all would have gained some
        assert {pid: _cpu_ticks(pid) for pid in busy} == before
    deadline = time.monotonic() + 10
    while any(_state(pid) == "T" for pid in busy) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert all(_state(pid) != "T" for pid in busy), "a paused process was not continued"
    assert _state(self_stopped) == "T", "the submission's own stopped process was woken by the grader"


def test_nothing_is_paused_without_a_uid_of_its_own():
    with sandbox.paused(None) as done:
        assert not done
