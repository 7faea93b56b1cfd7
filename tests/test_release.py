"""`validator release`: the handout leaks nothing and grades like the repository; the autograder bundle grades.

The fast tests release the mini project of test_regenerate; the slow ones
release the real catalogue and replay the whole mutant library in the handout.
"""

from __future__ import annotations

import json
import lzma
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import yaml

from test_autograder import dependencies_only_python, hostile_run, needs_sandbox
from test_regenerate import BROKEN, CORRECT, MINI_KEY, MINI_SHIFT_SPEC, MINI_SPEC, make_project, run_regenerate
from validator import case_store
from validator.api import grade
from validator.instructor import stubgen
from validator.reference_side import RECORD_SEEDS
from validator.instructor.release import build_autograder, find_leaks, handout, secrets
from validator.spec import load_catalogue

ROOT = Path(__file__).resolve().parents[1]


def clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("VALIDATOR_CHALLENGES", "VALIDATOR_REFERENCE", "VALIDATOR_PROFILE", "PYTHONPATH", "CI")}
    env.update(extra)
    return env


def all_text(root: Path) -> dict[str, str]:
    """Every file of a tree as text, fixtures decompressed: what a leak search must read."""
    out = {}
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        data = path.read_bytes()
        if path.suffix == ".frozen":
            data = lzma.decompress(data)
        elif path.suffix == ".cases":
            data = "\n".join(case_store.strings(path)).encode()
        out[path.relative_to(root).as_posix()] = data.decode("utf-8", errors="replace")
    return out


def assert_no_leak(tree: Path, reference_file: Path, key: dict, handed_out: str) -> None:
    """An independent search: no reference-only line, no marker, no key text, no instructor file.

    ``handed_out`` is the stub plus the specs: a solution line quoted there (a hint) is given on purpose.
    """
    names = [p.relative_to(tree).as_posix() for p in tree.rglob("*")]
    assert not [n for n in names if n.startswith("reference") or "answer_key" in n], names
    given = " ".join(handed_out.split())
    # A line that only opens a call (``self.weight = nn.Parameter(``) says nothing of the solution; the
    # lines that follow it are searched on their own.
    secret_lines = [line for line in stubgen.solution_lines(reference_file.read_text())
                    if len(line) >= 24 and " ".join(line.split()) not in given and not line.endswith(("(", "[", "{"))]
    assert len(secret_lines) >= 3
    explanations = [" ".join(e["explanation"].split()) for qs in key.values() for e in qs.values()
                    if isinstance(e, dict) and e.get("explanation")]
    for name, text in all_text(tree).items():
        squashed = " ".join(text.split())
        assert "BEGIN SOLUTION" not in text and "END SOLUTION" not in text, name
        for line in secret_lines:
            assert line not in text, f"{name} holds the reference line {line!r}"
        for explanation in explanations:
            assert explanation[:60] not in squashed, f"{name} holds an answer-key explanation"


@pytest.fixture(scope="module")
def released(tmp_path_factory):
    root = tmp_path_factory.mktemp("release")
    dirs = make_project(root / "project")
    code, text = run_regenerate(dirs, self_check=False)
    assert code == 0, text
    out = root / "handout"
    _, quoted = handout(out, challenges_dir=dirs["challenges"], reference_dir=dirs["reference"],
                        student_dir=dirs["student"])
    assert quoted == []
    bundle = root / "autograder"
    build_autograder(bundle, challenges_dir=dirs["challenges"], reference_dir=dirs["reference"])
    subset = root / "assignment"
    build_autograder(subset, challenges_dir=dirs["challenges"], reference_dir=dirs["reference"],
                     challenges=["shifting"])
    for name, source in (("correct.py", CORRECT), ("broken.py", BROKEN)):
        (root / name).write_text(source)
    return dict(dirs, root=root, handout=out, bundle=bundle, subset=subset)


def run_in(folder: Path, *args: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "validator", *args], cwd=folder, env=clean_env(**env),
                          capture_output=True, text=True, timeout=600)


