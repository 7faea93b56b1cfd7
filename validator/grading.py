"""Grade one challenge: probe the student's entries, run every check, grade the questions.

One failing check never stops the others: each check is isolated, a crashed
worker is restarted, and a parameter with the wrong name is matched by shape
so that value and gradient checks still run.
"""

from __future__ import annotations

import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from validator import checks
from validator.checks.common import (match_parameters, naming_advice, probe_case, probe_dims,
                                     tied_parameters, unlocated_weights, unmatched_parameters)
from validator.context import (CheckErrored, CheckFailed, CheckSkipped, Context, GraderFailure, NotGraded,
                               ReferenceUnavailable, format_exception)
from validator.questions import grade_question
from validator.reference_side import ReferenceSide
from validator.rehearsal import Rehearsal
from validator.results import ChallengeResult, CheckResult
from validator.spec.schema import Challenge, CheckSpec
from validator.worker.client import Worker, WorkerFailure


VALUE_KINDS = ("values", "gradient")  # checks whose failure says the layer computes wrong values (see evidence.py)


def reproduce_command(challenge: str, check: str, seed: int, student: str | None, device: str | None = None,
                      profile: str | None = None, map_arg: str | None = None, needs_reference: bool = False) -> str:
    """A command that replays one check: same student file (or package and map), seed, profile and device.

    ``needs_reference``: the check measures the reference itself (its speed), which a handout defers;
    the line says so, as a shell comment, so that it still runs where it is pasted."""
    from shlex import quote

    cmd = f"validator submit-build --challenge {challenge} --check {check} --seed {seed}"
    return (cmd + (f" --student {quote(str(student))}" if student else "")
            + (f" --map {quote(str(map_arg))}" if map_arg else "")
            + (f" --profile {quote(profile)}" if profile else "") + (f" --device {quote(device)}" if device else "")
            + ("  # replays where the reference implementation is: a handout defers this check" if needs_reference
               else ""))


def _import_error(info: dict) -> str:
    """What an import raised, as the tail of a sentence that has already said what could not be imported."""
    said = format_exception({"stage": "import", "exception": info}, "").replace("import raised", "")
    return said.replace(": :", ":").lstrip(": ").strip()


def _package_problem(ctx: Context) -> str | None:
    """Why an entry of this challenge cannot be reached in the student's package (not mapped, not importable)."""
    unmapped = ctx.package.unmapped.get(ctx.challenge.id, {})
    if unmapped:
        return "; ".join(unmapped.values()) + ": every check of this challenge needs it"
    errors = ctx.worker.load().get("entry_errors") or {}
    for name in ctx.challenge.entries:
        info = errors.get(f"{ctx.challenge.id}.{name}")
        if info:
            target = ctx.target(name)
            return f"{target.label} ({ctx.challenge.id}.{name}, in {target.file}) could not be loaded: " + _import_error(info)
    return None


def _probe(ctx: Context) -> str | None:
    """Describe the entries and match parameters; return a problem that stops the challenge, if any."""
    names = list(ctx.challenge.entries)
    if ctx.package is not None:
        problem = _package_problem(ctx)
        if problem:
            return problem
    asked = [f"{ctx.challenge.id}.{n}" for n in names] if ctx.package is not None else names
    reply = ctx.worker.request({"op": "describe", "names": asked}, 30,
                               "inspecting your package" if ctx.package is not None else "inspecting layers.py")
    described = reply.get("entries", {})
    ctx.entries = {n: described.get(a, {}) for n, a in zip(names, asked)}
    missing = [n for n in names if not ctx.entries.get(n, {}).get("exists")]
    if missing:
        where = "your package" if ctx.package is not None else "layers.py"
        return f"{where} defines no {', '.join(ctx.label(n) for n in missing)}: every check of this challenge needs it"
    for name, entry in ctx.challenge.entries.items():
        if entry.kind != "module" or not entry.parameters:
            continue
        case = probe_case(ctx, entry)
        result = ctx.student(ctx.build_call(name, case, want=["structure", "construct_only"]), 30,
                             "constructing your module")
        if not result.get("ok"):
            ctx.param_maps[name] = None
            continue
        expected = ctx.expected_parameters(entry, probe_dims(ctx))
        found = result["structure"]["parameters"]
        explicit = ctx.explicit_parameters(name)
        # through an adapter, a weight is known by where its values were found (validator.adapter_runner.locate),
        # never by a shape: the adapter takes the contract's weights by the contract's names whatever the layer
        # calls them, and a parameter that holds them transformed (an offset from 1) or not at all is not one
        adapted = ctx.adapted(name)
        mapping, _ = match_parameters(expected, found, explicit, by_shape=not adapted)
        ctx.param_maps[name] = mapping
        if mapping is None:
            if adapted and set(expected) - {p["name"] for p in found}:
                ctx.unreadable.add(name)
            ctx.param_problems[name] = (unlocated_weights(expected, found, ctx.target(name))
                                        if name in ctx.unreadable else
                                        unmatched_parameters(expected, found, explicit, naming_advice(ctx, name)))
            if ctx.target(name) is not None and tied_parameters(expected, found, explicit):
                # in a package, loading test weights by the contract's names would silently skip them; the
                # mapping's parameters table is the remedy (layers.py keeps its behaviour: rename them)
                ctx.ambiguous.add(name)
    return None


