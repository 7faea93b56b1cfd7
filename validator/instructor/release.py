"""`validator release`: a student handout (`--out`) or an autograder bundle (`--autograder`).

The handout holds the stub, the answers template, the specs, their pages, the
frozen reference results and the grader, and nothing that gives a solution
away: no reference source, no answer key, no instructor tools. It is scanned
for leaks before the command reports success. The autograder bundle holds
everything needed to grade a submission, with a Gradescope ``setup.sh`` /
``run_autograder`` pair and a GitHub Actions workflow, which grade through the
batch grader's sandbox (see :mod:`validator.instructor.gradescope`), a README
for whoever deploys it, and beside it the zip to upload to Gradescope; with
``--challenge`` it carries and grades an assignment's challenges only.
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

from validator import case_store, paths
from validator.instructor import stubgen
from validator.reference_side import KEY_HEX, SUFFIX, strings_in, versions
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
            for field in ("explanation", "hint"):  # a hint is shown after a wrong answer, not handed out whole
                text = " ".join(str(entry.get(field) or "").split())
                if len(text) >= MIN_LEAK_LINE:
                    out.append((text[:80], f"the answer key's {field} for {cid}.{qid}"))
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


_DIGEST = re.compile(rf"^[0-9a-f]{{{KEY_HEX}}}$")  # a call key, or the digest of a spec in a case's key


def _fixture_strings(data: bytes) -> str | None:
    """The text a fixture holds: every string of its JSON header (keys, exception messages, names).

    Its numbers (shapes, byte lengths, seeds), its call keys (hex digests) and raw tensor bytes are
    data, not prose: a 4-digit answer turns up among them by chance (in a digest, or as the byte
    length of 384 float32 values), which is no leak.
    None where the file is not a fixture this validator can read; it is then scanned whole.
    """
    import json
    import struct

    try:
        (size,) = struct.unpack_from("<I", data)
        header = json.loads(data[4:4 + size])
    except (struct.error, ValueError):
        return None
    return "\n".join(strings_in(header, key=lambda k: not _DIGEST.match(k)))


def readable_texts(root: Path) -> Iterable[tuple[Path, str]]:
    """Every file as text: plain files decoded, fixtures as the strings they hold, other binaries as latin-1."""
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        data = path.read_bytes()
        if path.suffix == case_store.SUFFIX:
            found = case_store.strings(path)
            if found is not None:
                yield path, "\n".join(s for s in found if not _DIGEST.match(s))  # keys carry a spec's digest
                continue
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
        for fixture in (src / "fixtures" / f"{cid}{SUFFIX}", case_store.cases_path(src, cid)):
            if fixture.exists():
                shutil.copy2(fixture, dest / "fixtures" / fixture.name)


def _pinned_pyproject(text: str) -> str:
    """The project's pyproject.toml for a handout: hypothesis pinned to the version that recorded the
    fixtures (its search must replay exactly), and without the project's own pytest settings (its
    testpaths and markers are the repository's tests, which a handout does not hold)."""
    text = re.sub(r'"hypothesis[^"]*"', f'"hypothesis=={versions()["hypothesis"]}"', text)
    return re.sub(r"(?ms)^\[tool\.pytest\.ini_options\]\n.*?(?=^\[|\Z)", "", text)


HANDOUT_README = """# {title}

Your handout: {count} challenges, each a layer of a transformer language model
that you write by hand in `student/layers.py`.

{challenges}

1. Read a challenge's page, `challenges/<id>.md`, and the docstrings in
   `student/layers.py`.
2. Implement it in `student/layers.py`.
3. Grade it: `validator submit-build --challenge <id>` (or all challenges with
   `validator submit-build`), or as test items: `python -m pytest --validator`
   (`--validator-challenge <id>`, `-k`, `-x` and `-n` work as usual).
4. Answer the questions in `student/answers.yaml` (or at the prompt, when you run
   `submit-build` at a terminal: your answers are saved there, comments kept). A
   question with `<name>` in it is drawn per student: set your student id once,
   `validator submit-build --student-id YOUR_ID` (on Gradescope, the email you
   submit with), and `submit-build` prints your numbers and asks with them.

Set up once (a CPU build of torch is enough):

```bash
python3 -m venv .venv && . .venv/bin/activate
pip install torch=={torch} --index-url https://download.pytorch.org/whl/cpu
pip install -e '.[pytest]'
```

Run `python -m pytest`, not a `pytest` found elsewhere on your PATH: the plugin is
installed in this environment only.

There is no reference implementation in this handout. `submit-build` and the
pytest plugin grade your code against reference results recorded for seeds
{seeds}: they pick one of them (or pass `--seed`, `--validator-seed`), and every
failure tells you the command that replays it, here. Checks that need the
reference itself (timing) are reported as skipped, "deferred to official
grading"; your answers are recorded here and graded when you submit.

Official grading (Gradescope, or your course's grader) grades with seed
{official_seed} and profile `batch`; each failure in its feedback comes with a line
such as `validator submit-build --challenge <id> --check <check> --seed {official_seed}
--profile batch`: run it in this folder, with your code in `student/layers.py`, to
replay exactly the inputs that failed. `hypothesis` is pinned to {hypothesis}
because the recorded cases depend on its search.
"""


