"""Inputs as callers really pass them: left unchanged by the call, and views of other storage.

``inputs_unchanged`` calls the layer as generation does (no input requires grad, forward under
``torch.no_grad()``, where autograd raises nothing about writing into a tensor) and compares every argument
with its copy afterwards: a layer that normalises ``x`` in place (``x.float()`` and ``x.to(torch.float32)``
return ``x`` itself when it already is float32) corrupts its caller's tensor, which the residual stream of
a transformer block reads again. Inside a composite the same write lands on a tensor the composite reads
again (RoPE rotating a head's queries in place), so the output under ``torch.no_grad()`` must also be the one
the same call gives with autograd. ``input_views`` passes non-contiguous views (a transpose, a strided slice, a
broadcast) where every other check passes fresh contiguous tensors: ``x.view(-1, d)`` raises on them,
``x.reshape(-1, d)`` does not.
"""

from __future__ import annotations

from typing import Literal, Optional

import torch

from validator.cases import describe_layout, with_layouts
from validator.checks import register
from validator.checks.behaviour import CaseParams, for_cases, strategy
from validator.checks.calls import Unobserved, self_mismatch
from validator.checks.common import CheckFailed, entry_of, raise_if_failed
from validator.compare import tolerance_for
from validator.context import Context, format_exception
from validator.runner import DRAWN_LAYOUTS
from validator.spec.schema import CheckSpec, ToleranceSpec


def _state(ctx: Context, name: str, case, dtype: torch.dtype):
    entry = ctx.challenge.entries[name]
    return ctx.make_state(entry, case.dims, case.seed, dtype) if entry.kind == "module" and entry.parameters else None


def _where(index: list[int]) -> str:
    return f"index {tuple(index)}" if index else "its only element"


class UnchangedParams(CaseParams):
    tolerance: Optional[dict[str, ToleranceSpec] | str] = None

    def check_against(self, challenge, check):
        problems = super().check_against(challenge, check)
        if self.stand_ins:  # a sublayer that writes into its input is what this check is for
            problems.append((("stand_ins",), "inputs_unchanged grades the layer's own code, sublayers included: "
                                             "no stand-ins"))
        return problems


@register("inputs_unchanged", UnchangedParams, uses_reference=False)
def inputs_unchanged(ctx: Context, check: CheckSpec, p: UnchangedParams) -> str:
    """Every argument holds the same values (and shape) after the call as before it, the call made as in
    generation: no input requires grad, and forward runs under ``torch.no_grad()``; and the output is the one the
    same call gives with autograd (an in-place step taken only without autograd overwrites what is read later)."""
    name, entry = entry_of(ctx, check)
    dtype = getattr(torch, p.dtype) if p.dtype else torch.get_default_dtype()
    spec_tol = p.tolerance if p.tolerance is not None else ctx.challenge.tolerance
    seen = Unobserved(ctx, name)

    def body(case):
        call = ctx.build_call(name, case, want=["output", "inputs_changed"], state=_state(ctx, name, case, dtype),
                              train=p.train, inference=True, input_dtype=getattr(torch, p.dtype) if p.dtype else None,
                              init_kwargs={"dtype": dtype} if p.dtype and entry.kind == "module" else None)
        plain = dict(call, inference=False, want=["output"])
        got, usual = ctx.student_many([call, plain], check.timeout, "calling your code under torch.no_grad()")
        changed = (got.get("inputs_changed") or []) if got.get("ok") else []
        if not usual.get("ok") and not changed:
            seen.failed(plain, usual)  # a layer that cannot be called is the other checks' business
            return
        seen.observed += 1
        got = raise_if_failed(ctx, call, got, during="under torch.no_grad(), with no input requiring grad (the same "
                                                     "call with autograd works)")
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
                "block, the residual connection reads again)"
                # the same step, with autograd on, is an error on a tensor that requires grad: the cause of the
                # errors the other checks report
                + ("" if usual.get("ok") else f". With autograd on, the same call fails: "
                                              f"{format_exception(usual, name).splitlines()[0]}"))
        atol, rtol = tolerance_for(usual["output"].dtype, spec_tol) if isinstance(usual.get("output"), torch.Tensor) \
            else (0.0, 0.0)
        problem = self_mismatch(got.get("output"), usual.get("output"), atol=atol, rtol=rtol,
                                what="the output under torch.no_grad() (compared with your own output with autograd)")
        if problem:
            raise CheckFailed(
                f"{problem}: without autograd your code takes another path, which computes something else. An "
                "in-place step that only runs when no gradient is needed (x.mul_(...) under `if not x.requires_grad`) "
                "overwrites a tensor that is read again later, here or in the caller: compute into new tensors")
    for_cases(ctx, check, p, body)
    seen.done()
    return f"{seen.observed} generated calls under torch.no_grad(): every input unchanged"


