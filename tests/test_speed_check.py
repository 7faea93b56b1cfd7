"""The speed check's verdict comes from the layer's own time, not the machine's load.

The runner's timings are scripted here (no wall clock is asserted on): what the check does with them
is the subject. Load outside the timed passes (a slow worker round trip) does not count; a busy spell
that slows only the student's runs is measured again; a layer that is slow in every run fails; the
reference is only ever timed with the submission's processes stopped (every ``Script.reference_call``
asserts it).
"""

from __future__ import annotations

import contextlib
import itertools
import time
from types import SimpleNamespace

import pytest
import torch

from validator.checks import performance
from validator.checks.performance import Size, TimeParams, time_ratio
from validator.context import CheckFailed

OUT = torch.arange(6.0)
CHECK = SimpleNamespace(id="speed", timeout=30.0)


class PausableWorker:
    """Records whether the grader holds the submission's processes stopped (``Worker.paused``)."""

    def __init__(self):
        self.is_paused = False

    @contextlib.contextmanager
    def paused(self):
        self.is_paused = True
        try:
            yield True
        finally:
            self.is_paused = False


class Script:
    """The runner's ``seconds`` for the student's and the reference's timed calls, in the order they run."""

    def __init__(self, student, reference, student_delay: float = 0.0):
        self.student, self.reference = iter(student), iter(reference)
        self.student_delay = student_delay
        self.student_calls = self.reference_calls = 0
        self.calls = []
        self.last_reference = None
        self.worker = PausableWorker()

    def measured(self, ctx, check, call, doing="", reference=None):
        time.sleep(self.student_delay)  # a slow round trip to the worker: not the layer's time
        assert self.calls, "a timed run before the warm-up"
        self.student_calls += 1
        self.calls.append(call)
        # a timed try is compared with the reference's timed run on the same inputs, made just before it
        assert reference is not None and reference is self.last_reference, call
        return {"ok": True, "output": OUT, "seconds": next(self.student)}

    def warm_up(self, call, timeout, doing=""):
        """``ctx.student`` here: the warm-up: the first run, one pass, neither compared nor timed against the reference."""
        assert not self.calls and call.get("repeat") == 1 and "warming up" in doing, call
        assert "input_grads" in call["want"], call  # it runs backward too, as the timed runs do
        self.student_calls += 1
        self.calls.append(call)
        return {"ok": True, "output": OUT, "seconds": 0.001}

    def reference_call(self, call):
        assert self.worker.is_paused, "the reference was timed while the submission's processes could run"
        self.reference_calls += 1
        self.last_reference = {"ok": True, "output": OUT, "seconds": next(self.reference)}
        return self.last_reference


@pytest.fixture
def speed(monkeypatch):
    def run(script: Script, fastest: dict | None = None, **params):
        runs = []

        def fake_call(ctx, check, size, run, drawn=None, **extra):
            runs.append(run)
            return {"inputs": [{"value": torch.full((4,), float(len(runs)))}], "_dims": {}, "seed": len(runs),
                    "want": ["output"], "grad_output": torch.ones(4), **extra}

        monkeypatch.setattr(performance, "_call", fake_call)
        monkeypatch.setattr(performance, "more_inputs", lambda ctx, call, passes, seed: [
            [{"value": torch.full((4,), seed + n / 10)}] for n in range(1, passes)])
        monkeypatch.setattr(performance, "measured", script.measured)
        ctx = SimpleNamespace(challenge=SimpleNamespace(id="c", tolerance="exact"), reference_call=script.reference_call,
                              student=script.warm_up,
                              check_seed=lambda check_id: 7, worker=script.worker,
                              ref=SimpleNamespace(fastest=fastest))
        return time_ratio(ctx, CHECK, TimeParams(case=Size(), **params))
    return run


def test_time_outside_the_passes_does_not_count(speed):
    """A worker whose every round trip takes 40 ms (a busy machine) but whose passes take 1 ms passes."""
    said = speed(Script(itertools.repeat(0.001), itertools.repeat(0.0005), student_delay=0.04), tries=2, rounds=1)
    assert "(2.0x;" in said


def test_a_busy_spell_on_the_students_runs_is_measured_again(speed):
    busy_then_quiet = itertools.chain([0.05] * 5, itertools.repeat(0.002))
    said = speed(Script(busy_then_quiet, itertools.repeat(0.0005)))
    assert "4.0x" in said and "2 rounds" in said and "fastest of 7" in said  # round 2 is clear after two tries


def test_a_layer_slow_in_every_run_fails_after_every_round(speed):
    script = Script(itertools.repeat(0.05), itertools.repeat(0.001))
    with pytest.raises(CheckFailed, match=r"50\.0x; the fastest of 15 interleaved runs each, 3 rounds.*allowed 25x"):
        speed(script)
    assert script.student_calls == 1 + 15 and script.reference_calls == 15


