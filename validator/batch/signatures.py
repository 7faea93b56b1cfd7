"""Known bugs by the checks they fail: the signatures the class dashboard names failure patterns with.

A *failure pattern* is what one submission lost on one challenge: the set of its code checks that
failed or errored and lost points (:func:`lost_checks`; questions are counted apart). A *signature*
is the pattern a known bug produces, on its own challenge and on every challenge that builds on it
(a broken ``RMSNorm`` also costs ``transformer_block``'s end-to-end checks). Signatures come from:

- the mutant library, ``tests/implementations/<challenge>/broken/*``: each broken file is appended to
  the reference (its definitions replace the reference's, as a student's would) and graded, with the
  batch grader's seed and profile, on its challenge and the challenges that use what it defines; its
  name is the first line of the file's docstring;
- ``validator strength``'s one-point mutants of the reference, where an ``--all-checks`` run left its
  kill matrix in the strength cache (``--strength`` grades what is missing); named by the change.

``validator signatures`` writes them to ``challenges/signatures.json`` (instructor-only: the release
copies only the specs and fixtures); ``validator grade`` reads it when present. Grading is
deterministic (seeded, derandomized), so the same bug graded with the same seed, profile, spec,
reference and grader loses exactly the same checks; the file records each challenge's fingerprint,
and the dashboard says when the current one differs (a stale signature may fail to match).
"""

from __future__ import annotations

import ast
import json
import shutil
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence, TextIO

SIGNATURES_FORMAT = 1
SIGNATURES_FILE = "signatures.json"
LOST_STATUSES = ("failed", "error")


# -- the pattern of one submission on one challenge ------------------------------------------------
def lost_checks(challenge: Mapping[str, Any] | Any) -> tuple[str, ...]:
    """The code checks of one challenge result (a dict from a report's JSON, or a ChallengeResult)
    that failed or errored and lost points, sorted; questions are not code checks."""
    checks = challenge.get("checks", []) if isinstance(challenge, Mapping) else challenge.checks
    out = set()
    for c in checks:
        get = c.get if isinstance(c, Mapping) else (lambda key, default=None, c=c: getattr(c, key, default))
        if get("kind") == "question" or get("status") not in LOST_STATUSES:
            continue
        if float(get("score", 0) or 0) < float(get("max_score", 0) or 0):
            out.add(str(get("id")))
    return tuple(sorted(out))


# -- the signatures ---------------------------------------------------------------------------------
@dataclass
class Bug:
    """A known bug: where it lives, what a person calls it, and the checks it loses per challenge."""

    id: str  # "library:rms_norm/no_float32_upcast" or "strength:rms_norm/RMSNorm.forward:L2:..."
    source: str  # library | strength
    challenge: str  # the challenge whose code holds the bug
    name: str
    lost: dict[str, list[str]] = field(default_factory=dict)  # challenge id -> sorted lost check ids
    declared: list[str] = field(default_factory=list)  # the library file's MAY_FAIL, when it has one


@dataclass
class Signatures:
    bugs: list[Bug] = field(default_factory=list)
    seed: int = 0
    profile: str = "batch"
    fingerprints: dict[str, str] = field(default_factory=dict)  # challenge id -> fixtures.fingerprint
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"format": SIGNATURES_FORMAT, "seed": self.seed, "profile": self.profile,
                "fingerprints": dict(sorted(self.fingerprints.items())), "notes": list(self.notes),
                "bugs": [asdict(b) for b in self.bugs]}

    @staticmethod
    def from_dict(data: Mapping[str, Any]) -> "Signatures":
        if not isinstance(data, Mapping) or data.get("format") != SIGNATURES_FORMAT:
            raise ValueError(f"not a signatures file of format {SIGNATURES_FORMAT}")
        bugs = [Bug(id=str(b["id"]), source=str(b.get("source", "library")), challenge=str(b["challenge"]),
                    name=str(b.get("name") or b["id"]),
                    lost={str(k): sorted(map(str, v)) for k, v in (b.get("lost") or {}).items()},
                    declared=[str(x) for x in b.get("declared") or []])
                for b in data.get("bugs", [])]
        return Signatures(bugs=bugs, seed=int(data.get("seed", 0)), profile=str(data.get("profile", "batch")),
                          fingerprints={str(k): str(v) for k, v in (data.get("fingerprints") or {}).items()},
                          notes=[str(n) for n in data.get("notes", [])])

    def index(self) -> dict[tuple[str, tuple[str, ...]], list[Bug]]:
        """(challenge, lost checks) -> the bugs that lose exactly those checks there."""
        out: dict[tuple[str, tuple[str, ...]], list[Bug]] = {}
        for bug in self.bugs:
            for cid, lost in bug.lost.items():
                if lost:
                    out.setdefault((cid, tuple(sorted(lost))), []).append(bug)
        return out


