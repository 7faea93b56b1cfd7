"""The shape of a challenge spec, validated with pydantic.

Each check's own parameters are validated by the model its test registers in
``validator.checks`` (see ``CheckSpec.params``), so a typo in a threshold is a
load-time error with a line number, not a surprise at grading time.
"""

from __future__ import annotations

import math
import re
from typing import Any, Literal, Optional, Union

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from validator.results import KINDS

Dim = Union[int, str]
_EXPR = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_]*)?\s*([+-]\s*\d+)?\s*$")


def resolve(expr: Dim | float, names: dict[str, Any]) -> Any:
    """Evaluate ``3``, ``"num_embeddings"`` or ``"high-1"`` against known names."""
    if isinstance(expr, (int, float)) and not isinstance(expr, bool):
        return expr
    match = _EXPR.match(str(expr))
    if not match or not match.group(1):
        raise ValueError(f"cannot evaluate {expr!r}: use a number, a name, or name+/-integer")
    name, offset = match.group(1), match.group(2)
    if name not in names:
        raise ValueError(f"unknown name {name!r} in {expr!r} (known: {', '.join(sorted(names))})")
    value = names[name]
    return value + int(offset.replace(" ", "")) if offset else value


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class AdapterArg(Strict):
    """Where one argument of an adapter function comes from (see :class:`Adapter`).

    Exactly one of: ``init`` (a name of the entry's ``init`` list, the value the contract's constructor
    gets there), ``option`` (a key of its ``init_kwargs``), ``param`` (a contract parameter's test
    weights), ``parameters: true`` (all of them, as a dict keyed by the contract's names), ``input``
    (a call input), ``value`` (a literal). ``batch_dims`` (inputs only) flattens the input's leading
    dimensions into exactly that many before the call (and the output's back), for an adapter whose
    documented shape is ``(batch, ...)`` rather than ``(..., )``.
    """

    init: Optional[str] = None
    option: Optional[str] = None
    param: Optional[str] = None
    parameters: bool = False
    input: Optional[str] = None
    value: Any = None
    batch_dims: Optional[int] = Field(None, ge=1, le=1)

    @model_validator(mode="after")
    def _one_source(self):
        given = [k for k in ("init", "option", "param", "input") if getattr(self, k) is not None]
        given += ["parameters"] if self.parameters else []
        given += ["value"] if "value" in self.model_fields_set else []
        if len(given) != 1:
            raise ValueError("an adapter argument names exactly one of init, option, param, parameters, input, "
                             f"value; got {', '.join(given) or 'none'}")
        if self.batch_dims is not None and self.input is None:
            raise ValueError("`batch_dims` is for `input` arguments")
        return self

    @property
    def source(self) -> tuple[str, Any]:
        for key in ("init", "option", "param", "input"):
            if getattr(self, key) is not None:
                return key, getattr(self, key)
        return ("parameters", True) if self.parameters else ("value", self.value)


class Adapter(Strict):
    """A function of the student's ``tests/adapters.py`` (CS336's layout) that reaches this entry.

    The course's adapters build the student's own module, load the given weights and call it, so the
    grader can grade code it cannot construct itself (fused projections, sublayers passed in, other
    names and signatures). ``args`` maps each of the function's arguments to its source; ``when``
    picks the adapter by the call's options (``{theta: null}``: only calls built with ``theta=None``).
    """

    function: str = Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    args: dict[str, AdapterArg]
    when: dict[str, Any] = Field(default_factory=dict)


class Entry(Strict):
    """How the grader calls one public name of layers.py."""

    kind: Literal["module", "function", "autograd_function"]
    init: list[Union[Dim, float]] = Field(default_factory=list)
    init_kwargs: dict[str, Any] = Field(default_factory=dict)
    accepts: list[str] = Field(default_factory=list)
    call: list[str]
    parameters: dict[str, list[Dim]] = Field(default_factory=dict)
    # Functions of a student's tests/adapters.py that reach this entry, in the order they are tried.
    adapters: list[Adapter] = Field(default_factory=list)


