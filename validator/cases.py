"""Turn a spec's `dims` and `inputs` into hypothesis strategies of Case objects.

Small tensors draw their values through hypothesis (so failures shrink to
small IDs); large ones are filled from a drawn seed, which keeps generation
cheap while shapes and dims still shrink.
"""

from __future__ import annotations

import functools
import math
import operator
import re
from dataclasses import dataclass, field, replace
from typing import Any

import torch
from hypothesis import assume, strategies as st

from validator.draws import remembered
from validator.spec.schema import _EXPR, Challenge, Entry, InputSpec, resolve

MAX_DRAWN_VALUES = 64
DTYPES = {"int64": torch.int64, "int32": torch.int32, "float32": torch.float32,
          "float64": torch.float64, "float16": torch.float16, "bfloat16": torch.bfloat16}


@dataclass
class Case:
    """One generated call: dims, the call arguments, and a seed for everything random."""

    dims: dict[str, int]
    inputs: dict[str, Any]
    seed: int
    notes: list[str] = field(default_factory=list)
    # dims the inputs would use but the check's own shapes leave out (``shape: [8, 16, n]`` for an x of
    # [rows, cols, n]): still drawn, never shown, so a failing input names only the sizes it has
    hidden: list[str] = field(default_factory=list)

    def but(self, *, inputs: dict[str, Any] | None = None, dims: dict[str, int] | None = None,
            notes: list[str] | None = None) -> "Case":
        """A copy with other inputs, dims or notes (fresh dicts and lists; attributes a check attached stay behind)."""
        return replace(self, dims=dict(self.dims if dims is None else dims),
                       inputs=dict(self.inputs if inputs is None else inputs),
                       notes=list(self.notes if notes is None else notes), hidden=list(self.hidden))

    def summary(self) -> str:
        parts = [", ".join(f"{k}={v}" for k, v in self.dims.items() if k not in self.hidden)]
        for name, value in self.inputs.items():
            if not isinstance(value, torch.Tensor) and name in self.dims and self.dims[name] == value:
                continue  # a value input that repeats a dim (max_seq_len=max_seq_len) is shown once
            parts.append(f"{name}={describe_value(value)}")
        parts.extend(self.notes)
        return "; ".join(p for p in parts if p)


def describe_value(value: Any, limit: int = 24) -> str:
    if not isinstance(value, torch.Tensor):
        return repr(value)
    dtype = str(value.dtype).removeprefix("torch.")
    if value.numel() <= limit and value.device.type != "meta":
        body = repr(value.tolist())
        return f"tensor({body}, dtype={dtype})"
    return f"tensor(shape={tuple(value.shape)}, dtype={dtype})"


def merged_input(base: InputSpec, override: dict | None) -> InputSpec:
    if not override:
        return base
    return InputSpec.model_validate({**base.model_dump(exclude_unset=True), **override})


def literal_or_dim(value: Any, dims: dict[str, Any]) -> Any:
    """A value input's value: ``"max_seq_len"`` or ``"high-1"`` names a dim, any other value is literal."""
    if isinstance(value, str):
        match = _EXPR.match(value)
        if match and match.group(1) in dims:
            return resolve(value, dims)
    return value


def _sampled(choices: tuple) -> st.SearchStrategy:
    """One strategy per distinct choice list (see :func:`_shapes`), unhashable choices aside."""
    try:
        return _sampled_cached(choices)
    except TypeError:
        return st.sampled_from(choices)


@functools.lru_cache(maxsize=256)
def _sampled_cached(choices: tuple) -> st.SearchStrategy:
    return st.sampled_from(choices)


def _pick(spec: InputSpec, draw=None) -> Any:
    """A value input's value: an explicit ``value`` wins; else a drawn (or the first) choice."""
    if spec.choices and "value" not in spec.model_fields_set:
        return draw(_sampled(tuple(spec.choices))) if draw is not None else spec.choices[0]
    return spec.value


def option_values(challenge: Challenge, dims: dict[str, Any], overrides: dict | None = None,
                  draw=None) -> dict[str, Any]:
    """The construction options (value inputs no entry calls with), check overrides applied.

    With ``draw`` (inside a hypothesis strategy) an option with ``choices`` is drawn;
    without it the first choice is taken.
    """
    out: dict[str, Any] = {}
    for name, base in challenge.options().items():
        spec = merged_input(base, (overrides or {}).get(name))
        out[name] = literal_or_dim(_pick(spec, draw), dims)
    return out


