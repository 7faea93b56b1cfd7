"""Statistics for initialisation checks, with thresholds from a false-failure budget.

Every threshold is derived for a stated probability that a correct
implementation fails (``false_failure``, split evenly over the sub-tests), so
a correct layer fails by bad luck less often than that, on any seed.
- bounds and atoms: deterministic (a correct sampler never leaves its support).
- mean: normal approximation of the sample mean, z from the budget.
- std: delta-method normal approximation of the sample std, z from the budget,
  with a 10% margin for the approximation (n is in the hundreds of thousands).
- tail mass: binomial proportion beyond the parent's ±2 sigma, z from the budget.
- KS distance: the Dvoretzky-Kiefer-Wolfowitz inequality, which is exact:
  P(D > eps) <= 2 exp(-2 n eps^2).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from statistics import NormalDist

import torch

from validator.results import Histogram

_N = NormalDist()
SUBTESTS = 5


def fmt(x: float, digits: int = 6) -> str:
    """A number as a person writes it: no -6.05798e-18 where the value is 0 up to rounding."""
    if x != x or x in (float("inf"), float("-inf")):
        return str(x)
    if abs(x) < 1e-12:
        return "0"
    return f"{x:.{digits}g}"


@dataclass(frozen=True)
class Distribution:
    family: str
    mean: float = 0.0
    std: float = 1.0
    a: float | None = None
    b: float | None = None
    value: float = 0.0

    @staticmethod
    def from_spec(spec: dict, shape: tuple[int, ...]) -> "Distribution":
        family = spec["family"]
        if family in ("xavier_uniform", "xavier_normal"):
            fan_out, fan_in = shape[0], (shape[1] if len(shape) > 1 else 1)
            gain = float(spec.get("gain", 1.0))
            if family == "xavier_uniform":
                bound = gain * math.sqrt(6.0 / (fan_in + fan_out))
                return Distribution("uniform", a=-bound, b=bound)
            std = gain * math.sqrt(2.0 / (fan_in + fan_out))
            if spec.get("truncate") is not None:  # cut at +-truncate standard deviations (CS336's Linear: 3)
                cut = float(spec["truncate"]) * std
                return Distribution("truncated_normal", std=std, a=-cut, b=cut)
            return Distribution("normal", std=std)
        if family == "uniform":
            return Distribution("uniform", a=float(spec["a"]), b=float(spec["b"]))
        if family == "normal":
            return Distribution("normal", mean=float(spec.get("mean", 0.0)), std=float(spec["std"]))
        if family == "truncated_normal":
            return Distribution("truncated_normal", mean=float(spec.get("mean", 0.0)),
                                std=float(spec["std"]), a=float(spec["a"]), b=float(spec["b"]))
        if family == "constant":
            return Distribution("constant", value=float(spec.get("value", 0.0)))
        raise ValueError(f"unknown distribution family {family!r}")

    # -- exact quantities ------------------------------------------------------
    def support(self) -> tuple[float, float]:
        if self.family == "uniform" or self.family == "truncated_normal":
            return float(self.a), float(self.b)
        if self.family == "constant":
            return self.value, self.value
        return -math.inf, math.inf

    def cdf(self, x: torch.Tensor) -> torch.Tensor:
        """The distribution function at each value of ``x``, in float64 (computed in place on one copy: the KS
        test takes it at every value of a quarter-million sample, on every init check of every submission)."""
        if self.family == "constant":
            return (x >= self.value).to(torch.float64)
        out = x.to(torch.float64, copy=True)
        if self.family == "uniform":
            return out.sub_(self.a).div_(self.b - self.a).clamp_(0, 1)
        out.sub_(self.mean).div_(self.std * math.sqrt(2)).erf_().add_(1).mul_(0.5)
        if self.family == "truncated_normal":
            lo, hi = _N.cdf((self.a - self.mean) / self.std), _N.cdf((self.b - self.mean) / self.std)
            out.sub_(lo).div_(hi - lo).clamp_(0, 1)
        return out

    def moments(self) -> tuple[float, float, float]:
        """(mean, variance, fourth central moment), by quadrature where no closed form is handy."""
        if self.family == "normal":
            return self.mean, self.std**2, 3 * self.std**4
        if self.family == "uniform":
            w = self.b - self.a
            return (self.a + self.b) / 2, w * w / 12, w**4 / 80
        if self.family == "constant":
            return self.value, 0.0, 0.0
        return _truncated_normal_moments(self.mean, self.std, float(self.a), float(self.b))

    def describe(self) -> str:
        if self.family == "truncated_normal":
            return f"truncated normal (mean {self.mean:g}, std {self.std:g}, cut at [{self.a:g}, {self.b:g}])"
        if self.family == "normal":
            return f"normal (mean {self.mean:g}, std {self.std:g})"
        if self.family == "uniform":
            return f"uniform on [{self.a:.6g}, {self.b:.6g}]"
        return f"constant {self.value:g}"


@lru_cache(maxsize=64)
def _truncated_normal_moments(mean: float, std: float, a: float, b: float) -> tuple[float, float, float]:
    """A truncated normal's (mean, variance, fourth central moment) by quadrature on 400,001 points: about
    20 ms, and an init check asks twice per parameter, so each distribution is integrated once a process."""
    x = torch.linspace(a, b, 400_001, dtype=torch.float64)
    pdf = torch.exp(-0.5 * ((x - mean) / std) ** 2)
    pdf /= torch.trapezoid(pdf, x)
    m = float(torch.trapezoid(x * pdf, x))
    m = 0.0 if abs(m) < 1e-12 * max(std, 1.0) else m  # quadrature noise of a symmetric cut
    var = float(torch.trapezoid((x - m) ** 2 * pdf, x))
    m4 = float(torch.trapezoid((x - m) ** 4 * pdf, x))
    return m, var, m4


def _bound_slack(lo: float, hi: float) -> float:
    """How close to a bound counts as on it (float rounding of the bound itself)."""
    return 1e-6 * max(1.0, abs(lo) if math.isfinite(lo) else 1.0, abs(hi) if math.isfinite(hi) else 1.0)


def z_for(alpha: float) -> float:
    """Two-sided normal quantile: P(|Z| > z) = alpha."""
    return _N.inv_cdf(1 - alpha / 2)


class Sample:
    """A sample's values ascending, in float64, sorted once for every test and picture of one check.

    Counts against a threshold are binary searches of the sorted values: a quarter million values
    compared, masked and summed for each count took more time than the tests themselves.
    """

    def __init__(self, values: torch.Tensor):
        flat = values.detach().reshape(-1)
        self.raw = flat  # in its own dtype and order: the mean and std are summed as the layer laid the values out
        self.sorted = _ascending(flat).to(torch.float64)
        self.n = self.sorted.numel()

    @classmethod
    def of(cls, values: "torch.Tensor | Sample") -> "Sample":
        return values if isinstance(values, Sample) else cls(values)

    def all_finite(self) -> bool:
        """NaN sorts last, infinities at the ends: the ends say it."""
        return self.n == 0 or bool(torch.isfinite(self.sorted[[0, -1]]).all())

    def finite(self) -> torch.Tensor:
        return self.sorted if self.all_finite() else self.sorted[torch.isfinite(self.sorted)]

    def count_below(self, t: float, *, inclusive: bool = False, within: torch.Tensor | None = None) -> int:
        """How many values are < t (<= t when ``inclusive``), of ``within`` (sorted) or of the sample."""
        values = self.sorted if within is None else within
        where = torch.tensor([t], dtype=torch.float64)
        return int(torch.searchsorted(values, where, right=inclusive)[0])

    def count_above(self, t: float, *, inclusive: bool = False, within: torch.Tensor | None = None) -> int:
        values = self.sorted if within is None else within
        return values.numel() - self.count_below(t, inclusive=not inclusive, within=values)

    def count_near(self, t: float, slack: float, *, within: torch.Tensor | None = None) -> int:
        """How many values lie within ``slack`` of ``t``."""
        return (self.count_below(t + slack, inclusive=True, within=within)
                - self.count_below(t - slack, within=within))


INITIALISE_IN_PLACE = ("initialise it in place in the layer's constructor, as the contract says (a model that "
                       "initialises its layers afterwards, with self.apply(...), leaves a layer built on its own "
                       "uninitialised)")


def distribution_problems(sample: "torch.Tensor | Sample", dist: Distribution,
                          false_failure: float) -> tuple[list[str], list[str]]:
    """Run the sub-tests; return (problems, facts) as sentences for the report."""
    s = Sample.of(sample)
    n = s.n
    problems: list[str] = []
    facts: list[str] = []
    if n == 0:
        return ["the parameter is empty, nothing to test"], facts
    if not s.all_finite():
        bad = int((~torch.isfinite(s.sorted)).sum())
        return [f"{bad} values are NaN or infinite: was the tensor left uninitialised (torch.empty)?"], facts
    x = s.raw.to(torch.float64)
    alpha = false_failure / SUBTESTS
    z = z_for(alpha)
    mu, var, m4 = dist.moments()
    sigma = math.sqrt(var)
    mean, std = float(x.mean()), float(x.std())

    if dist.family == "constant":
        bad = n - s.count_near(dist.value, 0.0)
        if bad:
            problems.append(f"{bad} of {n} values differ from {dist.value:g}")
        return problems, facts

    if sigma > 0 and float(s.sorted[0]) == float(s.sorted[-1]):
        return [f"all {n} values are {float(s.sorted[0]):g}: nothing was drawn (a tensor left as torch.empty or "
                "torch.Tensor(n, d) made it holds whatever its memory held, often zeros; or a constant fill); "
                + INITIALISE_IN_PLACE], facts

    largest = max(abs(float(s.sorted[0])), abs(float(s.sorted[-1])))
    # a million times the distribution's scale: no sampler's tail, nor a plausible slip of units (x1000 has the
    # std message below); memory that was never written
    if sigma > 0 and largest > 1e6 * (abs(mu) + sigma):
        return [f"values as large as {largest:.4g} where the distribution's standard deviation is {sigma:.3g}: the "
                "tensor looks uninitialised (torch.empty keeps whatever its memory held); " + INITIALISE_IN_PLACE], \
            facts
    # values within 1e-30 of zero but not zero: no sampler of a scale above that draws one (its chance is ~1e-30 /
    # scale a value), leftover memory (denormals, bits of integers read as floats) holds them often
    tiny = int(((s.raw != 0) & (s.raw.abs() < 1e-30)).sum()) if sigma > 1e-20 else 0
    if tiny:
        return [f"{tiny} of {n} values are nonzero yet within 1e-30 of zero (min {float(s.sorted[0]):.4g}, max "
                f"{float(s.sorted[-1]):.4g}), which no draw makes: the tensor looks uninitialised (torch.empty keeps "
                "whatever its memory held); " + INITIALISE_IN_PLACE], facts

    lo, hi = dist.support()
    slack = _bound_slack(lo, hi)
    below, above = s.count_below(lo - slack), s.count_above(hi + slack)
    if below or above:
        problems.append(f"{below + above} of {n} values lie outside [{lo:g}, {hi:g}] "
                        f"(min {float(s.sorted[0]):.4g}, max {float(s.sorted[-1]):.4g}): the tails are not truncated")
    if math.isfinite(lo):
        atoms = s.count_near(lo, slack) + s.count_near(hi, slack)
        allowed_atoms = max(5, int(1e-5 * n))
        if atoms > allowed_atoms:
            problems.append(f"{atoms} values sit exactly on the bounds {lo:g} / {hi:g} (a continuous sampler "
                            f"puts almost none there): clamping a normal sample is not truncating it")

    mean_tol = z * sigma / math.sqrt(n)
    facts.append(f"mean {mean:.5f} (expected {fmt(mu)} ± {mean_tol:.4f})")
    if abs(mean - mu) > mean_tol:
        problems.append(f"sample mean is {mean:.5f}, expected {fmt(mu)} ± {mean_tol:.5f}")

    std_sd = math.sqrt(max(m4 - var * var, 0.0) / (4 * var * n)) if var > 0 else 0.0
    std_tol = 1.1 * z * std_sd
    facts.append(f"std {std:.5f} (expected {sigma:.5f} ± {std_tol:.4f})")
    if abs(std - sigma) > std_tol:
        problems.append(f"sample std is {std:.5f}, expected {sigma:.5f} ± {std_tol:.5f}")

    base_std = dist.std if dist.family in ("normal", "truncated_normal") else sigma
    t = 2 * base_std
    p = float(1 - dist.cdf(torch.tensor(mu + t)) + dist.cdf(torch.tensor(mu - t)))
    if 0 < p < 1:
        observed = (s.count_below(mu - t) + s.count_above(mu + t)) / n
        tail_tol = z * math.sqrt(p * (1 - p) / n) + 1.0 / n
        facts.append(f"mass beyond ±{t:.3g}: {observed:.5f} (expected {p:.5f} ± {tail_tol:.4f})")
        if abs(observed - p) > tail_tol:
            problems.append(f"fraction of values beyond {fmt(mu)} ± {t:.3g} is {observed:.5f}, expected {p:.5f} ± {tail_tol:.5f}")

    cdf = dist.cdf(s.sorted)
    steps = torch.arange(1, n + 1, dtype=torch.float64).div_(n)  # the empirical distribution after each value
    above = float(torch.sub(steps, cdf).max())
    below = float(cdf.sub_(torch.arange(0, n, dtype=torch.float64, out=steps).div_(n)).max())  # ...and before it
    d = max(above, below)
    eps = math.sqrt(math.log(2 / alpha) / (2 * n))
    facts.append(f"KS distance {d:.5f} (allowed {eps:.5f})")
    if d > eps:
        problems.append(f"Kolmogorov-Smirnov distance to the {dist.describe()} is {d:.5f}, allowed {eps:.5f}: "
                        "the values do not follow that distribution")
    return problems, facts


def _ascending(x: torch.Tensor) -> torch.Tensor:
    """``x`` (1-D) sorted ascending, in its own dtype (widening after sorting keeps the order and the values);
    NaN last, as both numpy and torch sort it.

    numpy sorts where it can read the tensor's memory: torch.sort on the CPU also computes the indices and
    took 45 ms for a quarter million values where numpy takes 1-3 ms, on every init check of every submission.
    """
    try:
        import numpy as np

        return torch.from_numpy(np.sort(x.cpu().numpy()))
    except (ImportError, RuntimeError, TypeError):  # no numpy, or a dtype numpy lacks (bfloat16)
        return torch.sort(x)[0]


def histogram(sample: "torch.Tensor | Sample", dist: Distribution, *, bins: int = 48,
              title: str = "") -> Histogram | None:
    """The sample's histogram against the share ``dist`` puts in each bin, as plain data (None if empty).

    The bins cover the expected support where it is finite (else the mean ± 4 expected std); values
    beyond it are counted apart, so "clamped" (values exactly on the bounds), "untruncated" (mass outside)
    and "std 0.02 instead of 1" (everything in the middle bins) show in any rendering. Non-finite
    values are not drawn; a note counts them.
    """
    s = Sample.of(sample)
    x = s.finite()  # ascending
    dropped = s.n - x.numel()
    if x.numel() == 0:
        return None
    mean, var, _ = dist.moments()
    lo, hi = dist.support()
    bounded = math.isfinite(lo) and math.isfinite(hi) and hi > lo
    if not bounded:
        if var > 0:
            spread = math.sqrt(var)
        else:  # summed in the layer's order, as the report's std is
            raw = s.raw.to(torch.float64)
            raw = raw[torch.isfinite(raw)] if dropped else raw
            spread = max(float(raw.std()) if raw.numel() > 1 else 0.0, 1e-3)
        lo, hi = mean - 4 * spread, mean + 4 * spread
    edges = torch.linspace(lo, hi, bins + 1, dtype=torch.float64)
    slack = _bound_slack(lo, hi)  # float rounding of a bound is not "outside"
    below, above = s.count_below(lo - slack, within=x), s.count_above(hi + slack, within=x)
    # bin i holds edges[i] <= x < edges[i+1]; the top edge belongs to the last bin; a value within rounding of a
    # bound belongs to the end bin. Counted on the sorted values: how many lie below each inner edge
    inside = x[below: x.numel() - above]
    below_edge = torch.searchsorted(inside, edges[1:-1].contiguous(), right=False)
    counts = torch.diff(below_edge, prepend=below_edge.new_zeros(1), append=below_edge.new_full((1,), inside.numel()))
    cdf = dist.cdf(edges)
    expected = (cdf[1:] - cdf[:-1]).clamp(min=0)
    notes = [f"{dropped} NaN or infinite values are not drawn"] if dropped else []
    on_bounds = [s.count_near(lo, slack, within=x), s.count_near(hi, slack, within=x)] if bounded else None
    return Histogram(title=title, edges=[_short(float(e)) for e in edges], counts=[int(c) for c in counts],
                     expected=[_short(float(p)) for p in expected], below=below,
                     above=above, expected_below=_short(float(cdf[0])),
                     expected_above=_short(float(1 - cdf[-1])), expected_label=dist.describe(),
                     bounds=[lo, hi] if bounded else None, on_bounds=on_bounds, notes=notes)


def _short(x: float) -> float:
    """Nine significant digits: plenty for a picture, and short in the JSON report."""
    return float(f"{x:.9g}")
