"""The worker side of grading through a student's ``tests/adapters.py`` (see :mod:`validator.adapters`).

An adapter builds the student's module, loads the weights it is given and calls it, all in one
function the grader cannot look inside. So the worker watches it run:

- every ``nn.Module`` subclass that a file of the student's package defines has its ``__init__``
  and ``forward`` wrapped (:func:`watch_classes`, through ``builtins.__build_class__``, so classes
  of modules the adapter imports lazily are watched too). Outside an adapter call the wrappers only
  pass through.
- The module the adapter *builds* is the one whose ``forward`` it calls first (or, if it never calls
  one, the last module it built at the top level). A module whose forward the package's own code calls
  (a method of a plain class, a function) and that holds none or only some of the test weights is a
  part of a layer that is no module (:meth:`Watch.is_part`): then no module is the layer, and the
  checks of a module's structure say so; the call's ops and gradients are the whole call's, as for a
  function. What its constructor made is recorded when the
  outermost ``__init__`` returns: the structure (dtype, device, parameters and buffers) and, for the
  init checks, the initial values, before any weight is loaded.
- The contract's weights are found in the module's parameters *by value* when its forward starts:
  the test weights are random, so each one is found exactly, whole, transposed, as rows of a fused
  QKV matrix, split per head, wherever the adapter put it. Results are then reported under the
  contract's names (parameters, initial values, gradients), and a parameter that holds no contract
  weight keeps its own name (a bias, say, which the ``parameters`` check then reports).
- A check that builds with ``dtype=`` or ``device=`` (the contract's constructor arguments) has them
  passed to the outermost constructor that accepts them, as the contract would, in place of any the
  adapter passes; where no constructor accepts one, the check is not graded, and says why. A check
  that builds without ``dtype=`` leaves out a ``dtype=`` the adapter passes itself
  (``dtype=in_features.dtype`` is common) where it is not the default dtype, and the dtype checks
  leave it out always, as a construct-only call leaves out the test weights: the module is built as
  the contract builds it, so a float16 input meets float32 weights as it would graded directly, and
  the default-dtype check sees the constructor's own default (:meth:`Watch.without_dtype`).
- Timing, op counts and memory cover the module's forward (and backward), not its construction and
  loading, so a layer graded through an adapter is measured as one graded directly.
- Where a check grades gradients, the built module's forward runs with gradients on, even inside an
  adapter's ``torch.no_grad()`` (which the course's snapshot tests allow): the layer is called as the
  contract calls it.

This module is imported by the worker template before any sandbox is entered.
"""

from __future__ import annotations

import builtins
import contextlib
import functools
import inspect
import linecache
import os
import secrets
import sys
import time
from typing import Any

import torch
from torch import nn

from validator import runner
from validator.runner import NOT_A_MODULE, StudentError
from validator.worker.protocol import dtype_from_name

NOT_GRADED = "not_graded"  # the stage of a reply that says: this call cannot be made through the adapter
_TORCH_DIR = os.path.dirname(torch.__file__) + os.sep  # torch's frames between a forward and its caller


class _Abort(BaseException):
    """Stops a construct-only adapter call when the built module's forward starts."""


class AdaptedEntry:
    """An entry reached through tests/adapters.py: its functions and the contract's argument names."""

    adapted = True

    def __init__(self, functions: dict[str, Any], data: dict):
        self.functions = functions
        self.variants = data["variants"]
        self.init = data["init"]
        self.call = data["call"]
        self.kind = data["kind"]
        self.core = data.get("core", {})

    def variant_for(self, call: dict) -> dict:
        options = call.get("init_kwargs") or {}
        for variant in self.variants:
            if all(options.get(k, None) == v for k, v in variant["when"].items()):
                if variant["function"] in self.functions:
                    return variant
        shown = ", ".join(f"{k}={v!r}" for k, v in options.items() if k not in ("dtype", "device"))
        raise _not_graded(f"no function of tests/adapters.py covers this call ({shown or 'no options'}); the spec's "
                          f"adapters: {', '.join(v['function'] for v in self.variants)}")

    def describe(self) -> dict:
        fn = self.functions.get(self.variants[0]["function"])
        info = runner.describe_entry(fn)
        info.update(adapter=self.variants[0]["function"], is_module_class=self.kind == "module")
        return info


_SPECIAL_WHAT = {"steps": "several calls on one instance", "move": "a move with .to()",
                 "convert": "a conversion with .to(dtype)"}


def _not_graded(reason: str) -> StudentError:
    return StudentError(NOT_GRADED, {"type": "NotGraded", "mro": ["NotGraded"], "message": reason})


# -- watching the student's classes ------------------------------------------------------------------
_WATCH: "Watch | None" = None
_INSTALLED: set[str] = set()


def watch_classes(origin: str) -> None:
    """Watch every nn.Module subclass that a file under ``origin`` (a folder, ending in a separator) defines."""
    if origin in _INSTALLED:
        return
    _INSTALLED.add(origin)
    original = builtins.__build_class__

    def build_class(func, name, *bases, **kwargs):
        cls = original(func, name, *bases, **kwargs)
        try:
            filename = func.__code__.co_filename
        except AttributeError:
            return cls
        if filename.startswith(origin) and isinstance(cls, type) and issubclass(cls, nn.Module):
            _instrument(cls)
        return cls

    builtins.__build_class__ = build_class


def _instrument(cls: type) -> None:
    own = vars(cls)
    if "__init__" in own and callable(own["__init__"]):
        cls.__init__ = _watched_init(own["__init__"])
    if "forward" in own and callable(own["forward"]):
        cls.forward = _watched_forward(own["forward"])


def _watched_init(original):
    @functools.wraps(original)
    def __init__(self, *args, **kwargs):
        watch = _WATCH
        if watch is None:
            return original(self, *args, **kwargs)
        outer = watch.init_depth == 0
        if outer:
            watch.init_started = True
            args, kwargs = watch.without_dtype(original, self, args, kwargs)
            args, kwargs = watch.inject(original, self, args, kwargs)
            if watch.construct_only and watch.strip:
                args, kwargs = watch.without_test_weights(original, self, args, kwargs)
        watch.init_depth += 1
        recorder = watch.recorder if outer else None
        if recorder is not None:
            recorder.constructing += 1  # a constructor's ops are never the layer's run (see Watch.is_part)
        try:
            original(self, *args, **kwargs)
            if outer:
                watch.built(self)  # (its copies of what was made are the grader's ops, never the layer's)
        finally:
            watch.init_depth -= 1
            if recorder is not None:
                recorder.constructing -= 1
    return __init__


