"""`pytest --validator` gives the verdicts of `submit-build`, item for item."""

from __future__ import annotations

import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from helpers import IMPLEMENTATIONS, ROOT, catalogue
from validator.api import grade

MUTANT = IMPLEMENTATIONS / "token_embedding" / "broken" / "ids_clamped.py"


def a_project_with_its_own_tests(folder: Path) -> None:
    """A folder laid out like this repository: a pyproject whose testpaths hold failing tests that need a
    package the student set-up does not install. `pytest --validator` must grade the student's code only."""
    (folder / "tests").mkdir(exist_ok=True)
    (folder / "tests" / "test_own.py").write_text("import jsonschema_not_installed\n\ndef test_own():\n    assert False\n")
    (folder / "test_top.py").write_text("def test_top():\n    assert False\n")
    (folder / "pyproject.toml").write_text('[tool.pytest.ini_options]\ntestpaths = ["tests"]\n')


def run_plugin(tmp_path: Path, student: Path, *extra: str) -> dict[str, str]:
    """Run pytest with the plugin in a fresh process, in a folder with tests of its own; return
    {check id: outcome} from its JUnit XML (which must hold the validator's items only)."""
    a_project_with_its_own_tests(tmp_path)
    xml = tmp_path / "junit.xml"
    cmd = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--validator", "--validator-student",
           str(student), "--validator-challenge", "token_embedding", "--validator-seed", "5",
           "--validator-profile", "quick", f"--junitxml={xml}", "-q", "-o", "addopts=", *extra]
    proc = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert proc.returncode in (0, 1), proc.stdout[-3000:] + proc.stderr[-3000:]
    outcomes = {}
    for case in ET.parse(xml).getroot().iter("testcase"):
        assert case.get("classname").endswith("token_embedding"), f"not a validator item: {case.get('classname')}"
        check = case.get("name").split("::")[-1]
        if case.find("failure") is not None or case.find("error") is not None:
            outcomes[check] = "failed"
        elif case.find("skipped") is not None:
            outcomes[check] = "skipped"
        else:
            outcomes[check] = "passed"
    return outcomes, proc.stdout


def expected(student: Path, checks: list[str] | None = None) -> dict[str, str]:
    report = grade(student, challenges=["token_embedding"], seed=5, profile="quick", checks=checks,
                   catalogue=catalogue())
    folded = {"error": "failed", "advisory": "passed"}
    return {c.id: folded.get(c.status, c.status) for c in report.challenges[0].checks}


SELECTED = ["matches_reference", "id_too_large_raises", "signature", "negative_id_flagged"]
ON_THE_PAGE = ["matches_reference", "id_too_large_raises", "init_distribution"]


@pytest.fixture(scope="module")
def selected_run(tmp_path_factory):
    """One serial `pytest --validator -k ... --validator-html` run, shared by the two tests that read it."""
    tmp_path = tmp_path_factory.mktemp("plugin-selected")
    page = tmp_path / "report.html"
    chosen = sorted(set(SELECTED) | set(ON_THE_PAGE))
    got, out = run_plugin(tmp_path, MUTANT, "-k", " or ".join(chosen), f"--validator-html={page}")
    return got, out, page, chosen


def test_selected_items_match_submit_build(selected_run):
    """-k selects items; the selected checks get submit-build's verdicts and the same reproduce line."""
    got, out, _, chosen = selected_run
    assert got == expected(MUTANT, chosen)
    assert set(SELECTED) <= set(got)
    assert got["id_too_large_raises"] == "failed" and got["matches_reference"] == "passed"
    assert "validator submit-build --challenge token_embedding --check id_too_large_raises --seed 5" in out
    assert "seed 5" in out
    assert "test_own" not in out and "test_top" not in out and "jsonschema" not in out


@pytest.mark.thorough
def test_named_paths_are_collected_beside_the_students_items(tmp_path):
    """Paths on the command line are collected as asked, with the validator's items; none is lost."""
    a_project_with_its_own_tests(tmp_path)
    (tmp_path / "student").mkdir()
    (tmp_path / "student" / "layers.py").write_text(MUTANT.read_text())
    cmd = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--validator", "--validator-student",
           "student", "--validator-challenge", "token_embedding", "--collect-only", "-q", "-o", "addopts=",
           "test_top.py"]
    proc = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "test_top.py::test_top" in proc.stdout and "student/layers.py::token_embedding::signature" in proc.stdout
    assert "test_own" not in proc.stdout


@pytest.mark.thorough
def test_a_missing_student_file_is_a_usage_error(tmp_path):
    cmd = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--validator", "--validator-student",
           str(tmp_path / "nowhere"), "-o", "addopts="]
    proc = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 4 and "--validator: no student file at" in proc.stderr, proc.stdout + proc.stderr


@pytest.mark.thorough
@pytest.mark.parametrize("student", [ROOT / "reference" / "layers.py", MUTANT], ids=["reference", "mutant"])
def test_every_item_matches_submit_build(tmp_path, student):
    got, _ = run_plugin(tmp_path, student, "-n", "2")
    want = expected(student)
    assert got == want


def _assert_the_page(got: dict[str, str], page: Path) -> None:
    assert got["id_too_large_raises"] == "failed"
    text = page.read_text()
    assert "token_embedding" in text and "id_too_large_raises" in text and "init_distribution" in text
    assert "<svg" in text, "the init check's histogram"
    assert "<script" not in text.lower()


@pytest.mark.parametrize("workers", [pytest.param([], id="serial"),
                                     pytest.param(["-n", "2"], id="xdist", marks=pytest.mark.thorough)])
def test_validator_html_writes_the_graded_checks_as_one_page(tmp_path, workers, request):
    """--validator-html: the page submit-build --html writes, from the controller even when xdist workers grade.
    The serial run is the one test_selected_items_match_submit_build reads (one run for both)."""
    if not workers:
        got, _, page, _ = request.getfixturevalue("selected_run")
        _assert_the_page(got, page)
        return
    page = tmp_path / "report.html"
    got, _ = run_plugin(tmp_path, MUTANT, "-k", " or ".join(ON_THE_PAGE), f"--validator-html={page}", *workers)
    _assert_the_page(got, page)


def test_the_student_set_up_installs_what_the_plugin_needs():
    """README's and the handout's set-up install the [pytest] extra, and tell students to run the
    environment's pytest (a `pytest` from elsewhere on the PATH rejects --validator)."""
    import re

    from validator.instructor.release import HANDOUT_README
    from validator.tomlcompat import tomllib

    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert any(dep.startswith("pytest") for dep in extras["pytest"])
    readme = (ROOT / "README.md").read_text()
    students = readme.split("## For students", 1)[1].split("\n## ", 1)[0]
    for text in (students, HANDOUT_README):
        set_up = re.search(r"```bash\n(.*?)```", text, flags=re.S).group(1)
        assert "pip install -e '.[pytest]'" in set_up, set_up
        assert "python -m pytest --validator" in text
