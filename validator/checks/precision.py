"""A composite converted to reduced precision keeps the promises its parts make there.

RMSNorm promises to compute its statistics in float32 whatever its input, so that a float16 residual stream of a
few hundred (whose squares overflow float16's 65504) normalises correctly. The rms_norm challenge checks that of
RMSNorm alone; a transformer block built from an RMSNorm without the upcast passes every float32 check of the
block. ``reduced_precision`` converts the student's own layer with ``module.to(float16)`` and compares it with
the same layer in float32, on the same input values and weights: a layer wrong in float32 too is the other
checks' business (it is compared with itself), only what goes wrong in the reduced dtype is this check's.
"""

from __future__ import annotations

from typing import Literal

import torch
from pydantic import model_validator

from validator.cases import Case
from validator.checks import register
from validator.checks.behaviour import CaseParams, for_cases
from validator.checks.calls import Unobserved, self_mismatch
from validator.checks.common import CheckFailed, entry_of, raise_if_failed
from validator.checks.relations import _non_finite
from validator.compare import mismatch, tolerance_for
from validator.context import Context
from validator.spec.schema import CheckSpec, ToleranceSpec


class PrecisionParams(CaseParams):
    # the dtype the whole layer is converted to with module.to(...)
    convert: Literal["float16", "bfloat16"] = "float16"
    # how far the converted layer may be from itself in float32 (keyed by the reduced dtype)
    tolerance: dict[str, ToleranceSpec]

    @model_validator(mode="after")
    def _no_dtype(self):
        if self.dtype or self.input_dtype:
            raise ValueError("reduced_precision converts the layer itself (`convert`): no `dtype` or `input_dtype`")
        if self.convert not in self.tolerance:
            raise ValueError(f"give a `tolerance` for {self.convert}, the dtype the outputs are compared in")
        if self.stand_ins:
            raise ValueError("reduced_precision grades the layer's own arithmetic, sublayers included: no `stand_ins`")
        return self

    def check_against(self, challenge, check):
        problems = super().check_against(challenge, check)
        _, entry = challenge.entry_for(check)
        if entry.kind != "module":
            problems.append(((), "reduced_precision converts a built layer: the entry must be a module"))
        return problems


def _in(case: Case, dtype: torch.dtype) -> Case:
    inputs = {k: (v.to(dtype) if isinstance(v, torch.Tensor) and v.dtype.is_floating_point else v)
              for k, v in case.inputs.items()}
    return case.but(inputs=inputs)


@register("reduced_precision", PrecisionParams, not_through_adapter=(
    "{function} builds and calls your layer in one call, so the grader cannot convert it with .to(dtype) in between"))
def reduced_precision(ctx: Context, check: CheckSpec, p: PrecisionParams) -> str:
    """``module.to(convert)`` on inputs in that dtype gives a finite output within the tolerance of the same layer
    in float32 on the same values (the reference is held to the same relation first)."""
    name, entry = entry_of(ctx, check)
    low = getattr(torch, p.convert)
    atol, rtol = tolerance_for(low, p.tolerance)
    checked = [0]
    seen = Unobserved(ctx, name)

    def body(case):
        state = ctx.make_state(entry, case.dims, case.seed, torch.float32) if entry.parameters else None
        reduced = _in(case, low)
        calls = [ctx.build_call(name, reduced, want=["output"], state=state, train=p.train, convert=p.convert),
                 ctx.build_call(name, _in(reduced, torch.float32), want=["output"], state=state, train=p.train)]
        peak = max((float(v.abs().max()) for v in reduced.inputs.values()
                    if isinstance(v, torch.Tensor) and v.dtype.is_floating_point and v.numel()), default=0.0)
        where = f"converted with .to(torch.{p.convert}), inputs in {p.convert} up to |{peak:.3g}|"
        ref_low, ref_high = (ctx.reference_call(c)["output"] for c in calls)
        if _non_finite(ref_low) or mismatch(ref_low.to(torch.float32), ref_high, atol=atol, rtol=rtol):
            raise RuntimeError(f"the reference {where} is not within the check's tolerance of itself in float32 "
                               f"(a spec bug: widen the tolerance or shrink the inputs): "
                               f"{_non_finite(ref_low) or mismatch(ref_low.to(torch.float32), ref_high, atol=atol, rtol=rtol)}")
        low_reply, high_reply = ctx.student_many(calls, check.timeout, "running your layer in two precisions")
        if not high_reply.get("ok"):
            seen.failed(calls[1], high_reply)  # it fails in float32 already: the float32 checks own that
            return
        seen.observed += 1
        high = high_reply["output"]
        got = raise_if_failed(ctx, calls[0], low_reply, during=where)["output"]
        broken = _non_finite(got)
        if broken and not _non_finite(high):
            raise CheckFailed(f"{where}: {broken}, while the same layer in float32 is finite: an intermediate "
                              f"overflowed {p.convert} (largest value 65504 for float16: x² of |x| > 256 is inf). "
                              "Compute what grows (squares, sums, exponentials) in float32 and cast the result back, "
                              "as the contracts of the parts promise")
        problem = self_mismatch(got.to(torch.float32) if isinstance(got, torch.Tensor) else got, high, atol=atol, rtol=rtol,
                           what=f"the {p.convert} output (compared with your own layer in float32 on the same values)")
        if problem:
            raise CheckFailed(f"{where}: {problem}: the reduced precision loses more than rounding should; compute what "
                              "grows (squares, sums, exponentials) in float32 and cast the result back, as the "
                              "contracts of the parts promise")
        checked[0] += 1
    for_cases(ctx, check, p, body)
    seen.done()
    return f"{checked[0]} generated inputs: the layer converted to {p.convert} agrees with itself in float32"