def _watched_forward(original):
    @functools.wraps(original)
    def forward(self, *args, **kwargs):
        watch = _WATCH
        if watch is None or watch.forward_depth:
            return original(self, *args, **kwargs)
        watch.forward_starts(self)
        watch.forward_depth += 1
        try:
            if self is watch.top and watch.needs_grad and not (torch.is_grad_enabled()
                                                                and not torch.is_inference_mode_enabled()):
                # an adapter that calls the layer under torch.no_grad() (enough for the course's snapshot tests):
                # the layer still runs as the contract calls it when its gradients are graded
                with torch.inference_mode(False), torch.enable_grad():
                    return original(self, *args, **kwargs)
            return original(self, *args, **kwargs)
        finally:
            watch.forward_depth -= 1
            watch.forward_ends(self)
    return forward


def _accepts(fn, name: str) -> bool:
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False
    kinds = inspect.Parameter
    return (name in params and params[name].kind in (kinds.POSITIONAL_OR_KEYWORD, kinds.KEYWORD_ONLY)) or \
        any(p.kind == kinds.VAR_KEYWORD for p in params.values())


class Watch:
    """What one adapter call did: the modules it built, what their constructors made, the forward window."""

    def __init__(self, *, inject: dict, construct_only: bool, train: bool | None, device: str | None,
                 recorder: Any = None, test_weights: list | None = None, strip: bool = True,
                 stand_ins: "StandIns | None" = None, leave_dtype: bool = False, judges_default: bool = False,
                 needs_grad: bool = False, param_dtype: torch.dtype | None = None,
                 origin: str | None = None, adapter_file: str | None = None):
        self.inject_kwargs = inject
        self.origin = origin  # the package's root (ending in a separator): whose code calls a forward
        self.adapter_file = adapter_file  # tests/adapters.py: a forward it calls is the layer's
        self.init_started = False  # a watched constructor of the package ran (or started) in this call
        self.parts: list[tuple[nn.Module, str]] = []  # (module, the package code that called its forward)
        self.param_dtype = param_dtype  # every floating parameter built is converted to it, as runner._construct does
        self.leave_dtype = leave_dtype  # the check passes no dtype=: neither does the module's build
        self.dtype_required = False  # ... but the outermost constructor has no default for it
        self.judges_default = judges_default  # the default-dtype check: even the default dtype is left out
        self.needs_grad = needs_grad  # the call grades gradients: the built module's forward runs with them on
        self.stand_ins = stand_ins
        self.strip = strip
        self.test_weights = list(test_weights or [])
        self.stripped: list[str] = []
        self.injected: dict[int, tuple[nn.Module, set[str]]] = {}  # id -> (a module, the check's arguments it took)
        self.construct_only = construct_only
        self.train = train
        self.device = device
        self.recorder = recorder
        self.init_depth = 0
        self.forward_depth = 0
        self.built_modules: list[nn.Module] = []
        self.at_build: dict[int, dict] = {}  # id(module) -> {"structure", "params"}
        self.top: nn.Module | None = None
        self.loaded: dict[str, torch.Tensor] = {}
        self.seconds = 0.0
        self._started = 0.0

    def inject(self, original, obj, args: tuple, kwargs: dict) -> tuple[tuple, dict]:
        """Pass the check's ``dtype=``/``device=`` to an outermost constructor that takes them."""
        for key, value in self.inject_kwargs.items():
            if not _accepts(original, key):
                continue
            try:
                bound = inspect.signature(original).bind_partial(obj, *args, **kwargs)
            except TypeError:
                bound = None
            if bound is not None and key in bound.arguments:
                bound.arguments[key] = value
                args, kwargs = tuple(bound.args[1:]), dict(bound.kwargs)
            else:
                kwargs = dict(kwargs, **{key: value})
            self.injected.setdefault(id(obj), (obj, set()))[1].add(key)
        return args, kwargs

    def given_to(self, built: nn.Module | None) -> set[str]:
        """The check's arguments that reached the module the adapter built: passed to its own constructor, or to one
        that built it inside. One passed to a module built first and handed in (a RoPE module whose constructor takes
        device=, given to a block whose constructor does not) leaves the block's own parameters where they are."""
        given: set[str] = set()
        for module, keys in self.injected.values():
            if built is not None and (module is built or any(m is built for m in module.modules())):
                given |= keys
        return given

    def without_dtype(self, original, obj, args: tuple, kwargs: dict) -> tuple[tuple, dict]:
        """Build as the contract does when the check passes no ``dtype=``: a ``dtype=`` the adapter passes itself (the
        input's, ``dtype=in_features.dtype``) is left out where it is not the default dtype, which is what the
        contract's ``dtype=None`` stands for. A named parameter then takes its default, a value caught by
        ``**kwargs`` is dropped; a parameter with no default gets the default dtype (``dtype_required``).

        The default dtype itself is kept, except by the default-dtype check, which is about the constructor without
        ``dtype=``: a constructor that ignores ``dtype=None`` (``dtype or torch.float32``) fails that check, and is
        not charged again by every float64 gradient check through an adapter that passes the weights' float64."""
        if not self.leave_dtype:
            return args, kwargs
        try:
            sig = inspect.signature(original)
            bound = sig.bind_partial(obj, *args, **kwargs)
        except (TypeError, ValueError):
            return args, kwargs
        given = bound.arguments.get("dtype", kwargs.get("dtype"))
        if given is None or (given == torch.get_default_dtype() and not self.judges_default):
            return args, kwargs
        if "dtype" in bound.arguments and "dtype" in sig.parameters:
            default = sig.parameters["dtype"].default
            self.dtype_required = default is inspect.Parameter.empty
            bound.arguments["dtype"] = torch.get_default_dtype() if self.dtype_required else default
            return tuple(bound.args[1:]), dict(bound.kwargs)
        if "dtype" in kwargs:
            return args, {k: v for k, v in kwargs.items() if k != "dtype"}
        return args, kwargs

    def without_test_weights(self, original, obj, args: tuple, kwargs: dict) -> tuple[tuple, dict]:
        """A construct-only call observes what the constructor makes *by itself*: an argument that hands it the
        grader's test weights (``Linear(d_in, d_out, weight=w)``) is left to its default, so the class initialises
        its own. An argument that has no default cannot be left out; the check then sees the given weights."""
        try:
            sig = inspect.signature(original)
            bound = sig.bind_partial(obj, *args, **kwargs)
        except (TypeError, ValueError):
            return args, kwargs
        changed = False
        for name, value in list(bound.arguments.items()):
            param = sig.parameters[name]
            if param.kind in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD):
                continue
            if param.default is not inspect.Parameter.empty and _holds(value, self.test_weights):
                bound.arguments[name] = param.default
                self.stripped.append(name)
                changed = True
        return (tuple(bound.args[1:]), dict(bound.kwargs)) if changed else (args, kwargs)

    def built(self, module: nn.Module) -> None:
        """An outermost constructor returned: what it made is recorded as made (the dtype and init checks read it),
        then, for a check that is not about dtype (``param_dtype``), its parameters are converted to the call's
        dtype before the adapter loads the test weights into them: a float32 parameter hard-coded in the
        constructor costs the dtype checks, not also every float64 gradient check (see runner._parameters_to)."""
        self.built_modules.append(module)
        self.at_build[id(module)] = {
            "structure": runner.describe_structure(module),
            "params": {n: p.detach().clone() for n, p in module.named_parameters(remove_duplicate=False)}}
        if self.param_dtype is not None:
            runner._parameters_to(module, self.param_dtype)

    def forward_starts(self, module: nn.Module) -> None:
        if self.top is None:
            caller = self.is_part(module)
            if caller is not None:
                if all(m is not module for m, _ in self.parts):
                    self.parts.append((module, caller))
                return
            self.top = module
            self.loaded = {n: p.detach().clone() for n, p in module.named_parameters(remove_duplicate=False)}
            if self.construct_only:
                raise _Abort()
            if self.train is not None:
                module.train(self.train)
            if self.device is not None:
                module.to(self.device)
            if self.stand_ins is not None:
                self.stand_ins.install(module, locate(self.stand_ins.state, self.loaded))
        if module is self.top:
            self._counting(True)
            self._started = time.perf_counter()

    def is_part(self, module: nn.Module) -> str | None:
        """Where the package's own code called ``module``'s forward, if the module is a part of the layer rather
        than the layer: the call came from the package (a method of a plain class, a function; not the adapter,
        not another module's forward) and the module does not hold every test weight. ``TransformerBlock`` as a
        plain class calls its RMSNorm first; attention written as a function calls the RoPE module it built.
        A helper of the package that builds the layer, loads the weights and calls it is not caught: the layer
        holds them all. None: the module is the layer."""
        if self.origin is None or not self.test_weights or self.stripped:
            return None  # no weights to tell by (a construct-only call that kept them from the constructor)
        frame = sys._getframe(3)  # is_part <- forward_starts <- the watched forward <- its caller
        while frame is not None and (frame.f_code.co_filename.startswith(_TORCH_DIR)
                                     or frame.f_code.co_filename == __file__):
            frame = frame.f_back
        if frame is None:
            return None
        filename = frame.f_code.co_filename
        if filename == self.adapter_file or not filename.startswith(self.origin):
            return None
        if isinstance(frame.f_locals.get("self"), nn.Module):
            return None  # a method of a module (not its forward) calling a child: that module is an nn.Module
        params = {n: p for n, p in module.named_parameters(remove_duplicate=False)}
        held = locate({str(i): w for i, w in enumerate(self.test_weights)}, params) if params else {}
        if len(held) == len(self.test_weights):
            return None
        return f"{frame.f_code.co_qualname} ({filename[len(self.origin):]})"

    def forward_ends(self, module: nn.Module) -> None:
        if module is self.top:
            self.seconds += time.perf_counter() - self._started
            self._counting(False)

    def _counting(self, on: bool) -> None:
        if self.recorder is not None:
            self.recorder.counting = on

    def module(self) -> nn.Module | None:
        """The module the adapter built: the first whose forward it called, else the last it built; None where
        the modules whose forwards ran are parts of a layer that is no module (:meth:`is_part`)."""
        if self.top is not None:
            return self.top
        if self.parts:
            return None
        return self.built_modules[-1] if self.built_modules else None


