"""`validator submit-build --watch`: a warm grader that regrades what each save changed.

The first run is an ordinary `submit-build`. Then the grader stays up, with torch, the specs and
the reference already loaded, and polls the student's files. Once a save has settled (an editor
that writes a temporary file and renames it over the original, or truncates and then writes,
makes several changes within milliseconds: they are one event), it reads the files again and
regrades only the challenges whose grading could come out differently, each time in a fresh
worker forked from the grader (student code never runs in the grader, so nothing a regrade's
code did is left for the next one). The other challenges keep their last results, and the
report is drawn again in place (off a terminal, each regrade's results are printed below the
last: tests and CI read that).

What a challenge's verdict reads from the submission, its *fingerprint* (see :class:`Fingerprint`):
the text of every line its graded entries may run (:mod:`validator.reachability`: the entries,
what they call, build or read, module-level code and imports, across the submission's files), the
source scan's findings for its banned APIs anywhere in the files (an unused import is advice in
every challenge that bans it), its answers, and, for a package, its mapping. A save that leaves a
challenge's fingerprint as it was cannot change its grading. Line numbers are kept apart: lines
that only moved (a line added above the class) matter only to a result that names a line.

A file that does not parse (a half-written line) regrades nothing: the report says where, keeps
the last results, and the next save that parses is regraded. Ctrl-C stops the watch with status 0.
"""

from __future__ import annotations

import ast
import dataclasses
import fnmatch
import functools
import hashlib
import json
import os
import re
import signal
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Sequence

from validator.reachability import Source, reachable_lines
from validator.results import ChallengeResult, Report

POLL_S = 0.03     # how often the files are looked at
SETTLE_S = 0.06   # how long they must stay as they are before a change counts (one save, one event)
RESCAN_S = 1.0    # a package's folders are walked again for new files at most this often
MAX_FILES = 20    # files beside layers.py that are read (the source scan's own bound)

def file_state(path: str | os.PathLike, stat: Callable[[Any], os.stat_result] = os.stat):
    """What a save changes about a file: its modification time, size and inode (a rename-over gives a new
    one); None while it does not exist."""
    try:
        st = stat(path)
    except OSError:
        return None
    return st.st_mtime_ns, st.st_size, st.st_ino


class ChangeWatcher:
    """Polls a set of files (``files()``, asked again each time: files come and go) for a change, and
    reports it once they have stayed as they are for ``settle`` seconds.

    ``clock``, ``sleep`` and ``stat`` are the real ones unless a test passes its own.
    """

    def __init__(self, files: Callable[[], Iterable[str]], *, interval: float = POLL_S, settle: float = SETTLE_S,
                 clock: Callable[[], float] = time.monotonic, sleep: Callable[[float], None] = time.sleep,
                 stat: Callable[[Any], os.stat_result] = os.stat):
        self.files, self.interval, self.settle = files, interval, settle
        self.clock, self.sleep, self.stat = clock, sleep, stat
        self.seen = self.snapshot()   # as of the last reported change
        self.last = self.seen         # as of the last poll
        self.moved_at: float | None = None

    def snapshot(self) -> dict[str, Any]:
        return {str(f): file_state(f, self.stat) for f in self.files()}

    def poll(self) -> list[str] | None:
        """Look once: the files that changed, once the change has settled; None until then."""
        now, at = self.snapshot(), self.clock()
        if now != self.last:
            self.last, self.moved_at = now, at
            return None
        if self.moved_at is None or at - self.moved_at < self.settle:
            return None
        changed = sorted(f for f in set(now) | set(self.seen) if now.get(f) != self.seen.get(f))
        self.seen, self.moved_at = now, None
        return changed or None  # changed and changed back: nothing to do

    def wait(self) -> list[str]:
        """Block until a change has settled; the files that changed."""
        while True:
            changed = self.poll()
            if changed:
                return changed
            self.sleep(self.interval)