# -- the handout ---------------------------------------------------------------------------
def test_handout_layout(released):
    out = released["handout"]
    assert (out / "student" / "layers.py").read_text() == (released["student"] / "layers.py").read_text()
    assert yaml.safe_load((out / "student" / "answers.yaml").read_text()) == {"scaling": {"factor": None, "kind": None}}
    for name in ("scaling.yaml", "scaling.md", "fixtures/scaling.frozen", "fixtures/scaling.cases", "shifting.md"):
        assert (out / "challenges" / name).exists(), name
    assert sorted(p.name for p in (out / "validator" / "instructor").glob("*.py")) == ["__init__.py"]
    assert not (out / "reference").exists() and not (out / "tests").exists()
    assert "hypothesis==" in (out / "pyproject.toml").read_text()


def test_the_handouts_grader_replays_the_recorded_cases(released):
    """The stamp and the replay keys are computed from the handout's own copy of the grader and its specs
    (without their `strength:` blocks): a correct layer graded there must search nothing under hypothesis."""
    probe = ("from pathlib import Path; from validator import case_store, checks; from validator.api import grade\n"
             "print(len(case_store.read(Path('challenges/fixtures/scaling.cases'), 'default-11') or {}))\n"
             "searches = []; given = checks.given\n"
             "checks.given = lambda *a, **k: (searches.append(1), given(*a, **k))[1]\n"
             f"report = grade({str(released['root'] / 'correct.py')!r}, challenges=['scaling'], seed=11, "
             "profile='default', answers={})\n"
             "print(len(searches), sorted({c.status for c in report.challenges[0].checks if c.kind != 'question'}))")
    run = subprocess.run([sys.executable, "-c", probe], cwd=released["handout"], env=clean_env(),
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    recorded, searched = run.stdout.splitlines()[:2]
    assert int(recorded) > 0 and searched.startswith("0 "), run.stdout


def test_handout_holds_no_solution_and_no_key(released):
    given = (released["student"] / "layers.py").read_text() + MINI_SPEC + MINI_SHIFT_SPEC
    assert_no_leak(released["handout"], released["reference"] / "layers.py", MINI_KEY, given)


def test_leak_search_finds_a_planted_solution(released, tmp_path):
    copy = tmp_path / "handout"
    shutil.copytree(released["handout"], copy)
    stub = (released["student"] / "layers.py").read_text()
    needles = secrets(released["reference"] / "layers.py", released["reference"] / "answer_key.yaml", stub)
    assert ("self.bias = torch.nn.Parameter(torch.zeros(dim))", "a line of the reference solution "
            "('self.bias = torch.nn.Parameter(torch.zeros(dim))')") in needles
    quoting = secrets(released["reference"] / "layers.py", released["reference"] / "answer_key.yaml",
                      stub + "hint: `self.bias = torch.nn.Parameter(torch.zeros(dim))`")
    assert not [n for n, _ in quoting if n == "self.bias = torch.nn.Parameter(torch.zeros(dim))"]
    assert not find_leaks(copy, needles)
    with (copy / "challenges" / "scaling.md").open("a") as f:
        f.write('\n    raise TypeError(f"scaled takes a float tensor, got {x.dtype} values")\n')
    (copy / "student" / "answer_key.yaml").write_text("x: 1\n")
    with (copy / "validator" / "paths.py").open("a") as f:
        f.write("# An added constant makes it affine, not linear.\n")
    found = {(leak.path, leak.what.split(" (")[0]) for leak in find_leaks(copy, needles)}
    assert ("challenges/scaling.md", "a line of the reference solution") in found
    assert ("student/answer_key.yaml", "instructor-only file") in found
    assert ("validator/paths.py", "the answer key's explanation for scaling.kind") in found


def test_a_hint_in_the_key_is_searched_for_like_an_explanation(tmp_path):
    """A hint is shown after a wrong answer, never handed out whole: a handout quoting it leaks the key."""
    (tmp_path / "layers.py").write_text(CORRECT)
    (tmp_path / "answer_key.yaml").write_text(yaml.safe_dump(
        {"scaling": {"kind": {"answer": "b", "explanation": "An added constant makes it affine.",
                              "hint": "Does the map send zero to zero, or somewhere else?"}}}))
    needles = secrets(tmp_path / "layers.py", tmp_path / "answer_key.yaml", "")
    assert ("Does the map send zero to zero, or somewhere else?", "the answer key's hint for scaling.kind") in needles


def test_a_fixture_is_searched_by_its_strings_not_its_digests_and_sizes(tmp_path):
    """A 4-digit answer inside a call key or a byte length is chance, not a leak; inside a message it is one."""
    from validator.reference_side import FixtureFile

    tree = tmp_path / "handout"
    (tree / "challenges" / "fixtures").mkdir(parents=True)
    result = {"ok": False, "output": torch.zeros(384), "exception": {"type": "E", "mro": ["E"], "message": "fine"}}
    fixture = FixtureFile("c", "f", [1], ["quick"], [], {}, {"be42033707de49251536ba42": result})
    path = tree / "challenges" / "fixtures" / "c.frozen"
    path.write_bytes(fixture.to_bytes())
    needles = [("1536", "the answer key's answer for c.q")]
    assert find_leaks(tree, needles) == []
    result["exception"]["message"] = "the crossover is at 1536 tokens"
    path.write_bytes(fixture.to_bytes())
    assert [leak.what for leak in find_leaks(tree, needles)] == ["the answer key's answer for c.q"]


@pytest.mark.parametrize("name", [pytest.param("correct.py", marks=pytest.mark.thorough), "broken.py"])
def test_handout_gives_the_same_verdicts_as_the_repository(released, name):
    """The broken file (some checks pass, some fail) in the default tier; the correct one too with --thorough."""
    seed = RECORD_SEEDS[1]
    catalogue = load_catalogue(released["challenges"])
    student = released["root"] / name
    live = grade(student, seed=seed, profile="quick", catalogue=catalogue, challenges_dir=released["challenges"],
                 reference_dir=released["reference"], reference_mode="live")
    result = run_in(released["handout"], "submit-build", "--student", str(student), "--no-input", "--profile",
                    "quick", "--seed", str(seed), "--json", str(released["root"] / f"{name}.json"))
    assert result.returncode == 1, result.stdout + result.stderr  # questions are never graded in a handout
    frozen = json.loads((released["root"] / f"{name}.json").read_text())
    want = {(ch.id, c.id): c.status for ch in live.challenges for c in ch.checks if c.kind != "question"}
    got = {(ch["id"], c["id"]): c["status"] for ch in frozen["challenges"] for c in ch["checks"]
           if c["kind"] != "question"}
    assert got == want, name
    questions = [c for ch in frozen["challenges"] for c in ch["checks"] if c["kind"] == "question"]
    assert questions and all(c["status"] == "skipped" for c in questions)
    assert "graded against reference results frozen" in result.stdout
    if name == "broken.py":
        assert set(want.values()) == {"passed", "failed"}


@pytest.fixture(scope="module")
def answered(released):
    """One handout run of the correct file with right answers and no --seed, read by the two tests below."""
    answers = released["root"] / "answers.yaml"
    answers.write_text("scaling: {factor: 3, kind: b}\n")
    return run_in(released["handout"], "submit-build", "--student", str(released["root"] / "correct.py"),
                  "--answers", str(answers), "--no-input", "--profile", "quick",
                  "--json", str(released["root"] / "answered.json"))


def test_handout_picks_a_recorded_seed_and_refuses_others(released, answered):
    assert answered.returncode == 0, answered.stdout + answered.stderr
    assert any(f"seed {s}" in answered.stdout for s in RECORD_SEEDS)
    assert "not writable" not in answered.stderr and "USDT" not in answered.stderr + answered.stdout, answered.stderr
    refused = run_in(released["handout"], "submit-build", "--student", str(released["root"] / "correct.py"),
                     "--no-input", "--seed", "5")
    assert refused.returncode == 2 and "--seed 5 is not one of them" in " ".join(refused.stderr.split())


def test_handout_run_with_everything_gradable_passing_exits_zero(released, answered):
    assert answered.returncode == 0, answered.stdout + answered.stderr
    report = json.loads((released["root"] / "answered.json").read_text())
    questions = [c for ch in report["challenges"] for c in ch["checks"] if c["kind"] == "question"]
    assert [c["message"] for c in questions] == ["recorded (format valid); graded at official submission"] * 2


def test_unrecorded_profile_falls_back_and_says_so(released):
    report = grade(released["root"] / "correct.py", seed=RECORD_SEEDS[0], profile="ci",
                   catalogue=load_catalogue(released["challenges"]), challenges_dir=released["challenges"],
                   reference_dir=released["root"] / "nowhere")
    assert report.profile == "default" and any("'ci' was not recorded" in n for n in report.notes)
    assert all(c.status == "passed" for ch in report.challenges for c in ch.checks if c.kind != "question")


# -- every reproduce line replays in the handout ------------------------------------------------------
@pytest.fixture(scope="module")
def broken_handout(released, tmp_path_factory):
    """A student's handout, BROKEN in student/layers.py: where students paste the lines they are given."""
    folder = tmp_path_factory.mktemp("student") / "handout"
    shutil.copytree(released["handout"], folder)
    (folder / "student" / "layers.py").write_text(BROKEN)
    return folder


def replay(handout_dir: Path, line: str, json_path: Path) -> dict[tuple[str, str], dict]:
    """Run a reproduce line as a student pastes it, in the handout; the checks it graded, by (challenge, id)."""
    import shlex

    argv = shlex.split(line, comments=True)
    assert argv[:2] == ["validator", "submit-build"], line
    done = run_in(handout_dir, *argv[1:], "--no-input", "--json", str(json_path))
    assert done.returncode in (0, 1), f"{line}\n{done.stdout}{done.stderr}"
    report = json.loads(json_path.read_text())
    return {(ch["id"], c["id"]): c for ch in report["challenges"] for c in ch["checks"]}


def assert_replays(handout_dir: Path, failed: dict[tuple[str, str], tuple[str, str]], tmp_path: Path) -> None:
    """Each (challenge, check) -> (reproduce line, status): the line gives the same status in the handout,
    on an input the original message names too."""
    assert failed
    for i, ((challenge, check), (line, status)) in enumerate(sorted(failed.items())):
        got = replay(handout_dir, line, tmp_path / f"replay{i}.json")
        assert got[(challenge, check)]["status"] == status, (line, got[(challenge, check)])


@needs_sandbox
@pytest.mark.thorough
def test_official_feedback_replays_in_the_handout(released, broken_handout, tmp_path):
    """Gradescope's feedback (the bundle in Gradescope's layout, official profile and seed): each failing
    check's reproduce line, run in the handout, fails there the same way, on the same input."""
    from validator.reference_side import OFFICIAL_SEED

    python = dependencies_only_python(tmp_path)
    results, _ = grade_on_gradescope(released["root"] / "autograder.zip", tmp_path / "ag", BROKEN, None, python)
    failed, inputs = {}, {}
    for test in results["tests"]:
        lines = test["output"].splitlines()
        line = next((x.removeprefix("reproduce: ") for x in lines if x.startswith("reproduce: ")), None)
        if test["status"] == "failed" and line:
            challenge, check = test["name"].split(" / ")
            failed[(challenge, check)] = (line, "failed")
            inputs[(challenge, check)] = [x.strip() for x in lines if "input" in x]
    assert ("scaling", "values") in failed, results
    assert all(f"--seed {OFFICIAL_SEED} --profile batch" in line for line, _ in failed.values()), failed
    assert_replays(broken_handout, failed, tmp_path)
    got = replay(broken_handout, failed[("scaling", "values")][0], tmp_path / "values.json")[("scaling", "values")]
    assert inputs[("scaling", "values")] and all(x in got["message"] for x in inputs[("scaling", "values")]), got


@pytest.mark.thorough
def test_submit_build_lines_replay_in_the_handout(broken_handout, tmp_path):
    done = run_in(broken_handout, "submit-build", "--no-input", "--json", str(tmp_path / "run.json"))
    assert done.returncode == 1, done.stdout + done.stderr
    report = json.loads((tmp_path / "run.json").read_text())
    assert report["seed"] in RECORD_SEEDS
    failed = {(ch["id"], c["id"]): (c["reproduce"], c["status"]) for ch in report["challenges"] for c in ch["checks"]
              if c["reproduce"]}
    assert_replays(broken_handout, failed, tmp_path)


@pytest.mark.thorough
def test_pytest_plugin_in_a_handout_picks_a_recorded_seed_and_its_lines_replay(broken_handout, tmp_path):
    import re

    done = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--validator",
                           "--validator-student", "student", "-rN"], cwd=broken_handout, env=clean_env(),
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "test_" not in done.stdout.replace("question_", "")  # nothing but the validator's items
    seed = int(re.search(r"--validator-seed (\d+)", done.stdout).group(1))
    assert seed in RECORD_SEEDS, done.stdout
    failed = {}
    for line in re.findall(r"^reproduce: (.+)$", done.stdout, flags=re.M):
        challenge = re.search(r"--challenge (\S+)", line).group(1)
        check = re.search(r"--check (\S+)", line).group(1)
        failed[(challenge, check)] = (line, "failed")
    assert ("scaling", "values") in failed, done.stdout
    assert_replays(broken_handout, failed, tmp_path)


