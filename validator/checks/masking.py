"""Masked positions get weight exactly 0, at any magnitude of the scores.

A finite fill (``masked_fill(~mask, -1e4)``, ``scores - 1e4 * ~mask``) passes every check whose scores are of
ordinary size: exp(-1e4 - max) is 0 in float32. Once the other scores of a row are as large as the fill (all
below -1e4, or a masked score 1e4 above them), the masked key gets weight. ``masked_out`` scales the inputs
(and, for a layer whose scores come from its weights, the projections that make them) to adversarial
magnitudes, changes the inputs at positions a query may not see, and requires that query's output to stay
as it was: with a boolean ``mask`` input, at one key the mask excludes; without one (a causal layer), at every
position after a cut. The student's layer is compared with itself; no reference is needed.

Scaling alone finds a row whose allowed scores are all below the fill only by luck of the drawn values and
mask (a query that sees one key, of the right sign). ``shift`` makes it certain: every key gets the same
vector added, along one excluded query's direction, which lowers all of that query's scores by the same
large amount. Attention is invariant under it (a softmax ignores a shift of its whole row), a finite fill
is not: the query's weight moves to the keys it may not see.
"""

from __future__ import annotations

from typing import Literal, Optional

import torch
from hypothesis import strategies as st
from pydantic import model_validator

from validator.cases import Case
from validator.checks import register
from validator.checks.behaviour import CaseParams, case_call, case_weights, for_cases, strategy
from validator.checks.calls import Unobserved
from validator.checks.common import CheckFailed, entry_of, lone_position_problems
from validator.compare import tolerance_for
from validator.context import Context
from validator.spec.schema import CheckSpec, Strict, ToleranceSpec, resolve


class ShiftSpec(Strict):
    """Which inputs hold the query and key vectors (``(..., queries, d)`` and ``(..., keys, d)``), and how far
    to lower the chosen query's scores before the 1/sqrt(d) scaling."""

    queries: str
    keys: str
    by: float = 1.0e6


class MaskedParams(CaseParams):
    # the boolean mask input (True = may attend), shaped (..., queries, keys); None: causal by position
    mask: Optional[str] = None
    # the inputs indexed by key position, and that axis of each
    keys: dict[str, int]
    # float inputs scaled by each factor in turn: scores far beyond any finite fill
    magnitudes: dict[str, list[float]] = {}
    # contract parameters scaled by a factor, or by each factor of a list in turn (scores grow with the query
    # and key projections; a negative factor on one of them flips every score's sign)
    state_scale: dict[str, float | list[float]] = {}
    # with a ``mask``: one more run in which every key vector gets the same vector added, chosen so that one
    # query the changed key is hidden from has all its scores ``by`` / sqrt(d) below its ordinary ones
    shift: Optional[ShiftSpec] = None
    # the output's query (or position) axis
    output_axis: int = -2
    tolerance: Optional[dict[str, ToleranceSpec] | Literal["exact", "default"]] = None

    @model_validator(mode="after")
    def _factors(self):
        if any(not v or any(f == 0 or f != f for f in v) for v in self.magnitudes.values()):
            raise ValueError("`magnitudes` lists non-zero factors for each input it names")
        if any(not f or any(x == 0 or x != x for x in f) for f in map(_as_factors, self.state_scale.values())):
            raise ValueError("`state_scale` gives non-zero factors for each parameter it names")
        return self

    def check_against(self, challenge, check):
        problems = super().check_against(challenge, check)
        _, entry = challenge.entry_for(check)
        if self.mask is not None and (self.mask not in entry.call or challenge.inputs[self.mask].type != "mask"):
            problems.append((("mask",), f"{self.mask!r} is not a mask input the entry is called with"))
        if not self.keys:
            problems.append((("keys",), "name the inputs indexed by key position"))
        for name in self.keys:
            if name not in entry.call or challenge.inputs[name].type not in ("float", "token_ids"):
                problems.append((("keys", name), f"{name!r} is not a float or token_ids argument of the entry"))
        for name in self.magnitudes:
            if name not in entry.call or challenge.inputs[name].type != "float":
                problems.append((("magnitudes", name), f"{name!r} is not a float argument of the entry"))
        for name in self.state_scale:
            if name not in entry.parameters:
                problems.append((("state_scale", name), f"{name!r} is not among the entry's parameters"))
        if self.shift is not None:
            if self.mask is None:
                problems.append((("shift",), "`shift` needs a `mask` input: it lowers the scores of a query the "
                                             "mask hides the changed key from"))
            for field_name in ("queries", "keys"):
                name = getattr(self.shift, field_name)
                if name not in entry.call or challenge.inputs[name].type != "float":
                    problems.append((("shift", field_name), f"{name!r} is not a float argument of the entry"))
            if self.shift.keys not in self.keys:
                problems.append((("shift", "keys"), f"{self.shift.keys!r} is not among `keys`"))
            if not self.shift.by > 0:
                problems.append((("shift", "by"), "`by` is how far the scores drop: a positive number"))
        if not self.magnitudes and not self.state_scale:
            problems.append(((), "give `magnitudes` or `state_scale`: without either the scaled run repeats the "
                                 "ordinary one, and the check could never fail"))
        if self.mask is not None and self.mask in challenge.inputs:
            problems.extend(lone_position_problems(challenge, self, self.mask, -1,
                                                   "has nothing to mask (every query sees a key)"))
        elif self.mask is None and self.keys:  # causal by position
            first = next(iter(self.keys))
            problems.extend(lone_position_problems(challenge, self, first, self.keys[first]))
        return problems


