"""Test tensors drawn from a seed, remembered for the life of the process (within a byte budget).

A batch slot grades every submission on the same seed, so it draws the same test weights, upstream
gradients and fixed inputs for each (a speed check's are megabytes). Each is drawn once; every asking
gets a copy of its own, so a check that changes one in place changes nothing for the next.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any, Callable

import torch

LIMIT_BYTES = 256 << 20  # what the remembered draws may hold; the least recently used go first
_KEPT: OrderedDict[tuple, tuple[Any, int]] = OrderedDict()  # key -> (the draw, its bytes)
_HELD = [0]


def remembered(key: tuple, draw: Callable[[], Any]) -> Any:
    """``draw()`` (tensors in dicts, lists and tuples, and plain values), computed once per ``key``: a copy.

    ``key`` must name everything the draw depends on, seed included."""
    kept = _KEPT.get(key)
    if kept is None:
        value = draw()
        _keep(key, value)
        return copied(value)
    _KEPT.move_to_end(key)
    return copied(kept[0])


def seeded_normal(shapes: list[tuple[int, ...]], seed: int, dtype: torch.dtype) -> list[torch.Tensor]:
    """Standard-normal tensors of ``shapes``, drawn in turn from one generator seeded with ``seed``: in float64,
    then rounded to ``dtype`` (so a float32 draw is the float64 one, rounded, on every machine)."""
    shapes = [tuple(int(d) for d in s) for s in shapes]

    def draw() -> list[torch.Tensor]:
        gen = torch.Generator().manual_seed(seed)
        return [torch.randn(s, generator=gen, dtype=torch.float64).to(dtype) for s in shapes]

    return remembered(("normal", tuple(shapes), int(seed), dtype), draw)


def copied(value: Any) -> Any:
    """``value`` with every tensor (detached), dict, list and tuple in it new: what a memory hands out."""
    if isinstance(value, torch.Tensor):
        return value.detach().clone()
    if isinstance(value, dict):
        return {k: copied(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(copied(v) for v in value)
    return value


def tensor_nbytes(value: Any) -> int:
    """The bytes of the tensors in ``value`` (in dicts, lists and tuples)."""
    if isinstance(value, torch.Tensor):
        return value.numel() * value.element_size()
    if isinstance(value, dict):
        return sum(tensor_nbytes(v) for v in value.values())
    if isinstance(value, (list, tuple)):
        return sum(tensor_nbytes(v) for v in value)
    return 0


def _keep(key: tuple, value: Any) -> None:
    size = tensor_nbytes(value)
    if size > LIMIT_BYTES // 4:
        return  # one draw that would crowd out every other is drawn again each time
    _KEPT[key] = (value, size)
    _HELD[0] += size
    while _HELD[0] > LIMIT_BYTES and _KEPT:
        _, (_, old) = _KEPT.popitem(last=False)
        _HELD[0] -= old


def forget() -> None:
    _KEPT.clear()
    _HELD[0] = 0
