"""Evidence only from graded runs.

A check that judges *how* a layer computes (the ops it runs, how their count grows, the memory it
holds, its time) reads that from a measured run of the student's layer. A layer can tell that it is
measured (the profiler is on, a dispatch mode is active, an input it saw before comes again, a
recognisable probe) and compute differently there. So every measured run is also a graded run:

- its inputs are drawn fresh for that run (:func:`fresh_call`, :func:`redraw`): a seed of its own,
  never the input of another run (a warm-up, another timed try, another size of a scaling series, an
  earlier pass of the same run), never a recognisable probe;
- its output, and its gradients where it ran backward, are compared with the reference's on the same
  inputs (:func:`measured`), at the challenge's tolerance.

A measured run whose values are wrong is a wrong layer where a value or gradient check of the challenge
failed before (``Context.wrong_values``): its evidence is judged as it is, so one bug still costs only
the checks that name it. Otherwise the layer runs unmeasured on fresh inputs of the same size (a few
times): wrong there too, it is judged as it is; right there every time, the layer computes differently
when it is measured, and the check fails, marked for review. (Confirming on the measured inputs
themselves would let a layer replay, unmeasured, the wrong answer it gave when measured.)

:meth:`validator.context.Context.student` refuses a call that yields evidence (``EVIDENCE_KEYS``)
unless it comes through :func:`measured`: every check that measures gets this, present and future.
"""

from __future__ import annotations

import zlib
from typing import Any

import torch

from validator.cases import fixed_case
from validator.checks.common import raise_if_failed
from validator.checks.constraint import ReviewFailure, raise_if_tampered
from validator.compare import mismatch, tolerance_for
from validator.context import EVIDENCE_KEYS, CheckErrored, Context
from validator.reference_side import call_key
from validator.spec.schema import CheckSpec

CONFIRMATIONS = 3  # unmeasured runs on fresh inputs that decide whether a wrong measured run is a wrong layer


def evidence_seed(ctx: Context, check: CheckSpec, *salt: Any) -> int:
    """A seed for one measured run: from the run's seed (so ``--seed`` replays it), the check, and what the run
    is (``"small"``, ``("try", 3)``...), so that no two runs of a check share their inputs."""
    text = "/".join(str(s) for s in (ctx.check_seed(check.id), "evidence", *salt))
    return zlib.crc32(text.encode()) % (2**31 - 1) + 1


def fresh_call(ctx: Context, entry_name: str, seed: int, *, dims: dict[str, int] | None = None,
               shapes: dict[str, list[int]] | None = None, want: list[str] | None = None) -> dict:
    """A call of ``entry_name`` on inputs and test weights drawn from ``seed`` alone (random values and IDs of
    the given sizes: no ``arange``, nothing another run used)."""
    entry = ctx.challenge.entries[entry_name]
    case = fixed_case(ctx.challenge, entry, dims=dims, shapes=shapes, seed=seed)
    state = (ctx.make_state(entry, case.dims, seed, torch.get_default_dtype())
             if entry.kind == "module" and entry.parameters else None)
    return ctx.build_call(entry_name, case, want=list(want or ["output"]), state=state)


def redraw(ctx: Context, call: dict, seed: int) -> dict:
    """``call`` on fresh inputs and weights of the same sizes, drawn from ``seed``; every other key kept."""
    entry = ctx.challenge.entries[call["entry"]]
    shapes = {name: list(item["value"].shape) for name, item in zip(entry.call, call["inputs"])
              if isinstance(item["value"], torch.Tensor)}
    again = fresh_call(ctx, call["entry"], seed, dims=call.get("_dims"), shapes=shapes, want=call.get("want"))
    kept = {k: v for k, v in call.items() if k not in ("inputs", "state", "seed", "more_inputs", "_dims")}
    out = {**kept, "inputs": again["inputs"], "state": again["state"] if call.get("state") else call.get("state"),
           "seed": again["seed"], "_dims": again["_dims"]}
    if call.get("more_inputs"):
        out["more_inputs"] = more_inputs(ctx, out, len(call["more_inputs"]) + 1, seed)
    return out


