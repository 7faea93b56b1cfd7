"""Constraint tests: forbidden APIs, found in the source (AST) and observed at run time."""

from __future__ import annotations

import fnmatch

import torch

from validator.cases import case_strategy
from validator.checks import Params, for_all, register
from validator.checks.common import CheckFailed, entry_of, random_like
from validator.context import Context
from validator.integrity import CONSTRUCTS, Finding, Unreadable, scan_package, scan_source, scan_submission
from validator.spec.schema import CheckSpec


def find_forbidden(source: str, forbidden: list[str]) -> list[tuple[int, str, str]]:
    """(line, code, api) for each use of a forbidden dotted name (or pattern), following import aliases.

    An import that is never used is not a use (see :func:`validator.integrity.scan_source`).
    """
    return [(f.line, f.code, f.what) for f in scan_source(source, forbidden, allow=set(CONSTRUCTS))
            if not f.construct and not f.unused_import]


class ReviewFailure(CheckFailed):
    """A failure that also marks the submission for a person to look at (evidence of evasion)."""

    def __init__(self, message: str, review: list[str] | None = None):
        super().__init__(message)
        self.review = list(review or [])


class SourceParams(Params):
    apis: list[str] | None = None
    integrity: bool = True  # also fail on the integrity scan's findings (threads, exec, torch internals, ...)
    # what to do instead, appended to a finding: each challenge's spec says it for its own layer
    advice: str = "This challenge is to write it yourself: the contract says which operations are allowed"


def _findings(ctx: Context, banned: list[str]) -> list[Finding]:
    """The scan of every Python file the worker gets, judged by the challenge's allowlist; a finding counts only in
    the code the entries may run (the rest is marked ``reachable=False``: advice)."""
    allow = set(ctx.challenge.forbidden.integrity.allow)
    allowed = ctx.challenge.forbidden.allowlist()
    try:
        if ctx.package is not None:  # the mapped modules, their packages' __init__.py, what they import from it
            targets = [t for name in ctx.challenge.entries if (t := ctx.target(name)) is not None]
            roots = [(t.module, attr) for t in targets  # an entry reached through tests/adapters.py: its functions
                     for attr in ([v["function"] for v in t.adapter["variants"]] if t.adapter else [t.attr])]
            return scan_package(ctx.package.data, [t.module for t in targets], banned, allow,
                                entries=roots, allowed=allowed)
        return scan_submission(ctx.student_file, banned, allow,
                               entries=list(ctx.challenge.entries), allowed=allowed)
    except Unreadable as exc:
        raise CheckFailed(f"{exc}: the source cannot be checked") from None


def _more(items: list) -> str:
    return f" (and {len(items) - 5} more)" if len(items) > 5 else ""


def _raise_for(found: list[Finding], banned_note: str) -> None:
    constructs = [f for f in found if f.construct]
    apis = [f for f in found if not f.construct]
    parts = []
    if apis:
        parts.append("; ".join(f.describe() for f in apis[:5]) + _more(apis) + banned_note)
    if constructs:
        parts.append("code outside what this challenge allows, or that could hide what it does from the grader: "
                     + "; ".join(f.describe() for f in constructs[:5]) + _more(constructs)
                     + ". Remove it (the challenge page lists the modules and names a solution may use)")
    review = [f.describe() for f in found if f.review]
    message = ". ".join(parts)
    if review:
        raise ReviewFailure(message + ". A person will review this submission", review)
    raise CheckFailed(message)


@register("forbidden_source", SourceParams, uses_reference=False)
def forbidden_source(ctx: Context, check: CheckSpec, p: SourceParams) -> str:
    banned = p.apis if p.apis is not None else ctx.challenge.forbidden.source
    found = [f for f in _findings(ctx, banned) if not f.advice_only and (p.integrity or not f.construct)]
    if found:
        _raise_for(found, ". " + p.advice)
    return (f"none of {', '.join(banned)} in the code the graded entries run (by name, as a method or through an "
            "alias)" + (", and nothing outside the challenge's allowlist" if p.integrity else ""))


@register("integrity", Params, uses_reference=False)
def integrity(ctx: Context, check: CheckSpec, p: Params) -> str:
    """The integrity scan alone, for challenges without forbidden APIs."""
    found = [f for f in _findings(ctx, []) if f.construct and not f.advice_only]
    if found:
        _raise_for(found, "")
    return ("nothing outside the challenge's allowlist, and no thread, process, dynamic code, torch internals or "
            "frame access in the code the graded entries run")


@register("unused_imports", SourceParams, uses_reference=False)
def unused_imports(ctx: Context, check: CheckSpec, p: SourceParams) -> str:
    """Advice: a forbidden name imported and never used, or used only in code the graded entries never run
    (a ``generate()`` beside the layer), costs nothing, but it invites the question."""
    banned = p.apis if p.apis is not None else ctx.challenge.forbidden.source
    found = [f for f in _findings(ctx, banned) if f.advice_only and not f.construct]
    unused = [f for f in found if f.unused_import]
    elsewhere = [f for f in found if not f.unused_import]
    parts = []
    if unused:
        parts.append("; ".join(f.describe() for f in unused[:5]) + ": delete the import (it does nothing, "
                     "and using it would cost the constraint checks)")
    if elsewhere:
        parts.append("; ".join(f.describe() for f in elsewhere[:5]))
    if parts:
        raise CheckFailed(". ".join(parts))
    return "no forbidden name outside the code the graded entries run"


