"""Execute one call of a challenge entry: construct, load weights, forward, backward.

The same function runs the student's code inside the worker process and the
reference in the grader, so both sides see exactly the same protocol. It only
returns plain data (tensors, numbers, strings); it never decides a verdict.
"""

from __future__ import annotations

import contextlib
import inspect
import time
import traceback
import weakref
from typing import Any, Callable

import torch
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode

from validator.worker.protocol import dtype_from_name

MAX_MESSAGE_CHARS = 2000


class StudentError(Exception):
    """Raised inside execute() to stop a call at a named stage."""

    def __init__(self, stage: str, info: dict):
        super().__init__(info.get("message", ""))
        self.stage = stage
        self.info = info


def exception_info(exc: BaseException, origin: str | None = None) -> dict:
    """Describe an exception as plain data; keep only frames from ``origin`` files."""
    frames = traceback.extract_tb(exc.__traceback__)
    in_student = None
    if origin:
        # only the student's own lines: a frame of the grader (this file) or of torch is no location for them
        frames = [f for f in frames if f.filename == origin]
        in_student = bool(frames)
    message = str(exc)
    if len(message) > MAX_MESSAGE_CHARS:
        message = message[:MAX_MESSAGE_CHARS] + " ..."
    return {
        "type": type(exc).__name__,
        "mro": [c.__name__ for c in type(exc).__mro__],
        "message": message,
        "where": [{"file": f.filename, "line": f.lineno, "function": f.name,
                   "code": (f.line or "")[:200]} for f in frames[-5:]],
        **({} if in_student is None else {"student_frames": in_student}),
    }


class OpRecorder(TorchDispatchMode):
    """Counts aten ops and tracks the peak of live tensor bytes they allocate."""

    def __init__(self, track_memory: bool = False):
        super().__init__()
        self.counts: dict[str, int] = {}
        self.track_memory = track_memory
        self.live = 0
        self.peak = 0
        self._refs: dict[int, list] = {}

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = str(func.overloadpacket).replace("aten::", "aten.")
        self.counts[name] = self.counts.get(name, 0) + 1
        out = func(*args, **(kwargs or {}))
        if self.track_memory:
            for t in _tensors_in(out):
                self._track(t)
        return out

    def _track(self, t: torch.Tensor) -> None:
        try:
            storage = t.untyped_storage()
            key = storage.data_ptr()
            nbytes = storage.nbytes()
        except Exception:  # noqa: BLE001 - sparse or exotic tensors: ignore
            return
        if not key or not nbytes:
            return
        entry = self._refs.get(key)
        if entry is None:
            entry = self._refs[key] = [0, nbytes]
            self.live += nbytes
            self.peak = max(self.peak, self.live)
        entry[0] += 1
        weakref.finalize(t, self._release, key)

    def _release(self, key: int) -> None:
        entry = self._refs.get(key)
        if entry is None:
            return
        entry[0] -= 1
        if entry[0] <= 0:
            self.live -= entry[1]
            del self._refs[key]


def _tensors_in(obj: Any):
    if isinstance(obj, torch.Tensor):
        yield obj
    elif isinstance(obj, (list, tuple)):
        for v in obj:
            yield from _tensors_in(v)


def describe_entry(obj: Any) -> dict:
    """What an entry name refers to, and its signature, for the structure checks."""
    info: dict[str, Any] = {"exists": obj is not None, "type": type(obj).__name__}
    if obj is None:
        return info
    info["is_class"] = inspect.isclass(obj)
    info["is_module_class"] = inspect.isclass(obj) and issubclass(obj, nn.Module)
    info["is_autograd_function"] = inspect.isclass(obj) and issubclass(obj, torch.autograd.Function)
    info["callable"] = callable(obj)
    target = obj.__init__ if info["is_module_class"] else obj
    if info["is_autograd_function"]:
        target = obj.forward
    try:
        sig = inspect.signature(target)
        info["signature"] = str(sig)
        info["parameters"] = [p.name for p in sig.parameters.values()
                              if p.name not in ("self", "ctx")]
    except (TypeError, ValueError):
        info["signature"] = None
        info["parameters"] = None
    return info