def _holds(value: Any, weights: list, depth: int = 0) -> bool:
    """Whether an argument is (or holds, in a dict, list or tuple, or among its elements) a test weight."""
    if depth > 3:
        return False
    if isinstance(value, torch.Tensor):
        if any(value is w for w in weights):
            return True
        if value.is_floating_point() and value.device.type != "meta":
            return bool(locate({str(i): w for i, w in enumerate(weights)}, {"arg": value}))
        return False
    if isinstance(value, dict):
        return any(_holds(v, weights, depth + 1) for v in value.values())
    if isinstance(value, (list, tuple)):
        return any(_holds(v, weights, depth + 1) for v in value)
    return False


@contextlib.contextmanager
def _watching(watch: Watch):
    global _WATCH
    _WATCH = watch
    try:
        yield watch
    finally:
        _WATCH = None


# -- the wiring checks: the grader's stand-ins in place of the built module's sublayers ---------------------
class StandIns:
    """The grader's stand-ins (validator/standins.py) computing in place of the sublayers of the module an adapter
    built, so that its wiring is graded on its own.

    Through an adapter the grader cannot swap the student's sublayer classes (the adapter builds and loads
    them under the student's own names), so it swaps what they compute instead: when the built module's
    forward starts, each sublayer holding the weights of one contract sublayer (``ln1`` holds ``ln1.weight``;
    ``attn`` the four projections, fused or not) has its ``forward`` replaced by the stand-in's computation
    on those same weights, gathered from the student's parameters so that gradients flow back into them.
    The reference composite is built from the stand-in classes, so both compute the same sublayers.
    """

    def __init__(self, named: dict[str, str], state: dict[str, torch.Tensor]):
        from validator import standins

        self.state = state
        self.roles: dict[str, type] = {}
        wanted = [standins.STAND_INS[which] for which in named.values()]
        by_prefix: dict[str, set[str]] = {}
        for name in state:
            prefix, _, rest = name.partition(".")
            if rest:
                by_prefix.setdefault(prefix, set()).add(rest)
        for prefix, rests in by_prefix.items():
            for cls in wanted:
                if set(cls.weights) == rests:
                    self.roles[prefix] = cls
        self.called: set[str] = set()

    def install(self, module: nn.Module, located: dict[str, list]) -> None:
        params = dict(module.named_parameters(remove_duplicate=False))
        for prefix, cls in self.roles.items():
            names = [f"{prefix}.{w}" for w in cls.weights]
            lost = [n for n in names if n not in located]
            if lost:
                raise StudentError("stand_ins", _stand_in_info(
                    f"the weights {', '.join(lost)} were not found in the parameters of the module your adapter "
                    "built, so the grader cannot tell which sublayer to replace with its stand-in"))
            owner = _common_prefix([piece[0].split(".")[:-1] for n in names for piece in located[n]])
            if not owner:  # a design the contract allows (attention computed inline): this check cannot be made
                raise _not_graded(
                    f"the weights of {prefix} are held by the module your adapter built itself, not by a sublayer "
                    f"of its own, so the grader's stand-in cannot take the place of {prefix}")
            sub = module.get_submodule(".".join(owner))
            shapes = {n: tuple(self.state[n].shape) for n in names}
            sub.forward = self._forward(prefix, cls, {n: located[n] for n in names}, params, shapes)

    def _forward(self, prefix: str, cls: type, located: dict, params: dict, shapes: dict):
        def forward(*args: Any, **kwargs: Any) -> torch.Tensor:
            self.called.add(prefix)
            x = args[0] if args else next(iter(kwargs.values()))
            weights = {n.partition(".")[2]: _live(located[n], params, shapes[n]) for n in located}
            return cls.compute(weights, x)
        return forward

    def verify(self, function: str) -> None:
        absent = [p for p in self.roles if p not in self.called]
        if absent:
            raise StudentError("stand_ins", _stand_in_info(
                f"the module {function} built never called the forward of the sublayer(s) holding the weights of "
                f"{', '.join(absent)}, so the grader's stand-ins could not take their place: call each sublayer "
                "(self.attn(x)), so that its wiring can be graded on its own"))


