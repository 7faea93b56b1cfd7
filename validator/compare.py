"""Tensor comparison with messages that teach, in the spirit of torch.testing.assert_close.

Shape and dtype are compared before values; a value mismatch names how many
elements differ, the worst index with both values, and the tolerance allowed.
"""

from __future__ import annotations

import math

import torch

# (atol, rtol) by dtype: torch.testing's defaults.
DEFAULT_TOLERANCES: dict[torch.dtype, tuple[float, float]] = {
    torch.float64: (1e-7, 1e-7),
    torch.float32: (1e-5, 1.3e-6),
    torch.float16: (1e-5, 1e-3),
    torch.bfloat16: (1e-5, 1.6e-2),
}


class GrowingAtol(float):
    """An absolute tolerance that grows by ``per_step`` with each index along ``axis``.

    It is a float (its value is the tolerance at index 0), so code that only
    knows plain ``atol`` keeps working; :func:`mismatch` widens it per element.
    """

    per_step: float
    axis: int

    def __new__(cls, atol: float, per_step: float, axis: int) -> "GrowingAtol":
        obj = super().__new__(cls, atol)
        obj.per_step = float(per_step)
        obj.axis = int(axis)
        return obj

    def allowed(self, shape: tuple[int, ...]) -> torch.Tensor:
        """The absolute tolerance of every element of a tensor of ``shape``."""
        if not shape:
            return torch.tensor(float(self), dtype=torch.float64)
        axis = self.axis % len(shape)
        index = torch.arange(shape[axis], dtype=torch.float64)
        view = [1] * len(shape)
        view[axis] = shape[axis]
        return (float(self) + self.per_step * index).reshape(view).expand(shape)


class MeasuredAtol(float):
    """An absolute tolerance widened by an allowance measured on the case at hand (``extra``).

    A float (its value is the whole absolute tolerance), so code that knows only plain ``atol``
    keeps working; :func:`mismatch` names the parts and ``why`` the allowance in its message.
    """

    base: float
    extra: float
    why: str

    def __new__(cls, atol: float, extra: float, why: str) -> "MeasuredAtol":
        obj = super().__new__(cls, float(atol) + float(extra))
        obj.base, obj.extra, obj.why = float(atol), float(extra), why
        return obj


def relative_error(coarse: torch.Tensor, fine: torch.Tensor) -> float:
    """``max |coarse - fine| / max |fine|``: how far a lower-precision result lands, relative to the tensor's scale.

    0 for empty or all-zero tensors, and for tensors of different shapes (the comparison reports those).
    """
    if not (isinstance(coarse, torch.Tensor) and isinstance(fine, torch.Tensor)) or coarse.shape != fine.shape \
            or fine.numel() == 0 or not fine.dtype.is_floating_point:
        return 0.0
    f = fine.detach().to(torch.float64)
    scale = float(f.abs().max())
    if not scale or not torch.isfinite(f).all():
        return 0.0
    return float((coarse.detach().to(torch.float64) - f).abs().max()) / scale


def precision_atol(atol: float, expected: torch.Tensor, noise: float, margin: float, precision: str) -> float:
    """``atol`` plus ``margin x noise x max |expected|``: what a computation in ``precision`` may miss on this tensor.

    ``noise`` is the relative error of the reference computed in ``precision`` on the same case (see
    :func:`relative_error`), at least one ``precision`` ulp; non-finite noise (the lower precision overflowed)
    widens nothing.
    """
    eps = torch.finfo(getattr(torch, precision)).eps
    noise = max(noise, eps)
    if not isinstance(expected, torch.Tensor) or expected.numel() == 0 or not expected.dtype.is_floating_point \
            or not math.isfinite(noise):
        return atol
    e = expected.detach().to(torch.float64)
    finite = e[torch.isfinite(e)]
    scale = float(finite.abs().max()) if finite.numel() else 0.0
    extra = margin * noise * scale
    if not extra:
        return atol
    return MeasuredAtol(atol, extra, f"{precision} rounding: {margin:g} x {noise:.2g}, the relative error of the reference "
                                     f"computed in {precision} on this case, x {scale:.3g}, the largest |expected|")


