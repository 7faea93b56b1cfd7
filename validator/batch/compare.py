"""Regrades with an audit: what a rerun changed, for whom, and why.

Every `validator grade` run records in its manifest what its verdicts depend on
(:func:`run_fingerprints`): per challenge, a digest of the graded part of its spec, of each check's
and each question's spec (points included; the answer key's answer with each question), of the
reference code its entries use, and, for the whole run, a digest per grader source file (by syntax
tree: comments and layout do not count), plus a digest of each submission's files. `validator grade
--compare PREVIOUS_OUT` then lists, per student and per check, every verdict or score that moved
and the recorded differences that explain it (:func:`compare`): the submission itself, that
check's spec, the challenge's spec, the reference, the grader's files, the seed or profile; a change
none of them explains is said to be one (a timing-dependent verdict, or nondeterminism to report).

With ``no_lowering`` the gradebook keeps, per student, the higher of the previous and the new grade
(as shares of their maximum), and the comparison says for whom it did.
"""

from __future__ import annotations

import ast
import csv
import hashlib
import io
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

_DOC_ONLY = ("title", "summary", "contract", "background", "hints", "questions", "strength", "checks")
_CHECK_DOC_ONLY = ("title", "hint")
_QUESTION_DOC_ONLY = ("prompt", "hint", "explanation")
# grader files whose code cannot change a verdict: presentation, instructor tools, this audit
_NOT_VERDICT = ("reporters/", "instructor/", "batch/dashboard.py", "batch/compare.py", "batch/similarity.py",
                "batch/signatures.py", "batch/merge.py", "batch/progress.py", "cli.py", "pytest_plugin.py",
                "__main__.py")


def _digest(obj: Any) -> str:
    data = obj if isinstance(obj, bytes) else json.dumps(obj, sort_keys=True, default=str).encode()
    return hashlib.sha256(data).hexdigest()[:16]


def _code_digest(path: Path) -> str:
    text = path.read_text(encoding="utf-8")
    try:
        return _digest(ast.dump(ast.parse(text)).encode())
    except SyntaxError:
        return _digest(text.encode())


def grader_digests() -> dict[str, str]:
    """A digest per grader source file that can change a verdict (relative to the ``validator`` package)."""
    import validator

    root = Path(validator.__file__).resolve().parent
    out = {}
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        if not any(rel == skip or rel.startswith(skip) for skip in _NOT_VERDICT):
            out[rel] = _code_digest(path)
    return out


def challenge_digests(challenge: Any, *, reference_file: Path, key: Mapping[str, Any] | None) -> dict[str, Any]:
    """What one challenge's verdicts depend on, apart from the grader and the submission."""
    spec = challenge.model_dump(mode="json")
    checks = {c["id"]: _digest({k: v for k, v in c.items() if k not in _CHECK_DOC_ONLY})
              for c in spec.get("checks", [])}
    questions = {}
    for q in spec.get("questions", []):
        entry = (key or {}).get(q["id"])
        answer = entry.get("answer") if isinstance(entry, Mapping) else entry
        questions[q["id"]] = _digest([{k: v for k, v in q.items() if k not in _QUESTION_DOC_ONLY}, answer])
    try:
        from validator.instructor.fixtures import reference_digest

        reference = _digest(reference_digest(reference_file, challenge.entries))
    except (ImportError, OSError):
        reference = _digest(reference_file.read_bytes()) if reference_file.is_file() else ""
    return {"spec": _digest({k: v for k, v in spec.items() if k not in _DOC_ONLY}), "checks": checks,
            "questions": questions, "reference": reference}


def run_fingerprints(challenges: Sequence[Any], *, reference_dir: Path) -> dict[str, Any]:
    import yaml

    key_file = reference_dir / "answer_key.yaml"
    try:
        keys = yaml.safe_load(key_file.read_text(encoding="utf-8")) if key_file.is_file() else {}
    except (OSError, yaml.YAMLError):
        keys = {}
    keys = keys if isinstance(keys, dict) else {}
    return {"grader": grader_digests(),
            "challenges": {c.id: challenge_digests(c, reference_file=reference_dir / "layers.py", key=keys.get(c.id))
                           for c in challenges}}


