"""Behaviour tests, differential against the reference: output shape, values, expected errors."""

from __future__ import annotations

from typing import Any, Literal, Optional

import torch
from pydantic import BaseModel, ConfigDict, Field, model_validator

from validator.cases import case_strategy
from validator.checks import for_all, register
from validator.checks.common import CheckFailed, OverrideParams, entry_of, raise_if_failed, run_student
from validator.compare import mismatch, precision_atol, relative_error, rounding_mismatch, tolerance_for
from validator.context import CheckErrored, Context, is_grader_failure
from validator.spec.schema import CheckSpec, ToleranceSpec


FloatName = Literal["float16", "bfloat16", "float32", "float64"]


class CaseParams(OverrideParams):
    """Generated cases: input and dim overrides, dtype, training mode, how many examples.

    ``dtype``: float inputs *and* module parameters in that dtype (the layer built with ``dtype=``).
    ``input_dtype``: float inputs only, cast to that dtype; parameters stay in the default dtype
    (bf16 activations through a float32 layer, as under autocast).

    ``regimes`` lists orderings of dims to cover, each a list of relations that hold together
    (``[[seq_len > max_seq_len, seq_len > embedding_dim], [seq_len > max_seq_len, seq_len <= embedding_dim]]``):
    the check runs its cases once per regime, so a bound compared with the wrong size cannot pass
    by always being drawn on the same side of it.
    """

    dtype: Optional[str] = None
    input_dtype: Optional[FloatName] = None
    train: bool = False
    max_examples: Optional[int] = None
    # contract class name -> grader stand-in (validator/standins.py): both sides build the entry with
    # those sublayers replaced, so the check grades the entry's own wiring whatever the sublayers do
    stand_ins: dict[str, str] = {}

    regimes: list[list[str]] = []

    def check_against(self, challenge, check):
        from validator.cases import holds, parse_relation
        from validator.standins import STAND_INS

        problems = super().check_against(challenge, check)
        for name, which in self.stand_ins.items():
            if which not in STAND_INS:
                problems.append((("stand_ins", name), f"unknown stand-in {which!r}; known: {', '.join(STAND_INS)}"))
        for i, regime in enumerate(self.regimes):
            if not regime:
                problems.append((("regimes", i), "a regime lists at least one relation"))
            fixed = {**{k: v for k, v in challenge.dims.items() if isinstance(v, int)}, **self.dims}
            for j, relation in enumerate(regime):
                try:
                    left, _, right = parse_relation(relation, set(challenge.dims))
                except ValueError as exc:
                    problems.append((("regimes", i, j), str(exc)))
                    continue
                known = all(x.isdigit() or x in fixed for x in (left, right))
                if known and not holds([relation], fixed):
                    problems.append((("regimes", i, j), f"{relation!r} never holds: the check fixes "
                                     + ", ".join(f"{x}={fixed[x]}" for x in (left, right) if x in fixed)))
        return problems

    @model_validator(mode="after")
    def _one_dtype_option(self):
        if self.input_dtype and "dtype" in self.model_fields_set:
            raise ValueError("give `dtype` (inputs and parameters) or `input_dtype` (inputs only), not both")
        return self


def strategy(ctx: Context, check: CheckSpec, p: CaseParams, where: list[str] | None = None):
    _, entry = entry_of(ctx, check)
    cases = case_strategy(ctx.challenge, entry, p.inputs, fixed_dims=p.dims, where=where)
    if p.input_dtype:
        return cases.map(lambda c: in_dtype(c, getattr(torch, p.input_dtype)))
    if not p.dtype:
        return cases
    # float inputs in the check's dtype from the start, so a failing input prints as what was passed
    return cases.map(lambda c: in_dtype(c, getattr(torch, p.dtype)))


def for_cases(ctx: Context, check: CheckSpec, p: CaseParams, body, make_strategy=None) -> int:
    """``for_all`` over the check's cases, once per regime when it declares ``regimes``."""
    make = make_strategy or (lambda where: strategy(ctx, check, p, where))
    if not p.regimes:
        return for_all(ctx, check, lambda: make(None), body, p.max_examples)
    runs = 0
    for regime in p.regimes:
        try:
            runs += for_all(ctx, check, lambda: make(regime), body, p.max_examples, variant=regime)
        except (CheckFailed, CheckErrored) as exc:
            again = type(exc)(f"with {' and '.join(regime)}: {exc}")
            if hasattr(exc, "review"):
                again.review = exc.review
            raise again from None
    return runs


