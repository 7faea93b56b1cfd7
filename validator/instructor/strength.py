"""`validator strength`: how many bugs of the reference each challenge's checks catch.

For every selected challenge, the mutants of :mod:`validator.instructor.mutants` (one-point mutants, and
bug-class mutants: a cache on the first call, an in-place edit of an input, a reseed, ...) are graded
as submissions by the sandboxed slots of ``validator grade`` (:class:`~validator.batch.pool.Pool`),
each stopped at its first check that loses points (``--all-checks`` grades every check, for the
kill matrix). A result is cached on disk under a hash of the mutant's source, the challenge's
fixture fingerprint (its graded spec, the reference entries it uses, the grader's code), the seed
and the profile: a second run after an unrelated change grades nothing.

A survivor that cannot change behaviour is marked in the spec with a reason::

    strength:
      equivalent:
        - {mutant: "SinusoidalPositionalEncoding.__init__:L0:default:max_seq_len:2048->2049",
           reason: "the table extends past max_seq_len, so the stored length changes no output"}
        - {mutant: "embedding:*:drop_arg:IndexError[0]", reason: "..."}   # `*` matches any text

Every other survivor is a hole in the checks: the report shows it as a diff with the inputs it
would need, and the instructor self-check fails on it (see :func:`unmarked_survivors`).
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence, TextIO

from validator import paths
from validator.instructor.mutants import BUG_CLASSES, Mutant, generate, generate_bug_classes

EXIT_OK, EXIT_SURVIVORS, EXIT_USAGE, EXIT_GRADER = 0, 1, 2, 3
STRENGTH_FORMAT = 2  # 2: bug-class mutants beside the one-point ones (`family`, `operator`, `families`, `bug_classes`)
FAMILIES = ("one-point", "bug-class")
BLAST_RADIUS = 0.8  # a check that catches at least this share of the caught mutants


# -- the result model (plain data; reporters render it) -----------------------------------------
@dataclass
class MutantResult:
    id: str
    status: str  # caught | survived | equivalent | error (the grader failed on it: not cached)
    caught_by: list[str] = field(default_factory=list)  # the first catcher, or every one with --all-checks
    message: str = ""  # the first catching check's message, shortened
    seconds: float = 0.0
    cached: bool = False
    diff: str = ""  # survivors and equivalents only
    needs: list[str] = field(default_factory=list)  # the input family a check would need (survivors)
    reason: str = ""  # equivalents: the spec's reason
    family: str = "one-point"  # or "bug-class" (validator.instructor.mutants.generate_bug_classes)
    operator: str = ""


@dataclass
class ChallengeStrength:
    id: str
    fingerprint: str
    mutants: int = 0
    caught: int = 0
    survived: int = 0
    equivalent: int = 0
    errors: int = 0
    all_checks: bool = False
    catches: dict[str, int] = field(default_factory=dict)  # check id -> mutants it caught (first catches in fail-fast)
    dead_weight: list[str] = field(default_factory=list)
    blast_radius: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    results: list[MutantResult] = field(default_factory=list)
    seconds: float = 0.0
    graded: int = 0  # mutants graded in this run (the rest came from the cache)
    # per family ("one-point", "bug-class") and per bug-class operator: mutants, caught, survived, equivalent, errors
    families: dict[str, dict[str, int]] = field(default_factory=dict)
    bug_classes: dict[str, dict[str, int]] = field(default_factory=dict)

    def tally(self) -> None:
        """Fill ``families`` and ``bug_classes`` from the results."""
        def count(results) -> dict[str, int]:
            out = {"mutants": len(results)}
            for status, key in (("caught", "caught"), ("survived", "survived"), ("equivalent", "equivalent"),
                                ("error", "errors")):
                out[key] = sum(r.status == status for r in results)
            return out
        self.families = {f: count([r for r in self.results if r.family == f]) for f in FAMILIES}
        bug = [r for r in self.results if r.family == "bug-class"]
        self.bug_classes = {op: count([r for r in bug if r.operator == op]) for op in BUG_CLASSES
                            if any(r.operator == op for r in bug)}

    @property
    def score(self) -> float:
        """Caught share of the mutants that are not equivalent (1.0 when there are none)."""
        live = self.mutants - self.equivalent - self.errors
        return self.caught / live if live else 1.0

    @property
    def survivors(self) -> list[MutantResult]:
        return [r for r in self.results if r.status == "survived"]

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["score"] = round(self.score, 4)
        return out


@dataclass
class StrengthReport:
    challenges: list[ChallengeStrength]
    seed: int
    profile: str
    seconds: float = 0.0
    notes: list[str] = field(default_factory=list)

    @property
    def survived(self) -> int:
        return sum(c.survived for c in self.challenges)

    @property
    def families(self) -> dict[str, dict[str, int]]:
        """Per family ("one-point", "bug-class"), over every challenge: mutants, caught, survived, equivalent, errors."""
        out: dict[str, dict[str, int]] = {}
        for c in self.challenges:
            for family, counts in c.families.items():
                into = out.setdefault(family, {})
                for k, v in counts.items():
                    into[k] = into.get(k, 0) + v
        return out

    def to_dict(self) -> dict[str, Any]:
        return {"format": STRENGTH_FORMAT, "seed": self.seed, "profile": self.profile,
                "seconds": round(self.seconds, 1), "notes": list(self.notes),
                "survived": self.survived, "families": self.families,
                "challenges": [c.to_dict() for c in self.challenges]}


# -- the cache ----------------------------------------------------------------------------------
def default_cache_dir() -> Path:
    return Path(os.environ.get("VALIDATOR_STRENGTH_CACHE") or paths.PROJECT_ROOT / ".validator-cache" / "strength")


def mutant_key(mutant: Mutant, *, fingerprint: str, seed: int, profile: str, all_checks: bool) -> str:
    h = hashlib.sha256(f"{STRENGTH_FORMAT}|{fingerprint}|{seed}|{profile}|{int(all_checks)}|".encode())
    h.update(mutant.source.encode())
    return h.hexdigest()[:32]


def _summary_path(cache: Path, challenge_id: str) -> Path:
    return cache / f"{challenge_id}.summary.json"


# -- equivalence marks ------------------------------------------------------------------------------
def _pattern(mark: str):
    import re

    return re.compile(".*".join(re.escape(part) for part in mark.split("*")) + r"\Z")


def inherited_marks(catalogue: Mapping[str, Any], challenge) -> list[tuple[str, Any]]:
    """(challenge id, mark) for the marks of the *other* challenges that say ``wherever_included``: a part's
    mutant equivalent whatever calls it is equivalent in the composites that include it too."""
    return [(other.id, mark) for other in catalogue.values() if other.id != challenge.id
            for mark in other.strength.equivalent if mark.wherever_included]


def equivalence_reason(challenge, mutant_id: str, inherited: Sequence[tuple[str, Any]] = ()) -> str | None:
    """The spec's reason when ``strength.equivalent`` marks this mutant (``*`` in a mark matches any text), or
    an ``inherited`` mark's reason, naming the challenge that marks it."""
    for mark in challenge.strength.equivalent:
        if _pattern(mark.mutant).match(mutant_id):
            return mark.reason
    for owner, mark in inherited:
        if _pattern(mark.mutant).match(mutant_id):
            return f"{mark.reason} (marked in {owner}, wherever included)"
    return None


