"""Initialisation tests: the distribution of a freshly built parameter, independence, reproducibility."""

from __future__ import annotations

import dataclasses
import random
import zlib
from collections import OrderedDict
from typing import Any, Literal, Optional, Union

import torch

from validator.checks import Params, register
from validator.checks.common import CheckFailed, entry_of, probe_dims, raise_if_failed, run_student
from validator.compare import mismatch, tolerance_for
from validator.cases import fixed_case
from validator.context import Context
from validator.reference_side import call_key
from validator.results import Histogram
from validator.spec.schema import CheckSpec, resolve
from validator.stats import Distribution, Sample, distribution_problems, histogram


class InitParams(Params):
    parameter: str
    # a dim is fixed, or [low, high]: drawn from the check's seed, so a layer cannot special-case the probe shape
    dims: dict[str, Union[int, list[int]]] = {}
    # "output": sample what the layer returns for every ID (the table it actually uses), not named_parameters(),
    # which the module controls; for entries whose output for arange(ids) is the table (embeddings)
    sample: Literal["parameter", "output"] = "parameter"
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
        for name, value in self.dims.items():
            if isinstance(value, list) and (len(value) != 2 or not 1 <= value[0] <= value[1]):
                problems.append((("dims", name), f"a drawn dim is [low, high] with 1 <= low <= high, got {value}"))
        if self.sample == "output":
            ids = [n for n in entry.call if challenge.inputs[n].type == "token_ids"]
            if entry.kind != "module" or len(entry.call) != 1 or len(ids) != 1:
                problems.append((("sample",), "sample: output needs a module called with token IDs only "
                                 "(its output for every ID is its table)"))
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


def _dims(ctx: Context, check: CheckSpec, p: InitParams) -> dict[str, int]:
    rng = random.Random(f"{ctx.check_seed(check.id)}/dims")
    drawn = {k: (rng.randint(v[0], v[1]) if isinstance(v, list) else int(v)) for k, v in p.dims.items()}
    return {**probe_dims(ctx), **drawn}


def _through_output(ctx: Context, name: str, p: InitParams) -> bool:
    """Whether the sample is read through forward. Not through an adapter: it loads the grader's test weights
    before it calls forward, so the initial values are read where the constructor left them."""
    return p.sample == "output" and not ctx.adapted(name)


def _build(ctx: Context, check: CheckSpec, p: InitParams, seed: int | None, dims: dict[str, int] | None = None,
           n: int = 0) -> dict:
    """A construct-only call (or, for ``sample: output``, construct and look up every ID);
    ``seed=None`` leaves torch's generator as the previous call left it."""
    name, entry = entry_of(ctx, check)
    dims = dims or probe_dims(ctx)
    case = fixed_case(ctx.challenge, entry, dims=dims, seed=0)
    if _through_output(ctx, name, p):
        call = ctx.build_call(name, case, want=["output", "params"], seed=seed, reseed=seed is not None)
        (ids_name,) = entry.call
        high = int(resolve(ctx.challenge.inputs[ids_name].high, case.dims))
        # one sequence of every ID, shaped (batch=1, seq): the shape every layer of the course takes,
        # so a forward that handles only some ranks costs its shape checks, not the init ones. The IDs come
        # in an order drawn for this call alone (never arange, never the order of another call): a layer
        # cannot recognise the sample and return another table than the one it uses
        order = torch.randperm(high, generator=torch.Generator().manual_seed(_order_seed(ctx, check, seed, n)))
        call["inputs"] = [{"value": order.view(1, high), "requires_grad": False}]
        call["_order"] = order
        return call
    return ctx.build_call(name, case, want=["params", "construct_only"], seed=seed, reseed=seed is not None)


def _order_seed(ctx: Context, check: CheckSpec, seed: int | None, n: int) -> int:
    """A seed for the order of the IDs of one sample: from the run's seed, and different for each call of a check."""
    return zlib.crc32(f"{ctx.check_seed(check.id)}/order/{seed}/{n}".encode())


