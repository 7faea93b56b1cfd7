"""Rehearsed calls: the student calls a challenge is about to make, sent ahead many to a request.

A batch slot grades one submission after another with the same checks, the same cases and so the same
calls: what a submission's checks ask its worker is, call for call, what the last submission that passed
the challenge asked. Each call is a round trip between the grader and the worker (~0.15 ms of CPU on top
of the call itself: encoding both ways, system calls, two processes taking turns), ~850 a submission.

So a slot keeps the calls of a challenge's last passing run (its *script*, per process). When a check of
the next submission makes the call the script has next, the script's following plain calls (up to the
next call that is not plain: a traced or timed one, or :data:`MAX_CALLS`) go with it in one
``execute_many`` request, and their replies wait in the grader until the checks make those calls. Calls a
check makes in one request (``Context.student_many``) are rehearsed as one: a batch holds all of them or
none. Nothing is taken on trust:

- a call is answered from the rehearsal only if it makes, byte for byte, the request the script's call at
  that position made (:func:`same_request`), every call between the batch and it having matched too: the
  worker ran exactly the requests the checks would have sent, in the same order, so each reply is the one
  it would have given;
- where a check makes another call (a failure that makes a check run afresh, a call built from an
  earlier result), the replies run ahead are dropped and the check goes on one call at a time; the next
  check starts again at its own place in the script (checks draw their calls from their own seeds). The
  calls run ahead stay run: code whose results depend on what ran before it may have seen a few calls
  more (as a replay that misses runs its check again after the calls it made, see validator.checks);
- a batch that fails (a crash, a hang, malformed replies) decides nothing: the worker is replaced (a fresh
  one, as after any hang or crash) and the calls are made one at a time, so the failure is reported, on
  the call that has it, as it always is. Its deadline is at most the smallest time-out of its calls, so a
  call slower than its own time-out never passes in a batch; a shorter one (twenty times what the script
  took, at least :data:`MIN_DEADLINE_S`) bounds what a hang costs before it is found again. After a
  failed batch the submission is graded one call at a time.

Off unless a process asks for it (:data:`ENABLED`; the batch slot does, ``VALIDATOR_NO_REHEARSAL=1``
turns it off there). tests/test_rehearsal.py proves that the mutant library's verdicts and messages are
those of a grader without rehearsals.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from typing import Any, Callable

import torch

ENABLED = [False]
MAX_CALLS = 32  # a batch's calls: replies stay far under the reply cap, and a failure wastes little
MIN_DEADLINE_S = 2.0
_SCRIPTS: dict[tuple, "Script"] = {}
_SCRIPT_LIMIT = 256


@dataclass
class Step:
    """One call of a challenge's run: a plain call (``call``, grader-side) or another request (``call``
    None: traced, timed), which a rehearsal never runs ahead. ``group``: how many calls the request that
    starts here made (1, or the calls of a ``student_many``), 0 for the second and later calls of one."""

    call: dict | None = None
    timeout: float = 0.0
    seconds: float = 0.0
    group: int = 1


_SCALARS = (str, int, bool, type(None))


def same_request(a: Any, b: Any) -> bool:
    """Whether two grader-side calls make the same request: what the worker would be sent for one, byte for
    byte, it would be sent for the other (validator.worker.protocol.pack's encoding: a tensor is its dtype,
    shape, device and bytes; a float its repr, so -0.0 and NaN count). Stricter where that is cheaper: the
    same types throughout (a tuple is not a list, True is not 1), dict keys in the same order.

    One loop over pairs still to compare, not a call per node. ~870 calls a class submission, ~30 nodes and
    ~2.5 tensors each, are ~4% of a slot's grading process (py-spy), most of it the tensors (:func:`_same_tensor`).
    An object compared with itself is the same."""
    pending = [(a, b)]
    pop, extend = pending.pop, pending.extend
    while pending:
        a, b = pop()
        if a is b:
            continue
        kind = type(a)
        if kind is not type(b):
            return False
        if kind in _SCALARS:
            if a != b:
                return False
        elif kind is dict:
            if len(a) != len(b) or list(a) != list(b):
                return False
            extend(zip(a.values(), b.values()))
        elif kind is list or kind is tuple:
            if len(a) != len(b):
                return False
            extend(zip(a, b))
        elif kind is torch.Tensor:
            if not _same_tensor(a, b):
                return False
        elif kind is torch.dtype:
            if a != b:
                return False
        elif repr(a) != repr(b):  # a float (so -0.0 and NaN count, as the encoding writes them), or anything else
            return False
    return True


_BITS = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}
# dtypes whose values are equal exactly when their bits are (no NaN, no -0.0): torch.equal compares them as they are
_EXACT = frozenset({torch.bool, torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64})


def _same_tensor(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Bit for bit (NaN equals its own bits, -0.0 is not 0.0), in ~2,000 comparisons a class submission: the
    common case, two plain CPU tensors, asks torch as little as it can."""
    dtype = a.dtype
    if dtype is not b.dtype or a.shape != b.shape:
        return False
    if a.is_cpu and b.is_cpu and not (a.is_neg() or b.is_neg() or a.is_conj() or b.is_conj() or dtype.is_complex):
        if dtype in _EXACT:
            return torch.equal(a, b)
        bits = _BITS.get(a.element_size())
        if bits is not None:
            return torch.equal(a.detach().view(bits), b.detach().view(bits))
    from validator.worker.protocol import tensor_bytes  # anything else: as the wire would carry it

    return a.device == b.device and tensor_bytes(a) == tensor_bytes(b)


