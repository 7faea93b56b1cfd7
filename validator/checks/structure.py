"""Structure tests: what the student's object is, its signature, its parameters, dtype and device."""

from __future__ import annotations

from typing import Literal, Optional

from pydantic import model_validator

from validator.checks import Params, register
from validator.checks.common import (CheckFailed, entry_of, match_parameters, probe_case, probe_dims,
                                     naming_advice, raise_if_failed, run_student, unmatched_parameters)
from validator.context import Context, NotGraded, format_exception
from validator.spec.schema import CheckSpec

_KIND_WORDS = {"module": "an nn.Module subclass", "function": "a plain function",
               "autograd_function": "a torch.autograd.Function subclass"}


class SignatureParams(Params):
    names: Optional[list[str]] = None


@register("signature", SignatureParams, uses_reference=False,
          not_through_adapter="{function} builds and calls your layer, so its constructor's signature is yours to choose")
def signature(ctx: Context, check: CheckSpec, p: SignatureParams) -> str:
    name, entry = entry_of(ctx, check)
    info = ctx.entries.get(name) or {}
    label = ctx.label(name)
    if not info.get("exists"):
        raise CheckFailed(f"layers.py defines no {name!r}; the challenge expects {_KIND_WORDS[entry.kind]} with that name")
    ok_kind = {"module": info.get("is_module_class"), "autograd_function": info.get("is_autograd_function"),
               "function": info.get("callable") and not info.get("is_class")}[entry.kind]
    if not ok_kind:
        raise CheckFailed(f"{label} is a {info.get('type')}, expected {_KIND_WORDS[entry.kind]}")
    expected = p.names
    if expected is None:
        expected = [a for a in entry.init if isinstance(a, str)] + entry.accepts if entry.kind == "module" \
            else list(entry.call)
    got = info.get("parameters")
    if got is None:
        return "signature could not be inspected; calls will tell"
    if entry.kind == "autograd_function":
        got = got[: len(expected)]
    if ctx.target(name) is not None and list(got[: len(expected)]) != list(expected):
        return _positional_signature(ctx, check, name, entry, info, expected)
    if list(got[: len(expected)]) != list(expected):
        raise CheckFailed(f"{name}{info.get('signature')} does not match the contract: expected parameters "
                          f"({', '.join(expected)}), in that order")
    _not_a_stub(ctx, check, name, entry)
    return f"{label}{info.get('signature')}"


def _positional_signature(ctx: Context, check: CheckSpec, name: str, entry, info: dict, expected: list[str]) -> str:
    """In a student's own package names may differ: the contract's arguments must fit by position.

    The worker passes the contract's positional arguments by position and each keyword
    (``device=``, ``dtype=``, options) by name where the signature has that name, else at
    its position in the contract (see :func:`validator.runner.bind_by_position`).
    """
    label = ctx.label(name)
    got = info.get("parameters") or []
    takes = info.get("positional")
    if takes is None:  # an older worker's description: every named parameter counts
        takes = len(got)
    if takes != -1 and takes < len(expected):
        raise CheckFailed(f"{label}{info.get('signature')} takes {takes} argument(s) by position, but the contract "
                          f"passes {len(expected)} ({', '.join(expected)}): in your own package the names may "
                          "differ, the order and the number may not")
    _not_a_stub(ctx, check, name, entry)
    pairs = ", ".join(f"{c}->{g}" if c != g else c for c, g in zip(expected, got))
    return f"{label}{info.get('signature')}: the contract's arguments by position ({pairs})"


def _not_a_stub(ctx: Context, check: CheckSpec, name: str, entry) -> None:
    """The shipped stub has the right signature: it earns the point only once it stops raising NotImplementedError.

    Any other exception (or a wrong parameter name) is for the checks that own it, so it does not count here.
    """
    want = ["structure", "construct_only"] if entry.kind == "module" else ["output"]
    result = ctx.student(ctx.build_call(name, probe_case(ctx, entry), want=want), check.timeout, "calling your code")
    info = result.get("exception") or {}
    if not result.get("ok") and "NotImplementedError" in (info.get("mro") or []):
        raise CheckFailed(f"{name} still raises NotImplementedError (the stub): the signature counts once it is "
                          "implemented")


class ParametersParams(Params):
    allow_extra: bool = False
    tied: list[list[str]] = []