def test_instructor_commands_are_not_in_a_handout(released):
    result = run_in(released["handout"], "regenerate", "--check")
    assert result.returncode == 2 and "is a staff command" in result.stderr and "submit-build" in result.stderr


# -- the autograder bundle ---------------------------------------------------------------------
def gradescope_layout(archive: Path, root: Path) -> Path:
    """Gradescope's layout: the zip the instructor uploads (the one `release` wrote) unpacked into
    ROOT/source, and a copy of its run_autograder at ROOT/run_autograder, which is what Gradescope runs
    (returned)."""
    (root / "source").mkdir(parents=True)
    subprocess.run(["unzip", "-q", str(archive), "-d", str(root / "source")], check=True)
    shutil.copy2(root / "source" / "run_autograder", root / "run_autograder")
    return root / "run_autograder"


def grade_on_gradescope(archive: Path, ag: Path, layers: str, answers: str | None, python: Path,
                        **env: str) -> tuple[dict, str]:
    """Upload ``archive``, submit ``layers`` (and ``answers``) under student/, run it; (results.json, output)."""
    script = gradescope_layout(archive, ag)
    (ag / "submission" / "student").mkdir(parents=True)
    (ag / "submission" / "student" / "layers.py").write_text(layers)
    if answers is not None:
        (ag / "submission" / "student" / "answers.yaml").write_text(answers)
    done = subprocess.run(["bash", str(script)], env=clean_env(AUTOGRADER_ROOT=str(ag), PYTHON=str(python), **env),
                          capture_output=True, text=True, timeout=600, cwd=str(ag))
    assert done.returncode == 0, done.stdout + done.stderr
    return json.loads((ag / "results" / "results.json").read_text()), done.stdout + done.stderr