def in_dtype(case, dtype: torch.dtype):
    inputs = {k: (v.to(dtype) if isinstance(v, torch.Tensor) and v.dtype.is_floating_point else v)
              for k, v in case.inputs.items()}
    return case.but(inputs=inputs)


def _state(ctx: Context, name: str, case, dtype: torch.dtype):
    entry = ctx.challenge.entries[name]
    return ctx.make_state(entry, case.dims, case.seed, dtype) if entry.kind == "module" else None


def stand_in_extra(p: CaseParams) -> dict:
    """The call key that builds the entry with the check's stand-in sublayers (none: no key at all)."""
    return {"stand_ins": dict(p.stand_ins)} if getattr(p, "stand_ins", None) else {}


def case_weights(ctx: Context, check: CheckSpec, p: CaseParams, case):
    """The test weights of ``case`` in the check's dtype (None for a function entry); a check that calls the
    layer on transformed copies of one case (same dims, same seed) makes them once and passes them on."""
    name, _ = entry_of(ctx, check)
    return _state(ctx, name, case, getattr(torch, p.dtype) if p.dtype else torch.get_default_dtype())


def case_call(ctx: Context, check: CheckSpec, p: CaseParams, case, want: list[str], state=None) -> dict:
    """The call of the check's entry on ``case`` as its params say: test weights (``state``, else made
    from the case's dims and seed), train or eval mode, the check's dtype for inputs and parameters,
    and its stand-ins. Every case check builds its calls here, so both sides see the same call."""
    name, entry = entry_of(ctx, check)
    dtype = getattr(torch, p.dtype) if p.dtype else None
    return ctx.build_call(name, case, want=want, state=state if state is not None else case_weights(ctx, check, p, case),
                          train=p.train, input_dtype=dtype,
                          init_kwargs={"dtype": dtype} if dtype is not None and entry.kind == "module" else None,
                          **stand_in_extra(p))


def _both(ctx: Context, check: CheckSpec, p: CaseParams, case, want: list[str]) -> tuple[dict, dict]:
    call = case_call(ctx, check, p, case, want)
    expected = ctx.reference_call(call)
    got = run_student(ctx, check, call)
    return got, expected


class ShapeParams(CaseParams):
    """``with_dtype: true``: the output's dtype must equal the reference's too (a check whose title says so:
    "the output has the shape and dtype of x"). Without it only the shape is judged: an output dtype
    is the business of the checks that name it."""

    with_dtype: bool = False


@register("shape", ShapeParams)
def shape(ctx: Context, check: CheckSpec, p: ShapeParams) -> str:
    def body(case):
        got, expected = _both(ctx, check, p, case, ["output"])
        out, ref = got["output"], expected["output"]
        if tuple(out.shape) != tuple(ref.shape):
            raise CheckFailed(f"output has shape {tuple(out.shape)}, expected {tuple(ref.shape)}"
                              + _shown_build(ctx, check, p))
        if p.with_dtype and out.dtype != ref.dtype:
            raise CheckFailed(f"output dtype is {str(out.dtype).removeprefix('torch.')}, expected "
                              f"{str(ref.dtype).removeprefix('torch.')}" + _shown_build(ctx, check, p))
    runs = for_cases(ctx, check, p, body)
    return f"{runs} generated inputs"


class PrecisionParams(CaseParams):
    """``precision: float32``: the contract lets the layer (or one of its parts) compute in float32 whatever
    the dtype it is given, so a float64 result carries float32 rounding and a float32 one carries it
    amplified by the layer, as far as the case's conditioning takes it (a saturated softmax, large values).
    The grader measures that on the case itself: it evaluates the reference in float32 and in float64,
    takes the relative error between the two (the largest difference over the largest value, pooled over
    the tensors compared, at least one float32 ulp), and widens each tensor's absolute tolerance by
    ``precision_margin`` times that, times the tensor's largest |expected|. A composite built from parts
    that promise float32 thus accepts every combination of its parts, while a real bug, off by a sizeable
    fraction of the values, stays far outside.
    """

    precision: Optional[Literal["float32"]] = None
    precision_margin: float = Field(64.0, gt=0)


