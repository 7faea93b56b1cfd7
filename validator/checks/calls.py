"""Several calls on one instance: the state a layer keeps between calls.

Every other check builds a fresh layer for each example and calls it once, so a layer that keeps something
from its first call (a causal mask or a table sized by the first call's length, a copy of ``weight.T``, the
first call's positions) passes them all. ``call_sequence`` builds one layer and calls it several times, the
sequence length going up and then down, with the parameters changed in place between calls (as an optimiser
step or ``load_state_dict`` does): every call must equal the reference's, built, called and updated alike.
"""

from __future__ import annotations

from typing import Literal, Optional

import torch
from pydantic import Field

from validator.cases import describe_value, sequence_strategy
from validator.checks import for_all, register
from validator.checks.common import CheckErrored, CheckFailed, OverrideParams, entry_of
from validator.compare import mismatch, tolerance_for
from validator.context import Context, GraderFailure, format_exception, is_grader_failure
from validator.spec.schema import CheckSpec, ToleranceSpec


class SequenceParams(OverrideParams):
    # calls on the one instance (at least 3: up, then down)
    steps: int = Field(3, ge=3, le=8)
    # the dims that change between calls (default: every drawn dim the layer is not built with)
    vary: Optional[list[str]] = None
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
        for i, name in enumerate(self.vary or []):
            if name not in challenge.dims:
                problems.append((("vary", i), f"no dim named {name!r} under `dims`"))
            elif isinstance(challenge.dims[name], int) or name in self.dims:
                problems.append((("vary", i), f"{name!r} is fixed: a varied dim needs a range"))
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


@register("call_sequence", SequenceParams, not_through_adapter=(
    "{function} builds a fresh layer on every call, so several calls on one instance cannot be made through it"))
def call_sequence(ctx: Context, check: CheckSpec, p: SequenceParams) -> str:
    """One instance called ``steps`` times (lengths up, then down; parameters updated in place in between):
    every output equals the reference's for the same sequence."""
    name, entry = entry_of(ctx, check)
    strategy = sequence_strategy(ctx.challenge, entry, p.inputs, fixed_dims=p.dims, steps=p.steps, vary=p.vary)
    spec_tol = p.tolerance if p.tolerance is not None else ctx.challenge.tolerance
    dtype = torch.get_default_dtype()
    update = p.update and bool(entry.parameters)

    def body(case):
        steps = case.steps
        state = ctx.make_state(entry, case.dims, case.seed, dtype) if entry.parameters else None
        call = ctx.build_call(name, case, want=["output"], state=state, train=p.train)
        call["inputs"] = []
        call["steps"] = [{"inputs": ctx.build_call(name, s, want=[])["inputs"],
                          "update": k if update and k else None} for k, s in enumerate(steps)]
        case.notes.append(_calls_note(steps, update))
        expected = ctx.reference_call(call)["outputs"]
        if p.backward:
            gen = torch.Generator().manual_seed(case.seed ^ 0x5EED)
            for step, out in zip(call["steps"], expected):
                if out.dtype.is_floating_point:
                    step["grad_output"] = torch.randn(out.shape, generator=gen, dtype=torch.float64).to(out.dtype)
        got = ctx.student(call, check.timeout, "calling one instance several times")
        if not got.get("ok"):
            if is_grader_failure(got):
                raise GraderFailure(format_exception(got, name))
            k = (got.get("exception") or {}).get("step")
            where = f"call {k + 1} of {len(steps)} on the same instance" if k is not None else "the sequence of calls"
            advice = ("" if not k else ": the earlier calls worked, so something kept from them does not fit this "
                      "call (a mask or table sized by an earlier length, a tensor cached at the first call)")
            raise CheckErrored(f"{where}: {format_exception(got, name)}{advice}")
        outputs = got.get("outputs") or []
        for k, (out, ref) in enumerate(zip(outputs, expected)):
            atol, rtol = tolerance_for(ref.dtype, spec_tol)
            problem = mismatch(out, ref, atol=atol, rtol=rtol, what=f"the output of call {k + 1}")
            if problem:
                after = (f" (after {k} earlier call{'s' if k > 1 else ''} on the same instance"
                         + (", and the parameters changed in place since" if update and k else "") + ")") if k else ""
                raise CheckFailed(
                    f"{problem}{after}: each call must compute from its own inputs and the layer's current "
                    "parameters. Something kept from an earlier call went stale: a mask or table sized by the first "
                    "call's length, a copy of a weight (weight.T.contiguous(), .clone(), .float() of a float16 "
                    "weight) made once, or the first call's positions; recompute it in forward, or derive it "
                    "from the current parameters every time")
    runs = for_all(ctx, check, strategy, body, p.max_examples)
    return (f"{runs} sequences of {p.steps} calls on one instance (lengths up, then down"
            + (", parameters changed in place between calls" if update else "") + ") equal the reference's")