def absolute_paths(text: str) -> list[str]:
    import re

    return sorted(set(re.findall(r"(?<![\w.])(/(?:[\w.+-]+/)*[\w.+-]+)", text)))


def test_autograder_bundle_grades_a_submission_in_gradescopes_layout(released, tmp_path):
    bundle = released["bundle"]
    for name in ("setup.sh", "run_autograder", ".github/workflows/grade.yml", "reference/layers.py",
                 "reference/answer_key.yaml", "challenges/scaling.yaml", "validator/instructor/gradescope.py"):
        assert (bundle / name).exists(), name
    assert os.access(bundle / "run_autograder", os.X_OK) and "hypothesis==" in (bundle / "setup.sh").read_text()
    workflow = yaml.safe_load((bundle / ".github" / "workflows" / "grade.yml").read_text())
    assert "grade" in workflow["jobs"] and any("grade_github.sh" in str(s.get("run", ""))
                                              for s in workflow["jobs"]["grade"]["steps"])
    assert "run_autograder" in (bundle / "grade_github.sh").read_text()
    ag = tmp_path / "autograder"
    python = dependencies_only_python(tmp_path)
    results, output = grade_on_gradescope(released["root"] / "autograder.zip", ag, CORRECT,
                                          "scaling: {factor: 3, kind: a}\n", python, VALIDATOR_PROFILE="quick")
    scored = [t for t in results["tests"] if "max_score" in t]
    assert results["score"] == sum(t["max_score"] for t in scored) - 1 > 0, results
    assert [t["name"] for t in scored if t["status"] != "passed"] == ["scaling / question_kind"], results
    # The default answer policy (after_due_date): the wrong answer's right answer and the key's explanation
    # are in a test of their own that Gradescope shows after the due date; nowhere a student reads now.
    later = [t for t in results["tests"] if t["visibility"] == "after_due_date"]
    assert [t["name"] for t in later] == ["scaling / question_kind: the answer"] and "max_score" not in later[0]
    assert "answer: b) affine" in later[0]["output"] and "An added constant makes it affine" in later[0]["output"]
    now = json.dumps([t for t in results["tests"] if t["visibility"] == "visible"]) + results["output"]
    now += (ag / "results" / "report.txt").read_text() + (ag / "results" / "report.json").read_text()
    assert "affine, not linear" not in now and "b) affine" not in now, now
    log = (ag / "results" / "grader.log").read_text()
    assert "gradebook:" in log and "self-test:" in log, log
    gone = [p for p in absolute_paths(log) if not os.path.exists(p)]
    assert not gone, f"grader.log names paths that are gone: {gone}\n{log}"
    assert (ag / "results" / "graded" / "submissions" / "submission" / "layers.py").read_text() == CORRECT
    assert "USDT" not in output and "not writable" not in output, output


