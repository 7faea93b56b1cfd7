"""Helpers shared by check tests: probe dims, running both sides, parameter matching."""

from __future__ import annotations

from typing import Any

import torch

from validator.cases import Case, fixed_case, merged_input
from validator.checks import Params
from validator.context import (CheckErrored, CheckFailed, Context, GraderFailure, format_exception,
                               is_grader_failure)
from validator.draws import seeded_normal
from validator.runner import NOT_A_MODULE
from validator.spec.schema import CheckSpec, Entry


class OverrideParams(Params):
    """Inputs and dims a check overrides; each override is checked against the spec when it loads."""

    inputs: dict[str, dict[str, Any]] = {}
    dims: dict[str, int] = {}

    def check_against(self, challenge, check):
        problems = []
        for name, override in self.inputs.items():
            if name not in challenge.inputs:
                problems.append((("inputs", name), f"no input named {name!r} under `inputs`"))
                continue
            try:
                merged_input(challenge.inputs[name], override)
            except Exception as exc:  # noqa: BLE001 - report the rule that was broken
                problems.append((("inputs", name), str(exc).splitlines()[-1]))
        for name in self.dims:
            if name not in challenge.dims:
                problems.append((("dims", name), f"no dim named {name!r} under `dims`"))
        return problems


def lone_position_problems(challenge, params, name: str, axis: int,
                           why: str = "has nothing after it to change") -> list:
    """A check of what later (or masked) positions may not change: a case with one position along ``name``'s
    ``axis`` has nothing after it to change (or nothing to mask: every query sees a key) and checks nothing.
    That axis must be 2 or more in every case (its range, a ``dims`` override, or a regime saying so), or the
    few cases a batch run draws may all be lone positions and the check pass having looked at nothing."""
    from validator.cases import parse_relation

    spec = challenge.inputs.get(name)
    shape = (params.inputs.get(name) or {}).get("shape") or (spec.shape if spec is not None else None)
    if not shape or not -len(shape) <= axis < len(shape) or not isinstance(shape[axis], str) or shape[axis] == "...":
        return []
    dim = shape[axis]

    def low(name: str) -> int:
        """The least value ``name`` takes in a case: an override, else its range (drawn dims are 1 or more)."""
        if name.isdigit():
            return int(name)
        if name in params.dims:
            return int(params.dims[name])
        rng = challenge.dims.get(name)
        if rng is None:
            return 2  # not a dim: CaseParams reports it
        if isinstance(rng, int):
            return rng
        return max(rng[0], 1) if rng[1] >= 1 else rng[0]

    if low(dim) >= 2:
        return []

    def pins(relation: str) -> bool:
        try:
            left, op, right = parse_relation(relation, set(challenge.dims))
        except ValueError:
            return False  # CaseParams reports it
        return left == dim and ((op == ">" and low(right) >= 1) or (op == ">=" and low(right) >= 2))

    if params.regimes and all(any(pins(r) for r in regime) for regime in params.regimes):
        return []
    return [(("regimes",), f"a case with one position along {name}'s axis {axis} ({dim}) {why}, so this check "
                           f"could pass having checked nothing: add `regimes: [[{dim} > 1]]` (or pin "
                           f"`dims: {{{dim}: N}}` with N >= 2)")]


def probe_dims(ctx: Context) -> dict[str, int]:
    """Small dims with pairwise different values, so parameter shapes identify parameters."""
    used: set[int] = set()
    dims = {}
    for name, rng in ctx.challenge.dims.items():
        if isinstance(rng, int):
            dims[name] = rng
            used.add(rng)
            continue
        lo, hi = rng
        choice = next((v for v in range(max(lo, 3), hi + 1) if v not in used), max(lo, min(hi, 3)))
        dims[name] = choice
        used.add(choice)
    return dims


def probe_case(ctx: Context, entry: Entry, seed: int = 0) -> Case:
    """The one case of the checks that probe how a layer is built (dtype, device, parameters): where the contract
    allows leading dims, inputs shaped as callers mostly pass them, (batch, seq, d_model) and (batch, seq) beside
    it, so that a layer that handles only those (a bug ``no_leading_dims`` owns) is not charged again by each of
    these checks. Every input of the call gets the same leading dims."""
    led = {n: ctx.challenge.inputs[n].shape for n in entry.call
           if n in ctx.challenge.inputs and ctx.challenge.inputs[n].shape[:1] == ["..."]}
    lead = [2, 3][:max(1, 3 - max((len(shape) - 1 for shape in led.values()), default=0))]
    return fixed_case(ctx.challenge, entry, dims=probe_dims(ctx), seed=seed,
                      shapes={n: lead + list(shape[1:]) for n, shape in led.items()})