def tolerance_for(dtype: torch.dtype, spec: object = "default") -> tuple[float, float]:
    """Resolve a spec tolerance (``"exact"``, ``"default"`` or a per-dtype table) for a dtype."""
    if spec == "exact" or not (dtype.is_floating_point or dtype.is_complex):
        return 0.0, 0.0
    if isinstance(spec, dict):
        key = str(dtype).removeprefix("torch.")
        entry = spec.get(key)
        if entry is not None:
            get = entry.get if isinstance(entry, dict) else (lambda k, d=None: getattr(entry, k, d))
            atol, rtol = float(get("atol")), float(get("rtol"))
            per_step = float(get("atol_per_step", 0.0) or 0.0)
            if per_step:
                return GrowingAtol(atol, per_step, int(get("axis", -1))), rtol
            return atol, rtol
    return DEFAULT_TOLERANCES.get(dtype, (1e-5, 1.3e-6))


def _shape_problem(actual: object, expected: torch.Tensor, what: str) -> str | None:
    """Not a tensor, or not the expected shape: said before any value is compared."""
    if not isinstance(actual, torch.Tensor):
        return f"{what} is {type(actual).__name__}, expected a tensor of shape {tuple(expected.shape)}"
    if tuple(actual.shape) != tuple(expected.shape):
        return f"{what} has shape {tuple(actual.shape)}, expected {tuple(expected.shape)}"
    return None


def mismatch(actual: object, expected: torch.Tensor, *, atol: float, rtol: float,
             what: str = "output", check_dtype: bool = True) -> str | None:
    """None when ``actual`` matches ``expected``; otherwise a sentence saying how it differs."""
    problem = _shape_problem(actual, expected, what)
    if problem:
        return problem
    if check_dtype and actual.dtype != expected.dtype:
        return (f"{what} has dtype {str(actual.dtype).removeprefix('torch.')}, "
                f"expected {str(expected.dtype).removeprefix('torch.')}")
    if expected.numel() == 0:
        return None
    if actual.dtype == expected.dtype and torch.equal(actual.detach(), expected.detach()):
        return None  # bit-identical (NaN never equals itself, so a NaN still goes on to fail below)
    a = actual.detach().to(torch.float64) if actual.dtype.is_floating_point else actual.detach()
    e = expected.detach().to(torch.float64) if expected.dtype.is_floating_point else expected.detach()
    growing = isinstance(atol, GrowingAtol) and a.dim() > 0
    if not a.dtype.is_floating_point:
        bad = a != e
    elif growing:
        limit = atol.allowed(tuple(a.shape)) + rtol * e.abs()
        bad = ~((a - e).abs() <= limit) & ~((a == e) & torch.isfinite(e))
    else:
        close = torch.isclose(a, e, atol=atol, rtol=rtol, equal_nan=False)
        bad = ~close
    n_bad = int(bad.sum())
    if n_bad == 0:
        return None
    diff = (a - e).abs() if a.dtype.is_floating_point else (a != e).to(torch.float64)
    diff = torch.where(bad, diff.nan_to_num(nan=float("inf")), torch.zeros_like(diff, dtype=diff.dtype))
    flat = int(diff.reshape(-1).argmax())
    index = tuple(int(i) for i in torch.unravel_index(torch.tensor(flat), tuple(a.shape))) if a.dim() else ()
    got, want = a.reshape(-1)[flat].item(), e.reshape(-1)[flat].item()
    pct = 100.0 * n_bad / e.numel()
    text = (f"{what}: {n_bad} of {e.numel()} elements differ ({pct:.3g}%); worst at index "
            f"{list(index)}: got {got:.8g}, expected {want:.8g}")
    if a.dtype.is_floating_point and growing:
        step = index[atol.axis % a.dim()]
        allowed = float(atol) + atol.per_step * step + rtol * abs(want)
        text += (f" (|difference| {abs(got - want):.3g}, allowed {allowed:.3g} = atol {float(atol):g} + "
                 f"{atol.per_step:g} x index {step} along axis {atol.axis} + rtol {rtol:g} x |expected|)")
    elif a.dtype.is_floating_point and isinstance(atol, MeasuredAtol):
        allowed = atol + rtol * abs(want)
        text += (f" (|difference| {abs(got - want):.3g}, allowed {allowed:.3g} = atol {atol.base:g} + rtol {rtol:g} x "
                 f"|expected| + {atol.extra:.3g} ({atol.why}))")
    elif a.dtype.is_floating_point:
        allowed = atol + rtol * abs(want)
        text += f" (|difference| {abs(got - want):.3g}, allowed {allowed:.3g} = atol {atol:g} + rtol {rtol:g} x |expected|)"
    return text


