"""`validator release`: a student handout (`--out`) or an autograder bundle (`--autograder`).

The handout holds the stub, the answers template, the specs, their pages, the
frozen reference results and the grader, and nothing that gives a solution
away: no reference source, no answer key, no instructor tools. It is scanned
for leaks before the command reports success. The autograder bundle holds
everything needed to grade a submission, with a Gradescope ``setup.sh`` /
``run_autograder`` pair and a GitHub Actions workflow, which grade through the
batch grader's sandbox (see :mod:`validator.instructor.gradescope`).
"""

from __future__ import annotations

import lzma
import re
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

import yaml

from validator import paths
from validator.instructor import stubgen
from validator.reference_side import KEY_HEX, SUFFIX, versions
from validator.spec import SpecError, load_catalogue

EXIT_OK, EXIT_PROBLEMS, EXIT_USAGE = 0, 1, 2
# Instructor tools stay out of a handout (the engine's reference_side.py replays the frozen reference there).
HANDOUT_INSTRUCTOR_FILES = ("__init__.py",)
IGNORED = shutil.ignore_patterns("__pycache__", "*.pyc", ".pytest_cache", ".hypothesis")
MIN_LEAK_LINE = 32  # shorter single lines ('raise ValueError(') are not telling; pairs are


class ReleaseError(Exception):
    """The release cannot be built; the message says why."""


# -- leak search ----------------------------------------------------------------------
@dataclass(frozen=True)
class Leak:
    path: str
    what: str


def secrets(reference_file: Path, key_file: Path, handed_out: str) -> list[tuple[str, str]]:
    """(needle, description) pairs that must appear nowhere in a handout.

    ``handed_out`` is what the instructor gives students on purpose (the stub and the specs):
    a solution line quoted there (a hint naming the call to make) is not a leak.
    """
    out: list[tuple[str, str]] = [(stubgen.BEGIN, "a solution marker"), (stubgen.END, "a solution marker")]
    source = reference_file.read_text(encoding="utf-8")
    given = " ".join(handed_out.split())
    lines = [line for line in stubgen.solution_lines(source) if not line.startswith("#")]
    for i, line in enumerate(lines):
        if len(line) >= MIN_LEAK_LINE and " ".join(line.split()) not in given:
            out.append((line, f"a line of the reference solution ({line[:60]!r})"))
        if i + 1 < len(lines):
            pair = f"{line} {lines[i + 1]}"
            if " ".join(pair.split()) not in given:
                out.append((pair, f"two lines of the reference solution ({pair[:60]!r})"))
    key = yaml.safe_load(key_file.read_text(encoding="utf-8")) if key_file.exists() else {}
    for cid, questions in (key or {}).items():
        for qid, entry in (questions or {}).items():
            if not isinstance(entry, dict):
                continue
            explanation = " ".join(str(entry.get("explanation") or "").split())
            if len(explanation) >= MIN_LEAK_LINE:
                out.append((explanation[:80], f"the answer key's explanation for {cid}.{qid}"))
            answer = entry.get("answer")
            # A number the specs already state (a vocabulary size, say) gives nothing away.
            if isinstance(answer, (int, float)) and not isinstance(answer, bool) and len(str(answer)) >= 4 \
                    and str(answer) not in given:
                out.append((str(answer), f"the answer key's answer for {cid}.{qid}"))
    return out


def disclosed_lines(reference_file: Path, handed_out: str) -> list[str]:
    """Solution lines that the stub or a spec quotes on purpose (reported, not refused)."""
    given = " ".join(handed_out.split())
    return [line for line in stubgen.solution_lines(reference_file.read_text(encoding="utf-8"))
            if len(line) >= MIN_LEAK_LINE and not line.startswith("#") and " ".join(line.split()) in given]


def handed_out_text(student_dir: Path, challenges_dir: Path, catalogue: Iterable[str]) -> str:
    parts = [(student_dir / "layers.py").read_text(encoding="utf-8")]
    parts += [(challenges_dir / f"{cid}.yaml").read_text(encoding="utf-8") for cid in catalogue]
    return "\n".join(parts)


