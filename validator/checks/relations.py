"""Relation tests: properties of a layer's output under transformed inputs.

``stability`` feeds the generated inputs scaled to extreme magnitudes and requires a finite
output equal to the reference's; ``invariance`` compares the student's output on a
transformed input with its own output on the original (``softmax(x + c) == softmax(x)``,
``rms_norm(c x) == rms_norm(x)``, ``linear(c x) == c linear(x)``). Both are data: the spec
names the input, the factors or shifts, and the expected relation.
"""

from __future__ import annotations

from typing import Literal, Optional

import torch
from pydantic import BaseModel, ConfigDict, Field, model_validator

from validator.cases import Case
from validator.checks import register
from validator.checks.behaviour import ValuesParams, _by_rounding, _shown_build, case_call, case_weights, for_cases
from validator.checks.common import CheckFailed, entry_of, run_student
from validator.compare import mismatch, rounding_mismatch, tolerance_for
from validator.context import Context
from validator.spec.schema import CheckSpec


def _float_inputs(ctx: Context, check: CheckSpec, wanted: Optional[str]) -> list[str]:
    _, entry = entry_of(ctx, check)
    names = [n for n in entry.call if ctx.challenge.inputs[n].type == "float"]
    return [n for n in names if wanted is None or n == wanted]


def _check_input_name(challenge, check, name: Optional[str], key: tuple) -> list:
    _, entry = challenge.entry_for(check)
    floats = [n for n in entry.call if challenge.inputs[n].type == "float"]
    if not floats:
        return [(key, "the entry takes no float input to transform")]
    if name is not None and name not in floats:
        return [(key, f"{name!r} is not a float input of the entry (float inputs: {', '.join(floats)})")]
    return []


def _transformed(case: Case, names: list[str], fn) -> Case:
    inputs = dict(case.inputs)
    for n in names:
        value = inputs[n]
        inputs[n] = fn(value.to(torch.float64)).to(value.dtype)
    return case.but(inputs=inputs)


def _run(ctx: Context, check: CheckSpec, p: ValuesParams, case: Case, *, reference: bool, state=None) -> dict:
    call = case_call(ctx, check, p, case, ["output"], state)
    return ctx.reference_call(call) if reference else run_student(ctx, check, call)


def _compare(p: ValuesParams, spec_tol, got, ref, what: str) -> Optional[str]:
    if _by_rounding(p, ref):
        return rounding_mismatch(got, ref, ulps=p.ulps, fraction=p.rounded_fraction, what=what)
    atol, rtol = tolerance_for(ref.dtype, spec_tol)
    return mismatch(got, ref, atol=atol, rtol=rtol, what=what)


def _non_finite(out: torch.Tensor) -> Optional[str]:
    if not isinstance(out, torch.Tensor) or not out.dtype.is_floating_point:
        return None
    bad = ~torch.isfinite(out)
    if not bool(bad.any()):
        return None
    first = [int(i) for i in bad.nonzero()[0]] if out.dim() else []
    n_nan, n_inf = int(torch.isnan(out).sum()), int(torch.isinf(out).sum())
    return (f"{int(bad.sum())} of {out.numel()} output values are not finite ({n_inf} inf, {n_nan} NaN), the first "
            f"at index {first}")


class StabilityParams(ValuesParams):
    """Inputs scaled to extreme magnitudes (``scale``); the output must be finite and match the reference."""

    input: Optional[str] = None
    scale: list[float] = Field(min_length=1)

    @model_validator(mode="after")
    def _nonzero(self):
        if any(f == 0 or f != f for f in self.scale):
            raise ValueError("`scale` factors must be non-zero numbers")
        return self

    def check_against(self, challenge, check):
        return super().check_against(challenge, check) + _check_input_name(challenge, check, self.input, ("input",))


