"""A layer moved with ``.to()`` takes every tensor its forward uses along.

``module.to(device)``, ``.cuda()``, ``.half()`` move parameters and buffers only. A table kept as a plain
tensor attribute (``self.cos = table``) stays where it was built, and forward then mixes devices or dtypes:
on a GPU the model fails at its first call, or a half-precision model silently computes with a float32
table. ``moves_with_module`` builds the layer, loads its weights, moves it (to the ``meta`` device by
default, which any machine has) and reports every plain tensor attribute that stayed behind and that forward
reads. It needs no GPU and no reference.
"""

from __future__ import annotations

from typing import Optional

from validator.cases import fixed_case
from validator.checks import register
from validator.checks.common import CheckFailed, entry_of, probe_dims, run_student
from validator.checks.modules import BuildParams
from validator.context import Context
from validator.spec.schema import CheckSpec


class MoveParams(BuildParams):
    device: Optional[str] = "meta"
    dtype: Optional[str] = None

    def check_against(self, challenge, check):
        problems = super().check_against(challenge, check)
        _, entry = challenge.entry_for(check)
        if entry.kind != "module":
            problems.append(((), "moves_with_module moves a built layer: the entry must be a module"))
        if not self.device and not self.dtype:
            problems.append(((), "give a `device` or a `dtype` to move to"))
        return problems


@register("moves_with_module", MoveParams, uses_reference=False, not_through_adapter=(
    "{function} builds and calls your layer in one call, so the grader cannot move it with .to() in between"))
def moves_with_module(ctx: Context, check: CheckSpec, p: MoveParams) -> str:
    """After ``module.to(device/dtype)``, no tensor that forward reads is left on the old device or dtype."""
    import torch

    name, entry = entry_of(ctx, check)
    case = fixed_case(ctx.challenge, entry, dims={**probe_dims(ctx), **p.dims}, seed=0, overrides=p.inputs)
    state = ctx.make_state(entry, case.dims, case.seed, torch.get_default_dtype()) if entry.parameters else None
    move = {k: v for k, v in (("device", p.device), ("dtype", p.dtype)) if v}
    target = ", ".join(f"{v!r}" if k == "device" else f"torch.{v}" for k, v in move.items())
    call = ctx.build_call(name, case, want=["output"], state=state, move=move)
    result = run_student(ctx, check, call, f"moving your layer with .to({target})")
    left = result.get("left_behind") or []
    read = [t for t in left if t["read"]]
    if read:
        shown = ", ".join(f"`{t['name']}` ({t['dtype']}, {t['device']})" for t in read)
        raise CheckFailed(
            f"after module.to({target}), forward reads {shown}, which stayed where the constructor made "
            f"{'it' if len(read) == 1 else 'them'}: a plain tensor attribute is neither a parameter nor a buffer, so "
            ".to(), .cuda() and .half() never move it (on a GPU the first call fails; in half precision it computes "
            "with the float32 table). Register a fixed table with self.register_buffer(name, tensor, "
            "persistent=False), or make a learned one an nn.Parameter")
    if left:
        return (f".to({target}) left {', '.join(t['name'] for t in left)} behind, which forward never reads")
    return f".to({target}) moves every tensor the layer holds"
