"""Gradient tests: vjp against the reference, exact zeros, gradcheck, and purity of forward.

Gradients are compared in float64 by default: summing repeated rows in a
different order is a legitimate float32 difference, and float64 makes it
vanish below any tolerance a real bug could hide under. The layer is built
under ``torch.set_default_dtype(torch.float64)``, not with ``dtype=``: whether
``dtype=`` is honoured is the dtype check's business, so a layer that ignores
it but computes the right gradient passes here. A layer that computes in a
lower precision anyway (a hard-coded float32) is compared at that precision.
"""

from __future__ import annotations

from typing import Any, Optional

import torch
from pydantic import model_validator

from validator.cases import case_strategy
from validator.checks import for_all, register
from validator.checks.behaviour import CaseParams, PrecisionParams, for_cases, precision_noise, stand_in_extra, strategy
from validator.checks.common import CheckFailed, entry_of, raise_if_failed, run_student
from validator.compare import mismatch, precision_atol, tolerance_for
from validator.context import CheckSkipped, Context
from validator.stats import fmt
from validator.spec.schema import CheckSpec

NOT_CONNECTED = ("the output is not connected to {what} in the autograd graph: did you use .data, "
                 ".detach(), torch.no_grad() or build the output with torch.tensor(...)?")


NOT_REGISTERED = ("`{what}` is not a registered nn.Parameter of your layer (the `parameters` check says what it "
                  "is instead), so backward gives it no .grad and an optimizer would never train it")


class ZeroGradientParams(CaseParams):
    dtype: Optional[str] = "float64"
    # rows another check owns (the padding row): left out of this comparison
    exclude_rows: dict[str, list[int]] = {}

    @model_validator(mode="after")
    def _no_input_dtype(self):
        if self.input_dtype:
            raise ValueError("gradient checks take `dtype` (inputs and parameters, float64 by default); "
                             "`input_dtype` is for the value, shape and relation checks")
        return self


class GradientParams(ZeroGradientParams, PrecisionParams):
    """A gradient compared with the reference's; ``precision`` as for values (see PrecisionParams). ``runs_only``:
    only that backward runs and gives every weight and input a finite gradient of its shape (a float32 backward
    that breaks where float64 does not), the values being another gradient check's to judge."""

    runs_only: bool = False


def _grad_call(ctx: Context, check: CheckSpec, p: ZeroGradientParams, case):
    name, entry = entry_of(ctx, check)
    dtype = getattr(torch, p.dtype) if p.dtype else torch.get_default_dtype()
    state = ctx.make_state(entry, case.dims, case.seed, dtype) if entry.kind == "module" else None
    # only a module is built: a function takes its weight as an input, already in the check's dtype
    probe = ctx.build_call(name, case, want=["output"], state=state, train=p.train,
                           input_dtype=dtype, default_dtype=p.dtype if entry.kind == "module" else None,
                           **stand_in_extra(p))
    ref_out = ctx.reference_call(probe)["output"]
    gen = torch.Generator().manual_seed(case.seed ^ 0x5EED)
    grad_output = torch.randn(ref_out.shape, generator=gen, dtype=torch.float64).to(ref_out.dtype)
    call = dict(probe, grad_output=grad_output, want=["output", "param_grads", "input_grads"])
    return call


def _looked_up(ctx: Context, call: dict) -> set[int]:
    entry = ctx.challenge.entries[call["entry"]]
    ids: set[int] = set()
    for name, item in zip(entry.call, call["inputs"]):
        if ctx.challenge.inputs[name].type == "token_ids" and isinstance(item["value"], torch.Tensor):
            ids.update(int(v) for v in item["value"].reshape(-1).tolist())
    return ids


def _without_rows(grad, ref, rows: list[int]):
    if not rows or not isinstance(grad, torch.Tensor) or grad.dim() == 0 or tuple(grad.shape) != tuple(ref.shape):
        return grad, ref
    keep = torch.ones(ref.shape[0], dtype=torch.bool)
    keep[[r for r in rows if -ref.shape[0] <= r < ref.shape[0]]] = False
    return grad[keep], ref[keep]


