"""The autograder bundle as deployed: Gradescope's layout, its run_autograder and the GitHub grading step,
fed hostile submissions; the canary; a Python installed under /tmp.

The default tier's representative, one run of a submission trying every attack, is
``test_release.py::test_autograder_bundle_resists_a_hostile_submission`` (it reuses that module's bundle).
Each hostile submission starts from the mini project's BROKEN layer (its true score is below full
marks) and tries to gain points by reading the reference or the key, rewriting the grader's files,
forging results.json, or linking its answers to someone else's. None may gain a point, nothing may
persist in the bundle, and an honest submission graded afterwards from the same folder gets full marks.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from test_regenerate import BROKEN, CORRECT, make_project, run_regenerate
from validator.instructor import gradescope as ag
from validator.instructor.release import build_autograder
from validator.sandbox import capabilities

ROOT = Path(__file__).resolve().parents[1]
IMPL = ROOT / "tests" / "implementations" / "token_embedding"
HONEST_ANSWERS = "scaling: {factor: 3, kind: b}\n"
FORGED = {"score": 999.0, "tests": [], "output": "forged"}


def sandboxed() -> bool:
    caps = capabilities()
    return caps["root"] and caps["namespaces"] and caps["setuid"]


needs_sandbox = pytest.mark.skipif(not sandboxed(), reason="the full sandbox needs root, namespaces and setuid "
                                                           "(validator.sandbox.capabilities() says no)")


def clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("VALIDATOR_CHALLENGES", "VALIDATOR_REFERENCE", "VALIDATOR_PROFILE", "PYTHONPATH", "CI",
                        ag.ALLOW_ENV, "GITHUB_STEP_SUMMARY")}
    env.update(extra)
    return env


def dependencies_only_python(base: Path) -> Path:
    """A Python that has the grader's dependencies and not the grader: what setup.sh leaves on Gradescope
    (or on a GitHub runner).

    The test environment installs the project in editable mode, which would make ``import validator``
    work from anywhere (and grade with the repository's copy rather than the bundle's). A venv whose
    .pth lists this environment's site-packages gets torch, hypothesis and the rest, but not the
    editable finder: .pth files are processed only in the venv's own site-packages.
    """
    venv = base / "deps-only"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    [site] = list((venv / "lib").glob("python3*/site-packages"))
    here = [p for p in sys.path if p.endswith("site-packages") and Path(p).is_dir()]
    (site / "dependencies.pth").write_text("\n".join(here) + "\n")
    python = venv / "bin" / "python"
    probe = subprocess.run([str(python), "-c", "import torch, hypothesis, yaml\n"
                            "try:\n    import validator\nexcept ImportError:\n    print('no grader')"],
                           capture_output=True, text=True, cwd="/", env=clean_env(), timeout=120)
    assert probe.returncode == 0 and probe.stdout.strip() == "no grader", probe.stdout + probe.stderr
    return python


def tree_digest(folder: Path, skip: tuple[str, ...] = ()) -> dict[str, str]:
    """Every entry of a tree (links and folders too) with a hash of its content: what 'unchanged' means."""
    out = {}
    for path in sorted(folder.rglob("*")):
        rel = path.relative_to(folder).as_posix()
        if rel.split("/")[0] in skip:
            continue
        if path.is_symlink():
            out[rel] = "link:" + os.readlink(path)
        elif path.is_file():
            out[rel] = hashlib.sha256(path.read_bytes()).hexdigest()
        else:
            out[rel] = "dir"
    return out


@pytest.fixture(scope="module")
def bundle(tmp_path_factory):
    root = tmp_path_factory.mktemp("deploy")
    dirs = make_project(root / "project")
    code, text = run_regenerate(dirs, self_check=False)
    assert code == 0, text
    out = root / "bundle"
    build_autograder(out, challenges_dir=dirs["challenges"], reference_dir=dirs["reference"])
    return out


def attacks(bundle: Path, ag_root: Path, other: Path) -> str:
    """BROKEN plus every attack at import: steal the reference, edit the grader, forge results, linger."""
    return BROKEN + textwrap.dedent(f"""
        import os, json, time
        BUNDLE, AG = {str(bundle)!r}, {str(ag_root)!r}
        for secret in ("reference/layers.py", "reference/answer_key.yaml"):
            try:
                print(open(os.path.join(BUNDLE, secret)).read())
                if secret.endswith(".py"):
                    ns = {{}}
                    exec(open(os.path.join(BUNDLE, secret)).read(), ns)
                    scaled = ns["scaled"]
            except Exception as exc:
                print("no", secret, exc)
        for target in ("validator/reporters/gradescope.py", "validator/instructor/gradescope.py",
                       "run_autograder", "reference/layers.py"):
            try:
                with open(os.path.join(BUNDLE, target), "a") as fh:
                    fh.write("\\n# pwned\\n")
            except Exception as exc:
                print("no", target, exc)
        for folder in (BUNDLE, os.path.join(AG, "results"), os.getcwd(), os.path.dirname(os.getcwd())):
            try:
                with open(os.path.join(folder, "results.json"), "w") as fh:
                    json.dump({FORGED!r}, fh)
            except Exception as exc:
                print("no", folder, exc)
        try:
            os.symlink({str(other)!r}, os.path.join(AG, "submission", "answers.yaml"))
        except Exception as exc:
            print("no link", exc)
        if os.fork() == 0:  # a daemon that forges results.json once the grader has written it
            os.setsid()
            for _ in range(100):
                time.sleep(0.1)
                for folder in (os.path.join(AG, "results"), BUNDLE):
                    try:
                        with open(os.path.join(folder, "results.json"), "w") as fh:
                            json.dump({FORGED!r}, fh)
                    except Exception:
                        pass
            os._exit(0)
    """)


def lay_out(ag_root: Path, layers: str, answers: str | None = None, answers_link: Path | None = None) -> None:
    """Gradescope's layout: ROOT/submission (as uploaded, here under student/), ROOT/results absent."""
    shutil.rmtree(ag_root / "submission", ignore_errors=True)
    shutil.rmtree(ag_root / "results", ignore_errors=True)
    folder = ag_root / "submission" / "student"
    folder.mkdir(parents=True)
    (folder / "layers.py").write_text(layers)
    if answers is not None:
        (folder / "answers.yaml").write_text(answers)
    if answers_link is not None:
        (folder / "answers.yaml").symlink_to(answers_link)


