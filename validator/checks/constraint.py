"""Constraint tests: forbidden APIs, found in the source (AST) and observed at run time."""

from __future__ import annotations

import ast
from pathlib import Path

import torch

from validator.cases import case_strategy
from validator.checks import Params, for_all, register
from validator.checks.common import CheckFailed, entry_of, run_student
from validator.context import Context
from validator.spec.schema import CheckSpec


def _dotted(node: ast.AST) -> str | None:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return None


def find_forbidden(source: str, forbidden: list[str]) -> list[tuple[int, str, str]]:
    """(line, code, api) for each use of a forbidden dotted name, following import aliases."""
    tree = ast.parse(source)
    aliases: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                aliases[a.asname or a.name.split(".")[0]] = a.name if a.asname else a.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom) and node.module:
            for a in node.names:
                aliases[a.asname or a.name] = f"{node.module}.{a.name}"
    lines = source.splitlines()
    hits: list[tuple[int, str, str]] = []
    seen: set[tuple[int, str]] = set()
    banned = set(forbidden)
    for node in ast.walk(tree):
        names: list[str] = []
        if isinstance(node, (ast.Attribute, ast.Name)):
            dotted = _dotted(node)
            if dotted:
                head, _, rest = dotted.partition(".")
                full = aliases.get(head, head) + (f".{rest}" if rest else "")
                names.append(full)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.extend(f"{node.module}.{a.name}" for a in node.names)
        for full in names:
            full = full.replace("torch.nn.modules.sparse.", "torch.nn.")
            if full in banned and (node.lineno, full) not in seen:
                seen.add((node.lineno, full))
                hits.append((node.lineno, lines[node.lineno - 1].strip() if node.lineno <= len(lines) else "", full))
    return sorted(hits)


class SourceParams(Params):
    apis: list[str] | None = None


@register("forbidden_source", SourceParams, uses_reference=False)
def forbidden_source(ctx: Context, check: CheckSpec, p: SourceParams) -> str:
    banned = p.apis if p.apis is not None else ctx.challenge.forbidden.source
    try:
        source = Path(ctx.student_file).read_text(encoding="utf-8", errors="replace")
        hits = find_forbidden(source, banned)
    except SyntaxError as exc:
        raise CheckFailed(f"layers.py does not parse: line {exc.lineno}: {exc.msg}") from None
    if hits:
        shown = "; ".join(f"line {line}: `{code}` uses {api}" for line, code, api in hits[:5])
        raise CheckFailed(f"{shown}. This challenge is to write the lookup yourself: index the weight "
                          "(weight[token_ids]) or use index_select instead")
    return f"none of {', '.join(banned)}"


class RuntimeParams(Params):
    ops: list[str] | None = None
    inputs: dict = {}
    max_examples: int = 5


@register("forbidden_runtime", RuntimeParams, uses_reference=False)
def forbidden_runtime(ctx: Context, check: CheckSpec, p: RuntimeParams) -> str:
    banned = set(p.ops if p.ops is not None else ctx.challenge.forbidden.runtime)
    name, entry = entry_of(ctx, check)

    def body(case):
        dtype = torch.get_default_dtype()
        state = ctx.make_state(entry, case.dims, case.seed, dtype) if entry.kind == "module" else None
        probe = ctx.build_call(name, case, want=["output"], state=state)
        ref = ctx.reference_call(probe)["output"]
        grad = torch.ones(ref.shape, dtype=ref.dtype)
        got = run_student(ctx, check, dict(probe, grad_output=grad, trace_ops=True))
        used = sorted(op for op in got.get("ops", {}) if op in banned)
        if used:
            raise CheckFailed(f"your forward/backward ran {', '.join(used)}: a library embedding kernel did the "
                              "work (even if it is reached through an alias, getattr or nn.Embedding)")
    runs = for_all(ctx, check, case_strategy(ctx.challenge, entry, p.inputs), body, p.max_examples)
    return f"traced {runs} forward/backward passes: no forbidden op"