def challenge_list(catalogue: dict) -> str:
    """The challenges as a Markdown list: id and title, in catalogue order."""
    return "\n".join(f"- `{cid}`: {ch.title}" for cid, ch in catalogue.items())


def handout(out: Path, *, force: bool = False, challenges_dir: Path | None = None,
            reference_dir: Path | None = None, student_dir: Path | None = None) -> tuple[list[str], list[str]]:
    """Build a student handout in ``out``; returns its top-level entries and the solution lines that
    the specs quote on purpose (hints), which the leak search lets through."""
    from validator.reference_side import OFFICIAL_SEED, RECORD_SEEDS
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
        seeds=", ".join(map(str, RECORD_SEEDS)), official_seed=OFFICIAL_SEED, count=len(catalogue),
        challenges=challenge_list(catalogue)), encoding="utf-8")
    (out / ".gitignore").write_text("__pycache__/\n*.pyc\n.hypothesis/\n.venv/\n*.egg-info/\n", encoding="utf-8")
    given = handed_out_text(student_dir, challenges_dir, catalogue)
    leaks = find_leaks(out, secrets(reference_dir / "layers.py", reference_dir / "answer_key.yaml", given))
    if leaks:
        shutil.rmtree(out)
        raise ReleaseError("the handout would leak, so it was removed:\n" + "\n".join(
            f"  {leak.path}: {leak.what}" for leak in leaks[:20]))
    return sorted(p.name for p in out.iterdir()), disclosed_lines(reference_dir / "layers.py", given)


SETUP_SH = """#!/usr/bin/env bash
# Gradescope: install the grader's dependencies (runs once, as root, when the image is built). The grader
# itself is not installed: run_autograder runs it from the bundle's folder, where it finds its challenges
# and reference. Needs Python 3.10 or newer as python3 (Gradescope's Ubuntu 22.04 image has 3.10).
set -euo pipefail
PY=${{PYTHON:-python3}}
if ! $PY -m pip --version >/dev/null 2>&1; then apt-get update && apt-get install -y python3-pip; fi
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
# Whose numbers the questions drawn per student use: the student repository's owner, unless set.
if [ -n "${STUDENT_REPOSITORY:-}" ] && [ -z "${VALIDATOR_STUDENT_ID:-}" ]; then
  export VALIDATOR_STUDENT_ID="${STUDENT_REPOSITORY%%/*}"
fi
AS_ROOT=()
if [ "$(id -u)" != 0 ]; then
  AS_ROOT=(sudo --preserve-env=AUTOGRADER_ROOT,VALIDATOR_PROFILE,VALIDATOR_ALLOW_DEGRADED,AUTOGRADER_TIMEOUT,AUTOGRADER_MEMORY,VALIDATOR_STUDENT_ID)
fi
# Nothing printed while the submission is graded and reported is read as a workflow command (::error::,
# ::add-mask::...): the grader shows such text harmlessly already; this token, which no submission can
# know, switches the runner's command processing off until the report is out.
TOKEN="stop-$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \\n')"
echo "::stop-commands::$TOKEN"
"${AS_ROOT[@]}" env PYTHON="$PY" bash "$SRC/run_autograder"
status=$?
cat "$AUTOGRADER_ROOT/results/report.txt" 2>/dev/null || true
echo "::$TOKEN::"
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
          STUDENT_REPOSITORY: ${{ inputs.repository }}
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


BUNDLE_README = """# Autograder bundle: {what}

Built by `validator release --autograder` with torch {torch} and hypothesis {hypothesis}.
It grades {graded} ({checks} checks and {questions} questions, {points:g} points):

{challenges}

## Gradescope

1. Upload `{zip_name}` (written beside this folder by `validator release`) as the
   assignment's autograder: *Configure Autograder*, *Zip file upload*. To zip it by hand,
   zip this folder's **contents**, so that `setup.sh` and `run_autograder` are at the
   zip's root (Gradescope finds nothing in a zip holding the folder itself):
   `cd {folder} && zip -r ../{zip_name} . -x '.github/*' 'submission/*'`