EXACT_GRAD_TOL = 1e-12


def _grads(result: dict) -> list:
    """Every gradient of a result, parameters (by name) then inputs, in a fixed order."""
    return [v for _, v in sorted((result.get("param_grads") or {}).items())] + list(result.get("input_grads") or [])


def _compare_grads(ctx: Context, call: dict, got: dict, expected: dict, exact_zero_only: bool = False,
                   exclude_rows: dict[str, list[int]] | None = None, precision: tuple[str, float] | None = None,
                   noise: float = 0.0) -> None:
    """``precision``: (dtype, margin) of a check whose contract lets the layer compute in that dtype, and
    ``noise`` the relative error the reference computed in it shows on this case (see PrecisionParams)."""
    entry = ctx.challenge.entries[call["entry"]]
    pairs = _grad_pairs(ctx, call, got, expected)
    registered = got.get("param_grads")
    for pname in expected.get("param_grads") or {}:
        if isinstance(registered, dict) and pname not in registered:
            raise CheckFailed(NOT_REGISTERED.format(what=pname))
    if not got.get("output_requires_grad"):
        what = " and ".join(p[1] for p in pairs) or "the weights"
        raise CheckFailed("the output does not require grad: " + NOT_CONNECTED.format(what=what))
    for label, what, ref, grad in pairs:
        if grad is None and isinstance(registered, dict) and what in expected.get("param_grads", {}) \
                and what not in registered:
            raise CheckFailed(NOT_REGISTERED.format(what=what))
        if grad is None:
            raise CheckFailed(f"{label} is None after backward: " + NOT_CONNECTED.format(what=what))
        if exact_zero_only:
            zero = ref == 0
            leaked = (grad != 0) & zero if tuple(grad.shape) == tuple(ref.shape) else None
            if leaked is None:
                raise CheckFailed(f"{label} has shape {tuple(grad.shape)}, expected {tuple(ref.shape)}")
            if leaked.any():
                rows = sorted({int(i[0]) for i in leaked.nonzero()[:8]}) if grad.dim() else []
                looked_up = _looked_up(ctx, call)
                highs = {str(s.high) for s in ctx.challenge.inputs.values() if s.type == "token_ids"}
                table = str((entry.parameters or {}).get(what, [None])[0]) in highs  # rows indexed by token ID
                if rows and table and looked_up and set(rows) <= looked_up:
                    why = ("these rows are looked up, yet they must get exactly zero gradient (a padding row "
                           "never trains): mask their gradient, e.g. with a hook or by zeroing them in backward")
                else:
                    why = "only rows that were used may receive gradient"
                raise CheckFailed(f"{label}: {int(leaked.sum())} entries that should get exactly zero gradient "
                                  f"are nonzero (rows {rows}): {why}")
            continue
        grad, ref = _without_rows(grad, ref, (exclude_rows or {}).get(what, []))
        atol, rtol = tolerance_for(ref.dtype, ctx.challenge.tolerance if ctx.challenge.tolerance != "exact"
                                   else "default")
        if ctx.challenge.tolerance == "exact" and ref.dtype == torch.float64 and entry.kind == "autograd_function":
            # A hand-written backward of an exact operation returns a sum of upstream gradients: in float64
            # every order of summation agrees to ~1e-15, while a detour through float32 shows at ~1e-8.
            # (Where autograd writes the backward, a float32 detour is a dtype bug: the dtype checks own it.)
            atol, rtol = EXACT_GRAD_TOL, EXACT_GRAD_TOL
        if isinstance(grad, torch.Tensor) and grad.dtype != ref.dtype and grad.dtype.is_floating_point:
            # computed in another precision (the dtype checks own that): compare at the coarser one
            low = grad if torch.finfo(grad.dtype).eps > torch.finfo(ref.dtype).eps else ref
            atol, rtol = tolerance_for(low.dtype)
            atol, rtol = atol * 10, rtol * 10
        if precision and ref.dtype in (torch.float32, torch.float64):
            atol = precision_atol(atol, ref, noise, precision[1], precision[0])
        problem = mismatch(grad, ref, atol=atol, rtol=rtol, what=label, check_dtype=False)
        if problem:
            raise CheckFailed(problem)