def more_inputs(ctx: Context, call: dict, passes: int, seed: int) -> list[list[dict]]:
    """Inputs for passes 2..``passes`` of ``call``, each drawn fresh: a pass cannot replay an earlier one."""
    out = []
    for n in range(1, passes):
        out.append(redraw(ctx, {k: v for k, v in call.items() if k != "more_inputs"},
                          zlib.crc32(f"{seed}/pass/{n}".encode()))["inputs"])
    return out


def plain(call: dict) -> dict:
    """The call without what makes it a measurement: what the reference runs, and what a confirmation runs."""
    out = {k: v for k, v in call.items() if k not in EVIDENCE_KEYS}
    want = ["output"]
    if call.get("grad_output") is not None:
        want += ["input_grads"] + (["param_grads"] if call.get("kind") == "module" else [])
    return dict(out, want=want)


def run_wants(call: dict) -> list[str]:
    """What a measured run asks the worker for: the call's own wants and everything it is graded on (:func:`plain`)."""
    return sorted(set(call.get("want") or []) | set(plain(call)["want"]))


def measured(ctx: Context, check: CheckSpec, call: dict, doing: str = "running your code", *,
             shared: bool = False, reference: dict | None = None) -> dict:
    """The student's result for ``call``, a run that yields evidence, once its values are shown to be the layer's.

    The run's output (every pass's, with ``more_inputs``) and its gradients (where it ran backward) are compared
    with the reference's on the same inputs. See the module's docstring for what a wrong run costs. ``shared``:
    a run other checks of the challenge make too (validator.checks.composite), kept for them once shown right.
    ``reference``: the reference's result for these very inputs where the check ran it itself (a speed check
    times it), with every output of :func:`plain`'s ``want``; else the reference side is asked.
    """
    graded = plain(call)
    sent = {k: v for k, v in call.items() if not k.startswith("_")}
    sent["want"] = run_wants(call)
    # what the comparison leaves out (the reference is still asked for the call as graded, which a handout's
    # recorded reference holds): weights an adapter stores changed; a backward a gradient check already charged
    unjudged: set[str] = set()
    if ctx.weights_unreadable(call["entry"]):
        unjudged.add("param_grads")
        sent["want"] = [w for w in sent["want"] if w != "param_grads"]
    runs = getattr(ctx, "measured_runs", None) if shared else None
    key = call_key(sent) if runs is not None else None
    if key is not None and key in runs:
        return runs[key]
    reply = ctx.student(sent, check.timeout, doing, evidence=True)
    if _backward_known_broken(ctx, sent, reply):  # judge the forward's evidence: its backward is a gradient check's
        unjudged |= {"param_grads", "input_grads"}
        sent = dict(sent, grad_output=None, want=run_wants(dict(call, grad_output=None)))
        reply = ctx.student(sent, check.timeout, doing, evidence=True)
    result = raise_if_failed(ctx, sent, reply)
    raise_if_tampered(result, doing)
    expected = reference if reference is not None else ctx.reference_call(graded)
    wrong = differences(ctx, result, {k: v for k, v in expected.items() if k not in unjudged})
    if unjudged:  # a confirmation run asks for no more than the measured run could show
        graded = dict(graded, want=[w for w in graded["want"] if w not in unjudged],
                      grad_output=None if "input_grads" in unjudged else graded.get("grad_output"))
    if wrong and not getattr(ctx, "wrong_values", None) and not _wrong_unmeasured(ctx, check, graded):
        dims = ", ".join(f"{k}={v}" for k, v in (call.get("_dims") or {}).items() if isinstance(v, int))
        raise ReviewFailure(
            f"{doing}: the measured run's {wrong}, yet your layer returned the right values on fresh inputs of "
            f"the same size ({dims}) when it was not measured, and no value or gradient check failed. What the grader measures (ops, memory, time) "
            "must be the layer that is graded: compute the same way whatever is watching (the profiler, a "
            "dispatch mode, a repeated input). A person will review this submission",
            [f"the layer's values differ when it is measured ({doing})"])
    if key is not None:
        runs[key] = result
    return result