def _common_prefix(paths: list[list[str]]) -> list[str]:
    """The longest module path every one of ``paths`` starts with."""
    common = list(paths[0])
    for path in paths[1:]:
        keep = 0
        while keep < min(len(common), len(path)) and common[keep] == path[keep]:
            keep += 1
        common = common[:keep]
    return common


def _stand_in_info(message: str) -> dict:
    return {"type": "StandInError", "mro": ["StandInError", "Exception"], "message": message}


def _live(pieces: list, params: dict[str, torch.Tensor], shape: tuple) -> torch.Tensor:
    """One contract weight gathered from the student's parameters, differentiably (its gradient reaches them)."""
    values = [params[p].reshape(-1)[idx.to(params[p].device)] for p, idx, _ in pieces]
    order = torch.cat([sel for _, _, sel in pieces])
    flat = torch.cat(values)[torch.argsort(order).to(values[0].device)]
    return flat.reshape(shape)


# -- finding the contract's weights in the student's parameters ------------------------------------------
def locate(weights: dict[str, torch.Tensor], params: dict[str, torch.Tensor]) -> dict[str, list]:
    """Contract name -> ``[(parameter name, flat indices into it, slice of the weight's flat elements)]``.

    Each weight's elements are looked up by value among the parameters' elements (compared in each
    parameter's dtype): a weight found whole in one parameter gives one piece; one split over several
    (per-head projections) gives one piece per parameter. A weight some of whose elements are found
    nowhere is left out (the adapter did not load it, or changed it). A value found more than once
    (random float32 values collide: a 2,400-element table holds two equal ones one time in several)
    is placed where its neighbours in the weight say the layout puts it (:func:`_settle`).
    """
    tables = {}
    for name, p in params.items():
        if p.is_floating_point() and p.device.type != "meta" and p.numel():
            flat = p.detach().reshape(-1)
            values, order = torch.sort(flat)
            tables[name] = (values, order, flat)
    found: dict[str, list] = {}
    for cname, w in weights.items():
        if not isinstance(w, torch.Tensor) or not w.is_floating_point() or w.device.type == "meta":
            continue
        flat_w = w.detach().reshape(-1)
        owner = torch.full((flat_w.numel(),), -1, dtype=torch.long)
        where = torch.zeros(flat_w.numel(), dtype=torch.long)
        names = list(tables)
        matches = []
        for i, pname in enumerate(names):
            values, order, _ = tables[pname]
            probe = flat_w.to(values.dtype).to(values.device)
            pos = torch.searchsorted(values, probe).clamp(max=values.numel() - 1)
            hit = (values[pos] == probe).cpu()
            if bool(hit.any()):
                repeated = (torch.searchsorted(values, probe, right=True) - pos > 1).cpu() & hit
                matches.append((int(hit.sum()), i, hit, order[pos].cpu(), repeated))
        # The parameters holding most of the weight claim their elements first: a value that also occurs,
        # by chance, in another parameter (random floats do collide, one in a few thousand) stays where
        # the rest of the weight is.
        # a value found more than once (in one parameter or in several) is placed by its neighbours below
        ambiguous = sum((m[2].int() for m in matches), torch.zeros(flat_w.numel(), dtype=torch.int)) > 1
        for _, i, hit, at, repeated in sorted(matches, key=lambda m: (-m[0], m[1])):
            hit = hit & (owner < 0)
            owner[hit] = i
            where[hit] = at[hit]
            ambiguous |= hit & repeated
            if bool((owner >= 0).all()):
                break
        if flat_w.numel() == 0 or bool((owner < 0).any()):
            continue
        if bool(ambiguous.any()):
            cols = flat_w.numel() // w.shape[0] if w.dim() > 1 and w.shape[0] else flat_w.numel()
            k = ambiguous.nonzero().reshape(-1)
            suspect = torch.zeros_like(ambiguous)
            suspect[k[~_in_line(owner, where, cols, k)]] = True
            if bool(suspect.any()):
                _settle(cols, flat_w, owner, where, suspect, [tables[n][2] for n in names])
        pieces = []
        for i in owner.unique().tolist():
            sel = (owner == i).nonzero().reshape(-1)
            pieces.append((names[i], where[sel], sel))
        found[cname] = pieces
    return found