def _fixture_strings(data: bytes) -> str | None:
    """The text a fixture holds: every string of its JSON header (keys, exception messages, names).

    Its numbers (shapes, byte lengths, seeds), its call keys (hex digests) and raw tensor bytes are
    data, not prose: a 4-digit answer turns up among them by chance (in a digest, or as the byte
    length of 384 float32 values), which is no leak.
    None where the file is not a fixture this validator can read; it is then scanned whole.
    """
    import json
    import re
    import struct

    digest = re.compile(rf"^[0-9a-f]{{{KEY_HEX}}}$")
    try:
        (size,) = struct.unpack_from("<I", data)
        header = json.loads(data[4:4 + size])
    except (struct.error, ValueError):
        return None
    found: list[str] = []

    def walk(obj) -> None:
        if isinstance(obj, str):
            found.append(obj)
        elif isinstance(obj, dict):
            for k, v in obj.items():
                if not digest.match(str(k)):
                    found.append(str(k))
                walk(v)
        elif isinstance(obj, list):
            for v in obj:
                walk(v)

    walk(header)
    return "\n".join(found)


def readable_texts(root: Path) -> Iterable[tuple[Path, str]]:
    """Every file as text: plain files decoded, fixtures as the strings they hold, other binaries as latin-1."""
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        data = path.read_bytes()
        if path.suffix == SUFFIX:
            try:
                data = lzma.decompress(data)
            except lzma.LZMAError:
                pass
            else:
                text = _fixture_strings(data)
                if text is not None:
                    yield path, text
                    continue
        try:
            yield path, data.decode("utf-8")
        except UnicodeDecodeError:
            yield path, data.decode("latin-1")


def find_leaks(root: Path, needles: list[tuple[str, str]]) -> list[Leak]:
    leaks: list[Leak] = []
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root).as_posix()
        if path.name.startswith("answer_key") or rel.split("/")[0] == "reference":
            leaks.append(Leak(rel, "instructor-only file"))
    for path, text in readable_texts(root):
        squashed = " ".join(text.split())
        for needle, what in needles:
            if needle in text or " ".join(needle.split()) in squashed:
                leaks.append(Leak(path.relative_to(root).as_posix(), what))
    return leaks


# -- building ------------------------------------------------------------------------
def _fresh_dir(out: Path, force: bool) -> None:
    if out.exists() and any(out.iterdir()):
        if not force:
            raise ReleaseError(f"{out} exists and is not empty (pass --force to replace it)")
        shutil.rmtree(out)
    out.mkdir(parents=True, exist_ok=True)


def without_strength(text: str) -> str:
    """A spec's text without its top-level `strength:` block (and the comment just above it): the
    equivalence marks of `validator strength` name the reference's lines and say how it works."""
    lines = text.splitlines(True)
    out: list[str] = []
    skipping = False
    for line in lines:
        if re.match(r"strength\s*:", line):
            skipping = True
            while out and out[-1].startswith("#"):
                out.pop()
            continue
        if skipping and re.match(r"[A-Za-z_#]", line):
            skipping = False
        if not skipping:
            out.append(line)
    return "".join(out)


def _copy_challenges(src: Path, dest: Path, catalogue: Iterable[str]) -> None:
    (dest / "fixtures").mkdir(parents=True, exist_ok=True)
    for cid in catalogue:
        shutil.copy2(src / f"{cid}.md", dest / f"{cid}.md")
        (dest / f"{cid}.yaml").write_text(without_strength((src / f"{cid}.yaml").read_text(encoding="utf-8")),
                                          encoding="utf-8")
        fixture = src / "fixtures" / f"{cid}{SUFFIX}"
        if fixture.exists():
            shutil.copy2(fixture, dest / "fixtures" / fixture.name)


def _pinned_pyproject(text: str) -> str:
    """Pin hypothesis to the version that recorded the fixtures: its search must replay exactly."""
    return re.sub(r'"hypothesis[^"]*"', f'"hypothesis=={versions()["hypothesis"]}"', text)


HANDOUT_README = """# {title}

Your handout for the embedding challenges.

1. Read a challenge's page, `challenges/<id>.md`, and the docstrings in
   `student/layers.py`.
2. Implement it in `student/layers.py`.
3. Grade it: `validator submit-build --challenge <id>` (or all challenges with
   `validator submit-build`).
4. Answer the questions in `student/answers.yaml`.

Set up once (a CPU build of torch is enough):

```bash
python3 -m venv .venv && . .venv/bin/activate
pip install torch=={torch} --index-url https://download.pytorch.org/whl/cpu
pip install -e .
```

There is no reference implementation in this handout. `submit-build` grades
your code against reference results recorded for seeds {seeds}: it picks
one of them (or pass `--seed`), and every failure tells you the command that
replays it. Checks that need the reference itself (timing) are reported as
skipped, "deferred to official grading"; your answers are recorded here and
graded when you submit. `hypothesis` is pinned to {hypothesis} because the
recorded cases depend on its search.
"""