class InputSpec(Strict):
    """How to generate one call argument, or one construction option.

    An input of ``type: value`` that an entry names in ``init``/``init_kwargs``
    rather than in ``call`` is an *option*: a constructor setting (a dropout
    rate, ``positional="sinusoidal"``) that checks override with
    ``inputs: {name: {value: ...}}``. ``choices`` lets hypothesis draw it.
    """

    type: Literal["token_ids", "float", "value", "mask"]
    shape: list[Dim] = Field(default_factory=lambda: ["..."])
    high: Optional[Dim] = None
    dtype: Optional[str] = None
    requires_grad: bool = False
    include: list[Dim] = Field(default_factory=list)
    inject: Optional[Union[Dim, list[Dim]]] = None  # one invalid value, or several at distinct positions
    repeats: bool = False
    value: Any = None
    choices: list[Any] = Field(default_factory=list)
    max_leading_dims: int = Field(3, ge=0, le=6)
    max_side: int = Field(4, ge=0, le=64)
    # the fewest leading dims `...` stands for, and the smallest side each has (input_views asks for 2 and 2:
    # a view can only be told from a contiguous tensor where there are axes to merge)
    min_leading_dims: int = Field(0, ge=0, le=6)
    min_side: int = Field(1, ge=1, le=64)
    # type mask: a boolean (..., queries, keys) tensor, True = may attend. "causal" is the lower
    # triangle; "random" keeps each element with probability 1/2 and at least one key per query.
    pattern: Optional[Literal["causal", "random"]] = None
    # float inputs: standard normal values times `scale` (1e-3 for tiny activations, 1e4 for huge ones)
    scale: Optional[float] = Field(None, gt=0)

    @model_validator(mode="after")
    def _consistent(self):
        if self.scale is not None and self.type != "float":
            raise ValueError("`scale` is for inputs of type float")
        if self.pattern is not None and self.type != "mask":
            raise ValueError("`pattern` is for inputs of type mask")
        if self.type == "mask" and self.pattern is None:
            raise ValueError("a mask input needs `pattern: causal` or `pattern: random`")
        if self.type == "token_ids" and self.high is None:
            raise ValueError("token_ids inputs need `high` (the vocabulary size)")
        if self.dtype is not None and self.dtype not in (
                "int64", "int32", "float32", "float64", "float16", "bfloat16"):
            raise ValueError(f"unsupported dtype {self.dtype!r}")
        if self.shape.count("...") > 1:
            raise ValueError("`...` may appear at most once in a shape")
        if self.min_leading_dims > self.max_leading_dims:
            raise ValueError(f"min_leading_dims ({self.min_leading_dims}) is above max_leading_dims "
                             f"({self.max_leading_dims})")
        if self.min_side > max(self.max_side, 1):
            raise ValueError(f"min_side ({self.min_side}) is above max_side ({self.max_side})")
        if self.choices and self.type != "value":
            raise ValueError("`choices` is for inputs of type value")
        if isinstance(self.inject, list) and not self.inject:
            raise ValueError("`inject` takes a value or a non-empty list of values")
        return self

    @property
    def injected(self) -> list[Dim]:
        """The invalid values to place, each at its own drawn position."""
        if self.inject is None:
            return []
        return list(self.inject) if isinstance(self.inject, list) else [self.inject]


class ToleranceSpec(Strict):
    """``|got - expected| <= atol + atol_per_step * k + rtol * |expected|``.

    ``k`` is the element's index along ``axis`` (0 when ``atol_per_step`` is 0):
    for formulas whose rounding error grows with an index, such as a float32
    ``sin(position * frequency)`` whose argument error grows with the position.
    """

    atol: float = Field(ge=0)
    rtol: float = Field(ge=0)
    atol_per_step: float = Field(0.0, ge=0)
    axis: int = -1