def run_autograder(bundle: Path, ag_root: Path, **env: str) -> tuple[int, dict, str]:
    done = subprocess.run(["bash", str(bundle / "run_autograder")], capture_output=True, text=True, timeout=600,
                          env=clean_env(AUTOGRADER_ROOT=str(ag_root), PYTHON=sys.executable, **env), cwd="/")
    results = json.loads((ag_root / "results" / "results.json").read_text())
    return done.returncode, results, done.stdout + done.stderr


def assert_honest_full_marks(results: dict, log: str) -> None:
    assert results["score"] == sum(t["max_score"] for t in results["tests"]) > 0, log
    assert {t["status"] for t in results["tests"]} == {"passed"}, results


def assert_no_gain(results: dict, log: str) -> None:
    """The hostile run's results are the grader's verdicts on BROKEN with no answers: below full marks."""
    by_name = {t["name"]: t for t in results["tests"]}
    assert results["score"] == sum(t["score"] for t in results["tests"]), results
    assert results["score"] < sum(t["max_score"] for t in results["tests"]), log
    questions = [t for name, t in by_name.items() if name.endswith(("question_factor", "question_kind"))]
    assert len(questions) == 2 and all(t["score"] == 0 for t in questions), (sorted(by_name), results)
    assert "forged" not in json.dumps(results) and "pwned" not in json.dumps(results)
    assert "The multiplier applied" not in results["output"]  # the key's explanation


def hostile_run(bundle: Path, tmp_path: Path) -> Path:
    """Grade one submission that tries every attack; check it gained nothing and left the bundle as it was."""
    before = tree_digest(bundle)
    ag_root = tmp_path / "autograder"
    other = tmp_path / "other_student_answers.yaml"
    other.write_text(HONEST_ANSWERS)
    lay_out(ag_root, attacks(bundle, ag_root, other), answers_link=other)
    code, results, log = run_autograder(bundle, ag_root, VALIDATOR_PROFILE="quick")
    assert code == 0, log
    assert_no_gain(results, log)
    assert "answers.yaml was not graded" in results["output"]
    assert "sandbox: " in results["output"] and "MISSING" not in results["output"]
    assert "The multiplier applied" not in log and "return x * 3 + 1" not in log  # nothing of the key or reference
    assert tree_digest(bundle) == before, "the submission changed the bundle"
    assert not (ag_root / "submission" / "answers.yaml").exists()
    return ag_root