2. Base image: Ubuntu 22.04 (Gradescope's default; any image with Python 3.10 or newer as
   `python3` works). `setup.sh` runs once, as root, when Gradescope builds the image: it
   installs pip if missing, the CPU build of torch {torch} (from download.pytorch.org)
   and the grader's dependencies, with hypothesis pinned to {hypothesis}. The grader
   itself is not installed: `run_autograder` runs it from this folder.
3. Students upload `layers.py` and `answers.yaml` (their handout's `student/` folder;
   a zip or a folder holding them is found too, at any depth).
4. Check the bundle before students do: Gradescope's *Test Autograder* with the
   reference's `layers.py` and answers must give full marks; so must, here,
   `AUTOGRADER_ROOT=/tmp/ag bash run_autograder` as root with `/tmp/ag/submission/layers.py`.

`run_autograder` grades `/autograder/submission` as `validator grade` does: first the
canary (the reference with the answer key's answers, in the same sandbox: if it loses a
point, nothing is graded and every student gets a grader error instead of a wrong grade),
then the submission's regular files, copied, in a worker that runs as an unprivileged
user in its own namespaces, with limits on time ({timeout} s), memory ({memory} MB) and
processes. Gradescope runs it as root, which the sandbox needs.

## What students see

A score per check and per question, named `<challenge> / <check>`. Each check that
lost points says what was expected, what came back and on which input, and ends with a
reproduce line, e.g. `validator submit-build --challenge {example} --check <check>
--seed {seed} --profile batch`: run in their handout, it replays the same inputs against
the reference results the handout recorded (seeds {seeds}, profiles {profiles}), so it
fails there the same way. A check that times the reference says that it replays only
where the reference is. A question answered wrong says what was given and the key's
hint; the right answer and the key's explanation follow `show_answers` ({show_answers}
in this bundle: see below), so that resubmitting what the feedback said earns nothing
before the due date. A question drawn per student uses the numbers of the submitter's
Gradescope email (students see theirs with `validator submit-build --student-id
THEIR_EMAIL`). The top of the page lists each challenge's score, notes (files left out of
the submission, a degraded sandbox) and the seed. Nothing of the reference is shown, and
all text from the submission is shown as text (escape sequences and control characters
made visible).

## Files

- `autograder.yaml`: the bundle's settings.
  - `challenges`: the challenges graded, and the canary's ({graded_yaml}); written by
    `validator release --challenge ID...`. The specs of challenges they extend are
    carried too, and not graded.
  - `allow_degraded`: `true` grades even where the sandbox is incomplete (no root, no
    namespaces), marking results unofficial; `false` (the default) refuses to give a
    score there. `VALIDATOR_ALLOW_DEGRADED=1` in the environment does the same.
  - `show_answers`: whether a wrong answer's feedback gives the right answer and the key's
    explanation: `never`; `after_due_date` (the default) as a test of its own, without
    points, that Gradescope shows once the due date (and any late due date) has passed, and
    never in the GitHub log; or `always`. The key's `hint`s are shown in every case.
