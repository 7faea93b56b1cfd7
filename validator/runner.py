"""Execute one call of a challenge entry: construct, load weights, forward, backward.

The same function runs the student's code inside the worker process and the
reference in the grader, so both sides see exactly the same protocol. It only
returns plain data (tensors, numbers, strings); it never decides a verdict.
"""

from __future__ import annotations

import contextlib
import inspect
import os
import secrets
import threading
import time
import traceback
import weakref
from typing import Any, Callable

import torch
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode

from validator import standins
from validator.worker.protocol import dtype_from_name

MAX_MESSAGE_CHARS = 2000


# the error type of an adapter call that needs the layer's module where the layer is none (a function, a plain
# class): a verdict on the contract's nn.Module, which the checks report as a failure, not as a crash
NOT_A_MODULE = "NotAModule"


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
        frames = [f for f in frames if _from_origin(f.filename, origin)]
        in_student = bool(frames)
    message = str(exc)
    if len(message) > MAX_MESSAGE_CHARS:
        message = message[:MAX_MESSAGE_CHARS] + " ..."
    return {
        "type": type(exc).__name__,
        "mro": [c.__name__ for c in type(exc).__mro__],
        "message": message,
        "where": [{"file": _shown_file(f.filename, origin), "line": f.lineno, "function": f.name,
                   "code": (f.line or "")[:200]} for f in frames[-5:]],
        **({} if in_student is None else {"student_frames": in_student}),
    }


def _from_origin(filename: str, origin: str) -> bool:
    """A frame of the student's code: their file, or any file under their package root (``origin`` ends with /)."""
    return filename == origin or (origin.endswith(os.sep) and filename.startswith(origin))


def _shown_file(filename: str, origin: str | None) -> str:
    """A package's files are named as the student knows them: relative to the package root."""
    if origin and origin.endswith(os.sep) and filename.startswith(origin):
        return filename[len(origin):]
    return filename


_OP_NAMES: dict = {}  # an op overload -> the name the recorder counts it under ("aten.mm")


class OpRecorder(TorchDispatchMode):
    """Counts aten ops and tracks the peak of live tensor bytes they allocate.

    With a ``marker`` (a name unknown to the student's code), every op it sees is also
    wrapped in a profiler range of that name, so :class:`Observation` can tell the
    ops this recorder saw from ops that ran while it was switched off.
    """

    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        # torch wraps a mode's __torch_dispatch__ to keep dynamo out of it, and that wrapper imports
        # dynamo on the first op (~800 modules, 1.4 s of a 5 s student run). Nothing here compiles.
        return False

    def __init__(self, track_memory: bool = False, marker: str | None = None):
        super().__init__()
        self.marker = marker
        # Off while code that is not the graded layer's runs in the same recording (an adapter building and
        # loading the module): its ops are still marked for the profiler cross-check, not counted or tracked.
        self.counting = True
        self.counts: dict[str, int] = {}
        self.uncounted: dict[str, int] = {}  # the ops seen while switched off (see count_uncounted) ...
        self.constructing = 0  # ... but not in a constructor of the package (validator.adapter_runner)
        self.track_memory = track_memory
        self.live = 0
        self.peak = 0
        self._refs: dict[int, list] = {}

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = _OP_NAMES.get(func)
        if name is None:
            name = _OP_NAMES[func] = str(func.overloadpacket).replace("aten::", "aten.")
        if self.counting:
            self.counts[name] = self.counts.get(name, 0) + 1
        elif not self.constructing:
            self.uncounted[name] = self.uncounted.get(name, 0) + 1
        if self.marker is not None:
            with _profiler_range(self.marker):
                out = func(*args, **(kwargs or {}))
        else:
            out = func(*args, **(kwargs or {}))
        if self.track_memory and self.counting:
            for t in _tensors_in(out):
                self._track(t)
        return out

    def count_uncounted(self) -> None:
        """Count the ops seen while switched off after all: an adapter call in which no module's forward turned out
        to be the layer's (a layer written as a function) is the layer's whole run."""
        for name, n in self.uncounted.items():
            self.counts[name] = self.counts.get(name, 0) + n
        self.uncounted.clear()

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


# A profiler range around each op the recorder sees: torch's fast range where it has one (a tenth of
# ``record_function``'s cost, which enters and leaves through two dispatched ops of its own).
_profiler_range = getattr(getattr(torch._C, "_profiler", None), "_RecordFunctionFast", None) \
    or torch.autograd.profiler.record_function


def _tensors_in(obj: Any):
    if isinstance(obj, torch.Tensor):
        yield obj
    elif isinstance(obj, (list, tuple)):
        for v in obj:
            yield from _tensors_in(v)


# -- evidence that holds against code that tries to switch the recorder off --------------

_THREADS_STARTED = [0]  # bumped by every Python-level thread start once install_thread_counter() ran


def install_thread_counter() -> None:
    """Count thread starts (``threading`` and ``_thread`` alike); the worker calls this before importing students."""
    import _thread

    if getattr(_thread.start_new_thread, "_validator_counted", False):
        return
    original = _thread.start_new_thread

    def start_new_thread(*args, **kwargs):
        _THREADS_STARTED[0] += 1
        return original(*args, **kwargs)

    start_new_thread._validator_counted = True
    _thread.start_new_thread = start_new_thread
    if hasattr(threading, "_start_new_thread"):
        threading._start_new_thread = start_new_thread
    joinable = getattr(_thread, "start_joinable_thread", None)  # Python >= 3.13 starts threads here
    if joinable is not None:
        def start_joinable_thread(*args, **kwargs):
            _THREADS_STARTED[0] += 1
            return joinable(*args, **kwargs)
        _thread.start_joinable_thread = start_joinable_thread
        if hasattr(threading, "_start_joinable_thread"):
            threading._start_joinable_thread = start_joinable_thread


_SKIPS_RECORDER: dict[str, bool] = {}