@register("stability", StabilityParams)
def stability(ctx: Context, check: CheckSpec, p: StabilityParams) -> str:
    spec_tol = p.tolerance if p.tolerance is not None else ctx.challenge.tolerance
    names = _float_inputs(ctx, check, p.input)

    def body(case):
        state = case_weights(ctx, check, p, case)
        for factor in p.scale:
            scaled = _transformed(case, names, lambda v, f=factor: v * f)
            peak = max(float(scaled.inputs[n].abs().max()) if scaled.inputs[n].numel() else 0.0 for n in names)
            where = (f"with {', '.join(names)} scaled by {factor:g} (largest |value| {peak:.3g}"
                     f"{', ' + str(scaled.inputs[names[0]].dtype).removeprefix('torch.') if p.input_dtype else ''})")
            ref = _run(ctx, check, p, scaled, reference=True, state=state)["output"]
            if _non_finite(ref):
                raise RuntimeError(f"the reference's output is not finite {where} (a spec bug: choose smaller factors)")
            got = _run(ctx, check, p, scaled, reference=False, state=state)["output"]
            broken = _non_finite(got)
            if broken:
                raise CheckFailed(f"{where}: {broken}, while the reference's output is finite. An intermediate "
                                  "overflowed to inf (float32 holds at most 3.4e38, so exp(x) is inf above x = 88.7; "
                                  "float16 holds at most 65504) or underflowed to 0, and "
                                  "inf - inf, inf/inf and 0/0 are NaN: rearrange the formula so that no "
                                  "intermediate grows with the inputs' magnitude" + _shown_build(ctx, check, p))
            problem = _compare(p, spec_tol, got, ref, "output")
            if problem:
                raise CheckFailed(f"{where}: {problem}" + _shown_build(ctx, check, p))
    runs = for_cases(ctx, check, p, body)
    return f"{runs} generated inputs, each scaled by {', '.join(f'{f:g}' for f in p.scale)}"


class Transform(BaseModel):
    """``{input: x, scale: [0.25, 4.0]}`` multiplies the input, ``{input: x, shift: [-32.0, 64.0]}`` adds to it."""

    model_config = ConfigDict(extra="forbid")
    input: Optional[str] = None
    scale: list[float] = []
    shift: list[float] = []

    @model_validator(mode="after")
    def _one(self):
        if bool(self.scale) == bool(self.shift):
            raise ValueError("a transform has exactly one of `scale` or `shift` (a non-empty list)")
        if any(f != f for f in self.scale + self.shift):
            raise ValueError("factors and shifts must be numbers")
        return self


class InvarianceParams(ValuesParams):
    """``expect: equal``: f(T x) == f(x); ``expect: scaled``: f(c x) == c f(x) (a homogeneous layer)."""

    transform: Transform
    expect: Literal["equal", "scaled"] = "equal"

    @model_validator(mode="after")
    def _scaled_needs_scale(self):
        if self.expect == "scaled" and not self.transform.scale:
            raise ValueError("`expect: scaled` needs a `scale` transform (f(c x) == c f(x))")
        return self

    def check_against(self, challenge, check):
        return super().check_against(challenge, check) + _check_input_name(
            challenge, check, self.transform.input, ("transform", "input"))


@register("invariance", InvarianceParams)
def invariance(ctx: Context, check: CheckSpec, p: InvarianceParams) -> str:
    spec_tol = p.tolerance if p.tolerance is not None else ctx.challenge.tolerance
    names = _float_inputs(ctx, check, p.transform.input)
    kind = "scale" if p.transform.scale else "shift"
    amounts = p.transform.scale or p.transform.shift
    shown = ", ".join(names)

    def relation(c: float) -> tuple[str, str]:
        t = f"{c:g} * {shown}" if kind == "scale" else f"{shown} {'+' if c >= 0 else '-'} {abs(c):g}"
        return t, (f"f({t}) == f({shown})" if p.expect == "equal" else f"f({t}) == {c:g} * f({shown})")

    def body(case):
        state = case_weights(ctx, check, p, case)
        for side in ("reference", "student"):
            base = _run(ctx, check, p, case, reference=side == "reference", state=state)["output"]
            for c in amounts:
                moved = _transformed(case, names, (lambda v, c=c: v * c) if kind == "scale" else (lambda v, c=c: v + c))
                out = _run(ctx, check, p, moved, reference=side == "reference", state=state)["output"]
                if not isinstance(base, torch.Tensor) or not isinstance(out, torch.Tensor):
                    raise CheckFailed("the output is not a tensor")
                want = base if p.expect == "equal" else (base.to(torch.float64) * c).to(base.dtype)
                t, rel = relation(c)
                problem = _compare(p, spec_tol, out, want, f"f({t}) compared with "
                                   + (f"f({shown})" if p.expect == "equal" else f"{c:g} * f({shown})"))
                if problem and side == "reference":
                    raise RuntimeError(f"the reference breaks {rel} within the tolerance (a spec bug): {problem}")
                if problem:
                    raise CheckFailed(f"{rel} does not hold for your layer: {problem}" + _shown_build(ctx, check, p))
    runs = for_cases(ctx, check, p, body)
    rels = "; ".join(relation(c)[1] for c in amounts)
    return f"{runs} generated inputs: {rels}"
