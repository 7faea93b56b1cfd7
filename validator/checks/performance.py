"""Performance tests. Two are deterministic and carry the verdict on loops and one-hots:
the count of tensor ops as the input grows, and the peak of live tensor bytes as a
dimension grows. The third compares wall time with the reference, generously.
"""

from __future__ import annotations

import time
from typing import Optional

import torch
from pydantic import BaseModel, ConfigDict

from validator.cases import fixed_case
from validator.checks import Params, register
from validator.checks.common import CheckFailed, entry_of, run_student
from validator.context import Context
from validator.spec.schema import CheckSpec


class Size(BaseModel):
    model_config = ConfigDict(extra="forbid")
    dims: dict[str, int] = {}
    shapes: dict[str, list[int]] = {}


def _call(ctx: Context, check: CheckSpec, size: Size, seed: int = 0, **extra) -> dict:
    name, entry = entry_of(ctx, check)
    case = fixed_case(ctx.challenge, entry, dims=size.dims, shapes=size.shapes, seed=seed)
    dtype = torch.get_default_dtype()
    state = ctx.make_state(entry, case.dims, seed, dtype) if entry.kind == "module" else None
    probe = ctx.build_call(name, case, want=["output"], state=state)
    ref = ctx.reference_call(probe)["output"]
    return dict(probe, grad_output=torch.ones(ref.shape, dtype=ref.dtype), **extra)


def _tokens(call: dict) -> int:
    return sum(i["value"].numel() for i in call["inputs"] if isinstance(i["value"], torch.Tensor))


class ScalingParams(Params):
    small: Size
    large: Size
    max_extra_ops: int = 4


@register("op_scaling", ScalingParams)
def op_scaling(ctx: Context, check: CheckSpec, p: ScalingParams) -> str:
    small_call, large_call = _call(ctx, check, p.small, trace_ops=True), _call(ctx, check, p.large, trace_ops=True)
    small = run_student(ctx, check, small_call)
    large = run_student(ctx, check, large_call, "running your code on a larger input")
    n_small, n_large = sum(small["ops"].values()), sum(large["ops"].values())
    if n_large - n_small > p.max_extra_ops:
        grew = sorted(((large["ops"].get(k, 0) - small["ops"].get(k, 0), k) for k in large["ops"]), reverse=True)[:3]
        top = ", ".join(f"{k} +{d}" for d, k in grew if d > 0)
        raise CheckFailed(f"{n_small} tensor ops for {_tokens(small_call)} input elements but {n_large} for "
                          f"{_tokens(large_call)} (most growth: {top}): the work is done one element at a time, "
                          "probably a Python loop; do it with one operation on the whole tensor")
    return f"{n_small} ops for {_tokens(small_call)} elements, {n_large} for {_tokens(large_call)}"


class MemoryParams(Params):
    small: Size
    large: Size
    dim: str
    parameter_copies: float = 3.0
    slack_bytes: int = 1 << 16


@register("memory_scaling", MemoryParams)
def memory_scaling(ctx: Context, check: CheckSpec, p: MemoryParams) -> str:
    name, entry = entry_of(ctx, check)
    small = run_student(ctx, check, _call(ctx, check, p.small, track_memory=True))
    large = run_student(ctx, check, _call(ctx, check, p.large, track_memory=True), "running your code with a larger table")
    itemsize = torch.empty((), dtype=torch.get_default_dtype()).element_size()

    def param_bytes(size: Size) -> int:
        dims = {**{k: (v if isinstance(v, int) else v[1]) for k, v in ctx.challenge.dims.items()}, **size.dims}
        total = 0
        for shape in ctx.expected_parameters(entry, dims).values():
            n = 1
            for s in shape:
                n *= s
            total += n * itemsize
        for inp, spec in ctx.challenge.inputs.items():
            if spec.requires_grad and spec.type == "float":
                n = 1
                for s in spec.shape:
                    n *= int(dims[s]) if isinstance(s, str) else s
                total += n * itemsize
        return total

    growth = large["peak_bytes"] - small["peak_bytes"]
    allowed = p.parameter_copies * (param_bytes(p.large) - param_bytes(p.small)) + p.slack_bytes
    a, b = p.small.dims.get(p.dim), p.large.dims.get(p.dim)
    if growth > allowed:
        raise CheckFailed(f"peak memory of tensors created in forward+backward grew by {growth / 2**20:.1f} MiB when "
                          f"{p.dim} went from {a} to {b}; a weight-sized gradient explains at most "
                          f"{allowed / 2**20:.1f} MiB: something of size tokens x {p.dim} is built (a one-hot "
                          "matrix?). Index the rows instead")
    return f"peak {small['peak_bytes'] / 2**20:.2f} MiB at {p.dim}={a}, {large['peak_bytes'] / 2**20:.2f} MiB at {p.dim}={b}"


class TimeParams(Params):
    case: Size
    max_ratio: float = 25.0
    floor_seconds: float = 0.02
    repeat: int = 3
    tries: int = 3


@register("time_ratio", TimeParams)
def time_ratio(ctx: Context, check: CheckSpec, p: TimeParams) -> str:
    """Grader-measured wall time of the student's forward+backward vs the reference's.

    Both run single-threaded; each side takes the best of several tries, so a
    busy machine slows both rather than failing a correct layer.
    """
    call = _call(ctx, check, p.case, repeat=p.repeat)
    call["want"] = []
    call["device"] = None  # timed on the CPU, like the reference it is compared with
    run_student(ctx, check, dict(call, repeat=1))  # warm-up
    student_best = float("inf")
    for _ in range(p.tries):
        started = time.perf_counter()
        run_student(ctx, check, call, "timing your code")
        student_best = min(student_best, time.perf_counter() - started)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        ctx.reference_call(dict(call, repeat=1))
        ref_best = float("inf")
        for _ in range(p.tries):
            started = time.perf_counter()
            ctx.reference_call(call)
            ref_best = min(ref_best, time.perf_counter() - started)
    finally:
        torch.set_num_threads(threads)
    ratio = student_best / max(ref_best, 1e-9)
    summary = f"{student_best * 1e3:.1f} ms vs reference {ref_best * 1e3:.1f} ms ({ratio:.1f}x) for {p.repeat} passes over {_tokens(call)} elements"
    if student_best > p.floor_seconds and ratio > p.max_ratio:
        raise CheckFailed(summary + f", allowed {p.max_ratio:g}x: avoid Python loops and dense one-hot products")
    return summary