- Variables `run_autograder` reads: `PYTHON` (default `python3`), `VALIDATOR_PROFILE`
  (default `batch`), `AUTOGRADER_TIMEOUT` (seconds, default {timeout}), `AUTOGRADER_MEMORY`
  (MB, default {memory}), `AUTOGRADER_ROOT` (default `/autograder`), `VALIDATOR_STUDENT_ID`
  (whose numbers the questions drawn per student use where Gradescope's
  `submission_metadata.json` is absent; the GitHub step sets it to the student repository's owner).
- What a run leaves in `results/`: `results.json` (what Gradescope reads), `report.txt`
  (the same as text), `report.json` (the full report), `grader.log` (the grader's log)
  and `graded/`: the files that were graded (`submissions/`) and the batch grader's
  outputs (`gradebook/`, with an HTML report).
- `challenges/`, `reference/` (the whole reference and the answer key), `validator/`:
  the grader.

## GitHub Actions

Push this folder as a repository of its own: `.github/workflows/grade.yml` grades
`submission/` on every push that changes it (put a student's `layers.py` and
`answers.yaml` there), or a student's repository by hand (*Actions*, *grade*, *Run
workflow*, with the repository and branch). The job installs with `setup.sh`, grades
with `grade_github.sh` (`run_autograder` as root, through `sudo`), writes the grade to
the job summary and uploads `results/` as the `grade-report` artifact. While it grades
and prints the report, the runner's workflow commands are off (`::stop-commands::` with
a token no submission can know), and the report shows a submission's text harmlessly
anyway: a line of it cannot raise an annotation, mask a value or end the step.
"""


def bundle_readme(catalogue: dict, graded: list[str], *, folder: str, zip_name: str,
                  show_answers: str = "after_due_date") -> str:
    from validator.reference_side import OFFICIAL_SEED, RECORD_PROFILES, RECORD_SEEDS

    chosen = [catalogue[c] for c in graded]
    v = versions()
    whole = len(graded) == len(catalogue)
    return BUNDLE_README.format(
        what="the whole catalogue" if whole else ", ".join(graded), torch=v["torch"], hypothesis=v["hypothesis"],
        graded=f"{len(graded)} challenge{'s' if len(graded) != 1 else ''}",
        checks=sum(len(ch.checks) for ch in chosen), questions=sum(len(ch.questions) for ch in chosen),
        points=sum(c.points for ch in chosen for c in ch.checks) + sum(q.points for ch in chosen for q in ch.questions),
        challenges=challenge_list({c: catalogue[c] for c in graded}), zip_name=zip_name, folder=folder,
        example=graded[0], seed=OFFICIAL_SEED, seeds=", ".join(map(str, RECORD_SEEDS)),
        profiles=", ".join(RECORD_PROFILES), timeout=300, memory=2048,
        graded_yaml="all of the catalogue" if whole else ", ".join(graded), show_answers=show_answers)


def _with_bases(catalogue: dict, chosen: list[str]) -> list[str]:
    """``chosen`` and every spec they extend, in catalogue order (a variant's spec needs its base's)."""
    need: set[str] = set()
    todo = list(chosen)
    while todo:
        cid = todo.pop()
        if cid in need:
            continue
        need.add(cid)
        base = getattr(catalogue[cid], "extends", None)
        if base:
            todo.append(base)
    return [c for c in catalogue if c in need]


def bundle_zip(bundle: Path) -> Path:
    """Where `release` writes the bundle's Gradescope zip: beside the folder, named after it."""
    bundle = Path(bundle).resolve()
    return bundle.with_name(bundle.name + ".zip")


