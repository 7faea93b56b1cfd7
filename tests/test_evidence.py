"""Evidence only from graded runs (validator.checks.evidence): a measured run's values are the layer's.

The worker and the reference are scripted here: what `measured` does with their answers is the subject.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from validator import paths
from validator.checks import evidence
from validator.checks.constraint import ReviewFailure
from validator.context import Context

RIGHT = torch.arange(6.0).reshape(2, 3)
CHECK = SimpleNamespace(id="vectorised", timeout=10.0)


class Layer:
    """The student's answers: ``measured_output`` where the call traces ops, ``plain_output`` elsewhere."""

    def __init__(self, measured_output, plain_output):
        self.measured_output, self.plain_output = measured_output, plain_output
        self.calls = []

    def student(self, call, timeout, doing="", evidence=False):
        self.calls.append((call, evidence))
        traced = call.get("trace_ops")
        return {"ok": True, "output": self.measured_output if traced else self.plain_output, "ops": {"aten.index": 1}}


@pytest.fixture
def ctx(monkeypatch):
    monkeypatch.setattr(evidence, "redraw", lambda ctx, call, seed: dict(call, seed=seed))

    def make(layer):
        return SimpleNamespace(challenge=SimpleNamespace(tolerance="exact"), check_seed=lambda check_id: 5,
                               student=layer.student, reference_call=lambda call: {"ok": True, "output": RIGHT},
                               weights_unreadable=lambda entry: False, backward_known_broken=lambda: False)
    return make


CALL = {"entry": "Embedding", "kind": "module", "inputs": [], "want": ["output"], "trace_ops": True, "seed": 3,
        "_dims": {"num_embeddings": 7}}


def test_a_right_measured_run_is_its_evidence(ctx):
    layer = Layer(RIGHT, RIGHT)
    got = evidence.measured(ctx(layer), CHECK, CALL, "counting ops")
    assert got["ops"] == {"aten.index": 1}
    assert [e for _, e in layer.calls] == [True]  # no unmeasured run was needed


def test_wrong_only_when_measured_fails_and_is_reviewed(ctx):
    layer = Layer(torch.zeros(2, 3), RIGHT)
    with pytest.raises(ReviewFailure, match=r"counting ops: the measured run's output: 5 of 6 elements differ.*"
                                            r"right values on fresh inputs of the same size \(num_embeddings=7\)") as exc:
        evidence.measured(ctx(layer), CHECK, CALL, "counting ops")
    assert exc.value.review
    unmeasured = [c for c, e in layer.calls if not e]
    assert unmeasured and all("trace_ops" not in c for c in unmeasured)


def test_a_layer_wrong_everywhere_is_judged_as_it_is(ctx):
    """One bug, one check: a wrong layer loses the value checks, not the evidence of how it computes."""
    wrong = RIGHT + 1
    got = evidence.measured(ctx(Layer(wrong, wrong)), CHECK, CALL, "counting ops")
    assert torch.equal(got["output"], wrong)


def test_rounding_is_not_a_different_layer(ctx):
    """A float32 result in another order (a relative 1e-6 off) is the layer's, even at an exact tolerance."""
    got = evidence.measured(ctx(Layer(RIGHT * (1 + 1e-6), RIGHT)), CHECK, CALL, "counting ops")
    assert got["ok"]


def test_each_run_draws_a_seed_of_its_own():
    ctx = SimpleNamespace(check_seed=lambda check_id: 5)
    seeds = {evidence.evidence_seed(ctx, CHECK, run) for run in ("small", ("larger", 0), ("larger", 1), "warm-up")}
    assert len(seeds) == 4 and 0 not in seeds


def test_a_call_that_measures_must_go_through_measured():
    """The engine refuses evidence from a run that nobody grades: a future check cannot forget it."""
    ctx = Context(challenge=None, ref=None, worker=None, student_file=None, seed=0, settings=None)
    for key, value in (("trace_ops", True), ("track_memory", True), ("repeat", 3)):
        with pytest.raises(RuntimeError, match="validator.checks.evidence.measured"):
            ctx.student({**CALL, "trace_ops": False, key: value}, 1.0)
        with pytest.raises(RuntimeError, match="validator.checks.evidence.measured"):
            ctx.student_many([{**CALL, "trace_ops": False, key: value}], 1.0)


def test_a_layer_known_wrong_is_judged_as_it_is(ctx):
    """A value check failed before: the wrong measured run is that bug (ids it triggers on may be rare)."""
    layer = Layer(torch.zeros(2, 3), RIGHT)
    context = ctx(layer)
    context.wrong_values = ["weight_gradient"]
    assert evidence.measured(context, CHECK, CALL, "counting ops")["ok"]
    assert [e for _, e in layer.calls] == [True]


def _traced_calls(monkeypatch) -> list:
    from validator.worker import client

    seen: list = []
    original = client.Worker.request

    def request(self, message, *args, **kwargs):
        calls = message.get("calls") or ([message["call"]] if message.get("call") else [])
        seen.extend(c for c in calls if c.get("trace_ops"))
        return original(self, message, *args, **kwargs)

    monkeypatch.setattr(client.Worker, "request", request)
    return seen