def unmatched_marks(challenge, mutant_ids: Sequence[str]) -> list[str]:
    """Marks under ``strength.equivalent`` that match none of these mutants: a warning, never an error."""
    return [e.mutant for e in challenge.strength.equivalent
            if not any(_pattern(e.mutant).match(mid) for mid in mutant_ids)]


# -- what a survivor would need -------------------------------------------------------------------
BUG_CLASS_NEEDS = {
    "cache_first_call": "a `call_sequence` check: one instance called several times, lengths up then down, its "
                        "parameters changed in place between calls",
    "inplace_input": "an `inputs_unchanged` check: the layer called under torch.no_grad(), every argument compared with "
                     "its copy afterwards (and the output with the one under autograd)",
    "view_for_reshape": "an `input_views` check: the tensor arguments passed as transposed, strided or broadcast views",
    "reseed": "an `rng_stream` check (or `init_independent`): building never reseeds the global generator; "
              "`independent:` for parameters drawn apart",
    "buffer_to_parameter": "a `state_dict` check: state_dict() holds only the contract's parameters and persistent buffers",
    "buffer_to_attribute": "a `moves_with_module` check: module.to() takes every tensor forward reads along",
    "finite_mask_fill": "a `masked_out` check whose `magnitudes` (or `state_scale`) make the scores larger than a finite "
                        "fill",
    "loop": "an `op_scaling` check: the number of ops must not grow with the batch or the sequence",
    "drop_upcast": "a reduced-precision check: `values` with `input_dtype` for the layer itself, `reduced_precision` "
                   "for a composite built from it",
    "library_layer": "a `forbidden_runtime` check, or `parts_forbidden_runtime` with `forbidden.parts` for a composite",
}