def at_dtype(call: dict, dtype: torch.dtype) -> dict:
    """The same call with every float tensor (weights, inputs, upstream gradient) and the build in ``dtype``."""
    def cast(v):
        return v.to(dtype) if isinstance(v, torch.Tensor) and v.dtype.is_floating_point else v

    name = str(dtype).removeprefix("torch.")
    out = dict(call, inputs=[dict(item, value=cast(item["value"])) for item in call.get("inputs", [])],
               grad_output=cast(call.get("grad_output")), default_dtype=name)
    if call.get("state"):
        out["state"] = {k: cast(v) for k, v in call["state"].items()}
    if isinstance((call.get("init_kwargs") or {}).get("dtype"), torch.dtype):
        out["init_kwargs"] = dict(call["init_kwargs"], dtype=dtype)
    if call.get("param_dtype"):
        out["param_dtype"] = name
    return out


def precision_noise(ctx: Context, call: dict, expected: dict, precision: str, tensors) -> float:
    """The relative error of the reference computed in ``precision`` against it computed in float64, on ``call``.

    ``expected`` is the reference's result for ``call`` (float32 or float64); the other one is computed here.
    ``tensors(result)`` lists the tensors compared, in a fixed order; the largest relative error among them
    is the case's.
    """
    coarse_dtype = getattr(torch, precision)
    ours = [t for t in tensors(expected) if isinstance(t, torch.Tensor)]
    if not ours or ours[0].dtype not in (coarse_dtype, torch.float64) or coarse_dtype == torch.float64:
        return 0.0
    other = torch.float64 if ours[0].dtype == coarse_dtype else coarse_dtype
    theirs = [t for t in tensors(ctx.reference_call(at_dtype(call, other))) if isinstance(t, torch.Tensor)]
    coarse, fine = (ours, theirs) if other == torch.float64 else (theirs, ours)
    return max((relative_error(c, f) for c, f in zip(coarse, fine)), default=0.0)


class Explanation(BaseModel):
    """A likely cause of a values check's failure (``ValuesParams.explain``)."""
    model_config = ConfigDict(extra="forbid", frozen=True)
    inputs: dict[str, dict[str, Any]]
    says: str


class ValuesParams(PrecisionParams):
    tolerance: Optional[dict[str, ToleranceSpec] | str] = None
    # the output's dtype must equal the reference's too (a check whose title names it: "a float64 weight gives
    # a float64 result"); without it the values are compared at the coarser of the two dtypes' tolerances
    with_dtype: bool = False
    # with `input_dtype` and a float16/bfloat16 expected output (and no `tolerance`): within `ulps` ulp of the
    # reference on the same inputs, and at most `rounded_fraction` of the elements different at all
    ulps: int = Field(1, ge=1, le=64)
    rounded_fraction: float = Field(0.02, gt=0, le=1)
    # Compare with the student's own output for the same case with these inputs instead of with the
    # reference (int32 IDs against int64 ones): the check then sees only the difference it is about.
    baseline: dict[str, dict[str, Any]] = {}
    # Where the output differs from the reference's: likely causes, each the reference on the same case with some
    # inputs changed (`inputs`, as `baseline` changes them, or `{arange: true}`: a tensor replaced by 0 .. n-1
    # along its last dim) and what it means (`says`). An output that equals one of them gets its `says` added
    # to the failure: "your output is RoPE at positions 0 .. n-1: the token_positions passed are ignored".
    explain: list[Explanation] = []

    def check_against(self, challenge, check):
        problems = super().check_against(challenge, check)
        # (where in the spec, the inputs it changes, the changes it may make, the rule that says so)
        changes = [(("baseline",), self.baseline, {"dtype", "value"},
                    "a baseline may only set `dtype` (tensors) or `value` (options)")]
        changes += [(("explain", n), e.inputs, {"dtype", "value", "arange"},
                     "an explanation may set `dtype` or `arange: true` (tensors) or `value` (options)")
                    for n, e in enumerate(self.explain)]
        for where, overrides, allowed, rule in changes:
            for name, override in overrides.items():
                spec = challenge.inputs.get(name)
                if spec is None:
                    problems.append(((*where, name), f"no input named {name!r} under `inputs`"))
                elif set(override) - allowed or (override.get("arange") and spec.type == "value"):
                    problems.append(((*where, name), rule))
        return problems


