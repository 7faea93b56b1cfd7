"""A student's repository graded through its own ``tests/adapters.py`` (Stanford CS336's layout).

CS336 hands out ``tests/adapters.py``: one function per layer (``run_linear``, ``run_rmsnorm``,
``run_transformer_block`` ...) that takes the contract's dimensions, weights and inputs, builds
the student's own module, loads the weights and calls it. Students fill it in until the course's
tests pass, so it already says how to call their code, whatever its names, signatures or layout
(a fused QKV projection, a RoPE module passed to the attention's constructor, weights passed
to constructors). A challenge's spec names the functions that reach each entry
(:class:`validator.spec.schema.Adapter`); this module finds them in a repository, tells the
implemented ones from the shipped stubs (a body that only raises ``NotImplementedError``), and
turns them into package targets. The worker side (building the calls, watching the modules the
adapter builds) is :mod:`validator.adapter_runner`.

Grader side only: nothing here imports torch or runs student code (the file is parsed, not run).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Any

ADAPTERS_FILE = "tests/adapters.py"
ADAPTERS_MODULE = "tests.adapters"


@dataclass(frozen=True)
class AdapterFunction:
    """One top-level function of an adapters file."""

    name: str
    line: int
    stub: bool  # its body (after a docstring) only raises NotImplementedError: not filled in yet


def _is_stub(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    body = list(fn.body)
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
            and isinstance(body[0].value.value, str):
        body = body[1:]  # the docstring
    body = [s for s in body if not isinstance(s, ast.Pass)]
    if len(body) != 1 or not isinstance(body[0], ast.Raise) or body[0].exc is None:
        return False
    exc = body[0].exc
    target = exc.func if isinstance(exc, ast.Call) else exc
    return isinstance(target, ast.Name) and target.id == "NotImplementedError"


def adapter_functions(source: bytes) -> dict[str, AdapterFunction] | None:
    """The top-level functions an adapters file defines, or None when it cannot be parsed (the import says why)."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    found: dict[str, AdapterFunction] = {}
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            found[node.name] = AdapterFunction(node.name, node.lineno, _is_stub(node))
    return found


def variant_data(adapter: Any) -> dict:
    """An adapter of the spec as plain data for the worker: ``{function, when, args: {name: [kind, ref, batch_dims]}}``."""
    return {"function": adapter.function, "when": dict(adapter.when),
            "args": {arg: [*src.source, src.batch_dims] for arg, src in adapter.args.items()}}


def entry_data(challenge: Any, entry: Any, variants: list) -> dict:
    """What the worker needs to call one entry through its adapters: the contract's argument names, and for an
    input whose leading dimensions an adapter flattens (``batch_dims``), how many dimensions are its own."""
    core = {src.input: sum(1 for d in challenge.inputs[src.input].shape if d != "...")
            for v in variants for src in v.args.values() if src.batch_dims is not None}
    return {"variants": [variant_data(v) for v in variants],
            "init": [a if isinstance(a, str) else None for a in entry.init],
            "call": list(entry.call), "kind": entry.kind, "core": core}


def reach(functions: dict[str, AdapterFunction], catalogue: dict) -> tuple[dict, dict]:
    """Which entries the adapters reach: ``(reached, stubbed)``.

    ``reached``: challenge -> entry -> the spec's adapters that the file defines, in the spec's order.
    ``stubbed``: challenge -> entry -> why it is not graded (its adapters are all still stubs).
    An entry none of whose adapters the file defines is in neither: nothing reaches it.
    """
    reached: dict[str, dict[str, list]] = {}
    stubbed: dict[str, dict[str, str]] = {}
    for cid, challenge in catalogue.items():
        for name, entry in challenge.entries.items():
            defined = [a for a in entry.adapters if a.function in functions]
            if not defined:
                continue
            if all(functions[a.function].stub for a in defined):
                names = ", ".join(a.function for a in defined)
                stubbed.setdefault(cid, {})[name] = (
                    f"{names} in {ADAPTERS_FILE} still raise{'s' if len(defined) == 1 else ''} NotImplementedError "
                    f"(the course's stub): fill it in to have {cid} graded")
                continue
            reached.setdefault(cid, {})[name] = defined
    return reached, stubbed
