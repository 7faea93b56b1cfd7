"""Several calls on one instance: the state a layer keeps between calls.

Every other check builds a fresh layer for each example and calls it once, so a layer that keeps something
from its first call (a causal mask or a table sized by the first call's length, a copy of ``weight.T``, the
first call's positions) passes them all. ``call_sequence`` builds one layer and calls it several times, the
sequence length going up and then down, with the parameters changed in place between calls (as an optimiser
step or ``load_state_dict`` does): every call must equal what a fresh layer, built and updated alike and called only then, returns: the
layer is compared with itself, so a formula that is wrong on every call is the other checks' business.
"""

from __future__ import annotations

from typing import Literal, Optional

import torch
from pydantic import Field

from validator.cases import describe_value, sequence_strategy
from validator.checks import for_all, register
from validator.checks.common import CheckFailed, OverrideParams, entry_of, raise_if_failed
from validator.compare import mismatch, tolerance_for
from validator.context import Context, format_exception
from validator.spec.schema import CheckSpec, ToleranceSpec


class SequenceParams(OverrideParams):
    # calls on the one instance (at least 3: up, then down)
    steps: int = Field(3, ge=3, le=8)
    # the dims that change between calls (default: every drawn dim the layer is not built with)
    vary: Optional[list[str]] = None
    # a narrower range for a varied dim than its own (every call past a fixed max_seq_len: {seq_len: [3, 12]})
    lengths: dict[str, list[int]] = {}
    # change every parameter in place before each call after the first
    update: bool = True
    # backward after every call (gradients not compared: a graph kept from an earlier call fails there)
    backward: bool = True
    train: bool = False
    max_examples: Optional[int] = None
    tolerance: Optional[dict[str, ToleranceSpec] | Literal["exact", "default"]] = None

    def check_against(self, challenge, check):
        problems = super().check_against(challenge, check)
        _, entry = challenge.entry_for(check)
        if entry.kind != "module":
            problems.append(((), "call_sequence calls one instance several times: the entry must be a module"))
        for name, rng in self.lengths.items():
            if name not in challenge.dims or isinstance(challenge.dims[name], int) or name in self.dims:
                problems.append((("lengths", name), f"{name!r} is not a drawn dim a sequence varies"))
            elif len(rng) != 2 or not 1 <= rng[0] < rng[1]:
                problems.append((("lengths", name), f"a range is [low, high] with 1 <= low < high, got {rng}"))
        from validator.cases import construction_dims

        built = construction_dims(challenge, entry)
        for i, name in enumerate(self.vary or []):
            if name not in challenge.dims:
                problems.append((("vary", i), f"no dim named {name!r} under `dims`"))
            elif isinstance(challenge.dims[name], int) or name in self.dims:
                problems.append((("vary", i), f"{name!r} is fixed: a varied dim needs a range"))
            elif name in built:
                problems.append((("vary", i), f"the layer is built with {name!r}, so one instance cannot see it "
                                 "change between calls: vary a dim of the inputs only"))
        return problems


def _shown(case) -> str:
    dims = ", ".join(f"{k}={v}" for k, v in case.dims.items())
    tensors = ", ".join(f"{k} {describe_value(v)}" for k, v in case.inputs.items() if isinstance(v, torch.Tensor))
    return f"{dims}; {tensors}" if tensors else dims


def _calls_note(steps: list, update: bool) -> str:
    lines = []
    for k, step in enumerate(steps):
        changed = ", parameters changed in place before it" if update and k else ""
        lines.append(f"call {k + 1}: {_shown(step)}{changed}")
    return "; ".join(lines)


@register("call_sequence", SequenceParams, uses_reference=False, not_through_adapter=(
    "{function} builds a fresh layer on every call, so several calls on one instance cannot be made through it"))