def _changed_case(case, overrides: dict[str, dict[str, Any]]):
    """The same case with some inputs changed: tensors cast to another dtype (``dtype``) or replaced by
    0 .. n-1 along their last dim (``arange``), options set to a value (``value``)."""
    from validator.cases import DTYPES

    dims, inputs = dict(case.dims), dict(case.inputs)
    for name, override in overrides.items():
        if "dtype" in override and isinstance(inputs.get(name), torch.Tensor):
            inputs[name] = inputs[name].to(DTYPES[override["dtype"]])
        if override.get("arange") and isinstance(inputs.get(name), torch.Tensor) and inputs[name].dim():
            t = inputs[name]
            inputs[name] = torch.arange(t.shape[-1], dtype=t.dtype, device=t.device).expand(t.shape).clone()
        if "value" in override:
            if name in dims:
                dims[name] = override["value"]
            if name in inputs:
                inputs[name] = override["value"]
    return case.but(inputs=inputs, dims=dims)


def _explained(ctx: Context, check: CheckSpec, p: "ValuesParams", case, got, atol: float, rtol: float) -> str:
    """The ``says`` of the first of the check's explanations whose changed case's reference output the student's
    output equals (within the tolerance it missed the reference's by), as a sentence to add; else "". Recording
    a handout's fixtures asks for every case, so that a handout explains as official grading does; a handout
    without a result for it explains nothing, and its miss rejects no example (the failure stands)."""
    for explanation in p.explain:
        changed = _changed_case(case, explanation.inputs)
        if all(torch.equal(a, b) if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) else a == b
               for a, b in ((case.inputs.get(k), changed.inputs.get(k)) for k in explanation.inputs)):
            continue  # the drawn inputs already were the changed ones: that is not what happened
        try:
            ref = ctx.reference_call(case_call(ctx, check, p, changed, ["output"]))["output"]
        except Exception:  # noqa: BLE001 - a handout without it (never a rejected example): the verdict stands
            continue
        if mismatch(got, ref, atol=atol, rtol=rtol, check_dtype=False) is None:
            return f". {explanation.says}"
    return ""


def _shown_build(ctx: Context, check: CheckSpec, p: CaseParams) -> str:
    name, entry = entry_of(ctx, check)
    if p.input_dtype:
        held = f", parameters in {str(torch.get_default_dtype()).removeprefix('torch.')}" if entry.kind == "module" else ""
        return f" ({p.input_dtype} inputs{held})"
    if p.dtype and entry.kind == "module":
        return f" (layer built with dtype=torch.{p.dtype}, inputs in {p.dtype})"
    return f" (inputs in {p.dtype})" if p.dtype else ""