# -- what a challenge's grading reads ------------------------------------------------------------------------------
@dataclass(frozen=True)
class Fingerprint:
    """What one challenge's grading reads from the submission, split so that lines that only moved can be told apart.

    ``code``: the text of the lines its graded entries may run, file by file, without their numbers (every file's
    whole text where :func:`validator.reachability.reachable_lines` cannot tell); ``lines``: those lines' numbers;
    ``inputs``: anything else the checks read (the scan's findings, a package's mapping), and ``answers``, the
    challenge's answers, each as a digest.
    """

    code: tuple
    lines: tuple
    inputs: str
    answers: str


_NAMES_A_LINE = re.compile(r"\.py:\d|\bline \d")


def names_a_line(result: ChallengeResult) -> bool:
    """Whether a result quotes a place in the student's files (``layers.py:42``, ``line 42``): a traceback, a
    finding. A result that quotes none stays right when lines only move."""
    texts = [result.problem or ""] + [c.message for c in result.checks if c.status != "passed"]
    return any(_NAMES_A_LINE.search(t) for t in texts)


def needs_regrade(before: Fingerprint | None, after: Fingerprint, last: ChallengeResult | None) -> bool:
    """Whether a challenge must be graded again: its code or inputs changed, or its lines moved and its
    last result names a line."""
    if before is None or last is None:
        return True
    if (before.code, before.inputs, before.answers) != (after.code, after.inputs, after.answers):
        return True
    return before.lines != after.lines and names_a_line(last)


def _digest(data: Any) -> str:
    return hashlib.sha256(json.dumps(data, sort_keys=True, default=repr).encode()).hexdigest()


def fingerprint(sources: Sequence[Source], roots: list[tuple[str, str]], inputs: Any, answers: Any,
                places: Sequence[tuple[str, int]] = ()) -> Fingerprint:
    """A challenge's :class:`Fingerprint`: the code ``roots`` (``(module, name)`` pairs) may run in ``sources``;
    ``places`` are other lines its results may quote (its findings')."""
    reach = reachable_lines(list(sources), roots) if roots else None
    digest, answered = _digest(inputs), _digest(answers)
    if reach is None:  # names looked up at run time, an entry the source does not show: every line counts
        return Fingerprint(code=tuple((s.file, s.text) for s in sources), lines=tuple(places), inputs=digest,
                           answers=answered)
    code, lines = [], [tuple(places)]
    for s in sources:
        wanted = sorted(reach.get(s.file, ()))
        if wanted:
            text = s.text.splitlines()
            code.append((s.file, tuple(text[n - 1] if n <= len(text) else "" for n in wanted)))
            lines.append((s.file, tuple(wanted)))
    return Fingerprint(code=tuple(code), lines=tuple(lines), inputs=digest, answers=answered)


def _bans(challenge, findings: Sequence[Any]) -> tuple[list, list]:
    """The findings of a scan for every selected challenge's bans (under this challenge's allowlist) that this
    challenge's source checks report, as (what they say, where they are): constructs it does not allow, uses of
    names off its allowlist or of APIs it bans, whether reachable from its entries or not (code outside them is
    advice, which its report shows too)."""
    banned, allow = banned_apis(challenge), set(challenge.forbidden.integrity.allow)

    def bans(what: str) -> bool:  # integrity's own rule: a glob matches the dotted name used, else equality
        return any(fnmatch.fnmatchcase(what, api) if any(c in api for c in "*?[") else what == api for api in banned)

    mine = [f for f in findings if (f.what not in allow if f.construct else bans(f.what))]
    return ([(f.file, f.what, f.code, f.construct, f.unused_import, f.reachable, f.name, f.indirect, f.like)
             for f in mine], [(f.file, f.line) for f in mine])


def scans(challenges, scan: Callable[[list[str], set[str], Any], list]) -> dict[str, list]:
    """Each challenge's findings, from one ``scan(banned, allow, allowlist)`` per allowlist the challenges judge by
    (the catalogue's share the default: one scan a save), for every API those challenges ban; each challenge keeps
    what its own checks report (:func:`_bans`)."""
    groups: dict[tuple, list] = {}
    for ch in challenges:
        groups.setdefault((ch.forbidden.allowlist(), frozenset(ch.forbidden.integrity.allow)), []).append(ch)
    out: dict[str, list] = {}
    for (policy, allow), members in groups.items():
        found = scan(sorted({a for ch in members for a in banned_apis(ch)}), set(allow), policy)
        out.update((ch.id, found) for ch in members)
    return out