class ViewsParams(CaseParams):
    # the kinds of view drawn among the inputs: each tensor argument is contiguous or one of these, one at least not
    layouts: list[Literal[DRAWN_LAYOUTS]] = list(DRAWN_LAYOUTS)
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


@register("input_views", ViewsParams, uses_reference=False)
def input_views(ctx: Context, check: CheckSpec, p: ViewsParams) -> str:
    """Tensor arguments passed as non-contiguous views (transposed, strided slices, broadcasts) give the output the
    same values give as contiguous tensors (and a backward that runs). The layer is compared with itself: a
    formula wrong for every layout is the other checks' business.

    Each case is called twice with views: once with the drawn layouts (which may leave a ``.view()`` that merges
    other axes working), and once with every tensor argument strided along every axis, which no ``.view()``
    that merges axes accepts; and ``...`` stands for two leading dims of two or more, so there are axes to merge."""
    name, entry = entry_of(ctx, check)
    spec_tol = p.tolerance if p.tolerance is not None else ctx.challenge.tolerance
    dtype = getattr(torch, p.dtype) if p.dtype else torch.get_default_dtype()
    checked = [0]
    seen = Unobserved(ctx, name)
    roomy = p.model_copy(update={"inputs": _roomy(ctx.challenge, entry, p.inputs)})

    def make(where):
        return with_layouts(strategy(ctx, check, roomy, where), ctx.challenge, entry, tuple(p.layouts))

    def body(case):
        plain = ctx.build_call(name, case, want=["output"], state=_state(ctx, name, case, dtype), train=p.train,
                               input_dtype=getattr(torch, p.dtype) if p.dtype else None,
                               init_kwargs={"dtype": dtype} if p.dtype and entry.kind == "module" else None)
        contiguous = ctx.student(plain, check.timeout)
        if not contiguous.get("ok"):
            seen.failed(plain, contiguous)  # the same values, contiguous, fail too: the other checks own that
            return
        seen.observed += 1
        ref = contiguous["output"]
        call = dict(plain, inputs=[dict(item, layout=dict(case.layouts[arg])) if arg in case.layouts else item
                                   for arg, item in zip(entry.call, plain["inputs"])])
        grad = None
        if p.backward and isinstance(ref, torch.Tensor) and ref.dtype.is_floating_point and ref.numel():
            gen = torch.Generator().manual_seed(case.seed ^ 0x5EED)
            grad = torch.randn(ref.shape, generator=gen, dtype=torch.float64).to(ref.dtype)
            if grad.dim() and grad.shape[0] >= 2:  # the upstream gradient a sum hands over: a broadcast view
                call["grad_layout"] = {"kind": "expanded", "axis": 0}
                grad = grad.narrow(0, 0, 1).expand(grad.shape).clone()
            call["grad_output"] = grad
        contiguous_backward: list[bool] = []

        def fails_contiguous_too(got: dict) -> bool:
            """Whether a call with views failed where the same call's backward fails on contiguous inputs too: not
            the views' doing (the gradient checks own that). Asked only of a failed call, so a layer that passes
            pays no call for it."""
            if got.get("ok") or grad is None:
                return False
            if not contiguous_backward:
                backward = ctx.student(dict(plain, grad_output=grad), check.timeout)
                contiguous_backward.append(bool(backward.get("ok")))
                if not backward.get("ok"):
                    seen.failed(plain, backward)
            return not contiguous_backward[0]

        got = ctx.student(call, check.timeout, "calling your code with views")
        if fails_contiguous_too(got):
            return
        if not got.get("ok") and WRITES_INTO_BROADCAST in str((got.get("exception") or {}).get("message", "")):
            # an in-place write into an argument, which a broadcast view refuses: inputs_unchanged owns that bug,
            # so the same views are graded again with the broadcasts made strided slices
            call = _without_broadcasts(call)
            got = ctx.student(call, check.timeout, "calling your code with views")
        _same_as_contiguous(ctx, case, entry, call, got, ref, spec_tol)
        strided = _all_strided(call, entry, case)
        if strided is not None:
            got = ctx.student(strided, check.timeout, "calling your code with views")
            if fails_contiguous_too(got):
                return
            _same_as_contiguous(ctx, case, entry, strided, got, ref, spec_tol)
        checked[0] += 1
    for_cases(ctx, check, p, body, make_strategy=make)
    seen.done()
    return f"{checked[0]} generated calls with views among the inputs ({', '.join(p.layouts)}, then all strided), " \
           "each as with contiguous inputs"