_SIDES = ((0, -1), (0, 1), (-1, 0), (1, 0))  # (row, column) steps to an element's neighbours in a weight


def _sides(k: torch.Tensor, cols: int, n: int):
    """For elements ``k`` of a weight (``cols`` to a row, ``n`` in all), on each side in turn: whether two
    neighbours lie on that side, and the flat indices of the nearer (``a``) and the farther (``b``)."""
    rows = n // max(cols, 1)
    r, c = k // cols, k % cols
    for dr, dc in _SIDES:
        r2, c2 = r + 2 * dr, c + 2 * dc
        valid = (r2 >= 0) & (r2 < rows) & (c2 >= 0) & (c2 < cols)
        yield valid, ((r + dr) * cols + c + dc).clamp(0, n - 1), (r2 * cols + c2).clamp(0, n - 1)


def _in_line(owner: torch.Tensor, where: torch.Tensor, cols: int, k: torch.Tensor) -> torch.Tensor:
    """Which of the elements ``k`` of a weight (``cols`` to a row) sit where two neighbours on one side, in the same
    parameter, say the layout puts them: a weight's layout in a parameter (whole, transposed, a slice of a fused
    matrix, a head's rows) is affine along a row and along a column."""
    mine, at = owner[k], where[k]
    ok = torch.zeros(k.numel(), dtype=torch.bool)
    for valid, a, b in _sides(k, cols, owner.numel()):
        ok |= valid & (owner[a] == mine) & (owner[b] == mine) & (2 * where[a] - where[b] == at)
    return ok


def _settle(cols: int, flat_w: torch.Tensor, owner: torch.Tensor, where: torch.Tensor, suspect: torch.Tensor,
            params: list[torch.Tensor]) -> None:
    """Place each ``suspect`` element of a weight (its value occurs more than once among the parameters, in one or in
    several, and it is not where its neighbours say) where two neighbours on one side, in one parameter, predict
    (see :func:`_in_line`) and its value is. Where none do, the first occurrence not yet given to another suspect is
    taken, in the parameter the majority placed it in first. ``params``: each parameter's elements, flat."""
    k = suspect.nonzero().reshape(-1)
    todo = torch.ones(k.numel(), dtype=torch.bool)
    for valid, a, b in _sides(k, cols, flat_w.numel()):
        valid = valid & todo & ~suspect[a] & ~suspect[b] & (owner[a] == owner[b])
        guess = 2 * where[a] - where[b]
        for i in owner[a][valid].unique().tolist():
            sel = (valid & (owner[a] == i)).nonzero().reshape(-1)
            flat = params[i]
            at = guess[sel]
            inside = (at >= 0) & (at < flat.numel())
            same = inside & (flat[at.clamp(0, flat.numel() - 1).to(flat.device)].cpu()
                             == flat_w[k[sel]].to(flat.dtype))
            placed = sel[same]
            owner[k[placed]], where[k[placed]] = i, at[same]
            todo[placed] = False
    given = {(int(owner[e]), int(where[e])) for e in k[~todo].tolist()}
    for e in k[todo].tolist():  # no two neighbours on any side: the first occurrence left
        occurrences = []
        for i, flat in enumerate(params):
            occurrences += [(i, o) for o in (flat == flat_w[e].to(flat.dtype)).nonzero().reshape(-1).tolist()]
        occurrences.sort(key=lambda io: io[0] != int(owner[e]))
        placed = next((o for o in occurrences if o not in given), occurrences[0])
        owner[e], where[e] = placed
        given.add(placed)


def _gather(located: dict[str, list], source: dict[str, torch.Tensor | None], shapes: dict[str, tuple]) \
        -> dict[str, torch.Tensor | None]:
    """The contract's tensors assembled from ``source`` (student name -> tensor) through ``located``."""
    out: dict[str, torch.Tensor | None] = {}
    for cname, pieces in located.items():
        parts = []
        for pname, idx, sel in pieces:
            t = source.get(pname)
            if t is None:
                parts = None
                break
            parts.append((t.detach().reshape(-1)[idx.to(t.device)], sel))
        if parts is None:
            out[cname] = None
            continue
        n = sum(sel.numel() for _, sel in parts)
        flat = torch.empty(n, dtype=parts[0][0].dtype, device=parts[0][0].device)
        for values, sel in parts:
            flat[sel.to(flat.device)] = values
        out[cname] = flat.reshape(shapes[cname])
    return out


def contract_structure(raw: dict, located: dict[str, list], shapes: dict[str, tuple],
                       loaded: dict[str, tuple] | None = None) -> dict:
    """The structure of the built module with the contract's names for the parameters its weights were found in.

    dtype, device and requires_grad come from what the constructor made (``raw``, before loading);
    a parameter that holds no contract weight keeps its own name. Its shape is the contract's, unless the
    adapter replaced a parameter the constructor made in another shape (``.data = w``, ``loaded``: the
    shapes when the forward started): then it is the shape the constructor made, which the contract judges.
    """
    by_name = {q["name"]: q for q in raw.get("parameters", [])}
    used = {pname for pieces in located.values() for pname, _, _ in pieces}
    params = []
    for cname, pieces in located.items():
        holders = [by_name[p] for p, _, _ in pieces if p in by_name]
        if not holders:
            continue
        first = holders[0]
        replaced = [h for h in holders if loaded and h["name"] in loaded
                    and tuple(h["shape"]) != tuple(loaded[h["name"]])]
        params.append({"name": cname, "shape": list(replaced[0]["shape"] if replaced else shapes[cname]),
                       "dtype": first["dtype"],
                       "device": first["device"], "requires_grad": all(h["requires_grad"] for h in holders),
                       "object": hash((cname, tuple(h["object"] for h in holders)))})
    params += [q for q in raw.get("parameters", []) if q["name"] not in used]
    return dict(raw, parameters=params)