def test_the_bundle_says_how_to_upload_it_and_its_zip_is_what_gradescope_needs(released):
    """The bundle's README is its own (upload steps, base image, autograder.yaml, what students see); the
    zip `release` writes beside it holds the bundle's contents at its root, scripts executable."""
    import zipfile

    readme = (released["bundle"] / "README.md").read_text()
    assert readme != (ROOT / "README.md").read_text()
    for words in ("autograder.zip", "setup.sh", "run_autograder", "zip's root", "Ubuntu 22.04", "Python 3.10",
                  "autograder.yaml", "allow_degraded", "What students see", "--seed 11 --profile batch",
                  "GitHub Actions", "the whole catalogue"):
        assert words in readme, words
    with zipfile.ZipFile(released["root"] / "autograder.zip") as zf:
        names = zf.namelist()
        modes = {i.filename: i.external_attr >> 16 for i in zf.infolist()}
    assert {"setup.sh", "run_autograder", "autograder.yaml", "README.md", "reference/layers.py",
            "challenges/scaling.yaml", "validator/instructor/gradescope.py"} <= set(names)
    assert not [n for n in names if n.startswith((".github/", "submission/"))], names
    assert modes["run_autograder"] & 0o111 and modes["setup.sh"] & 0o111


def test_the_bundle_carries_its_answer_policy_and_its_github_step_stops_workflow_commands(released, tmp_path):
    """autograder.yaml says `show_answers` (after_due_date unless release is told otherwise), which the grading
    step reads; grade_github.sh turns the runner's workflow commands off with a fresh token while it grades and
    prints the report, and on again after."""
    from validator.instructor import gradescope as ag
    from validator.instructor.release import ReleaseError

    bundle = released["bundle"]
    assert "show_answers: after_due_date" in (bundle / "autograder.yaml").read_text()
    assert ag.answer_policy(bundle) == "after_due_date" and "show_answers" in (bundle / "README.md").read_text()
    (tmp_path / ag.SETTINGS_FILE).write_text("show_answers: always\n")
    assert ag.answer_policy(tmp_path) == "always"
    (tmp_path / ag.SETTINGS_FILE).write_text("show_answers: sometimes\n")
    with pytest.raises(ValueError, match="never, after_due_date, always"):
        ag.answer_policy(tmp_path)
    with pytest.raises(ReleaseError, match="--show-answers"):
        build_autograder(tmp_path / "b", challenges_dir=released["challenges"], reference_dir=released["reference"],
                         show_answers="sometimes")
    script = (bundle / "grade_github.sh").read_text()
    stop, resume = script.index('echo "::stop-commands::$TOKEN"'), script.index('echo "::$TOKEN::"')
    assert stop < script.index('bash "$SRC/run_autograder"') < script.index("report.txt") < resume
    assert "urandom" in script and "VALIDATOR_STUDENT_ID" in script