@needs_sandbox
@pytest.mark.thorough
def test_hostile_then_honest_from_the_same_folder(bundle, tmp_path):
    """After the hostile run, an honest submission graded from the same folder gets full marks."""
    before = tree_digest(bundle)
    ag_root = hostile_run(bundle, tmp_path)
    lay_out(ag_root, CORRECT, HONEST_ANSWERS)
    code, results, log = run_autograder(bundle, ag_root, VALIDATOR_PROFILE="quick")
    assert code == 0, log
    assert_honest_full_marks(results, log)
    assert "self-test: the reference and the answer key scored full marks" in log
    assert tree_digest(bundle) == before


@needs_sandbox
@pytest.mark.thorough
@pytest.mark.parametrize("attack", ["read", "edit", "forge", "link"])
def test_each_attack_gains_nothing(bundle, tmp_path, attack):
    """Each attack alone, against the true score of BROKEN graded plainly."""
    ag_root = tmp_path / "autograder"
    lay_out(ag_root, BROKEN)
    _, plain, _ = run_autograder(bundle, ag_root, VALIDATOR_PROFILE="quick")
    other = tmp_path / "other.yaml"
    other.write_text(HONEST_ANSWERS)
    lines = {"read": f"print(open({str(bundle / 'reference' / 'answer_key.yaml')!r}).read())\n"
                     f"exec(open({str(bundle / 'reference' / 'layers.py')!r}).read())\n",
             "edit": f"open({str(bundle / 'validator' / 'reporters' / 'gradescope.py')!r}, 'a').write('# pwned')\n",
             "forge": f"import json; json.dump({FORGED!r}, open({str(ag_root / 'results' / 'results.json')!r}, 'w'))\n",
             "link": ""}
    source = BROKEN + "try:\n" + textwrap.indent(lines[attack] or "pass\n", "    ") + "except Exception:\n    pass\n"
    before = tree_digest(bundle)
    lay_out(ag_root, source, answers_link=other if attack == "link" else None)
    code, results, log = run_autograder(bundle, ag_root, VALIDATOR_PROFILE="quick")
    assert code == 0, log
    assert results["score"] == plain["score"], log
    assert [t["score"] for t in results["tests"]] == [t["score"] for t in plain["tests"]]
    assert tree_digest(bundle) == before