def input_family(mutant: Mutant, challenge) -> list[str]:
    """As far as the mutated line tells: which dims, inputs, options or defaults a check must vary."""
    if mutant.family == "bug-class":
        return [BUG_CLASS_NEEDS.get(mutant.operator, f"a check of the class {mutant.operator}")]
    names = set(mutant.names)
    options = set(challenge.options())
    dims = [d for d in challenge.dims if d in names]
    inputs = [i for i in challenge.inputs if i in names and i not in options and i not in challenge.dims]
    opts = [o for o in options if o in names]
    needs: list[str] = []
    if mutant.operator == "default":
        arg = mutant.detail.split(":", 1)[0]
        needs.append(f"a `defaults` check: build/call {mutant.qualname.split('.')[0]} without `{arg}` "
                     "and compare with the reference built the same way")
    elif mutant.operator == "compare_op":
        needs.append(f"sizes on both sides of, and exactly at, the bound in `{mutant.original_line}`"
                     + (f" ({' vs '.join(dims)}; a check's `regimes:` can cover each side)" if dims else ""))
    elif mutant.operator == "drop_stmt" and mutant.detail in ("if", "raise", "assert"):
        needs.append(f"an invalid input that trips `{mutant.original_line}`: a `raises` check "
                     "(several invalid values at once with `inject: [...]`, the message with `message_contains`)")
    elif mutant.operator in ("drop_kwarg", "drop_arg") and "dtype" in names:
        needs.append("inputs (or a layer) in a dtype other than the default, reduced precision included "
                     "(float16, bfloat16): the result's dtype and values must follow the contract")
    elif mutant.operator in ("drop_kwarg", "drop_arg") and "device" in names:
        needs.append("another device: `--device cuda` (on the CPU every tensor is already on the right device)")
    elif mutant.operator == "constant" and mutant.line:
        needs.append(f"inputs where the constant in `{mutant.original_line}` matters")
    if dims:
        needs.append("dims: " + ", ".join(dims))
    if inputs:
        needs.append("inputs: " + ", ".join(inputs))
    if opts:
        needs.append("options: " + ", ".join(f"{o} (with its default and other values)" for o in opts))
    if "training" in names or "dropout" in names:
        needs.append("training mode (`train: true`)")
    return needs