def describe_structure(module: nn.Module) -> dict:
    """Registered parameters (with object identity), buffers and stray tensor attributes."""
    params = []
    for name, p in module.named_parameters(remove_duplicate=False):
        params.append({"name": name, "shape": list(p.shape), "dtype": str(p.dtype).removeprefix("torch."),
                       "device": str(p.device), "requires_grad": bool(p.requires_grad),
                       "object": id(p)})
    persistent = set(module.state_dict().keys())
    buffers = [{"name": n, "shape": list(b.shape), "dtype": str(b.dtype).removeprefix("torch."),
                "device": str(b.device), "persistent": n in persistent}
               for n, b in module.named_buffers()]
    registered = {p["name"] for p in params} | {b["name"] for b in buffers}
    stray = []
    for mod_name, mod in module.named_modules():
        for attr, value in vars(mod).items():
            if isinstance(value, torch.Tensor) and not attr.startswith("_"):
                full = f"{mod_name}.{attr}" if mod_name else attr
                if full not in registered:
                    stray.append({"name": full, "shape": list(value.shape),
                                  "dtype": str(value.dtype).removeprefix("torch."),
                                  "device": str(value.device),
                                  "requires_grad": bool(value.requires_grad)})
    return {"parameters": params, "buffers": buffers, "stray_tensors": stray,
            "training": bool(module.training)}


@contextlib.contextmanager
def _default_dtype(name: str | None):
    if not name:
        yield
        return
    old = torch.get_default_dtype()
    torch.set_default_dtype(dtype_from_name(name))
    try:
        yield
    finally:
        torch.set_default_dtype(old)


def _stage(stage: str, origin: str | None, fn: Callable, *args, **kwargs):
    try:
        return fn(*args, **kwargs)
    except StudentError:
        raise
    except BaseException as exc:  # noqa: BLE001 - SystemExit & co. are student failures too
        raise StudentError(stage, exception_info(exc, origin)) from None


def _construct(target: Any, call: dict, origin: str | None):
    kind = call["kind"]
    if kind != "module":
        return None
    args = call.get("init_args", [])
    kwargs = call.get("init_kwargs", {})
    module = _stage("construct", origin, target, *args, **kwargs)
    if not isinstance(module, nn.Module):
        raise StudentError("construct", {
            "type": "TypeError", "mro": ["TypeError"],
            "message": f"{call['entry']}(...) built a {type(module).__name__}, not an nn.Module"})
    return module


def _load_state(module: nn.Module, state: dict, origin: str | None) -> list[str]:
    """Copy ``state`` into the module; return the names it skipped.

    A name whose submodule this configuration did not build (``position_embedding.weight``
    of a layer built with ``positional="none"``) is skipped, so one spec can grade
    several configurations of an entry; any other missing name is an error.
    """
    named = dict(module.named_parameters(remove_duplicate=False))
    named.update(dict(module.named_buffers()))
    submodules = {n for n, _ in module.named_modules(remove_duplicate=False)}
    skipped = []
    for name, value in state.items():
        owner = name.rpartition(".")[0]
        if name not in named and owner and owner not in submodules:
            skipped.append(name)
            continue
        dest = named.get(name)
        if dest is None:
            # a plain tensor attribute holds the table: load it there, the `parameters` check reports the rest
            holder = module.get_submodule(owner) if owner in submodules else None
            value_there = getattr(holder, name.rpartition(".")[2], None) if holder is not None else None
            dest = value_there if isinstance(value_there, torch.Tensor) else None
        if dest is None:
            found = ", ".join(sorted(named)) or "none"
            raise StudentError("load", {"type": "KeyError", "mro": ["KeyError"],
                                        "message": f"your layer has no parameter, buffer or tensor attribute named "
                                                   f"{name!r} (it has: {found})"})
        if tuple(dest.shape) != tuple(value.shape):
            raise StudentError("load", {
                "type": "ValueError", "mro": ["ValueError"],
                "message": f"{name!r} has shape {tuple(dest.shape)}, cannot load a tensor of shape {tuple(value.shape)}"})
        with torch.no_grad():
            _stage("load", origin, dest.copy_, value)
    return skipped


def execute(namespace: dict, call: dict, origin: str | None = None) -> dict:
    """Run ``call`` against the objects in ``namespace``; never raises for student errors."""
    try:
        result = _execute(namespace, call, origin)
        return _to_cpu(result) if call.get("device") is not None else result
    except StudentError as err:
        return {"ok": False, "stage": err.stage, "exception": err.info}