def _coarser(out, ref) -> torch.dtype:
    """The dtype values are compared at: the reference's, or the output's where that is a coarser float
    (a float32 result of a float64 case: its dtype is the dtype checks' business, its values are not)."""
    if isinstance(out, torch.Tensor) and isinstance(ref, torch.Tensor) and out.dtype != ref.dtype \
            and out.dtype.is_floating_point and ref.dtype.is_floating_point \
            and torch.finfo(out.dtype).eps > torch.finfo(ref.dtype).eps:
        return out.dtype
    return ref.dtype if isinstance(ref, torch.Tensor) else torch.get_default_dtype()


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
            for c in (case, _changed_case(case, p.baseline)):
                both.append(run_student(ctx, check, ctx.build_call(
                    name, c, want=["output"], state=_state(ctx, name, c, dtype), train=p.train))["output"])
            got, ref = both
            atol, rtol = tolerance_for(ref.dtype, spec_tol)
            changed = ", ".join(f"{k}: {v.get('dtype', v.get('value'))!r}" for k, v in p.baseline.items())
            problem = mismatch(got, ref, atol=atol, rtol=rtol,
                               what=f"output (compared with your own output for {changed})")
        else:
            call = case_call(ctx, check, p, case, ["output"])
            expected = ctx.reference_call(call)
            got = run_student(ctx, check, call)
            ref = expected["output"]
            if _by_rounding(p, ref):
                problem = rounding_mismatch(got["output"], ref, ulps=p.ulps, fraction=p.rounded_fraction)
            else:
                atol, rtol = tolerance_for(_coarser(got["output"], ref), spec_tol)
                if p.precision and ref.dtype in (torch.float32, torch.float64):
                    noise = precision_noise(ctx, call, expected, p.precision, lambda result: [result.get("output")])
                    atol = precision_atol(atol, ref, noise, p.precision_margin, p.precision)
                problem = mismatch(got["output"], ref, atol=atol, rtol=rtol, check_dtype=p.with_dtype)
                if p.explain and (problem or getattr(ctx.ref, "records", False)):  # (a handout's fixtures hold them)
                    said = _explained(ctx, check, p, case, got["output"], atol, rtol)
                    problem = problem and problem + said
        if problem:
            raise CheckFailed(problem + _shown_build(ctx, check, p))
    runs = for_cases(ctx, check, p, body)
    return f"{runs} generated inputs" + (" compared with your own baseline output" if p.baseline else "")


class RaisesParams(CaseParams):
    expect: str
    message_contains: list[str] = []
    # at least one of these must appear (case-insensitive): "a message that says why" in the student's words
    message_contains_any: list[str] = []


def _message_problem(message: str, p: RaisesParams) -> str | None:
    lowered = message.lower()
    missing = [w for w in p.message_contains if str(w).lower() not in lowered]
    if missing:
        return f"does not mention {', '.join(map(str, missing))}"
    if p.message_contains_any and not any(str(w).lower() in lowered for w in p.message_contains_any):
        return ("is empty" if not message.strip() else
                f"mentions none of {', '.join(map(repr, p.message_contains_any))}")
    return None


@register("raises", RaisesParams)
def raises(ctx: Context, check: CheckSpec, p: RaisesParams) -> str:
    name, entry = entry_of(ctx, check)

    def body(case):
        call = ctx.build_call(name, case, want=["output"], state=_state(ctx, name, case, torch.get_default_dtype()),
                              train=p.train)
        ref = ctx.reference_raw(call)
        if ref.get("ok") or p.expect not in ref["exception"]["mro"]:
            raise RuntimeError(f"the reference does not raise {p.expect} for this case (a spec bug)")
        if _message_problem(ref["exception"].get("message", ""), p):
            raise RuntimeError(f"the reference's {p.expect} message {ref['exception'].get('message', '')!r} "
                               f"{_message_problem(ref['exception'].get('message', ''), p)} (a spec bug)")
        got = ctx.student(call, check.timeout)
        if is_grader_failure(got):
            raise_if_failed(ctx, call, got)  # GraderFailure with the reason: not the student's exception
        if got.get("ok"):
            out = got.get("output")
            shown = f"a tensor of shape {tuple(out.shape)}" if out is not None else "normally"
            raise CheckFailed(f"returned {shown} instead of raising {p.expect}"
                              + (f": {check.hint}" if check.hint else ""))
        info = got["exception"]
        if p.expect not in info["mro"]:
            raise CheckFailed(f"raised {info['type']}: {info['message']}, expected {p.expect}")
        problem = _message_problem(info["message"], p)
        if problem:
            raise CheckFailed(f"raised {p.expect} as expected, but the message {info['message']!r} {problem}: "
                              "say what was wrong and what is allowed")
    runs = for_cases(ctx, check, p, body)
    return f"{runs} generated inputs raised {p.expect}"