def _may_skip_recorder(op_name: str) -> bool:
    """Whether torch may run an aten op without the op recorder ever seeing that op itself.

    Derived from torch's own description of every overload of the op, so it follows torch's
    versions. An overload may skip the recorder when it computes nothing by itself:

    - it has a CompositeImplicitAutograd kernel: it decomposes above the Python dispatch key,
      possibly into nothing at all (``type_as``, ``to`` or ``contiguous`` on a tensor that already
      has that dtype or layout); the ops it decomposes into are judged one by one;
    - it is a view: its schema mutates nothing and returns only aliases of its inputs (``view``,
      ``expand``, ``detach``, ``alias``, ``lift_fresh``), or torch tags it ``inplace_view`` (it
      changes metadata only: ``detach_``, ``transpose_``);
    - it is a factory: it takes no tensor at all, so it reads nothing of the layer's data
      (``torch.tensor(data)`` allocates with ``aten.empty`` with the Python dispatch key excluded).

    The op is excused only if every overload is.
    """
    if op_name not in _SKIPS_RECORDER:
        _SKIPS_RECORDER[op_name] = _every_overload_skips(op_name)
    return _SKIPS_RECORDER[op_name]


def _every_overload_skips(op_name: str) -> bool:
    packet = getattr(torch.ops.aten, op_name.removeprefix("aten::"), None)
    if packet is None:
        return False
    described = 0
    try:
        for overload in packet.overloads():
            try:
                op = getattr(packet, overload)
                schema = op._schema
                composite = torch._C._dispatch_has_kernel_for_dispatch_key(op.name(), "CompositeImplicitAutograd")
            except (AttributeError, RuntimeError):  # a TorchScript-only overload: it never runs here
                continue
            described += 1
            view = not schema.is_mutable and bool(schema.returns) and all(
                r.alias_info is not None and not r.alias_info.is_write and r.alias_info.before_set
                for r in schema.returns)
            metadata_only = torch.Tag.inplace_view in getattr(op, "tags", ())
            factory = not schema.is_mutable and not any("Tensor" in str(a.type) for a in schema.arguments)
            if not (composite or view or metadata_only or factory):
                return False
    except Exception:  # noqa: BLE001 - an op torch cannot describe is not excused
        return False
    return described > 0


class Observation:
    """Watches a recorded forward/backward for signs that the recorder was bypassed.

    Three independent signals: a thread started (or still running) that the dispatch
    mode, being thread-local, cannot see into; the dispatch-mode stack changed; and
    ops that torch's own profiler saw run outside any op the recorder saw. The
    profiler's callbacks live in C++ and are not reachable through the mode stack.
    """

    def __init__(self, recorder: OpRecorder):
        self.recorder = recorder
        self.problems: list[str] = []
        self.profiled: dict[str, int] = {}
        self._profiler = None

    def __enter__(self):
        # The autograd profiler, not torch.profiler.profile: the latter's first start looks up
        # `torch._inductor`, which imports dynamo and inductor (1.4 s of a 5 s student run) for nothing.
        from torch.autograd.profiler import profile

        self._threads = _THREADS_STARTED[0]
        self._profiler = profile(use_cpu=True)
        self._profiler.__enter__()
        self.recorder.__enter__()
        self._stack = _mode_stack()
        return self

    def check_modes(self, when: str) -> None:
        """Call with the recorder still pushed: the stack must be exactly as it was entered."""
        stack = _mode_stack()
        if stack != self._stack and not any(when in p for p in self.problems):
            self.problems.append(f"the dispatch-mode stack changed during {when} "
                                 f"({len(self._stack)} mode(s) before, {len(stack)} after)")

    def __exit__(self, *exc):
        try:
            self.recorder.__exit__(*exc)
        finally:
            self._profiler.__exit__(None, None, None)
        if exc[0] is not None:
            return False
        started = _THREADS_STARTED[0] - self._threads
        if started:
            self.problems.append(f"{started} thread(s) started during forward/backward")
        elif _THREADS_STARTED[0]:
            self.problems.append(f"{_THREADS_STARTED[0]} thread(s) started by your code before forward/backward "
                                 "(work handed to another thread is invisible to the op recorder)")
        elif getattr(threading._start_new_thread, "_validator_counted", False) and threading.active_count() > 1:
            self.problems.append(f"{threading.active_count() - 1} other Python thread(s) alive during forward/backward")
        self._compare_with_profiler()
        return False

    def _compare_with_profiler(self) -> None:
        try:
            unseen, counts = profiled_ops(self._profiler, self.recorder.marker)
        except Exception as exc:  # noqa: BLE001 - no profile is itself suspicious
            self.problems.append(f"torch's profiler recorded nothing ({type(exc).__name__})")
            return
        for name, n in counts.items():  # every aten op, nested ones included, for the forbidden lists
            self.profiled[name] = self.profiled.get(name, 0) + n
        if unseen:
            shown = ", ".join(f"{k.replace('aten::', 'aten.')} x{v}" for k, v in sorted(unseen.items())[:6])
            self.problems.append(f"torch's profiler saw ops that the op recorder never saw ({shown}): "
                                 "the recorder was switched off while they ran")


def profiled_ops(profiler, marker: str | None) -> tuple[dict[str, int], dict[str, int]]:
    """What a finished autograd profiler saw on the CPU: ``(unseen, counts)``, aten op name -> how many.

    Events nest on each thread. ``counts`` holds every aten op, nested ones included (an op whose only child
    is an op of its own name counts once, as torch counts). ``unseen`` holds the ops the recorder did not
    see: an outermost op (in no ``marker`` range and no other judged op; ranges and autograd nodes are
    transparent) that may not skip the recorder (:func:`_may_skip_recorder`) and holds no ``marker`` range,
    at any depth. An op that may skip it is transparent too: the ops it ran are judged one by one.

    Read from the tree of events torch builds as it stops (:func:`_ops_in_tree`), about half the cost of
    nesting its event list by time (:func:`_ops_in_rows`, where torch has no tree); the two judge alike, which
    tests/test_integrity.py proves on honest idioms and on every way around the recorder it knows.
    """
    roots = _event_tree(profiler)
    if roots is not None:
        try:
            return _ops_in_tree(roots, marker)
        except (AttributeError, TypeError):  # a torch whose tree's events read otherwise: never the student's fault
            pass
    return _ops_in_rows(profiler, marker)