def banned_apis(challenge) -> list[str]:
    """Every API a source check of the challenge looks for: the challenge's list and any check's own ``apis``."""
    banned = list(challenge.forbidden.source)
    for check in challenge.checks:
        extra = (check.model_extra or {}).get("apis")
        if isinstance(extra, list):
            banned += [a for a in extra if isinstance(a, str) and a not in banned]
    return banned


def check_groups(challenge, weights: dict[str, float], n: int) -> list[list[str]]:
    """The challenge's checks in at most ``n`` groups that can be graded apart, heaviest first.

    A check stays with the checks it requires and those its hints read (``requires``, ``hint_if``): grading
    a group then gives each of its checks the verdict and message a whole run gives. ``weights`` are the
    checks' last durations (1 each when unknown); groups are filled largest-first, each into the lightest.
    """
    from validator import checks as registry

    if n <= 1:
        return [[c.id for c in challenge.checks]]
    parent = {c.id: c.id for c in challenge.checks}

    def root(cid: str) -> str:
        while parent[cid] != cid:
            parent[cid] = parent[parent[cid]]
            cid = parent[cid]
        return cid

    for check in challenge.checks:
        linked = list(check.requires)
        for rule in registry.params_of(check).hint_if:
            linked += list(rule.passed) + list(rule.failed)
        for other in linked:
            if other in parent:
                parent[root(other)] = root(check.id)
    parts: dict[str, list[str]] = {}
    for check in challenge.checks:
        parts.setdefault(root(check.id), []).append(check.id)
    weight = {r: sum(max(weights.get(cid, 1.0), 0.01) for cid in ids) for r, ids in parts.items()}
    bins: list[tuple[float, list[str]]] = [(0.0, []) for _ in range(max(1, min(n, len(parts))))]
    for r in sorted(parts, key=lambda r: -weight[r]):
        i = min(range(len(bins)), key=lambda i: bins[i][0])
        bins[i] = (bins[i][0] + weight[r], bins[i][1] + parts[r])
    order = {c.id: i for i, c in enumerate(challenge.checks)}
    return [sorted(ids, key=order.__getitem__) for _, ids in sorted(bins, key=lambda b: -b[0]) if ids]


class NotGradable(Exception):
    """A save that cannot be graded as it stands (a file that does not parse, a mapping that cannot be used);
    the message says where and what."""


def describe_syntax_error(file: str, exc: SyntaxError) -> str:
    """``layers.py:12:9: invalid syntax``, then the line with a caret under the place."""
    where = f"{file}:{exc.lineno or '?'}" + (f":{exc.offset}" if exc.offset else "")
    out = f"{where}: {exc.msg}"
    if exc.text and exc.text.strip():
        line = exc.text.rstrip("\n")
        out += f"\n    {line}"
        if exc.offset and 0 < exc.offset <= len(line) + 1:
            out += "\n    " + " " * (exc.offset - 1) + "^"
    return out


@functools.lru_cache(maxsize=64)
def _syntax_error(file: str, text: str) -> SyntaxError | None:
    try:
        ast.parse(text, filename=file)
    except SyntaxError as exc:
        return exc
    except (ValueError, RecursionError) as exc:  # a NUL byte, nesting too deep
        return SyntaxError(str(exc), (file, 1, 1, "", 1, 1))
    return None


@dataclass
class Snapshot:
    """The submission as one save left it: its modules that parse, and per challenge what grading reads."""

    fingerprints: dict[str, Fingerprint]
    package: Any = None  # the StudentPackage read at this save (a package graded through its mapping)


def _decoded(rel: str, data: bytes) -> str:
    from validator.integrity import Unreadable, decode_source

    try:
        return decode_source(rel, data)[0]
    except Unreadable as exc:
        raise NotGradable(str(exc)) from None