def default_path() -> Path:
    from validator import paths

    return paths.challenges_dir() / SIGNATURES_FILE


def load(path: str | Path | None = None) -> Signatures | None:
    """The signatures file, or None when there is none; a malformed one raises ValueError naming it."""
    path = Path(path) if path else default_path()
    if not path.is_file():
        return None
    try:
        return Signatures.from_dict(json.loads(path.read_text(encoding="utf-8")))
    except (ValueError, KeyError, TypeError) as exc:
        raise ValueError(f"{path}: {exc}; rebuild it with `validator signatures`") from None


def stale_challenges(signatures: Signatures, challenges: Iterable[Any], *, seed: int, profile: str) -> list[str]:
    """Why some signatures may not match this run: another seed or profile, or challenges whose spec,
    reference or grader changed since they were recorded (or that have none)."""
    notes = []
    if (signatures.seed, signatures.profile) != (seed, profile):
        notes.append(f"the signatures were recorded with seed {signatures.seed}, profile {signatures.profile}; "
                     f"this run used seed {seed}, profile {profile}: patterns may not match exactly")
    try:
        from validator import paths
        from validator.instructor.fixtures import fingerprint
    except ImportError:  # pragma: no cover - a copy without the instructor tools
        return notes
    changed, missing = [], []
    for ch in challenges:
        if not hasattr(ch, "model_dump"):  # no longer in the catalogue
            continue
        recorded = signatures.fingerprints.get(ch.id)
        if recorded is None:
            missing.append(ch.id)
        elif recorded != fingerprint(ch, reference_file=paths.reference_dir() / "layers.py"):
            changed.append(ch.id)
    if changed:
        notes.append("the spec, reference or grader changed since the signatures were recorded for "
                     f"{', '.join(changed)}: rebuild them with `validator signatures`")
    if missing:
        notes.append(f"no signatures recorded for {', '.join(missing)}")
    return notes


# -- clustering a class ----------------------------------------------------------------------------
@dataclass
class Pattern:
    """Every submission that lost exactly ``lost`` on ``challenge``, and what is known to do that."""

    challenge: str
    lost: tuple[str, ...]
    submissions: list[str] = field(default_factory=list)
    bugs: list[Bug] = field(default_factory=list)  # the best-matching kind first (see :func:`cluster`)
    relation: str = "unnamed"  # own (a bug of this challenge) | knock-on (a bug of another) | unnamed
    near: list[tuple[float, Bug]] = field(default_factory=list)  # unnamed: the closest signatures
    problems: dict[str, int] = field(default_factory=dict)  # the challenge's `problem` lines, counted

    @property
    def count(self) -> int:
        return len(self.submissions)

    @property
    def name(self) -> str:
        if not self.bugs:
            return f"unnamed pattern: loses {', '.join(self.lost)}"
        best = [b for b in self.bugs if b.source == self.bugs[0].source]  # the library's names, when it has one
        names = list(dict.fromkeys(b.name for b in best))
        prefix = "" if self.relation == "own" else \
            f"knock-on of a bug in {', '.join(dict.fromkeys(b.challenge for b in self.bugs))}: "
        if len(names) == 1:
            return prefix + names[0]
        shown = "; ".join(names[:3]) + (f"; and {len(names) - 3} more" if len(names) > 3 else "")
        return f"{prefix}one of {len(names)} known bugs that fail the same checks: {shown}"

    def to_dict(self, *, examples: int = 5) -> dict[str, Any]:
        return {"challenge": self.challenge, "lost": list(self.lost), "count": self.count, "name": self.name,
                "relation": self.relation, "bugs": [b.id for b in self.bugs],
                "examples": self.submissions[:examples], "submissions": list(self.submissions),
                "near": [{"bug": b.id, "name": b.name, "similarity": round(s, 3)} for s, b in self.near],
                "problems": dict(self.problems)}


def _rank(bug: Bug) -> int:
    return 0 if bug.source == "library" else 1