def _not_through_adapter(ctx: Context, check: CheckSpec) -> str | None:
    """Why a check cannot be made through the package's tests/adapters.py (its spec says so), or None."""
    why_not = check.not_through_adapter or checks.get(check.test).not_through_adapter
    entry_name = ctx.challenge.entry_for(check)[0]
    if why_not and ctx.adapted(entry_name):
        return why_not.format(function=ctx.target(entry_name).attr)
    return None


def run_check(ctx: Context, check: CheckSpec, student_arg: str | None) -> CheckResult:
    test = checks.get(check.test)
    params = checks.params_of(check)
    started = time.perf_counter()
    base = dict(id=check.id, kind=check.kind, max_score=check.points, title=check.title)
    status, message = "passed", ""
    review: list[str] = []
    machinery = False
    deferred = ctx.ref.before_check(test)
    if deferred:
        ctx.ref.after_check("skipped", deferred)
        return CheckResult(status="skipped", score=0.0, message=deferred, **base)
    ctx.worker.current_check = f"{ctx.challenge.id}/{check.id}"  # named if a call times out (worker.request)
    ctx.figures = []
    try:
        why_not = _not_through_adapter(ctx, check)
        if why_not:
            raise NotGraded(why_not)
        note = checks.run_check_fn(test.fn, ctx, check, params)
        message = note or ""
    except NotGraded as exc:
        ctx.worker.current_check = None
        ctx.ref.after_check("skipped", str(exc))
        return CheckResult(status="skipped", score=0.0, message=f"not graded through {_adapters_file()}: {exc}",
                           duration_s=round(time.perf_counter() - started, 3), **dict(base, max_score=0.0))
    except (ReferenceUnavailable, CheckSkipped) as exc:
        status, message = "skipped", str(exc)
    except GraderFailure as exc:
        status, message = "error", str(exc)
        machinery = True
    except CheckFailed as exc:
        status, message = "failed", str(exc)
        review = list(getattr(exc, "review", None) or [])  # evidence of evasion: a person should look
    except CheckErrored as exc:
        status, message = "error", str(exc)
    except WorkerFailure as exc:
        status, message = "error", str(exc)
    except Exception as exc:  # noqa: BLE001 - a grader bug must not hide the other checks
        status = "error"
        message = (f"internal grader error ({type(exc).__name__}: {exc}); this is not your fault, please "
                   f"report it with the seed.\n{traceback.format_exc(limit=3)}")
    finally:
        ctx.worker.current_check = None
    status, message = ctx.ref.after_check(status, message)
    figures, ctx.figures = ctx.figures, []
    if status == "skipped":
        return CheckResult(status=status, score=0.0, message=message, figures=figures,
                           duration_s=round(time.perf_counter() - started, 3), **base)
    if check.advisory:
        status = "passed" if status == "passed" else "advisory"
    if check.hint and not machinery and status in ("failed", "advisory", "error") and check.hint not in message:
        message += f"\n  hint: {check.hint}"
    score = check.points if status == "passed" else 0.0
    return CheckResult(status=status, score=score, message=message, review=review, figures=figures,
                       reproduce=None if status == "passed" else
                       reproduce_command(ctx.challenge.id, check.id, ctx.seed, student_arg, ctx.device, ctx.profile,
                                         ctx.package.map_arg if ctx.package is not None else None,
                                         needs_reference=test.live_reference),
                       duration_s=round(time.perf_counter() - started, 3), **base)


def _adapters_file() -> str:
    from validator.adapters import ADAPTERS_FILE

    return ADAPTERS_FILE


def _outcome_hints(selected: list[CheckSpec], done: dict[str, CheckResult]) -> None:
    """Add to each failed check the cause its spec names for this pattern of passed and failed checks."""
    for check in selected:
        cr = done.get(check.id)
        if cr is None or cr.status not in ("failed", "error", "advisory"):
            continue
        for rule in checks.params_of(check).hint_if:
            known = all(r in done for r in rule.passed + rule.failed)
            if known and all(done[r].status == "passed" for r in rule.passed) and \
                    all(done[r].status in ("failed", "error") for r in rule.failed):
                cr.message += f"\n  cause: {rule.hint}"
                break