def handout(out: Path, *, force: bool = False, challenges_dir: Path | None = None,
            reference_dir: Path | None = None, student_dir: Path | None = None) -> tuple[list[str], list[str]]:
    """Build a student handout in ``out``; returns its top-level entries and the solution lines that
    the specs quote on purpose (hints), which the leak search lets through."""
    from validator.reference_side import RECORD_SEEDS
    from validator.instructor.regenerate import plan

    root = paths.PROJECT_ROOT
    challenges_dir = challenges_dir or paths.challenges_dir()
    reference_dir = reference_dir or paths.reference_dir()
    student_dir = student_dir or root / "student"
    catalogue = load_catalogue(challenges_dir)
    todo = plan(catalogue, reference_file=reference_dir / "layers.py", challenges_dir=challenges_dir,
                student_dir=student_dir)
    stale = [p for p, t in todo.texts.items() if not p.exists() or p.read_text(encoding="utf-8") != t]
    stale += [challenges_dir / "fixtures" / f"{c}{SUFFIX}" for c in todo.stale_fixtures]
    if stale:
        raise ReleaseError("stale generated files, run `validator regenerate` first: "
                           + ", ".join(str(p) for p in stale))
    _fresh_dir(out, force)
    shutil.copytree(root / "validator", out / "validator", ignore=IGNORED)
    instructor = out / "validator" / "instructor"
    for path in instructor.iterdir():
        if path.name not in HANDOUT_INSTRUCTOR_FILES:
            shutil.rmtree(path) if path.is_dir() else path.unlink()
    (out / "student").mkdir()
    for name in ("layers.py", "answers.yaml"):
        shutil.copy2(student_dir / name, out / "student" / name)
    _copy_challenges(challenges_dir, out / "challenges", catalogue)
    pyproject = root / "pyproject.toml"
    if pyproject.exists():
        (out / "pyproject.toml").write_text(_pinned_pyproject(pyproject.read_text(encoding="utf-8")),
                                            encoding="utf-8")
    v = versions()
    (out / "README.md").write_text(HANDOUT_README.format(
        title="LLM layers from scratch: student handout", torch=v["torch"], hypothesis=v["hypothesis"],
        seeds=", ".join(map(str, RECORD_SEEDS))), encoding="utf-8")
    (out / ".gitignore").write_text("__pycache__/\n*.pyc\n.hypothesis/\n.venv/\n*.egg-info/\n", encoding="utf-8")
    given = handed_out_text(student_dir, challenges_dir, catalogue)
    leaks = find_leaks(out, secrets(reference_dir / "layers.py", reference_dir / "answer_key.yaml", given))
    if leaks:
        shutil.rmtree(out)
        raise ReleaseError("the handout would leak, so it was removed:\n" + "\n".join(
            f"  {leak.path}: {leak.what}" for leak in leaks[:20]))
    return sorted(p.name for p in out.iterdir()), disclosed_lines(reference_dir / "layers.py", given)


SETUP_SH = """#!/usr/bin/env bash
# Gradescope: install the grader's dependencies (runs once, when the image is built). The grader itself is
# not installed: run_autograder runs it from the bundle's folder, where it finds its challenges and reference.
set -euo pipefail
PY=${{PYTHON:-python3}}
$PY -m pip install --upgrade pip
$PY -m pip install "torch=={torch}" --index-url https://download.pytorch.org/whl/cpu
$PY -m pip install {requirements}
"""