def _parsed_sources(texts: dict[str, str], module_of: Callable[[str], tuple[str, bool]],
                    must_parse: Callable[[dict[str, SyntaxError]], str | None]) -> list[Source]:
    """The files that parse, as sources; ``must_parse`` names the broken file grading would import, if any."""
    broken = {rel: exc for rel, text in texts.items() if (exc := _syntax_error(rel, text)) is not None}
    if broken:
        culprit = must_parse(broken)
        if culprit is not None:
            raise NotGradable(culprit)
    sources = []
    for rel, text in texts.items():
        if rel not in broken:
            module, is_package = module_of(rel)
            sources.append(Source(module, rel, text, is_package))
    return sources


class LayersFile:
    """A ``layers.py`` (and the helper modules beside it): what is watched, read and graded."""

    package = None

    def __init__(self, student_file: Path, answers_path: Path):
        self.student_file = Path(student_file)
        self.folder = self.student_file.parent
        self.answers_path = answers_path
        self.grade_path = self.student_file

    def python_files(self) -> list[Path]:
        """layers.py, the other modules beside it, and those of the packages beside it (one level)."""
        found = [self.student_file]
        try:
            entries = sorted(os.scandir(self.folder), key=lambda e: e.name)
        except OSError:
            return found
        for entry in entries:
            if len(found) >= MAX_FILES or entry.name.startswith(".") or entry.name == "__pycache__":
                continue
            if entry.name.endswith(".py") and entry.is_file(follow_symlinks=False):
                if entry.path != str(self.student_file):
                    found.append(Path(entry.path))
            elif entry.is_dir(follow_symlinks=False) and os.path.isfile(os.path.join(entry.path, "__init__.py")):
                try:
                    inner = sorted(e.name for e in os.scandir(entry.path) if e.name.endswith(".py")
                                   and e.is_file(follow_symlinks=False))
                except OSError:
                    continue
                found.extend(Path(entry.path) / name for name in inner[:MAX_FILES - len(found)])
        return found

    def files(self) -> list[str]:
        return [str(p) for p in self.python_files()] + [str(self.answers_path)]

    def _module(self, rel: str) -> tuple[str, bool]:
        if rel == "__init__.py":  # the folder itself as a package (student/__init__.py), as the scan names it
            return self.folder.name, True
        dotted = rel[:-3].replace("/", ".")
        if dotted.endswith(".__init__"):
            return dotted[:-len(".__init__")], True
        return dotted, False

    def read(self, challenges, answers: dict) -> Snapshot:
        from validator.integrity import Unreadable, scan_submission
        from validator.intake import MAX_SOURCE_BYTES, IntakeError, read_submission_file

        texts: dict[str, str] = {}
        for path in self.python_files():
            rel = path.relative_to(self.folder).as_posix()
            try:
                data = read_submission_file(path, cap=MAX_SOURCE_BYTES, what=rel)
            except IntakeError as exc:
                if path == self.student_file:
                    raise NotGradable(str(exc)) from None
                continue  # a helper nothing may import; the grading says so if one does
            texts[rel] = _decoded(rel, data)
        name = self.student_file.name

        def must_parse(broken: dict[str, SyntaxError]) -> str | None:
            if name in broken:
                return describe_syntax_error(name, broken[name])
            try:  # a helper that does not parse matters if layers.py imports it (the scan follows its imports)
                scan_submission(self.student_file, [])
            except Unreadable as exc:
                named = next((rel for rel in broken if str(exc).startswith(Path(rel).name + " ")), None)
                return describe_syntax_error(named, broken[named]) if named else str(exc)
            return None

        sources = _parsed_sources(texts, self._module, must_parse)
        try:  # one scan per allowlist for every challenge's bans; each keeps what its checks report
            findings = scans(challenges, lambda banned, allow, policy: scan_submission(
                self.student_file, banned, allow, allowed=policy))
        except Unreadable as exc:
            raise NotGradable(str(exc)) from None
        prints = {}
        for ch in challenges:
            roots = [(self.student_file.stem, entry) for entry in ch.entries]
            said, places = _bans(ch, findings[ch.id])
            prints[ch.id] = fingerprint(sources, roots, said, answers.get(ch.id), places)
        return Snapshot(prints)

    @contextmanager
    def worker(self, snapshot: Snapshot) -> Iterator[Any]:
        from validator.worker.client import Worker

        with Worker(self.student_file) as worker:
            yield worker