def test_a_composites_parts_check_judges_the_traced_runs_of_its_own_runtime_check(monkeypatch):
    """The parts check draws the cases the runtime check draws, so each traced run is made once and judged against
    both lists; graded alone it traces runs of its own; and a library part is still caught (built_from_nn_linear
    runs aten.linear, which only the parts' list bans)."""
    from validator.api import grade

    reference = paths.reference_dir() / "layers.py"
    checks = {"no_library_silu_runtime", "no_library_linear_runtime"}
    traced = _traced_calls(monkeypatch)
    report = grade(reference, challenges=["swiglu"], checks=sorted(checks), seed=11, profile="batch",
                   reference_mode="live")
    results = {c.id: c for c in report.challenges[0].checks if c.id in checks}
    assert all(r.status == "passed" for r in results.values()), results
    runs = int(results["no_library_silu_runtime"].message.split()[1])
    assert runs >= 1 and len(traced) == runs  # the parts check added no traced run
    assert results["no_library_linear_runtime"].message.startswith(f"traced {runs} forward/backward passes")

    traced.clear()
    alone = grade(reference, challenges=["swiglu"], checks=["no_library_linear_runtime"], seed=11,
                  profile="batch", reference_mode="live")
    (result,) = [c for c in alone.challenges[0].checks if c.id == "no_library_linear_runtime"]
    assert result.status == "passed" and len(traced) == runs  # the same cases, traced for it alone

    broken = paths.PROJECT_ROOT / "tests" / "implementations" / "swiglu" / "broken" / "built_from_nn_linear.py"
    report = grade(broken, challenges=["swiglu"], checks=sorted(checks), seed=11, profile="batch",
                   reference_mode="live")
    results = {c.id: c.status for c in report.challenges[0].checks if c.id in checks}
    assert results == {"no_library_silu_runtime": "passed", "no_library_linear_runtime": "failed"}, results


def test_a_runtime_check_with_runs_of_judges_the_op_scaling_checks_runs_and_traces_none_of_its_own(monkeypatch):
    """`runs_of`: the runtime bans are judged on the op-count check's traced runs, each made once for both checks
    (the composite's parts check too); graded alone, it makes exactly those runs; and a banned op in them fails it
    with the size it ran at, while the op count (a library lookup does not loop) still passes."""
    from validator.api import grade

    reference = paths.reference_dir() / "layers.py"
    checks = ["no_library_runtime", "no_library_parts_runtime", "vectorised"]
    traced = _traced_calls(monkeypatch)
    report = grade(reference, challenges=["transformer_block"], checks=checks, seed=11, profile="batch",
                   reference_mode="live")
    results = {c.id: c for c in report.challenges[0].checks if c.id in checks}
    assert all(r.status == "passed" for r in results.values()), results
    assert results["no_library_runtime"].message.startswith("traced 2 forward/backward passes")
    assert results["no_library_parts_runtime"].message.startswith("traced 2 forward/backward passes")
    assert len(traced) == 2  # the op-count check's small and large runs, nothing else

    traced.clear()
    alone = grade(reference, challenges=["transformer_block"], checks=["no_library_runtime"], seed=11,
                  profile="batch", reference_mode="live")
    assert [c.status for c in alone.challenges[0].checks if c.id == "no_library_runtime"] == ["passed"]
    assert len(traced) == 2

    broken = paths.PROJECT_ROOT / "tests" / "implementations" / "token_embedding" / "broken" / "uses_functional_embedding.py"
    report = grade(broken, challenges=["token_embedding"], checks=["no_library_embedding_runtime", "vectorised"],
                   seed=11, profile="batch", reference_mode="live")
    results = {c.id: c for c in report.challenges[0].checks}
    assert results["vectorised"].status == "passed"
    failed = results["no_library_embedding_runtime"]
    assert failed.status == "failed" and "ran aten.embedding" in failed.message, failed.message
    assert " on inputs of " in failed.message and " elements (num_embeddings=" in failed.message, failed.message


def test_a_slot_draws_a_measured_runs_upstream_gradient_without_asking_the_reference_again(monkeypatch):
    """A measured call's upstream gradient is drawn to the shape and dtype of the reference's output. A batch slot's
    reference side keeps those per drawn call (``output_sizes``): the next submission draws the same gradient
    without asking the reference side, whose memory would hash the call's megabytes only for their size."""
    from validator.api import grade
    from validator.checks import performance
    from validator.reference_side import LiveReference, RememberingReference

    reference = paths.reference_dir() / "layers.py"
    side = RememberingReference(LiveReference.from_file(reference))
    drawn, asked, gradients = set(), [], []
    fresh_call = performance.fresh_call

    def remember(*args, **kwargs):
        call = fresh_call(*args, **kwargs)
        drawn.add(id(call))
        return call

    monkeypatch.setattr(performance, "fresh_call", remember)
    ask = side.call
    monkeypatch.setattr(side, "call", lambda challenge_id, call: (asked.append(id(call) in drawn), ask(challenge_id, call))[1])
    monkeypatch.setattr(performance, "measured", lambda ctx, check, call, *a, _measured=performance.measured, **k: (
        gradients.append(call["grad_output"]), _measured(ctx, check, call, *a, **k))[1])
    verdicts = []
    for _ in range(2):
        drawn.clear()
        asked.clear()
        report = grade(reference, challenges=["token_embedding"], checks=["vectorised", "speed"], seed=11,
                       profile="batch", reference_mode="live", reference=side)
        verdicts.append([(c.id, c.status) for c in report.challenges[0].checks])
        assert all(status == "passed" for _, status in verdicts[-1]), verdicts[-1]
        if len(verdicts) == 1:
            assert any(asked) and side.output_sizes  # the first submission asks, and the slot keeps the sizes
            first = list(gradients)
            gradients.clear()
    assert not any(asked)  # the second asks for no drawn call's output (only for the values it is compared with)
    # the same runs draw the same gradients (the second speed check may stop a try sooner: the slot knows the
    # reference's fastest time)
    assert len(gradients) >= 3 and all(torch.equal(a, b) for a, b in zip(first, gradients))
    assert verdicts[0] == verdicts[1]
