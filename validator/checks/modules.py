"""Module-level tests: how many parameters a layer has, that it has none, and flags of its output.

Each builds the entry once, with the check's `dims` and option overrides
(`inputs: {positional: {value: none}}`), so one spec can ask the same question
of several configurations of a layer.
"""

from __future__ import annotations

import ast
import operator
from typing import Any

from validator.cases import fixed_case
from validator.checks import register
from validator.checks.common import CheckFailed, OverrideParams, entry_of, probe_dims, run_student
from validator.context import Context
from validator.spec.schema import CheckSpec

_OPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul}


def evaluate(expr: str | int, names: dict[str, Any]) -> int:
    """``vocab_size * embedding_dim + 2 * max_seq_len``: integers, names, + - * and parentheses."""
    if isinstance(expr, int):
        return expr

    def walk(node: ast.AST) -> int:
        if isinstance(node, ast.Expression):
            return walk(node.body)
        if isinstance(node, ast.Constant) and isinstance(node.value, int) and not isinstance(node.value, bool):
            return node.value
        if isinstance(node, ast.Name):
            if node.id not in names:
                raise ValueError(f"unknown name {node.id!r} (known: {', '.join(sorted(names))})")
            return int(names[node.id])
        if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
            return _OPS[type(node.op)](walk(node.left), walk(node.right))
        raise ValueError(f"only integers, names, +, - and * are allowed, got {ast.unparse(node)!r}")

    try:
        tree = ast.parse(str(expr), mode="eval")
    except SyntaxError:
        raise ValueError(f"cannot parse {expr!r}") from None
    return walk(tree)


class BuildParams(OverrideParams):
    """Which configuration to build: dims and option overrides, as in the case tests."""


def _build(ctx: Context, check: CheckSpec, p: BuildParams, want: list[str]) -> tuple[dict, Any, str]:
    name, entry = entry_of(ctx, check)
    case = fixed_case(ctx.challenge, entry, dims={**probe_dims(ctx), **p.dims}, seed=0, overrides=p.inputs)
    options = {k: case.dims[k] for k in ctx.challenge.options() if k in case.dims}
    shown = ", ".join(f"{k}={v!r}" for k, v in {**{k: case.dims[k] for k in ctx.challenge.dims}, **options}.items())
    result = run_student(ctx, check, ctx.build_call(name, case, want=want), f"building {name}({shown})")
    return result, case, f"{name}({shown})"


def _distinct(parameters: list[dict], trainable_only: bool) -> list[tuple[list[str], int]]:
    """(names, numel) per distinct parameter object: a tied weight counts once."""
    groups: dict[int, tuple[list[str], int]] = {}
    for q in parameters:
        if trainable_only and not q["requires_grad"]:
            continue
        numel = 1
        for s in q["shape"]:
            numel *= s
        groups.setdefault(q["object"], ([], numel))[0].append(q["name"])
    return list(groups.values())


class CountParams(BuildParams):
    expected: str | int
    trainable_only: bool = False

    def check_against(self, challenge, check):
        problems = super().check_against(challenge, check)
        names = {k: 1 for k in challenge.dims}
        try:
            evaluate(self.expected, names)
        except ValueError as exc:
            problems.append((("expected",), str(exc)))
        return problems


@register("parameter_count", CountParams, uses_reference=False)
def parameter_count(ctx: Context, check: CheckSpec, p: CountParams) -> str:
    """The number of scalars in distinct parameters (``sum(p.numel() for p in m.parameters())``)."""
    result, case, built = _build(ctx, check, p, ["structure", "construct_only"])
    groups = _distinct(result["structure"]["parameters"], p.trainable_only)
    total = sum(n for _, n in groups)
    want = evaluate(p.expected, case.dims)
    listing = "; ".join(f"{' = '.join(names)}: {n}" for names, n in groups) or "no parameters"
    if total != want:
        shared = [names for names, _ in groups if len(names) > 1]
        hint = ("" if shared or total < want else
                ": an extra parameter is registered (a fixed table belongs in a buffer), or a weight that "
                "should be shared is a separate copy")
        raise CheckFailed(f"{built} has {total} {'trainable ' if p.trainable_only else ''}parameters, expected "
                          f"{p.expected} = {want} ({listing}){hint}")
    return f"{built}: {total} parameters ({listing})"


@register("no_parameters", BuildParams, uses_reference=False)
def no_parameters(ctx: Context, check: CheckSpec, p: BuildParams) -> str:
    """No trainable parameter: a fixed table belongs in a buffer, where optimizers never see it."""
    result, _, built = _build(ctx, check, p, ["structure", "construct_only"])
    structure = result["structure"]
    trainable = [q["name"] for q in structure["parameters"] if q["requires_grad"]]
    trainable += [s["name"] for s in structure["stray_tensors"] if s["requires_grad"]]
    if trainable:
        raise CheckFailed(f"{built} has trainable tensors {', '.join(trainable)}: a fixed table is not learned; "
                          "store it with self.register_buffer(name, table) (persistent=False keeps it out of "
                          "state_dict) so that no optimizer updates it")
    buffers = ", ".join(b["name"] for b in structure["buffers"]) or "none"
    return f"{built}: no trainable parameters (buffers: {buffers})"


