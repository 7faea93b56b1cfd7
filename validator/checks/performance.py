"""Performance tests. Two are deterministic and carry the verdict on loops and one-hots:
the count of tensor ops as the input grows, and the peak of live tensor bytes as a
dimension grows. The third compares time with the reference's, generously, as a ratio
of the fastest of interleaved runs, so the machine's load does not decide it.
"""

from __future__ import annotations

import random
from typing import Union

import torch
from pydantic import BaseModel, ConfigDict, field_validator

from validator.checks import Params, register
from validator.checks.common import CheckFailed, entry_of, raise_if_failed
from validator.checks.evidence import evidence_seed, fresh_call, measured, more_inputs, plain, run_wants
from validator.context import Context
from validator.draws import seeded_normal
from validator.spec.schema import CheckSpec


Span = Union[int, list[int]]  # a fixed size, or [low, high] drawn from the run's seed


class Size(BaseModel):
    """Dims and input shapes of one performance run; a ``[low, high]`` pair is drawn from the check's seed,
    so a layer cannot special-case the size it will be measured at."""

    model_config = ConfigDict(extra="forbid")
    dims: dict[str, Span] = {}
    shapes: dict[str, list[Span]] = {}

    @field_validator("dims", "shapes")
    @classmethod
    def _spans(cls, v: dict, info) -> dict:
        for name, value in v.items():
            for span in (value if info.field_name == "shapes" else [value]):
                if isinstance(span, list) and (len(span) != 2 or not 0 <= span[0] <= span[1]):
                    raise ValueError(f"{name}: a drawn size is [low, high] with 0 <= low <= high, got {span}")
        return v

    def draw(self, rng: random.Random) -> tuple[dict[str, int], dict[str, list[int]]]:
        def one(span):
            return rng.randint(span[0], span[1]) if isinstance(span, list) else int(span)
        dims = {k: one(v) for k, v in self.dims.items()}
        shapes = {k: [one(s) for s in v] for k, v in self.shapes.items()}
        return dims, shapes


def _rng(ctx: Context, check: CheckSpec, salt: str) -> random.Random:
    return random.Random(f"{ctx.check_seed(check.id)}/{salt}")


def _call(ctx: Context, check: CheckSpec, size: Size, run: object, rng: random.Random | None = None,
          drawn: tuple[dict, dict] | None = None, **extra) -> dict:
    """A measured call at ``size`` (drawn from ``rng``, or ``drawn`` already), on inputs, weights and an upstream
    gradient of its own, drawn for the run named ``run`` (see validator.checks.evidence)."""
    name, _ = entry_of(ctx, check)
    dims, shapes = drawn or size.draw(rng or _rng(ctx, check, "size"))
    seed = evidence_seed(ctx, check, run)
    call = fresh_call(ctx, name, seed, dims=dims, shapes=shapes)
    shape, dtype = _output_size(ctx, call, (ctx.challenge.id, name, seed, repr(dims), repr(shapes),
                                            torch.get_default_dtype()))
    return dict(call, grad_output=seeded_normal([shape], seed + 1, dtype)[0], **extra)


def _output_size(ctx: Context, call: dict, drawn: tuple) -> tuple[tuple[int, ...], torch.dtype]:
    """The shape and dtype of the reference's output for ``call``, which ``drawn`` (what ``fresh_call`` drew it
    from) determines. A batch slot keeps them (``output_sizes``): asking the reference side's memory again
    hashed the call's weights and inputs, megabytes for a speed check, only for their size."""
    known = getattr(getattr(ctx, "ref", None), "output_sizes", None)
    if known is not None and drawn in known:
        return known[drawn]
    output = ctx.reference_call(call)["output"]
    size = (tuple(output.shape), output.dtype)
    if known is not None:
        if len(known) >= 20_000:  # seeds that vary per submission: start over, as the memory does
            known.clear()
        known[drawn] = size
    return size


def _observed(ctx: Context, check: CheckSpec, call: dict, doing: str = "running your code") -> dict:
    """A measured run whose evidence was not tampered with (see validator.runner.Observation) and whose values
    are the layer's (see validator.checks.evidence.measured)."""
    return measured(ctx, check, call, doing)


def _tokens(call: dict) -> int:
    return sum(i["value"].numel() for i in call["inputs"] if isinstance(i["value"], torch.Tensor))


class ScalingParams(Params):
    small: Size
    large: Size
    # further sizes whose op count must also stay within max_extra_ops of `small`: a larger
    # vocabulary catches a loop over the vocabulary, which a growing token count does not
    grow: list[Size] = []
    max_extra_ops: int = 4


def _dims_note(call: dict) -> str:
    return ", ".join(f"{k}={v}" for k, v in call["_dims"].items() if isinstance(v, int))


def size_note(call: dict) -> str:
    """A measured call's size as a student reads it: ``120 elements (num_embeddings=64, embedding_dim=8)``."""
    return f"{_tokens(call)} elements ({_dims_note(call)})"


