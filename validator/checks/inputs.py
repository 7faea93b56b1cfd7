"""Inputs as callers really pass them: left unchanged by the call, and views of other storage.

``inputs_unchanged`` calls the layer as generation does (no input requires grad, forward under
``torch.no_grad()``, where autograd raises nothing about writing into a tensor) and compares every argument
with its copy afterwards: a layer that normalises ``x`` in place (``x.float()`` and ``x.to(torch.float32)``
return ``x`` itself when it already is float32) corrupts its caller's tensor, which the residual stream of
a transformer block reads again. ``input_views`` passes non-contiguous views (a transpose, a strided slice, a
broadcast) where every other check passes fresh contiguous tensors: ``x.view(-1, d)`` raises on them,
``x.reshape(-1, d)`` does not.
"""

from __future__ import annotations

from typing import Literal, Optional

import torch

from validator.cases import describe_layout, with_layouts
from validator.checks import register
from validator.checks.behaviour import CaseParams, for_cases, strategy
from validator.checks.common import CheckFailed, entry_of, raise_if_failed, run_student
from validator.compare import mismatch, tolerance_for
from validator.context import Context
from validator.runner import LAYOUTS
from validator.spec.schema import CheckSpec, ToleranceSpec


def _state(ctx: Context, name: str, case, dtype: torch.dtype):
    entry = ctx.challenge.entries[name]
    return ctx.make_state(entry, case.dims, case.seed, dtype) if entry.kind == "module" and entry.parameters else None


def _where(index: list[int]) -> str:
    return f"index {tuple(index)}" if index else "its only element"


class UnchangedParams(CaseParams):
    pass


@register("inputs_unchanged", UnchangedParams, uses_reference=False)
def inputs_unchanged(ctx: Context, check: CheckSpec, p: UnchangedParams) -> str:
    """Every argument holds the same values (and shape) after the call as before it, the call made as in
    generation: no input requires grad, and forward runs under ``torch.no_grad()``."""
    name, entry = entry_of(ctx, check)
    dtype = getattr(torch, p.dtype) if p.dtype else torch.get_default_dtype()

    def body(case):
        call = ctx.build_call(name, case, want=["output", "inputs_changed"], state=_state(ctx, name, case, dtype),
                              train=p.train, inference=True, input_dtype=getattr(torch, p.dtype) if p.dtype else None,
                              init_kwargs={"dtype": dtype} if p.dtype and entry.kind == "module" else None)
        got = run_student(ctx, check, call, "calling your code under torch.no_grad()")
        changed = got.get("inputs_changed") or []
        if changed:
            parts = []
            for c in changed:
                arg = entry.call[c["index"]]
                if "shape_was" in c:
                    parts.append(f"`{arg}` changed shape from {tuple(c['shape_was'])} to {tuple(c['shape_now'])}")
                else:
                    parts.append(f"`{arg}` has {c['changed']} of its {c['of']} values changed (at {_where(c['first'])} "
                                 f"{c['was']:.6g} became {c['now']:.6g})" if isinstance(c["was"], float) else
                                 f"`{arg}` has {c['changed']} of its {c['of']} values changed (at {_where(c['first'])} "
                                 f"{c['was']!r} became {c['now']!r})")
            raise CheckFailed(
                "called under torch.no_grad() (as in generation), your code changed its caller's tensor in place: "
                + "; ".join(parts) + ". Compute into new tensors (x * y, not x.mul_(y) or x *= y; ~mask, not "
                "mask.logical_not_()): x.float() and x.to(torch.float32) return x itself when it already is "
                "float32, so an in-place operation on the result writes into the caller's x (which, in a transformer "
                "block, the residual connection reads again)")
    runs = for_cases(ctx, check, p, body)
    return f"{runs} generated calls under torch.no_grad(): every input unchanged"


class ViewsParams(CaseParams):
    # the kinds of view drawn among the inputs: each tensor argument is contiguous or one of these, one at least not
    layouts: list[Literal["transposed", "sliced", "expanded"]] = list(LAYOUTS)
    tolerance: Optional[dict[str, ToleranceSpec] | str] = None
    backward: bool = True

    def check_against(self, challenge, check):
        problems = super().check_against(challenge, check)
        _, entry = challenge.entry_for(check)
        if not any(challenge.inputs[n].type in ("float", "token_ids", "mask") for n in entry.call):
            problems.append(((), "input_views needs an entry that takes a tensor"))
        if self.stand_ins:
            problems.append((("stand_ins",), "input_views grades the layer's own handling of its inputs: no stand-ins"))
        if not self.layouts:
            problems.append((("layouts",), "name at least one kind of view"))
        return problems


@register("input_views", ViewsParams)
def input_views(ctx: Context, check: CheckSpec, p: ViewsParams) -> str:
    """Tensor arguments passed as non-contiguous views (transposed, strided slices, broadcasts) give the
    reference's output (and a backward that runs)."""
    name, entry = entry_of(ctx, check)
    spec_tol = p.tolerance if p.tolerance is not None else ctx.challenge.tolerance
    dtype = getattr(torch, p.dtype) if p.dtype else torch.get_default_dtype()

    def make(where):
        return with_layouts(strategy(ctx, check, p, where), ctx.challenge, entry, tuple(p.layouts))

    def body(case):
        call = ctx.build_call(name, case, want=["output"], state=_state(ctx, name, case, dtype), train=p.train,
                              input_dtype=getattr(torch, p.dtype) if p.dtype else None,
                              init_kwargs={"dtype": dtype} if p.dtype and entry.kind == "module" else None)
        for arg, item in zip(entry.call, call["inputs"]):
            if arg in case.layouts:
                item["layout"] = dict(case.layouts[arg])
        ref = ctx.reference_call(call)["output"]
        if p.backward and isinstance(ref, torch.Tensor) and ref.dtype.is_floating_point and ref.numel():
            gen = torch.Generator().manual_seed(case.seed ^ 0x5EED)
            call = dict(call, grad_output=torch.randn(ref.shape, generator=gen, dtype=torch.float64).to(ref.dtype))
        shown = "; ".join(f"{arg} as {describe_layout(layout, case.inputs[arg].dim())}"
                          for arg, layout in case.layouts.items())
        got = raise_if_failed(ctx, call, ctx.student(call, check.timeout, "calling your code with views"),
                              during=f"with {shown}")
        atol, rtol = tolerance_for(ref.dtype, spec_tol)
        problem = mismatch(got["output"], ref, atol=atol, rtol=rtol)
        if problem:
            raise CheckFailed(f"with {shown}: {problem}: a view holds the same values as a contiguous tensor, only "
                              "laid out differently in memory, so the result must not change")
    runs = for_cases(ctx, check, p, body, make_strategy=make)
    return f"{runs} generated calls with views among the inputs ({', '.join(p.layouts)})"