def test_a_ratio_far_past_the_limit_fails_after_one_round(speed):
    """200x against a limit of 25x in the minima of five interleaved runs each: no load does that."""
    script = Script(itertools.repeat(0.2), itertools.repeat(0.001))
    with pytest.raises(CheckFailed, match=r"200\.0x; the fastest of 5 interleaved runs each, 1 round\).*allowed 25x"):
        speed(script)
    assert script.student_calls == 1 + 5 and script.reference_calls == 5


def test_far_too_slow_to_be_load_stops_within_its_budget(speed):
    script = Script(itertools.repeat(5.0), itertools.repeat(0.001))
    with pytest.raises(CheckFailed, match="5000.00 ms vs reference 1.00 ms"):
        speed(script, budget_seconds=8.0)
    assert script.student_calls == 1 + 2


def test_a_layer_well_within_the_limit_is_timed_twice(speed):
    """3x against 25x after two interleaved runs each: for more runs to fail it, both of the reference's
    would have to have been slowed 4x (the decisive factor) by load, and none of the student's."""
    script = Script(itertools.repeat(0.003), itertools.repeat(0.001))
    said = speed(script)
    assert "(3.0x; the fastest of 2 interleaved runs each, 1 round)" in said
    assert script.student_calls == 1 + 2 and script.reference_calls == 2
    script = Script(itertools.repeat(0.007), itertools.repeat(0.001))  # 7x: past 25 / 4, all five tries
    assert "the fastest of 5 interleaved runs each" in speed(script)


def test_below_the_floor_a_ratio_proves_nothing(speed):
    assert "100.0x" in speed(Script(itertools.repeat(0.01), itertools.repeat(0.0001)), floor_seconds=0.02)


def test_every_timed_run_and_pass_has_inputs_of_its_own(speed):
    """A cache of the warm-up, of an earlier try or of an earlier pass never hits: every input is drawn anew."""
    script = Script(itertools.repeat(0.01), itertools.repeat(0.001))  # 10x: not so clear that two tries do
    speed(script, tries=3, rounds=1, repeat=3)
    firsts = [tuple(c["inputs"][0]["value"].tolist()) for c in script.calls]
    passes = [tuple(m[0]["value"].tolist()) for c in script.calls for m in c["more_inputs"]]
    assert len(script.calls) == 1 + 3 and len(passes) == 3 * 2
    assert len(set(firsts + passes)) == len(firsts) + len(passes)


def test_a_slot_remembers_the_references_fastest_run_and_a_clear_pass_needs_one_pair(speed):
    """In a batch slot the reference's fastest time of a measurement is remembered: the next layer passes on
    one interleaved pair within max_ratio / decisive of the fastest reference run so far."""
    fastest: dict = {}
    speed(Script(itertools.repeat(0.003), [0.002, 0.001]), fastest)
    assert list(fastest.values()) == [0.001]
    script = Script(itertools.repeat(0.004), [0.0015])
    said = speed(script, fastest)
    assert "(4.0x; one interleaved run, against the reference's fastest run" in said
    assert script.student_calls == 1 + 1 and script.reference_calls == 1
    assert list(fastest.values()) == [0.001]


def test_a_remembered_time_never_decides_a_failure(speed):
    """Past max_ratio / decisive of the fastest reference run, the interleaved runs decide, the first pair
    counting as their first: a layer slowed by load on its first run alone passes, a slow one fails as before."""
    fastest = {("c", "speed", repr(({}, {})), 3): 0.001}
    script = Script(itertools.chain([0.03], itertools.repeat(0.002)), itertools.repeat(0.001))
    assert "(2.0x; the fastest of 2 interleaved runs each, 1 round)" in speed(script, fastest)
    assert script.student_calls == 1 + 2 and script.reference_calls == 2
    script = Script(itertools.repeat(0.2), itertools.repeat(0.001))
    with pytest.raises(CheckFailed, match="200.0x; the fastest of 5 interleaved runs each, 1 round"):
        speed(script, fastest)
    assert script.student_calls == 1 + 5 and script.reference_calls == 5


def test_a_time_remembered_under_load_is_replaced_by_the_next_quiet_run(speed):
    """A remembered reference time that load made 50x longer cannot pass a layer 30x slower than the
    reference: the pair's own reference run, unloaded, is the fastest now, and the layer fails as it would
    have without any memory."""
    fastest = {("c", "speed", repr(({}, {})), 3): 0.05}
    script = Script(itertools.repeat(0.03), itertools.repeat(0.001))
    with pytest.raises(CheckFailed, match=r"30\.0x; the fastest of \d+ interleaved runs each.*allowed 25x"):
        speed(script, fastest)
    assert list(fastest.values()) == [0.001]


def test_the_remembered_time_is_the_fastest_ever_seen(speed):
    fastest: dict = {}
    speed(Script(itertools.repeat(0.05), itertools.repeat(0.002)), fastest, rounds=1)  # fails: 25x
    (key,) = fastest
    assert fastest[key] == 0.002
    speed(Script([0.1, 0.009, 0.009], [0.003, 0.003]), fastest)  # 0.1 / 0.002 is no clear pass: timed again
    assert fastest[key] == 0.002