# -- one call ----------------------------------------------------------------------------------------------
def _arguments(entry: AdaptedEntry, variant: dict, call: dict, inputs: list, weights: dict) -> tuple[dict, dict]:
    """The adapter's keyword arguments, and for inputs flattened to a batch, their original leading shape."""
    kwargs: dict[str, Any] = {}
    unflatten: dict[str, Any] = {}
    init_args = call.get("init_args") or []
    options = call.get("init_kwargs") or {}
    for arg, (kind, ref, batch_dims) in variant["args"].items():
        if kind == "init":
            index = entry.init.index(ref)
            if index >= len(init_args):
                raise _not_graded(f"{variant['function']} needs {arg}, which this check does not pass")
            kwargs[arg] = init_args[index]
        elif kind == "option":
            if ref not in options:
                raise _not_graded(f"{variant['function']} always passes {arg}, and this check leaves {ref!r} to the "
                                  "contract's default, which cannot be tried through the adapter")
            kwargs[arg] = options[ref]
        elif kind == "param":
            kwargs[arg] = weights[ref]
        elif kind == "parameters":
            kwargs[arg] = dict(weights)
        elif kind == "input":
            value = inputs[entry.call.index(ref)]
            if batch_dims and isinstance(value, torch.Tensor):
                core = int(entry.core.get(ref, value.dim()))
                lead = tuple(value.shape[: value.dim() - core])
                value = value.reshape(-1, *value.shape[value.dim() - core:]) if lead else value.unsqueeze(0)
                unflatten["lead"] = lead
            kwargs[arg] = value
        else:
            kwargs[arg] = ref
    return kwargs, unflatten


def execute(entry: AdaptedEntry, call: dict, origin: str | None) -> dict:
    """One call through the adapter, watched; the result has the shape of :func:`validator.runner.execute`'s,
    and says which adapter function it went through (``adapter``), failed or not."""
    variant = entry.variant_for(call)
    special = next((key for key in runner._SPECIAL_CALLS if call.get(key)), None)
    if special is not None:  # the checks that make these declare it (not_through_adapter); a call made anyway
        raise _not_graded(f"{variant['function']} builds your layer and calls it once, so a call that needs the "
                          f"layer itself ({_SPECIAL_WHAT[special]}) cannot be made through it")
    if "rng" in call.get("want", ()):
        raise _not_graded(f"{variant['function']} builds your layer and loads the grader's weights in one call, so "
                          "the random draws of your constructor alone cannot be told apart")
    try:
        result = _execute(entry, variant, call, origin)
    except StudentError as err:
        err.info["adapter"] = variant["function"]
        raise
    result["adapter"] = variant["function"]
    return result