def round_dims(challenge: Challenge, dims: dict[str, Any]) -> dict[str, Any]:
    """Round the dims under ``multiple_of`` up to their step (an even ``embedding_dim``)."""
    out = dict(dims)
    for name, step in challenge.multiple_of.items():
        if isinstance(out.get(name), int) and out[name] % step:
            out[name] += step - out[name] % step
    return out


_RELATION = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_]*|\d+)\s*(<=|>=|==|!=|<|>)\s*([A-Za-z_][A-Za-z0-9_]*|\d+)\s*$")
_OPS = {"<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge, "==": operator.eq, "!=": operator.ne}


def parse_relation(text: str, names: set[str]) -> tuple[str, str, str]:
    """``"seq_len > embedding_dim"`` -> its parts; a ValueError that says what is allowed otherwise."""
    match = _RELATION.match(str(text))
    if not match:
        raise ValueError(f"{text!r} is not a relation: write `dim OP dim` or `dim OP number`, OP one of "
                         "<, <=, >, >=, ==, !=")
    left, op, right = match.groups()
    unknown = [x for x in (left, right) if not x.isdigit() and x not in names]
    if unknown:
        raise ValueError(f"{text!r} names {', '.join(unknown)}, not a dim (known: {', '.join(sorted(names))})")
    return left, op, right


def holds(relations: list[str], dims: dict[str, Any]) -> bool:
    """Whether drawn dims satisfy every relation (a regime of a check)."""
    for text in relations:
        left, op, right = parse_relation(text, set(dims))
        value = (lambda x: int(x) if x.isdigit() else dims[x])
        if not _OPS[op](value(left), value(right)):
            return False
    return True


def dims_strategy(challenge: Challenge, fixed: dict[str, int] | None = None) -> st.SearchStrategy:
    """Dims drawn from their ranges (multiples of their ``multiple_of`` step); ``fixed`` ones as given.

    A drawn dim is at least 1: a zero-size dim (``seq_len=0``) is an edge case that
    belongs to the check that pins it (``dims: {seq_len: 0}``), so that a bug with
    empty inputs costs that check alone, not every check hypothesis shrinks to it.
    """
    fixed = fixed or {}
    parts = {}
    for name, rng in challenge.dims.items():
        step = challenge.multiple_of.get(name, 1)
        if name in fixed:
            parts[name] = st.just(int(fixed[name]))
        elif isinstance(rng, int):
            parts[name] = st.just(rng)
        else:
            low = max(rng[0], 1) if rng[1] >= 1 else rng[0]
            parts[name] = st.integers(-(-low // step), rng[1] // step).map(lambda k, s=step: k * s)
    for name, value in fixed.items():
        parts.setdefault(name, st.just(int(value)))
    return st.fixed_dictionaries(parts)


def _shape_strategy(spec: InputSpec, dims: dict[str, int]) -> st.SearchStrategy:
    """An ordinary shape for ``...``: sides of at least 1, and never 0-d.

    0-d and zero-size inputs are edge cases with checks of their own (an input
    override with an explicit ``shape``), which take this path's ``None not in fixed`` branch.
    """
    return _shapes(tuple(None if d == "..." else int(resolve(d, dims)) for d in spec.shape),
                   spec.max_side, spec.max_leading_dims, spec.min_leading_dims, spec.min_side)


@functools.lru_cache(maxsize=1024)
def _shapes(fixed: tuple[int | None, ...], max_side: int, max_leading_dims: int, min_leading_dims: int = 0,
            min_side: int = 1) -> st.SearchStrategy:
    """The strategy behind :func:`_shape_strategy`, made once per distinct shape: hypothesis
    validates every strategy object the first time it draws from it, which costs more than a draw."""
    if None not in fixed:
        return st.just(fixed)
    min_lead = max(min_leading_dims, 1 if len(fixed) == 1 else 0)  # a bare `...` with no leading dim: 0-d
    high = max(max_side, 1)
    lead = st.lists(st.integers(min(min_side, high), high), min_size=min(min_lead, max_leading_dims),
                    max_size=max_leading_dims)
    where = fixed.index(None)
    return lead.map(lambda xs: fixed[:where] + tuple(xs) + fixed[where + 1:])


def _with_lead(spec: InputSpec, dims: dict[str, int], lead: tuple[int, ...]) -> tuple[int, ...]:
    """The shape of ``spec`` with ``...`` replaced by an already drawn leading shape."""
    out: list[int] = []
    for d in spec.shape:
        out.extend(lead) if d == "..." else out.append(int(resolve(d, dims)))
    return tuple(out)


def make_mask(shape: tuple[int, ...], pattern: str, gen: torch.Generator) -> torch.Tensor:
    """A boolean (..., queries, keys) mask, True = may attend; every query may attend to some key."""
    if len(shape) < 2:
        return torch.ones(shape, dtype=torch.bool)
    q, k = shape[-2], shape[-1]
    if pattern == "causal":
        return torch.ones(q, k, dtype=torch.bool).tril().expand(shape).clone()
    mask = torch.rand(shape, generator=gen) < 0.5
    if k:
        keep = torch.randint(0, k, shape[:-1], generator=gen)
        mask.scatter_(-1, keep.unsqueeze(-1), True)
    return mask


def _input(draw, spec: InputSpec, dims: dict[str, int], lead: dict | None = None) -> tuple[Any, list[str]]:
    """One argument, drawn with the caller's ``draw`` (a plain function, not a composite strategy:
    a new strategy object per argument per example is validated by hypothesis each time).
    ``lead`` holds the leading shape that ``...`` stands for once one input drew it,
    so every input of a call (Q, K, V and a mask; x and its positions) shares its batch dims."""
    notes: list[str] = []
    if spec.type == "value":
        return literal_or_dim(_pick(spec, draw), dims), notes
    needs_element = spec.inject is not None or spec.include or spec.repeats
    shared = lead is not None and "..." in spec.shape
    if shared and "lead" in lead:
        shape = _with_lead(spec, dims, lead["lead"])
    else:
        shape = draw(_shape_strategy(spec, dims))
    numel = math.prod(shape)
    extra = max(2 if spec.repeats else 1, len(spec.include), len(spec.injected))
    if needs_element and numel < extra:
        shape = tuple(max(s, 1) for s in shape)  # a fixed zero-size dim (seq_len=0) cannot hold the element
        shape = tuple(shape) + (extra,) if not shape else (shape[0] * extra,) + tuple(shape[1:])
        numel = math.prod(shape)
    if shared and "lead" not in lead:  # recorded as grown above, so the inputs drawn after it agree
        where = spec.shape.index("...")
        after = len(spec.shape) - where - 1
        lead["lead"] = tuple(shape[where:len(shape) - after])
    seed = draw(st.integers(0, 2**31 - 1))
    gen = torch.Generator().manual_seed(seed)
    if spec.type == "mask":
        return make_mask(tuple(shape), spec.pattern, gen), notes
    if spec.type == "token_ids":
        high = int(resolve(spec.high, dims))
        dtype = DTYPES[spec.dtype or "int64"]
        pool = min(high, 3) if spec.repeats else high
        if numel <= MAX_DRAWN_VALUES:
            values = draw(st.lists(st.integers(0, max(pool - 1, 0)), min_size=numel, max_size=numel))
            flat = torch.tensor(values, dtype=torch.int64)
        else:
            flat = torch.randint(0, max(pool, 1), (numel,), generator=gen)
        names = {**dims, "high": high}
        for i, expr in enumerate(spec.include):
            flat[i % numel] = int(resolve(expr, names))
        if spec.repeats and numel >= 2:
            flat[1] = flat[0]
        if spec.injected:
            bad = [int(resolve(expr, names)) for expr in spec.injected]
            where = [draw(st.integers(0, numel - 1))] if len(bad) == 1 else \
                draw(st.lists(st.integers(0, numel - 1), min_size=len(bad), max_size=len(bad), unique=True))
            for pos, value in zip(where, bad):
                flat[pos] = value
            notes.append(", ".join(f"ID {value} at flat position {pos}" for pos, value in zip(where, bad)))
        return flat.reshape(shape).to(dtype), notes
    dtype = DTYPES[spec.dtype] if spec.dtype else torch.get_default_dtype()
    value = (torch.randn(shape, generator=gen, dtype=torch.float64) * (spec.scale or 1.0)).to(dtype)
    return value, notes


def case_strategy(challenge: Challenge, entry: Entry, overrides: dict | None = None,
                  fixed_dims: dict[str, int] | None = None,
                  fixed_shapes: dict[str, list[int]] | None = None, where: list[str] | None = None
                  ) -> st.SearchStrategy[Case]:
    """A strategy for the arguments of one entry, with a check's input overrides applied.

    ``where`` (a regime) keeps only dims satisfying every relation, e.g. ``["seq_len > embedding_dim"]``.
    Everything that does not depend on the drawn dims (the dims strategy, the merged input and
    option specs) is built once here, not once per example: hypothesis validates every new
    strategy object it draws from, and that had cost more than the drawing itself.
    """
    overrides = overrides or {}
    options = {name: merged_input(base, overrides.get(name)) for name, base in challenge.options().items()}
    specs = {}
    for name in entry.call:
        spec = merged_input(challenge.inputs[name], overrides.get(name))
        if fixed_shapes and name in fixed_shapes:
            spec = merged_input(spec, {"shape": list(fixed_shapes[name])})
        specs[name] = spec
    base = {name: challenge.inputs[name] for name in entry.call}
    used = _names_in(entry, [*options.values(), *specs.values()]) | _names_in(where)
    hidden = [d for d in challenge.dims if d not in used and d in _names_in(entry, [*options.values(), *base.values()])]
    return _cases(dims_strategy(challenge, fixed_dims), options, specs, list(where or []), hidden)


def _names_in(*things: Any) -> set[str]:
    """Every name an entry's constructor, input specs or relations spell (``"d_model"``, ``"high-1"``)."""
    found: set[str] = set()
    for thing in things:
        if isinstance(thing, Entry):
            found |= _names_in(thing.init, list(thing.init_kwargs.values()), list(thing.parameters.values()))
        elif isinstance(thing, InputSpec):
            found |= _names_in(thing.shape, thing.high, thing.include, thing.inject, thing.value, thing.choices)
        elif isinstance(thing, str):
            found |= set(_NAME.findall(thing))
        elif isinstance(thing, (list, tuple)):
            found |= _names_in(*thing)
    return found


@st.composite
def _cases(draw, dims_st: st.SearchStrategy, options: dict[str, InputSpec], specs: dict[str, InputSpec],
           where: list[str], hidden: list[str]) -> Case:
    dims = draw(dims_st)
    for _ in range(100 if where else 0):  # a narrow regime: redraw here rather than reject the whole example
        if holds(where, dims):
            break
        dims = draw(dims_st)
    assume(not where or holds(where, dims))
    dims.update({name: literal_or_dim(_pick(spec, draw), dims) for name, spec in options.items()})
    inputs: dict[str, Any] = {}
    notes: list[str] = []
    lead: dict = {}
    for name, spec in specs.items():
        value, more = _input(draw, spec, dims, lead)
        inputs[name] = value
        notes.extend(more)
    seed = draw(st.integers(0, 2**31 - 1))
    return Case(dims=dims, inputs=inputs, seed=seed, notes=notes, hidden=list(hidden))


def fixed_case(challenge: Challenge, entry: Entry, *, dims: dict[str, int] | None = None,
               shapes: dict[str, list[int]] | None = None, seed: int = 0,
               overrides: dict | None = None) -> Case:
    """A single deterministic case (for statistics and performance checks)."""
    dims = {**{k: (v if isinstance(v, int) else v[1]) for k, v in challenge.dims.items()}, **(dims or {})}
    dims = round_dims(challenge, dims)
    dims.update({k: v for k, v in option_values(challenge, dims, overrides).items() if k not in dims})
    specs = {name: merged_input(challenge.inputs[name], (overrides or {}).get(name)) for name in entry.call}

    def draw() -> dict[str, Any]:
        gen = torch.Generator().manual_seed(seed)
        inputs: dict[str, Any] = {}
        for name, spec in specs.items():
            shape = [int(resolve(d, dims)) for d in (shapes or {}).get(name, [])] if shapes and name in shapes \
                else [int(resolve(d, dims)) for d in spec.shape if d != "..."]
            if spec.type == "value":
                inputs[name] = literal_or_dim(_pick(spec), dims)
            elif spec.type == "mask":
                inputs[name] = make_mask(tuple(shape), spec.pattern, gen)
            elif spec.type == "token_ids":
                high = int(resolve(spec.high, dims))
                inputs[name] = torch.randint(0, high, shape, generator=gen).to(DTYPES[spec.dtype or "int64"])
            else:
                dtype = DTYPES[spec.dtype] if spec.dtype else torch.get_default_dtype()
                inputs[name] = (torch.randn(shape, generator=gen, dtype=torch.float64) * (spec.scale or 1.0)).to(dtype)
        return inputs

    # what the draw depends on: the merged input specs, the dims, the shapes asked for, the seed, the default dtype
    key = ("fixed_case", repr(sorted(specs.items())), repr(sorted(dims.items())), repr(shapes), int(seed),
           torch.get_default_dtype())
    return Case(dims=dims, inputs=remembered(key, draw), seed=seed)


# -- several calls on one instance ----------------------------------------------------------------------------

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def construction_dims(challenge: Challenge, entry: Entry) -> set[str]:
    """The dims and options a module is built with (its ``init``, ``init_kwargs`` and parameter shapes): fixed for
    the life of one instance. Every other dim (a sequence length) may change from one call to the next."""
    used: set[str] = set()
    texts = [a for a in entry.init if isinstance(a, str)]
    texts += [v for v in entry.init_kwargs.values() if isinstance(v, str)]
    texts += [d for shape in entry.parameters.values() for d in shape if isinstance(d, str)]
    for text in texts:
        used.update(_NAME.findall(text))
    return used & (set(challenge.dims) | set(challenge.options()))


@functools.lru_cache(maxsize=256)
def _ints(low: int, high: int) -> st.SearchStrategy:
    return st.integers(low, high)


def varying_dims(challenge: Challenge, entry: Entry, fixed: dict | None = None) -> list[str]:
    """The drawn dims a sequence of calls may vary: not a construction dim, not fixed, a range of two values or more."""
    built = construction_dims(challenge, entry)
    return [name for name, rng in challenge.dims.items()
            if name not in built and name not in (fixed or {}) and not isinstance(rng, int) and rng[1] > max(rng[0], 1)]


def sequence_strategy(challenge: Challenge, entry: Entry, overrides: dict | None = None,
                      fixed_dims: dict[str, int] | None = None, steps: int = 3,
                      vary: list[str] | None = None, lengths: dict[str, list[int]] | None = None
                      ) -> st.SearchStrategy[Case]:
    """A Case for the first call of a sequence on one instance; ``case.steps`` holds every call's Case (the first
    included). Construction dims and options are drawn once; each dim in ``vary`` goes up, then down: the first
    call at a middle value, the second above it, the third below it (then up and down again), so a layer that
    keeps something sized by its first call meets both a longer and a shorter one. Leading ``...`` shapes are
    drawn afresh for every call. ``lengths`` narrows a varied dim's range (``{seq_len: [3, 12]}``: every call
    past a fixed ``max_seq_len`` of 2)."""
    overrides = overrides or {}
    options = {name: merged_input(base, overrides.get(name)) for name, base in challenge.options().items()}
    specs = {name: merged_input(challenge.inputs[name], overrides.get(name)) for name in entry.call}
    vary = list(vary if vary is not None else varying_dims(challenge, entry, fixed_dims))
    ranges = {}
    for name in vary:
        rng = (lengths or {}).get(name) or challenge.dims[name]
        step = challenge.multiple_of.get(name, 1)
        low = max(rng[0], 1) if rng[1] >= 1 else rng[0]
        ranges[name] = (-(-low // step), rng[1] // step, step)
    return _sequence(dims_strategy(challenge, fixed_dims), options, specs, ranges, int(steps))


def _schedule(draw, low: int, high: int, steps: int) -> list[int]:
    a, b, c = sorted(draw(_ints(low, high)) for _ in range(3))
    mid = min(b, high - 1) if high > low else low
    top = max(c, mid + 1) if high > low else high
    cycle = [top, a]
    return [mid] + [cycle[i % 2] for i in range(steps - 1)]


@st.composite
def _sequence(draw, dims_st: st.SearchStrategy, options: dict[str, InputSpec], specs: dict[str, InputSpec],
              ranges: dict[str, tuple[int, int, int]], steps: int) -> Case:
    dims = draw(dims_st)
    dims.update({name: literal_or_dim(_pick(spec, draw), dims) for name, spec in options.items()})
    schedules = {name: [k * step for k in _schedule(draw, low, high, steps)]
                 for name, (low, high, step) in ranges.items()}
    cases = []
    for k in range(steps):
        step_dims = dict(dims, **{name: values[k] for name, values in schedules.items()})
        inputs: dict[str, Any] = {}
        notes: list[str] = []
        lead: dict = {}
        for name, spec in specs.items():
            value, more = _input(draw, spec, step_dims, lead)
            inputs[name] = value
            notes.extend(more)
        cases.append(Case(dims=step_dims, inputs=inputs, seed=draw(st.integers(0, 2**31 - 1)), notes=notes))
    first = cases[0]
    first.steps = cases
    return first


# -- inputs that are views of other storage --------------------------------------------------------------

def layout_choices(value: Any, kinds: tuple[str, ...], spec: InputSpec | None = None) -> list[tuple[str, int]]:
    """(kind, axis) views that make ``value`` truly non-contiguous: a transpose needs its last two sides >= 2, a
    slice or a broadcast an axis of 2 or more (a broadcast never along a mask's last axis: a query's keys must
    not all be equal, or a row could hold no allowed key)."""
    if not isinstance(value, torch.Tensor) or value.dim() == 0 or value.numel() == 0:
        return []
    out = []
    if "transposed" in kinds and value.dim() >= 2 and value.shape[-1] >= 2 and value.shape[-2] >= 2:
        out.append(("transposed", -1))
    for axis in range(value.dim()):
        if value.shape[axis] < 2:
            continue
        if "sliced" in kinds:
            out.append(("sliced", axis))
        last = axis == value.dim() - 1
        if "expanded" in kinds and not (last and spec is not None and spec.type == "mask"):
            out.append(("expanded", axis))
    return out


def with_layouts(strategy: st.SearchStrategy, challenge: Challenge, entry: Entry,
                 kinds: tuple[str, ...] | None = None) -> st.SearchStrategy[Case]:
    """Cases whose tensor arguments are drawn as contiguous tensors or as views (``case.layouts``: name ->
    ``{"kind", "axis"}``), at least one a view; a broadcast view's values are made equal along its axis first."""
    from validator.runner import DRAWN_LAYOUTS

    return _layouts(strategy, challenge, entry, tuple(kinds or DRAWN_LAYOUTS))


@st.composite
def _layouts(draw, strategy, challenge: Challenge, entry: Entry, kinds: tuple[str, ...]) -> Case:
    case = draw(strategy)
    layouts: dict[str, dict] = {}
    inputs = dict(case.inputs)
    options = {name: layout_choices(inputs[name], kinds, challenge.inputs.get(name)) for name in entry.call}
    for name, choices in options.items():
        if choices:
            pick = draw(_sampled(tuple([None] + choices)))
            if pick is not None:
                layouts[name] = {"kind": pick[0], "axis": pick[1]}
    if not layouts:
        assume(any(options.values()))
        name = next(n for n, c in options.items() if c)
        kind, axis = options[name][0]
        layouts[name] = {"kind": kind, "axis": axis}
    notes = list(case.notes)
    for name, layout in layouts.items():
        value = inputs[name]
        if layout["kind"] == "expanded":
            inputs[name] = value.narrow(layout["axis"], 0, 1).expand(value.shape).clone()
        notes.append(f"{name} passed as {describe_layout(layout, value.dim())}")
    out = case.but(inputs=inputs, notes=notes)
    out.layouts = layouts
    return out


def describe_layout(layout: dict, dim: int) -> str:
    kind, axis = layout["kind"], layout.get("axis", -1) % max(dim, 1)
    return {"transposed": "a transposed view (x.transpose(-2, -1) of a tensor stored the other way round)",
            "sliced": f"a strided slice (every other element of a longer tensor along axis {axis})",
            "expanded": f"a broadcast view (.expand along axis {axis}: stride 0, one copy in memory)",
            "strided": "a strided view (every other element along every axis of a larger tensor: no two axes can "
                       "be merged by .view())"}[kind]
