"""Check tests: one generic function per `test:` name, parameters validated by a model.

A test is registered with :func:`register`; its pydantic model validates the
check's extra keys when the spec is loaded. The function returns a short
success note, or raises CheckFailed / CheckErrored with a message a student can
act on. Property-style tests use :func:`for_all`, which shrinks failures and
reports the minimal case.
"""

from __future__ import annotations

import importlib
import weakref
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Callable, Iterator

from hypothesis import HealthCheck, Phase, given, seed as hyp_seed, settings as Settings
from hypothesis.errors import FlakyFailure, HypothesisException
from hypothesis.reporting import with_reporter
from hypothesis.strategies import SearchStrategy
from pydantic import BaseModel, ConfigDict, ValidationError

import validator.profiles  # noqa: F401 - fixes case generation to the seed alone (see there)
from validator.context import CheckErrored, CheckFailed, Context, NotGraded
from validator.spec.schema import Challenge, CheckSpec
from validator.worker.client import WorkerFailure


class OutcomeHint(BaseModel):
    """A hint that names the cause, given which other checks passed and failed (scale vs lookup)."""

    model_config = ConfigDict(extra="forbid")
    passed: list[str] = []
    failed: list[str] = []
    hint: str


class Params(BaseModel):
    """Base for a test's own parameters: unknown keys are spec errors.

    ``hint_if`` is common to every test: after all checks ran, a failed check gets the
    first of these hints whose ``passed``/``failed`` checks match the outcomes.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)  # one instance serves every run of its check
    hint_if: list[OutcomeHint] = []


@dataclass(frozen=True)
class Test:
    name: str
    fn: Callable[[Context, CheckSpec, Any], str | None]
    params: type[Params]
    kinds: tuple[str, ...] = ()
    uses_reference: bool = True
    # measures the reference itself (its wall time): no recorded result can stand in for it
    live_reference: bool = False
    # why this test cannot observe an entry reached through a repository's tests/adapters.py ({function}
    # is the adapter's name); None: it can (the adapter's calls are watched, see validator.adapter_runner)
    not_through_adapter: str | None = None


REGISTRY: dict[str, Test] = {}
_MODULES = ("structure", "behaviour", "gradient", "init", "constraint", "performance", "modules", "dropout", "relations",
            "sequence", "calls", "inputs", "randomness", "moves", "masking", "composite", "precision")


def register(name: str, params: type[Params] = Params, *, uses_reference: bool = True,
             live_reference: bool = False, not_through_adapter: str | None = None):
    def deco(fn):
        REGISTRY[name] = Test(name, fn, params, uses_reference=uses_reference, live_reference=live_reference,
                              not_through_adapter=not_through_adapter)
        return fn
    return deco


_loaded = False


def _load_all() -> None:
    """Import every test module once, whatever was imported directly before."""
    global _loaded
    if not _loaded:
        for mod in _MODULES:
            importlib.import_module(f"validator.checks.{mod}")
        _loaded = True


def get(name: str) -> Test:
    _load_all()
    return REGISTRY[name]


def live_only_tests() -> frozenset[str]:
    """Tests that measure the reference itself (its wall time): no stored value can stand in for it."""
    _load_all()
    return frozenset(name for name, test in REGISTRY.items() if test.live_reference)


def validate_check_params(challenge: Challenge) -> list[tuple[tuple, str]]:
    """Spec-load hook: unknown tests and bad test parameters, with their locations."""
    _load_all()
    problems: list[tuple[tuple, str]] = []
    for i, check in enumerate(challenge.checks):
        test = REGISTRY.get(check.test)
        if test is None:
            problems.append((("checks", i, "test"), f"unknown test {check.test!r}; known tests: "
                             + ", ".join(sorted(REGISTRY))))
            continue
        try:
            params = test.params.model_validate(check.params)
        except ValidationError as exc:
            for err in exc.errors():
                loc = ("checks", i) + tuple(err["loc"])
                msg = err["msg"].removeprefix("Value error, ")
                problems.append((loc, msg if err["type"] == "extra_forbidden" or not err["loc"]
                                 else f"{msg} (got {err.get('input')!r})"))
            continue
        checker = getattr(params, "check_against", None)
        if checker is not None:
            for loc, msg in checker(challenge, check):
                problems.append((("checks", i) + tuple(loc), msg))
    return problems


def params_of(check: CheckSpec) -> Params:
    """The check's parameters, validated once per spec object: a batch slot grades every submission with the
    same catalogue, and validating ~400 checks' parameters again took ~1% of a submission's grading."""
    key = id(check)
    known = _PARAMS.get(key)
    if known is not None and known[0]() is check:
        return known[1]
    params = get(check.test).params.model_validate(check.params)
    _PARAMS[key] = (weakref.ref(check, lambda _, key=key: _PARAMS.pop(key, None)), params)
    return params


# id(spec) -> (a weak reference to the spec, its parameters): forgotten with the spec
_PARAMS: dict[int, tuple[weakref.ref, Params]] = {}


class _Stop(Exception):
    """Wraps a worker failure so hypothesis replays it cheaply instead of re-running code."""


def for_all(ctx: Context, check: CheckSpec, strategy, body: Callable[[Any], None],
            max_examples: int | None = None, variant: Any = None, cases_of: str | None = None) -> int:
    """Run ``body(case)`` over generated cases; raise with the minimal failing case.

    A hang or crash stops generation at once: every later example (including
    hypothesis's shrinking replays) re-raises the first failure without calling
    the worker again, so one infinite loop costs one timeout, not hundreds.

    Cases depend on the spec, the check and its seed alone, so hypothesis draws the same ones for
    every layer that passes: once a check has passed, its cases are replayed from memory for the next
    layer graded in this process (a batch slot, a test session). A replayed case that does not simply
    pass raises :class:`ReplayMissed`, and :func:`run_check_fn` runs the whole check again without
    replays, so hypothesis finds and shrinks the failure as it always does, with the check's own
    bookkeeping fresh; where the settings do not shrink (a batch's), a failed check is reported from the
    replay as that run would report it (see :func:`_replay`). ``strategy`` may be a function that builds it: then
    it is built only if hypothesis runs (a replay needs none, and building ~240 a submission cost more than
    replaying their cases). ``variant`` tells apart the strategies one check uses (its regimes). ``cases_of`` names
    another check of the challenge whose seed to draw with: given the same strategy, the same cases (a check that
    judges the runs another check makes, see validator.checks.composite).
    """
    settings = ctx.settings
    if max_examples is not None:
        settings = Settings(settings, max_examples=min(max_examples, settings.max_examples))
    seed = ctx.check_seed(cases_of or check.id)
    key = _replay_key(ctx, check, settings, variant, seed)
    cached = _REPLAY.get(key) if key is not None else None
    if cached:
        _replay(cached, body, failure_is_final=Phase.shrink not in settings.phases)
        if _COLLECTING:
            _COLLECTING[-1][key] = cached
        return len(cached)
    state: dict[str, Any] = {"runs": 0, "last": None, "stop": None, "passed": []}

    def prop(case):
        if state["stop"] is None:
            state["last"] = case
            kept = _fresh(case) if key is not None else None  # a copy only where it may be replayed
            try:
                body(case)
            except (WorkerFailure, NotGraded) as exc:
                state["stop"] = (exc, case)
            else:
                state["runs"] += 1  # only inputs that were checked: a rejected one never gets here
                if kept is not None:
                    state["passed"].append(kept)
        if state["stop"] is not None:
            raise _Stop()  # one raise site, so hypothesis sees one consistent failure

    if not isinstance(strategy, SearchStrategy):
        strategy = strategy()
    wrapped = hyp_seed(seed)(settings(given(strategy)(prop)))
    try:
        with with_reporter(lambda *_: None):
            wrapped()
    except _Stop:
        exc, case = state["stop"]
        if isinstance(exc, NotGraded):
            raise exc from None
        raise CheckErrored(f"{exc}\n  input: {case.summary()}") from None
    except (CheckFailed, CheckErrored) as exc:
        raise _as_reported(exc, state["last"]) from None
    except FlakyFailure as exc:  # the layer's, not the grader's: one input, two verdicts
        first = _first_verdict(exc)
        if first is None:
            raise RuntimeError(f"hypothesis could not run this check: {exc}") from None
        raise _as_reported(type(first)(f"{first}\n  {NOT_DETERMINISTIC}"), state["last"]) from None
    except HypothesisException as exc:
        raise RuntimeError(f"hypothesis could not run this check: {exc}") from None
    if key is not None and state["passed"]:
        _remember(key, state["passed"])
        if _COLLECTING:
            _COLLECTING[-1][key] = state["passed"]
    return state["runs"]


NOT_DETERMINISTIC = ("run again on the same input, your layer passed: its result is not a function of its inputs "
                     "(memory from torch.empty left unfilled, a random draw, state kept from an earlier call), so "
                     "this verdict may change from run to run")


def _first_verdict(group: BaseException) -> CheckFailed | CheckErrored | None:
    """The check's own failure that hypothesis saw first, inside the group it raises when a rerun passes."""
    for exc in getattr(group, "exceptions", ()):
        if isinstance(exc, (CheckFailed, CheckErrored)):
            return exc
        found = _first_verdict(exc)
        if found is not None:
            return found
    return None


# (spec, check, seed, settings, variant) -> the cases a passing run of that check was given, in order
_REPLAY: dict[tuple, list] = {}
_REPLAY_LIMIT = 4096
_COLLECTING: list[dict] = []  # innermost last: see collecting()


class ReplayMissed(BaseException):
    """A remembered case did not simply pass (a BaseException, so no check's own handler takes it)."""


_NO_REPLAY = [0]


def run_check_fn(fn: Callable[..., Any], ctx: Context, check: CheckSpec, params: Any) -> Any:
    """``fn(ctx, check, params)``, run once more without replayed cases if a replayed case missed."""
    try:
        return fn(ctx, check, params)
    except ReplayMissed:
        pass
    ctx.figures = []
    _NO_REPLAY[0] += 1
    try:
        return fn(ctx, check, params)
    finally:
        _NO_REPLAY[0] -= 1


def _replay_key(ctx: Context, check: CheckSpec, settings, variant, seed: int) -> tuple | None:
    """What a check's cases depend on: the graded spec (prose and points aside), the check, its seed and
    settings, and the default dtype; plain strings and numbers, so that a key read from a recorded-cases
    file (validator.case_store) is the same key."""
    import os

    import torch

    from validator.spec.schema import graded_digest

    if _NO_REPLAY[0] or os.environ.get("VALIDATOR_NO_REPLAY"):
        return None
    return (graded_digest(ctx.challenge), check.id, repr(variant), seed, settings.max_examples,
            tuple(phase.name for phase in settings.phases), settings.derandomize, str(torch.get_default_dtype()))


@contextmanager
def collecting() -> Iterator[dict]:
    """Within the block, every check that passes adds its key and cases to the dict yielded (drawn or
    replayed alike): what `validator regenerate` records (validator.case_store)."""
    into: dict = {}
    _COLLECTING.append(into)
    try:
        yield into
    finally:
        _COLLECTING.remove(into)


def remembered_keys() -> set:
    return set(_REPLAY)


def remembered_since(known: set) -> dict:
    """The cases remembered since :func:`remembered_keys` returned ``known`` (a forked grader sends them home)."""
    return {k: v for k, v in _REPLAY.items() if k not in known}


def remember_cases(entries: dict) -> None:
    for key, cases in entries.items():
        _remember(key, cases)


def _remember(key: tuple, cases: list) -> None:
    if len(_REPLAY) >= _REPLAY_LIMIT:
        _REPLAY.pop(next(iter(_REPLAY)))
    _REPLAY[key] = cases


def _fresh(case):
    """A copy of ``case`` whose tensors no body can have changed in place."""
    import copy

    import torch

    out = copy.copy(case)
    out.inputs = {k: (v.clone() if isinstance(v, torch.Tensor) else v) for k, v in case.inputs.items()}
    out.notes = list(case.notes)
    steps = getattr(case, "steps", None)
    if steps:  # a sequence: its later calls' tensors are as exposed to the layer as the first call's
        out.steps = [out] + [_fresh(step) for step in steps[1:]]
    return out


def _replay(cases: list, body: Callable[[Any], None], *, failure_is_final: bool = False) -> None:
    """Run ``body`` on each remembered case; raise :class:`ReplayMissed` as soon as one does not simply
    pass. A hang or crash ends the check as it ends the hypothesis run (on the case it happened on), so a
    timeout is not waited for twice.

    ``failure_is_final`` (settings without a shrink phase, as a batch's): a case that fails the check is
    reported as the hypothesis run reports it, that case as the minimal failing input, without the run.
    Hypothesis draws the same cases in the same order whatever the layer does (derandomized, seeded) and,
    not shrinking, reports the first that fails; the run would only repeat the remembered cases up to that
    one and the failing one once more to report it, each a call of the student's code. tests/test_replay.py
    proves the verdicts and messages the same with and without replays over mutants of the library.

    Hypothesis seeds Python's and numpy's global PRNGs around each example; a replay does not (84 us a
    case, ~3% of a batch's grading): no check body draws from them (each draws from its own seeded
    generators), which tests/test_replay.py proves over the whole catalogue."""
    for case in cases:
        case = _fresh(case)
        try:
            body(case)
        except NotGraded:
            raise
        except WorkerFailure as exc:  # as the hypothesis run ends on it (a hang is not waited for twice)
            raise CheckErrored(f"{exc}\n  input: {case.summary()}") from None
        except (CheckFailed, CheckErrored) as exc:
            if not failure_is_final:
                raise ReplayMissed() from None  # hypothesis shrinks it: the run reports a smaller case
            raise _as_reported(exc, case) from None
        except Exception:  # noqa: BLE001 - a failure is reported by the full hypothesis run, never from here
            raise ReplayMissed() from None


def _as_reported(exc: Exception, case: Any) -> Exception:
    """A check's failure as :func:`for_all` reports it: the exception's own words, then the failing case."""
    again = type(exc)(f"{exc}\n  minimal failing input: {case.summary()}")
    if hasattr(exc, "review"):
        again.review = exc.review  # a finding that marks the submission for review keeps its reasons
    return again


def default_settings(profile: str) -> Settings:
    from validator.profiles import get_settings
    return get_settings(profile)


__all__ = ["register", "get", "for_all", "run_check_fn", "ReplayMissed", "Params", "REGISTRY", "validate_check_params",
           "params_of", "CheckFailed", "CheckErrored", "HealthCheck"]