@needs_sandbox
@pytest.mark.thorough
def test_github_workflow_grades_in_its_own_layout(bundle, tmp_path):
    """The workflow as GitHub runs it: the bundle is the repository, checked out into $GITHUB_WORKSPACE
    (the working directory of every step), the student's repository checked out into submission/, the
    steps' `run:` lines run in order (setup.sh aside: it installs from the network) with a Python that has
    the dependencies but not the grader, the artifact read from where the workflow uploads it."""
    import yaml

    workflow = yaml.safe_load((bundle / ".github" / "workflows" / "grade.yml").read_text())
    steps = workflow["jobs"]["grade"]["steps"]
    runs = [s["run"] for s in steps if "run" in s]
    assert runs == ["bash setup.sh", "bash grade_github.sh"], runs
    checkout = next(s for s in steps if s.get("with", {}).get("path") == "submission")
    artifact = next(s for s in steps if s.get("uses", "").startswith("actions/upload-artifact"))
    assert artifact["with"]["path"] == "${{ runner.temp }}/autograder/results/"
    workspace = tmp_path / "workspace"  # actions/checkout: the repository's files at the workspace's root
    shutil.copytree(bundle, workspace, symlinks=True)
    for script in ("setup.sh", "grade_github.sh", "run_autograder"):
        assert os.access(workspace / script, os.X_OK), script
    runner_temp = tmp_path / "runner_temp"
    runner_temp.mkdir()
    other = tmp_path / "other.yaml"
    other.write_text(HONEST_ANSWERS)
    summary = tmp_path / "summary.md"
    python = dependencies_only_python(tmp_path)
    before = tree_digest(workspace, skip=("submission",))

    def step(layers: str, answers_link: Path | None = None, answers: str | None = None):
        shutil.rmtree(workspace / checkout["with"]["path"], ignore_errors=True)
        student = workspace / "submission" / "student"  # the student's repository, as checked out
        student.mkdir(parents=True)
        (workspace / "submission" / "README.md").write_text("a student's repository\n")
        (student / "layers.py").write_text(layers)
        if answers_link:
            (student / "answers.yaml").symlink_to(answers_link)
        if answers:
            (student / "answers.yaml").write_text(answers)
        done = subprocess.run(runs[1].split(), capture_output=True, text=True, timeout=600, cwd=str(workspace),
                              env=clean_env(GITHUB_WORKSPACE=str(workspace), RUNNER_TEMP=str(runner_temp),
                                            GITHUB_STEP_SUMMARY=str(summary), PYTHON=str(python), CI="1",
                                            VALIDATOR_PROFILE="quick"))
        uploaded = runner_temp / "autograder" / "results"
        results = json.loads((uploaded / "results.json").read_text())
        return done.returncode, results, done.stdout + done.stderr

    code, results, log = step(attacks(workspace, runner_temp / "autograder", other), answers_link=other)
    assert code == 0, log
    assert_no_gain(results, log)
    assert tree_digest(workspace, skip=("submission",)) == before
    code, results, log = step(CORRECT, answers=HONEST_ANSWERS)
    assert code == 0, log
    assert_honest_full_marks(results, log)
    assert "## Grade:" in summary.read_text() and "[passed]" in log
    assert tree_digest(workspace, skip=("submission",)) == before
    graded = runner_temp / "autograder" / "results" / "graded"
    assert (graded / "submissions" / "submission" / "layers.py").read_text() == CORRECT
    assert list((graded / "gradebook" / "html").glob("*.html")), "the HTML report is in the artifact"
    # A submission whose exception text is workflow commands and terminal escapes: the step's log shows it,
    # between the runner's commands switched off and on again, and no line of it acts.
    code, results, log = step(INJECTING, answers=HONEST_ANSWERS)
    assert code == 0, log
    token = re.search(r"^::stop-commands::(stop-[0-9a-f]{32})$", log, re.M)
    assert token and f"\n::{token.group(1)}::\n" in log, log
    assert ": :error title=Grade::full marks" in log and "\\x1b[2J\\rPASS" in log, log
    ours = {f"::stop-commands::{token.group(1)}", f"::{token.group(1)}::"}
    assert [a for a in acting(log) if a not in ours] == [], acting(log)
    assert not acting(summary.read_text())


INJECTING = CORRECT.replace("return x * 3 + 1",
                            "raise RuntimeError('\\n::error title=Grade::full marks\\n\\x1b[2J\\rPASS\\x08')")


def acting(text: str) -> list[str]:
    """What a terminal or a GitHub runner would act on: control characters (but newline and tab), bidi
    overrides, lines read as workflow commands."""
    found = re.findall("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\u2028\u2029]", text)
    return found + [line for line in text.splitlines() if line.lstrip().startswith("::") or "##[" in line]


def test_the_ci_report_the_summary_and_the_log_show_student_text_without_acting_on_it():
    """report.txt (printed in the GitHub log), the job summary and the grading step's log: a submission's
    text shown, not obeyed; a test Gradescope shows only after the due date is not in the log at all."""
    nasty = "raised:\n::error title=Grade::41/41\n  ::add-mask::score\x1b[2J\r\x08##[warning]x\n```\n[x](http://y)"
    results = {"score": 0, "output": "note: " + nasty, "tests": [
        {"name": "c / values", "score": 0, "max_score": 1, "status": "failed", "output": nasty, "visibility": "visible"},
        {"name": "c / question_q: the answer", "output": "answer: b) the key", "visibility": "after_due_date"}]}
    text = ag.text_report(results)
    assert not acting(text) and "answer: b" not in text and ": :error title=Grade::41/41" in text
    summary = ag.summary(results)
    assert not acting(summary) and "question_q: the answer" not in summary
    assert not acting(ag.summary({"score": 0, "output": nasty, "tests": []}))
    assert "````\n" in ag.summary({"score": 0, "output": nasty, "tests": []})  # a fence no ``` inside can close
    out = io.StringIO()
    log = ag._Tee(out)
    print("grading", "::error::x", file=log)  # mid-line: harmless, and kept as is
    print("::error::x\x1b[2J", file=log)
    log.write("::add")
    log.write("-mask::y\n")
    assert out.getvalue() == log.getvalue() == "grading ::error::x\n: :error::x\\x1b[2J\n: :add-mask::y\n"


