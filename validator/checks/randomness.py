"""The global random stream: a layer draws its initial values from it, and leaves it to the caller.

``torch.manual_seed(0)`` inside a constructor passes every statistical init check (the values it draws
have the right distribution) but makes every layer start alike: in a SwiGLU built from such a ``Linear``,
``w1 == w3``; in a block, the four attention projections are one matrix. It also resets the caller's
stream, so every later draw of the program (the next layer, dropout masks) is the same whatever seed the
caller set. ``rng_stream`` builds the layer after two different seeds and compares what the generator gives
next, and compares the parameters the contract draws independently.
"""

from __future__ import annotations

import math

import torch

from validator.cases import fixed_case
from validator.checks import register
from validator.checks.common import CheckFailed, OverrideParams, entry_of, probe_dims, raise_if_failed
from validator.context import Context
from validator.spec.schema import CheckSpec

SAME_DRAWS = 0.999  # |correlation| of two independent draws of n >= 8 values exceeds this with probability < 1e-9


class RngParams(OverrideParams):
    # construction draws from the global generator (random initial values); false for a layer with none
    consumes: bool = True
    # contract parameters drawn independently of each other: no two may hold the same draws
    independent: list[str] = []

    def check_against(self, challenge, check):
        problems = super().check_against(challenge, check)
        _, entry = challenge.entry_for(check)
        if entry.kind != "module":
            problems.append(((), "rng_stream builds the layer: the entry must be a module"))
        for i, name in enumerate(self.independent):
            if name not in entry.parameters:
                problems.append((("independent", i), f"{name!r} is not among the entry's parameters "
                                 f"({', '.join(entry.parameters) or 'none'})"))
        if len(self.independent) == 1:
            problems.append((("independent",), "name two parameters or more (each pair is compared)"))
        return problems


def same_draws(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Whether two parameters hold the same random draws, up to a scale (the same stream cut to two shapes, or
    scaled by two standard deviations): the first ``min(numel)`` values are equal or perfectly correlated."""
    n = min(a.numel(), b.numel())
    if n < 8:
        return False
    x = a.detach().reshape(-1)[:n].to(torch.float64)
    y = b.detach().reshape(-1)[:n].to(torch.float64)
    if torch.equal(x, y):
        return True
    x, y = x - x.mean(), y - y.mean()
    denom = math.sqrt(float((x * x).sum()) * float((y * y).sum()))
    return denom > 0 and abs(float((x * y).sum())) / denom > SAME_DRAWS


@register("rng_stream", RngParams, uses_reference=False, not_through_adapter=(
    "{function} builds your layer and loads the grader's weights in one call, so the random draws of your "
    "constructor alone cannot be told apart"))
def rng_stream(ctx: Context, check: CheckSpec, p: RngParams) -> str:
    """Constructing the layer draws from torch's global generator (``consumes``), never reseeds it, and gives the
    parameters the contract draws independently different values."""
    name, entry = entry_of(ctx, check)
    dims = {**probe_dims(ctx), **p.dims}
    case = fixed_case(ctx.challenge, entry, dims=dims, seed=0, overrides=p.inputs)
    base = ctx.check_seed(check.id) % (2**31)
    seeds = (base, base + 7919)
    calls = [ctx.build_call(name, case, want=["params", "construct_only", "rng"], seed=s) for s in seeds]
    results = ctx.student_many(calls, check.timeout, "building your layer twice")
    for call, r in zip(calls, results):
        raise_if_failed(ctx, call, r)
    shown = ", ".join(f"{k}={v}" for k, v in case.dims.items() if k in ctx.challenge.dims)
    built = f"{ctx.label(name)}({shown})"
    first, second = (r.get("rng") or {} for r in results)
    if torch.equal(first.get("next"), second.get("next")):
        raise CheckFailed(
            f"after torch.manual_seed({seeds[0]}) and after torch.manual_seed({seeds[1]}), building {built} leaves "
            "torch's global generator in the same state: the constructor reseeds it (torch.manual_seed inside the "
            "layer). Every layer then starts from the same draws, and every later random number of the program "
            "(the next layer's weights, dropout masks) no longer depends on the seed the caller set; draw from the "
            "global generator as it is, and leave seeding to the caller")
    if p.consumes and not first.get("consumed"):
        raise CheckFailed(
            f"building {built} drew nothing from torch's global generator (its state is the same before and after), "
            "though its parameters start random: a private generator, or a saved and restored state "
            "(torch.random.fork_rng), makes every layer built after the same seed start alike, and ignores the "
            "caller's stream; initialise with nn.init.* on the global generator")
    params = results[0].get("params") or {}
    alike, small = [], []
    for i, a in enumerate(p.independent):
        for b in p.independent[i + 1:]:
            if a not in params or b not in params:
                continue
            if min(params[a].numel(), params[b].numel()) < 8:
                small.append(f"{a}/{b}")  # too few values to tell draws apart: said in the verdict, not judged
            elif same_draws(params[a], params[b]):
                alike.append(f"`{a}` and `{b}`")
    if alike:
        raise CheckFailed(
            f"{built} starts with the same random draws in {', '.join(alike)} (equal, or equal up to a scale): each "
            "parameter must be its own draw from the global generator. A sublayer that reseeds the generator before "
            "initialising (torch.manual_seed in Linear.__init__) makes them all alike, and gradient descent keeps "
            "identical units identical")
    return (f"{built}: the global generator is " + ("drawn from" if first.get("consumed") else "untouched")
            + ", never reseeded" + (f"; {', '.join(p.independent)} independent draws" if p.independent else "")
            + (f" (not compared, under 8 values at these dims: {', '.join(small)})" if small else ""))
