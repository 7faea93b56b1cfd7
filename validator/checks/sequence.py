"""Properties of a layer over a sequence, checked on the student's own outputs.

``causal``: changing the inputs after a cut position never changes the outputs at or
before it (a causal mask, a causal block). ``relation``: a measure of the output is
unchanged by a transformation of the inputs (positions shifted by a constant, an input
scaled), or equals the same measure of an input (a rotation keeps pair norms).
The student's layer is compared with itself, with the same weights loaded for every call;
``relation`` holds the reference to the same relation first (a tolerance too tight for it
is a spec error), ``causal`` needs no reference.
"""

from __future__ import annotations

from typing import Literal, Optional

import torch
from hypothesis import strategies as st
from pydantic import BaseModel, ConfigDict, model_validator

from validator.cases import Case
from validator.checks import register
from validator.checks.behaviour import CaseParams, case_call, case_weights, for_cases, strategy
from validator.checks.common import CheckFailed, entry_of, lone_position_problems, raise_if_failed
from validator.compare import mismatch, tolerance_for
from validator.context import Context
from validator.spec.schema import CheckSpec, ToleranceSpec


def _for_cases(ctx: Context, check: CheckSpec, p: CaseParams, extra: st.SearchStrategy, body) -> int:
    """``for_cases`` (the check's dtype, input_dtype and regimes honoured) with ``extra`` drawn beside each case."""
    return for_cases(ctx, check, p, body,
                     make_strategy=lambda where: st.tuples(strategy(ctx, check, p, where), extra).map(_attach))


def _attach(drawn) -> Case:
    """One Case (for_all prints its summary) carrying the drawn extra value as ``case.extra``."""
    case, extra = drawn
    case.extra = extra
    return case


def _tolerance(ctx: Context, ref: torch.Tensor, spec) -> tuple[float, float]:
    return tolerance_for(ref.dtype, spec if spec is not None else ctx.challenge.tolerance)


def _outputs(ctx: Context, check: CheckSpec, calls: list[dict]) -> list[torch.Tensor]:
    return [raise_if_failed(ctx, call, result)["output"]
            for call, result in zip(calls, ctx.student_many(calls, check.timeout))]


# -- causal --------------------------------------------------------------------------------------

class CausalParams(CaseParams):
    # input name -> its sequence axis; these inputs get new values at every position after the cut
    sequence: dict[str, int]
    output_axis: int = -2
    tolerance: Optional[dict[str, ToleranceSpec] | Literal["exact", "default"]] = None

    def check_against(self, challenge, check):
        problems = super().check_against(challenge, check)
        _, entry = challenge.entry_for(check)
        for name in self.sequence:
            if name not in entry.call:
                problems.append((("sequence", name), f"{name!r} is not an argument the entry is called with "
                                 f"({', '.join(entry.call)})"))
            elif challenge.inputs[name].type not in ("float", "token_ids"):
                problems.append((("sequence", name), "only float and token_ids inputs can be changed after the cut"))
        if self.sequence:
            first = next(iter(self.sequence))
            problems.extend(lone_position_problems(challenge, self, first, self.sequence[first]))
        return problems


def _perturbed(ctx: Context, case: Case, p: CausalParams, cut: int, seed: int) -> Case:
    """The same case with fresh values at every sequence position after ``cut`` in the named inputs."""
    gen = torch.Generator().manual_seed(seed)
    inputs = dict(case.inputs)
    for name, axis in p.sequence.items():
        value = inputs[name]
        if not isinstance(value, torch.Tensor) or value.dim() == 0:
            continue
        moved = value.movedim(axis, 0).clone()
        tail = moved[cut + 1:]
        if value.dtype.is_floating_point:
            fresh = torch.randn(tail.shape, generator=gen, dtype=torch.float64).to(value.dtype) * 3
        else:
            spec = ctx.challenge.inputs[name]
            from validator.spec.schema import resolve

            high = int(resolve(spec.high, case.dims)) if spec.high is not None else 2
            fresh = torch.randint(0, max(high, 1), tail.shape, generator=gen).to(value.dtype)
        moved[cut + 1:] = fresh
        inputs[name] = moved.movedim(0, axis)
    return case.but(inputs=inputs)