def submission_digest(files: Mapping[str, str], answers: bytes | None) -> str:
    h = hashlib.sha256()
    for rel in sorted(files):
        h.update(rel.encode("utf-8", "surrogatepass") + b"\0" + files[rel].encode("utf-8", "surrogatepass") + b"\0")
    h.update(b"answers\0" + (answers if answers is not None else b"(none)"))
    return h.hexdigest()[:16]


# -- reading a previous run -----------------------------------------------------------------------
def load_run(folder: str | Path) -> dict[str, Any]:
    """A grade output folder's record: ``run.json`` (written by merge) or its shard manifests combined."""
    from validator.api import UsageError

    folder = Path(folder)
    run = folder / "run.json"
    if run.is_file():
        return json.loads(run.read_text(encoding="utf-8"))
    manifests = [json.loads(p.read_text(encoding="utf-8")) for p in sorted((folder / "shards").glob("shard-*-of-*.json"))]
    if not manifests:
        raise UsageError(f"{folder} is not a `validator grade` output folder (no run.json, no shards/shard-I-of-N.json)")
    combined = combine(manifests)
    return combined


def combine(manifests: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """One record for several shards of a run (their submissions and digests put together)."""
    first = manifests[0]
    out = {k: first.get(k) for k in ("seed", "profile", "challenges", "fingerprints")}
    out["submissions"] = sorted({n for m in manifests for n in m.get("submissions", [])})
    out["submission_digests"] = {k: v for m in manifests for k, v in (m.get("submission_digests") or {}).items()}
    out["grader_failures"] = sorted({n for m in manifests for n in m.get("grader_failures", [])})
    return out


# -- the comparison --------------------------------------------------------------------------------
@dataclass
class CheckChange:
    challenge: str
    check: str
    kind: str
    old: dict[str, Any] | None  # status, score, max_score; None: not in the previous report
    new: dict[str, Any] | None
    why: list[str] = field(default_factory=list)


@dataclass
class StudentChange:
    name: str
    old_score: float | None
    old_max: float | None
    new_score: float | None
    new_max: float | None
    checks: list[CheckChange] = field(default_factory=list)
    kept_previous: bool = False  # --no-lowering kept the previous grade in the gradebook

    @property
    def direction(self) -> str:
        if self.new_score is None:
            return "removed"
        if self.old_score is None:
            return "added"
        old, new = _share(self.old_score, self.old_max), _share(self.new_score, self.new_max)
        return "up" if new > old + 1e-9 else "down" if new < old - 1e-9 else "same"

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "old": {"score": self.old_score, "max_score": self.old_max},
                "new": {"score": self.new_score, "max_score": self.new_max}, "direction": self.direction,
                "kept_previous": self.kept_previous,
                "checks": [{"challenge": c.challenge, "check": c.check, "kind": c.kind, "old": c.old, "new": c.new,
                            "why": list(c.why)} for c in self.checks]}


@dataclass
class Comparison:
    previous: str
    changes: list[StudentChange]  # only students whose score or some check's verdict changed, or added/removed
    unchanged: int
    run_differences: list[str]  # what differs between the two runs' records, as sentences
    no_lowering: bool = False

    @property
    def kept(self) -> list[str]:
        return [c.name for c in self.changes if c.kept_previous]

    def reasons(self) -> dict[str, int]:
        """Each reason, with the number of changed check verdicts it explains."""
        out: dict[str, int] = {}
        for s in self.changes:
            for c in s.checks:
                for why in c.why:
                    out[why] = out.get(why, 0) + 1
        return dict(sorted(out.items(), key=lambda kv: -kv[1]))

    def to_dict(self) -> dict[str, Any]:
        return {"previous": self.previous, "no_lowering": self.no_lowering, "unchanged": self.unchanged,
                "changed": len(self.changes), "kept_previous": self.kept, "run_differences": list(self.run_differences),
                "reasons": self.reasons(), "students": [c.to_dict() for c in self.changes]}

    def summary(self) -> str:
        ups = sum(c.direction == "up" for c in self.changes)
        downs = sum(c.direction == "down" for c in self.changes)
        verdicts = sum(len(c.checks) for c in self.changes)
        line = (f"regrade against {self.previous}: {len(self.changes)} submission(s) changed ({ups} up, {downs} down), "
                f"{verdicts} check verdict(s); {self.unchanged} unchanged")
        if self.no_lowering:
            line += f"; --no-lowering kept the previous grade for {len(self.kept)}"
        return line