def cluster(reports: Iterable[tuple[str, Any]], signatures: Signatures | None) -> list[Pattern]:
    """Group each (submission name, :class:`~validator.results.Report`) by (challenge, lost checks); name each group.

    A group is named by the bugs whose signature on that challenge is exactly its lost checks: bugs of
    the challenge itself first (the mutant library's before strength's), else bugs of other challenges
    it builds on (a knock-on). A group no signature matches is an *unnamed pattern*; its ``near`` lists
    the signatures of its challenge that share most checks with it (Jaccard), as a hint for a person.
    Sorted by size, largest first; challenges graded with no loss make no group.
    """
    index = signatures.index() if signatures else {}
    groups: dict[tuple[str, tuple[str, ...]], Pattern] = {}
    for name, report in reports:
        for ch in report.challenges:
            lost = lost_checks(ch)
            if not lost:
                continue
            key = (ch.id, lost)
            pattern = groups.get(key)
            if pattern is None:
                pattern = groups[key] = Pattern(challenge=key[0], lost=lost)
            pattern.submissions.append(name)
            if ch.problem and ch.problem.strip():
                line = ch.problem.strip().splitlines()[0][:200]
                pattern.problems[line] = pattern.problems.get(line, 0) + 1
    for key, pattern in groups.items():
        matches = index.get(key, [])
        own = sorted((b for b in matches if b.challenge == pattern.challenge), key=_rank)
        if own:
            pattern.bugs, pattern.relation = own, "own"
        elif matches:
            pattern.bugs, pattern.relation = sorted(matches, key=lambda b: (_rank(b), b.challenge)), "knock-on"
        elif signatures:
            lost = set(pattern.lost)
            scored = []
            for bug in signatures.bugs:
                theirs = set(bug.lost.get(pattern.challenge, ()))
                if theirs and bug.challenge == pattern.challenge:
                    scored.append((len(lost & theirs) / len(lost | theirs), bug))
            scored.sort(key=lambda sb: (-sb[0], _rank(sb[1]), sb[1].id))
            pattern.near = [(s, b) for s, b in scored[:3] if s >= 0.5]
        pattern.submissions.sort()
    return sorted(groups.values(), key=lambda p: (-p.count, p.challenge, p.lost))


# -- building the signatures (instructor side) --------------------------------------------------------
def docstring_name(source: str, fallback: str) -> str:
    """The first sentence-line of a module's docstring: how the mutant library names its bug."""
    try:
        doc = ast.get_docstring(ast.parse(source))
    except (SyntaxError, ValueError):
        doc = None
    first = (doc or "").strip().splitlines()[0].strip() if (doc or "").strip() else ""
    return first or fallback.replace("_", " ")


def _top_level_names(source: str) -> set[str]:
    names: set[str] = set()
    for node in ast.parse(source).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            for target in (node.targets if isinstance(node, ast.Assign) else [node.target]):
                names.update(n.id for n in ast.walk(target) if isinstance(n, ast.Name))
    return names


def reach(reference_source: str, entries: Iterable[str]) -> set[str]:
    """The reference's top-level definitions that ``entries`` use, transitively (themselves included)."""
    tree = ast.parse(reference_source)
    defs = {n.name: n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))}
    seen: set[str] = set()
    todo = [e for e in entries if e in defs]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        todo.extend(n.id for n in ast.walk(defs[name]) if isinstance(n, ast.Name) and n.id in defs)
    return seen


def affected_challenges(reference_source: str, catalogue: Mapping[str, Any], home: str, defined: set[str]) -> list[str]:
    """The bug's own challenge, then every other challenge whose entries use a name the bug's file defines."""
    out = [home] if home in catalogue else []
    for cid, ch in catalogue.items():
        if cid != home and reach(reference_source, ch.entries) & defined:
            out.append(cid)
    return out


def library_variants(library: Path, challenges: Iterable[str]) -> list[tuple[str, str, Path]]:
    """(challenge, variant name, layers file) for each broken file or folder of the mutant library."""
    out = []
    for cid in challenges:
        folder = library / cid / "broken"
        if not folder.is_dir():
            continue
        for path in sorted(folder.iterdir()):
            if path.suffix == ".py" and path.is_file():
                out.append((cid, path.stem, path))
            elif path.is_dir() and (path / "layers.py").is_file():
                out.append((cid, path.name, path / "layers.py"))
    return out


def _declared(source: str) -> list[str]:
    for node in ast.parse(source).body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "MAY_FAIL" for t in node.targets):
            try:
                return [str(x) for x in ast.literal_eval(node.value)]
            except ValueError:
                return []
    return []


def describe_mutant(mutant: Any) -> str:
    """A strength mutant as a person reads it: where, and what changed."""
    detail, line = mutant.detail, mutant.original_line
    what = {"arith": f"operator {detail}", "compare_op": f"comparison {detail}", "bool_op": f"logic {detail}",
            "constant": f"constant {detail}", "default": f"default {detail}",
            "drop_stmt": f"{detail} statement removed", "drop_arg": f"argument {detail} dropped",
            "swap_args": f"arguments {detail} swapped", "drop_kwarg": f"keyword {detail} dropped"}.get(
        mutant.operator, f"{mutant.operator} {detail}")
    return f"{mutant.qualname}: {what} in `{line}` (one-point mutant)"