@register("causal", CausalParams, uses_reference=False)
def causal(ctx: Context, check: CheckSpec, p: CausalParams) -> str:
    """Outputs at positions <= t are the same whatever the inputs after t are."""
    name, entry = entry_of(ctx, check)
    first = next(iter(p.sequence))
    checked = [0]

    def body(case):
        k = case.extra
        value = case.inputs[first]
        seq = value.shape[p.sequence[first]] if isinstance(value, torch.Tensor) and value.dim() else 0
        if seq < 2:
            return  # nothing after a cut to change
        cut = k % (seq - 1)
        case.notes.append(f"inputs {', '.join(p.sequence)} changed at every position after {cut}")
        state = case_weights(ctx, check, p, case)
        other = _perturbed(ctx, case, p, cut, case.seed ^ 0xC0FFEE)
        base, changed = _outputs(ctx, check, [case_call(ctx, check, p, case, ["output"], state), case_call(ctx, check, p, other, ["output"], state)])
        for out in (base, changed):
            if not isinstance(out, torch.Tensor) or out.dim() == 0:
                what = "a 0-d tensor" if isinstance(out, torch.Tensor) else f"a {type(out).__name__}"
                raise CheckFailed(f"the output is {what}; expected a tensor with a sequence axis "
                                  f"(axis {p.output_axis})")
        if base.shape != changed.shape:
            raise CheckFailed(f"the output has shape {tuple(base.shape)} for one input and {tuple(changed.shape)} "
                              "for the same input with other values after the cut")
        axis = p.output_axis % base.dim()
        before = base.movedim(axis, 0)[:cut + 1]
        after = changed.movedim(axis, 0)[:cut + 1]
        atol, rtol = _tolerance(ctx, before, p.tolerance)
        a, b = before.to(torch.float64), after.to(torch.float64)
        bad = ~torch.isclose(b, a, atol=float(atol), rtol=rtol)
        if bad.any():
            position = int(bad.reshape(bad.shape[0], -1).any(dim=1).nonzero()[0])
            worst = float((b - a).abs()[position].nan_to_num(nan=float("inf")).max())
            raise CheckFailed(
                f"changing the inputs only at positions after {cut} changed the output at position {position} "
                f"(along output axis {p.output_axis}) by up to {worst:.3g} (allowed {float(atol):g} + {rtol:g} x |value|): "
                "an output may depend only on the current and earlier positions; mask the scores of later "
                "positions (j > i) before the softmax")
        checked[0] += 1
    _for_cases(ctx, check, p, st.integers(0, 2**16), body)
    return f"{checked[0]} generated inputs cut at a drawn position: earlier outputs unchanged"


# -- relation ------------------------------------------------------------------------------------

MEASURES = {
    "output": "the output",
    "gram": "the dot products between positions (x @ x^T over the last two axes)",
    "pair_norms": "the norm of each adjacent pair (x[..., 2i], x[..., 2i+1])",
    "norms": "the norm over the last axis",
}


def _measure(kind: str, t: torch.Tensor) -> torch.Tensor:
    t = t.detach().to(torch.float64)
    if kind == "gram":
        return t @ t.transpose(-2, -1)
    if kind == "pair_norms":
        return torch.sqrt(t[..., 0::2] ** 2 + t[..., 1::2] ** 2)
    if kind == "norms":
        return t.norm(dim=-1)
    return t


