"""Rehearsed calls (validator.rehearsal) change no verdict and no message, only how many round trips a run takes.

A slot that graded a challenge sends the next submission's calls ahead in batches, where they are the calls the
last passing run made. Every variant of the mutant library, correct and broken, must get exactly the report it
gets one call at a time; a batch that fails (a hang, a crash, replies that do not fit) must leave the report as
it would have been, the failure found again on the call that has it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from helpers import IMPLEMENTATIONS, ROOT, catalogue, variants, verdicts
from validator import rehearsal
from validator.api import grade
from validator.package import load_package
from validator.reference_side import OFFICIAL_SEED
from validator.worker.client import Worker, WorkerFailure

CHALLENGES = ["softmax", "linear", "rope"]


def _report(path, challenges, *, rehearse: bool, package=None):
    """Status, score and message of each check (a timed check's message carries its times: left out), and how
    many requests reached the worker and how many calls a rehearsal answered. With ``package`` (a repository
    root), the repository graded in place, through its adapters or its mapping."""
    counted = {"requests": 0, "answered": 0, "batches": 0, "failed_batches": [], "scripts": 0, "rehearsals": 0}
    original_roundtrip, original_end = Worker._roundtrip, rehearsal.Rehearsal.end

    def roundtrip(self, message, timeout, *args, **kwargs):
        import time

        counted["requests"] += 1
        started = time.monotonic()
        try:
            return original_roundtrip(self, message, timeout, *args, **kwargs)
        except WorkerFailure as exc:  # a failed batch, named in an assertion's message (why nothing was rehearsed)
            if message.get("op") == "execute_many":
                counted["failed_batches"].append(f"{exc.reason} after {time.monotonic() - started:.2f} s of "
                                                 f"{timeout:.2f}")
            raise

    def end(self, passed):
        counted["answered"] += self.answered
        counted["batches"] += self.batches
        counted["rehearsals"] += 1
        counted["scripts"] += bool(passed and self.recorded)
        return original_end(self, passed)

    rehearsal.ENABLED[0] = rehearse
    Worker._roundtrip, rehearsal.Rehearsal.end = roundtrip, end
    try:
        if package is not None:
            report = grade(path, package=load_package(path, catalogue()), challenges=challenges, seed=OFFICIAL_SEED,
                           profile="batch", answers={}, catalogue=catalogue())
        else:
            with Worker(path) as worker:
                report = grade(path, challenges=challenges, seed=OFFICIAL_SEED, profile="batch", answers={},
                               worker=worker, catalogue=catalogue())
    finally:
        rehearsal.ENABLED[0] = False
        Worker._roundtrip, rehearsal.Rehearsal.end = original_roundtrip, original_end
    return verdicts(report), counted


@pytest.fixture(scope="module")
def scripts():
    """Every challenge's script, from the reference's passing run (this process's scripts only)."""
    rehearsal._SCRIPTS.clear()
    _report(ROOT / "reference" / "layers.py", None, rehearse=True)
    assert len(rehearsal._SCRIPTS) == len(catalogue()), "some challenge left no script"
    yield
    rehearsal._SCRIPTS.clear()


def test_a_correct_layer_rehearsed_gets_the_same_report_in_fewer_round_trips(scripts):
    path = ROOT / "reference" / "layers.py"
    alone, one_by_one = _report(path, CHALLENGES, rehearse=False)
    rehearsed, counted = _report(path, CHALLENGES, rehearse=True)
    assert rehearsed == alone
    assert counted["batches"] and counted["answered"] > counted["batches"]
    assert counted["requests"] < one_by_one["requests"] - counted["answered"] // 2


@pytest.mark.parametrize("challenge,name", [("softmax", "no_max_subtraction.py"), ("linear", "x_matmul_w.py"),
                                            ("rope", "pairs_by_view.py")])
def test_a_broken_layer_rehearsed_gets_the_same_report(scripts, challenge, name):
    path = IMPLEMENTATIONS / challenge / "broken" / name
    assert _report(path, [challenge], rehearse=True)[0] == _report(path, [challenge], rehearse=False)[0]


@pytest.mark.thorough
@pytest.mark.parametrize("kind", ["correct", "broken"])
def test_every_library_variant_gets_the_same_report_rehearsed(scripts, kind):
    """The whole mutant library, as `validator grade` grades it (batch profile, its seed)."""
    wrong, rehearsed_calls = [], 0
    for challenge, path in variants(kind):
        got, counted = _report(path, [challenge], rehearse=True)
        expected = _report(path, [challenge], rehearse=False)[0]
        rehearsed_calls += counted["answered"]
        if got != expected:
            wrong.append(f"{challenge}/{path.name}: " + "; ".join(
                f"{k[1]}: {got.get(k)} != {expected.get(k)}" for k in expected if got.get(k) != expected[k]))
    assert not wrong, "\n".join(wrong)
    assert rehearsed_calls > 1000


REPOSITORIES = ROOT / "tests" / "packages"
THROUGH_REPOSITORIES = ["linear", "rms_norm", "rope", "multihead_self_attention"]


def _repository_runs(root: Path, broken: Path | None) -> dict:
    """In this process: a passing run of the repository at ``root`` (the script), a rehearsed run and a run call by
    call; with ``broken`` (a copy with a bug), that copy rehearsed after them and call by call. Verdicts keyed
    ``challenge/check``, as JSON carries them."""
    rehearsal._SCRIPTS.clear()
    rehearsal.MIN_DEADLINE_S = 60.0  # a busy machine must not decide whether a batch ran (deadlines: tested above)

    def plain(verdicts):
        return {f"{challenge}/{check}": list(v) for (challenge, check), v in verdicts.items()}

    recording = _report(root, THROUGH_REPOSITORIES, rehearse=True, package=root)[1]
    rehearsed, counted = _report(root, THROUGH_REPOSITORIES, rehearse=True, package=root)
    out = {"recording": recording, "counted": counted, "rehearsed": plain(rehearsed),
           "scripts": len(rehearsal._SCRIPTS),
           "alone": plain(_report(root, THROUGH_REPOSITORIES, rehearse=False, package=root)[0])}
    if broken is not None:
        out["broken_rehearsed"] = plain(_report(broken, THROUGH_REPOSITORIES, rehearse=True, package=broken)[0])
        out["broken_alone"] = plain(_report(broken, THROUGH_REPOSITORIES, rehearse=False, package=broken)[0])
    return out


@pytest.mark.thorough
@pytest.mark.parametrize("repo", ["cs336_adapters/plain", "cs336_adapters/fused", "cs336_adapters/heads",
                                  "cs336_style", "cs336_imports"])
def test_a_repository_graded_in_place_gets_the_same_report_rehearsed(repo, tmp_path):
    """A CS336 repository (its adapters, fused QKV, its own names, a mapping): the calls a check sends are mapped to
    the repository's parameter names per submission, after the script is matched. Rehearsed after a passing run
    of the same repository, and with a bug in one layer after that, each gets the report it gets call by call.

    Graded in a fresh process, as a batch slot grades: inside a test session's process, a ``tests`` namespace
    package another test had imported hid the repositories' own ``tests.adapters`` from the forked worker (every
    check "not run", so no batch; fixed in validator.worker.imports, tested in test_adapters.py), and this test is
    about the rehearsal, not about what a long test session leaves in its process."""
    import json
    import shutil
    import subprocess
    import sys

    root = REPOSITORIES / repo
    broken = None
    if repo == "cs336_adapters/plain":
        broken = tmp_path / "repo"
        shutil.copytree(root, broken)
        layers = broken / "cs336_basics" / "layers.py"
        layers.write_text(layers.read_text().replace("return x @ self.W.T", "return x @ self.W", 1))
    run = subprocess.run([sys.executable, __file__, str(root), str(broken or "")], capture_output=True, text=True,
                         timeout=600, cwd=ROOT)
    assert run.returncode == 0, run.stderr[-4000:]
    got = json.loads(run.stdout.strip().splitlines()[-1])
    not_passed = {k: v for k, v in got["rehearsed"].items() if v[0] not in ("passed", "skipped")
                  and "/question_" not in k}
    # what was recorded and rehearsed, and why not where nothing was
    assert got["counted"]["batches"], {k: got[k] for k in ("recording", "counted", "scripts")} | {"not passed": not_passed}
    assert got["rehearsed"] == got["alone"]
    if broken is not None:
        assert got["broken_rehearsed"] == got["broken_alone"]
        assert any(status != "passed" for status, _, _ in got["broken_rehearsed"].values())


@pytest.mark.parametrize("failure", ["timeout", "crash", "short"])
def test_a_failed_batch_changes_nothing_and_the_submission_goes_on_call_by_call(scripts, failure):
    """Whatever ends a batch (a hang, a crash, a reply that does not answer every call), the worker is replaced,
    the calls are made one at a time and the report is the report; the rest of the submission is not rehearsed."""
    path = ROOT / "reference" / "layers.py"
    expected = _report(path, CHALLENGES, rehearse=False)[0]
    original = Worker._roundtrip
    failed = []

    def roundtrip(self, message, timeout, doing):
        if message.get("op") == "execute_many" and not failed:
            failed.append(timeout)
            if failure == "short":
                reply = original(self, message, timeout, doing)
                reply["results"] = reply["results"][:-1]
                return reply
            self.kill()
            raise WorkerFailure(failure, "injected")
        return original(self, message, timeout, doing)

    Worker._roundtrip = roundtrip
    try:
        got, counted = _report(path, CHALLENGES, rehearse=True)
    finally:
        Worker._roundtrip = original
    assert failed and got == expected
    assert counted["batches"] == 0  # after the failed one, no batch for the rest of the submission


def test_a_batch_deadline_is_never_longer_than_its_calls_own_time_outs():
    """A call slower than its own time-out must not pass because it ran in a batch: the batch's deadline is at
    most the smallest time-out of its calls, and a short one (twenty times the script's time) bounds a hang."""
    sent = []

    class FakeWorker:
        proc = req_fd = reader = load_reply = object()
        timed_out: dict = {}
        no_rehearsals = False

        def _roundtrip(self, message, timeout, doing):
            sent.append((len(message["calls"]), timeout))
            return {"ok": True, "results": [{"ok": True, "n": i} for i in range(len(message["calls"]))]}

    class FakeContext:
        worker = FakeWorker()

        @staticmethod
        def for_student(call):
            return call

    def step(n, timeout, seconds):
        return rehearsal.Step({"entry": "f", "n": n}, timeout, seconds)

    script = rehearsal.Script([step(0, 30.0, 0.5), step(1, 1.5, 0.0), step(2, 30.0, 0.01), rehearsal.Step(),
                               step(4, 30.0, 0.01), step(5, 30.0, 0.01)])
    run = rehearsal.Rehearsal(FakeContext(), script)
    assert run._run_ahead(0, [script.steps[0]]) == [{"ok": True, "n": 0}]
    assert sent == [(3, 1.5)] and sorted(run.ahead) == [1, 2]  # stops at the step that is not a plain call
    run = rehearsal.Rehearsal(FakeContext(), script)
    run._run_ahead(4, [script.steps[4]])
    assert sent[-1] == (2, rehearsal.MIN_DEADLINE_S)
    assert rehearsal.Rehearsal(FakeContext(), script)._run_ahead(2, [script.steps[2]]) is None  # nothing ahead


class _Worker:
    """A worker that answers every call with its own ``n`` and notes each request's calls."""

    proc = req_fd = reader = load_reply = object()
    timed_out: dict = {}
    no_rehearsals = False

    def __init__(self):
        self.sent = []

    def _roundtrip(self, message, timeout, doing):
        self.sent.append([c["n"] for c in message["calls"]])
        return {"ok": True, "results": [{"ok": True, "n": c["n"]} for c in message["calls"]]}


class _Context:
    def __init__(self):
        self.worker = _Worker()

    @staticmethod
    def for_student(call):
        return call


def _call(n):
    return {"entry": "f", "n": n}


def _send(calls):
    """What sending ``calls`` on their own would answer, noted as a request of its own."""
    def send():
        _send.sent.append([c["n"] for c in calls])
        results = [{"ok": True, "n": c["n"]} for c in calls]
        return results[0] if len(calls) == 1 and not _send.many else {"ok": True, "results": results}
    return send


def test_calls_made_in_one_request_are_rehearsed_whole_and_never_split():
    """A check's ``student_many`` is rehearsed as one request: a batch takes all of its calls or none (here the
    batch's limit falls inside it), its replies come back together, and a plain call that matches one of its
    calls is not answered from the rehearsal."""
    steps = [rehearsal.Step(_call(0), 30.0, 0.01)]
    steps += [rehearsal.Step(_call(1), 30.0, 0.01, 2), rehearsal.Step(_call(2), 30.0, 0.01, 0)]
    steps += [rehearsal.Step(_call(3), 30.0, 0.01, 3), rehearsal.Step(_call(4), 30.0, 0.01, 0),
              rehearsal.Step(_call(5), 30.0, 0.01, 0)]
    script = rehearsal.Script(steps, {"a": 0})
    ctx = _Context()
    run = rehearsal.Rehearsal(ctx, script)
    limit = rehearsal.MAX_CALLS
    rehearsal.MAX_CALLS = 4
    try:
        _send.sent, _send.many = [], False
        assert run.call(_call(0), 30.0, _send([_call(0)])) == {"ok": True, "n": 0}
        assert ctx.worker.sent == [[0, 1, 2]] and _send.sent == []  # the group of three would pass the limit
        _send.many = True
        assert run.many([_call(1), _call(2)], 30.0, _send([_call(1), _call(2)])) == \
            {"ok": True, "results": [{"ok": True, "n": 1}, {"ok": True, "n": 2}]}
        assert run.many([_call(3), _call(4), _call(5)], 30.0, _send([_call(3), _call(4), _call(5)]))["results"][2] \
            == {"ok": True, "n": 5}
        assert ctx.worker.sent == [[0, 1, 2]] and _send.sent == [[3, 4, 5]]  # alone: its own request, as it was
        assert [(s.call, s.group) for s in run.recorded] == [(s.call, s.group) for s in steps]
        again = rehearsal.Rehearsal(_Context(), script)
        _send.sent, _send.many = [], False
        again.call(_call(0), 30.0, _send([_call(0)]))
        assert again.call(_call(1), 30.0, _send([_call(1)])) == {"ok": True, "n": 1}
        assert _send.sent == [[1]] and again.off, "one call of a request of two: sent on its own, and no more ahead"
    finally:
        rehearsal.MAX_CALLS = limit


def test_after_a_check_makes_other_calls_the_next_check_is_rehearsed_from_its_own_place():
    """A check that makes calls the script does not have goes on one call at a time; the next check, whose calls
    come from its own seed, is rehearsed again from where the script has it."""
    steps = [rehearsal.Step(_call(n), 30.0, 0.01) for n in range(6)]
    script = rehearsal.Script(steps, {"a": 0, "b": 3})
    ctx = _Context()
    run = rehearsal.Rehearsal(ctx, script)
    _send.sent, _send.many = [], False
    run.at_check("a")
    run.call(_call(0), 30.0, _send([_call(0)]))
    assert ctx.worker.sent == [[0, 1, 2, 3, 4, 5]]
    assert run.call(_call(9), 30.0, _send([_call(9)])) == {"ok": True, "n": 9} and run.off  # another call
    assert _send.sent == [[9]]
    run.at_check("b")
    assert not run.off and run.call(_call(3), 30.0, _send([_call(3)])) == {"ok": True, "n": 3}
    assert ctx.worker.sent == [[0, 1, 2, 3, 4, 5], [3, 4, 5]], "check b's calls run (again) as a batch of their own"
    assert run.call(_call(4), 30.0, _send([_call(4)])) == {"ok": True, "n": 4} and _send.sent == [[9]]
    assert run.starts == {"a": 0, "b": 2}


def test_two_calls_are_the_same_request_exactly_when_the_worker_would_be_sent_the_same_bytes(scripts):
    """same_request stands in for comparing encoded requests: over every call of the catalogue's scripts it agrees
    with the protocol's encoding, and it tells apart what the encoding tells apart (-0.0, NaN bits, dtypes)."""
    import copy

    import torch

    from validator.rehearsal import same_request
    from validator.worker.protocol import pack

    calls = [step.call for script in rehearsal._SCRIPTS.values() for step in script.steps if step.call is not None]
    assert len(calls) > 300
    for a, b in zip(calls, calls[1:] + calls[:1]):
        assert same_request(a, copy.deepcopy(a))
        assert same_request(a, b) == (pack(a) == pack(b))
    nan = torch.tensor([1.0, float("nan")])
    assert same_request({"x": nan}, {"x": nan.clone()}) and not same_request(0.0, -0.0)
    assert same_request(float("nan"), float("nan")) and not same_request(True, 1) and not same_request((1,), [1])
    assert not same_request({"a": 1, "b": 2}, {"b": 2, "a": 1})
    assert not same_request(torch.zeros(2), torch.zeros(2, dtype=torch.float64))
    assert not same_request(torch.tensor([0.0]), torch.tensor([-0.0]))
    assert not same_request(torch.zeros(2, 3), torch.zeros(3, 2))
    assert same_request(torch.tensor([True, False]), torch.tensor([True, False]))
    assert same_request(torch.ones(2, dtype=torch.bfloat16), torch.ones(2, dtype=torch.bfloat16))
    z = torch.tensor([1 + 2j])
    assert same_request(z.conj(), z.conj().resolve_conj()) == (pack(z.conj()) == pack(z.conj().resolve_conj()))
    assert same_request(torch.float32, torch.float32) and not same_request(torch.float32, torch.float64)
    # each of _same_tensor's ways agrees with the encoding: integers as they are, floats by their bits, a negated
    # view by the values it shows, a strided view by its own elements, an object with itself
    x = torch.tensor([0.5, -1.0, float("nan")])
    others = [torch.tensor([3, -4]), torch.tensor([3, 4]), torch.tensor([3, -4], dtype=torch.int32), x, x.clone(),
              torch._neg_view(-x), torch._neg_view(x), torch.arange(6.0).reshape(2, 3).t(),
              torch.arange(6.0).reshape(3, 2), torch.zeros(3, dtype=torch.float8_e4m3fn)]
    for a in others:
        assert same_request(a, a)
        for b in others:
            assert same_request(a, b) == (pack(a) == pack(b)), (a, b)


if __name__ == "__main__":  # a repository's runs in a fresh process (the repository test above)
    import json
    import sys

    _root, _broken = sys.argv[1], sys.argv[2]
    print(json.dumps(_repository_runs(Path(_root), Path(_broken) if _broken else None)))