def _event_tree(profiler) -> list | None:
    """The roots of a finished profiler's event tree (one per outermost event of each thread), or None."""
    try:
        return list(profiler.kineto_results.experimental_event_tree())
    except (AttributeError, TypeError, RuntimeError):
        return None


def _ops_in_tree(roots: list, marker: str | None) -> tuple[dict[str, int], dict[str, int]]:
    """:func:`profiled_ops` from the event tree. The profiler's own bookkeeping and what is not one of torch's
    ops or ranges (an allocation, a device's activity) is left out, its children standing where it stood, as
    the event list leaves them out. Each event's name and children are read from torch once."""
    own, ops = _PROFILER_OWN, _TREE_OPS

    def kept(events) -> list[tuple[Any, str]]:
        out, pending = [], list(events)
        while pending:
            event = pending.pop()
            name = event.name
            if name in own or (ops is not None and not name.startswith("aten::") and name != marker
                               and event.tag not in ops):
                pending.extend(event.children)
            else:
                out.append((event, name))
        return out

    counts: dict[str, int] = {}
    recorded: set[int] = set()
    judged: list[str] = []
    # (event, its name, the outermost marker range or judged op around it: its number (-1 for a range) and
    # name, or None; the event's parent's name and how many children that parent has). Numbers, not id():
    # torch makes a new Python object for an event each time it is reached, and a freed one's id is reused.
    work: list[tuple[Any, str, int | None, str | None, str | None, int]] = [
        (event, name, None, None, None, 0) for event, name in kept(roots)]
    while work:
        event, name, above, above_name, parent, siblings = work.pop()
        if above is not None:
            if name == marker and above_name != marker:
                recorded.add(above)  # the recorder saw the judged op around this range
        elif name == marker:
            above, above_name = -1, name
        elif name.startswith("aten::") and not _may_skip_recorder(name):
            above, above_name = len(judged), name
            judged.append(name)
        if name.startswith("aten::") and not (siblings == 1 and parent == name):
            counts[name] = counts.get(name, 0) + 1
        inner = kept(event.children)
        n = len(inner)
        for child, child_name in inner:
            work.append((child, child_name, above, above_name, name, n))
    unseen: dict[str, int] = {}
    for number, name in enumerate(judged):
        if number not in recorded:
            unseen[name] = unseen.get(name, 0) + 1
    return unseen, counts


def _tree_ops() -> frozenset | None:
    """The kinds of tree event that are torch's ops and ranges (``_EventType.TorchOp``, ``Backend``), or None."""
    kinds = getattr(getattr(getattr(torch._C, "_profiler", None), "_EventType", None), "__members__", None)
    if not kinds or "TorchOp" not in kinds:
        return None
    return frozenset(kinds[k] for k in ("TorchOp", "Backend") if k in kinds)


_TREE_OPS = _tree_ops()


def _ops_in_rows(profiler, marker: str | None) -> tuple[dict[str, int], dict[str, int]]:
    """:func:`profiled_ops` from the profiler's event list, nested by time: one pass over the sorted events with
    index arrays (a traced transformer block yields ~2,000), no tree of objects built."""
    rows = _profiler_rows(profiler)
    rows.sort(key=lambda r: (r[0], r[1], -r[2]))
    n = len(rows)
    parent = [-1] * n
    children = [0] * n
    decisive = [-1] * n  # the outermost marker range or judged op around the event (itself included), or -1
    judged: list[int] = []
    recorded: set[int] = set()
    stack: list[int] = []
    thread = None
    for i, (tid, start, end, name) in enumerate(rows):
        if tid != thread:
            thread, stack = tid, []
        while stack and not (rows[stack[-1]][1] <= start and end <= rows[stack[-1]][2]):
            stack.pop()
        up = stack[-1] if stack else -1
        parent[i] = up
        above = decisive[up] if up >= 0 else -1
        if up >= 0:
            children[up] += 1
        if above >= 0:
            decisive[i] = above
            if name == marker and rows[above][3] != marker:
                recorded.add(above)  # the recorder saw the judged op around this range
        elif name == marker:
            decisive[i] = i
        elif name.startswith("aten::") and not _may_skip_recorder(name):
            decisive[i] = i
            judged.append(i)
        stack.append(i)
    unseen: dict[str, int] = {}
    for i in judged:
        if i not in recorded:
            unseen[rows[i][3]] = unseen.get(rows[i][3], 0) + 1
    counts: dict[str, int] = {}
    for i, (_, _, _, name) in enumerate(rows):
        up = parent[i]
        if name.startswith("aten::") and not (up >= 0 and children[up] == 1 and rows[up][3] == name):
            counts[name] = counts.get(name, 0) + 1
    return unseen, counts


def _profiler_rows(profiler) -> list[tuple[int, int, int, str]]:
    """``(thread, start, end, name)`` of each CPU event a finished autograd profiler saw.

    Read from the profiler's raw results: ``profiler.function_events`` makes a ``FunctionEvent`` per op,
    about 30 times slower (a third of a traced run's cost in the worker). Where the raw results are not
    readable (another torch), the function events are used instead."""
    try:
        raw = profiler.kineto_results.events()
        rows = []
        cpu = getattr(getattr(torch.autograd, "DeviceType", None), "CPU", None)
        for e in raw:  # each accessor is a call into torch: the most selective tests first, each value read once
            name = e.name()
            if name in _PROFILER_OWN:
                continue
            kind = e.device_type()
            if kind != cpu and not str(kind).endswith("CPU"):
                continue
            tid = e.start_thread_id()
            if tid == e.end_thread_id() and not e.is_hidden_event() and not e.is_async():
                start = e.start_ns()
                rows.append((tid, start, start + e.duration_ns(), name))
        return rows
    except (AttributeError, TypeError):
        return [(e.thread, e.time_range.start, e.time_range.end, e.name) for e in profiler.function_events
                if e.name not in _PROFILER_OWN]


# the profiler's own bookkeeping, which torch leaves out of its function events too
_PROFILER_OWN = frozenset({"[memory]", "[OutOfMemory]", "profiler::_record_function_enter",
                           "profiler::_record_function_enter_new", "profiler::_record_function_exit",
                           "aten::is_leaf", "aten::output_nr", "aten::_version"})


