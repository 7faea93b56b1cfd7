"""Grade one challenge: probe the student's entries, run every check, grade the questions.

One failing check never stops the others: each check is isolated, a crashed
worker is restarted, and a parameter with the wrong name is matched by shape
so that value and gradient checks still run.
"""

from __future__ import annotations

import importlib.util
import sys
import time
import traceback
from pathlib import Path
from typing import Any, Callable

from validator import checks
from validator.checks.common import match_parameters, probe_case, probe_dims
from validator.context import (CheckErrored, CheckFailed, CheckSkipped, Context, GraderFailure,
                               ReferenceUnavailable, format_exception)
from validator.questions import grade_question
from validator.results import ChallengeResult, CheckResult
from validator.spec.schema import Challenge, CheckSpec
from validator.worker.client import Worker, WorkerFailure


def load_reference(path: Path) -> dict[str, Any]:
    """Import the reference module in-process (it is trusted instructor code)."""
    spec = importlib.util.spec_from_file_location("validator_reference_layers", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return vars(module)


def reproduce_command(challenge: str, check: str, seed: int, student: str | None, device: str | None = None,
                      profile: str | None = None) -> str:
    """A command that replays one check: same student file, seed, profile and device, safe to paste."""
    from shlex import quote

    cmd = f"validator submit-build --challenge {challenge} --check {check} --seed {seed}"
    return (cmd + (f" --student {quote(str(student))}" if student else "")
            + (f" --profile {quote(profile)}" if profile else "") + (f" --device {quote(device)}" if device else ""))


def _probe(ctx: Context) -> str | None:
    """Describe the entries and match parameters; return a problem that stops the challenge, if any."""
    names = list(ctx.challenge.entries)
    reply = ctx.worker.request({"op": "describe", "names": names}, 30, "inspecting layers.py")
    ctx.entries = reply.get("entries", {})
    missing = [n for n in names if not ctx.entries.get(n, {}).get("exists")]
    if missing:
        return f"layers.py defines no {', '.join(missing)}: every check of this challenge needs it"
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
        mapping, _ = match_parameters(expected, result["structure"]["parameters"])
        ctx.param_maps[name] = mapping
    return None


def run_check(ctx: Context, check: CheckSpec, student_arg: str | None) -> CheckResult:
    test = checks.get(check.test)
    params = checks.params_of(check)
    started = time.perf_counter()
    base = dict(id=check.id, kind=check.kind, max_score=check.points, title=check.title)
    status, message = "passed", ""
    review: list[str] = []
    machinery = False
    if ctx.frozen is not None or ctx.recorder is not None:
        from validator.instructor.fixtures import DEFERRED, live_only

        if live_only(check.test):
            if ctx.frozen is not None:
                return CheckResult(status="skipped", score=0.0, message=f"{DEFERRED}: this check measures the "
                                   "reference implementation itself, which a handout does not include", **base)
            ctx.recorder.active = False
        if ctx.frozen is not None:
            ctx.frozen.reset()
        if ctx.recorder is not None:
            ctx.recorder.begin_check()
    ctx.worker.current_check = f"{ctx.challenge.id}/{check.id}"  # named if a call times out (worker.request)
    try:
        note = test.fn(ctx, check, params)
        message = note or ""
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
        if ctx.recorder is not None:
            ctx.recorder.end_check()
            ctx.recorder.active = True
    # Nothing was compared: a pass (or an error of the grader's making) would claim what was never checked.
    if ctx.frozen is not None and status in ("passed", "error") and ctx.frozen.misses and not ctx.frozen.hits:
        from validator.instructor.fixtures import DEFERRED

        status, message = "skipped", (f"{DEFERRED}: none of the generated inputs has a frozen reference result "
                                      "(were the fixtures recorded with another hypothesis version?)")
    if status == "skipped":
        return CheckResult(status=status, score=0.0, message=message,
                           duration_s=round(time.perf_counter() - started, 3), **base)
    if check.advisory:
        status = "passed" if status == "passed" else "advisory"
    if check.hint and not machinery and status in ("failed", "advisory", "error") and check.hint not in message:
        message += f"\n  hint: {check.hint}"
    score = check.points if status == "passed" else 0.0
    return CheckResult(status=status, score=score, message=message, review=review,
                       reproduce=None if status == "passed" else
                       reproduce_command(ctx.challenge.id, check.id, ctx.seed, student_arg, ctx.device, ctx.profile),
                       duration_s=round(time.perf_counter() - started, 3), **base)


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


def grade_challenge(challenge: Challenge, *, worker: Worker, reference: dict[str, Any] | None,
                    reference_file: str | None, student_file: Path, seed: int, settings,
                    answers: dict[str, Any], key: dict[str, Any] | None, only_checks: set[str] | None = None,
                    student_arg: str | None = None, timeout: float | None = None, on_check: Callable[[CheckResult], None] | None = None,
                    frozen: Any = None, recorder: Any = None, device: str | None = None,
                    profile: str | None = None, fail_fast: bool = False) -> ChallengeResult:
    """Grade one challenge. ``frozen`` replays reference results (handout); ``recorder`` records them.

    ``fail_fast`` stops at the first check that loses points (the rest are skipped, questions are not
    graded): enough to know that a mutant of the reference is caught (`validator strength`).
    """
    result = ChallengeResult(id=challenge.id, title=challenge.title)
    ctx = Context(challenge=challenge, reference=reference or {}, worker=worker, student_file=student_file,
                  seed=seed, settings=settings, reference_file=reference_file, frozen=frozen, recorder=recorder,
                  timeout_cap=timeout, device=device, profile=profile)
    load = worker.load()
    problem = None
    if not load.get("ok"):
        info = load.get("exception") or {}
        if info.get("type") == "TimeoutError":
            problem = f"importing layers.py did not finish in time: {info.get('message', '')}"
        elif info.get("type") == "WorkerCrashed":
            problem = f"the process importing layers.py died: {info.get('message', '')}"
        else:
            problem = "layers.py could not be imported: " + format_exception({"stage": "import", "exception": info}, "")
            problem = problem.replace("import raised", "").replace(": :", ":")
    else:
        try:
            problem = _probe(ctx)
        except WorkerFailure as exc:
            problem = f"inspecting layers.py failed: {exc}"
    selected = [c for c in challenge.checks if not only_checks or c.id in only_checks]
    done: dict[str, CheckResult] = {}
    stopped_at: str | None = None
    for check in selected:
        if stopped_at is not None:
            cr = CheckResult(id=check.id, kind=check.kind, status="skipped", score=0.0, max_score=check.points,
                             title=check.title, message=f"not run: fail-fast stopped at {stopped_at}")
            done[check.id] = cr
            result.checks.append(cr)
            continue
        unmet = [r for r in check.requires if r in done and done[r].status != "passed"]
        if problem:
            cr = CheckResult(id=check.id, kind=check.kind, status="error", score=0.0, max_score=check.points,
                             title=check.title, message="not run: see the problem above")
        elif unmet:
            cr = CheckResult(id=check.id, kind=check.kind, status="skipped", score=0.0, max_score=check.points,
                             title=check.title, message=f"not graded until {', '.join(unmet)} passes: "
                             "this check only means something for a working implementation")
        else:
            cr = run_check(ctx, check, student_arg)
        done[check.id] = cr
        result.checks.append(cr)
        if on_check:
            on_check(cr)
        if fail_fast and (problem or (cr.status in ("failed", "error") and cr.score < cr.max_score)):
            stopped_at = check.id
    result.problem = problem
    _outcome_hints(selected, done)
    if not only_checks and stopped_at is None:
        for q in challenge.questions:
            cr = grade_question(q, answers.get(q.id), None if key is None else (key.get(q.id) or {}))
            result.checks.append(cr)
            if on_check:
                on_check(cr)
    return result