def test_a_bundle_for_some_challenges_carries_and_grades_only_those(released):
    """`release --autograder DIR --challenge ID`: only those specs, only their key, and autograder.yaml
    names them, which is what run_autograder grades (the canary too)."""
    from validator.instructor import gradescope as ag

    subset = released["subset"]
    assert sorted(p.name for p in (subset / "challenges").glob("*.yaml")) == ["shifting.yaml"]
    # its recorded cases too: each Gradescope container is a fresh grader, which replays them
    assert sorted(p.name for p in (subset / "challenges" / "fixtures").glob("*.cases")) == ["shifting.cases"]
    assert not (subset / "challenges" / "scaling.md").exists()
    assert yaml.safe_load((subset / "reference" / "answer_key.yaml").read_text()) == {}
    assert ag.graded_challenges(subset) == ["shifting"] and ag.graded_challenges(released["bundle"]) is None
    readme = (subset / "README.md").read_text()
    assert "Autograder bundle: shifting" in readme and "- `shifting`: Shifting" in readme and "scaling" not in readme
    assert (released["root"] / "assignment.zip").is_file()
    (subset / "bad").mkdir()
    (subset / "bad" / ag.SETTINGS_FILE).write_text("challenges: shifting\n")
    with pytest.raises(ValueError, match="a list of challenge ids"):
        ag.graded_challenges(subset / "bad")


