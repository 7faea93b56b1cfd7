"""Behaviour tests, differential against the reference: output shape, values, expected errors."""

from __future__ import annotations

from typing import Any, Literal, Optional

import torch
from pydantic import Field, model_validator

from validator.cases import case_strategy
from validator.checks import for_all, register
from validator.checks.common import CheckFailed, OverrideParams, entry_of, run_student
from validator.compare import mismatch, rounding_mismatch, tolerance_for
from validator.context import Context, is_grader_failure
from validator.spec.schema import CheckSpec, ToleranceSpec


FloatName = Literal["float16", "bfloat16", "float32", "float64"]


class CaseParams(OverrideParams):
    """Generated cases: input and dim overrides, dtype, training mode, how many examples.

    ``dtype``: float inputs *and* module parameters in that dtype (the layer built with ``dtype=``).
    ``input_dtype``: float inputs only, cast to that dtype; parameters stay in the default dtype
    (bf16 activations through a float32 layer, as under autocast).
    """

    dtype: Optional[str] = None
    input_dtype: Optional[FloatName] = None
    train: bool = False
    max_examples: Optional[int] = None
    # contract class name -> grader stand-in (validator/standins.py): both sides build the entry with
    # those sublayers replaced, so the check grades the entry's own wiring whatever the sublayers do
    stand_ins: dict[str, str] = {}

    def check_against(self, challenge, check):
        from validator.standins import STAND_INS

        problems = super().check_against(challenge, check)
        for name, which in self.stand_ins.items():
            if which not in STAND_INS:
                problems.append((("stand_ins", name), f"unknown stand-in {which!r}; known: {', '.join(STAND_INS)}"))
        return problems

    @model_validator(mode="after")
    def _one_dtype_option(self):
        if self.input_dtype and "dtype" in self.model_fields_set:
            raise ValueError("give `dtype` (inputs and parameters) or `input_dtype` (inputs only), not both")
        return self


def strategy(ctx: Context, check: CheckSpec, p: CaseParams):
    _, entry = entry_of(ctx, check)
    cases = case_strategy(ctx.challenge, entry, p.inputs, fixed_dims=p.dims)
    if p.input_dtype:
        return cases.map(lambda c: in_dtype(c, getattr(torch, p.input_dtype)))
    if not p.dtype:
        return cases
    # float inputs in the check's dtype from the start, so a failing input prints as what was passed
    return cases.map(lambda c: in_dtype(c, getattr(torch, p.dtype)))


def in_dtype(case, dtype: torch.dtype):
    inputs = {k: (v.to(dtype) if isinstance(v, torch.Tensor) and v.dtype.is_floating_point else v)
              for k, v in case.inputs.items()}
    return type(case)(dims=case.dims, inputs=inputs, seed=case.seed, notes=list(case.notes))


def _state(ctx: Context, name: str, case, dtype: torch.dtype):
    entry = ctx.challenge.entries[name]
    return ctx.make_state(entry, case.dims, case.seed, dtype) if entry.kind == "module" else None


def stand_in_extra(p: CaseParams) -> dict:
    """The call key that builds the entry with the check's stand-in sublayers (none: no key at all)."""
    return {"stand_ins": dict(p.stand_ins)} if getattr(p, "stand_ins", None) else {}


def _both(ctx: Context, check: CheckSpec, p: CaseParams, case, want: list[str]) -> tuple[dict, dict]:
    name, _ = entry_of(ctx, check)
    dtype = getattr(torch, p.dtype) if p.dtype else torch.get_default_dtype()
    call = ctx.build_call(name, case, want=want, state=_state(ctx, name, case, dtype),
                          train=p.train, input_dtype=dtype if p.dtype else None,
                          init_kwargs={"dtype": dtype} if p.dtype and ctx.challenge.entries[name].kind == "module" else None,
                          **stand_in_extra(p))
    expected = ctx.reference_call(call)
    got = run_student(ctx, check, call)
    return got, expected


@register("shape", CaseParams)
def shape(ctx: Context, check: CheckSpec, p: CaseParams) -> str:
    def body(case):
        got, expected = _both(ctx, check, p, case, ["output"])
        out, ref = got["output"], expected["output"]
        if tuple(out.shape) != tuple(ref.shape):
            raise CheckFailed(f"output has shape {tuple(out.shape)}, expected {tuple(ref.shape)}"
                              + _shown_build(ctx, check, p))
        if out.dtype != ref.dtype:
            raise CheckFailed(f"output dtype is {str(out.dtype).removeprefix('torch.')}, expected "
                              f"{str(ref.dtype).removeprefix('torch.')}" + _shown_build(ctx, check, p))
    runs = for_all(ctx, check, strategy(ctx, check, p), body, p.max_examples)
    return f"{runs} generated inputs"


class ValuesParams(CaseParams):
    tolerance: Optional[dict[str, ToleranceSpec] | str] = None
    # with `input_dtype` and a float16/bfloat16 expected output (and no `tolerance`): within `ulps` ulp of the
    # reference on the same inputs, and at most `rounded_fraction` of the elements different at all
    ulps: int = Field(1, ge=1, le=64)
    rounded_fraction: float = Field(0.02, gt=0, le=1)
    # Compare with the student's own output for the same case with these inputs instead of with the
    # reference (int32 IDs against int64 ones): the check then sees only the difference it is about.
    baseline: dict[str, dict[str, Any]] = {}

    def check_against(self, challenge, check):
        problems = super().check_against(challenge, check)
        for name, override in self.baseline.items():
            spec = challenge.inputs.get(name)
            if spec is None:
                problems.append((("baseline", name), f"no input named {name!r} under `inputs`"))
            elif set(override) - {"dtype", "value"}:
                problems.append((("baseline", name), "a baseline may only set `dtype` (tensors) or `value` (options)"))
        return problems