@register("parameters", ParametersParams, uses_reference=False)
def parameters(ctx: Context, check: CheckSpec, p: ParametersParams) -> str:
    name, entry = entry_of(ctx, check)
    case = probe_case(ctx, entry)
    dims = probe_dims(ctx)
    result = run_student(ctx, check, ctx.build_call(name, case, want=["structure", "construct_only"]),
                         "constructing your module")
    structure = result["structure"]
    found = structure["parameters"]
    expected = ctx.expected_parameters(entry, dims)
    built = f"{ctx.label(name)}({', '.join(f'{k}={v}' for k, v in dims.items())})"
    problems = []
    by_name = {q["name"]: q for q in found}
    stray = {s["name"]: s for s in structure["stray_tensors"]}
    buffers = {b["name"]: b for b in structure["buffers"]}
    explicit = ctx.explicit_parameters(name)
    if ctx.weights_unreadable(name):  # through an adapter that stores a weight changed, or does not load it
        raise NotGraded(ctx.param_problems[name])
    mapping, _ = match_parameters(expected, found, explicit, by_shape=not ctx.adapted(name))
    in_place = ctx.target(name) is not None  # a package names its parameters as it likes; the mapping or shapes match them
    if in_place and mapping is None:
        raise CheckFailed(f"{built}: " + unmatched_parameters(expected, found, explicit,
                                                              naming_advice(ctx, name)))
    if in_place:
        by_name = by_name | {pname: by_name[mapping[pname]] for pname in expected if mapping[pname] in by_name}
    for pname, shape in expected.items():
        got = by_name.get(pname)
        if got is None:
            if pname in stray:
                problems.append(f"`{pname}` is a plain tensor attribute, not a registered nn.Parameter: wrap it in "
                                "nn.Parameter(...) so that parameters(), state_dict() and optimizers see it")
            elif pname in buffers:
                problems.append(f"`{pname}` is registered as a buffer; it must be a trainable nn.Parameter")
            elif mapping and mapping.get(pname) and mapping[pname] != pname:
                problems.append(f"expected a parameter named `{pname}`, found `{mapping[pname]}` with the right shape "
                                f"{shape}: rename it (the other checks graded it under its shape)")
            elif mapping is None and sum(tuple(q["shape"]) == shape for q in found) > 1:
                problems.append(unmatched_parameters({pname: shape}, found, explicit, naming_advice(ctx, name)))
            else:
                shapes = ", ".join(f"{q['name']} {tuple(q['shape'])}" for q in found) or "none"
                problems.append(f"expected a parameter `{pname}` of shape {shape}; registered parameters: {shapes}")
        elif tuple(got["shape"]) != shape:
            hint = " (transposed?)" if tuple(got["shape"]) == shape[::-1] else ""
            problems.append(f"`{pname}` has shape {tuple(got['shape'])}, expected {shape}{hint}")
        elif not got["requires_grad"]:
            problems.append(f"`{pname}` has requires_grad=False, so it would never be trained")
    if not p.allow_extra:
        distinct = {}
        for q in found:
            distinct.setdefault(q["object"], q["name"])
        extra = [n for n in distinct.values() if n not in expected and n not in (mapping or {}).values()]
        if extra:
            problems.append(f"unexpected extra parameters: {', '.join(extra)} (the contract has exactly "
                            f"{', '.join(expected)})")
    for group in p.tied:
        objects = {by_name[n]["object"] for n in group if n in by_name}
        missing = [n for n in group if n not in by_name]
        if missing:
            problems.append(f"tied parameters {', '.join(group)}: {', '.join(missing)} not found")
        elif len(objects) != 1:
            problems.append(f"{' and '.join(group)} must be the very same nn.Parameter object (weight tying); "
                            "they are separate tensors, so they will drift apart in training")
    if problems:
        raise CheckFailed(f"{built}: " + "; ".join(problems))
    if in_place:
        return f"{built}: " + ", ".join(f"{n} = your {mapping[n]} {tuple(by_name[n]['shape'])}" for n in expected)
    return f"{built}: " + ", ".join(f"{n} {tuple(by_name[n]['shape'])}" for n in expected)


FLOAT_DTYPES = ("float16", "bfloat16", "float32", "float64")