def test_run_autograder_refuses_without_the_sandbox(tmp_path, monkeypatch):
    """No root / no namespaces and no opt-in: score 0, a grader error naming what is missing, exit 3."""
    monkeypatch.setattr(ag, "sandbox_status", lambda: (["limits"], ["not root: student code runs as the grader's user"]))
    monkeypatch.delenv(ag.ALLOW_ENV, raising=False)
    ag_root = tmp_path / "autograder"
    lay_out(ag_root, CORRECT, HONEST_ANSWERS)
    stream = io.StringIO()
    bundle = tmp_path / "bundle"
    bundle.mkdir()
    (bundle / ag.SETTINGS_FILE).write_text("allow_degraded: false\n")
    code = ag.autograde(root=ag_root, stream=stream, allow_degraded=ag.allowed_degraded(bundle))
    results = json.loads((ag_root / "results" / "results.json").read_text())
    assert code == ag.EXIT_GRADER and results["score"] == 0 and results["tests"] == []
    assert "GRADER ERROR" in results["output"] and "MISSING: not root" in results["output"]
    assert "refusing to grade" in stream.getvalue() and ag.ALLOW_ENV in stream.getvalue()
    monkeypatch.setenv(ag.ALLOW_ENV, "1")
    assert ag.allowed_degraded(bundle)
    monkeypatch.delenv(ag.ALLOW_ENV)
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / ag.SETTINGS_FILE).write_text("allow_degraded: true\n")
    assert ag.allowed_degraded(tmp_path / "b") and not ag.allowed_degraded(bundle)


def test_a_misconfigured_bundle_is_a_grader_error(tmp_path, monkeypatch):
    """`challenges:` in autograder.yaml that is not a list of ids: no grade, a grader error, exit 3."""
    from validator import paths

    monkeypatch.setattr(ag, "sandbox_status", lambda: (["limits"], []))
    bundle = tmp_path / "bundle"
    bundle.mkdir()
    (bundle / ag.SETTINGS_FILE).write_text("challenges: scaling\n")
    monkeypatch.setattr(paths, "PROJECT_ROOT", bundle)
    ag_root = tmp_path / "autograder"
    lay_out(ag_root, CORRECT, HONEST_ANSWERS)
    code = ag.autograde(root=ag_root, stream=io.StringIO())
    results = json.loads((ag_root / "results" / "results.json").read_text())
    assert code == ag.EXIT_GRADER and results["score"] == 0 and "misconfigured" in results["output"], results


def test_staging_copies_regular_files_only(tmp_path):
    src = tmp_path / "sub" / "student"
    src.mkdir(parents=True)
    (src / "layers.py").write_text("x = 1\n")
    (src / "helper.py").symlink_to("/etc/passwd")
    secret = tmp_path / "key.yaml"
    secret.write_text("secret: 1\n")
    (src / "answers.yaml").symlink_to(secret)
    assert ag.find_submission(tmp_path / "sub") == src
    notes = ag.stage(src, tmp_path / "staged")
    assert sorted(p.name for p in (tmp_path / "staged").iterdir()) == ["layers.py"]
    assert any("answers.yaml" in n for n in notes) and any("helper.py" in n for n in notes)


def test_unreachable_module_is_explained():
    from validator.batch.grade import unreachable

    [there] = unreachable("layers.py could not be imported: No module named 'yaml'")
    assert "'yaml'" in there and "sandbox shows the worker only" in there and "yaml" in there.split("finds at")[1]
    [nowhere] = unreachable("No module named 'surely_not_installed_q'")
    assert "neither can the grader's Python" in nowhere


