"""Mutation-style proof of the verdicts: correct alternatives pass, realistic bugs are caught.

Every file under tests/implementations/<challenge>/correct/ must get full marks
on every check for several seeds; every file under broken/ must fail at least
one check of each kind it declares in CAUGHT_BY (and each id in
CAUGHT_BY_CHECKS, when given).
"""

from __future__ import annotations

import pytest

from helpers import (code_checks, describe_failures, expectations, grade_file, seeds_for_tests, grading_device,
                     variants)


@pytest.mark.parametrize("challenge,path", variants("correct"), ids=lambda v: getattr(v, "stem", v))
def test_correct_variant_gets_full_marks(challenge, path):
    for result in grade_file(path, challenge, seeds=seeds_for_tests()):
        bad = [c for c in code_checks(result) if c.status not in ("passed", "advisory")]
        assert not bad, f"{path.name} lost points on seed-dependent run:\n{describe_failures(result)}"
        assert result.problem is None


@pytest.mark.parametrize("challenge,path", variants("broken"), ids=lambda v: getattr(v, "stem", v))
def test_broken_variant_is_caught_by_the_named_check(challenge, path):
    (result,) = grade_file(path, challenge, seeds=[0])
    assert_caught(path, result)


@pytest.mark.parametrize("challenge,path", variants("device_broken"), ids=lambda v: getattr(v, "stem", v))
def test_device_only_bug_is_caught_on_that_device(challenge, path):
    """Bugs that only a GPU shows (a tensor made without device=): invisible on the CPU, caught on CUDA."""
    (result,) = grade_file(path, challenge, seeds=[0])
    if grading_device() in (None, "cpu"):
        bad = [c for c in code_checks(result) if c.status not in ("passed", "advisory")]
        assert not bad, f"{path.name} should pass on the CPU:\n{describe_failures(result)}"
    else:
        assert_caught(path, result)


def assert_caught(path, result):
    kinds, check_ids = expectations(path)
    assert kinds, f"{path.name} declares no CAUGHT_BY"
    failing = [c for c in code_checks(result) if c.status in ("failed", "error", "advisory")]
    caught_kinds = {c.kind for c in failing}
    missing = [k for k in kinds if k not in caught_kinds]
    assert not missing, (f"{path.name}: expected a failing check of kind {missing}; failing checks:\n"
                         f"{describe_failures(result) or '  none'}")
    missing_ids = [i for i in check_ids if i not in {c.id for c in failing}]
    assert not missing_ids, f"{path.name}: expected checks {missing_ids} to fail:\n{describe_failures(result)}"
    for c in failing:
        assert c.message.strip(), f"{c.id} failed without a message"
        assert "internal grader error" not in c.message, c.message