class DtypeParams(Params):
    """Which build to check, and whose dtype the output must have.

    ``output_follows: parameters`` (default): the output has the parameters' dtype (an embedding,
    a linear layer). ``output_follows: input``: the output has the dtype of the float input it was
    given, whatever the parameters hold (RMSNorm, RoPE, softmax compute in float32 and cast back).
    ``input_dtype`` casts the float inputs of the probe call (bf16 in, bf16 out; or float64 inputs for a
    layer built with ``dtype=torch.float64`` whose output follows its parameters). The layer's tensors are
    judged only when the check names their dtype (``dtype`` or ``default_dtype``): with ``input_dtype``
    alone the check is about the output, and the tensors may be what the contract lets them be (RoPE's
    tables in float32 or float64).
    ``tensors: parameters`` checks the parameters only, for a layer whose contract fixes the dtype of
    some buffers itself (a block whose RoPE tables are float32 whatever ``dtype=`` says).
    """

    dtype: Optional[Literal["float16", "bfloat16", "float32", "float64"]] = None
    default_dtype: Optional[Literal["float16", "bfloat16", "float32", "float64"]] = None
    input_dtype: Optional[Literal["float16", "bfloat16", "float32", "float64"]] = None
    output_follows: Literal["parameters", "input"] = "parameters"
    forward: bool = True
    tensors: Literal["all", "parameters"] = "all"

    @model_validator(mode="after")
    def _something_to_check(self):
        if self.dtype and self.default_dtype:
            raise ValueError("give `dtype` or `default_dtype`, not both")
        if not (self.dtype or self.default_dtype or self.input_dtype):
            raise ValueError("give `dtype` (built with dtype=), `default_dtype` or `input_dtype`")
        if self.output_follows == "input" and not self.forward:
            raise ValueError("`output_follows: input` needs `forward: true` (it checks the output)")
        return self


def _dt(dtype) -> str:
    return str(dtype).removeprefix("torch.")


@register("dtype", DtypeParams, uses_reference=False)
def dtype(ctx: Context, check: CheckSpec, p: DtypeParams) -> str:
    import torch

    name, entry = entry_of(ctx, check)
    want_dtype = p.dtype or p.default_dtype or _dt(torch.get_default_dtype())
    case = probe_case(ctx, entry)
    kwargs = {"dtype": getattr(torch, p.dtype)} if p.dtype else {}
    hows = [f"dtype=torch.{p.dtype}" if p.dtype else
            f"torch.set_default_dtype(torch.{p.default_dtype})" if p.default_dtype else ""]
    # Tensors are judged when the check names their dtype (dtype= or the default dtype); with `input_dtype`
    # alone the check is about the output: the tensors may be whatever the contract lets them be (and a layer that
    # is no module, which an adapter can reach, is judged by its output too).
    judged = bool(p.dtype or p.default_dtype)
    want = (["structure", "output"] if judged else ["output"]) if p.forward else ["structure", "construct_only"]
    call = ctx.build_call(name, case, want=want, init_kwargs=kwargs, default_dtype=p.default_dtype,
                          input_dtype=getattr(torch, p.input_dtype) if p.input_dtype else None, keep_dtypes=True)
    floats_in = [item["value"] for item in call["inputs"]
                 if isinstance(item["value"], torch.Tensor) and item["value"].dtype.is_floating_point]
    if p.output_follows == "input":
        if not floats_in:
            raise RuntimeError("`output_follows: input` needs a float input to follow (a spec bug)")
        hows.append(f"{_dt(floats_in[0].dtype)} inputs")
    how = ", ".join(h for h in hows if h)
    doing = f"building with {how}" if entry.kind == "module" else f"calling with {how}"
    result = ctx.student(call, check.timeout, doing)
    if not result.get("ok") and judged and entry.kind == "module" and result.get("stage") in ("forward", "backward"):
        # forward may fail *because* of a tensor in the wrong dtype (float64 x @ a float32 weight): say that first
        built = run_student(ctx, check, dict(call, want=["structure", "construct_only"]), doing)
        problems = _dtype_problems(ctx, name, entry, built, p, want_dtype, how)
        if problems:
            raise CheckFailed(_dtype_failure(problems, p, how, want_dtype)
                              + f" (then {format_exception(result, name).splitlines()[0]})")
    result = raise_if_failed(ctx, call, result)
    problems = _dtype_problems(ctx, name, entry, result, p, want_dtype, how) if judged else []
    if problems:
        raise CheckFailed(_dtype_failure(problems, p, how, want_dtype))
    tensors = _judged_tensors(result, p) if judged else []
    out = result.get("output")
    if not p.forward or out is None:
        return f"{how}: all tensors {want_dtype}"
    got = _dt(out.dtype)
    if not judged and p.output_follows == "parameters" and got == want_dtype:
        return f"{how}: output {got}"
    if p.output_follows == "input":
        want_out = _dt(floats_in[0].dtype)
        if got != want_out:
            params_note = f" (parameters {want_dtype})" if tensors else ""
            cause = ("compute in float32 if you must, then cast the result back with .to(x.dtype)"
                     if got in ("float32", "float64") else
                     "do not cast the result to another dtype (or compute in float32 and cast back to x.dtype)")
            raise CheckFailed(f"with {how}{params_note}, the output is {got}, expected {want_out}: the output must "
                              f"have the dtype of its input; {cause}")
        return f"{how}: " + (f"parameters {want_dtype}, " if tensors else "") + f"output {got} like its input"
    if got != want_dtype:
        if judged and tensors:
            raise CheckFailed(f"with {how}, the parameters are {want_dtype} but the output is {got}: do not cast "
                              "the result")
        advice = (f": return it in the default dtype (compute in a wider one if you like, then .to(torch.{want_dtype}) "
                  "or .to(torch.get_default_dtype()))" if p.default_dtype else "")
        raise CheckFailed(f"with {how}, the output is {got}, expected {want_dtype}{advice}")
    return f"{how}: all tensors {want_dtype}"