Tolerance = Union[Literal["exact", "default"], dict[str, ToleranceSpec]]


class CheckSpec(BaseModel):
    """One graded check. Keys beyond the common ones are the test's parameters."""

    model_config = ConfigDict(extra="allow")

    id: str = Field(pattern=r"^[a-z][a-z0-9_]*$")
    kind: str
    test: str
    points: float = Field(0, ge=0)
    title: str = ""
    hint: str = ""
    advisory: bool = False
    entry: Optional[str] = None
    timeout: float = Field(30.0, gt=0)
    requires: list[str] = Field(default_factory=list)
    # why the check is not graded when the layer is called through a course's adapter whose interface
    # leaves this behaviour open (e.g. CS336's optional token_positions): reported as skipped, worth 0
    not_through_adapter: str = ""

    @field_validator("kind")
    @classmethod
    def _kind(cls, v: str) -> str:
        if v not in KINDS or v == "question":
            raise ValueError(f"kind must be one of {', '.join(k for k in KINDS if k != 'question')}; got {v!r}")
        return v

    @model_validator(mode="after")
    def _advisory_points(self):
        if self.advisory and self.points:
            raise ValueError("an advisory check is worth 0 points")
        return self

    @property
    def params(self) -> dict[str, Any]:
        return dict(self.model_extra or {})


PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)(?::([^{}]*))?\}")  # {name} or {name:format}


class Question(Strict):
    id: str = Field(pattern=r"^[a-z][a-z0-9_]*$")
    type: Literal["choice", "numeric"]
    prompt: str
    choices: dict[str, str] = Field(default_factory=dict)
    tolerance: dict[Literal["abs", "rel"], float] = Field(default_factory=dict)
    unit: Optional[str] = None
    points: float = Field(1, ge=0)
    # Per-student numbers: each `{name}` of the prompt takes one of these values, drawn from the student's
    # id (validator.questions.draw); the key's answer is then a formula of the names.
    params: dict[str, list[Union[int, float]]] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _by_type(self):
        if self.type == "choice" and len(self.choices) < 2:
            raise ValueError("a choice question needs at least two `choices`")
        if self.type == "numeric" and self.choices:
            raise ValueError("a numeric question has no `choices`")
        if any(v < 0 for v in self.tolerance.values()):
            raise ValueError("tolerances must be >= 0")
        if self.params:
            if self.type != "numeric":
                raise ValueError("only a numeric question takes `params` (its numbers, drawn per student)")
            for name, values in self.params.items():
                if not re.fullmatch(r"[a-z_][a-z0-9_]*", name) or name == "answer":
                    raise ValueError(f"param name {name!r}: use lower_case letters, digits and _ (not `answer`)")
                if not values or any(isinstance(v, bool) or not math.isfinite(v) for v in values):
                    raise ValueError(f"param {name!r} needs a list of finite numbers, got {values!r}")
            used = {m.group(1) for m in PLACEHOLDER.finditer(self.prompt)}
            if used - set(self.params):
                raise ValueError(f"the prompt names {', '.join(sorted(used - set(self.params)))}, which `params` "
                                 f"does not define (it defines {', '.join(self.params)})")
            if set(self.params) - used:
                raise ValueError(f"param {', '.join(sorted(set(self.params) - used))} never appears in the prompt "
                                 "as {name}: a student could not see that number")
        return self


class Integrity(Strict):
    """The grader-side integrity scan (validator/integrity.py); ``allow`` lists constructs this challenge needs."""

    allow: list[str] = Field(default_factory=list)

    @field_validator("allow")
    @classmethod
    def _known(cls, v: list[str]) -> list[str]:
        from validator.integrity import CONSTRUCTS

        unknown = [c for c in v if c not in CONSTRUCTS]
        if unknown:
            raise ValueError(f"unknown construct {', '.join(map(repr, unknown))} under integrity.allow; "
                             f"known: {', '.join(CONSTRUCTS)}")
        return v