@register("gradient", GradientParams)
def gradient(ctx: Context, check: CheckSpec, p: GradientParams) -> str:
    def body(case):
        call = _grad_call(ctx, check, p, case)
        expected = ctx.reference_call(call)
        noise = precision_noise(ctx, call, expected, p.precision, _grads) if p.precision else 0.0
        got = run_student(ctx, check, call, "running your forward and backward")
        if p.runs_only:
            _grads_exist(ctx, call, got, expected)
            return
        _compare_grads(ctx, call, got, expected, exclude_rows=p.exclude_rows,
                       precision=(p.precision, p.precision_margin) if p.precision else None, noise=noise)
    runs = for_cases(ctx, check, p, body)
    if p.runs_only:
        return f"{runs} generated inputs: backward ran, every gradient finite and of its shape"
    return f"{runs} generated inputs, random upstream gradients"


def _grad_pairs(ctx: Context, call: dict, got: dict, expected: dict) -> list[tuple[str, str, Any, Any]]:
    """(label, name, the reference's gradient, the student's or None) for every gradient the reference has: each
    parameter's by name, each input's by its position in the entry's call."""
    entry = ctx.challenge.entries[call["entry"]]
    theirs = got.get("param_grads") or {}
    pairs = [(f"{name}.grad", name, ref, theirs.get(name)) for name, ref in (expected.get("param_grads") or {}).items()]
    inputs = got.get("input_grads") or []
    for i, ref in enumerate(expected.get("input_grads") or []):
        if ref is not None:
            pairs.append((f"{entry.call[i]}.grad", entry.call[i], ref, inputs[i] if i < len(inputs) else None))
    return pairs


def _grads_exist(ctx: Context, call: dict, got: dict, expected: dict) -> None:
    """Every gradient the reference has, the student's run has too: present, of the same shape, finite."""
    if not got.get("output_requires_grad"):
        raise CheckFailed("the output does not require grad: " + NOT_CONNECTED.format(what="the weights and x"))
    for _, what, ref, grad in _grad_pairs(ctx, call, got, expected):
        if grad is None:
            raise CheckFailed(f"{what}.grad is None after backward: " + NOT_CONNECTED.format(what=what))
        if tuple(grad.shape) != tuple(ref.shape):
            raise CheckFailed(f"{what}.grad has shape {tuple(grad.shape)}, expected {tuple(ref.shape)}")
        if grad.is_floating_point() and not bool(torch.isfinite(grad).all()):
            raise CheckFailed(f"{what}.grad holds inf or NaN after a float32 backward on ordinary inputs")


@register("untouched_rows_zero", ZeroGradientParams)
def untouched_rows_zero(ctx: Context, check: CheckSpec, p: ZeroGradientParams) -> str:
    def body(case):
        call = _grad_call(ctx, check, p, case)
        expected = ctx.reference_call(call)
        got = run_student(ctx, check, call)
        _compare_grads(ctx, call, got, expected, exact_zero_only=True)
    runs = for_cases(ctx, check, p, body)
    return f"{runs} generated inputs"


class GradcheckParams(CaseParams):
    dims: dict[str, int] = {}
    max_elements: int = 96
    eps: float = 1e-6
    atol: float = 1e-5
    rtol: float = 1e-3
    probes: int = 3
    max_examples: Optional[int] = 8