def write_zip(bundle: Path, archive: Path) -> Path:
    """The Gradescope upload: the bundle's contents at the zip's root (setup.sh, run_autograder, ...),
    without what only GitHub uses (.github/, submission/). Executable bits are kept."""
    import zipfile

    skip = {".github", "submission"}
    tmp = archive.with_name(f".{archive.name}.tmp")
    with zipfile.ZipFile(tmp, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for path in sorted(bundle.rglob("*")):
            rel = path.relative_to(bundle)
            if rel.parts[0] in skip or not path.is_file():
                continue
            zf.write(path, rel.as_posix())
    tmp.replace(archive)
    return archive


def build_autograder(out: Path, *, force: bool = False, challenges_dir: Path | None = None,
                     reference_dir: Path | None = None, allow_degraded: bool = False,
                     challenges: list[str] | None = None, zip_path: Path | None = None,
                     show_answers: str = "after_due_date") -> list[str]:
    """Build the grading bundle in ``out`` and its Gradescope zip; returns the bundle's top-level entries.

    ``challenges`` (an assignment's subset; default: the whole catalogue) are the challenges the bundle
    carries and grades, canary included; the specs they extend are carried too, and not graded.
    ``allow_degraded`` writes ``allow_degraded: true`` to ``autograder.yaml``: the bundle then grades
    (unofficially, and says so) where the machine cannot give the full sandbox, instead of refusing.
    ``zip_path`` (default: ``out`` with ``.zip`` added, beside it) receives the upload for Gradescope.
    ``show_answers`` (:data:`validator.questions.SHOW_ANSWERS`) is written to ``autograder.yaml``: whether
    a wrong answer's feedback gives the right answer, never, after the due date or always.
    """
    from validator.api import UsageError, select_challenges
    from validator.questions import show_answers_setting

    try:
        show_answers = show_answers_setting(show_answers, where="--show-answers")
    except ValueError as exc:
        raise ReleaseError(str(exc)) from None

    root = paths.PROJECT_ROOT
    challenges_dir = challenges_dir or paths.challenges_dir()
    reference_dir = reference_dir or paths.reference_dir()
    catalogue = load_catalogue(challenges_dir)
    try:
        graded = [c.id for c in select_challenges(catalogue, list(dict.fromkeys(challenges or [])) or None)]
    except UsageError as exc:
        raise ReleaseError(str(exc)) from None
    carried = _with_bases(catalogue, graded)
    if not (reference_dir / "layers.py").exists():
        raise ReleaseError(f"no reference at {reference_dir / 'layers.py'}: the bundle needs it")
    out = Path(out)
    zip_path = Path(zip_path) if zip_path else bundle_zip(out)
    if zip_path.exists() and not force:
        raise ReleaseError(f"{zip_path} exists (pass --force to replace it)")
    _fresh_dir(out, force)
    shutil.copytree(root / "validator", out / "validator", ignore=IGNORED)
    (out / "reference").mkdir()
    for path in reference_dir.iterdir():
        if path.is_file() and path.suffix in (".py", ".yaml", ".yml") and path.name != "answer_key.yaml":
            shutil.copy2(path, out / "reference" / path.name)
    key_file = reference_dir / "answer_key.yaml"
    if key_file.is_file():
        if len(graded) == len(catalogue):
            shutil.copy2(key_file, out / "reference" / key_file.name)
        else:  # the graded challenges' answers only: the canary answers what is graded
            key = yaml.safe_load(key_file.read_text(encoding="utf-8")) or {}
            (out / "reference" / key_file.name).write_text(
                yaml.safe_dump({c: key[c] for c in graded if c in key}, sort_keys=False, allow_unicode=True),
                encoding="utf-8")
    _copy_challenges(challenges_dir, out / "challenges", carried)
    if (root / "pyproject.toml").exists():
        shutil.copy2(root / "pyproject.toml", out / "pyproject.toml")
    (out / "README.md").write_text(bundle_readme(catalogue, graded, folder=out.name, zip_name=zip_path.name,
                                                 show_answers=show_answers), encoding="utf-8")
    v = versions()
    for name, text in (("setup.sh", SETUP_SH.format(torch=v["torch"], requirements=setup_requirements(root))),
                       ("run_autograder", RUN_AUTOGRADER),
                       ("grade_github.sh", GRADE_GITHUB)):
        (out / name).write_text(text, encoding="utf-8")
        (out / name).chmod(0o755)
    settings = ("# The challenges graded (the canary too); the specs they extend are carried, not graded.\n"
                + ("challenges: all\n" if len(graded) == len(catalogue)
                   else "challenges:\n" + "".join(f"  - {c}\n" for c in graded))
                + "# true: grade even where the sandbox is incomplete (no root, no namespaces); the results say so\n"
                f"allow_degraded: {'true' if allow_degraded else 'false'}\n"
                "# A wrong answer's right answer (and the key's explanation, which states it): never shown;\n"
                "# after_due_date, as a test Gradescope shows once the due date has passed (never in a CI log);\n"
                "# or always (then resubmitting what the feedback said earns the points). The key's hints\n"
                "# are shown either way.\n"
                f"show_answers: {show_answers}\n")
    (out / "autograder.yaml").write_text(settings, encoding="utf-8")
    (out / ".github" / "workflows").mkdir(parents=True)
    (out / ".github" / "workflows" / "grade.yml").write_text(WORKFLOW, encoding="utf-8")
    (out / "submission").mkdir()
    (out / "submission" / "README.md").write_text(
        "Put a student's `layers.py` (and `answers.yaml`) here and push to grade it.\n", encoding="utf-8")
    write_zip(out, zip_path)
    return sorted(p.name for p in out.iterdir())


def main(*, out: str | None = None, autograder: str | None = None, force: bool = False,
         allow_degraded: bool = False, challenges: list[str] | None = None, notebook: bool = False,
         notebook_from: list[str] | None = None, show_answers: str = "after_due_date") -> int:
    """Entry for the CLI: ``--out DIR`` builds the handout, ``--autograder DIR`` the bundle (or both);
    ``challenges`` selects the bundle's challenges (a handout holds the whole catalogue); ``--notebook`` /
    ``--notebook-from`` add notebooks to the handout (validator/instructor/notebook_release.py)."""
    if not out and not autograder:
        print("error: pass --out DIR (student handout) and/or --autograder DIR (grading bundle)", file=sys.stderr)
        return EXIT_USAGE
    if challenges and not autograder:
        print("error: --challenge selects the challenges of the grading bundle (--autograder DIR); a handout holds "
              "the whole catalogue", file=sys.stderr)
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
            bundle = Path(autograder)
            written = build_autograder(bundle, force=force, allow_degraded=allow_degraded, challenges=challenges,
                                       show_answers=show_answers)
            zip_path = bundle_zip(bundle)
            print(f"autograder bundle written to {autograder}: {', '.join(written)}")
            print(f"  upload to Gradescope: {zip_path} (the bundle's contents at the zip's root; see "
                  f"{bundle / 'README.md'})")
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