@dataclass(frozen=True)
class Run:
    """What every challenge of one run shares, said once (:func:`validator.api.grade` builds it).

    ``settings`` are the hypothesis settings of ``profile``; ``only_checks`` narrows each challenge to
    those check ids; ``package`` (a validator.package.StudentPackage) grades a student's own package
    through its mapping; ``fail_fast`` stops a challenge at the first check that loses points (the rest
    are skipped, questions are not graded: enough to know that a mutant is caught, `validator
    strength`); ``student_id`` draws the numbers of questions asked per student (validator.questions.draw).
    """

    student_file: Path
    seed: int
    settings: Any
    profile: str | None = None
    only_checks: frozenset[str] | None = None
    student_arg: str | None = None
    timeout: float | None = None
    device: str | None = None
    package: Any = None
    fail_fast: bool = False
    student_id: str | None = None


def grade_challenge(challenge: Challenge, *, run: Run, worker: Worker, ref: ReferenceSide, answers: dict[str, Any],
                    key: dict[str, Any] | None, on_check: Callable[[CheckResult], None] | None = None
                    ) -> ChallengeResult:
    """Grade one challenge of ``run``; ``ref`` answers for the reference (live, recording or frozen)."""
    result = ChallengeResult(id=challenge.id, title=challenge.title)
    package, only_checks = run.package, run.only_checks
    ctx = Context(challenge=challenge, ref=ref, worker=worker, student_file=run.student_file, seed=run.seed,
                  settings=run.settings, timeout_cap=run.timeout, device=run.device, profile=run.profile,
                  package=package)
    if package is not None:
        result.implementations = {name: f"{t.label} ({t.file})" for name in challenge.entries
                                  if (t := ctx.target(name)) is not None}
    load = worker.load()
    problem = None
    what = "your package" if package is not None else "layers.py"
    if not load.get("ok"):
        info = load.get("exception") or {}
        if info.get("type") == "TimeoutError":
            problem = f"importing {what} did not finish in time: {info.get('message', '')}"
        elif info.get("type") == "WorkerCrashed":
            problem = f"the process importing {what} died: {info.get('message', '')}"
        else:
            problem = f"{what} could not be imported: " + _import_error(info)
    else:
        try:
            problem = _probe(ctx)
        except WorkerFailure as exc:
            problem = f"inspecting {what} failed: {exc}"
    selected = [c for c in challenge.checks if not only_checks or c.id in only_checks]
    ctx.rehearsal = None if problem else Rehearsal.begin(ctx)
    done: dict[str, CheckResult] = {}
    stopped_at: str | None = None
    for check in selected:
        if stopped_at is not None:
            cr = CheckResult(id=check.id, kind=check.kind, status="skipped", score=0.0, max_score=check.points,
                             title=check.title, message=f"not run: fail-fast stopped at {stopped_at}")
            done[check.id] = cr
            result.checks.append(cr)
            continue
        # a requirement that was not graded at all (worth 0 here: it cannot run through an adapter) gates nothing
        unmet = [r for r in check.requires if r in done and done[r].status != "passed"
                 and not (done[r].status == "skipped" and done[r].max_score == 0)]
        why_not = _not_through_adapter(ctx, check) if problem and ctx.package is not None else None
        if why_not:  # worth 0 whether the package imports or not: a failed import does not raise the total
            cr = CheckResult(id=check.id, kind=check.kind, status="skipped", score=0.0, max_score=0.0,
                             title=check.title, message=f"not graded through {_adapters_file()}: {why_not}")
        elif problem:
            cr = CheckResult(id=check.id, kind=check.kind, status="error", score=0.0, max_score=check.points,
                             title=check.title, message="not run: see the problem above")
        elif unmet:
            cr = CheckResult(id=check.id, kind=check.kind, status="skipped", score=0.0, max_score=check.points,
                             title=check.title, message=f"not graded until {', '.join(unmet)} passes: "
                             "this check only means something for a working implementation")
        else:
            if ctx.rehearsal is not None:
                ctx.rehearsal.at_check(check.id)
            cr = run_check(ctx, check, run.student_arg)
            if cr.kind in VALUE_KINDS and cr.status in ("failed", "error"):  # wrong, or raises (evidence.py)
                ctx.wrong_values.append(cr.id)
        done[check.id] = cr
        result.checks.append(cr)
        if on_check:
            on_check(cr)
        if run.fail_fast and (problem or (cr.status in ("failed", "error") and cr.score < cr.max_score)):
            stopped_at = check.id
    result.problem = problem
    if ctx.rehearsal is not None:
        ctx.rehearsal.end(passed=not only_checks and stopped_at is None and all(c.ok for c in result.checks))
    _outcome_hints(selected, done)
    if not only_checks and stopped_at is None:
        for q in challenge.questions:
            cr = grade_question(q, answers.get(q.id), None if key is None else (key.get(q.id) or {}),
                                challenge=challenge.id, student=run.student_id)
            result.checks.append(cr)
            if on_check:
                on_check(cr)
    return result