def test_a_variant_brings_the_spec_it_extends():
    from types import SimpleNamespace

    from validator.instructor.release import _with_bases

    catalogue = {"base": SimpleNamespace(extends=None), "other": SimpleNamespace(extends=None),
                 "variant": SimpleNamespace(extends="base"), "variant2": SimpleNamespace(extends="variant")}
    assert _with_bases(catalogue, ["variant2"]) == ["base", "variant", "variant2"]
    assert _with_bases(catalogue, ["other"]) == ["other"]


def test_release_refuses_an_unknown_challenge_and_a_subset_handout(released, tmp_path, capsys):
    from validator.instructor.release import ReleaseError, main

    with pytest.raises(ReleaseError, match="unknown challenge nope"):
        build_autograder(tmp_path / "b", challenges_dir=released["challenges"], reference_dir=released["reference"],
                         challenges=["nope"])
    assert main(out=str(tmp_path / "h"), challenges=["scaling"]) == 2
    assert "--challenge selects the challenges of the grading bundle" in capsys.readouterr().err


@needs_sandbox
@pytest.mark.thorough
def test_a_bundle_for_some_challenges_grades_only_those_in_gradescopes_layout(released, tmp_path):
    python = dependencies_only_python(tmp_path)
    ag = tmp_path / "autograder"
    results, output = grade_on_gradescope(released["root"] / "assignment.zip", ag, CORRECT, None, python,
                                          VALIDATOR_PROFILE="quick")
    assert results["tests"] and {t["name"].split(" / ")[0] for t in results["tests"]} == {"shifting"}, results
    assert results["score"] == sum(t["max_score"] for t in results["tests"]), results
    assert "self-test: the reference and the answer key scored full marks" in output


def test_setup_installs_every_dependency_of_the_grader(released):
    """setup.sh is the only install Gradescope does: it must name every dependency pyproject.toml declares."""
    from validator.tomlcompat import tomllib

    setup = (released["bundle"] / "setup.sh").read_text()
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    for dep in declared:
        name = dep.split(";")[0].split(">")[0].split("=")[0].split("<")[0].strip()
        assert name in setup, f"setup.sh does not install {name}"
    assert "pip install -e" not in setup and "hypothesis==" in setup


@needs_sandbox
def test_autograder_bundle_resists_a_hostile_submission(released, tmp_path):
    """Every attack of tests/test_autograder.py in one submission through run_autograder: no point gained,
    the bundle unchanged (about 13 s; the honest regrade from the same folder is in the thorough tier)."""
    hostile_run(released["bundle"], tmp_path)


def test_autograder_bundle_hides_all_its_own_files(released):
    """grader_paths() as the bundle's grader computes it covers every top-level entry of the bundle."""
    bundle = released["bundle"]
    done = subprocess.run([sys.executable, "-c", "import json; from validator.batch.grade import grader_paths; "
                           "print(json.dumps(grader_paths()))"], capture_output=True, text=True, timeout=120,
                          cwd=str(bundle), env=clean_env(PYTHONPATH=str(bundle)))
    assert done.returncode == 0, done.stderr
    hidden = [Path(p) for p in json.loads(done.stdout.splitlines()[-1])]
    exposed = [p for p in bundle.resolve().iterdir() if not any(h == p or h in p.parents for h in hidden)]
    assert exposed == [] and any(h.name == "reference" or h == bundle.resolve() for h in hidden), hidden


def test_autograder_reports_a_missing_submission(released, tmp_path):
    ag = tmp_path / "autograder"
    (ag / "submission").mkdir(parents=True)
    done = subprocess.run(["bash", str(released["bundle"] / "run_autograder")], capture_output=True, text=True,
                          env=clean_env(AUTOGRADER_ROOT=str(ag), PYTHON=sys.executable), timeout=120)
    assert done.returncode == 0
    results = json.loads((ag / "results" / "results.json").read_text())
    assert results["score"] == 0 and "No layers.py" in results["output"]


# -- the real catalogue (slow) --------------------------------------------------------------------
@pytest.fixture(scope="module")
def catalogue_handout(tmp_path_factory):
    out = tmp_path_factory.mktemp("catalogue") / "handout"
    handout(out)
    return out


def catalogue_handed_out() -> str:
    return "\n".join([(ROOT / "student" / "layers.py").read_text()]
                     + [p.read_text() for p in sorted((ROOT / "challenges").glob("*.yaml"))])