# -- the canary, with the real catalogue ------------------------------------------------------------------
@needs_sandbox
@pytest.mark.thorough
def test_a_canary_that_loses_points_stops_the_batch(tmp_path):
    from validator.batch.grade import grade_folder

    subs = tmp_path / "subs"
    (subs / "alice").mkdir(parents=True)
    shutil.copy(IMPL / "correct" / "indexing.py", subs / "alice" / "layers.py")
    canary = tmp_path / "canary"
    canary.mkdir()
    shutil.copy(IMPL / "broken" / "ids_clamped.py", canary / "layers.py")
    stream = io.StringIO()
    code = grade_folder(submissions=subs, out=tmp_path / "out", challenges=["token_embedding"], workers=1,
                        timeout=120, stream=stream, live=False, canary_dir=canary)
    text = stream.getvalue()
    assert code == 3, text
    assert "self-test failed, so nobody was graded" in text and "token_embedding/" in text, text
    assert not (tmp_path / "out" / "grades.csv").exists() and not (tmp_path / "out" / "alice.json").exists()
    assert (tmp_path / "out" / "canary.json").exists()


# -- a Python installed under /tmp ------------------------------------------------------------------------
def _tmp_venv(base: Path) -> Path:
    """A venv under /tmp whose own site-packages holds a package (tmpdep) the submission imports."""
    venv = base / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    [site] = list((venv / "lib").glob("python3*/site-packages"))
    here = [p for p in sys.path if p.endswith("site-packages") and Path(p).is_dir()]
    (site / "grader.pth").write_text("\n".join([*here, str(ROOT)]) + "\n")
    (site / "tmpdep").mkdir()
    (site / "tmpdep" / "__init__.py").write_text("ANSWER = 42\n")
    return venv


@needs_sandbox
@pytest.mark.thorough
def test_a_venv_under_tmp_grades_as_without_isolation(tmp_path):
    from validator.batch.grade import canary_folder

    assert str(tmp_path).startswith("/tmp/")
    venv = _tmp_venv(tmp_path)
    subs = tmp_path / "subs"
    (subs / "alice").mkdir(parents=True)
    (subs / "alice" / "layers.py").write_text("import tmpdep\n" + (IMPL / "correct" / "indexing.py").read_text())
    key_answers = canary_folder(reference_dir=ROOT / "reference", into=tmp_path / "key") / "answers.yaml"
    shutil.copy(key_answers, subs / "alice" / "answers.yaml")
    scores = {}
    for mode in ("--no-isolation", None):
        out = tmp_path / f"out{mode}"
        done = subprocess.run([str(venv / "bin" / "python"), "-m", "validator", "grade", str(subs), "--out", str(out),
                               "--challenge", "token_embedding", "--workers", "1", "--timeout", "120",
                               *([mode] if mode else [])], capture_output=True, text=True, timeout=600,
                              cwd=str(ROOT), env=clean_env())
        assert done.returncode == 0, done.stderr
        report = json.loads((out / "alice.json").read_text())
        scores[mode] = (report["score"], report["max_score"])
    assert scores[None] == scores["--no-isolation"] and scores[None][0] == scores[None][1] > 0, scores


@needs_sandbox
def test_the_sandbox_shows_a_runtime_under_tmp(tmp_path, monkeypatch):
    """The exposure logic itself: a folder of runtime_dirs() under /tmp is readable in a sandboxed child."""
    from validator import sandbox

    runtime = tmp_path / "fakeprefix" / "lib"
    runtime.mkdir(parents=True)
    (runtime / "marker.py").write_text("X = 1\n")
    hidden = tmp_path / "secret"
    hidden.mkdir()
    (hidden / "key").write_text("k")
    monkeypatch.setattr(sandbox, "runtime_dirs", lambda: [str(runtime), str(tmp_path / "secret")])
    lease = sandbox.UidLease()  # a uid no concurrent test or grader holds
    box = sandbox.plan(sandbox.Limits(), hide=[str(hidden)], files={}, uid=lease.uid)
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - child
        try:
            sandbox.enter(box, keep_fds=[w])
            seen = [os.path.exists(runtime / "marker.py"), os.path.exists(hidden / "key"), os.getuid()]
            os.write(w, json.dumps(seen).encode())
        finally:
            os._exit(0)
    os.close(w)
    data = os.read(r, 1000)
    os.waitpid(pid, 0)
    lease.release()
    assert json.loads(data) == [True, False, lease.uid]


# -- the answer policy, on the bundle as deployed ----------------------------------------------------------
# A third question drawn per student, with a hint, added to the mini project's scaling challenge.
COUNT_QUESTION = ("  - id: count\n"
                  "    type: numeric\n"
                  "    prompt: How many values does a tensor of shape ({rows}, {cols}) hold?\n"
                  "    params:\n"
                  "      rows: [2, 3, 4, 5]\n"
                  "      cols: [6, 7, 8, 9]\n"
                  "    points: 1\n")