def spread_warnings(challenge, results: Sequence[MutantResult], *, most: float = 0.5) -> list[str]:
    """With --all-checks: the mutants that fail more than one check, grouped by the checks they fail.

    One bug, one check: where a single bug costs several checks, a student reads several verdicts for one
    mistake, and a title that names another cause misleads them (a check may need to `require` another,
    or its inputs to avoid the bug another check owns). A mutant that fails more than ``most`` of the
    graded checks breaks the layer's output everywhere: the blast radius says that, not a warning.
    """
    titles = {c.id: c.title for c in challenge.checks}
    graded = [c for c in challenge.checks if not c.advisory and c.points > 0]
    groups: dict[tuple[str, ...], list[str]] = {}
    for r in results:
        if r.status == "caught" and 1 < len(r.caught_by) <= max(2, most * len(graded)):
            groups.setdefault(tuple(r.caught_by), []).append(r.id)
    out = []
    for checks, ids in groups.items():
        who = (f"{ids[0]} fails" if len(ids) == 1 else
               f"{len(ids)} mutants ({', '.join(ids[:3])}{', ...' if len(ids) > 3 else ''}) each fail")
        out.append(f"{who} {len(checks)} checks: "
                   + "; ".join(f"{c} ({_short(titles[c])})" if titles.get(c) else c for c in checks)
                   + " -- one bug, one check: does each title name this bug?")
    return out


def _short(text: str, limit: int = 70) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[:limit - 1].rstrip() + "…"


def _caught_by(report: dict, challenge_id: str) -> tuple[list[str], str]:
    """The code checks that lost points, and the first one's message."""
    for ch in report.get("challenges", []):
        if ch.get("id") != challenge_id:
            continue
        lost = [c for c in ch.get("checks", []) if c.get("kind") != "question"
                and c.get("status") in ("failed", "error") and c.get("score", 0) < c.get("max_score", 0)]
        if ch.get("problem") and not lost:
            return ["(import)"], str(ch["problem"])[:300]
        first = (lost[0].get("message") or "").strip().splitlines()[:1] if lost else []
        return [c["id"] for c in lost], (first[0][:300] if first else "")
    return [], ""


