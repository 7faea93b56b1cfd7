"""`masked_out`'s shift: a finite mask fill is caught whatever the drawn values, not on lucky draws.

Scaling the queries by +-1e5 finds a row whose allowed scores all lie below a fill of -1e4 only when the
drawn mask and values happen to make one (the finite fill survived `validator grade`'s seed 11 that way).
The shift adds one vector to every key, along a hidden query's direction, which lowers all of that query's
scores by the same amount: attention ignores it, a finite fill does not.
"""

from __future__ import annotations

import math

import pytest
import torch

from validator import paths
from validator.api import grade
from validator.cases import Case
from validator.checks.masking import ShiftSpec, _shifted
from validator.spec import SpecError, load_challenge

ROOT = paths.PROJECT_ROOT
FINITE_FILL = ROOT / "tests" / "implementations" / "attention" / "broken" / "mask_fill_minus_1e4.py"


def _case(q, k, mask):
    return Case(dims={}, inputs={"Q": q, "K": k, "V": torch.randn(k.shape), "mask": mask}, seed=0, notes=[])


def test_the_shift_lowers_every_score_of_the_first_hidden_query_by_the_same_amount():
    gen = torch.Generator().manual_seed(3)
    q, k = torch.randn(2, 4, 5, generator=gen), torch.randn(2, 6, 5, generator=gen)
    hidden = torch.tensor([[False, False, True, True], [True, False, False, False]])  # per batch: queries 2 and 0
    shifted = _shifted(_case(q, k, None), ShiftSpec(queries="Q", keys="K", by=1.0e3), hidden)
    moved = shifted.inputs["K"]
    assert moved.shape == k.shape and moved.dtype == k.dtype
    before, after = q @ k.transpose(-2, -1), q @ moved.transpose(-2, -1)
    for b, query in ((0, 2), (1, 0)):
        drop = (before[b, query] - after[b, query]).to(torch.float64)
        assert torch.allclose(drop, torch.full_like(drop, 1.0e3), rtol=1e-4), drop
    # every other query's row moves by a constant too: a softmax gives it the same weights
    spread = (after - before).amax(-1) - (after - before).amin(-1)
    assert float(spread.abs().max()) < 1e-2 * 1.0e3 / math.sqrt(5)


def test_nothing_to_shift_where_no_query_is_hidden_or_a_query_is_zero():
    q, k = torch.zeros(1, 3, 4), torch.randn(1, 5, 4)
    spec = ShiftSpec(queries="Q", keys="K")
    assert _shifted(_case(torch.randn(1, 3, 4), k, None), spec, torch.zeros(1, 3, dtype=torch.bool)) is None
    assert _shifted(_case(q, k, None), spec, torch.ones(1, 3, dtype=torch.bool)) is None


@pytest.mark.parametrize("seed", [11, 23, 47, 0, 1, 2])
def test_the_finite_fill_loses_the_check_on_every_seed_and_the_reference_keeps_it(seed):
    for path, status in ((FINITE_FILL, "failed"), (paths.reference_dir() / "layers.py", "passed")):
        report = grade(path, challenges=["attention"], checks=["masked_keys_at_large_scores"], seed=seed,
                       profile="batch", reference_mode="live")
        (check,) = [c for c in report.challenges[0].checks if c.kind != "question"]
        assert check.status == status, (path.name, seed, check.message)


def test_a_shift_the_check_cannot_use_is_a_spec_error(tmp_path):
    text = (ROOT / "challenges" / "attention.yaml").read_text()
    line = "    shift: {queries: Q, keys: K, by: 1.0e6}"
    assert line in text
    for wrong, said in (("    shift: {queries: Q, keys: Q, by: 1.0e6}", "not among `keys`"),
                        ("    shift: {queries: Q, keys: K, by: -1.0}", "positive"),
                        ("    shift: {queries: nope, keys: K}", "not a float argument")):
        path = tmp_path / "attention.yaml"
        path.write_text(text.replace(line, wrong))
        with pytest.raises(SpecError, match=said):
            load_challenge(path)


# (challenge, check, the regime line that keeps every case at two positions or more)
TWO_POSITIONS = [
    ("attention", "causal", "    regimes: [[queries > 1]]"),
    ("attention", "masked_keys_at_large_scores", "    regimes: [[keys > 1]]"),
    ("multihead_self_attention", "causal", "    regimes: [[seq_len > 1]]"),
    ("multihead_self_attention", "causal_at_large_scores", "    regimes: [[seq_len > 1]]"),
    ("transformer_block", "causal", "    regimes: [[seq_len > 1]]"),
    ("transformer_block", "causal_at_large_scores", "    regimes: [[seq_len > 1]]"),
]


@pytest.mark.parametrize("challenge,check,regime", TWO_POSITIONS, ids=[f"{c}-{k}" for c, k, _ in TWO_POSITIONS])
def test_a_position_check_that_may_draw_a_lone_position_is_a_spec_error(challenge, check, regime, tmp_path):
    """A lone position has nothing after it to change (nothing to mask): the few cases of a batch run could all be
    such, and the check pass having looked at nothing (`--seed 24` passed masked_fill(~mask, -1e4) that way)."""
    text = (ROOT / "challenges" / f"{challenge}.yaml").read_text()
    block = text[text.index(f"  - id: {check}\n"):]
    block = block[:block.index("\n  - id: ", 1)]
    line = next(x for x in block.splitlines() if x.startswith(regime))
    for spec in (ROOT / "challenges").glob("*.yaml"):  # a composite's parts lie beside it
        (tmp_path / spec.name).write_text(spec.read_text())
    path = tmp_path / f"{challenge}.yaml"
    path.write_text(text.replace(block, block.replace(line + "\n", "")))
    with pytest.raises(SpecError, match=r"checks\[\d+\]\.regimes: a case with one position .* could pass having "
                                        r"checked nothing"):
        load_challenge(path)


@pytest.mark.parametrize("seed", [3, 5, 7, 24])
def test_the_position_checks_look_at_something_on_seeds_that_once_drew_only_lone_positions(seed):
    """With two cases a property, seeds 3, 5, 7 and 24 drew only one position (or one key) for one of these
    checks: each passed the reference saying "0 generated inputs"."""
    from collections import defaultdict

    wanted = defaultdict(list)
    for challenge, check, _ in TWO_POSITIONS:
        wanted[challenge].append(check)
    for challenge, checks in wanted.items():
        report = grade(paths.reference_dir() / "layers.py", challenges=[challenge], checks=checks, seed=seed,
                       profile="batch", reference_mode="live")
        for result in (c for c in report.challenges[0].checks if c.kind != "question"):
            assert result.status == "passed", (challenge, result.id, result.message)
            assert not result.message.startswith("0 "), (challenge, result.id, seed, result.message)