class DefaultsParams(ValuesParams):
    """Build (module) or call (function) the entry leaving out ``omit``: the arguments whose
    contract default the check is about. Omitted positional ones must come last."""

    omit: list[str]
    # "explicit": compare with the student's own layer built with every argument given (the check's
    # configuration, which must be the contract's defaults), so only a wrong default fails it;
    # "reference": compare with the reference built the same way
    against: Literal["explicit", "reference"] = "explicit"

    def check_against(self, challenge, check):
        problems = super().check_against(challenge, check)
        name = check.entry or next(iter(challenge.entries))
        entry = challenge.entries.get(name)
        if entry is None:
            return problems
        positional = [str(a) for a in entry.init] if entry.kind == "module" else list(entry.call)
        keywords = list(entry.init_kwargs) if entry.kind == "module" else []
        if not self.omit:
            problems.append((("omit",), "name at least one argument to leave out"))
        for i, arg in enumerate(self.omit):
            if arg not in positional and arg not in keywords:
                problems.append((("omit", i), f"{name} is not built or called with {arg!r} (it takes "
                                              f"{', '.join(positional + keywords) or 'nothing'})"))
        dropped = [a for a in positional if a in self.omit]
        if dropped and positional[len(positional) - len(dropped):] != dropped:
            problems.append((("omit",), f"only trailing positional arguments can be left out: "
                                        f"{', '.join(positional)} ends with {', '.join(positional[-len(dropped):])}"))
        return problems


def _without(call: dict, entry, omit: list[str]) -> dict:
    """``call`` with the omitted arguments left out, so the callee's own defaults apply."""
    call = dict(call)
    if entry.kind == "module":
        keep = len([a for a in entry.init if str(a) not in omit])
        call["init_args"] = call["init_args"][:keep]
        call["init_kwargs"] = {k: v for k, v in call["init_kwargs"].items() if k not in omit}
    else:
        keep = len([a for a in entry.call if a not in omit])
        call["inputs"] = call["inputs"][:keep]
    return call


def _contract_defaults(ctx: Context, name: str, entry, omit: list[str]) -> str:
    """``base=10000.0, dropout=0.0``: the reference's defaults for the omitted arguments, when it is here."""
    import inspect

    target = (getattr(ctx.ref, "namespace", None) or {}).get(name)  # only a live reference has its objects
    if target is None:
        return ", ".join(omit)
    try:
        params = inspect.signature(target.forward if entry.kind == "autograd_function" else target).parameters
    except (TypeError, ValueError):
        return ", ".join(omit)
    shown = []
    for arg in omit:
        param = params.get(arg)
        shown.append(f"{arg}={param.default!r}" if param is not None and param.default is not param.empty else arg)
    return ", ".join(shown)


@register("defaults", DefaultsParams)
def defaults(ctx: Context, check: CheckSpec, p: DefaultsParams) -> str:
    """The entry built (or called) with the contract's defaults for ``omit`` equals the reference built the
    same way: a student's model is built with the defaults, which every other check passes explicitly."""
    name, entry = entry_of(ctx, check)
    spec_tol = p.tolerance if p.tolerance is not None else ctx.challenge.tolerance
    dtype = torch.get_default_dtype()

    def body(case):
        full = ctx.build_call(name, case, want=["output"], state=_state(ctx, name, case, dtype), train=p.train)
        call = _without(full, entry, p.omit)
        expected = ctx.reference_call(call)["output"]
        explicit = ctx.reference_call(full)["output"]
        atol, rtol = tolerance_for(expected.dtype, spec_tol)
        if mismatch(expected, explicit, atol=atol, rtol=rtol):
            raise RuntimeError(f"the reference built without {', '.join(p.omit)} differs from the check's "
                               "configuration: its option values must be the contract's defaults (a spec bug)")
        got = run_student(ctx, check, call)["output"]
        if p.against == "explicit":
            ref = run_student(ctx, check, full)["output"]
            problem = mismatch(got, ref, atol=atol, rtol=rtol,
                               what=f"output (compared with your own output when {', '.join(p.omit)} are given)")
        else:
            problem = mismatch(got, expected, atol=atol, rtol=rtol)
        if problem:
            how = "built" if entry.kind == "module" else "called"
            raise CheckFailed(f"{problem} ({how} without {', '.join(p.omit)}, so the defaults apply: the contract "
                              f"says {_contract_defaults(ctx, name, entry, p.omit)}"
                              + (", in training mode" if p.train else "") + ")")
    runs = for_cases(ctx, check, p, body)
    return f"{runs} generated inputs with the default {', '.join(p.omit)}"