def strength_bugs(selected: Sequence[Any], *, seed: int, profile: str, cache_dir: str | Path | None = None) -> list[Bug]:
    """The caught mutants of `validator strength --all-checks` runs found in its cache (nothing is graded)."""
    from validator import paths
    from validator.instructor.fixtures import fingerprint
    from validator.instructor.mutants import generate
    from validator.instructor.strength import default_cache_dir, mutant_key

    reference_file = paths.reference_dir() / "layers.py"
    source = reference_file.read_text(encoding="utf-8")
    cache = Path(cache_dir) if cache_dir else default_cache_dir()
    bugs = []
    for ch in selected:
        fp = fingerprint(ch, reference_file=reference_file)
        for m in generate(source, ch.entries):
            path = cache / f"{mutant_key(m, fingerprint=fp, seed=seed, profile=profile, all_checks=True)}.json"
            try:
                entry = json.loads(path.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                continue
            lost = sorted(c for c in entry.get("caught_by", []) if c != "(import)")
            if lost:
                bugs.append(Bug(id=f"strength:{ch.id}/{m.id}", source="strength", challenge=ch.id,
                                name=describe_mutant(m), lost={ch.id: lost}))
    return bugs


def build(*, library: str | Path | None = None, challenges: Sequence[str] | None = None, seed: int | None = None,
          profile: str = "batch", workers: int | None = None, timeout: float = 120.0, memory: int = 2048,
          isolate: bool = True, strength: bool = False, run_strength: bool = False,
          stream: TextIO | None = None) -> Signatures:
    """Grade the mutant library (each broken file appended to the reference) on its challenge and the
    challenges that use what it defines, and collect the bugs' lost checks; with ``strength``, add the
    caught mutants of `validator strength --all-checks` from its cache (``run_strength`` grades the
    missing ones first). ``seed`` defaults to the one `validator grade` uses (OFFICIAL_SEED): a borderline
    bug loses other checks on another seed, and its pattern would then go unnamed."""
    import os

    from validator import paths
    from validator.api import UsageError, select_challenges
    from validator.batch.grade import canary_folder, canary_problem, slot_config
    from validator.batch.pool import Outcome, Pool
    from validator.instructor.fixtures import fingerprint
    from validator.reference_side import OFFICIAL_SEED
    from validator.sandbox import Limits
    from validator.spec import load_catalogue

    seed = OFFICIAL_SEED if seed is None else seed
    say = (lambda msg: print(msg, file=stream or sys.stderr, flush=True))
    started = time.monotonic()
    reference_file = paths.reference_dir() / "layers.py"
    if not reference_file.is_file():
        raise UsageError(f"no reference at {reference_file}: `validator signatures` runs on the instructor's copy")
    library = Path(library) if library else paths.PROJECT_ROOT / "tests" / "implementations"
    if not library.is_dir():
        raise UsageError(f"{library} is not a folder: pass the mutant library with --library "
                         "(tests/implementations/<challenge>/broken/ in the course's repository)")
    catalogue = load_catalogue(paths.challenges_dir())
    selected = select_challenges(catalogue, challenges)
    selected_ids = [c.id for c in selected]
    reference = reference_file.read_text(encoding="utf-8")
    variants = library_variants(library, selected_ids)
    signatures = Signatures(seed=seed, profile=profile,
                            fingerprints={c.id: fingerprint(c, reference_file=reference_file) for c in selected})
    tasks, meta = [], {}
    with tempfile.TemporaryDirectory(prefix="validator-signatures-") as tmp:
        for i, (cid, name, layers) in enumerate(variants):
            text = layers.read_text(encoding="utf-8")
            try:
                defined = _top_level_names(text)
            except SyntaxError as exc:
                signatures.notes.append(f"{cid}/{name}: does not parse ({exc.msg}), skipped")
                continue
            folder = Path(tmp) / f"{i:04d}"
            folder.mkdir()
            (folder / "layers.py").write_text(f"{reference}\n\n# --- mutant library: {cid}/{name}\n{text}",
                                              encoding="utf-8")
            if layers.name == "layers.py":  # a folder variant: its helper modules come along
                for helper in layers.parent.glob("*.py"):
                    if helper.name != "layers.py":
                        shutil.copyfile(helper, folder / helper.name)
            graded = [c for c in affected_challenges(reference, catalogue, cid, defined) if c in selected_ids]
            tasks.append((folder.name, str(folder), graded))
            meta[folder.name] = (cid, name, text)
        if tasks:
            jobs = max(1, min(workers or os.cpu_count() or 1, len(tasks)))
            say(f"signatures: grading {len(tasks)} broken file(s) of the mutant library with {jobs} slot(s) "
                f"(seed {seed}, profile {profile})")
            limits = Limits(wall_s=float(timeout), cpu_s=max(1, int(timeout)), memory_mb=int(memory))
            config = slot_config(challenges=selected_ids, seed=seed, profile=profile, limits=limits,
                                 isolate=isolate, hide=(tmp, library))
            pool = Pool(config, workers=jobs, watchdog_s=2 * timeout + 300, keep=True)
            outcomes: dict[str, Outcome] = {}
            try:
                pool.start(jobs)
                canary: list[Outcome] = []
                with tempfile.TemporaryDirectory(prefix="validator-signatures-canary-") as ctmp:
                    pool.run([(".canary", str(canary_folder(reference_dir=paths.reference_dir(), into=ctmp)))],
                             canary.append)
                problem = canary_problem(canary[0]) if canary else "the reference was not graded"
                if problem:
                    raise RuntimeError(problem)
                pool.run(tasks, lambda o: outcomes.__setitem__(o.name, o))
            finally:
                pool.close()
            for task_name, _, _ in tasks:
                cid, name, text = meta[task_name]
                outcome = outcomes.get(task_name)
                if outcome is None or outcome.report is None or outcome.error:
                    signatures.notes.append(f"{cid}/{name}: the grader failed on it, no signature "
                                            f"({((outcome.error if outcome else None) or 'no report').strip()[-200:]})")
                    continue
                lost = {ch["id"]: list(lost_checks(ch)) for ch in outcome.report.get("challenges", [])}
                lost = {k: v for k, v in lost.items() if v}
                declared = _declared(text)
                if not lost.get(cid):
                    signatures.notes.append(f"{cid}/{name}: lost no check of {cid} with seed {seed}, profile "
                                            f"{profile}: it cannot be named")
                    continue
                beyond = sorted(set(lost[cid]) - set(declared)) if declared else []
                if beyond:
                    signatures.notes.append(f"{cid}/{name}: lost {', '.join(beyond)}, outside its MAY_FAIL")
                signatures.bugs.append(Bug(id=f"library:{cid}/{name}", source="library", challenge=cid,
                                           name=docstring_name(text, name), lost=lost,
                                           declared=declared))
    if strength or run_strength:
        if run_strength:
            from validator.instructor.strength import strength as run

            run(challenges=selected_ids, jobs=workers, seed=seed, profile=profile, all_checks=True,
                isolate=isolate, timeout=timeout, stream=stream)
        found = strength_bugs(selected, seed=seed, profile=profile)
        signatures.bugs.extend(found)
        if not found:
            signatures.notes.append("no `validator strength --all-checks` results in its cache for these challenges "
                                    "and this seed and profile: run `validator signatures --run-strength`")
    say(f"signatures: {sum(b.source == 'library' for b in signatures.bugs)} library bug(s), "
        f"{sum(b.source == 'strength' for b in signatures.bugs)} strength mutant(s) in {time.monotonic() - started:.0f} s")
    return signatures


def write(signatures: Signatures, path: str | Path) -> None:
    from validator.reporters import write_atomic

    write_atomic(path, json.dumps(signatures.to_dict(), indent=1, sort_keys=False) + "\n")


def main(*, out: str | None = None, library: str | None = None, challenges: Sequence[str] | None = None,
         seed: int | None = None, profile: str = "batch", workers: int | None = None, timeout: float = 120.0,
         isolate: bool = True, strength: bool = False, run_strength: bool = False,
         stream: TextIO | None = None) -> int:
    """`validator signatures`: exit 0 when written, 2 for usage or spec errors, 3 when the grader failed."""
    from validator.api import UsageError
    from validator.spec import SpecError

    err = stream or sys.stderr
    try:
        signatures = build(library=library, challenges=challenges, seed=seed, profile=profile, workers=workers,
                           timeout=timeout, isolate=isolate, strength=strength, run_strength=run_strength,
                           stream=err)
    except (UsageError, SpecError) as exc:
        print(f"error: {exc}", file=err)
        return 2
    except RuntimeError as exc:
        print(f"error: {exc}", file=err)
        return 3
    target = Path(out) if out else default_path()
    write(signatures, target)
    for note in signatures.notes:
        print(f"note: {note}", file=err)
    print(f"wrote {len(signatures.bugs)} signature(s) to {target}", file=err)
    return 0