@register("gradcheck", GradcheckParams)
def gradcheck(ctx: Context, check: CheckSpec, p: GradcheckParams) -> str:
    """Finite differences of the student's own forward against the student's own backward, in float64.

    Run by the grader from plain tensors (the worker only evaluates): J^T r for random r, first projected
    on two random directions (torch.autograd.gradcheck's fast mode: four forward calls), and element by
    element (two calls per element) only where a projection disagrees, so a failure names its element.
    """
    name, entry = entry_of(ctx, check)
    f64 = torch.float64

    def body(case):
        state = ctx.make_state(entry, case.dims, case.seed, f64) if entry.kind == "module" else None
        base = ctx.build_call(name, case, want=["output"], state=state, input_dtype=f64,
                              default_dtype="float64" if entry.kind == "module" else None)
        out = run_student(ctx, check, base)["output"]
        if out.dtype != f64:
            raise CheckSkipped(f"built under torch.set_default_dtype(torch.float64) with float64 inputs, your "
                               f"{name} returned {str(out.dtype).removeprefix('torch.')}, so finite differences "
                               "cannot be taken precisely enough; the dtype checks report where the precision "
                               "is lost (a tensor created with a hard-coded dtype?)")
        # the differentiable leaves: module parameters, or inputs marked requires_grad
        leaves: list[tuple[str, torch.Tensor]] = []
        if state:
            leaves += [(f"param:{k}", v) for k, v in state.items()]
        for i, item in enumerate(base["inputs"]):
            if item["requires_grad"]:
                leaves.append((f"input:{i}", item["value"]))
        total = sum(v.numel() for _, v in leaves)
        if total == 0 or out.numel() == 0 or total > p.max_elements:
            return
        gen = torch.Generator().manual_seed(case.seed)
        probes = [torch.randn(out.shape, generator=gen, dtype=f64) for _ in range(p.probes)]
        analytic = []
        for r in probes:
            got = run_student(ctx, check, dict(base, grad_output=r, want=["output", "param_grads", "input_grads"]))
            missing = [k.split(":", 1)[1] for k, _ in leaves
                       if k.startswith("param:") and k.split(":", 1)[1] not in (got.get("param_grads") or {})]
            if missing:
                raise CheckFailed(NOT_REGISTERED.format(what=missing[0]))
            if not got.get("output_requires_grad"):
                raise CheckFailed("the output does not require grad: " + NOT_CONNECTED.format(what="the weights"))
            flat = []
            for key, v in leaves:
                kind, ident = key.split(":", 1)
                if kind == "param" and ident not in (got.get("param_grads") or {}):
                    raise CheckFailed(NOT_REGISTERED.format(what=ident))
                g = (got.get("param_grads") or {}).get(ident) if kind == "param" else (got.get("input_grads") or [])[int(ident)]
                flat.append(torch.zeros_like(v).reshape(-1) if g is None else g.reshape(-1).to(f64))
            analytic.append(torch.cat(flat))

        def perturbed(steps: list[torch.Tensor]) -> dict:
            """``base`` with each leaf moved by its step."""
            call, inputs = dict(base), [dict(it) for it in base["inputs"]]
            moved_state = dict(state or {})
            for (key, v), step in zip(leaves, steps):
                kind, ident = key.split(":", 1)
                if kind == "param":
                    moved_state[ident] = v + step
                else:
                    inputs[int(ident)] = dict(inputs[int(ident)], value=v + step)
            call["inputs"] = inputs
            if state is not None:
                call["state"] = moved_state
            return call

        def derivatives(steps: list[list[torch.Tensor]], doing: str) -> list[torch.Tensor]:
            """Central differences of the output along each step, flattened: (f(x + h) - f(x - h)) / 2 eps."""
            calls = [perturbed([sign * h for h in hs]) for hs in steps for sign in (1.0, -1.0)]
            results = ctx.student_many(calls, check.timeout, doing)
            out = []
            for k in range(0, len(results), 2):
                for call, r in ((calls[k], results[k]), (calls[k + 1], results[k + 1])):
                    raise_if_failed(ctx, call, r, "forward raised on a slightly perturbed weight (finite differences)")
                out.append(((results[k]["output"] - results[k + 1]["output"]) / (2 * p.eps)).reshape(-1))
            return out

        # First along a few random directions u (torch.autograd.gradcheck's fast mode): r . (J u), from two
        # forward calls, against (J^T r) . u. Far below the element-wise tolerance, a disagreement sends the
        # case to the element-wise Jacobian (two calls per element), which alone decides and names the element.
        directions = [[torch.randn(v.shape, generator=gen, dtype=f64) for _, v in leaves] for _ in range(2)]
        along = derivatives([[p.eps * u for u in us] for us in directions], "evaluating directional derivatives")
        if all(_agrees_along(a, r.reshape(-1), torch.cat([u.reshape(-1) for u in us]), ju)
               for us, ju in zip(directions, along) for r, a in zip(probes, analytic)):
            return
        steps = []
        for li, (_, v) in enumerate(leaves):
            for j in range(v.numel()):
                step = [torch.zeros_like(w) for _, w in leaves]
                step[li].view(-1)[j] = p.eps
                steps.append(step)
        jac = torch.stack(derivatives(steps, "evaluating finite differences"), dim=1)  # (out_numel, total)
        for r, a in zip(probes, analytic):
            numeric = jac.T @ r.reshape(-1)
            if not torch.allclose(a, numeric, atol=p.atol, rtol=p.rtol):
                k = int((a - numeric).abs().argmax())
                if entry.kind == "autograd_function":
                    remedy = ("check that backward returns the gradient of what forward computes, "
                              "accumulating repeated IDs")
                else:
                    remedy = ("autograd differentiates what forward computes, so look for a step autograd "
                              "cannot see: a value changed in place, through .data, or via a Python number")
                raise CheckFailed(
                    f"the gradient autograd computes disagrees with finite differences of your own forward: for "
                    f"a random upstream gradient, element {k} of the flattened gradient is {fmt(float(a[k]))} "
                    f"analytically and {fmt(float(numeric[k]))} numerically (atol {p.atol:g}, rtol {p.rtol:g}): "
                    + remedy)
    runs = for_all(ctx, check, lambda: case_strategy(ctx.challenge, entry, p.inputs, fixed_dims=p.dims) if p.dims
                   else strategy(ctx, check, p), body, p.max_examples)
    return f"{runs} float64 cases, {p.probes} random directions each"