class Transform(BaseModel):
    """Change one input by a constant drawn from ``[low, high]`` (an int for integer inputs)."""

    model_config = ConfigDict(extra="forbid")
    input: str
    shift: Optional[list[float]] = None
    scale: Optional[list[float]] = None

    @model_validator(mode="after")
    def _one(self):
        given = [r for r in (self.shift, self.scale) if r is not None]
        if len(given) != 1:
            raise ValueError("a transform gives exactly one of `shift: [low, high]` or `scale: [low, high]`")
        if len(given[0]) != 2 or given[0][0] > given[0][1]:
            raise ValueError("the range of a transform is [low, high] with low <= high")
        return self


class RelationParams(CaseParams):
    measure: Literal["output", "gram", "pair_norms", "norms"] = "output"
    # compare with the student's output for transformed inputs, or with the same measure of an input
    transform: Optional[Transform] = None
    against_input: Optional[str] = None
    atol: float = 1e-5
    rtol: float = 1e-5
    explain: str = ""

    def check_against(self, challenge, check):
        problems = super().check_against(challenge, check)
        _, entry = challenge.entry_for(check)
        if (self.transform is None) == (self.against_input is None):
            problems.append(((), "a relation gives exactly one of `transform` or `against_input`"))
        for name in [n for n in (self.against_input, self.transform and self.transform.input) if n]:
            if name not in entry.call:
                problems.append(((), f"{name!r} is not an argument the entry is called with ({', '.join(entry.call)})"))
        return problems


def _transformed(case: Case, t: Transform, amount: float) -> Case:
    inputs = dict(case.inputs)
    value = inputs[t.input]
    inputs[t.input] = value + amount if t.shift is not None else value * amount
    if not value.dtype.is_floating_point:
        inputs[t.input] = inputs[t.input].to(value.dtype)
    verb = "shifted by" if t.shift is not None else "scaled by"
    return case.but(inputs=inputs, notes=case.notes + [f"{t.input} {verb} {amount:g}"])


@register("relation", RelationParams)
def relation(ctx: Context, check: CheckSpec, p: RelationParams) -> str:
    """measure(f(T(inputs))) == measure(f(inputs)), or measure(f(inputs)) == measure(an input)."""
    name, entry = entry_of(ctx, check)
    what = MEASURES[p.measure]
    if p.transform is not None:
        lo, hi = (p.transform.shift or p.transform.scale)
        integer = ctx.challenge.inputs[p.transform.input].type == "token_ids"
        amounts = st.integers(int(lo), int(hi)) if integer else st.floats(lo, hi, allow_nan=False)
    else:
        amounts = st.just(0)

    def body(case):
        amount = case.extra
        state = case_weights(ctx, check, p, case)
        calls = [case_call(ctx, check, p, case, ["output"], state)]
        if p.transform is not None:
            other = _transformed(case, p.transform, amount)
            case.notes.append(other.notes[-1])
            calls.append(case_call(ctx, check, p, other, ["output"], state))
        # the reference is held to the relation first: a tolerance too tight for it is a spec error
        for side in ("reference", "student"):
            outs = ([ctx.reference_call(c)["output"] for c in calls] if side == "reference"
                    else _outputs(ctx, check, calls))
            if p.transform is not None:
                problem = mismatch(_measure(p.measure, outs[1]), _measure(p.measure, outs[0]), atol=p.atol,
                                   rtol=p.rtol, what=f"{what} with {other.notes[-1]} (compared with the "
                                                     "same for the original inputs)")
            else:
                problem = mismatch(_measure(p.measure, outs[0]), _measure(p.measure, case.inputs[p.against_input]),
                                   atol=p.atol, rtol=p.rtol,
                                   what=f"{what} of the output (compared with the same of `{p.against_input}`)")
            if problem and side == "reference":
                raise RuntimeError(f"the reference does not satisfy this relation within atol {p.atol:g}, rtol "
                                   f"{p.rtol:g} (a spec bug: widen them): {problem}")
        if problem:
            raise CheckFailed(problem + (f": {p.explain}" if p.explain else ""))
    runs = _for_cases(ctx, check, p, amounts, body)
    return f"{runs} generated inputs: {what} " + ("unchanged" if p.transform is not None else
                                                   f"equal to those of {p.against_input}")