def _baseline_case(ctx: Context, case, baseline: dict[str, dict[str, Any]]):
    """The same case with the baseline's inputs: tensors cast to another dtype, options set to a value."""
    from validator.cases import DTYPES, Case

    dims, inputs = dict(case.dims), dict(case.inputs)
    for name, override in baseline.items():
        if "dtype" in override and isinstance(inputs.get(name), torch.Tensor):
            inputs[name] = inputs[name].to(DTYPES[override["dtype"]])
        if "value" in override:
            if name in dims:
                dims[name] = override["value"]
            if name in inputs:
                inputs[name] = override["value"]
    return Case(dims=dims, inputs=inputs, seed=case.seed, notes=list(case.notes))


def _shown_build(ctx: Context, check: CheckSpec, p: CaseParams) -> str:
    name, entry = entry_of(ctx, check)
    if p.input_dtype:
        held = f", parameters in {str(torch.get_default_dtype()).removeprefix('torch.')}" if entry.kind == "module" else ""
        return f" ({p.input_dtype} inputs{held})"
    if p.dtype and entry.kind == "module":
        return f" (layer built with dtype=torch.{p.dtype}, inputs in {p.dtype})"
    return f" (inputs in {p.dtype})" if p.dtype else ""


def _by_rounding(p: ValuesParams, ref) -> bool:
    """Reduced-precision inputs with a half-precision result and no explicit tolerance: compare in ulps."""
    return (bool(p.input_dtype) and p.tolerance is None and isinstance(ref, torch.Tensor)
            and ref.dtype in (torch.float16, torch.bfloat16))


@register("values", ValuesParams)
def values(ctx: Context, check: CheckSpec, p: ValuesParams) -> str:
    spec_tol = p.tolerance if p.tolerance is not None else ctx.challenge.tolerance

    def body(case):
        if p.baseline:
            name, _ = entry_of(ctx, check)
            dtype = torch.get_default_dtype()
            both = []
            for c in (case, _baseline_case(ctx, case, p.baseline)):
                both.append(run_student(ctx, check, ctx.build_call(
                    name, c, want=["output"], state=_state(ctx, name, c, dtype), train=p.train))["output"])
            got, ref = both
            atol, rtol = tolerance_for(ref.dtype, spec_tol)
            changed = ", ".join(f"{k}: {v.get('dtype', v.get('value'))!r}" for k, v in p.baseline.items())
            problem = mismatch(got, ref, atol=atol, rtol=rtol,
                               what=f"output (compared with your own output for {changed})")
        else:
            got, expected = _both(ctx, check, p, case, ["output"])
            ref = expected["output"]
            if _by_rounding(p, ref):
                problem = rounding_mismatch(got["output"], ref, ulps=p.ulps, fraction=p.rounded_fraction)
            else:
                atol, rtol = tolerance_for(ref.dtype, spec_tol)
                problem = mismatch(got["output"], ref, atol=atol, rtol=rtol)
        if problem:
            raise CheckFailed(problem + _shown_build(ctx, check, p))
    runs = for_all(ctx, check, strategy(ctx, check, p), body, p.max_examples)
    return f"{runs} generated inputs" + (" compared with your own baseline output" if p.baseline else "")


class RaisesParams(CaseParams):
    expect: str
    message_contains: list[str] = []


@register("raises", RaisesParams)
def raises(ctx: Context, check: CheckSpec, p: RaisesParams) -> str:
    name, entry = entry_of(ctx, check)

    def body(case):
        call = ctx.build_call(name, case, want=["output"], state=_state(ctx, name, case, torch.get_default_dtype()),
                              train=p.train)
        ref = ctx.reference_raw(call)
        if ref.get("ok") or p.expect not in ref["exception"]["mro"]:
            raise RuntimeError(f"the reference does not raise {p.expect} for this case (a spec bug)")
        got = ctx.student(call, check.timeout)
        if is_grader_failure(got):
            run_student(ctx, check, call)  # raises GraderFailure with the reason: not the student's exception
        if got.get("ok"):
            out = got.get("output")
            shown = f"a tensor of shape {tuple(out.shape)}" if out is not None else "normally"
            raise CheckFailed(f"returned {shown} instead of raising {p.expect}"
                              + (f": {check.hint}" if check.hint else ""))
        info = got["exception"]
        if p.expect not in info["mro"]:
            raise CheckFailed(f"raised {info['type']}: {info['message']}, expected {p.expect}")
        lowered = info["message"].lower()
        missing = [w for w in p.message_contains if str(w).lower() not in lowered]
        if missing:
            raise CheckFailed(f"raised {p.expect} as expected, but the message {info['message']!r} does not "
                              f"mention {', '.join(map(str, missing))}: say what was wrong and what is allowed")
    runs = for_all(ctx, check, strategy(ctx, check, p), body, p.max_examples)
    return f"{runs} generated inputs raised {p.expect}"