def _fresh(ctx: Context, case: Case, name: str, shape, dtype, gen: torch.Generator) -> torch.Tensor:
    if dtype.is_floating_point:
        return (torch.randn(shape, generator=gen, dtype=torch.float64) * 3).to(dtype)
    spec = ctx.challenge.inputs[name]
    high = int(resolve(spec.high, case.dims)) if spec.high is not None else 2
    return torch.randint(0, max(high, 1), shape, generator=gen).to(dtype)


def _changed(ctx: Context, case: Case, p: MaskedParams, where, seed: int) -> Case:
    """The case with fresh values at the key positions ``where`` selects (a bool per position) in every key input."""
    gen = torch.Generator().manual_seed(seed)
    inputs = dict(case.inputs)
    for name, axis in p.keys.items():
        value = inputs[name]
        if not isinstance(value, torch.Tensor) or value.dim() == 0:
            continue
        moved = value.movedim(axis, 0).clone()
        picked = where(moved.shape[0])
        if picked.any():
            moved[picked] = _fresh(ctx, case, name, moved[picked].shape, moved.dtype, gen)
        inputs[name] = moved.movedim(0, axis)
    return case.but(inputs=inputs)


def _shifted(case: Case, shift: ShiftSpec, excluded: torch.Tensor) -> Case | None:
    """The case with ``c`` added to every key vector, where ``c = -by * q / |q|^2`` for ``q`` the first query
    (per leading index) in ``excluded``: that query's scores all drop by ``by`` before the 1/sqrt(d) scaling.
    None where no leading index has a query to lower (or the shapes do not line up)."""
    q_all, k_all = case.inputs.get(shift.queries), case.inputs.get(shift.keys)
    if not (isinstance(q_all, torch.Tensor) and isinstance(k_all, torch.Tensor) and q_all.dim() >= 2 and k_all.dim() >= 2):
        return None
    try:
        hidden = torch.broadcast_to(excluded, q_all.shape[:-1])  # (..., queries)
    except RuntimeError:
        return None
    q = q_all.detach().to(torch.float64)
    first = hidden.to(torch.int64).argmax(dim=-1, keepdim=True)  # (..., 1): the first hidden query, if any
    chosen = torch.take_along_dim(q, first.unsqueeze(-1), dim=-2)  # (..., 1, d)
    norm = (chosen * chosen).sum(-1, keepdim=True)
    usable = hidden.any(dim=-1, keepdim=True).unsqueeze(-1) & (norm > 0)
    if not bool(usable.any()):
        return None
    c = torch.where(usable, -shift.by * chosen / norm.clamp_min(1e-300), torch.zeros_like(chosen))
    try:
        moved = (k_all.detach().to(torch.float64) + c).to(k_all.dtype)
    except RuntimeError:
        return None
    if moved.shape != k_all.shape:  # keys broadcast over the queries' leading dims: not this construction's case
        return None
    inputs = dict(case.inputs)
    inputs[shift.keys] = moved
    return case.but(inputs=inputs)