class Allowed(Strict):
    """What a solution may use, as changes to the catalogue's default allowlist
    (``DEFAULT_ALLOWED`` in validator/integrity.py; the challenge page lists the result): ``add`` modules or names
    it may also use (``scipy.special``, ``torch.func.*``, ``torch.compile``), ``remove`` default entries it may not
    (``numpy``), or names under them (``torch.nn.functional.dropout``)."""

    add: list[str] = Field(default_factory=list)
    remove: list[str] = Field(default_factory=list)

    @field_validator("add", "remove")
    @classmethod
    def _entries(cls, v: list[str]) -> list[str]:
        from validator.integrity import ENTRY_PATTERN

        bad = [e for e in v if not ENTRY_PATTERN.match(e)]
        if bad:
            raise ValueError(f"allowlist entries are a module (`numpy`), a module and its submodules (`torch.nn.*`) "
                             f"or a name (`os.environ`), got {bad}")
        return v

    @model_validator(mode="after")
    def _changes(self) -> Allowed:
        from validator.integrity import DEFAULT_ALLOWED, DEFAULT_EXCLUDED

        both = sorted(set(self.add) & set(self.remove))
        if both:
            raise ValueError(f"{', '.join(both)} both added to and removed from the allowlist")
        idle = [e for e in self.remove if e not in DEFAULT_ALLOWED + DEFAULT_EXCLUDED
                and not any(e == d.removesuffix(".*") or e.startswith(d.removesuffix(".*") + ".")
                            for d in DEFAULT_ALLOWED)]
        if idle:
            raise ValueError(f"allowed.remove: {', '.join(idle)} is not allowed by default, so removing it does "
                             "nothing (default entries: see DEFAULT_ALLOWED in validator/integrity.py)")
        return self


_OP_PATTERN = re.compile(r"^aten\.[A-Za-z0-9_*?\[\]]+$")
_API_PATTERN = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z0-9_*?\[\]]+)+$")


class Forbidden(Strict):
    """Forbidden APIs in the source (dotted names) and aten ops at run time, forward and backward.

    An entry may be a glob that forbids a whole family, current kernels and future ones:
    ``aten.*embedding*`` covers ``aten.embedding``, ``aten._embedding_bag_forward_only``,
    ``aten._embedding_bag_dense_backward``, ``aten.embedding_renorm_``, ...
    """

    source: list[str] = Field(default_factory=list)
    runtime: list[str] = Field(default_factory=list)
    integrity: Integrity = Field(default_factory=Integrity)
    # a composite forbids what its parts forbid: the ids of the challenges whose layers it is built from
    # (`swiglu` is built from `linear`); the loader reads each part's `runtime` list, its parts' too, into
    # `parts_runtime` (part id -> ops), which the `parts_forbidden_runtime` test bans while the composite runs
    parts: list[str] = Field(default_factory=list)
    parts_runtime: dict[str, list[str]] = Field(default_factory=dict)
    allowed: Allowed = Field(default_factory=Allowed)

    def allowlist(self):
        """The :class:`validator.integrity.Allowlist` this challenge's source checks judge by."""
        from validator.integrity import Allowlist

        return Allowlist.changed(tuple(self.allowed.add), tuple(self.allowed.remove))

    @field_validator("runtime")
    @classmethod
    def _ops(cls, v: list[str]) -> list[str]:
        bad = [op for op in v if not _OP_PATTERN.match(op)]
        if bad:
            raise ValueError(f"runtime entries are aten op names or globs like 'aten.*embedding*', got {bad}")
        return v

    @field_validator("source")
    @classmethod
    def _apis(cls, v: list[str]) -> list[str]:
        bad = [api for api in v if not _API_PATTERN.match(api)]
        if bad:
            raise ValueError(f"source entries are dotted names or globs like 'torch.ops.aten.*embedding*', got {bad}")
        return v