def _param(ctx: Context, result: dict, p: InitParams, name: str, call: dict | None = None) -> torch.Tensor:
    if _through_output(ctx, name, p):
        t = result.get("output")
        if not isinstance(t, torch.Tensor) or t.dim() == 0 or t.numel() == 0:
            raise CheckFailed(f"looking up every ID as one sequence (token_ids of shape (1, n)) returned "
                              f"{tuple(t.shape) if isinstance(t, torch.Tensor) else type(t).__name__}, "
                              "not a row of values per ID")
        # The statistics judge the values the layer returns, whatever their arrangement: a wrong output
        # shape is the shape checks' business, not the initialisation's.
        order = (call or {}).get("_order")
        t = t.detach()
        if order is not None:
            t = _in_id_order(t, order)
        t = t.reshape(-1, t.shape[-1])
    else:
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


def _in_id_order(t: torch.Tensor, order: torch.Tensor) -> torch.Tensor:
    """``t``, the output for the IDs ``order`` (a permutation), back in ID order: along the sequence axis of the
    contract's ``(1, n, ...)``, else along the last axis of size n (a layer that returns another arrangement)."""
    n = order.numel()
    if t.dim() >= 2 and t.shape[0] == 1 and t.shape[1] == n:
        axis = 1
    else:
        axes = [d for d in range(t.dim()) if t.shape[d] == n]
        if not axes:
            return t
        axis = axes[-1]
    return t.index_select(axis, torch.argsort(order))  # position i holds ID order[i]


def _same_as_weight(table: torch.Tensor, result: dict, p: InitParams) -> None:
    """The rows forward returns for every ID must be the layer's own ``p.parameter`` as it was built: the statistics
    judge the table the layer uses, and that table must be the one it registers (and the grader loads)."""
    own = (result.get("params") or {}).get(p.parameter)
    if not isinstance(own, torch.Tensor) or tuple(own.shape) != tuple(table.shape):
        return  # no such parameter, or of another shape: the `parameters` check says so
    own = own.detach().to(table.dtype)
    atol, rtol = tolerance_for(own.dtype)
    wrong = mismatch(table, own, atol=atol, rtol=rtol, what="the rows forward returns (by ID)", check_dtype=False)
    if wrong:
        raise CheckFailed(f"{wrong.replace(' expected ', ' your `' + p.parameter + '` holds ', 1)}: forward does not "
                          f"return the rows of the layer's own `{p.parameter}` (looked up in a shuffled order of "
                          "every ID, then put back in ID order). The initial statistics are judged on the table the "
                          "layer uses, and it must be the parameter it registers")


def _finite(t: torch.Tensor, what: str) -> None:
    if t.is_floating_point() and not torch.isfinite(t).all():
        bad = int((~torch.isfinite(t)).sum())
        raise CheckFailed(f"{what}: {bad} of {t.numel()} values are NaN or infinite (left uninitialised with "
                          "torch.empty, or a division by zero?); an initialisation must be finite numbers")


def _what(ctx: Context, name: str, p: InitParams) -> str:
    return "the rows your layer returns for every ID" if _through_output(ctx, name, p) else f"`{p.parameter}`"


@register("init_distribution", InitParams, uses_reference=False)
def init_distribution(ctx: Context, check: CheckSpec, p: InitParams) -> str:
    name, entry = entry_of(ctx, check)
    dims = _dims(ctx, check, p)
    call = _build(ctx, check, p, ctx.check_seed(check.id), dims)
    result = run_student(ctx, check, call, "building a large layer")
    sample = _param(ctx, result, p, name, call)
    if _through_output(ctx, name, p):
        _same_as_weight(sample, result, p)
    shown = ", ".join(f"{k}={v}" for k, v in dims.items() if k in p.dims)
    dist = Distribution.from_spec(p.distribution, tuple(ctx.expected_parameters(entry, dims)[p.parameter]))
    what = f"{_what(ctx, name, p)} ({p.parameter} {tuple(sample.shape)}, built with {shown})"
    problems, facts, figure = _judged(sample, dist, p.false_failure, what)
    if figure is not None:
        ctx.figures.append(figure)
    if problems:
        raise CheckFailed(f"{what} should be {dist.describe()}: " + "; ".join(problems))
    return f"{sample.numel()} values ({shown}): " + ", ".join(facts)