class PackageRoot:
    """A student's own package graded through its mapping (or a CS336 repository through its adapters)."""

    def __init__(self, root: Path, answers_path: Path, *, map_path: str | None, catalogue: dict | None = None,
                 clock: Callable[[], float] = time.monotonic):
        self.root = Path(root)
        self.answers_path = answers_path
        self.catalogue = catalogue  # the specs its mapping names (set once loaded)
        self.map_path = map_path
        self.grade_path = self.root
        self.clock = clock
        self._listed: tuple[float, list[str]] | None = None

    def files(self) -> list[str]:
        """The package's Python files and its mapping; its folders are walked again at most every RESCAN_S."""
        from validator.package import walk_package

        now = self.clock()
        if self._listed is None or now - self._listed[0] >= RESCAN_S:
            listed = [str(path) for rel, path in walk_package(self.root) if rel.endswith(".py")]
            self._listed = (now, listed)
        extra = [str(self.root / "pyproject.toml"), str(self.answers_path)]
        if self.map_path:
            extra.append(str(self.map_path))
        return self._listed[1] + extra

    @staticmethod
    def _module(rel: str) -> tuple[str, bool]:
        dotted = rel[:-3].replace("/", ".")
        if rel.endswith("/__init__.py") or rel == "__init__.py":
            return dotted.rpartition(".")[0] if "." in dotted else dotted, True
        return dotted, False

    def read(self, challenges, answers: dict) -> Snapshot:
        from validator.integrity import Unreadable, scan_package
        from validator.package import MapError, load_package

        try:
            package = load_package(self.root, self.catalogue, map_path=self.map_path, map_arg=self.map_path)
        except MapError as exc:
            raise NotGradable("the package's mapping cannot be used:\n  " + "\n  ".join(exc.problems)) from None
        texts = {rel: _decoded(rel, data) for rel, data in package.data.items()}
        modules = sorted({t.module for entries in package.targets.values() for t in entries.values()})

        def must_parse(broken: dict[str, SyntaxError]) -> str | None:
            try:  # a file that does not parse matters if a mapped module imports it
                scan_package(package.data, modules, [])
            except Unreadable as exc:
                named = next((rel for rel in broken if str(exc).startswith(rel + " ")), None)
                return describe_syntax_error(named, broken[named]) if named else str(exc)
            return None

        sources = _parsed_sources(texts, self._module, must_parse)
        try:  # one scan per allowlist for every challenge's bans, of what the mapped modules import
            findings = scans(challenges, lambda banned, allow, policy: scan_package(
                package.data, modules, banned, allow, allowed=policy))
        except Unreadable as exc:
            raise NotGradable(str(exc)) from None
        resources = hashlib.sha256(b"".join(k.encode() + hashlib.sha256(v).digest()
                                            for k, v in sorted(package.resources.items()))).hexdigest()
        prints = {}
        for ch in challenges:
            targets = {name: t for name in ch.entries if (t := package.target(ch.id, name)) is not None}
            roots = [(t.module, attr) for t in targets.values()
                     for attr in ([v["function"] for v in t.adapter["variants"]] if t.adapter else [t.attr])]
            mapping = {name: [t.module, t.attr, t.file, t.adapter] for name, t in targets.items()}
            said, places = _bans(ch, findings[ch.id])
            prints[ch.id] = fingerprint(sources, roots, {
                "findings": said, "targets": mapping, "resources": resources,
                "parameters": package.parameters.get(ch.id), "unmapped": package.unmapped.get(ch.id),
                "notes": package.notes}, answers.get(ch.id), places)
        return Snapshot(prints, package=package)

    @contextmanager
    def worker(self, snapshot: Snapshot) -> Iterator[Any]:
        with snapshot.package.staged_worker(self.root) as worker:
            yield worker


# -- the loop ------------------------------------------------------------------------------------------------------
@dataclass
class Regrade:
    """What one save did: the files that changed, the challenges graded again, how long from the save's
    detection to the redrawn report."""

    changed: list[str]
    regraded: list[str] = field(default_factory=list)
    problem: str | None = None
    seconds: float = 0.0