class EquivalentMutant(Strict):
    """A mutant of the reference that `validator strength` reports as surviving, which the instructor
    has judged unable to change behaviour under the contract; ``reason`` says why.

    ``wherever_included``: the mutated code behaves like the reference whatever calls it (a ``.view`` of a
    tensor the function itself just made contiguous), so the mark also holds in every challenge whose entries
    reach that function (the composites built on it). A mark whose reason depends on this challenge's own
    contract or inputs leaves it false, and each composite judges the mutant for itself."""

    mutant: str = Field(min_length=1)
    reason: str
    wherever_included: bool = False

    @field_validator("reason")
    @classmethod
    def _reason(cls, v: str) -> str:
        if len(v.strip()) < 10:
            raise ValueError("say why the mutant cannot change behaviour (a reason of at least 10 characters)")
        return v


class Strength(Strict):
    """Instructor's notes for `validator strength`: survivors that are equivalent to the reference."""

    equivalent: list[EquivalentMutant] = Field(default_factory=list)

    @field_validator("equivalent")
    @classmethod
    def _unique(cls, v: list[EquivalentMutant]) -> list[EquivalentMutant]:
        ids = [m.mutant for m in v]
        dupes = sorted({i for i in ids if ids.count(i) > 1})
        if dupes:
            raise ValueError(f"mutant {', '.join(dupes)} is marked equivalent more than once")
        return v


