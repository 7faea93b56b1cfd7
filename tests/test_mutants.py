"""The mutant library holds the line: one bug costs the checks that name it, and nothing else.

Every file under tests/implementations/<challenge>/correct/ gets full marks on
several seeds. Every file under broken/ declares ``MAY_FAIL = [check ids]``,
the exact set of checks its single bug may cost (failed, error, or skipped
because a required check failed); it must lose at least one of them and no
other code check (questions are not graded here). ``MESSAGES = {check_id:
substring}`` pins what the report must say. The default tier grades each
mutant of a sample (one broken and one correct per challenge) on one seed; the thorough tier
(``--thorough``) grades every variant, correct ones on several seeds (``VALIDATOR_TEST_SEEDS``), broken
ones on seed 0 and on several more, and each once more as `validator grade` grades it (batch profile,
its default seed).
"""

from __future__ import annotations

import pytest

from validator.reference_side import OFFICIAL_SEED

from helpers import (code_checks, describe_failures, grade_file, grading_device, seeds_for_tests, tiered,
                     variant_name, variants, verdict_problems)


def _ids(v):
    return variant_name(v) if hasattr(v, "stem") else v


@pytest.mark.parametrize("challenge,path", tiered("correct", per_challenge=1))
def test_correct_variant_gets_full_marks(challenge, path):
    for result in grade_file(path, challenge, seeds=seeds_for_tests()):
        bad = [c for c in code_checks(result) if c.status not in ("passed", "advisory")]
        assert not bad, f"{path.name} lost points on seed-dependent run:\n{describe_failures(result)}"
        assert result.problem is None


def _assert_holds(path, results):
    for seed, result in results:
        problems = verdict_problems(path, result)
        assert not problems, (f"{path.name} on seed {seed}: " + "; ".join(problems)
                              + f"\nchecks lost:\n{describe_failures(result) or '  none'}")


@pytest.mark.parametrize("challenge,path", tiered("broken", per_challenge=1))
def test_broken_variant_costs_only_its_declared_checks(challenge, path):
    (result,) = grade_file(path, challenge, seeds=[0])
    _assert_holds(path, [(0, result)])


# Broken files a check catches on some seeds only, each with the reason it is still an xfail (none today).
NOT_CAUGHT_ON_EVERY_SEED: dict[tuple[str, str], str] = {}  # (challenge, file) -> why it is an xfail for now


@pytest.mark.thorough
@pytest.mark.parametrize("challenge,path", variants("broken"), ids=_ids)
def test_broken_variant_costs_only_its_declared_checks_on_every_seed(challenge, path, request):
    if (challenge, path.name) in NOT_CAUGHT_ON_EVERY_SEED:
        request.applymarker(pytest.mark.xfail(reason=NOT_CAUGHT_ON_EVERY_SEED[(challenge, path.name)], strict=False))
    seeds = seeds_for_tests()
    _assert_holds(path, list(zip(seeds, grade_file(path, challenge, seeds=seeds))))


@pytest.mark.thorough
@pytest.mark.parametrize("challenge,path", variants("correct"), ids=_ids)
def test_correct_variant_gets_full_marks_as_officially_graded(challenge, path):
    """In `validator grade`'s own run (the batch profile: 2 examples, no shrinking; its default seed), the run
    that decides the grade, not only in the students' local runs."""
    (result,) = grade_file(path, challenge, seeds=[OFFICIAL_SEED], profile="batch")
    bad = [c for c in code_checks(result) if c.status not in ("passed", "advisory")]
    assert not bad, f"{path.name} lost points as officially graded:\n{describe_failures(result)}"


@pytest.mark.thorough
@pytest.mark.parametrize("challenge,path", variants("broken"), ids=_ids)
def test_broken_variant_costs_only_its_declared_checks_as_officially_graded(challenge, path):
    """The bug is caught by the checks that name it in the run that decides the grade. A check that finds it
    only on lucky draws passes it here on some seed: the finite mask fill survived seed 11 until
    `masked_out` learned to lower a hidden query's scores on purpose (``shift``)."""
    (result,) = grade_file(path, challenge, seeds=[OFFICIAL_SEED], profile="batch")
    _assert_holds(path, [(OFFICIAL_SEED, result)])


def device_params() -> list:
    """The device_broken sample; on the CPU only its first file stays in the default tier: there each bug is
    invisible, so each file is one more correct implementation (the correct sample covers those)."""
    params = tiered("device_broken", per_challenge=1)
    if grading_device() not in (None, "cpu"):
        return params
    return [p if i == 0 else pytest.param(*p.values, marks=(*p.marks, pytest.mark.thorough), id=p.id)
            for i, p in enumerate(params)]


@pytest.mark.parametrize("challenge,path", device_params())
def test_device_only_bug_is_caught_on_that_device(challenge, path):
    """Bugs that only a GPU shows (a tensor made without device=): invisible on the CPU, caught on CUDA."""
    (result,) = grade_file(path, challenge, seeds=[0])
    if grading_device() in (None, "cpu"):
        bad = [c for c in code_checks(result) if c.status not in ("passed", "advisory")]
        assert not bad, f"{path.name} should pass on the CPU:\n{describe_failures(result)}"
    else:
        _assert_holds(path, [(0, result)])


def test_a_declaration_that_does_not_hold_is_reported(tmp_path):
    """The verdict test can fail: a correct file declared broken loses none of its MAY_FAIL checks."""
    from helpers import IMPLEMENTATIONS

    source = (IMPLEMENTATIONS / "token_embedding" / "correct" / "indexing.py").read_text()
    fake = tmp_path / "declared_broken.py"
    fake.write_text('MAY_FAIL = ["zero_size_ids"]\nMESSAGES = {"parameters": "no such words"}\n' + source)
    (result,) = grade_file(fake, "token_embedding", seeds=[0], checks={"parameters", "zero_size_ids"})
    problems = verdict_problems(fake, result)
    assert any("none of its MAY_FAIL" in p for p in problems), problems
    assert any("no such words" in p for p in problems), problems


def test_a_bug_that_breaks_every_call_on_a_device_may_cost_more_there(tmp_path, monkeypatch):
    """RoPE tables left behind by .to(): on the CPU one check, on a GPU every call. The declaration widens the
    verdict on an accelerator only, and only for files that make it."""
    from helpers import IMPLEMENTATIONS

    source = (IMPLEMENTATIONS / "rope" / "broken" / "tables_plain_attributes.py").read_text()
    assert "BREAKS_EVERY_CALL_ON_A_DEVICE = True" in source
    doubled = tmp_path / "doubled.py"  # stands for the GPU's extra losses: matches_reference fails too
    assert "return out.to(x.dtype)" in source
    doubled.write_text(source.replace("return out.to(x.dtype)", "return 2 * out.to(x.dtype)"))
    (result,) = grade_file(doubled, "rope", seeds=[0], checks={"tables_move_with_module", "matches_reference"})
    assert {c.id for c in code_checks(result) if c.status == "failed"} == {"tables_move_with_module",
                                                                           "matches_reference"}
    assert any("outside MAY_FAIL" in p for p in verdict_problems(doubled, result))
    monkeypatch.setenv("VALIDATOR_TEST_DEVICE", "cuda")
    assert verdict_problems(doubled, result) == []
    undeclared = tmp_path / "undeclared.py"
    undeclared.write_text(doubled.read_text().replace("BREAKS_EVERY_CALL_ON_A_DEVICE = True", ""))
    assert any("outside MAY_FAIL" in p for p in verdict_problems(undeclared, result))