def call_sequence(ctx: Context, check: CheckSpec, p: SequenceParams) -> str:
    """One instance called ``steps`` times (lengths up, then down; parameters updated in place in between): every
    output equals what a fresh layer, built and updated alike and called only then, returns. The layer is compared
    with itself, so a wrong formula (which every call shares) is the other checks' business."""
    name, entry = entry_of(ctx, check)

    def cases():  # built only if hypothesis runs (validator.checks.for_all)
        return sequence_strategy(ctx.challenge, entry, p.inputs, fixed_dims=p.dims, steps=p.steps, vary=p.vary,
                                 lengths=p.lengths)

    spec_tol = p.tolerance if p.tolerance is not None else ctx.challenge.tolerance
    dtype = torch.get_default_dtype()
    update = p.update and bool(entry.parameters)
    seen = Unobserved(ctx, name)
    backward = p.backward and not ctx.backward_known_broken()

    def body(case):
        steps = case.steps
        state = ctx.make_state(entry, case.dims, case.seed, dtype) if entry.parameters else None
        call = ctx.build_call(name, case, want=["output"], state=state, train=p.train)
        call["inputs"] = []
        call["fresh"] = True
        call["steps"] = [{"inputs": ctx.build_call(name, s, want=[])["inputs"],
                          "update": k if update and k else None,
                          # a backward a gradient check already charged is left out: state is this check's business
                          "backward": (case.seed ^ 0x5EED) + k if backward else None} for k, s in enumerate(steps)]
        case.notes.append(_calls_note(steps, update))
        got = raise_if_failed(ctx, call, ctx.student(call, check.timeout, "calling one instance several times"))
        outputs, fresh, failed = got.get("outputs") or [], got.get("fresh") or [], got.get("failed")
        for k, alone in enumerate(fresh):
            if not alone.get("ok"):
                # a fresh layer fails this call too: the checks of single calls own that
                seen.failed(dict(call, inputs=call["steps"][k]["inputs"]), alone)
                continue
            seen.observed += 1
            after = (f" (after {k} earlier call{'s' if k > 1 else ''} on the same instance"
                     + (", and the parameters changed in place since" if update and k else "") + ")") if k else ""
            if failed is not None and failed["step"] == k:
                raise CheckFailed(
                    f"call {k + 1} of {len(steps)} on the same instance{after}: "
                    f"{format_exception(dict(failed, ok=False), name)}; a fresh layer built and updated alike computes "
                    "it. Something kept from an earlier call does not fit this one: a mask or table sized by an "
                    "earlier length, a tensor cached at the first call. Recompute it in forward (or build it for "
                    "max_seq_len once, in the constructor, and slice it)")
            if k >= len(outputs):
                break
            ref = alone["output"]
            atol, rtol = tolerance_for(ref.dtype, spec_tol)
            problem = self_mismatch(outputs[k], ref, atol=atol, rtol=rtol,
                               what=f"the output of call {k + 1} (compared with a fresh layer's, built and updated alike)")
            if problem:
                raise CheckFailed(
                    f"{problem}{after}: each call must compute from its own inputs and the layer's current "
                    "parameters. Something kept from an earlier call went stale: a mask or table sized by the first "
                    "call's length, a copy of a weight (weight.T.contiguous(), .clone(), .float() of a float16 "
                    "weight) made once, or the first call's positions; recompute it in forward, or derive it "
                    "from the current parameters every time")
    runs = for_all(ctx, check, cases, body, p.max_examples)
    seen.done()
    return (f"{runs} sequences of {p.steps} calls on one instance (lengths up, then down"
            + (", parameters changed in place between calls" if update else "") + ") equal a fresh layer's")


def self_mismatch(actual, expected, *, atol: float, rtol: float, what: str) -> str | None:
    """``mismatch`` for a layer compared with itself: where both outputs are NaN (or the same infinity), they agree
    (a formula that gives NaN there gives it both times; that it gives NaN at all is the other checks' business)."""
    if isinstance(actual, torch.Tensor) and isinstance(expected, torch.Tensor) and actual.shape == expected.shape \
            and actual.dtype == expected.dtype and actual.dtype.is_floating_point:
        same = (torch.isnan(actual) & torch.isnan(expected)) | (torch.isinf(actual) & (actual == expected))
        if bool(same.any()):
            actual = torch.where(same, torch.zeros_like(actual), actual)
            expected = torch.where(same, torch.zeros_like(expected), expected)
    return mismatch(actual, expected, atol=atol, rtol=rtol, what=what)


class Unobserved:
    """Counts what a self-comparing check observed; the first failure of an ordinary call is kept, so that a layer
    that fails every such call (the stub) gets that exception as the check's error, not a pass."""

    def __init__(self, ctx: Context, entry_name: str):
        self.ctx, self.entry_name = ctx, entry_name
        self.observed = 0
        self.failures = 0
        self.first: Exception | None = None

    def failed(self, call: dict, result: dict) -> None:
        from validator.context import is_grader_failure

        self.failures += 1
        if self.first is None or is_grader_failure(result):
            try:
                raise_if_failed(self.ctx, call, result)
            except Exception as exc:  # noqa: BLE001 - CheckErrored or GraderFailure: kept to raise at the end
                self.first = self.first or exc
                if is_grader_failure(result):
                    raise  # every time (a case Hypothesis replays must fail the same way)

    def done(self) -> None:
        if not self.observed and self.first is not None:
            raise self.first