def _steps_apart(got: float, want: float, dtype: torch.dtype) -> str:
    """``, 2 representable values apart``: how far two values of a 16-bit float dtype are in its own steps (a
    relative ulp of 1.004 just below 1.0 is two float16 steps, where the spacing halves)."""
    if dtype not in (torch.float16, torch.bfloat16) or not (math.isfinite(got) and math.isfinite(want)):
        return ""
    bits = torch.tensor([got, want], dtype=dtype).view(torch.int16).to(torch.int64)
    ordered = torch.where(bits < 0, -(bits & 0x7FFF), bits)  # sign-magnitude to a monotone integer line
    steps = abs(int(ordered[0]) - int(ordered[1]))
    return f", {steps} representable {str(dtype).removeprefix('torch.')} value{'s' * (steps != 1)} apart"


def rounding_mismatch(actual: object, expected: torch.Tensor, *, ulps: int = 1, fraction: float = 0.02,
                      what: str = "output") -> str | None:
    """None when ``actual`` equals ``expected`` up to the rounding of ``expected``'s (reduced) precision.

    The reference computes in float32 and rounds once to ``expected.dtype`` (bfloat16: eps 2^-7, float16:
    eps 2^-10). Another float32 formula rounds to the same value except where its float32 result straddles
    a rounding boundary: then it is one ulp away, in a small fraction of the elements (measured: under 1%).
    So every element must lie within ``ulps`` ulp (``ulps * eps * |expected|``, plus the subnormal spacing
    near zero), and at most ``fraction`` of them (at least one) may differ at all. A computation in the
    reduced precision itself rounds several times and is off by an ulp in a large share of the elements.
    ``actual`` is rounded to ``expected.dtype`` first: its dtype is the dtype check's business.
    """
    problem = _shape_problem(actual, expected, what)
    if problem:
        return problem
    n = expected.numel()
    if n == 0:
        return None
    info = torch.finfo(expected.dtype)
    e = expected.detach().to(torch.float64)
    a = actual.detach().to(expected.dtype).to(torch.float64)
    spacing = info.eps * e.abs() + info.smallest_normal * info.eps
    same = (a == e) | (torch.isnan(a) & torch.isnan(e))
    within = ((a - e).abs() <= ulps * spacing) & torch.isfinite(a)
    far = ~same & ~within
    differ = int((~same).sum())
    allowed = max(1, math.ceil(fraction * n))
    if not int(far.sum()) and differ <= allowed:
        return None
    ulp_err = torch.where(same, torch.zeros_like(e), ((a - e).abs() / spacing).nan_to_num(nan=float("inf")))
    flat = int(ulp_err.reshape(-1).argmax())
    index = [int(i) for i in torch.unravel_index(torch.tensor(flat), tuple(e.shape))] if e.dim() else []
    dtype = str(expected.dtype).removeprefix("torch.")
    eps_text = f"eps 2^{int(round(math.log2(info.eps)))} = {info.eps:.3g}"
    got, want = a.reshape(-1)[flat].item(), e.reshape(-1)[flat].item()
    worst = f"worst at index {index}: got {got:.6g}, expected {want:.6g}"
    several = (f"rounding at several steps, i.e. some of the computation ran in {dtype}: all of it, or a step after "
               f"an early cast back (a gain or scale applied to the {dtype} result); compute every step in float32 "
               f"and cast once, at the end")
    if int(far.sum()):
        return (f"{what}: {int(far.sum())} of {n} elements are more than {ulps} ulp of {dtype} ({eps_text} relative) "
                f"away from the reference evaluated on the same {dtype} inputs; {worst} "
                f"({ulp_err.reshape(-1)[flat].item():.4g} ulp{_steps_apart(got, want, expected.dtype)}). "
                f"A float32 computation rounded once to {dtype} is "
                f"within {ulps} ulp everywhere: more means {several}")
    return (f"{what}: {differ} of {n} elements ({100.0 * differ / n:.3g}%) differ from the reference evaluated on "
            f"the same {dtype} inputs, by one ulp of {dtype} ({eps_text} relative); {worst}. A float32 computation "
            f"rounded once to {dtype} differs in at most {allowed} of them ({fraction:.0%}): many one-ulp errors mean "
            f"{several}")