def _execute(entry: AdaptedEntry, variant: dict, call: dict, origin: str | None) -> dict:
    want = set(call.get("want", ("output",)))
    fn = entry.functions[variant["function"]]
    adapter_file = getattr(getattr(inspect.unwrap(fn), "__code__", None), "co_filename", None)
    options = call.get("init_kwargs") or {}
    inject = {k: options[k] for k in ("dtype", "device") if k in options and options[k] is not None}
    device = call.get("device")
    state = call.get("state") or {}
    result: dict[str, Any] = {"ok": True}
    seed = call.get("seed", 0)
    trace = call.get("trace_ops") or call.get("track_memory")
    recorder = runner.OpRecorder(track_memory=bool(call.get("track_memory")),
                                 marker=f"validator::{secrets.token_hex(8)}") if trace else None
    observation = runner.Observation(recorder) if recorder is not None else None
    if recorder is not None and entry.kind == "module":
        recorder.counting = False  # counted from the built module's forward on (see Watch.forward_starts)
    construct_only = "construct_only" in want
    watch = None
    forward_seconds = 0.0
    output = None
    inputs: list = []
    weights: dict[str, torch.Tensor] = {}
    grad_output = call.get("grad_output")
    with runner._default_dtype(call.get("default_dtype")):
        if seed is not None:
            runner.reseed(int(seed))
        started = time.perf_counter()
        with (observation if observation is not None else contextlib.nullcontext()):
            each = runner.pass_inputs(call)
            repeat = len(each) if len(each) > 1 else max(1, int(call.get("repeat", 1)))
            outputs = []
            for n in range(1 if construct_only else repeat):
                inputs = runner.prepare_inputs(each[n % len(each)], device, inference=bool(call.get("inference")))
                weights = {k: (v.to(device) if device is not None else v.clone()).requires_grad_(
                    grad_output is not None and v.is_floating_point()) for k, v in state.items()}
                kwargs, unflatten = _arguments(entry, variant, call, inputs, weights)
                watch = Watch(inject=inject, construct_only=construct_only, train=call.get("train"),
                              device=device, recorder=recorder, test_weights=list(weights.values()),
                              # the dtype checks look at the layer as built (no param_dtype): under a default dtype,
                              # the default-dtype check
                              leave_dtype="dtype" not in inject,
                              judges_default=bool(call.get("default_dtype")) and not call.get("param_dtype"),
                              needs_grad=grad_output is not None and not call.get("inference"),
                              param_dtype=dtype_from_name(call["param_dtype"]) if call.get("param_dtype") else None,
                              stand_ins=StandIns(call["stand_ins"], state) if call.get("stand_ins") else None,
                              origin=origin, adapter_file=adapter_file)
                if recorder is not None:
                    recorder.uncounted.clear()
                with _watching(watch), (torch.no_grad() if call.get("inference") else contextlib.nullcontext()):
                    try:
                        try:
                            output = runner._stage("forward", origin, _until_aborted, fn, kwargs)
                        except StudentError as err:
                            raise _signature_error(fn, kwargs, variant["function"], err, origin) or err
                    except StudentError as err:
                        # a construct-only call has what it came for once a module is built: what the adapter
                        # does next (loading weights that do not fit a meta or float64 build) is not graded here.
                        # Nor where no constructor of the package ran at all: a layer written as a function ran
                        # whole on the probe's inputs, and what it raised is the value checks' business (unless
                        # every call fails so: a stub, a package that does not import)
                        if not (construct_only and (watch.built_modules or (
                                not watch.init_started and not _every_call_fails(err.info)))):
                            raise
                forward_seconds += watch.seconds
                if recorder is not None and entry.kind == "module" and watch.top is None:
                    recorder.count_uncounted()  # no module's forward was the layer's: the whole call was
                if observation is not None:
                    observation.check_modes("forward")
                if construct_only:
                    break
                if watch.stand_ins is not None:
                    if watch.top is None and watch.parts:
                        raise _not_graded(f"{_parts_message(variant['function'], watch.parts)}. The grader's "
                                          "stand-in sublayers take the places of a module's sublayers, so this "
                                          "check cannot be made")
                    watch.stand_ins.verify(variant["function"])
                output = _checked_output(output, variant, unflatten, device, inputs)
                if recorder is not None:
                    recorder.counting = True  # backward is the layer's too
                if grad_output is not None and output.requires_grad:
                    if tuple(grad_output.shape) != tuple(output.shape):
                        raise StudentError("backward", {
                            "type": "ValueError", "mro": ["ValueError"],
                            "message": f"output has shape {tuple(output.shape)}, expected "
                                       f"{tuple(grad_output.shape)}, so no gradient can flow back"})
                    runner._stage("backward", origin, runner._backward, output,
                                  runner._as_passed(call, grad_output.to(dtype=output.dtype, device=output.device)))
                    if observation is not None:
                        observation.check_modes("backward")
                if len(each) > 1:
                    outputs.append(output)
        elapsed = time.perf_counter() - started
    module = watch.module() if watch is not None else None
    if module is None and entry.kind == "module" and watch is not None and {"structure", "params"} & want:
        raise _not_a_module(variant["function"], watch)
    what = type(module).__name__ if module is not None else "the layer it builds"
    if watch is not None and watch.dtype_required and watch.judges_default:
        raise _not_graded(f"{variant['function']} passes dtype= to {what}, whose constructor has no default for it, "
                          "so what your constructor makes without dtype= cannot be seen through the adapter")
    missing = sorted(set(inject) - watch.given_to(module)) if watch is not None else []
    if missing:
        raise _not_graded(f"{variant['function']} builds {what}, whose constructor takes no "
                          f"{' or '.join(m + '=' for m in missing)} argument, so the contract's "
                          f"{', '.join(m + '=' for m in missing)} cannot be passed through the adapter")
    located = None
    if construct_only and watch is not None and watch.stripped and module is not None:
        located = _located_by_loading(fn, entry, variant, call, device, weights, state, origin)
    result["seconds"] = forward_seconds if module is not None and watch.top is not None else elapsed
    if "inputs_changed" in want and not construct_only:
        result["inputs_changed"] = runner.changed_inputs(call, inputs)
    if recorder is not None:
        result["ops"] = dict(recorder.counts)
        result["peak_bytes"] = int(recorder.peak)
        result["profiled_ops"] = {k.replace("aten::", "aten."): v for k, v in observation.profiled.items()}
        result["tampered"] = list(observation.problems)
    if entry.kind == "module":
        _module_results(result, want, watch, module, state, weights, variant, located)
    if construct_only:
        return result
    result["output_requires_grad"] = bool(output.requires_grad)
    result["output_is_subclass"] = type(output) is not torch.Tensor
    if "output" in want:
        result["output"] = output
        if outputs:
            result["pass_outputs"] = outputs
    if "input_grads" in want:
        result["input_grads"] = [(t.grad.detach().clone() if isinstance(t, torch.Tensor) and t.grad is not None
                                  else None) for t in inputs]
    return result


def _every_call_fails(info: dict) -> bool:
    """An error every call of the adapter meets, whatever it is for: the stub's NotImplementedError, a package that
    does not import, a signature that cannot take the course's arguments."""
    return bool({"NotImplementedError", "ImportError", "SyntaxError"} & set(info.get("mro") or [])) \
        or bool(info.get("signature"))


def _not_a_module(function: str, watch: Watch | None) -> StudentError:
    """The error of a call that needs the layer's module where the adapter built none that is the layer."""
    if watch is not None and watch.parts:
        message = _parts_message(function, watch.parts)
    else:
        message = (f"{function} built no module of your package (none of your nn.Module classes was constructed "
                   "while it ran), so there is no layer to inspect: the adapter must build your layer and call it. "
                   "Output computed by a function (the adapter's own code or a function of your package), or by a "
                   "library layer (torch.nn.Linear, torch.nn.Embedding...) it builds, is not an nn.Module of yours")
    return StudentError("construct", {"type": NOT_A_MODULE, "mro": [NOT_A_MODULE, "TypeError"], "message": message})


def _grads_without_a_module(watch: Watch | None, state: dict, weights: dict) -> dict:
    """The weights' gradients where no module is the layer: read from the parameters of the modules whose forwards
    ran (:meth:`Watch.is_part`) that the weights were loaded into, else from the weights as they were passed (a
    function that computes with them)."""
    grads: dict = {}
    parts = [m for m, _ in watch.parts] if watch is not None else []
    params = {f"{i}.{n}": p for i, m in enumerate(parts) for n, p in m.named_parameters(remove_duplicate=False)}
    if params:
        located = locate(state, {k: p.detach() for k, p in params.items()})
        grads = {k: v for k, v in _gather(located, {k: p.grad for k, p in params.items()},
                                         {k: tuple(v.shape) for k, v in state.items()}).items() if v is not None}
    for cname, w in weights.items():
        if cname not in grads and isinstance(w, torch.Tensor) and w.grad is not None:
            grads[cname] = w.grad.detach().clone()
    return grads