def _to_cpu(obj: Any) -> Any:
    """Every tensor of a result on the CPU: the wire format and the comparisons live there."""
    if isinstance(obj, torch.Tensor):
        return obj.detach().cpu() if obj.device.type != "meta" else obj
    if isinstance(obj, dict):
        return {k: _to_cpu(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_to_cpu(v) for v in obj]
    return obj


def _execute(namespace: dict, call: dict, origin: str | None) -> dict:
    want = set(call.get("want", ("output",)))
    target = namespace.get(call["entry"])
    if target is None:
        raise StudentError("lookup", {"type": "AttributeError", "mro": ["AttributeError"],
                                      "message": f"layers.py defines no {call['entry']!r}"})
    result: dict[str, Any] = {"ok": True}
    seed = call.get("seed", 0)
    device = call.get("device")  # run the layer there (moved after loading); results come back on the CPU
    with _default_dtype(call.get("default_dtype")):
        if seed is not None:
            torch.manual_seed(int(seed))
        module = _construct(target, call, origin)
        if module is not None:
            if "structure" in want:
                result["structure"] = _stage("inspect", origin, describe_structure, module)
            if "params" in want:
                result["params"] = {n: p.detach().clone() for n, p in
                                    module.named_parameters(remove_duplicate=False)}
            if call.get("state"):
                skipped = _load_state(module, call["state"], origin)
                if skipped:
                    result["state_skipped"] = skipped
            if call.get("train") is not None:
                _stage("train", origin, module.train, bool(call["train"]))
        if "construct_only" in want:
            return result
        if module is not None and device is not None:
            _stage("to_device", origin, module.to, device)
        inputs = []
        for item in call.get("inputs", []):
            value = item["value"]
            if isinstance(value, torch.Tensor):
                value = value.clone() if device is None else value.to(device)
                if item.get("requires_grad"):
                    value.requires_grad_(True)
            inputs.append(value)
        if call["kind"] == "module":
            fn = module
        elif call["kind"] == "autograd_function":
            fn = getattr(target, "apply")
        else:
            fn = target
        before = ({n: p.detach().clone() for n, p in module.named_parameters(remove_duplicate=False)}
                  if module is not None and "params_after" in want else None)

        recorder = OpRecorder(track_memory=bool(call.get("track_memory"))) if (
            call.get("trace_ops") or call.get("track_memory")) else None
        repeat = max(1, int(call.get("repeat", 1)))
        if seed is not None:
            torch.manual_seed(int(seed) + 1)
        started = time.perf_counter()
        with (recorder if recorder is not None else contextlib.nullcontext()):
            for _ in range(repeat):
                output = _stage("forward", origin, fn, *inputs)
                if not isinstance(output, torch.Tensor):
                    raise StudentError("forward", {
                        "type": "TypeError", "mro": ["TypeError"],
                        "message": f"returned a {type(output).__name__}, expected a torch.Tensor"})
                placed = module is not None or any(isinstance(v, torch.Tensor) for v in inputs)
                if device is not None and placed and output.device.type != torch.device(device).type:
                    raise StudentError("forward", {
                        "type": "RuntimeError", "mro": ["RuntimeError"],
                        "message": f"returned a tensor on {output.device}, but the layer and its inputs are on "
                                   f"{device}: create new tensors on the input's device (device=x.device)"})
                grad_output = call.get("grad_output")
                if grad_output is not None and output.requires_grad:
                    if module is not None:
                        module.zero_grad(set_to_none=True)
                    for t in inputs:
                        if isinstance(t, torch.Tensor) and t.grad is not None:
                            t.grad = None
                    if tuple(grad_output.shape) != tuple(output.shape):
                        raise StudentError("backward", {
                            "type": "ValueError", "mro": ["ValueError"],
                            "message": f"output has shape {tuple(output.shape)}, expected "
                                       f"{tuple(grad_output.shape)}, so no gradient can flow back"})
                    _stage("backward", origin, output.backward,
                           grad_output.to(dtype=output.dtype, device=output.device))
        result["seconds"] = time.perf_counter() - started
        if recorder is not None:
            result["ops"] = dict(recorder.counts)
            result["peak_bytes"] = int(recorder.peak)
        result["output_requires_grad"] = bool(output.requires_grad)
        result["output_is_subclass"] = type(output) is not torch.Tensor
        if "output" in want:
            result["output"] = output
        if "param_grads" in want and module is not None:
            # every name of a shared (tied) parameter, whichever submodule registered it first
            result["param_grads"] = {n: (p.grad.detach().clone() if p.grad is not None else None)
                                     for n, p in module.named_parameters(remove_duplicate=False)}
        if "input_grads" in want:
            result["input_grads"] = [
                (t.grad.detach().clone() if isinstance(t, torch.Tensor) and t.grad is not None else None)
                for t in inputs]
        if before is not None:
            result["params_before"] = before
            result["params_after"] = {n: p.detach().clone()
                                      for n, p in module.named_parameters(remove_duplicate=False)}
    return result