def entry_of(ctx: Context, check: CheckSpec) -> tuple[str, Entry]:
    return ctx.challenge.entry_for(check)


def run_student(ctx: Context, check: CheckSpec, call: dict, doing: str = "running your code") -> dict:
    """Student result; an exception in student code becomes CheckErrored with its location."""
    return raise_if_failed(ctx, call, ctx.student(call, check.timeout, doing))


def raise_if_failed(ctx: Context, call: dict, result: dict, during: str = "") -> dict:
    """``result`` of ``call`` if it succeeded; else the student's exception (CheckErrored, with its
    location; ``during`` says what the call was for) or the grader's (GraderFailure), raised without
    running anything again."""
    if not result.get("ok"):
        if is_grader_failure(result):
            raise GraderFailure(format_exception(result, call["entry"]) + _load_advice(ctx, call))
        info = result.get("exception") or {}
        if result.get("stage") == "construct" and NOT_A_MODULE in (info.get("mro") or []):
            raise CheckFailed(str(info.get("message", "")))  # the contract's nn.Module is missing: a verdict
        raise CheckErrored((f"{during}: " if during else "") + format_exception(result, call["entry"]))
    return result


def _load_advice(ctx: Context, call: dict) -> str:
    """Why test weights could not be loaded, in terms of the check that owns the cause."""
    entry = ctx.challenge.entries.get(call["entry"])
    if entry is None or not entry.parameters:
        return ""
    if ctx.param_maps.get(call["entry"]) is None:
        why = ctx.param_problems.get(call["entry"])
        if why:
            return f"; {why} (this check needs that to load the same weights into both layers)"
        return ("; your layer does not register parameters of the expected shapes, which the `parameters` "
                "check reports (this check needs them to load the same weights into both layers)")
    return ("; the parameter exists when the layer is built plainly, so it is lost in this configuration "
            "(for instance a dtype= or device= path that turns the nn.Parameter into a plain tensor)")


def match_parameters(expected: dict[str, tuple[int, ...]], found: list[dict],
                     explicit: dict[str, str] | None = None, *, by_shape: bool = True
                     ) -> tuple[dict[str, str] | None, list[str]]:
    """Map expected names to the student's: as ``explicit`` says (a package's mapping), by name, then (``by_shape``)
    by a unique shape."""
    by_name = {p["name"]: p for p in found}
    mapping: dict[str, str] = {}
    notes: list[str] = []
    taken: set[str] = set()
    for name, theirs in (explicit or {}).items():
        if name in expected and theirs in by_name:
            mapping[name] = theirs
            taken.add(theirs)
    for name, shape in expected.items():
        if name not in mapping and name in by_name and name not in taken and tuple(by_name[name]["shape"]) == shape:
            mapping[name] = name
            taken.add(name)
    for name, shape in expected.items():
        if name in mapping:
            continue
        candidates = _same_shape(name, shape, found, taken) if by_shape else []
        if len(candidates) == 1:
            mapping[name] = candidates[0]
            taken.add(candidates[0])
            notes.append(f"matched expected parameter {name!r} to your {candidates[0]!r} by its shape {shape}")
        else:
            return None, notes
    return mapping, notes


def unlocated_weights(expected: dict[str, tuple[int, ...]], found: list[dict], target: Any) -> str:
    """Why a layer reached through an adapter has no contract name for some weight: its values were found in no
    parameter of the built layer (see validator.adapter_runner.locate)."""
    names = {p["name"] for p in found}
    lost = [n for n in expected if n not in names]
    function = (target.adapter or {}).get("variants", [{}])[0].get("function", "the adapter") \
        if target is not None else "the adapter"
    shapes = ", ".join(f"{p['name']} {tuple(p['shape'])}" for p in found if p["name"] not in expected) or "none"
    return (f"the test weights {', '.join(repr(n) for n in lost)} that {function} loads are not among the parameters "
            f"of the layer it builds (others: {shapes}): a weight the adapter stores changed (an offset from 1, a "
            "scaled or recomputed copy) or does not load at all cannot be read through it")