def scaling_runs(ctx: Context, check: CheckSpec, p: ScalingParams) -> list[tuple[dict, str]]:
    """The traced calls an ``op_scaling`` check makes, ``(call, what it is doing)``: the small size first, then the
    large one and each ``grow`` size. They depend on the check's seed alone, so a ``forbidden_runtime`` check with
    ``runs_of`` builds the same calls and judges the same runs, each made once (``measured``, shared)."""
    rng = _rng(ctx, check, "sizes")
    runs = [(_call(ctx, check, p.small, "small", rng=rng, trace_ops=True), "counting the tensor ops of your code")]
    for n, (size, doing) in enumerate([(p.large, "a larger input")] + [(g, "a larger size") for g in p.grow]):
        runs.append((_call(ctx, check, size, ("larger", n), rng=rng, trace_ops=True),
                     f"counting the tensor ops of your code on {doing}"))
    return runs


@register("op_scaling", ScalingParams)
def op_scaling(ctx: Context, check: CheckSpec, p: ScalingParams) -> str:
    (small_call, doing), *larger = scaling_runs(ctx, check, p)
    small = measured(ctx, check, small_call, doing, shared=True)
    n_small = sum(small["ops"].values())
    notes = []
    for call, doing in larger:
        got = measured(ctx, check, call, doing, shared=True)
        n = sum(got["ops"].values())
        if n - n_small > p.max_extra_ops:
            grew = sorted(((got["ops"].get(k, 0) - small["ops"].get(k, 0), k) for k in got["ops"]), reverse=True)[:3]
            top = ", ".join(f"{k} +{d}" for d, k in grew if d > 0)
            raise CheckFailed(f"{n_small} tensor ops for {_tokens(small_call)} input elements ({_dims_note(small_call)}) "
                              f"but {n} for {_tokens(call)} ({_dims_note(call)}) (most growth: {top}): the work is "
                              "done one element (or one vocabulary row) at a time, probably a Python loop; do it with "
                              "one operation on the whole tensor")
        notes.append(f"{n} for {_tokens(call)} ({_dims_note(call)})")
    return f"{n_small} ops for {size_note(small_call)}, " + ", ".join(notes)


class MemoryParams(Params):
    small: Size
    large: Size
    dim: str
    parameter_copies: float = 3.0
    slack_bytes: int = 1 << 16


@register("memory_scaling", MemoryParams)
def memory_scaling(ctx: Context, check: CheckSpec, p: MemoryParams) -> str:
    name, entry = entry_of(ctx, check)
    rng = _rng(ctx, check, "sizes")
    small_call = _call(ctx, check, p.small, "small", rng=rng, track_memory=True)
    large_call = _call(ctx, check, p.large, "large", rng=rng, track_memory=True)
    small = _observed(ctx, check, small_call, "measuring the memory your code holds")
    large = _observed(ctx, check, large_call, "measuring the memory your code holds with a larger table")
    itemsize = torch.empty((), dtype=torch.get_default_dtype()).element_size()

    def one(dims: dict) -> int:
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

    def param_bytes(small_dims: dict, large_dims: dict) -> int:
        return one(large_dims) - one(small_dims)

    growth = large["peak_bytes"] - small["peak_bytes"]
    a, b = small_call["_dims"].get(p.dim), large_call["_dims"].get(p.dim)
    allowed = p.parameter_copies * (param_bytes(small_call["_dims"], large_call["_dims"])) + p.slack_bytes
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
    # interleaved student/reference timings per round; a failing ratio is measured again, up to `rounds` rounds
    tries: int = 5
    rounds: int = 3
    # a round stops early once the student's timed runs have taken this long (at least two runs each):
    # a layer that slow is far past any delay the machine's load adds to a run
    budget_seconds: float = 8.0
    # a round whose ratio of minima is this many times the limit fails at once: load that slowed every one
    # of the student's interleaved runs that much, and none of the reference's between them, is not plausible
    decisive: float = 4.0


def _ratio_of_minima(student_seconds: list[float], reference_seconds: list[float]) -> tuple[float, float, float]:
    best_student, best_reference = min(student_seconds), min(reference_seconds)
    return best_student, best_reference, best_student / max(best_reference, 1e-9)