class WatchSession:
    """The state between saves: every selected challenge's last result and fingerprint."""

    def __init__(self, *, side, opts, first: Report, catalogue: dict, header: dict, console,
                 terminal: bool, clock: Callable[[], float] = time.monotonic):
        self.side, self.opts, self.console, self.terminal, self.clock = side, opts, console, terminal, clock
        self.catalogue = catalogue
        self.order = [c.id for c in first.challenges]
        self.selected = [catalogue[cid] for cid in self.order]
        self.results: dict[str, ChallengeResult] = {c.id: c for c in first.challenges}
        self.prints: dict[str, Fingerprint] = {}
        self.seed, self.profile, self.student = first.seed, first.profile, first.student
        self.notes = list(first.notes)
        self.header = header
        self.problem: str | None = None
        self.last: Regrade | None = None
        self._answers: tuple[Any, dict] | None = None

    # the report as it stands
    def report(self, seconds: float = 0.0) -> Report:
        return Report(challenges=[self.results[cid] for cid in self.order], seed=self.seed, student=self.student,
                      profile=self.profile, duration_s=seconds, notes=self.notes)

    def answers(self) -> dict:
        """The answers file as it stands (read again only once it changed)."""
        from validator.questions import AnswersError, load_answers

        state = file_state(self.side.answers_path, os.lstat)
        if self._answers is None or self._answers[0] != state:
            try:
                self._answers = (state, load_answers(self.side.answers_path))
            except AnswersError as exc:
                raise NotGradable(f"{self.side.answers_path}: {exc}") from None
        return self._answers[1]

    def baseline(self, before: dict[str, bytes | None]) -> None:
        """The fingerprints of what the first run graded. ``before`` is the code as it was when the first run
        started: if a save changed it since, nothing is known to be current, and the next change regrades
        everything. The answers count as they are now (the first run's prompt may have added some, and graded them)."""
        if _contents(self.side) != before:
            return
        try:
            self.prints = self.side.read(self.selected, self.answers()).fingerprints
        except NotGradable as exc:
            self.problem = str(exc)

    def on_change(self, changed: list[str]) -> Regrade:
        """Read the files again and regrade what the change could affect."""
        started = self.clock()
        event = Regrade(changed=changed)
        try:
            answers = self.answers()
            snapshot = self.side.read(self.selected, answers)
        except NotGradable as exc:
            self.problem = event.problem = str(exc)
            self.last = event
            return event
        self.problem = None
        event.regraded = [cid for cid in self.order
                          if needs_regrade(self.prints.get(cid), snapshot.fingerprints[cid], self.results.get(cid))]
        if event.regraded:
            self.announce(event)
            report = self.grade(event.regraded, snapshot, answers)
            for result in report.challenges:
                self.results[result.id] = result
            self.notes = list(report.notes)
        self.prints = snapshot.fingerprints
        event.seconds = self.clock() - started
        self.last = event
        return event

    def grade(self, ids: list[str], snapshot: Snapshot, answers: dict) -> Report:
        """Grade ``ids`` in a fresh worker (one per forked grader); a single challenge has its checks spread over
        the graders (:func:`check_groups`), since one challenge leaves every core but one idle otherwise."""
        from validator.parallel import default_jobs

        opts = self.opts
        with self.side.worker(snapshot) as worker:  # a fresh one: the last regrade's student code is gone
            if len(ids) == 1 and opts.device is None and not opts.checks:
                challenge = self.catalogue[ids[0]]
                jobs = default_jobs(len(challenge.checks)) if opts.jobs is None else max(1, opts.jobs)
                last = self.results.get(ids[0])
                groups = check_groups(challenge, {c.id: c.duration_s for c in last.checks} if last else {}, jobs)
                if len(groups) > 1:
                    return self._grade_groups(challenge, groups, worker, snapshot, answers)
            return self._grade(ids, None, worker, snapshot, answers,
                               default_jobs(len(ids)) if opts.jobs is None else max(1, opts.jobs))

    def _grade(self, ids: list[str], checks: list[str] | None, worker, snapshot: Snapshot, answers: dict,
               jobs: int) -> Report:
        from validator.api import grade

        opts = self.opts
        return grade(self.side.grade_path, challenges=ids, seed=self.seed, profile=self.profile,
                     answers=answers, checks=checks or opts.checks, challenges_dir=opts.challenges_dir,
                     reference_dir=opts.reference_dir, worker=worker, catalogue=self.catalogue,
                     student_arg=opts.student, timeout=opts.timeout, device=opts.device, jobs=jobs,
                     package=snapshot.package)

    def _grade_groups(self, challenge, groups: list[list[str]], worker, snapshot: Snapshot, answers: dict) -> Report:
        """One challenge graded as ``groups`` of checks, each in its own forked grader and worker, put back
        together in the spec's order, its questions graded here, as `grade_challenge` grades them."""
        from validator.parallel import grade_all
        from validator.questions import grade_question

        parts = grade_all(groups, worker=worker, jobs=len(groups),
                          grade_one=lambda group, on: self._grade([challenge.id], group, on, snapshot, answers, 1))
        done = {c.id: c for part in parts for c in part.challenges[0].checks}
        result = ChallengeResult(id=challenge.id, title=challenge.title,
                                 checks=[done[c.id] for c in challenge.checks if c.id in done],
                                 problem=next((p.challenges[0].problem for p in parts if p.challenges[0].problem), None),
                                 implementations=parts[0].challenges[0].implementations)
        key = self._key(challenge.id)
        given = answers.get(challenge.id, {})
        result.checks += [grade_question(q, given.get(q.id), None if key is None else (key.get(q.id) or {}))
                          for q in challenge.questions]
        return Report(challenges=[result], seed=self.seed, student=self.student, profile=parts[0].profile,
                      notes=parts[0].notes)

    def _key(self, challenge_id: str) -> dict | None:
        """The challenge's answer key as `validator.api.grade` reads it: none in a handout (answers are recorded)."""
        from validator import paths
        from validator.questions import load_key

        ref_dir = Path(self.opts.reference_dir) if self.opts.reference_dir else paths.reference_dir()
        if not (ref_dir / "layers.py").exists():
            return None
        return load_key(ref_dir / "answer_key.yaml").get(challenge_id, {})

    # what the student sees
    def status(self) -> str:
        names = sorted({Path(f).name for f in self.side.files() if os.path.exists(f)})
        watching = f"watching {', '.join(names[:6])}{' ...' if len(names) > 6 else ''}"
        event = self.last
        if event is None:
            return f"{watching} · save a file to regrade what it changed · Ctrl-C stops"
        saved = ", ".join(Path(f).name for f in event.changed[:4]) + (" ..." if len(event.changed) > 4 else "")
        when = time.strftime("%H:%M:%S")
        if event.problem:
            did = f"{saved} saved at {when}: not regraded"
        elif event.regraded:
            did = f"{saved} saved: regraded {', '.join(event.regraded)} in {event.seconds:.2f} s at {when}"
        else:
            did = f"{saved} saved at {when}: nothing the graded code reads changed, results kept"
        return f"{watching} · {did} · Ctrl-C stops"

    def announce(self, event: Regrade) -> None:
        saved = ", ".join(Path(f).name for f in event.changed[:4])
        line = f"{saved} changed: regrading {', '.join(event.regraded)} ..."
        if self.terminal:
            self.console.print(f"[dim]{line}[/]", soft_wrap=True)
        else:
            self.console.print(f"\n[watch] {line}", soft_wrap=True, markup=False)

    def show(self, event: Regrade | None) -> None:
        from validator.reporters import terminal as view

        if self.terminal:
            view.redraw(self.console, lambda c: view.render_report(
                c, self.report(event.seconds if event else 0.0), header=self.header, problem=self.problem,
                status=self.status()))
        elif event is None:
            self.console.print(f"\n[watch] {self.status()}", soft_wrap=True, markup=False)
        elif event.problem:
            self.console.print(f"\n[watch] not regraded: {event.problem}\n[watch] the results above are from the last "
                               "version that could be graded; fix it and save", soft_wrap=True, markup=False)
        else:
            for cid in event.regraded:
                view.render_challenge(self.console, self.results[cid])
            if event.regraded:
                view.render_summary(self.console, self.report(event.seconds))
            self.console.print(f"[watch] {self.status()}", soft_wrap=True, markup=False)
        if event is not None and event.regraded:
            self.write_files()

    def write_files(self) -> None:
        from validator.reporters.json_report import write_json
        from validator.submit import write_html_report

        if self.opts.json_path:
            write_json(self.report(), self.opts.json_path)
        if self.opts.html_path:
            write_html_report(self.report(), self.opts.html_path, self.console)