# Verdicts on samples already judged in this process, by their values: a class's layers that build a parameter the
# same way, from the same seed, give the same bytes, and sorting and testing a quarter million values was most of
# a grader's init checks (~1/7 of its time on a class). Small entries (sentences and one histogram), a bounded few.
_JUDGED: "OrderedDict[str, tuple[list[str], list[str], Histogram | None]]" = OrderedDict()
_JUDGED_KEPT = 64


def _judged(sample: torch.Tensor, dist: Distribution, false_failure: float,
            title: str) -> tuple[list[str], list[str], Histogram | None]:
    """The sample's problems and facts against ``dist``, and its histogram (drawn for a pass too: a correct
    histogram beside its expected shape teaches what to look for); a pure function of its arguments, remembered
    by a hash of them (the values' bytes, dtype and shape included)."""
    key = (call_key({"values": sample, "dist": repr(dist), "false_failure": false_failure, "title": title})
           if sample.device.type == "cpu" else None)  # a meta tensor has no values to hash
    known = _JUDGED.get(key) if key is not None else None
    if known is None:
        values = Sample(sample)  # sorted once for the tests and the picture
        problems, facts = distribution_problems(values, dist, false_failure)
        known = (problems, facts, histogram(values, dist, title=title))
        if key is not None:
            _JUDGED[key] = known
            if len(_JUDGED) > _JUDGED_KEPT:
                _JUDGED.popitem(last=False)
    else:
        _JUDGED.move_to_end(key)
    problems, facts, figure = known
    return list(problems), list(facts), dataclasses.replace(figure) if figure is not None else None


@register("init_independent", InitParams, uses_reference=False)
def init_independent(ctx: Context, check: CheckSpec, p: InitParams) -> str:
    name, _ = entry_of(ctx, check)
    calls = [_build(ctx, check, p, None, n=0), _build(ctx, check, p, None, n=1)]
    first, second = ctx.student_many(calls, check.timeout, "building two layers")
    for call, r in zip(calls, (first, second)):
        raise_if_failed(ctx, call, r)  # the student's exception where it was raised, or the grader's failure
    a, b = _param(ctx, first, p, name, calls[0]), _param(ctx, second, p, name, calls[1])
    _finite(a, f"{_what(ctx, name, p)} of the first layer")
    _finite(b, f"{_what(ctx, name, p)} of the second layer")
    if a.numel() > 1 and torch.equal(a, b):
        raise CheckFailed(f"two layers built one after the other have identical `{p.parameter}`: initialise from "
                          "torch's global random generator instead of a fixed seed or a constant")
    return "two consecutive layers differ"


@register("init_reproducible", InitParams, uses_reference=False)
def init_reproducible(ctx: Context, check: CheckSpec, p: InitParams) -> str:
    name, _ = entry_of(ctx, check)
    seed = ctx.check_seed(check.id)
    calls = [_build(ctx, check, p, seed, n=0), _build(ctx, check, p, seed, n=1)]
    first, second = ctx.student_many(calls, check.timeout, "building a layer twice")
    for call, r in zip(calls, (first, second)):
        raise_if_failed(ctx, call, r)
    a, b = _param(ctx, first, p, name, calls[0]), _param(ctx, second, p, name, calls[1])
    _finite(a, f"{_what(ctx, name, p)} after torch.manual_seed({seed})")
    if not torch.equal(a, b):
        raise CheckFailed(f"torch.manual_seed({seed}) before construction gave different `{p.parameter}` twice: draw "
                          "the initial values from torch's random generator (no time, no os.urandom, no numpy), and "
                          "write every one (memory left as torch.empty or torch.Tensor(n, d) made it differs from "
                          "build to build)")
    return f"torch.manual_seed({seed}) reproduces the weights"