class Challenge(Strict):
    id: str = Field(pattern=r"^[a-z][a-z0-9_]*$")
    title: str
    summary: str = ""
    contract: str = ""
    background: str = ""
    hints: list[str] = Field(default_factory=list)
    extends: Optional[str] = None
    entries: dict[str, Entry]
    dims: dict[str, Union[list[int], int]] = Field(default_factory=dict)
    multiple_of: dict[str, int] = Field(default_factory=dict)
    inputs: dict[str, InputSpec] = Field(default_factory=dict)
    forbidden: Forbidden = Field(default_factory=Forbidden)
    tolerance: Tolerance = "default"
    checks: list[CheckSpec]
    questions: list[Question] = Field(default_factory=list)
    strength: Strength = Field(default_factory=Strength)

    @field_validator("dims")
    @classmethod
    def _dims(cls, v: dict) -> dict:
        for name, rng in v.items():
            if isinstance(rng, list) and (len(rng) != 2 or rng[0] > rng[1] or rng[0] < 0):
                raise ValueError(f"dim {name!r} must be [low, high] with 0 <= low <= high, got {rng}")
        return v

    @model_validator(mode="after")
    def _multiples(self):
        for name, step in self.multiple_of.items():
            if name not in self.dims:
                raise ValueError(f"multiple_of names {name!r}, which is not under `dims`")
            if step < 1:
                raise ValueError(f"multiple_of[{name!r}] must be >= 1, got {step}")
            rng = self.dims[name]
            lo, hi = (rng, rng) if isinstance(rng, int) else rng
            if -(-lo // step) * step > hi:
                raise ValueError(f"dim {name!r} has no multiple of {step} in [{lo}, {hi}]")
        return self

    @model_validator(mode="after")
    def _references(self):
        if not self.entries:
            raise ValueError("`entries` must name at least one entry")
        options = set(self.options())
        for name, entry in self.entries.items():
            for arg in entry.call:
                if arg not in self.inputs:
                    raise ValueError(f"entry {name!r} calls with {arg!r}, which is not under `inputs`")
            named = [a for a in entry.init if isinstance(a, str)]
            named += [v for v in entry.init_kwargs.values() if isinstance(v, str)]
            for expr in named:
                match = _EXPR.match(expr)
                ref = match.group(1) if match else None
                if ref is None or (ref not in self.dims and ref not in options):
                    raise ValueError(
                        f"entry {name!r} is built with {expr!r}: a string there must name a dim "
                        f"(under `dims`) or an option (an input of type value under `inputs`); "
                        f"known: {', '.join(sorted(set(self.dims) | options)) or 'none'}")
            self._check_adapters(name, entry, options)
        seen = set()
        for check in self.checks:
            if check.id in seen:
                raise ValueError(f"duplicate check id {check.id!r}")
            seen.add(check.id)
            if check.entry is not None and check.entry not in self.entries:
                raise ValueError(f"check {check.id!r} names entry {check.entry!r}, not under `entries`")
            for req in check.requires:
                if req not in seen or req == check.id:
                    raise ValueError(f"check {check.id!r} requires {req!r}, which must be an earlier check")
        qids = [q.id for q in self.questions]
        if len(qids) != len(set(qids)):
            raise ValueError("question ids must be unique")
        return self

    def _check_adapters(self, name: str, entry: "Entry", options: set[str]) -> None:
        known = {"init": [a for a in entry.init if isinstance(a, str)], "option": list(entry.init_kwargs),
                 "param": list(entry.parameters), "input": list(entry.call)}
        for adapter in entry.adapters:
            for arg, src in adapter.args.items():
                kind, ref = src.source
                if kind in known and ref not in known[kind]:
                    raise ValueError(f"entry {name!r}, adapter {adapter.function}: argument {arg!r} takes {kind} "
                                     f"{ref!r}, which the entry does not have; its {kind}s: "
                                     f"{', '.join(map(str, known[kind])) or 'none'}")
                if kind == "parameters" and not entry.parameters:
                    raise ValueError(f"entry {name!r}, adapter {adapter.function}: argument {arg!r} takes the "
                                     "parameters, and the entry has none")
            for option in adapter.when:
                if option not in options:
                    raise ValueError(f"entry {name!r}, adapter {adapter.function}: `when` names {option!r}, "
                                     f"which is not an option; options: {', '.join(sorted(options)) or 'none'}")

    def options(self) -> dict[str, InputSpec]:
        """Inputs of type value that no entry calls with: construction options."""
        called = {arg for entry in self.entries.values() for arg in entry.call}
        return {name: spec for name, spec in self.inputs.items()
                if spec.type == "value" and name not in called}

    def entry_for(self, check: CheckSpec) -> tuple[str, Entry]:
        name = check.entry or next(iter(self.entries))
        return name, self.entries[name]


# What only people read: titles, prose, points, questions. A change there changes no case drawn and no
# reference result, so neither frozen fixtures nor recorded cases go stale for it.
DOC_ONLY = ("title", "summary", "contract", "background", "hints", "questions", "strength")
CHECK_DOC_ONLY = ("title", "hint", "points", "advisory")


_GRADED_DIGESTS: dict[int, tuple[Challenge, str]] = {}


def graded_digest(challenge: Challenge) -> str:
    """A short digest of :func:`graded_part`: what a check's cases and calls depend on (prose and points aside),
    remembered per spec object (a spec is plain data that nothing changes once loaded)."""
    import hashlib
    import json

    known = _GRADED_DIGESTS.get(id(challenge))
    if known is None or known[0] is not challenge:
        graded = json.dumps(graded_part(challenge), sort_keys=True, default=str)
        known = (challenge, hashlib.sha256(graded.encode()).hexdigest()[:24])
        if len(_GRADED_DIGESTS) > 256:
            _GRADED_DIGESTS.clear()
        _GRADED_DIGESTS[id(challenge)] = known
    return known[1]


def graded_part(challenge: Challenge) -> dict:
    """The spec as plain JSON data, less what only people read (:data:`DOC_ONLY`, :data:`CHECK_DOC_ONLY`)."""
    spec = challenge.model_dump(mode="json")
    for key in DOC_ONLY:
        spec.pop(key, None)
    for check in spec.get("checks", []):
        for key in CHECK_DOC_ONLY:
            check.pop(key, None)
    return spec