# -- the run ---------------------------------------------------------------------------------------
def strength(*, challenges: Sequence[str] | None = None, jobs: int | None = None, seed: int | None = None,
             profile: str = "batch", all_checks: bool = False, cache_dir: str | Path | None = None,
             use_cache: bool = True, isolate: bool = True, timeout: float = 300.0, memory: int = 2048,
             limit: int | None = None, only: Sequence[str] | None = None, bug_classes: bool = True,
             stream: TextIO | None = None) -> StrengthReport:
    """Generate, grade (or read from the cache) and summarise the mutants of each selected challenge.

    ``limit`` keeps the first N mutants of each challenge and ``only`` the named mutant ids (for
    tests and quick looks); a partial run does not update the summary the self-check reads. ``bug_classes``
    adds the bug-class mutants (:func:`validator.instructor.mutants.generate_bug_classes`) beside the one-point ones.
    ``seed`` (default :data:`~validator.reference_side.OFFICIAL_SEED`) and ``profile`` default to `validator
    grade`'s own: a mutant caught there is caught where grades are decided (a check that catches a bug only on
    lucky draws can miss it on that seed alone).
    """
    from validator.api import UsageError, select_challenges
    from validator.batch.grade import canary_folder, canary_problem, slot_config
    from validator.batch.pool import Outcome, Pool
    from validator.instructor.fixtures import fingerprint
    from validator.profiles import get_settings
    from validator.reference_side import OFFICIAL_SEED
    from validator.sandbox import Limits
    from validator.spec import load_catalogue

    seed = OFFICIAL_SEED if seed is None else seed

    say = (lambda msg: print(msg, file=stream or sys.stderr, flush=True))
    started = time.monotonic()
    try:
        get_settings(profile)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    reference_file = paths.reference_dir() / "layers.py"
    if not reference_file.exists():
        raise UsageError(f"no reference at {reference_file}: `validator strength` runs on the instructor's copy")
    catalogue = load_catalogue(paths.challenges_dir())
    selected = select_challenges(catalogue, challenges)
    source = reference_file.read_text(encoding="utf-8")
    cache = Path(cache_dir) if cache_dir else default_cache_dir()
    cache.mkdir(parents=True, exist_ok=True)
    partial = bool(limit or only)

    plans: list[tuple[Any, ChallengeStrength, list[Mutant], dict[str, str]]] = []
    todo: list[tuple[str, Mutant, Any, str]] = []  # (task name, mutant, challenge, cache key)
    for ch in selected:
        fp = fingerprint(ch, reference_file=reference_file)
        families = [generate(source, ch.entries)] + ([generate_bug_classes(source, ch.entries)] if bug_classes else [])
        if only:
            families = [[m for m in f if m.id in set(only)] for f in families]
        if limit:
            families = [f[:limit] for f in families]
        mutants = [m for f in families for m in f]
        keys = {m.id: mutant_key(m, fingerprint=fp, seed=seed, profile=profile, all_checks=all_checks)
                for m in mutants}
        plans.append((ch, ChallengeStrength(id=ch.id, fingerprint=fp, mutants=len(mutants), all_checks=all_checks),
                      mutants, keys))
        for m in mutants:
            if not (use_cache and (cache / f"{keys[m.id]}.json").is_file()):
                todo.append((f"{ch.id}-{len(todo):05d}", m, ch, keys[m.id]))

    fresh: dict[str, dict] = {}
    if todo:
        jobs = max(1, jobs or os.cpu_count() or 1)
        say(f"strength: grading {len(todo)} mutant(s) of {len(selected)} challenge(s) with {min(jobs, len(todo))} "
            f"slot(s) (seed {seed}, profile {profile}, {'every check' if all_checks else 'fail-fast'}); "
            f"{sum(p[1].mutants for p in plans) - len(todo)} cached")
        with tempfile.TemporaryDirectory(prefix="validator-strength-") as tmp:
            folders = {}
            for name, m, _, _ in todo:
                folder = Path(tmp) / name
                folder.mkdir()
                (folder / "layers.py").write_text(m.source, encoding="utf-8")
                folders[name] = str(folder)
            limits = Limits(wall_s=float(timeout), cpu_s=max(1, int(timeout)), memory_mb=int(memory))
            # one pool for every challenge: each task names its challenge, so the slots stay busy across them
            ids = list(dict.fromkeys(task[2].id for task in todo))
            config = slot_config(challenges=ids, seed=seed, profile=profile, limits=limits, isolate=isolate,
                                 hide=(tmp,), fail_fast=not all_checks)
            pool = Pool(config, workers=min(jobs, len(todo)), watchdog_s=2 * timeout + 300, keep=True)
            left = {cid: sum(t[2].id == cid for t in todo) for cid in ids}
            t0 = time.monotonic()

            def on_result(outcome: Outcome) -> None:
                fresh[outcome.name] = {"report": outcome.report, "error": outcome.error, "seconds": outcome.seconds}
                cid = outcome.name.rsplit("-", 1)[0]
                left[cid] -= 1
                if not left[cid]:
                    say(f"  {cid}: graded ({time.monotonic() - t0:.0f} s since the start)")

            try:
                pool.start(min(jobs, len(todo)))
                # the reference first, on the same slots: if it loses a point, no mutant's verdict means anything
                with tempfile.TemporaryDirectory(prefix="validator-strength-canary-") as ctmp:
                    canary = canary_folder(reference_dir=paths.reference_dir(), into=ctmp)
                    outcomes: list[Outcome] = []
                    pool.run([(".canary", str(canary))], outcomes.append)
                problem = canary_problem(outcomes[0]) if outcomes else "the reference was not graded"
                if problem:
                    raise RuntimeError(problem)
                pool.run([(name, folders[name], [ch.id]) for name, _, ch, _ in todo], on_result)
            finally:
                pool.close()

    for ch, result, mutants, keys in plans:
        t0 = time.monotonic()
        inherited = inherited_marks(catalogue, ch)
        marks = {m.id: equivalence_reason(ch, m.id, inherited) for m in mutants}
        marks = {k: v for k, v in marks.items() if v is not None}
        own_marks = {k for k in marks if equivalence_reason(ch, k) is not None}  # the others are inherited
        names = {m.id: name for name, m, c, _ in todo if c.id == ch.id}
        for m in mutants:
            path = cache / f"{keys[m.id]}.json"
            entry = None
            cached = False
            if m.id in names and names[m.id] in fresh:
                got = fresh[names[m.id]]
                caught_by, message = _caught_by(got["report"], ch.id) if got["report"] is not None else ([], "")
                if message.startswith("internal grader error"):  # the grader's bug catches nothing: not cached
                    got = dict(got, error=f"{caught_by[0]}: {message}")
                if got["error"] is None and got["report"] is not None:
                    entry = {"mutant": m.id, "caught_by": caught_by, "message": message,
                             "seconds": round(got["seconds"], 2)}
                    path.write_text(json.dumps(entry) + "\n", encoding="utf-8")
                else:
                    result.results.append(MutantResult(id=m.id, status="error",
                                                       message=(got["error"] or "no report")[-300:],
                                                       family=m.family, operator=m.operator))
                    result.errors += 1
                    continue
                result.graded += 1
            elif path.is_file():
                entry = json.loads(path.read_text(encoding="utf-8"))
                cached = True
            if entry is None:
                result.results.append(MutantResult(id=m.id, status="error", message="not graded", family=m.family,
                                                   operator=m.operator))
                result.errors += 1
                continue
            caught_by = entry["caught_by"]
            status = "caught" if caught_by else ("equivalent" if m.id in marks else "survived")
            mr = MutantResult(id=m.id, status=status, caught_by=caught_by, message=entry.get("message", ""),
                              seconds=entry.get("seconds", 0.0), cached=cached, family=m.family, operator=m.operator)
            if status != "caught":
                mr.diff = m.diff(source)
                mr.reason = marks.get(m.id, "")
                mr.needs = input_family(m, ch) if status == "survived" else []
            elif m.id in marks and m.id not in own_marks:  # the mark is another challenge's
                result.warnings.append(f"{m.id} is marked equivalent wherever included, but here {caught_by[0]} "
                                       f"catches it: {marks[m.id]}; the mark's claim does not hold, so narrow it")
            elif m.id in marks:
                result.warnings.append(f"{m.id} is marked equivalent in the spec but {caught_by[0]} catches it: "
                                       "remove the mark")
            result.results.append(mr)
            for check_id in caught_by:
                result.catches[check_id] = result.catches.get(check_id, 0) + 1
        result.tally()
        result.caught = sum(r.status == "caught" for r in result.results)
        result.survived = sum(r.status == "survived" for r in result.results)
        result.equivalent = sum(r.status == "equivalent" for r in result.results)
        if not partial:
            result.warnings += [f"strength.equivalent names {mark!r}, which matches no mutant of this challenge "
                                "(renamed or gone: remove or update the mark)"
                                for mark in unmatched_marks(ch, [m.id for m in mutants])]
        graded_checks = [c.id for c in ch.checks if not c.advisory and c.points > 0]
        if all_checks:
            result.warnings += spread_warnings(ch, result.results)
            result.dead_weight = [c for c in graded_checks if not result.catches.get(c)]
            if result.caught:
                result.blast_radius = [c for c in graded_checks
                                       if result.catches.get(c, 0) >= BLAST_RADIUS * result.caught and result.caught >= 5]
        result.seconds = round(sum(r.seconds for r in result.results if not r.cached) + time.monotonic() - t0, 1)
        if not partial and not result.errors:
            _summary_path(cache, ch.id).write_text(json.dumps({
                "challenge": ch.id, "fingerprint": result.fingerprint, "seed": seed, "profile": profile,
                "mutants": result.mutants, "survivors": [r.id for r in result.results
                                                         if r.status in ("survived", "equivalent")]},
                indent=1) + "\n", encoding="utf-8")
    notes = []
    if not all_checks:
        notes.append("fail-fast: each mutant was graded up to its first catching check, so `catches` counts first "
                     "catches; run with --all-checks for dead weight and blast radius")
    return StrengthReport(challenges=[p[1] for p in plans], seed=seed, profile=profile,
                          seconds=time.monotonic() - started, notes=notes)


