"""Initialisation tests: the distribution of a freshly built parameter, independence, reproducibility."""

from __future__ import annotations

from typing import Any, Optional

import torch

from validator.checks import Params, register
from validator.checks.common import CheckFailed, entry_of, probe_case, probe_dims, run_student
from validator.cases import fixed_case
from validator.context import Context
from validator.spec.schema import CheckSpec
from validator.stats import Distribution, distribution_problems


class InitParams(Params):
    parameter: str
    dims: dict[str, int] = {}
    distribution: dict[str, Any] = {}
    false_failure: float = 1e-6
    rows: Optional[list[int]] = None  # restrict to these rows (e.g. a padding row)
    exclude_rows: list[int] = []

    def check_against(self, challenge, check):
        problems = []
        entry = challenge.entries[check.entry or next(iter(challenge.entries))]
        if entry.kind == "module" and self.parameter not in entry.parameters:
            problems.append((("parameter",), f"{self.parameter!r} is not among the entry's parameters "
                             f"({', '.join(entry.parameters)})"))
        if check.test == "init_distribution":
            if not self.distribution:
                problems.append((("distribution",), "init_distribution needs a `distribution`"))
            else:
                try:
                    Distribution.from_spec(self.distribution, (2, 2))
                except (KeyError, ValueError) as exc:
                    problems.append((("distribution",), f"bad distribution: {exc}"))
            if not 0 < self.false_failure <= 1e-3:
                problems.append((("false_failure",), "false_failure must be in (0, 1e-3]"))
        return problems


def _build(ctx: Context, check: CheckSpec, p: InitParams, seed: int | None, dims: dict[str, int] | None = None) -> dict:
    """A construct-only call; ``seed=None`` leaves torch's generator as the previous call left it."""
    name, entry = entry_of(ctx, check)
    case = fixed_case(ctx.challenge, entry, dims=dims or probe_dims(ctx), seed=0)
    return ctx.build_call(name, case, want=["params", "construct_only"], seed=seed, reseed=seed is not None)


def _param(ctx: Context, result: dict, p: InitParams, name: str) -> torch.Tensor:
    student_name = p.parameter  # replies are already renamed to the contract's names
    params = result.get("params") or {}
    if student_name not in params:
        raise CheckFailed(f"no parameter `{p.parameter}` to inspect (found: {', '.join(params) or 'none'})")
    t = params[student_name]
    if p.rows is not None:
        t = t[p.rows]
    elif p.exclude_rows:
        keep = [i for i in range(t.shape[0]) if i not in set(p.exclude_rows)]
        t = t[keep]
    return t


@register("init_distribution", InitParams, uses_reference=False)
def init_distribution(ctx: Context, check: CheckSpec, p: InitParams) -> str:
    name, entry = entry_of(ctx, check)
    dims = {**probe_dims(ctx), **p.dims}
    result = run_student(ctx, check, _build(ctx, check, p, ctx.check_seed(check.id), dims),
                         "building a large layer")
    sample = _param(ctx, result, p, name)
    dist = Distribution.from_spec(p.distribution, tuple(ctx.expected_parameters(entry, dims)[p.parameter]))
    problems, facts = distribution_problems(sample, dist, p.false_failure)
    if problems:
        raise CheckFailed(f"{p.parameter} {tuple(sample.shape)} should be {dist.describe()}: " + "; ".join(problems))
    return f"{sample.numel()} values: " + ", ".join(facts)


@register("init_independent", InitParams, uses_reference=False)
def init_independent(ctx: Context, check: CheckSpec, p: InitParams) -> str:
    name, _ = entry_of(ctx, check)
    calls = [_build(ctx, check, p, None), _build(ctx, check, p, None)]
    first, second = ctx.student_many(calls, check.timeout, "building two layers")
    for r in (first, second):
        if not r.get("ok"):
            raise CheckFailed("building the layer failed")
    a, b = _param(ctx, first, p, name), _param(ctx, second, p, name)
    if a.numel() > 1 and torch.equal(a, b):
        raise CheckFailed(f"two layers built one after the other have identical `{p.parameter}`: initialise from "
                          "torch's global random generator instead of a fixed seed or a constant")
    return "two consecutive layers differ"


@register("init_reproducible", InitParams, uses_reference=False)
def init_reproducible(ctx: Context, check: CheckSpec, p: InitParams) -> str:
    name, _ = entry_of(ctx, check)
    seed = ctx.check_seed(check.id)
    calls = [_build(ctx, check, p, seed), _build(ctx, check, p, seed)]
    first, second = ctx.student_many(calls, check.timeout, "building a layer twice")
    for r in (first, second):
        if not r.get("ok"):
            raise CheckFailed("building the layer failed")
    a, b = _param(ctx, first, p, name), _param(ctx, second, p, name)
    if not torch.equal(torch.nan_to_num(a), torch.nan_to_num(b)):
        raise CheckFailed(f"torch.manual_seed({seed}) before construction gave different `{p.parameter}` twice: draw "
                          "the initial values from torch's random generator (no time, no os.urandom, no numpy)")
    return f"torch.manual_seed({seed}) reproduces the weights"