def _as_factors(scale: float | list[float]) -> list[float]:
    return list(scale) if isinstance(scale, list) else [scale]


def _scaled(case: Case, magnitudes: dict[str, list[float]], run: int) -> tuple[Case, str]:
    inputs = dict(case.inputs)
    said = []
    for name, factors in magnitudes.items():
        f = factors[run % len(factors)]
        inputs[name] = (inputs[name].to(torch.float64) * f).to(inputs[name].dtype)
        said.append(f"{name} x {f:g}")
    return case.but(inputs=inputs), ", ".join(said)


@register("masked_out", MaskedParams, uses_reference=False)
def masked_out(ctx: Context, check: CheckSpec, p: MaskedParams) -> str:
    """Changing the inputs at positions a query may not attend to leaves that query's output unchanged, with the
    scores scaled to magnitudes where a finite mask fill no longer gives weight 0. The same change is made at
    ordinary magnitudes first: a layer that leaks there already (no mask at all, the wrong one) is the business
    of the checks of its mask, and this check leaves it to them."""
    name, entry = entry_of(ctx, check)
    runs = max([len(v) for v in p.magnitudes.values()] + [len(_as_factors(v)) for v in p.state_scale.values()] + [1])
    first_key = next(iter(p.keys))
    checked = [0]

    seen = Unobserved(ctx, name)

    def outputs(calls):
        """Both outputs, or None when a call fails (kept: the checks of ordinary calls own that)."""
        results = ctx.student_many(calls, check.timeout)
        for c, r in zip(calls, results):
            if not r.get("ok"):
                seen.failed(c, r)
                return None
        return [r["output"] for r in results]

    def leak(scaled: Case, state, pick: int, shift: bool = False):
        """(the first query whose output changed though it may not see the change, what changed, by how much, the
        tolerance), None when nothing leaked, or NOTHING when there was nothing to compare. ``shift``: first
        lower one excluded query's scores (``p.shift``); NOTHING where that cannot be done."""
        value = scaled.inputs[first_key]
        n = value.shape[p.keys[first_key]] if isinstance(value, torch.Tensor) and value.dim() else 0
        if p.mask is not None:
            mask = scaled.inputs[p.mask]
            key = next((j for j in ((pick + i) % max(n, 1) for i in range(n)) if bool((~mask.select(-1, j)).any())),
                       None)
            if key is None:
                return NOTHING  # the mask lets every query see every key: nothing is masked
            excluded = ~mask.select(-1, key)  # (..., queries): the queries that may not see this key
            if shift:
                scaled = _shifted(scaled, p.shift, excluded)
                if scaled is None:
                    return NOTHING
            other = _changed(ctx, scaled, p, lambda size, j=key: torch.arange(size) == j, scaled.seed ^ 0xC0FFEE)
            what = f"only at key {key}, which the mask excludes for the queries marked False in mask[..., {key}]"
        else:
            if n < 2:
                return NOTHING
            cut = pick % (n - 1)
            other = _changed(ctx, scaled, p, lambda size, c=cut: torch.arange(size) > c, scaled.seed ^ 0xC0FFEE)
            what = f"only at positions after {cut}"
        both = outputs([case_call(ctx, check, p, scaled, ["output"], state),
                         case_call(ctx, check, p, other, ["output"], state)])
        if both is None:
            return NOTHING
        base, changed = both
        if not isinstance(base, torch.Tensor) or base.dim() < 1 or base.shape != changed.shape:
            return NOTHING  # a shape that depends on the values is the shape checks' business
        axis = p.output_axis % base.dim()
        a = base.detach().to(torch.float64).movedim(axis, -1)  # the query (position) axis last
        b = changed.detach().to(torch.float64).movedim(axis, -1)
        if p.mask is not None:
            rest = base.dim() - 1 - axis  # output axes after the query axis (d_v)
            guard = excluded.reshape(excluded.shape[:-1] + (1,) * rest + excluded.shape[-1:])
            guard = torch.broadcast_to(guard, a.shape)
        else:
            guard = torch.zeros(a.shape, dtype=torch.bool)
            guard[..., :cut + 1] = True
        atol, rtol = tolerance_for(base.dtype, p.tolerance if p.tolerance is not None else ctx.challenge.tolerance)
        bad = ~torch.isclose(b, a, atol=float(atol), rtol=rtol, equal_nan=True) & guard
        if not bad.any():
            return None
        worst = float((b - a).abs()[bad].nan_to_num(nan=float("inf")).max())
        return int(bad.nonzero()[0][-1]), what, worst, float(atol), rtol

    def body(case):
        pick = case.extra
        plain_state = case_weights(ctx, check, p, case)
        plain = leak(case, plain_state, pick)
        if plain is not None:
            return  # nothing to see, or it leaks at ordinary magnitudes too (the checks of the mask own that)
        seen.observed += 1
        for run in range(runs + (p.shift is not None)):
            if run == runs:  # the shift: ordinary magnitudes, one excluded query's scores lowered
                how = (f"every {p.shift.keys} vector moved by the same vector, lowering all the scores of a query "
                       f"that may not see the changed key by {p.shift.by:g} / sqrt(d), which a softmax ignores")
                found = leak(case, plain_state, pick, shift=True)
            else:
                factors = {k: (f := _as_factors(v))[run % len(f)] for k, v in p.state_scale.items()}
                state = plain_state
                if state is not None and factors:
                    state = {k: (v * factors[k] if k in factors else v) for k, v in state.items()}
                scaled, how = _scaled(case, p.magnitudes, run)
                how = ", ".join(x for x in (how, ", ".join(f"{k} x {v:g}" for k, v in factors.items())) if x)
                found = leak(scaled, state, pick)
            if found is not None and found is not NOTHING:
                query, what, worst, atol, rtol = found
                raise CheckFailed(
                    f"with {how} (scores far larger than usual), changing the inputs {what} changed the output of "
                    f"query {query} (along output axis {p.output_axis}), which may not see them, by up to {worst:.3g} "
                    f"(allowed {atol:g} + {rtol:g} x |value|); at ordinary magnitudes it does not. An excluded position "
                    "must get weight exactly 0 whatever the scores: a finite fill (masked_fill(~mask, -1e4), or "
                    "adding -1e4) loses once the scores are as large as it, where every allowed score is below -1e4, "
                    "or a masked one is 1e4 above them. Fill with float('-inf') (every query has an allowed key, so no "
                    "row is all -inf)")
        checked[0] += 1

    for_cases(ctx, check, p, body,
              make_strategy=lambda where: st.tuples(strategy(ctx, check, p, where), st.integers(0, 2**16)).map(_attach))
    seen.done()
    scaled = ", ".join([f"{k} scaled by {', '.join(f'{f:g}' for f in v)}" for k, v in p.magnitudes.items()]
                       + [f"{k} scaled by {', '.join(f'{f:g}' for f in _as_factors(v))}" for k, v in p.state_scale.items()]
                       + ([f"{p.shift.keys} shifted to lower a hidden query's scores by {p.shift.by:g} / sqrt(d)"]
                          if p.shift is not None else []))
    return f"{checked[0]} generated inputs ({scaled}): outputs unchanged by what they may not see"


NOTHING = ("nothing to compare",)  # leak(): no masked position, or a call that failed


def _attach(drawn) -> Case:
    case, extra = drawn
    case.extra = extra
    return case