# -- the self-check's view --------------------------------------------------------------------------
def unmarked_survivors(challenge, *, reference_file: Path, cache_dir: str | Path | None = None,
                       catalogue: Mapping[str, Any] | None = None) -> list[str] | None:
    """The survivors of the last full `validator strength` run on ``challenge`` that the spec does not mark
    equivalent; None when there is no such run for the current spec, reference and grader (nothing to say)."""
    from validator.instructor.fixtures import fingerprint

    path = _summary_path(Path(cache_dir) if cache_dir else default_cache_dir(), challenge.id)
    try:
        summary = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if summary.get("fingerprint") != fingerprint(challenge, reference_file=reference_file):
        return None
    inherited = inherited_marks(catalogue, challenge) if catalogue else []
    return [m for m in summary.get("survivors", []) if equivalence_reason(challenge, m, inherited) is None]


def main(*, challenges: Sequence[str] | None = None, json_path: str | None = None, html_path: str | None = None,
         jobs: int | None = None, seeds: Sequence[int] | None = None, profile: str = "batch",
         all_checks: bool = False, cache_dir: str | None = None, use_cache: bool = True, isolate: bool = True,
         timeout: float = 300.0, bug_classes: bool = True, stream: TextIO | None = None) -> int:
    """Entry for the CLI: exit 0 when every non-equivalent mutant is caught, 1 when some survive,
    2 for usage or spec errors, 3 when the grader failed (the reference lost points, a mutant errored).

    ``seeds`` (``--seed``, repeatable; none: `validator grade`'s seed) grades the mutants once per seed: a check
    that catches a bug only on lucky draws shows as a survivor on some seed. Each seed's report is printed under
    its own heading and written to its own ``--json``/``--html`` file (``report.seed5.json``); the exit status is
    the worst."""
    from validator.api import UsageError
    from validator.reporters.strength import render_text, write_html, write_json
    from validator.spec import SpecError

    out = stream or sys.stdout
    err = sys.stderr if stream is None else stream
    runs = list(seeds) if seeds else [None]
    several = len(runs) > 1
    status, survivors_by_seed = EXIT_OK, []
    for one in runs:
        try:
            report = strength(challenges=challenges, jobs=jobs, seed=one, profile=profile, all_checks=all_checks,
                              cache_dir=cache_dir, use_cache=use_cache, isolate=isolate, timeout=timeout,
                              bug_classes=bug_classes, stream=err)
        except (UsageError, SpecError) as exc:
            print(f"error: {exc}", file=err)
            return EXIT_USAGE
        except RuntimeError as exc:
            print(f"error: {exc}", file=err)
            return EXIT_GRADER
        if several:
            out.write(f"== seed {report.seed}\n")
        out.write(render_text(report))
        if json_path:
            write_json(report, _per_seed(json_path, report.seed, several))
        if html_path:
            target = _per_seed(html_path, report.seed, several)
            try:
                write_html(report, target)
            except OSError as exc:
                print(f"error: could not write the HTML report to {target}: {exc.strerror or exc}", file=err)
        survivors_by_seed.append((report.seed, report.survived))
        if any(c.errors for c in report.challenges):
            status = EXIT_GRADER
        elif report.survived and status == EXIT_OK:
            status = EXIT_SURVIVORS
    if several:
        lucky = [f"seed {s}: {n}" for s, n in survivors_by_seed if n]
        out.write(f"\n{len(runs)} seeds ({', '.join(str(s) for s, _ in survivors_by_seed)}): "
                  + (f"survivors on {', '.join(lucky)}" if lucky else "no survivor on any") + "\n")
    return status


def _per_seed(path: str, seed: int, several: bool) -> str:
    """``path`` itself for one seed; ``name.seedN.suffix`` beside it for each of several."""
    if not several:
        return path
    p = Path(path)
    return str(p.with_name(f"{p.stem}.seed{seed}{p.suffix}"))