def _backward_known_broken(ctx: Context, sent: dict, reply: dict) -> bool:
    """Whether a measured run raised in its backward where a gradient check of the challenge already failed or
    raised (an in-place op autograd needed, a float32-only backward): that bug is the gradient check's to charge,
    and the run's forward still shows how the layer computes."""
    return (not reply.get("ok") and reply.get("stage") == "backward" and sent.get("grad_output") is not None
            and ctx.backward_known_broken())


def differences(ctx: Context, got: dict, ref: dict) -> str | None:
    """The first way ``got`` differs from the reference's ``ref`` (output, each pass's output, gradients), or None.

    Dtypes are not compared (the dtype checks own them): values are, at the challenge's tolerance.
    """
    got_passes, ref_passes = _list(got.get("pass_outputs")), _list(ref.get("pass_outputs"))
    if len(got_passes) != len(ref_passes):
        return f"run returned {len(got_passes)} outputs for {len(ref_passes)} passes"
    pairs = [("output", got.get("output"), ref.get("output"))]
    pairs += [(f"output of pass {n + 1}", g, r) for n, (g, r) in enumerate(zip(got_passes, ref_passes))]
    got_grads = _list(got.get("input_grads"))
    pairs += [(f"gradient of input {n + 1}", got_grads[n] if n < len(got_grads) else None, r)
              for n, r in enumerate(_list(ref.get("input_grads")))]
    pairs += [(f"gradient of {name}", (got.get("param_grads") or {}).get(name), r)
              for name, r in (ref.get("param_grads") or {}).items()]
    for what, g, r in pairs:
        if not isinstance(r, torch.Tensor):
            continue
        atol, rtol = tolerance(r, ctx.challenge.tolerance)
        problem = mismatch(g, r, atol=atol, rtol=rtol, what=what, check_dtype=False)
        if problem:
            return problem
    return None


def tolerance(expected: torch.Tensor, spec: object) -> tuple[float, float]:
    """The challenge's tolerance, widened to a thousandth of the tensor's scale: what a measured run must show
    is that it computes the layer (not zeros, not other rows, not a skipped backward), and a legitimate float32
    computation in another order (a gradient summed per token, attention near one-hot) must never look like
    a layer that behaves differently when measured."""
    atol, rtol = tolerance_for(expected.dtype, spec)
    if not expected.dtype.is_floating_point or expected.numel() == 0:
        return atol, rtol
    low, high = torch.aminmax(expected.detach())  # one pass, no copy: a timed run's outputs are megabytes
    scale = float(torch.maximum(-low, high).nan_to_num(posinf=0.0))  # the largest |value|; 0 for NaN or inf
    return max(float(atol), 1e-3 * scale), max(rtol, 1e-3)


def _list(value: Any) -> list:
    return value if isinstance(value, list) else []


def _wrong_unmeasured(ctx: Context, check: CheckSpec, graded: dict) -> bool:
    """Whether the layer is wrong when it is not measured as well, on fresh inputs of the graded call's size."""
    for n in range(CONFIRMATIONS):
        again = redraw(ctx, graded, evidence_seed(ctx, check, "confirm", graded.get("seed"), n))
        sent = {k: v for k, v in again.items() if not k.startswith("_")}
        try:
            got = raise_if_failed(ctx, sent, ctx.student(sent, check.timeout, "running your code unmeasured"))
        except CheckErrored:
            return True  # it raises there: a broken layer, which the value checks report
        if differences(ctx, got, ctx.reference_call(again)):
            return True
    return False