COUNT_KEY = {"answer": "{rows} * {cols}", "explanation": "{rows} rows of {cols} values make {answer} values in all.",
             "hint": "Multiply the sizes of the dimensions."}
WRONG_ANSWERS = "scaling: {factor: 2, kind: a, count: 1}\n"


@pytest.fixture(scope="module")
def policy_bundles(tmp_path_factory):
    """The mini project with a question drawn per student, released once per answer policy."""
    import yaml

    root = tmp_path_factory.mktemp("policy")
    dirs = make_project(root / "project")
    spec = dirs["challenges"] / "scaling.yaml"
    spec.write_text(spec.read_text() + COUNT_QUESTION)
    key = yaml.safe_load((dirs["reference"] / "answer_key.yaml").read_text())
    key["scaling"]["count"] = COUNT_KEY
    key["scaling"]["kind"]["hint"] = "Does the map send zero to zero?"
    (dirs["reference"] / "answer_key.yaml").write_text(yaml.safe_dump(key))
    code, text = run_regenerate(dirs, self_check=False)
    assert code == 0, text
    bundles = {"python": dependencies_only_python(root)}
    for show in ("never", "after_due_date", "always"):
        bundles[show] = root / f"bundle-{show}"
        build_autograder(bundles[show], challenges_dir=dirs["challenges"], reference_dir=dirs["reference"],
                         show_answers=show)
    return bundles


def on_gradescope(bundle: Path, ag_root: Path, python: Path) -> tuple[int, dict, str]:
    """Gradescope's layout, as test_release.py builds it: the zip `release` wrote, unpacked into ROOT/source,
    its run_autograder copied to ROOT and run there with a Python that has the dependencies only."""
    import zipfile

    if not (ag_root / "run_autograder").exists():
        with zipfile.ZipFile(bundle.with_name(bundle.name + ".zip")) as zf:
            zf.extractall(ag_root / "source")
        for script in ("run_autograder", "setup.sh"):
            os.chmod(ag_root / "source" / script, 0o755)
        shutil.copy2(ag_root / "source" / "run_autograder", ag_root / "run_autograder")
    done = subprocess.run(["bash", str(ag_root / "run_autograder")], capture_output=True, text=True, timeout=600,
                          env=clean_env(AUTOGRADER_ROOT=str(ag_root), PYTHON=str(python), VALIDATOR_PROFILE="quick"),
                          cwd=str(ag_root))
    results = json.loads((ag_root / "results" / "results.json").read_text())
    return done.returncode, results, done.stdout + done.stderr


def _explanations() -> list[str]:
    return ["The multiplier applied", "An added constant makes it affine", "values in all"]


def harvested(results: dict, report_txt: str, question: str) -> list:
    """The red team's second round for one question: a letter or number the visible feedback (the tests a
    student sees now, the CI log's report.txt) names as the answer, and every letter `x)` or number the
    question's own feedback shows."""
    import re

    from validator.instructor.gradescope import shown_now

    seen = "\n".join([results["output"], report_txt, *(t["output"] for t in shown_now(results))])
    own = "\n".join(t["output"] for t in shown_now(results) if t["name"].endswith(f"question_{question}"))
    letters = re.findall(r"answer(?: is|:)\s*([a-b])\b", seen) + re.findall(r"\b([a-b])\)", own)
    numbers = re.findall(r"answer(?: is|:)\s*(\d[\d,]*(?:\.\d+)?)", seen) + re.findall(r"\d[\d,]*(?:\.\d+)?", own)
    return sorted(set(letters)) + sorted({float(n.replace(",", "")) for n in numbers})