def _same_as_contiguous(ctx: Context, case, entry, call: dict, got: dict, ref, spec_tol) -> None:
    shown = "; ".join(f"{arg} as {describe_layout(item['layout'], case.inputs[arg].dim())}"
                      for arg, item in zip(entry.call, call["inputs"]) if item.get("layout"))
    got = raise_if_failed(ctx, call, got, during=f"with {shown} (the same values, contiguous, work)")
    atol, rtol = tolerance_for(ref.dtype, spec_tol) if isinstance(ref, torch.Tensor) else (0.0, 0.0)
    problem = self_mismatch(got["output"], ref, atol=atol, rtol=rtol,
                            what="output (compared with your own output for the same values, contiguous)")
    if problem:
        raise CheckFailed(f"with {shown}: {problem}: a view holds the same values as a contiguous tensor, only "
                          "laid out differently in memory, so the result must not change")


def _roomy(challenge, entry, overrides: dict) -> dict:
    """The check's input overrides, with every ``...`` input given two leading dims of two or more where its
    spec allows (and the check does not say otherwise): a 1-d or 2-d ``x`` has no axes that ``.view(-1, d)``
    would need to merge, so a view bug could not show."""
    out = {name: dict(o) for name, o in overrides.items()}
    for name in entry.call:
        spec = challenge.inputs[name]
        if "..." not in spec.shape or spec.type == "value":
            continue
        mine = out.setdefault(name, {})
        mine.setdefault("min_leading_dims", min(2, mine.get("max_leading_dims", spec.max_leading_dims)))
        mine.setdefault("min_side", max(1, min(2, mine.get("max_side", spec.max_side))))
    return out


def _all_strided(call: dict, entry, case) -> dict | None:
    """The call with every tensor argument of one element or more strided along every axis (None: no such
    argument)."""
    items, any_view = [], False
    for arg, item in zip(entry.call, call["inputs"]):
        value = case.inputs.get(arg)
        if isinstance(value, torch.Tensor) and value.dim() and value.numel():
            item, any_view = dict(item, layout={"kind": "strided"}), True
        items.append(item)
    return dict(call, inputs=items) if any_view else None


# torch's error for a write into a tensor whose elements share memory (an .expand()ed view)
WRITES_INTO_BROADCAST = "refers to a single memory location"


def _without_broadcasts(call: dict) -> dict:
    """The call with every broadcast view (``expanded``) passed as a strided slice along the same axis instead."""
    items = []
    for item in call["inputs"]:
        layout = item.get("layout")
        if layout and layout["kind"] == "expanded":
            item = dict(item, layout={"kind": "sliced", "axis": layout["axis"]})
        items.append(item)
    return dict(call, inputs=items)