def _mode_stack() -> list:
    from torch.utils._python_dispatch import _get_current_dispatch_mode_stack

    return [id(m) for m in _get_current_dispatch_mode_stack()]


def describe_entry(obj: Any) -> dict:
    """What an entry name refers to, and its signature, for the structure checks."""
    if getattr(obj, "adapted", False):  # reached through tests/adapters.py (validator.adapter_runner)
        return obj.describe()
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
        kinds = inspect.Parameter
        positional = [p for p in sig.parameters.values() if p.name not in ("self", "ctx")
                      and p.kind in (kinds.POSITIONAL_ONLY, kinds.POSITIONAL_OR_KEYWORD)]
        varargs = any(p.kind == kinds.VAR_POSITIONAL for p in sig.parameters.values())
        info["positional"] = -1 if varargs else len(positional)  # how many arguments it takes by position
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
    stray = [{"name": name, "shape": list(value.shape), "dtype": str(value.dtype).removeprefix("torch."),
              "device": str(value.device), "requires_grad": bool(value.requires_grad)}
             for name, value in stray_tensors(module).items()]
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
    if call.get("contract_order"):
        args, kwargs = bind_by_position(target, args, kwargs, call["contract_order"])
    module = _stage("construct", origin, target, *args, **kwargs)
    if not isinstance(module, nn.Module):
        raise StudentError("construct", {
            "type": "TypeError", "mro": ["TypeError"],
            "message": f"{call['entry']}(...) built a {type(module).__name__}, not an nn.Module"})
    if call.get("param_dtype"):
        _stage("load", origin, _parameters_to, module, dtype_from_name(call["param_dtype"]))
    return module


def _parameters_to(module: nn.Module, dtype: torch.dtype) -> None:
    """Every floating parameter in ``dtype``, converted in place (the same Parameter objects, so ties hold).

    The call's checks are not about dtype (see ``Context.build_call``): a parameter created in another
    dtype, a slip the dtype checks report, would otherwise make them fail on a dtype mismatch
    ("expected scalar type Double but found Float") instead of judging what they are about. Buffers are
    left as built: a contract may fix their dtype (RoPE's tables), and type promotion handles them.
    """
    with torch.no_grad():
        for param in module.parameters():
            if param.is_floating_point() and param.dtype != dtype:
                param.data = param.data.to(dtype)


def bind_by_position(target: Any, args: list, kwargs: dict, order: list[str]) -> tuple[list, dict]:
    """Pass a contract keyword by position where the student's constructor names it differently.

    ``order`` is the contract's parameter order (``init`` then ``accepts``). A keyword the
    student's signature has (or swallows with ``**kwargs``) goes by name; one it does not
    have goes at its position in ``order``, and a position skipped on the way gets the
    student's own default. Where that is impossible (no such position, a skipped
    parameter without a default) the keyword stays a keyword and the call says why.
    """
    try:
        params = list(inspect.signature(target).parameters.values())
    except (TypeError, ValueError):
        return args, kwargs
    kinds = inspect.Parameter
    if any(p.kind == kinds.VAR_KEYWORD for p in params):
        return args, kwargs
    named = {p.name for p in params if p.kind in (kinds.POSITIONAL_OR_KEYWORD, kinds.KEYWORD_ONLY)}
    positional = [p for p in params if p.kind in (kinds.POSITIONAL_ONLY, kinds.POSITIONAL_OR_KEYWORD)]
    by_position: dict[int, Any] = {}
    keep: dict[str, Any] = {}
    for name, value in kwargs.items():
        index = order.index(name) if name in order else -1
        if name in named or index < len(args) or index >= len(positional):
            keep[name] = value
        else:
            by_position[index] = value
    args = list(args)
    for index in range(len(args), max(by_position, default=-1) + 1):
        if index in by_position:
            args.append(by_position.pop(index))
        elif positional[index].name in keep:  # passed by its own name: it takes its place in the row
            args.append(keep.pop(positional[index].name))
        elif positional[index].default is not kinds.empty:
            args.append(positional[index].default)
        else:
            break
    keep.update({order[i]: v for i, v in by_position.items()})
    return args, keep


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
        if call.get("device") is not None:
            seed_device_too(call["device"])
        result = _execute(namespace, call, origin)
        return _to_cpu(result) if call.get("device") is not None else result
    except StudentError as err:
        reply = {"ok": False, "stage": err.stage, "exception": err.info}
        if "adapter" in err.info:  # which function of tests/adapters.py it went through (validator.adapter_runner)
            reply["adapter"] = err.info.pop("adapter")
        return reply


def pass_inputs(call: dict) -> list[list[dict]]:
    """The inputs of each pass of a call: ``inputs``, then each of ``more_inputs`` (a measured run gives every
    pass inputs of its own, so that no pass can replay what an earlier one computed)."""
    return [call.get("inputs", [])] + list(call.get("more_inputs") or [])