RUN_AUTOGRADER = """#!/usr/bin/env bash
# Gradescope: grade $AUTOGRADER_ROOT/submission (default /autograder) as `validator grade` does -- the
# canary first, then the submission in the sandbox -- and write $AUTOGRADER_ROOT/results/results.json.
# Run it as root where namespaces are allowed; otherwise it refuses to give a score unless
# VALIDATOR_ALLOW_DEGRADED=1 (or allow_degraded: true in autograder.yaml).
# PYTHON, VALIDATOR_PROFILE, AUTOGRADER_TIMEOUT and AUTOGRADER_MEMORY override the defaults.
set -uo pipefail
# Gradescope unpacks the bundle into /autograder/source and runs a copy of this script from /autograder;
# run in place (the GitHub step, by hand) the bundle is this script's own folder.
HERE="$(cd "$(dirname "$0")" && pwd)"
if [ -d "$HERE/source/validator" ]; then SRC="$HERE/source"; else SRC="$HERE"; fi
PY=${PYTHON:-python3}
export PYTHONPATH="$SRC" PYTHONDONTWRITEBYTECODE=1
cd "$SRC"
exec "$PY" -m validator.instructor.gradescope --root "${AUTOGRADER_ROOT:-/autograder}" \\
  --profile "${VALIDATOR_PROFILE:-batch}" --timeout "${AUTOGRADER_TIMEOUT:-300}" --memory "${AUTOGRADER_MEMORY:-2048}"
"""

GRADE_GITHUB = """#!/usr/bin/env bash
# GitHub Actions' grading step (also runnable by hand): grade $GITHUB_WORKSPACE/submission through
# run_autograder, as root (sudo) so that the sandbox is complete, then print the report.
set -uo pipefail
SRC="$(cd "$(dirname "$0")" && pwd)"
WS=${GITHUB_WORKSPACE:-$SRC}
PY=${PYTHON:-$(command -v python3)}
export AUTOGRADER_ROOT=${AUTOGRADER_ROOT:-${RUNNER_TEMP:-/tmp}/autograder}
rm -rf "$AUTOGRADER_ROOT" && mkdir -p "$AUTOGRADER_ROOT"
ln -s "$WS/submission" "$AUTOGRADER_ROOT/submission"
AS_ROOT=()
if [ "$(id -u)" != 0 ]; then
  AS_ROOT=(sudo --preserve-env=AUTOGRADER_ROOT,VALIDATOR_PROFILE,VALIDATOR_ALLOW_DEGRADED,AUTOGRADER_TIMEOUT,AUTOGRADER_MEMORY)
fi
"${AS_ROOT[@]}" env PYTHON="$PY" bash "$SRC/run_autograder"
status=$?
cat "$AUTOGRADER_ROOT/results/report.txt" 2>/dev/null || true
PYTHONPATH="$SRC" PYTHONDONTWRITEBYTECODE=1 "$PY" -m validator.instructor.gradescope \\
  --summary "$AUTOGRADER_ROOT/results/results.json" >> "${GITHUB_STEP_SUMMARY:-/dev/null}"
exit $status
"""

WORKFLOW = """# Grade a pushed submission: put layers.py (and answers.yaml) under submission/ and push,
# or run it by hand on a student's repository (Actions > grade > Run workflow).
# The grading step is grade_github.sh: run_autograder as root, in the sandbox (see docs/batch.md).
name: grade
on:
  push:
    paths: ["submission/**"]
  workflow_dispatch:
    inputs:
      repository:
        description: "student repository (owner/name) holding student/layers.py"
        required: true
      ref:
        description: "branch, tag or commit"
        required: false
        default: "main"
jobs:
  grade:
    runs-on: ubuntu-latest
    timeout-minutes: 30
    steps:
      - uses: actions/checkout@v4
      - name: Fetch the student's repository
        if: github.event_name == 'workflow_dispatch'
        uses: actions/checkout@v4
        with:
          repository: ${{ inputs.repository }}
          ref: ${{ inputs.ref }}
          path: submission
          persist-credentials: false
      - uses: actions/setup-python@v5
        with:
          python-version: "3.11"
      - name: Install the grader
        run: bash setup.sh
      - name: Grade
        env:
          CI: "1"
        run: bash grade_github.sh
      - uses: actions/upload-artifact@v4
        if: always()
        with:
          name: grade-report
          path: ${{ runner.temp }}/autograder/results/
"""


def setup_requirements(project_root: Path) -> str:
    """The grader's dependencies as setup.sh installs them: the project's own list (torch apart, installed
    first from the CPU index), with hypothesis pinned to the version that recorded the fixtures."""
    import shlex

    from validator.tomlcompat import tomllib

    deps = tomllib.loads((project_root / "pyproject.toml").read_text(encoding="utf-8"))["project"]["dependencies"]
    pinned = [f"hypothesis=={versions()['hypothesis']}" if re.match(r"hypothesis\b", d) else d
              for d in deps if not re.match(r"torch\b", d)]
    return " ".join(shlex.quote(d) for d in pinned)


