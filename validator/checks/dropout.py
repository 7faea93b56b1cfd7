"""Dropout, checked statistically: train-mode outputs against the same layer in eval mode.

With the same weights, every element of a train-mode output must be either 0
(dropped) or the eval-mode value divided by ``1 - p`` (inverted dropout keeps
the expected value). The dropped fraction is tested against Binomial(n, p)
with a threshold from a false-failure budget: a correct layer fails by bad
luck with probability at most ``false_failure`` on any seed. The
deterministic sub-tests (eval matches the reference, the scale of kept
values, a fresh mask per call, no mask shared across a whole axis) cannot
fail a correct layer except with astronomically small probability.
"""

from __future__ import annotations

import math
from typing import Any

import torch

from validator.cases import fixed_case
from validator.checks import register
from validator.checks.common import CheckFailed, entry_of, run_student
from validator.checks.modules import BuildParams
from validator.compare import mismatch
from validator.context import Context
from validator.spec.schema import CheckSpec
from validator.stats import z_for

SUBTESTS = 1  # only the dropped fraction is random; the budget is not split


class DropoutParams(BuildParams):
    rate: float
    option: str = "dropout"
    shapes: dict[str, list[int | str]] = {}
    calls: int = 2
    false_failure: float = 1e-6
    dtype: str = "float64"

    def check_against(self, challenge, check):
        problems = super().check_against(challenge, check)
        if not 0 < self.rate < 1:
            problems.append((("rate",), f"rate must be in (0, 1), got {self.rate}"))
        if self.option not in challenge.options():
            problems.append((("option",), f"{self.option!r} is not an option (an input of type value that an "
                             "entry is built with)"))
        if not 0 < self.false_failure <= 1e-3:
            problems.append((("false_failure",), "false_failure must be in (0, 1e-3]"))
        if self.calls < 2:
            problems.append((("calls",), "calls must be at least 2 (a fresh mask per call is one of the tests)"))
        return problems


def dropped_fraction_bound(n: int, rate: float, false_failure: float) -> float:
    """Half-width of the acceptance band for the dropped fraction of n Bernoulli(rate) draws.

    Normal approximation of the binomial, plus a 1/n continuity margin; with n in
    the thousands and rate in (0.05, 0.95) the approximation error is far below
    the margin, so P(fail | correct) <= false_failure.
    """
    return z_for(false_failure / SUBTESTS) * math.sqrt(rate * (1 - rate) / n) + 1.0 / n