@pytest.mark.slow
def test_catalogue_handout_holds_no_solution_and_no_key(catalogue_handout):
    key_file = ROOT / "reference" / "answer_key.yaml"
    key = (yaml.safe_load(key_file.read_text()) or {}) if key_file.exists() else {}
    assert_no_leak(catalogue_handout, ROOT / "reference" / "layers.py", key, catalogue_handed_out())


def _library() -> list[tuple[str, Path]]:
    found = []
    for challenge_dir in sorted((ROOT / "tests" / "implementations").glob("*")):
        for path in sorted(challenge_dir.glob("*/*.py")):
            found.append((challenge_dir.name, path))
    return found


@pytest.mark.slow
@pytest.mark.parametrize("challenge,path", _library(), ids=lambda v: f"{v.parent.name}/{v.stem}"
                         if isinstance(v, Path) else v)
def test_catalogue_handout_gives_the_repository_verdict(catalogue_handout, challenge, path):
    """Every correct and broken implementation: the same verdict and points on every check not deferred.

    "failed" and "error" count as one verdict (fell short, no points): a handout can only replay
    inputs whose reference result was recorded, so it cannot always shrink to the input the
    repository reports, and the unshrunk input may show the same bug as a crash rather than a
    wrong value.
    """
    from validator.worker.client import Worker

    catalogue = load_catalogue(ROOT / "challenges")
    seed = RECORD_SEEDS[0]
    with Worker(path) as worker:
        live = grade(path, challenges=[challenge], seed=seed, profile="quick", worker=worker, catalogue=catalogue,
                     reference_mode="live").challenges[0]
        frozen = grade(path, challenges=[challenge], seed=seed, profile="quick", worker=worker,
                       catalogue=load_catalogue(catalogue_handout / "challenges"),
                       challenges_dir=catalogue_handout / "challenges", reference_dir=catalogue_handout / "reference",
                       ).challenges[0]

    def verdict(check):
        return ("fell short" if check.status in ("failed", "error") else check.status, check.score)

    live_verdict = {c.id: verdict(c) for c in live.checks if c.kind != "question"}
    frozen_verdict = {c.id: verdict(c) for c in frozen.checks if c.kind != "question"}
    deferred = {k for k, (status, _) in frozen_verdict.items() if status == "skipped" and live_verdict[k][0] != "skipped"}
    assert deferred <= {c.id for c in catalogue[challenge].checks if c.test == "time_ratio"}, deferred
    differ = {k: (live_verdict[k], frozen_verdict[k]) for k in live_verdict
              if k not in deferred and live_verdict[k] != frozen_verdict[k]}
    assert not differ, (differ, {f"{how} {c.id}": c.message[:400] for how, result in (("live", live), ("frozen", frozen))
                                 for c in result.checks if c.id in differ})


@pytest.mark.slow
def test_package_in_place_in_the_handout_gets_the_repository_verdict(catalogue_handout):
    """A CS336-style package graded through its mapping in a handout (frozen reference) gets the
    repository's verdict on every mapped challenge (time ratios, deferred there, aside)."""
    from test_package_mapping import FIXTURE, MAPPED
    from validator.package import load_package

    catalogue = load_catalogue(ROOT / "challenges")
    handed = load_catalogue(catalogue_handout / "challenges")
    seed = RECORD_SEEDS[0]
    live = grade(FIXTURE, challenges=MAPPED, seed=seed, profile="quick", catalogue=catalogue,
                 package=load_package(FIXTURE, catalogue), reference_mode="live")
    frozen = grade(FIXTURE, challenges=MAPPED, seed=seed, profile="quick", catalogue=handed,
                   challenges_dir=catalogue_handout / "challenges", reference_dir=catalogue_handout / "reference",
                   package=load_package(FIXTURE, handed))
    assert [c.id for c in frozen.challenges] == MAPPED
    timed = {(ch, c.id) for ch in MAPPED for c in catalogue[ch].checks if c.test == "time_ratio"}
    verdicts = [{(ch.id, c.id): (c.status, c.score) for ch in report.challenges for c in ch.checks
                 if c.kind != "question" and (ch.id, c.id) not in timed} for report in (live, frozen)]
    assert verdicts[0] == verdicts[1]
    assert {status for status, _ in verdicts[1].values()} == {"passed"}