class OutputFlagParams(BuildParams):
    requires_grad: bool


@register("output_requires_grad", OutputFlagParams, uses_reference=False)
def output_requires_grad(ctx: Context, check: CheckSpec, p: OutputFlagParams) -> str:
    """Whether the output takes part in autograd (a constant table must not)."""
    result, _, built = _build(ctx, check, p, ["output"])
    got = bool(result.get("output_requires_grad"))
    if got != p.requires_grad:
        if p.requires_grad:
            raise CheckFailed(f"the output of {built} does not require grad: it is cut off from autograd "
                              "(.detach(), .data, torch.no_grad() or torch.tensor(...)?)")
        raise CheckFailed(f"the output of {built} requires grad: a fixed table is a constant; build it from "
                          "plain tensors (no nn.Parameter, no requires_grad=True)")
    return f"output requires_grad={got}"


class InitialRowsParams(BuildParams):
    parameter: str
    rows: list[int | str]
    value: float = 0.0


@register("initial_rows", InitialRowsParams, uses_reference=False)
def initial_rows(ctx: Context, check: CheckSpec, p: InitialRowsParams) -> str:
    """Chosen rows of a freshly built parameter hold exactly ``value`` (a padding row starts at zero)."""
    import torch

    from validator.spec.schema import resolve

    result, case, built = _build(ctx, check, p, ["params", "construct_only"])
    params = result.get("params") or {}
    if p.parameter not in params:
        raise CheckFailed(f"{built} has no parameter `{p.parameter}` (found: {', '.join(params) or 'none'})")
    weight = params[p.parameter]
    rows = [int(resolve(r, case.dims)) for r in p.rows]
    for r in rows:
        row = weight[r]
        if not torch.equal(row, torch.full_like(row, p.value)):
            k = int((row != p.value).nonzero()[0]) if row.dim() else 0
            raise CheckFailed(f"{built}: row {r} of `{p.parameter}` starts as {row.reshape(-1)[:4].tolist()}..., "
                              f"expected every element to be exactly {p.value:g} (element {k} is not): set it after "
                              "the random initialisation, under torch.no_grad()")
    return f"rows {rows} of {p.parameter} are exactly {p.value:g}"


class StateDictParams(BuildParams):
    # buffers that belong in state_dict (running statistics); any other buffer must be non-persistent
    persistent: list[str] = []


@register("state_dict", StateDictParams, uses_reference=False)
def state_dict(ctx: Context, check: CheckSpec, p: StateDictParams) -> str:
    """``state_dict()`` holds the parameters and the listed buffers only: a derived table (RoPE's cos/sin)
    is registered with ``persistent=False``, so checkpoints stay small and load at any table size."""
    result, _, built = _build(ctx, check, p, ["structure", "construct_only"])
    buffers = result["structure"]["buffers"]
    frozen = _frozen_extras(ctx, check, result["structure"])
    if frozen:
        shown = ", ".join(f"`{q['name']}` {tuple(q['shape'])}" for q in frozen)
        raise CheckFailed(f"{built} saves {shown} in its state_dict: {'it is an nn.Parameter' if len(frozen) == 1 else 'they are nn.Parameters'} "
                          "with requires_grad=False, and every parameter is saved. A table computed from the "
                          "constructor's arguments is a buffer: register it with register_buffer(name, tensor, "
                          "persistent=False), so that state_dict() holds only the contract's parameters")
    saved = [b for b in buffers if b["persistent"] and b["name"] not in p.persistent]
    if saved:
        shown = ", ".join(f"`{b['name']}` {tuple(b['shape'])}" for b in saved)
        raise CheckFailed(f"{built} saves the buffer(s) {shown} in its state_dict: they are computed from the "
                          "constructor's arguments, so register them with register_buffer(name, tensor, "
                          "persistent=False) (a saved table bloats every checkpoint and breaks loading into a "
                          "layer built with another max_seq_len)")
    missing = [n for n in p.persistent if not any(b["name"] == n and b["persistent"] for b in buffers)]
    if missing:
        raise CheckFailed(f"{built} does not keep {', '.join(missing)} in its state_dict as a persistent buffer")
    kept = ", ".join(b["name"] for b in buffers) or "none"
    return f"{built}: no derived buffer in state_dict (buffers: {kept})"


def _frozen_extras(ctx: Context, check: CheckSpec, structure: dict) -> list[dict]:
    """Parameters outside the contract that nothing trains (``requires_grad=False``): state_dict saves them like any
    parameter. A trainable extra is the business of the `parameters` and `no_parameters` checks."""
    name, entry = entry_of(ctx, check)
    contract = set(entry.parameters) | set((ctx.param_maps.get(name) or {}).values())
    seen, out = set(), []
    for q in structure.get("parameters") or []:
        if not q["requires_grad"] and q["name"] not in contract and q["object"] not in seen:
            seen.add(q["object"])
            out.append(q)
    return out