def build_autograder(out: Path, *, force: bool = False, challenges_dir: Path | None = None,
                     reference_dir: Path | None = None, allow_degraded: bool = False) -> list[str]:
    """Build the grading bundle in ``out``; returns its top-level entries.

    ``allow_degraded`` writes ``allow_degraded: true`` to ``autograder.yaml``: the bundle then grades
    (unofficially, and says so) where the machine cannot give the full sandbox, instead of refusing.
    """
    root = paths.PROJECT_ROOT
    challenges_dir = challenges_dir or paths.challenges_dir()
    reference_dir = reference_dir or paths.reference_dir()
    catalogue = load_catalogue(challenges_dir)
    if not (reference_dir / "layers.py").exists():
        raise ReleaseError(f"no reference at {reference_dir / 'layers.py'}: the bundle needs it")
    _fresh_dir(out, force)
    shutil.copytree(root / "validator", out / "validator", ignore=IGNORED)
    (out / "reference").mkdir()
    for path in reference_dir.iterdir():
        if path.is_file() and path.suffix in (".py", ".yaml", ".yml"):
            shutil.copy2(path, out / "reference" / path.name)
    _copy_challenges(challenges_dir, out / "challenges", catalogue)
    for name in ("pyproject.toml", "README.md"):
        if (root / name).exists():
            shutil.copy2(root / name, out / name)
    v = versions()
    for name, text in (("setup.sh", SETUP_SH.format(torch=v["torch"], requirements=setup_requirements(root))),
                       ("run_autograder", RUN_AUTOGRADER),
                       ("grade_github.sh", GRADE_GITHUB)):
        (out / name).write_text(text, encoding="utf-8")
        (out / name).chmod(0o755)
    (out / "autograder.yaml").write_text(
        "# true: grade even where the sandbox is incomplete (no root, no namespaces); the results say so\n"
        f"allow_degraded: {'true' if allow_degraded else 'false'}\n", encoding="utf-8")
    (out / ".github" / "workflows").mkdir(parents=True)
    (out / ".github" / "workflows" / "grade.yml").write_text(WORKFLOW, encoding="utf-8")
    (out / "submission").mkdir()
    (out / "submission" / "README.md").write_text(
        "Put a student's `layers.py` (and `answers.yaml`) here and push to grade it.\n", encoding="utf-8")
    return sorted(p.name for p in out.iterdir())


def main(*, out: str | None = None, autograder: str | None = None, force: bool = False,
         allow_degraded: bool = False, notebook: bool = False, notebook_from: list[str] | None = None) -> int:
    """Entry for the CLI: ``--out DIR`` builds the handout, ``--autograder DIR`` the bundle (or both);
    ``--notebook`` / ``--notebook-from`` add notebooks to the handout (validator/instructor/notebook_release.py)."""
    if not out and not autograder:
        print("error: pass --out DIR (student handout) and/or --autograder DIR (grading bundle)", file=sys.stderr)
        return EXIT_USAGE
    if (notebook or notebook_from) and not out:
        print("error: --notebook and --notebook-from add notebooks to a handout: pass --out DIR too", file=sys.stderr)
        return EXIT_USAGE
    try:
        if out:
            written, quoted = handout(Path(out), force=force)
            print(f"handout written to {out}: {', '.join(written)} (searched for leaks: none found)")
            for line in quoted:
                print(f"  note: a spec quotes the solution line {line!r} (a hint, so it is handed out)")
            if notebook or notebook_from:
                _release_notebooks(Path(out), notebook, notebook_from or [])
        if autograder:
            written = build_autograder(Path(autograder), force=force, allow_degraded=allow_degraded)
            print(f"autograder bundle written to {autograder}: {', '.join(written)}")
    except (ReleaseError, SpecError, stubgen.StubError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_PROBLEMS
    return EXIT_OK


def _release_notebooks(out: Path, per_challenge: bool, from_notebooks: list[str]) -> None:
    from validator.instructor.notebook_release import NotebookReleaseError, release

    try:
        written = release(out, per_challenge=per_challenge, from_notebooks=from_notebooks)
    except NotebookReleaseError as exc:
        raise ReleaseError(str(exc)) from None
    print(f"notebooks written to {out / 'notebooks'}: {len(written)} (searched for leaks: none found)")