@needs_sandbox
@pytest.mark.thorough
@pytest.mark.parametrize("show", ["never", "after_due_date", "always"])
def test_a_wrong_answers_feedback_follows_the_answer_policy_and_resubmitting_it_gains_only_when_shown(
        policy_bundles, tmp_path, show):
    """Round one answers every question wrong; round two resubmits what round one's feedback (what a student
    sees now: the visible tests and the CI log's report.txt) said. By default (after_due_date) and with
    `never`, the feedback holds the hint and never the answer, so round two gains nothing; only `always`
    gives the answer away, and then the resubmission takes the points (the harvest works)."""
    from validator.questions import grade_question, load_key
    from validator.spec import load_catalogue

    bundle, ag_root = policy_bundles[show], tmp_path / "autograder"
    lay_out(ag_root, CORRECT, WRONG_ANSWERS)
    code, first, log = on_gradescope(bundle, ag_root, policy_bundles["python"])
    assert code == 0, log
    report_txt = (ag_root / "results" / "report.txt").read_text()
    by_name = {t["name"]: t for t in first["tests"]}
    questions = {q: by_name[f"scaling / question_{q}"] for q in ("factor", "kind", "count")}
    assert all(t["score"] == 0 for t in questions.values())
    assert "hint: Does the map send zero to zero?" in questions["kind"]["output"]
    assert "hint: Multiply the sizes of the dimensions." in questions["count"]["output"]
    now = json.dumps([t for t in first["tests"] if t["visibility"] == "visible"]) + first["output"] + report_txt
    later = [t for t in first["tests"] if t["visibility"] == "after_due_date"]
    if show == "always":
        assert "answer: b) affine" in questions["kind"]["output"] and "An added constant" in questions["kind"]["output"]
        assert not later
    else:
        assert not any(words in now for words in _explanations()) and "answer: " not in now, now
        assert ("answer: b) affine" in json.dumps(later)) == (show == "after_due_date")
        assert len(later) == (3 if show == "after_due_date" else 0)
    catalogue = load_catalogue(bundle / "challenges")
    key = load_key(bundle / "reference" / "answer_key.yaml")["scaling"]
    guesses = {q.id: [g for g in harvested(first, report_txt, q.id) if isinstance(g, str) == (q.type == "choice")]
               for q in catalogue["scaling"].questions}
    best = {q.id: max((grade_question(q, g, key[q.id], challenge="scaling", student="").score
                       for g in guesses[q.id]), default=0)
            for q in catalogue["scaling"].questions}  # every candidate, as if resubmitted one by one
    assert (sum(best.values()) > 0) == (show == "always"), (show, best, guesses)
    if show == "after_due_date":  # and one resubmission for real, on the bundle: nothing gained
        lay_out(ag_root, CORRECT, "scaling: {" + ", ".join(f"{q}: {g[-1] if g else 1}" for q, g in guesses.items())
                + "}\n")
        code, second, log = on_gradescope(bundle, ag_root, policy_bundles["python"])
        assert code == 0, log
        assert sum(t.get("score", 0) for t in second["tests"] if "question_" in t["name"]) == 0, second


@needs_sandbox
@pytest.mark.thorough
def test_numbers_are_drawn_from_the_submitters_gradescope_email(policy_bundles, tmp_path):
    """Alice's right answer scores for Alice (submission_metadata.json names her) and not for Bob: an answer
    cannot be passed around; Bob's feedback names the mismatch and shows his numbers."""
    from validator.questions import draw, evaluate
    from validator.spec import load_catalogue

    bundle = policy_bundles["after_due_date"]
    [count] = [q for q in load_catalogue(bundle / "challenges")["scaling"].questions if q.id == "count"]
    alice, bob = "alice@uni.edu", next(f"bob{i}@uni.edu" for i in range(100)
                                       if draw("scaling", count, f"bob{i}@uni.edu") != draw("scaling", count, "alice@uni.edu"))
    right = evaluate(COUNT_KEY["answer"], draw("scaling", count, alice))
    scores = {}
    for who in (alice, bob):
        ag_root = tmp_path / who
        lay_out(ag_root, CORRECT, f"student: {{id: {alice}}}\nscaling: {{factor: 3, kind: b, count: {right:g}}}\n")
        (ag_root / "submission_metadata.json").write_text(json.dumps({"users": [{"email": who, "name": who, "id": 1}]}))
        code, results, log = on_gradescope(bundle, ag_root, policy_bundles["python"])
        assert code == 0, log
        [test] = [t for t in results["tests"] if t["name"] == "scaling / question_count"]
        scores[who] = (test["score"], test["output"], results["output"])
    assert scores[alice][0] == 1 and scores[bob][0] == 0, scores
    assert f"names the student id '{alice}', but this submission is from '{bob}'" in scores[bob][2]
    assert "your numbers: rows = " in scores[bob][1] and "hint: Multiply" in scores[bob][1]