@register("time_ratio", TimeParams, live_reference=True)
def time_ratio(ctx: Context, check: CheckSpec, p: TimeParams) -> str:
    """The student's forward+backward time vs the reference's, as a ratio of minima: load does not decide it.

    Each side's time is what the runner measures around the passes themselves (``seconds``: no process
    start-up, transfer or construction), both single-threaded. The two sides are timed in turn, so a busy
    spell slows both, and each side keeps its fastest run: load can only slow a run, never speed it up,
    so the minimum is the layer's own time. A ratio above the limit is measured again (more rounds,
    minima over all of them) before it fails: a spell of load that hit only the student's runs cannot
    fail correct code, while a per-token Python loop stays 100x slower in every round. The tries stop at
    two where the ratio is within ``max_ratio / decisive``: for more runs to push it past the limit, load
    would have had to slow both of the reference's runs ``decisive`` times and none of the student's (the
    ``decisive`` rule for failing, turned round).

    Where the reference side remembers the reference's fastest run of this measurement (a batch slot that
    graded it before, ``fastest``), the first interleaved pair is also judged against the fastest of every
    reference run of it so far, this pair's included: within ``max_ratio / decisive`` it passes at once.
    For that to pass a layer too slow, load would have had to slow every reference run the slot ever made of
    this measurement ``decisive`` times and not the student's run (the rule above, with more reference
    runs). The reference is timed on every submission, so a time remembered under load is replaced by the
    next quiet one. Any other first pair is the first of the usual interleaved runs.
    """
    size = p.case.draw(_rng(ctx, check, "size"))
    tokens = [0]

    def timed_call(run: object, repeat: int) -> dict:
        """A timed run's call, on inputs of its own (every pass too): a cache of an earlier run or pass gains
        nothing."""
        call = _call(ctx, check, p.case, run, drawn=size, repeat=repeat)
        call["more_inputs"] = more_inputs(ctx, call, repeat, call["seed"])
        call["device"] = None  # timed on the CPU, like the reference it is compared with
        tokens[0] = _tokens(call)
        return call

    def timed_student(run: object, repeat: int) -> tuple[float, float]:
        """One timed run, whose every output must be the reference's (validator.checks.evidence.measured): the
        reference is timed on the same inputs just before, and that run's outputs and gradients are the ones
        the student's are compared with (megabytes a pass: not hashed and remembered a second time)."""
        call = timed_call(run, repeat)
        reference = _reference_single_threaded(ctx, dict(call, want=plain(call)["want"]))
        got = measured(ctx, check, call, f"timing your code (at {_tokens(call)} elements)", reference=reference)
        return _seconds(got), _seconds(reference)

    # A warm-up pass first, forward and backward as the timed runs go: its time and its values are not used (the
    # timed runs' are), so it is neither compared nor paired; asking the reference side's memory for its values
    # cost a hash of megabytes of inputs per submission. A layer that fails on it fails the check, as it would on
    # the timed runs.
    warm_up = timed_call("warm-up", 1)
    warm_up["want"] = run_wants(warm_up)
    raise_if_failed(ctx, warm_up, ctx.student(warm_up, check.timeout, f"warming up your code (at {tokens[0]} elements)"))
    memory = getattr(getattr(ctx, "ref", None), "fastest", None)  # None: the reference side remembers no times
    key = (ctx.challenge.id, check.id, repr(size), p.repeat) if memory is not None else None
    first: tuple[float, float] | None = timed_student(("try", 1, 0), p.repeat)
    passes = f"for {p.repeat} passes over {tokens[0]} elements each (every pass on inputs of its own)"
    if memory is not None and key in memory:
        memory[key] = min(memory[key], first[1])  # the fastest reference run ever seen, this one included
        seconds, known, ratio = _ratio_of_minima([first[0]], [memory[key]])
        if seconds <= p.floor_seconds or ratio <= p.max_ratio / p.decisive:
            return (f"{seconds * 1e3:.2f} ms vs reference {known * 1e3:.2f} ms ({ratio:.1f}x; one interleaved run, "
                    f"against the reference's fastest run of this measurement in this grading process) {passes}")
    student, reference = [], []
    for rounds in range(1, max(1, p.rounds) + 1):
        spent = 0.0
        for i in range(max(2, p.tries)):
            if first is not None:
                seconds, ref_seconds = first
                first = None
            else:
                seconds, ref_seconds = timed_student(("try", rounds, i), p.repeat)
            student.append(seconds)
            reference.append(ref_seconds)
            spent += student[-1]
            if i >= 1 and (spent > p.budget_seconds or _ratio_of_minima(student, reference)[2] <= p.max_ratio / p.decisive):
                break  # far too slow to try again, or so far within the limit that no load could explain it
        best, ref_best, ratio = _ratio_of_minima(student, reference)
        slow = best > p.floor_seconds and ratio > p.max_ratio
        if not slow or spent > p.budget_seconds or ratio > p.max_ratio * p.decisive:
            break  # passed, or far too slow for load to explain: no need to measure again
    if memory is not None:
        memory[key] = min(ref_best, memory.get(key, ref_best))
    summary = (f"{best * 1e3:.2f} ms vs reference {ref_best * 1e3:.2f} ms ({ratio:.1f}x; the fastest of "
               f"{len(student)} interleaved runs each, {rounds} round{'s' if rounds > 1 else ''}) {passes}")
    if slow:
        raise CheckFailed(summary + f", allowed {p.max_ratio:g}x: avoid Python loops and dense one-hot products")
    return summary


def _seconds(result: dict) -> float:
    seconds = result.get("seconds")
    if not isinstance(seconds, (int, float)) or seconds < 0:
        raise RuntimeError(f"the runner reported no time for a timed call: {seconds!r}")
    return float(seconds)


def _reference_single_threaded(ctx: Context, call: dict) -> dict:
    """The reference runs in the grader's process: one thread, like the student's worker, and with every
    process of the submission stopped (``Worker.paused``), so that nothing it left running or woke before
    its reply competes with the reference's timed runs and shrinks the ratio."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with ctx.worker.paused():
            return ctx.reference_call(call)
    finally:
        torch.set_num_threads(threads)