def _to_cpu(obj: Any) -> Any:
    """Every tensor of a result on the CPU: the wire format and the comparisons live there."""
    if isinstance(obj, torch.Tensor):
        return obj.detach().cpu() if obj.device.type != "meta" else obj
    if isinstance(obj, dict):
        return {k: _to_cpu(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_to_cpu(v) for v in obj]
    return obj


def _stand_in_error(exc: Exception) -> StudentError:
    return StudentError("stand_ins", {"type": "StandInError", "mro": ["StandInError", "Exception"],
                                      "message": str(exc)})


def _execute(namespace: dict, call: dict, origin: str | None) -> dict:
    """One call; with ``stand_ins`` the named classes are the grader's stand-ins for its duration."""
    if not call.get("stand_ins") or getattr(namespace.get(call["entry"]), "adapted", False):
        return _execute_call(namespace, call, origin)
    try:
        restore = standins.patch(namespace, call["stand_ins"], origin)
    except standins.StandInError as exc:
        raise _stand_in_error(exc) from None
    try:
        return _execute_call(namespace, call, origin)
    finally:
        restore()


def _execute_call(namespace: dict, call: dict, origin: str | None) -> dict:
    want = set(call.get("want", ("output",)))
    target = namespace.get(call["entry"])
    if target is None:
        raise StudentError("lookup", {"type": "AttributeError", "mro": ["AttributeError"],
                                      "message": f"layers.py defines no {call['entry']!r}"})
    if getattr(target, "adapted", False):  # reached through tests/adapters.py: the adapter builds and calls it
        from validator import adapter_runner  # imported by the worker template before any sandbox

        return adapter_runner.execute(target, call, origin)
    special = next((run for key, run in _SPECIAL_CALLS.items() if call.get(key)), None)
    if special is not None:  # a sequence of calls on one instance, a move with .to() (see below)
        return special(target, call, origin)
    result: dict[str, Any] = {"ok": True}
    seed = call.get("seed", 0)
    device = call.get("device")  # run the layer there (moved after loading); results come back on the CPU
    with _default_dtype(call.get("default_dtype")):
        if seed is not None:
            reseed(int(seed))
        rng_before = torch.get_rng_state() if "rng" in want else None
        module = _construct(target, call, origin)
        if rng_before is not None:
            result["rng"] = rng_report(rng_before)
        if module is not None and call.get("stand_ins"):
            try:
                standins.verify(module, call["stand_ins"], call["entry"])
            except standins.StandInError as exc:
                raise _stand_in_error(exc) from None
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
        inference = bool(call.get("inference"))
        passes = [prepare_inputs(items, device, inference=inference) for items in pass_inputs(call)]
        inputs = passes[0]
        if call["kind"] == "module":
            fn = module
        elif call["kind"] == "autograd_function":
            fn = getattr(target, "apply")
        else:
            fn = target
        before = ({n: p.detach().clone() for n, p in module.named_parameters(remove_duplicate=False)}
                  if module is not None and "params_after" in want else None)

        recorder = OpRecorder(track_memory=bool(call.get("track_memory")),
                              marker=f"validator::{secrets.token_hex(8)}") if (
            call.get("trace_ops") or call.get("track_memory")) else None
        observation = Observation(recorder) if recorder is not None else None
        if inference:  # as in generation: no input requires grad, forward under torch.no_grad()
            fn = _without_grad(fn)
        repeat = len(passes) if len(passes) > 1 else max(1, int(call.get("repeat", 1)))
        outputs = []
        if seed is not None:
            reseed(int(seed) + 1)
        started = _CLOCK()
        with (observation if observation is not None else contextlib.nullcontext()):
            for n in range(repeat):
                inputs = passes[n % len(passes)]
                output = _stage("forward", origin, fn, *inputs)
                if observation is not None:
                    observation.check_modes("forward")
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
                    _stage("backward", origin, _backward, output,
                           _as_passed(call, grad_output.to(dtype=output.dtype, device=output.device)))
                    if observation is not None:
                        observation.check_modes("backward")
                if len(passes) > 1:
                    outputs.append(output)
        result["seconds"] = _CLOCK() - started
        if "inputs_changed" in want:
            result["inputs_changed"] = changed_inputs(call, inputs)
        if recorder is not None:
            result["ops"] = dict(recorder.counts)
            result["peak_bytes"] = int(recorder.peak)
            result["profiled_ops"] = {k.replace("aten::", "aten."): v for k, v in observation.profiled.items()}
            result["tampered"] = list(observation.problems)
        result["output_requires_grad"] = bool(output.requires_grad)
        result["output_is_subclass"] = type(output) is not torch.Tensor
        if "output" in want:
            result["output"] = output
            if outputs:
                result["pass_outputs"] = outputs
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


_SHIMS_SKIPPED = False


def skip_dynamo_disable_shims() -> None:
    """Keep torch's meta kernels from importing dynamo, which nothing here uses.

    On the meta device (``device="meta"`` checks) ops run torch's Python reference kernels, and
    torch wraps each of those in a shim (``torch._compile._disable_dynamo``) that imports dynamo
    (~800 modules, about a second) on its first call only to mark the kernel "do not compile".
    The shim caches that mark on the kernel; giving each kernel itself as its mark skips the
    import and changes nothing while nothing compiles. Should torch change the shim, this finds
    nothing to mark and the import is simply paid again.
    """
    global _SHIMS_SKIPPED
    if _SHIMS_SKIPPED:
        return
    _SHIMS_SKIPPED = True
    import sys
    import types

    import torch._compile
    import torch._decomp

    shim = next((c for c in torch._compile._disable_dynamo.__code__.co_consts
                 if isinstance(c, types.CodeType) and c.co_name == "inner"), None)
    if shim is None:
        return
    todo: list = [fn for table in torch._decomp.global_decomposition_table.values() for fn in table.values()]
    for name, module in list(sys.modules.items()):
        if module is not None and name.startswith(("torch._refs", "torch._prims", "torch._decomp")):
            todo.extend(vars(module).values())
    seen: set[int] = set()
    while todo:
        fn = todo.pop()
        if not isinstance(fn, types.FunctionType) or id(fn) in seen:
            continue
        seen.add(id(fn))
        cells = {}
        for name, cell in zip(fn.__code__.co_freevars, fn.__closure__ or ()):
            try:
                cells[name] = cell.cell_contents
            except ValueError:  # an empty cell
                continue
        if fn.__code__ is shim and isinstance(cells.get("fn"), types.FunctionType):
            kernel = cells["fn"]
            if getattr(kernel, "__dynamo_disable", None) is None:
                setattr(kernel, "__dynamo_disable", kernel)
        todo.extend(cells.values())
        todo.append(getattr(fn, "__wrapped__", None))


def _backward(output: torch.Tensor, grad: torch.Tensor) -> None:
    """``output.backward(grad)``, the shape and dtype already checked by the caller.

    ``Tensor.backward`` checks its gradient's shape with torch's symbolic-shape helpers, whose
    first use imports sympy: 0.3 s, a tenth of a one-challenge run, for a check made here already.
    (A worker that runs a meta-device check imports sympy anyway: torch's meta kernels use it.)
    A plain tensor goes straight to the autograd engine, as ``Tensor.backward`` itself ends up
    doing; a tensor subclass (which may override ``backward``), or a torch without that entry
    point, takes the public path.
    """
    if _ENGINE_BACKWARD is None or type(output) is not torch.Tensor or torch._C._are_functorch_transforms_active():
        output.backward(grad)
        return
    _ENGINE_BACKWARD((output,), (grad,), False, False, (), allow_unreachable=True, accumulate_grad=True)


# Bound when the runner is imported, before any student code runs: code that replaced the attribute later
# (to forge gradients) would replace nothing the runner calls.
_ENGINE_BACKWARD = getattr(torch.autograd.graph, "_engine_run_backward", None)
# The clock of ``seconds`` (the speed check's evidence), bound the same way: a submission that replaced
# time.perf_counter would not change what the runner measures.
_CLOCK = time.perf_counter
# The CPU generator :func:`reseed` seeds, bound the same way: a submission that rebinds torch.default_generator
# cannot leave the runner's calls unseeded.
_CPU_GENERATOR = torch.default_generator


_ACCELERATORS = ("cuda", "xpu", "mtia")
_DEVICE_SEEDERS: dict[str, Any] = {}  # backend -> its manual_seed_all, while seed_only_the_cpu has it switched off
_CPU_ONLY = [False]  # set by seed_only_the_cpu until seed_device_too: only the CPU generator draws here


def seed_only_the_cpu() -> None:
    """Make ``torch.manual_seed`` seed the CPU generator alone in this process, without asking what is there.

    ``torch.manual_seed`` also queues a seeding call for CUDA, XPU and MTIA, each together with a formatted
    stack trace (``_lazy_call``); where no such device computes, those calls never run, and under hypothesis's
    deep stacks they cost ~5 ms a seed, a third of the grader's time. Asking whether a backend is there
    (``torch.cuda.is_available()``) would start its driver, and a worker forked afterwards could never use the
    device ("Cannot re-initialize CUDA in forked subprocess"): the grader, the reference and the template that
    forks workers compute on the CPU only, so they switch the seeding off unasked. A worker whose layers run
    on a device switches that device's seeding back on (:func:`seed_device_too`).
    """
    for backend in _ACCELERATORS:
        module = getattr(torch, backend, None)
        seeder = getattr(module, "manual_seed_all", None)
        if seeder is not None and backend not in _DEVICE_SEEDERS:
            _DEVICE_SEEDERS[backend] = seeder
            module.manual_seed_all = lambda seed: None
    _CPU_ONLY[0] = True


def seed_device_too(device: str) -> None:
    """``torch.manual_seed`` seeds ``device``'s generators again (dropout on a GPU draws from them)."""
    backend = torch.device(device).type
    if backend in _DEVICE_SEEDERS:
        getattr(torch, backend).manual_seed_all = _DEVICE_SEEDERS.pop(backend)
    if backend not in ("cpu", "meta"):
        _CPU_ONLY[0] = False


def reseed(seed: int) -> None:
    """``torch.manual_seed(seed)`` before a call's construction or passes. Where only the CPU computes
    (:func:`seed_only_the_cpu`, no :func:`seed_device_too` since), the CPU generator alone, which is all
    ``torch.manual_seed`` then changes: it would still ask each other backend whether it is there
    (MPS, a custom device), ~10 us a seed on this machine's CPU, four seeds a call, ~900 calls a submission."""
    if _CPU_ONLY[0]:
        _CPU_GENERATOR.manual_seed(seed)
    else:
        torch.manual_seed(seed)


# -- inputs as a caller passes them: views of other storage, inference, left as they were ---------------

# the views drawn among generated inputs, and the one every argument gets on an extra call (input_views)
DRAWN_LAYOUTS = ("transposed", "sliced", "expanded")
LAYOUTS = DRAWN_LAYOUTS + ("strided",)


def prepare_inputs(items: list[dict], device: str | None, *, inference: bool = False) -> list:
    """One pass's arguments (``items``: a call's ``inputs`` or one of its ``more_inputs``) as the layer receives
    them: fresh copies (on ``device``), leaves that require grad where the spec says so, and, where an item names
    a ``layout``, a non-contiguous view of another storage holding the same values (:func:`as_layout`). Tensors
    travel between processes as contiguous bytes, so a view is made here, in the process that calls the layer.
    An ``inference`` call passes no input that requires grad."""
    inputs = []
    for item in items:
        value = item["value"]
        if isinstance(value, torch.Tensor):
            value = value.clone() if device is None else value.to(device)
            grad = bool(item.get("requires_grad")) and not inference
            if item.get("layout"):
                value = as_layout(value, item["layout"], requires_grad=grad)
            elif grad:
                value.requires_grad_(True)
        inputs.append(value)
    return inputs


def as_layout(value: torch.Tensor, layout: dict, requires_grad: bool = False) -> torch.Tensor:
    """``value``'s values as a view with another memory layout; the storage it views is the leaf that
    requires grad (a caller's activation is rarely the start of its own graph either).

    - ``transposed``: stored with the last two axes swapped, viewed back with ``.transpose(-2, -1)``;
    - ``sliced``: every other element of a storage twice as long along ``axis`` (NaN, or 0, between them);
    - ``expanded``: one slice along ``axis`` broadcast with ``.expand`` (stride 0): the values must already
      be equal along that axis (the case generator makes them so);
    - ``strided``: every other element along *every* axis of a storage twice as long in each: no two axes
      can be merged, so any ``.view()`` that flattens axes raises, whatever the shape.
    """
    kind = layout.get("kind")
    axis = int(layout.get("axis", -1))
    if value.dim() == 0 or kind not in LAYOUTS:
        return value.requires_grad_(requires_grad) if requires_grad else value
    axis %= value.dim()
    if kind == "transposed" and value.dim() >= 2:
        base = value.transpose(-2, -1).contiguous()
        view = (lambda b: b.transpose(-2, -1))
    elif kind == "expanded":
        base = value.narrow(axis, 0, 1).contiguous()
        view = (lambda b: b.expand(value.shape))
    elif kind == "strided":
        every_other = tuple(slice(None, None, 2) for _ in range(value.dim()))
        base = torch.full([2 * s for s in value.shape], float("nan") if value.dtype.is_floating_point else 0,
                          dtype=value.dtype, device=value.device)
        base[every_other] = value
        view = (lambda b: b[every_other])
    else:
        filler = torch.full_like(value, float("nan") if value.dtype.is_floating_point else 0)
        base = torch.stack((value, filler), dim=axis + 1).flatten(axis, axis + 1)
        view = (lambda b: b.movedim(axis, 0)[::2].movedim(0, axis))
    if requires_grad:
        base.requires_grad_(True)
    return view(base)


def _as_passed(call: dict, grad: torch.Tensor) -> torch.Tensor:
    """The upstream gradient as a caller's loss hands it over: with ``grad_layout``, a view (``out.sum().backward()``
    passes a broadcast of ones, stride 0), which a backward that calls ``.view()`` on it cannot take."""
    layout = call.get("grad_layout")
    return as_layout(grad, layout) if layout else grad


def _without_grad(fn: Callable) -> Callable:
    def call(*args, **kwargs):
        with torch.no_grad():
            return fn(*args, **kwargs)
    return call


def changed_inputs(call: dict, inputs: list) -> list[dict]:
    """Every argument the call changed in place: its position, how many elements differ, the first of them."""
    out = []
    for index, (item, now) in enumerate(zip(call.get("inputs", []), inputs)):
        was = item["value"]
        if not isinstance(was, torch.Tensor) or not isinstance(now, torch.Tensor) or was.device.type == "meta":
            continue
        now = now.detach().to("cpu")
        if tuple(now.shape) != tuple(was.shape):
            out.append({"index": index, "shape_was": list(was.shape), "shape_now": list(now.shape)})
            continue
        if now.dtype != was.dtype:
            now = now.to(was.dtype)
        differ = (now != was) & ~(_isnan(now) & _isnan(was))
        if bool(differ.any()):
            first = [int(i) for i in differ.nonzero()[0]] if differ.dim() else []
            at = tuple(first)
            out.append({"index": index, "changed": int(differ.sum()), "of": was.numel(), "first": first,
                        "was": was[at].item(), "now": now[at].item()})
    return out


def _isnan(t: torch.Tensor) -> torch.Tensor:
    return torch.isnan(t) if t.dtype.is_floating_point else torch.zeros(t.shape, dtype=torch.bool)


# -- the global random stream ---------------------------------------------------------------------------------

def rng_report(before: torch.Tensor) -> dict:
    """Whether constructing the layer drew from torch's global generator, and the next draw after it: a layer that
    reseeds the generator makes the next draw the same whatever seed the caller had set."""
    consumed = not torch.equal(before, torch.get_rng_state())
    return {"consumed": consumed, "next": torch.rand(8, dtype=torch.float64)}


# -- a sequence of calls on one instance ------------------------------------------------------------------

def _execute_steps(target: Any, call: dict, origin: str | None) -> dict:
    """One module, built and loaded once, called once per step of ``call["steps"]``; before a step that says
    ``update``, every parameter is changed in place (as an optimiser step or ``load_state_dict`` does), by a
    function of its own values, so that both sides, whatever they call their parameters, update alike; a step
    with ``backward`` (a seed) runs backward with a random gradient. The reply holds every step's output, and
    ``failed`` (its step, stage and exception) where a step raised, which ends the sequence.

    With ``fresh``, each step is also computed by a layer built, loaded and updated alike but called only then
    (``fresh``: one ``{"ok", "output"}`` or ``{"ok": False, "stage", "exception"}`` per step): what the shared
    layer kept from its earlier calls is the only difference between the two."""
    if call["kind"] != "module":
        raise StudentError("construct", {"type": "TypeError", "mro": ["TypeError"],
                                         "message": "a sequence of calls needs a module entry"})
    result: dict[str, Any] = {"ok": True, "outputs": []}
    steps = call["steps"]
    device = call.get("device")
    with _default_dtype(call.get("default_dtype")):
        shared = _built(target, call, origin)
        for k, step in enumerate(steps):
            try:
                if step.get("update") is not None:
                    _stage("update", origin, update_parameters, shared, int(step["update"]))
                result["outputs"].append(_step_output(shared, step, origin, device, backward=True))
            except StudentError as err:
                result["failed"] = {"step": k, "stage": err.stage, "exception": err.info}
                break
        if call.get("fresh"):
            result["fresh"] = []
            for k, step in enumerate(steps):
                try:
                    module = _built(target, call, origin)
                    for earlier in steps[1:k + 1]:
                        if earlier.get("update") is not None:
                            _stage("update", origin, update_parameters, module, int(earlier["update"]))
                    result["fresh"].append({"ok": True, "output": _step_output(module, step, origin, device)})
                except StudentError as err:
                    result["fresh"].append({"ok": False, "stage": err.stage, "exception": err.info})
    return result


def _built(target: Any, call: dict, origin: str | None) -> nn.Module:
    """The call's module: seeded, constructed, its test weights loaded, in its mode, on its device."""
    if call.get("seed") is not None:
        reseed(int(call["seed"]))
    module = _construct(target, call, origin)
    if call.get("state"):
        _load_state(module, call["state"], origin)
    if call.get("train") is not None:
        _stage("train", origin, module.train, bool(call["train"]))
    if call.get("device") is not None:
        _stage("to_device", origin, module.to, call["device"])
    return module


def _step_output(module: nn.Module, step: dict, origin: str | None, device: str | None,
                 backward: bool = False) -> torch.Tensor:
    inputs = prepare_inputs(step.get("inputs", []), device, inference=bool(step.get("inference")))
    output = _stage("forward", origin, module, *inputs)
    if not isinstance(output, torch.Tensor):
        raise StudentError("forward", {"type": "TypeError", "mro": ["TypeError"],
                                       "message": f"returned a {type(output).__name__}, expected a torch.Tensor"})
    if backward and step.get("backward") is not None and output.requires_grad and output.dtype.is_floating_point:
        gen = torch.Generator().manual_seed(int(step["backward"]))
        grad = torch.randn(output.shape, generator=gen, dtype=torch.float64).to(dtype=output.dtype)
        module.zero_grad(set_to_none=True)
        _stage("backward", origin, _backward, output, grad.to(device=output.device))
    return output.detach()


def update_parameters(module: nn.Module, step: int) -> None:
    """Change every parameter in place by ``0.5 sin(3.7 p + step)``: an update that depends only on the values,
    applied once to each parameter object (a tied weight once)."""
    seen: set[int] = set()
    with torch.no_grad():
        for p in module.parameters():
            if id(p) in seen or not p.dtype.is_floating_point:
                continue
            seen.add(id(p))
            p.add_(0.5 * torch.sin(3.7 * p + step))


# -- moving a built layer with .to() ----------------------------------------------------------------------

class _OperandWatch(TorchDispatchMode):
    """Notes which of ``watched`` tensors (by storage) any aten op reads, before the op runs (it may then fail)."""

    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        return False

    def __init__(self, watched: dict[str, torch.Tensor]):
        super().__init__()
        self.storages = {_storage_key(t): name for name, t in watched.items()}
        self.read: set[str] = set()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        from torch.utils._pytree import tree_flatten

        for value in tree_flatten((args, kwargs or {}))[0]:
            if isinstance(value, torch.Tensor):
                name = self.storages.get(_storage_key(value))
                if name is not None:
                    self.read.add(name)
        return func(*args, **(kwargs or {}))


def _storage_key(t: torch.Tensor):
    try:
        return (t.device.type, t.untyped_storage().data_ptr()) if t.device.type != "meta" else ("meta", id(t))
    except Exception:  # noqa: BLE001 - a tensor without storage: by identity
        return ("id", id(t))


def stray_tensors(module: nn.Module) -> dict[str, torch.Tensor]:
    """Plain tensor attributes of the module and its submodules: neither parameters nor buffers, so ``.to()``,
    ``state_dict()`` and ``parameters()`` never see them. Tensors kept in a plain list, tuple or dict attribute
    (``self.tables = [cos, sin]``) count too, named like ``tables[0]`` or ``tables['cos']``."""
    out = {}
    for mod_name, mod in module.named_modules():
        registered = set(mod._parameters) | set(mod._buffers)
        for attr, value in vars(mod).items():
            if attr in registered or attr in ("_parameters", "_buffers", "_modules"):
                continue
            for suffix, tensor in _tensors_held(value):
                name = f"{mod_name}.{attr}" if mod_name else attr
                out[name + suffix] = tensor
    return out


def _tensors_held(value: Any, depth: int = 0) -> list[tuple[str, torch.Tensor]]:
    """(suffix, tensor) for a plain tensor, or the plain tensors inside lists, tuples and dicts (two levels)."""
    if isinstance(value, torch.Tensor):
        return [] if isinstance(value, nn.Parameter) else [("", value)]
    if depth >= 2 or isinstance(value, nn.Module):
        return []
    if isinstance(value, (list, tuple)) and len(value) <= 64:
        return [(f"[{i}]{rest}", t) for i, item in enumerate(value) for rest, t in _tensors_held(item, depth + 1)]
    if isinstance(value, dict) and len(value) <= 64:
        return [(f"[{k!r}]{rest}", t) for k, item in value.items() if isinstance(k, (str, int))
                for rest, t in _tensors_held(item, depth + 1)]
    return []


def _execute_move(target: Any, call: dict, origin: str | None) -> dict:
    """Build, load, then ``module.to(device)``: which plain tensor attributes stayed behind, and which of those
    forward reads (a forward that fails on them is expected: the reply says what it read before it failed)."""
    move = call["move"]
    device = move.get("device")
    dtype = dtype_from_name(move["dtype"]) if move.get("dtype") else None
    result: dict[str, Any] = {"ok": True}
    with _default_dtype(call.get("default_dtype")):
        if call.get("seed") is not None:
            reseed(int(call["seed"]))
        module = _construct(target, call, origin)
        if module is None:
            raise StudentError("construct", {"type": "TypeError", "mro": ["TypeError"],
                                             "message": "moving a layer with .to() needs a module entry"})
        if call.get("state"):
            _load_state(module, call["state"], origin)
        _stage("to_device", origin, module.to, *[a for a in (device, dtype) if a is not None])

        def behind(t: torch.Tensor) -> bool:
            return ((device is not None and t.device.type != torch.device(device).type)
                    or (dtype is not None and t.dtype.is_floating_point and t.dtype != dtype))

        stray = stray_tensors(module)
        left = {name: t for name, t in stray.items() if behind(t)}
        result["left_behind"] = [{"name": name, "device": str(t.device), "dtype": dtype_name_of(t),
                                  "shape": list(t.shape), "read": False} for name, t in left.items()]
        result["stray"] = sorted(stray)
        if not left:
            return result
        inputs = []
        for value in prepare_inputs(call.get("inputs", []), None, inference=True):
            if isinstance(value, torch.Tensor):
                value = value.to(device) if device is not None else value
                if dtype is not None and value.dtype.is_floating_point:
                    value = value.to(dtype)
            inputs.append(value)
        watch = _OperandWatch(left)
        try:
            with torch.no_grad(), watch:
                module(*inputs)
        except BaseException as exc:  # noqa: BLE001 - a forward that fails on what it left behind is the finding
            result["forward_error"] = exception_info(exc, origin)
        for item in result["left_behind"]:
            item["read"] = item["name"] in watch.read
    return result


def dtype_name_of(t: torch.Tensor) -> str:
    return str(t.dtype).removeprefix("torch.")


def _execute_converted(target: Any, call: dict, origin: str | None) -> dict:
    """Build and load in the default dtype, then ``module.to(call["convert"])`` (``.half()``, ``.bfloat16()``), and call
    it once on the call's inputs (already in that dtype): a model converted whole, as mixed-precision inference does."""
    if call["kind"] != "module":
        raise StudentError("construct", {"type": "TypeError", "mro": ["TypeError"],
                                         "message": "converting a layer with .to(dtype) needs a module entry"})
    with _default_dtype(call.get("default_dtype")):
        module = _built(target, dict(call, device=None), origin)
        _stage("to_device", origin, module.to, dtype_from_name(call["convert"]))
        if call.get("device") is not None:
            _stage("to_device", origin, module.to, call["device"])
        output = _step_output(module, call, origin, call.get("device"))
    return {"ok": True, "output": output}


_SPECIAL_CALLS: dict[str, Callable] = {"steps": _execute_steps, "move": _execute_move, "convert": _execute_converted}