def unmatched_parameters(expected: dict[str, tuple[int, ...]], found: list[dict], explicit: dict[str, str] | None,
                         advice) -> str:
    """Why :func:`match_parameters` found no mapping, naming the first contract parameter it could not place.

    ``advice(name, candidates)`` says how the student settles a tie (rename, or name it in their mapping).
    """
    by_name = {p["name"]: p for p in found}
    for name, theirs in (explicit or {}).items():
        if name in expected and theirs not in by_name:
            return (f"your mapping names {theirs!r} as the contract's {name!r}, but your layer registers no parameter "
                    f"{theirs!r} (it has: {', '.join(by_name) or 'none'})")
    tie = tied_parameters(expected, found, explicit)
    if tie is not None:
        name, candidates = tie
        return (f"{len(candidates)} of your parameters have the shape {expected[name]} of the contract's {name!r} "
                f"({', '.join(candidates)}), so the grader cannot tell which one it is: {advice(name, candidates)}")
    for name, shape in expected.items():
        if name not in by_name and (explicit or {}).get(name) not in by_name and \
                not any(tuple(p["shape"]) == shape for p in found):
            shapes = ", ".join(f"{p['name']} {tuple(p['shape'])}" for p in found) or "none"
            return f"your layer registers no parameter of shape {shape} for the contract's {name!r} (it has: {shapes})"
    for name, shape in expected.items():  # found by name (or through an adapter, by value) in another shape
        got = by_name.get((explicit or {}).get(name, name))
        if got is not None and tuple(got["shape"]) != shape:
            return f"the contract's {name!r} is a parameter of shape {tuple(got['shape'])} in your layer, expected {shape}"
    return "your layer's parameters could not be matched to the contract's"


def _same_shape(name: str, shape: tuple[int, ...], found: list[dict], taken: set[str]) -> list[str]:
    """The student's unclaimed parameters that could be the contract's ``name``: those of its shape,
    narrowed where several are, first by stem (SwiGLU's w1 and w3: a plain `w1` Parameter is the expected
    `w1.weight`), then by module path (a block's `ln1.W` and `ln2.W`: only the leaf is renamed, and the
    module that holds the parameter says which norm it is)."""
    candidates = [p["name"] for p in found if tuple(p["shape"]) == shape and p["name"] not in taken]
    if len(candidates) > 1:
        stem = name.removesuffix(".weight")
        by_stem = [c for c in candidates if c.removesuffix(".weight") == stem]
        owner = name.rpartition(".")[0]
        by_owner = [c for c in candidates if c.rpartition(".")[0] == owner] if owner else []
        candidates = by_stem or by_owner or candidates
    return candidates


def tied_parameters(expected: dict[str, tuple[int, ...]], found: list[dict],
                    explicit: dict[str, str] | None = None) -> tuple[str, list[str]] | None:
    """The first contract parameter that several unclaimed parameters of the student's could be, and those."""
    by_name = {p["name"]: p for p in found}
    taken = {t for n, t in (explicit or {}).items() if n in expected and t in by_name}
    taken |= {n for n, shape in expected.items() if n in by_name and tuple(by_name[n]["shape"]) == shape}
    for name, shape in expected.items():
        if (explicit or {}).get(name) in by_name or (name in by_name and tuple(by_name[name]["shape"]) == shape):
            continue
        candidates = _same_shape(name, shape, found, taken)
        if len(candidates) > 1:
            return name, candidates
        taken.update(candidates)
    return None


def naming_advice(ctx: Context, entry_name: str):
    """How a student settles which of their parameters is the contract's ``name``: rename it, or map it."""
    package = ctx.package
    if package is None or ctx.target(entry_name) is None:
        return lambda name, options: f"name the right one `{name}`"
    table = f'[tool.validator.parameters."{ctx.challenge.id}.{entry_name}"]'
    return lambda name, options: (f"say which in {package.map_name}: add {table} with \"{name}\" = "
                                  f"\"{options[0]}\" (or whichever of {', '.join(options)} it is)")


def random_like(t: torch.Tensor, seed: int, dtype: torch.dtype | None = None) -> torch.Tensor:
    return seeded_normal([tuple(t.shape)], seed, dtype or t.dtype)[0]


def dtype_of(name: str) -> torch.dtype:
    return getattr(torch, name)


def fail(message: str) -> None:
    raise CheckFailed(message)


__all__ = ["probe_dims", "probe_case", "entry_of", "run_student", "match_parameters", "unmatched_parameters", "tied_parameters", "naming_advice",
           "random_like", "dtype_of", "fail", "CheckFailed", "CheckErrored", "Any"]