def _agrees_along(analytic: torch.Tensor, r: torch.Tensor, u: torch.Tensor, ju: torch.Tensor) -> bool:
    """Whether ``(J^T r) . u`` (the student's backward) equals ``r . (J u)`` (finite differences of the
    student's forward) to within float64 central differences' own error, a millionth of the sizes involved:
    a correct layer lands far inside, a gradient wrong by the element-wise tolerance far outside."""
    lhs, rhs = float(analytic @ u), float(r @ ju)
    scale = float(analytic.norm() * u.norm()) + float(r.norm() * ju.norm())
    return abs(lhs - rhs) <= 1e-6 * scale + 1e-9


@register("forward_pure", CaseParams, uses_reference=False)
def forward_pure(ctx: Context, check: CheckSpec, p: CaseParams) -> str:
    name, entry = entry_of(ctx, check)

    def body(case):
        state = ctx.make_state(entry, case.dims, case.seed, torch.get_default_dtype()) if entry.kind == "module" else None
        call = ctx.build_call(name, case, want=["output", "params_after"], state=state, train=p.train)
        got = run_student(ctx, check, call)
        for pname, before in (got.get("params_before") or {}).items():
            after = got["params_after"][pname]
            if tuple(after.shape) != tuple(before.shape) or not torch.equal(torch.nan_to_num(after), torch.nan_to_num(before)):
                raise CheckFailed(f"forward changed `{pname}` in place: a lookup must only read the weights "
                                  "(an in-place op such as mul_, clamp_ or index_put_ on the parameter changes them)")
    runs = for_cases(ctx, check, p, body)
    return f"{runs} generated inputs"