class DeviceParams(Params):
    device: str = "meta"


@register("device", DeviceParams, uses_reference=False)
def device(ctx: Context, check: CheckSpec, p: DeviceParams) -> str:
    name, entry = entry_of(ctx, check)
    case = probe_case(ctx, entry)
    result = run_student(ctx, check, ctx.build_call(name, case, want=["structure", "construct_only"],
                                                    init_kwargs={"device": p.device}),
                         f"building with device={p.device!r}")
    tensors = _all_tensors(result["structure"])
    if not tensors and entry.parameters:
        raise CheckFailed(f"with device={p.device!r}, your layer holds no tensor at all (no parameter, buffer or "
                          "tensor attribute), so there is nothing whose device could be checked")
    wrong = _lost_parameters(ctx, name, result["structure"], f"device={p.device!r}")
    # an empty tensor holds nothing to place (a cache forward rebuilds on the input's device, torch.empty(0, 0))
    wrong += [f"`{q['name']}` is on {q['device']}" + _kind_note(q) for q in tensors
              if q["device"].split(":")[0] != p.device and 0 not in (q.get("shape") or [1])]
    if wrong:
        raise CheckFailed(f"with device={p.device!r}: " + ", ".join(wrong)
                          + ": pass device=device when you create each tensor")
    return f"device={p.device!r}: {len(tensors)} tensors on {p.device}"


def _judged_tensors(result: dict, p: DtypeParams) -> list[dict]:
    """The floating-point tensors whose dtype the check judges. A 0-dim tensor attribute (``self.eps =
    torch.tensor(1e-5)``) is left alone: type promotion lets a dimensioned tensor's dtype win over it,
    so it cannot change what the layer computes in."""
    return [q for q in _all_tensors(result.get("structure") or {}) if q["dtype"].startswith(("float", "bfloat"))
            and (p.tensors == "all" or q["holder"] == "parameters")
            and not (q["holder"] == "stray_tensors" and not q.get("shape"))]


def _dtype_problems(ctx: Context, name: str, entry, result: dict, p: DtypeParams, want_dtype: str,
                    how: str) -> list[str]:
    """What the layer built ``how`` holds in another dtype than ``want_dtype`` (or holds no tensor at all)."""
    tensors = _judged_tensors(result, p)
    if entry.kind == "module" and not tensors and entry.parameters:
        raise CheckFailed(f"with {how}, your layer holds no floating-point tensor at all (no parameter, buffer or "
                          "tensor attribute), so there is nothing whose dtype could be checked")
    problems = _lost_parameters(ctx, name, result.get("structure") or {}, how)
    problems += [f"`{q['name']}` is {q['dtype']}" + _kind_note(q) for q in tensors if q["dtype"] != want_dtype]
    return problems


def _dtype_failure(problems: list[str], p: DtypeParams, how: str, want_dtype: str) -> str:
    return (f"with {how}, expected {want_dtype} tensors, but " + ", ".join(problems)
            + (": pass dtype=dtype when you create them" if p.dtype else ": create them without a hard-coded dtype"))


def _lost_parameters(ctx: Context, name: str, structure: dict, how: str) -> list[str]:
    """Parameters a plain build registers that this build turned into plain tensors (``.to(dtype)`` after wrapping)."""
    mapping = ctx.param_maps.get(name) or {}
    registered = {q["name"] for q in structure.get("parameters") or []}
    stray = {q["name"] for q in structure.get("stray_tensors") or []}
    return [f"`{theirs}` is a plain tensor here although a plain build registers it as an nn.Parameter (with {how} "
            "it must stay a Parameter: create it with the right dtype and device inside nn.Parameter(...) "
            "instead of converting it afterwards)"
            for theirs in mapping.values() if theirs not in registered and theirs in stray]


def _all_tensors(structure: dict) -> list[dict]:
    """Every tensor the module holds: parameters, buffers and plain tensor attributes (marked ``stray``)."""
    seen, out = set(), []
    for key in ("parameters", "buffers", "stray_tensors"):
        for q in structure.get(key) or []:
            if q["name"] not in seen:
                seen.add(q["name"])
                out.append(dict(q, holder=key))
    return out


def _kind_note(q: dict) -> str:
    return " (a plain tensor attribute)" if q.get("holder") == "stray_tensors" else ""
