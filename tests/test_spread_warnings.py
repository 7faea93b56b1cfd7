"""One bug, one check: `regenerate` and `strength --all-checks` warn when one broken implementation or
one mutant fails more than one check, naming the checks and their titles."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from test_regenerate import BROKEN, CORRECT, make_project, run_regenerate
from validator.instructor.strength import MutantResult, spread_warnings


def test_strength_warns_for_the_mutants_caught_by_several_checks():
    """Grouped by the checks they fail; a mutant that fails most checks (a broken output) is the blast
    radius's business, not a warning."""
    checks = [SimpleNamespace(id=f"c{i}", title=f"title {i}", advisory=False, points=1) for i in range(6)]
    checks[0].title = "the output is 3x + 1"
    challenge = SimpleNamespace(checks=checks)
    results = [MutantResult(id="m1", status="caught", caught_by=["c0"]),
               MutantResult(id="m2", status="caught", caught_by=["c0", "c1"]),
               MutantResult(id="m3", status="caught", caught_by=["c0", "c1"]),
               MutantResult(id="m4", status="caught", caught_by=["c2", "c3", "c4"]),
               MutantResult(id="m5", status="caught", caught_by=["c0", "c1", "c2", "c3"]),
               MutantResult(id="m6", status="equivalent")]
    assert spread_warnings(challenge, results) == [
        "2 mutants (m2, m3) each fail 2 checks: c0 (the output is 3x + 1); c1 (title 1) -- one bug, one check: "
        "does each title name this bug?",
        "m4 fails 3 checks: c2 (title 2); c3 (title 3); c4 (title 4) -- one bug, one check: does each title name "
        "this bug?"]


@pytest.mark.thorough
def test_regenerate_warns_for_a_broken_implementation_that_fails_several_checks(tmp_path):
    """A new challenge (no fixture yet): its mutant library is graded once; a bug that costs two checks is
    a warning with both titles, one that costs one check is not, and nothing fails."""
    dirs = make_project(tmp_path / "project", shift=False)
    library = tmp_path / "implementations" / "scaling" / "broken"
    library.mkdir(parents=True)
    (library / "flattened.py").write_text('MAY_FAIL = ["values"]\n' + CORRECT.replace(
        "return x * 3 + 1", "return (x * 3 + 1).reshape(-1)"))
    (library / "one_bug.py").write_text(BROKEN)
    code, text = run_regenerate(dirs, self_check=False, implementations_dir=tmp_path / "implementations")
    assert code == 0, text
    warnings = [line for line in text.splitlines() if line.startswith("warning:")
                and not line.startswith("warning: choice questions:")]  # the question lint's own, on a toy key
    want = "flattened.py fails 2 checks: output_shape (the output has the shape of x | always); values (the output is 3x + 1)"
    assert len(warnings) == 1 and want in warnings[0] and "(not in its MAY_FAIL: output_shape)" in warnings[0], text
    assert "mutant library scaling: 2 broken implementation(s) graded, 1 warning(s)" in text
    code, text = run_regenerate(dirs, self_check=False, implementations_dir=tmp_path / "implementations")
    assert code == 0 and "mutant library" not in text, text  # nothing recorded, nothing graded again