@dataclass
class Script:
    steps: list[Step] = field(default_factory=list)
    starts: dict[str, int] = field(default_factory=dict)  # check id -> its first step


def enabled() -> bool:
    return ENABLED[0] and not os.environ.get("VALIDATOR_NO_REHEARSAL")


def script_key(ctx: Any) -> tuple:
    from validator.spec.schema import graded_digest

    return (ctx.challenge.id, graded_digest(ctx.challenge), ctx.seed, ctx.profile, ctx.device,
            ctx.package is not None, str(torch.get_default_dtype()))


class Rehearsal:
    """The rehearsal of one challenge's run for one submission (see the module's docstring)."""

    def __init__(self, ctx: Any, script: Script | None):
        self.ctx = ctx
        self.script = script
        self.pos = 0  # the script's step the next request is compared with
        self.ahead: dict[int, dict] = {}  # script position -> a reply run ahead, not yet asked for
        self.off = script is None or ctx.worker.no_rehearsals
        self.recorded: list[Step] = []
        self.starts: dict[str, int] = {}
        self.batches = self.answered = 0

    @classmethod
    def begin(cls, ctx: Any) -> "Rehearsal | None":
        """A rehearsal for ``ctx``'s challenge, or None where rehearsals are off or the worker cannot batch."""
        from validator.worker.client import Worker

        if not enabled() or not isinstance(ctx.worker, Worker):
            return None
        return cls(ctx, _SCRIPTS.get(script_key(ctx)))

    def end(self, passed: bool) -> None:
        """After the challenge: a run that passed it becomes the script the next submission is rehearsed with."""
        if passed and self.recorded:
            if len(_SCRIPTS) >= _SCRIPT_LIMIT:
                _SCRIPTS.pop(next(iter(_SCRIPTS)))
            _SCRIPTS[script_key(self.ctx)] = Script(self.recorded, self.starts)

    def at_check(self, check_id: str) -> None:
        """A check starts. Checks draw their calls from their own seeds, so where an earlier check made other
        calls than the script's, this one starts again at its own place in the script."""
        self.starts.setdefault(check_id, len(self.recorded))
        start = self.script.starts.get(check_id) if self.script is not None else None
        if start is None or self.ctx.worker.no_rehearsals or (self.pos == start and not self.off):
            return
        self.ahead.clear()  # what ran ahead for calls the last check did not make stays run, unanswered
        self.pos, self.off = start, False

    # -- requests ------------------------------------------------------------------------------
    def other(self, send: Callable[[], Any]) -> Any:
        """A request that is not a plain call (traced, timed): never run ahead."""
        expected = self._next()
        if expected is None or expected.call is not None:
            self._diverged()
        self.recorded.append(Step())
        return send()

    def call(self, call: dict, timeout: float, send: Callable[[], Any]) -> Any:
        """The reply to the plain call ``call``: run ahead already, run ahead now with the script's next
        calls, or ``send()`` (one round trip) where the script has something else here."""
        replies = self._answer([call], timeout)
        if replies is not None:
            return replies[0]
        started = time.monotonic()
        reply = send()
        self.recorded.append(Step(call, timeout, time.monotonic() - started))
        return reply

    def many(self, calls: list[dict], timeout: float, send: Callable[[], Any]) -> Any:
        """The reply to ``calls`` made in one request (``Context.student_many``): as :meth:`call`, for all of
        them at once (a batch never splits them), or ``send()``."""
        replies = self._answer(calls, timeout)
        if replies is not None:
            return {"ok": True, "results": replies}
        started = time.monotonic()
        reply = send()
        seconds = (time.monotonic() - started) / max(1, len(calls))
        self.recorded.extend(Step(c, timeout, seconds, len(calls) if i == 0 else 0) for i, c in enumerate(calls))
        return reply

    def _answer(self, calls: list[dict], timeout: float) -> list[dict] | None:
        """The replies to ``calls`` (one request's) from the rehearsal, recorded, or None (the caller sends them)."""
        at = self.pos
        expected = [self._next() for _ in calls]
        same = all(step is not None and step.call is not None and step.group == (len(calls) if i == 0 else 0)
                   and same_request(call, step.call) for i, (call, step) in enumerate(zip(calls, expected)))
        if same:  # and the script's request had no more calls than these
            after = at + len(calls)
            same = after >= len(self.script.steps) or self.script.steps[after].group != 0
        replies = None
        held = sum(at + i in self.ahead for i in range(len(calls)))
        if not same or 0 < held < len(calls):  # (a batch never holds part of a request: not by construction)
            self._diverged()
        elif held:
            replies = [self.ahead.pop(at + i) for i in range(len(calls))]
        elif not self.ahead and not self.off:
            replies = self._run_ahead(at, [Step(c, timeout, step.seconds, step.group)
                                           for c, step in zip(calls, expected)])
        if replies is None:
            return None
        self.answered += len(calls)
        self.recorded.extend(Step(c, timeout, step.seconds, step.group) for c, step in zip(calls, expected))
        return replies

    # -- internals --------------------------------------------------------------------------------
    def _next(self) -> Step | None:
        steps = self.script.steps if self.script is not None else []
        step = steps[self.pos] if self.pos < len(steps) else None
        self.pos += 1
        return step

    def _diverged(self) -> None:
        """The checks asked for something the script does not have here: no more running ahead."""
        self.ahead.clear()
        self.off = True

    def _run_ahead(self, at: int, first: list[Step]) -> list[dict] | None:
        """Send the calls ``first`` (one request's) with the script's plain calls after them in one request (whole
        requests only); keep their replies; return ``first``'s. None where there is nothing to run ahead, the
        worker is not up (the call one at a time starts it as it always does), or the batch failed (the caller
        sends the calls)."""
        from validator.worker.client import WorkerFailure, _entries_called

        ctx, worker = self.ctx, self.ctx.worker
        if worker.proc is None or worker.req_fd is None or worker.reader is None or worker.load_reply is None:
            return None
        steps = list(first)
        following = self.script.steps[at + len(first):]
        n = 0
        while n < len(following) and following[n].call is not None and following[n].group >= 1:
            size = following[n].group
            whole = following[n:n + size]
            if len(whole) < size or any(step.call is None or step.group != 0 for step in whole[1:]) \
                    or len(steps) + size > MAX_CALLS:
                break
            steps.extend(whole)
            n += size
        messages = []
        for step in steps:
            try:
                messages.append(ctx.for_student(step.call))
            except Exception:  # noqa: BLE001 - a call the grader cannot send (its check says why): stop before it
                break
        if len(messages) < len(steps):  # stopped before a call: none of its request's calls goes
            while len(messages) > len(first) and steps[len(messages)].group == 0:
                messages.pop()
        if len(messages) <= len(first):
            return None
        steps = steps[:len(messages)]
        request = {"op": "execute_many", "calls": messages}
        if any(entry in worker.timed_out for entry in _entries_called(request)):
            return None  # an entry that hung once gets its short re-probe, one call at a time
        deadline = min(min(step.timeout for step in steps),
                       max(MIN_DEADLINE_S, 20 * sum(step.seconds for step in steps)))
        try:
            reply = worker._roundtrip(request, deadline, "running your code")
        except WorkerFailure as exc:
            if exc.reason == "forged":
                raise
            self._give_up(worker)
            return None
        results = reply.get("results") if isinstance(reply, dict) and reply.get("ok") else None
        if not isinstance(results, list) or len(results) != len(steps) or not all(isinstance(r, dict) for r in results):
            self._give_up(worker)  # e.g. one output that cannot be encoded: one call at a time says which
            return None
        self.batches += 1
        self.ahead = {at + i: r for i, r in enumerate(results[len(first):], start=len(first))}
        return results[:len(first)]

    def _give_up(self, worker: Any) -> None:
        """A batch failed: a fresh worker, and this submission graded one call at a time from here."""
        worker.kill()
        worker.no_rehearsals = True
        self._diverged()
