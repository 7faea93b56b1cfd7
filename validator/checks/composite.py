"""A composite forbids what its parts forbid.

A challenge built from other challenges' layers (SwiGLU from ``Linear``; the transformer block from RMSNorm,
attention and SwiGLU) names them under ``forbidden.parts``; the loader reads each part's run-time bans into
``forbidden.parts_runtime``. ``parts_forbidden_runtime`` traces the composite's forward and backward and fails
when one of those ops runs (``nn.Linear`` inside a SwiGLU runs ``aten.linear``), beyond the composite's own
``forbidden.runtime``, which its own check already owns.
"""

from __future__ import annotations

from typing import Optional

from validator.checks import Params, register
from validator.checks.constraint import traced_without
from validator.context import Context
from validator.spec.schema import CheckSpec


class PartsRuntimeParams(Params):
    inputs: dict = {}
    max_examples: int = 3
    advice: Optional[str] = None

    def check_against(self, challenge, check):
        if not challenge.forbidden.parts:
            return [((), "parts_forbidden_runtime needs `forbidden.parts`: the challenges this one is built from")]
        if not inherited_ops(challenge):
            return [((), "the parts named under forbidden.parts forbid nothing at run time beyond this challenge's "
                         "own forbidden.runtime: the check would test nothing")]
        return []


def inherited_ops(challenge) -> list[str]:
    """The parts' run-time bans that the composite's own list does not already hold."""
    own = set(challenge.forbidden.runtime)
    return sorted({op for ops in challenge.forbidden.parts_runtime.values() for op in ops} - own)


@register("parts_forbidden_runtime", PartsRuntimeParams, uses_reference=True)
def parts_forbidden_runtime(ctx: Context, check: CheckSpec, p: PartsRuntimeParams) -> str:
    ops = inherited_ops(ctx.challenge)
    owners = {op: [part for part, listed in ctx.challenge.forbidden.parts_runtime.items() if op in listed]
              for op in ops}
    advice = p.advice or ("a library layer did the work of a part this layer is built from ("
                          + "; ".join(f"{op}: {', '.join(who)}" for op, who in owners.items())
                          + "): build it from your own layers, which their own challenges grade")
    # the challenge's own forbidden_runtime check, where it traces the same inputs, draws the same cases (or judges
    # the same op_scaling runs): each traced run is made once (validator.checks.evidence.measured), judged by both
    runtime = next((c for c in ctx.challenge.checks if c.test == "forbidden_runtime"
                    and c.entry == check.entry and (c.params.get("inputs") or {}) == p.inputs), None)
    runs = traced_without(ctx, check, ops, inputs=p.inputs, max_examples=p.max_examples, advice=advice,
                          cases_of=runtime.id if runtime is not None else None,
                          runs_of=runtime.params.get("runs_of") if runtime is not None else None)
    return f"traced {runs} forward/backward passes: no forbidden op of its parts ({', '.join(ops)})"