def _share(score: float | None, maximum: float | None) -> float:
    return (score or 0.0) / maximum if maximum else 0.0


def _verdicts(report: Any) -> dict[tuple[str, str], tuple[str, dict[str, Any]]]:
    return {(ch.id, c.id): (c.kind, {"status": c.status, "score": c.score, "max_score": c.max_score})
            for ch in report.challenges for c in ch.checks}


def run_differences(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    out = []
    for key in ("seed", "profile"):
        if old.get(key) != new.get(key):
            out.append(f"{key} {old.get(key)!r} -> {new.get(key)!r}")
    og, ng = (old.get("fingerprints") or {}).get("grader"), (new.get("fingerprints") or {}).get("grader")
    if og is None:
        out.append("the previous run recorded no fingerprints (an older grader): reasons cannot be named")
    elif og != ng:
        files = sorted(f for f in set(og) | set(ng or {}) if og.get(f) != (ng or {}).get(f))
        out.append("grader code changed: " + ", ".join(files[:12]) + (" ..." if len(files) > 12 else ""))
    oc, nc = (old.get("fingerprints") or {}).get("challenges") or {}, (new.get("fingerprints") or {}).get("challenges") or {}
    for cid in sorted(set(oc) & set(nc)):
        a, b = oc[cid], nc[cid]
        for part in ("spec", "reference"):
            if a.get(part) != b.get(part):
                out.append(f"{cid}: {'the challenge spec' if part == 'spec' else 'the reference'} changed")
        for what in ("checks", "questions"):
            changed = sorted(k for k in set(a.get(what, {})) | set(b.get(what, {}))
                             if a.get(what, {}).get(k) != b.get(what, {}).get(k))
            if changed:
                out.append(f"{cid}: {what} changed: {', '.join(changed)}")
    return out


def _why(cid: str, check: str, kind: str, old_run: Mapping[str, Any], new_run: Mapping[str, Any],
         submission_changed: bool | None) -> list[str]:
    reasons = []
    if submission_changed:
        reasons.append("the submission changed")
    ofp, nfp = old_run.get("fingerprints") or {}, new_run.get("fingerprints") or {}
    oc, nc = (ofp.get("challenges") or {}).get(cid), (nfp.get("challenges") or {}).get(cid)
    if oc is not None and nc is not None:
        what = "questions" if kind == "question" else "checks"
        a, b = oc.get(what, {}).get(check), nc.get(what, {}).get(check)
        if a is None and b is not None:
            reasons.append(f"{cid}/{check} is new in the spec")
        elif a is not None and b is None:
            reasons.append(f"{cid}/{check} was removed from the spec")
        elif a != b:
            reasons.append(f"the spec of {cid}/{check} changed" + (" (or its answer key)" if kind == "question" else ""))
        if oc.get("spec") != nc.get("spec"):
            reasons.append(f"the spec of {cid} changed (beyond its checks)")
        if oc.get("reference") != nc.get("reference") and kind != "question":
            reasons.append(f"the reference code {cid} uses changed")
    og, ng = ofp.get("grader"), nfp.get("grader")
    if og is not None and ng is not None and og != ng and kind != "question":
        files = sorted(f for f in set(og) | set(ng) if og.get(f) != ng.get(f))
        reasons.append("grader code changed: " + ", ".join(files[:6]) + (" ..." if len(files) > 6 else ""))
    for key in ("seed", "profile"):
        if old_run.get(key) != new_run.get(key):
            reasons.append(f"the {key} changed ({old_run.get(key)!r} -> {new_run.get(key)!r})")
    if not reasons:
        reasons.append("nothing recorded changed: a timing-dependent verdict, or nondeterminism in the grader "
                       "(worth a report)" if ofp else "unknown: the previous run recorded no fingerprints")
    return reasons


def compare(*, previous_dir: str | Path, previous_run: Mapping[str, Any], current_run: Mapping[str, Any],
            current: Iterable[tuple[str, Any]], no_lowering: bool = False, load_previous=None,
            whole: bool = True) -> Comparison:
    """Compare this run's reports (``current``: (name, Report)) with the previous run's.

    A previous report is read from ``previous_dir/NAME.json`` (or by ``load_previous(name)``) one at a
    time. ``whole``: this run graded the whole class, so a previous submission it lacks was removed (a
    shard compares only its own).
    """
    from validator.batch.reports import report_from_dict

    previous_dir = Path(previous_dir)

    def read(name: str):
        if load_previous is not None:
            return load_previous(name)
        path = previous_dir / f"{name}.json"
        if not path.is_file():
            return None
        return report_from_dict(json.loads(path.read_text(encoding="utf-8")))

    old_names = set(previous_run.get("submissions") or [])
    old_digests, new_digests = previous_run.get("submission_digests") or {}, current_run.get("submission_digests") or {}
    changes, unchanged, seen = [], 0, set()
    for name, report in current:
        seen.add(name)
        old = read(name) if (name in old_names or not old_names) else None
        if old is None:
            changes.append(StudentChange(name, None, None, report.score, report.max_score))
            continue
        sub_changed = None
        if name in old_digests and name in new_digests:
            sub_changed = old_digests[name] != new_digests[name]
        before, after = _verdicts(old), _verdicts(report)
        moved = []
        for key in sorted(set(before) | set(after)):
            a, b = before.get(key), after.get(key)
            if a is not None and b is not None and a[1] == b[1]:
                continue
            kind = (b or a)[0]
            moved.append(CheckChange(key[0], key[1], kind, a[1] if a else None, b[1] if b else None,
                                     _why(key[0], key[1], kind, previous_run, current_run, sub_changed)))
        change = StudentChange(name, old.score, old.max_score, report.score, report.max_score, moved)
        if no_lowering and change.direction == "down":
            change.kept_previous = True
        if moved or change.direction != "same":
            changes.append(change)
        else:
            unchanged += 1
    for name in sorted(old_names - seen) if whole else ():
        old = read(name)
        changes.append(StudentChange(name, old.score if old else None, old.max_score if old else None, None, None))
    return Comparison(previous=str(previous_dir), changes=changes, unchanged=unchanged,
                      run_differences=run_differences(previous_run, current_run), no_lowering=no_lowering)


def gradebook_rows(rows: Sequence[tuple[str, Any]], comparison: Comparison | None, *, previous_dir: str | Path) -> list:
    """The rows for grades.csv: with --no-lowering, the previous report for each student it kept."""
    if comparison is None or not comparison.kept:
        return list(rows)
    from validator.batch.reports import report_from_dict

    kept = set(comparison.kept)
    out = []
    for name, report in rows:
        if name in kept:
            report = report_from_dict(json.loads((Path(previous_dir) / f"{name}.json").read_text(encoding="utf-8")))
        out.append((name, report))
    return out


def comparison_csv(comparison: Comparison) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["name", "old_score", "old_max", "new_score", "new_max", "direction", "kept_previous",
                     "changed_checks", "why"])
    for c in sorted(comparison.changes, key=lambda c: c.name):
        reasons = list(dict.fromkeys(w for ch in c.checks for w in ch.why))
        name = "'" + c.name if c.name[:1] in ("=", "+", "-", "@") else c.name
        writer.writerow([name, _fmt(c.old_score), _fmt(c.old_max), _fmt(c.new_score), _fmt(c.new_max), c.direction,
                         "yes" if c.kept_previous else "", " ".join(f"{x.challenge}/{x.check}" for x in c.checks),
                         " | ".join(reasons)[:2000]])
    return out.getvalue()


def _fmt(x: float | None) -> str:
    return "" if x is None else f"{x:g}"


def write(comparison: Comparison, out: Path) -> None:
    from validator.reporters import write_atomic

    write_atomic(out / "compare.json", json.dumps(comparison.to_dict(), indent=1) + "\n")
    write_atomic(out / "compare.csv", comparison_csv(comparison))