def _parts_message(function: str, parts: list[tuple[nn.Module, str]]) -> str:
    """Why no module is the layer: the forwards that ran were called by the package's own code, which is no
    nn.Module's forward (a plain class, a function)."""
    callers = list(dict.fromkeys(caller for _, caller in parts))
    names = ", ".join(dict.fromkeys(type(m).__name__ for m, _ in parts))
    owner = callers[0].split(" ")[0].rsplit(".", 1)
    what = (f"`{owner[0]}` is not an nn.Module: make it a torch.nn.Module subclass (and call super().__init__() "
            "first in its constructor)") if len(owner) == 2 else \
        f"`{owner[0]}` is a function: write the layer as an nn.Module that holds its weights as parameters"
    held = "none of them holds" if len(parts) > 1 else "it does not hold"
    return (f"{function} ran the forward of {names} from {' and '.join(callers)}, and {held} all the weights it "
            f"was given: {'they are parts' if len(parts) > 1 else 'it is a part'} of a layer that is not a module, "
            f"so there is no layer to inspect (its parameters, dtype and device). {what}")


def _signature_error(fn, kwargs: dict, function: str, err: StudentError, origin: str | None) -> StudentError | None:
    """The error of an adapter whose signature is not the handout's (a parameter removed or renamed): the call
    itself raised TypeError before any line of it ran, which said "no line of your file is on the stack". Named
    as what it is, at the adapter's ``def`` line; None for any other error."""
    if err.info.get("type") != "TypeError" or err.info.get("where"):
        return None
    try:
        signature = inspect.signature(fn)
        signature.bind(**kwargs)
        return None
    except TypeError as exc:
        problem = str(exc)
    except ValueError:  # no signature to read
        return None
    code = getattr(fn, "__code__", None)
    where = []
    if code is not None:
        filename = code.co_filename
        shown = filename[len(origin):] if origin and filename.startswith(origin) else filename
        try:
            line_text = linecache.getline(filename, code.co_firstlineno).strip()
        except Exception:  # noqa: BLE001
            line_text = ""
        where = [{"file": shown, "line": code.co_firstlineno, "function": function, "code": line_text[:200]}]
    message = (f"the grader calls {function}({', '.join(f'{k}=...' for k in kwargs)}) as the course's tests do, and "
               f"your {function}{signature} cannot take that ({problem}): keep the handout's signature")
    return StudentError("forward", {"type": "TypeError", "mro": ["TypeError", "Exception"], "message": message,
                                    "where": where, "student_frames": bool(where), "signature": True})


def _until_aborted(fn, kwargs: dict) -> Any:
    """Call the adapter; a construct-only call stopped at its first forward returns None."""
    try:
        return fn(**kwargs)
    except _Abort:
        return None


def _inputs(call: dict, device: str | None) -> list:
    """The arguments as the runner prepares them for a direct call (copies, views where an item names a
    ``layout``, no input that requires grad in an ``inference`` call): one way of building them for both."""
    return runner.prepare_inputs(call.get("inputs", []), device, inference=bool(call.get("inference")))


def _checked_output(output: Any, variant: dict, unflatten: dict, device: str | None, inputs: list) -> torch.Tensor:
    if not isinstance(output, torch.Tensor):
        raise StudentError("forward", {"type": "TypeError", "mro": ["TypeError"],
                                       "message": f"{variant['function']} returned a {type(output).__name__}, "
                                                  "expected a torch.Tensor"})
    if "lead" in unflatten:
        lead = unflatten["lead"]
        output = output.reshape(*lead, *output.shape[1:]) if lead else output.squeeze(0)
    if device is not None and output.device.type != torch.device(device).type:
        raise StudentError("forward", {
            "type": "RuntimeError", "mro": ["RuntimeError"],
            "message": f"returned a tensor on {output.device}, but the layer and its inputs are on {device}: create "
                       "new tensors on the input's device (device=x.device)"})
    return output


def _located_by_loading(fn, entry: AdaptedEntry, variant: dict, call: dict, device: str | None, weights: dict,
                        state: dict, origin: str | None) -> dict | None:
    """Where the adapter puts each weight, learnt from a second call that keeps them (up to the module's forward):
    a construct-only call that left the test weights out of the constructor has nothing loaded to find them in."""
    kwargs, _ = _arguments(entry, variant, call, _inputs(call, device), weights)
    watch = Watch(inject={}, construct_only=True, train=None, device=None, strip=False)
    with _watching(watch):
        try:
            runner._stage("forward", origin, _until_aborted, fn, kwargs)
        except StudentError:
            return None
    return locate(state, watch.loaded) if watch.top is not None else None


def _module_results(result: dict, want: set, watch: Watch | None, module: nn.Module | None, state: dict,
                    weights: dict, variant: dict, located: dict | None = None) -> None:
    """Structure, initial values, parameters and gradients of the module the adapter built, by contract name."""
    if module is None:  # (a call that wants its structure or parameters has stopped at _not_a_module already)
        if "param_grads" in want:  # a layer that is no module: its gradients are where its weights went
            result["param_grads"] = _grads_without_a_module(watch, state, weights)
        return
    shapes = {k: tuple(v.shape) for k, v in state.items()}
    loaded = watch.loaded or {n: p.detach() for n, p in module.named_parameters(remove_duplicate=False)}
    if located is None:
        located = locate(state, loaded)
    built = watch.at_build.get(id(module)) or {"structure": runner.describe_structure(module), "params": {}}
    if "structure" in want:
        result["structure"] = contract_structure(built["structure"], located, shapes,
                                                 {n: tuple(t.shape) for n, t in loaded.items()})
    if "params" in want:
        params = _gather(located, built["params"], shapes)
        result["params"] = {k: v for k, v in params.items() if v is not None}
    current = {n: p for n, p in module.named_parameters(remove_duplicate=False)}
    if "param_grads" in want:
        grads = _gather(located, {n: p.grad for n, p in current.items()}, shapes)
        for cname, w in weights.items():  # a weight used as it was passed (no parameter holds it)
            if grads.get(cname) is None and isinstance(w, torch.Tensor) and w.grad is not None:
                grads[cname] = w.grad.detach().clone()
        result["param_grads"] = grads
    if "params_after" in want:
        result["params_before"] = _gather(located, loaded, shapes)
        result["params_after"] = _gather(located, {n: p.detach() for n, p in current.items()}, shapes)
