"""Initialisation statistics: correct samplers pass on every seed, each wrong one is named.

The default tier tries the first few seeds of each sampler; --thorough tries all of them."""

import math

import pytest
import torch

from validator.stats import Distribution, distribution_problems, z_for

def tiered_seeds(n: int, default: int) -> list:
    """Seeds 0..n-1 as params; all but the first ``default`` are marked for the thorough tier."""
    return [pytest.param(s, marks=() if s < default else (pytest.mark.thorough,)) for s in range(n)]


TRUNC = Distribution.from_spec({"family": "truncated_normal", "mean": 0, "std": 1, "a": -3, "b": 3}, (512, 512))


def test_truncated_normal_moments_match_the_contract():
    mean, var, _ = TRUNC.moments()
    assert abs(mean) < 1e-9
    assert math.sqrt(var) == pytest.approx(0.98658, abs=1e-5)


def test_z_for_budget():
    assert z_for(0.05) == pytest.approx(1.95996, abs=1e-4)


@pytest.mark.parametrize("seed", tiered_seeds(40, default=8))
def test_torch_trunc_normal_passes(seed):
    torch.manual_seed(seed)
    w = torch.nn.init.trunc_normal_(torch.empty(512, 512), a=-3, b=3)
    problems, _ = distribution_problems(w, TRUNC, 1e-6)
    assert problems == []


@pytest.mark.parametrize("seed", tiered_seeds(10, default=3))
def test_inverse_cdf_sampler_passes(seed):
    g = torch.Generator().manual_seed(seed)
    lo, hi = 0.5 * (1 + math.erf(-3 / math.sqrt(2))), 0.5 * (1 + math.erf(3 / math.sqrt(2)))
    u = torch.rand(512, 512, generator=g, dtype=torch.float64) * (hi - lo) + lo
    w = (math.sqrt(2) * torch.erfinv(2 * u - 1)).float()
    assert distribution_problems(w, TRUNC, 1e-6)[0] == []


@pytest.mark.parametrize("name,make,needle", [
    ("clamped", lambda g: torch.randn(512, 512, generator=g).clamp(-3, 3), "clamping"),
    ("untruncated", lambda g: torch.randn(512, 512, generator=g), "outside"),
    ("small std", lambda g: torch.randn(512, 512, generator=g) * 0.02, "std"),
    ("uniform", lambda g: torch.rand(512, 512, generator=g) * 6 - 3, "std"),
    # all equal (torch.Tensor(n, d)'s fresh memory is often zeros: a real student's embedding said "std 0.00000")
    ("zeros", lambda g: torch.zeros(512, 512), "all 262144 values are 0: nothing was drawn"),
    ("shifted", lambda g: torch.nn.init.trunc_normal_(torch.empty(512, 512), mean=0.05, a=-2.95, b=3.05), "mean"),
    ("uninitialised", lambda g: torch.full((512, 512), float("nan")), "NaN"),
    # torch.empty's leftover memory, finite (a real student's SwiGLU weights: "min -8.571e+15"): said as such, not
    # as tails left untruncated
    ("uninitialised, finite", lambda g: torch.zeros(512, 512).index_fill_(1, torch.arange(0, 512, 7), -8.571e15),
     "looks uninitialised"),
    # leftover memory whose few large values (-9299 at a std of 1) are no million-fold outlier, but whose tiny
    # nonzero ones no draw makes (a real student's SwiGLU, initialised only by its model's self.apply(...)):
    # said as such, not as tails left untruncated
    ("uninitialised, tiny", lambda g: torch.zeros(512, 512).index_fill_(1, torch.arange(0, 512, 97), -9299.0)
     .index_fill_(0, torch.arange(1, 512, 5), 2.4e-38), "looks uninitialised"),
])
def test_wrong_initialisations_are_named(name, make, needle):
    g = torch.Generator().manual_seed(0)
    problems, _ = distribution_problems(make(g), TRUNC, 1e-6)
    assert problems, name
    assert any(needle in p for p in problems), problems


def test_normal_and_xavier_families():
    torch.manual_seed(0)
    normal = Distribution.from_spec({"family": "normal", "std": 0.02}, (256, 256))
    assert distribution_problems(torch.randn(256, 256) * 0.02, normal, 1e-6)[0] == []
    xavier = Distribution.from_spec({"family": "xavier_uniform"}, (300, 200))
    w = torch.nn.init.xavier_uniform_(torch.empty(300, 200))
    assert distribution_problems(w, xavier, 1e-6)[0] == []
    assert distribution_problems(torch.randn(300, 200) * 0.1, xavier, 1e-6)[0]


def test_histogram_counts_are_each_values_bin():
    """The counts (read off the sorted sample) put every value where one search per value puts it: values on an
    inner edge in the bin above it, values just outside the bounds (within rounding) in the end bins."""
    from validator.stats import Distribution, histogram

    dist = Distribution.from_spec({"family": "uniform", "a": -1.0, "b": 1.0}, (64, 64))
    edges = torch.linspace(-1.0, 1.0, 49, dtype=torch.float64)
    torch.manual_seed(0)
    sample = torch.cat([torch.rand(4000, dtype=torch.float64) * 2 - 1, edges, torch.tensor([-1.0 - 1e-9, 1.0 + 1e-9, 3.0])])
    h = histogram(sample, dist, bins=48)
    inside = sample[(sample >= -1.0 - 1e-6) & (sample <= 1.0 + 1e-6)].clamp(-1.0, 1.0)
    one_by_one = torch.bincount(torch.searchsorted(edges[1:-1].contiguous(), inside, right=True), minlength=48)
    assert h.counts == one_by_one.tolist() and h.above == 1 and sum(h.counts) == sample.numel() - 1


def test_an_init_checks_verdicts_are_remembered_by_the_values_alone():
    """A class's layers that build a parameter alike give the same bytes: the grader judges them once. The
    remembered verdict is the one a fresh judgement gives, and one changed value is a sample of its own."""
    from validator.checks import init
    from validator.stats import Sample, histogram

    init._JUDGED.clear()
    torch.manual_seed(0)
    good = torch.nn.init.trunc_normal_(torch.empty(256, 256), a=-3, b=3)
    clamped = good.clone()
    clamped[:64] = clamped[:64].clamp(-1, 1)  # a visible flaw in a quarter of the rows
    for sample in (good, clamped):
        fresh = distribution_problems(Sample(sample), TRUNC, 1e-6)
        fresh_figure = histogram(Sample(sample), TRUNC, title="w")
        for _ in range(2):  # judged, then remembered
            problems, facts, figure = init._judged(sample.clone(), TRUNC, 1e-6, "w")
            assert (problems, facts) == fresh and figure == fresh_figure
            problems.append("changed by a caller")  # the copy handed out, not the memory
    assert len(init._JUDGED) == 2
    assert init._judged(good, TRUNC, 1e-6, "w")[0] == []
    assert init._judged(clamped, TRUNC, 1e-6, "w")[0] != []
    init._judged(good, TRUNC, 1e-6, "another title")  # the histogram's title is part of what is judged
    assert len(init._JUDGED) == 3