def student_side(opts):
    """The submission `submit-build` was given: a layers.py, or a package root with its answers file."""
    from validator import paths
    from validator.api import UsageError
    from validator.submit import _notebook_target, _package_root

    root = _package_root(opts.student, opts.map_path)
    if root is not None:
        answers = Path(opts.answers) if opts.answers else root / "answers.yaml"
        return PackageRoot(root, answers, map_path=opts.map_path)
    if _notebook_target(opts.student) is not None:
        raise UsageError(f"--watch follows a layers.py or a package, not a notebook yet ({opts.student} is graded as "
                         "one): grade it from inside Jupyter (validator.check(\"CHALLENGE\") in a cell, after running "
                         "the cells you changed), or run submit-build without --watch after each save")
    student_file = paths.student_file(opts.student)
    answers = Path(opts.answers) if opts.answers else student_file.parent / "answers.yaml"
    return LayersFile(student_file, answers)


@contextmanager
def _stops_on_term() -> Iterator[None]:
    """SIGTERM and SIGHUP stop the watch as Ctrl-C does (a test ending it, its terminal closing): through the same
    clean-up, so no worker or forked grader is left behind."""
    def stop(signum, frame):
        raise KeyboardInterrupt

    wanted = [sig for sig in (signal.SIGTERM, getattr(signal, "SIGHUP", None))  # left alone where ignored (nohup)
              if sig is not None and signal.getsignal(sig) is not signal.SIG_IGN]
    previous = {sig: signal.signal(sig, stop) for sig in wanted}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def watch_build(opts, *, console=None, first_run: Callable[..., tuple[int, Report | None]] | None = None,
                watcher: ChangeWatcher | None = None) -> int:
    """`submit-build --watch`: grade as usual, then regrade on every save until Ctrl-C (exit status 0).

    ``opts`` are the run's :class:`validator.submit.SubmitOptions`; the first run is ``submit_build`` with them
    (``first_run`` in tests).
    """
    from validator import paths
    from validator.spec import load_catalogue
    from validator.submit import make_console, submit_build
    from validator.worker.client import warm_for_regrades

    options = {f.name: getattr(opts, f.name) for f in dataclasses.fields(opts)}
    console = console or make_console()
    terminal = console.is_terminal
    side = student_side(opts)
    interrupt = signal.getsignal(signal.SIGINT)
    with _stops_on_term():
        try:
            watcher = watcher or ChangeWatcher(side.files)  # before the first run: a save during it is seen
            before = _contents(side)
            _, first = (first_run or submit_build)(console=console, **options)
            if first is None:
                return 0
            catalogue = load_catalogue(opts.challenges_dir or paths.challenges_dir())
            side.catalogue = catalogue
            header = dict(seed=first.seed, profile=first.profile, student=first.student,
                          challenges=list(opts.challenges or []), device=opts.device, student_arg=opts.student,
                          checks=list(opts.checks or []), map_arg=opts.map_path)
            session = WatchSession(side=side, opts=opts, first=first, catalogue=catalogue, header=header,
                                   console=console, terminal=terminal)
            session.baseline(before)
            warm_for_regrades()
            session.show(None)
            while True:
                changed = watcher.wait()
                session.show(session.on_change(changed))
        except KeyboardInterrupt:
            signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C must not cut the clean-up short
            console.print("\nstopped watching", markup=False)
            return 0
        finally:
            signal.signal(signal.SIGINT, interrupt)


def _contents(side) -> dict[str, bytes | None]:
    """The bytes of the submission's code files (not the answers), to tell whether they changed meanwhile."""
    out: dict[str, bytes | None] = {}
    for name in side.files():
        if Path(name) != Path(side.answers_path):
            try:
                out[name] = Path(name).read_bytes()
            except OSError:
                out[name] = None
    return out