def tamper_problems(result: dict) -> list[str]:
    """What a worker reply says about the op recorder being bypassed."""
    return [str(t) for t in (result.get("tampered") or [])]


def raise_if_tampered(result: dict, doing: str) -> None:
    problems = tamper_problems(result)
    if problems:
        raise ReviewFailure(f"the evidence from {doing} cannot be trusted: " + "; ".join(problems)
                            + ". The op recorder must see every op of forward and backward, on this thread; "
                            "a person will review this submission", [f"tampered evidence: {p}" for p in problems])


def forbidden_in(ops: dict, banned: list[str]) -> list[str]:
    """The op names (``aten.x``) that match an entry of ``banned``: a name or a glob like ``aten.*embedding*``."""
    return sorted(op for op in ops if any(op == b or fnmatch.fnmatchcase(op, b) for b in banned))


class RuntimeParams(Params):
    ops: list[str] | None = None
    inputs: dict = {}
    max_examples: int = 5
    # what it means that such an op ran: each challenge's spec says it for its own layer
    advice: str = "a library kernel the challenge forbids did the work (even if it is reached through an alias or getattr)"
    # judge the traced runs this `op_scaling` check of the challenge makes (its small and larger sizes) instead of
    # drawing cases of its own: a traced run costs ~30 us an op in the worker, and two checks can judge one
    runs_of: str | None = None

    def check_against(self, challenge, check):
        if self.runs_of is None:
            return []
        other = next((c for c in challenge.checks if c.id == self.runs_of), None)
        if other is None or other.test != "op_scaling":
            return [(("runs_of",), f"{self.runs_of!r} is not an op_scaling check of this challenge")]
        if other.entry != check.entry:
            return [(("runs_of",), f"{self.runs_of!r} traces entry {other.entry!r}, this check {check.entry!r}")]
        if self.inputs or "max_examples" in self.model_fields_set:
            return [(("runs_of",), "a check that judges another check's runs draws no cases: no `inputs` or "
                                   "`max_examples` with `runs_of`")]
        return []


@register("forbidden_runtime", RuntimeParams, uses_reference=False)
def forbidden_runtime(ctx: Context, check: CheckSpec, p: RuntimeParams) -> str:
    banned = p.ops if p.ops is not None else ctx.challenge.forbidden.runtime
    runs = traced_without(ctx, check, banned, inputs=p.inputs, max_examples=p.max_examples, advice=p.advice,
                          runs_of=p.runs_of)
    return f"traced {runs} forward/backward passes: no forbidden op"


def traced_without(ctx: Context, check: CheckSpec, banned: list[str], *, inputs: dict, max_examples: int,
                   advice: str, cases_of: str | None = None, runs_of: str | None = None) -> int:
    """Trace the entry's forward/backward on generated cases; fail where a ``banned`` op ran. ``cases_of``: draw
    the cases that check of the challenge draws (the same traced runs, judged against other bans). ``runs_of``:
    judge the runs that ``op_scaling`` check makes instead (its sizes, drawn from its seed)."""
    name, entry = entry_of(ctx, check)

    from validator.checks.evidence import measured

    def judge(got: dict, where: str = "") -> None:
        used = forbidden_in({**got.get("profiled_ops", {}), **got.get("ops", {})}, sorted(set(banned)))
        if used:
            raise CheckFailed(f"your forward/backward ran {', '.join(used)}{where}: {advice}")

    if runs_of is not None:
        from validator.checks import params_of
        from validator.checks.performance import scaling_runs, size_note

        scaling = next(c for c in ctx.challenge.checks if c.id == runs_of)
        runs = scaling_runs(ctx, scaling, params_of(scaling))
        for call, doing in runs:  # the op_scaling check's own runs: made once, judged by both (shared)
            judge(measured(ctx, scaling, call, doing, shared=True), f" on inputs of {size_note(call)}")
        return len(runs)

    def body(case):
        dtype = torch.get_default_dtype()
        state = ctx.make_state(entry, case.dims, case.seed, dtype) if entry.kind == "module" else None
        probe = ctx.build_call(name, case, want=["output"], state=state)
        ref = ctx.reference_call(probe)["output"]
        grad = random_like(ref, case.seed + 1)
        # the traced run is a graded run: its values must be the reference's (validator.checks.evidence)
        got = measured(ctx, check, dict(probe, grad_output=grad, trace_ops=True), "tracing your forward/backward",
                       shared=True)  # a composite's parts check judges the same runs
        judge(got)
    return for_all(ctx, check, lambda: case_strategy(ctx.challenge, entry, inputs), body, max_examples,
                   cases_of=cases_of)