@register("dropout", DropoutParams)
def dropout(ctx: Context, check: CheckSpec, p: DropoutParams) -> str:
    name, entry = entry_of(ctx, check)
    dtype = getattr(torch, p.dtype)
    overrides: dict[str, Any] = {**p.inputs, p.option: {**p.inputs.get(p.option, {}), "value": p.rate}}
    seed = ctx.check_seed(check.id)
    case = fixed_case(ctx.challenge, entry, dims=p.dims or None, shapes=p.shapes or None, seed=seed % 2**31,
                      overrides=overrides)
    state = ctx.make_state(entry, case.dims, case.seed, dtype) if entry.kind == "module" else None
    # built under the default dtype, not dtype=: honouring dtype= is the dtype check's business
    base = ctx.build_call(name, case, want=["output"], state=state, input_dtype=dtype, default_dtype=p.dtype)
    eval_call = dict(base, train=False)
    eval_again = dict(base, train=False, seed=case.seed + 104729)
    train_calls = [dict(base, train=True, seed=case.seed + 7919 * (i + 1)) for i in range(p.calls)]
    expected = ctx.reference_call(eval_call)["output"]
    results = [run_student(ctx, check, eval_call, "running your layer in eval mode")]
    again = run_student(ctx, check, eval_again, "running your layer in eval mode")["output"]
    results += [run_student(ctx, check, c, "running your layer in training mode") for c in train_calls]
    rate = p.rate

    own_eval = results[0]["output"]
    problem = mismatch(own_eval, expected, atol=1e-10, rtol=1e-9, what="eval-mode output", check_dtype=False)
    if problem:
        # Dropout in eval mode shows as zeros or as outputs that change from call to call; any other
        # difference from the reference is a value bug that the value checks own. Dropout itself is
        # judged against the layer's own eval-mode output.
        zeroed = (own_eval.to(torch.float64) == 0) & (expected.to(torch.float64) != 0) \
            if tuple(own_eval.shape) == tuple(expected.shape) else None
        random_eval = tuple(again.shape) != tuple(own_eval.shape) or not torch.equal(again, own_eval)
        if random_eval or (zeroed is not None and int(zeroed.sum()) > 0.05 * zeroed.numel()):
            raise CheckFailed(f"with {p.option}={rate}, {problem}: in eval mode (module.eval()) dropout must be the "
                              "identity; check self.training, or use nn.functional.dropout(x, p, self.training)")
    ref = own_eval.to(torch.float64)
    live = ref != 0
    n_live = int(live.sum())
    if n_live == 0:
        raise RuntimeError("the eval-mode output is all zeros: choose dims/inputs with nonzero outputs (a spec bug)")

    masks = []
    for i, r in enumerate(results[1:]):
        out = r["output"]
        if tuple(out.shape) != tuple(ref.shape):
            raise CheckFailed(f"training-mode output has shape {tuple(out.shape)}, eval mode gave {tuple(ref.shape)}")
        out = out.to(torch.float64)
        dropped = (out == 0) & live
        kept = ~dropped & live
        scaled = ref / (1 - rate)
        wrong = kept & ~torch.isclose(out, scaled, rtol=1e-9, atol=1e-12)
        if wrong.any():
            k = int(wrong.reshape(-1).nonzero()[0])
            got, want, plain = float(out.reshape(-1)[k]), float(scaled.reshape(-1)[k]), float(ref.reshape(-1)[k])
            if math.isclose(got, plain, rel_tol=1e-9):
                why = "kept values are not rescaled: inverted dropout divides them by 1 - p so the expected value is unchanged"
            elif math.isclose(got, plain / rate, rel_tol=1e-6):
                why = "kept values are divided by p: p is the probability of dropping, so divide by 1 - p"
            else:
                why = ("kept values must equal the eval-mode value divided by 1 - p (is dropout applied to the "
                       "final sum, after the positional term?)")
            raise CheckFailed(f"with {p.option}={rate} in training mode, {int(wrong.sum())} of {n_live} elements "
                              f"are neither 0 nor eval/(1-p): e.g. {got:.6g} where eval mode gives {plain:.6g} "
                              f"and eval/(1-p) = {want:.6g}: {why}")
        masks.append(dropped)

    if masks[0].any() and all(torch.equal(masks[0], m) for m in masks[1:]):
        raise CheckFailed(f"with {p.option}={rate}, {len(masks)} training-mode calls dropped exactly the same "
                          "elements: draw a fresh random mask on every call (from torch's generator)")
    flat = masks[0].reshape(-1, masks[0].shape[-1]) if masks[0].dim() else masks[0].reshape(1, 1)
    live_rows = live.reshape(flat.shape).all(dim=-1)
    rows = flat[live_rows]
    if rows.shape[0] > 1 and rows.shape[1] > 1:
        if bool((rows == rows[0]).all()) and bool(rows[0].any()):
            raise CheckFailed(f"with {p.option}={rate}, every token dropped the same features: one mask of shape "
                              "(embedding_dim,) was broadcast over the tokens; each element needs its own draw")
        if bool((rows == rows[:, :1]).all()) and bool(rows.any()):
            raise CheckFailed(f"with {p.option}={rate}, each token was dropped or kept as a whole: the mask was "
                              "drawn per token and broadcast over the features; each element needs its own draw")
    n = n_live * len(masks)
    observed = sum(int(m.sum()) for m in masks) / n
    band = dropped_fraction_bound(n, rate, p.false_failure)
    summary = (f"dropped fraction {observed:.4f} over {n} elements (expected {rate:g} ± {band:.4f}, "
               f"false-failure probability {p.false_failure:g})")
    if abs(observed - rate) > band:
        hint = (" — that is 1 - p: p is the probability of dropping, not of keeping" if abs(observed - (1 - rate)) <= band
                else " — no element was dropped: is dropout skipped in training mode?" if observed == 0 else "")
        raise CheckFailed(f"with {p.option}={rate} in training mode, {summary}{hint}")
    return summary + f"; kept values scaled by 1/(1-p); eval mode is the identity; {len(masks)} different masks"
