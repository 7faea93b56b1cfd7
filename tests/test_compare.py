"""Mismatch messages: shape and dtype first, then the worst element with the tolerance."""

import torch

from validator.compare import mismatch, tolerance_for


def test_equal_is_none():
    t = torch.randn(3, 4)
    assert mismatch(t.clone(), t, atol=0, rtol=0) is None


def test_shape_before_values():
    assert "shape (4, 3), expected (3, 4)" in mismatch(torch.zeros(4, 3), torch.zeros(3, 4), atol=0, rtol=0)


def test_dtype_before_values():
    assert "dtype float64, expected float32" in mismatch(torch.zeros(2, dtype=torch.float64), torch.zeros(2),
                                                         atol=1, rtol=1)


def test_worst_index_and_tolerance_are_named():
    expected = torch.zeros(2, 3)
    actual = expected.clone()
    actual[1, 2] = 0.5
    actual[0, 0] = 0.1
    msg = mismatch(actual, expected, atol=1e-5, rtol=1.3e-6)
    assert "2 of 6 elements differ" in msg and "worst at index [1, 2]" in msg and "got 0.5" in msg
    assert "allowed 1e-05" in msg


def test_nan_is_a_mismatch():
    assert mismatch(torch.tensor([float("nan")]), torch.tensor([0.0]), atol=1, rtol=1)


def test_tolerance_table():
    assert tolerance_for(torch.float32, "exact") == (0.0, 0.0)
    assert tolerance_for(torch.float64) == (1e-7, 1e-7)
    assert tolerance_for(torch.int64) == (0.0, 0.0)
    assert tolerance_for(torch.float32, {"float32": {"atol": 1e-3, "rtol": 0}}) == (1e-3, 0)


def test_relative_error_is_relative_to_the_tensors_scale():
    from validator.compare import relative_error

    fine = torch.tensor([100.0, -0.5, 0.0], dtype=torch.float64)
    coarse = fine + torch.tensor([0.0, 1e-3, 0.0], dtype=torch.float64)
    assert abs(relative_error(coarse, fine) - 1e-5) < 1e-12
    assert relative_error(torch.zeros(2), torch.zeros(2)) == 0.0
    assert relative_error(torch.zeros(2), torch.zeros(3)) == 0.0      # a shape problem is the comparison's to report
    assert relative_error(torch.ones(1), torch.tensor([float("inf")])) == 0.0


def test_precision_tolerance_scales_with_the_measured_error_and_says_so():
    from validator.compare import MeasuredAtol, precision_atol

    expected = torch.tensor([10.0, -20.0, 0.001], dtype=torch.float64)
    atol = precision_atol(1e-7, expected, noise=1e-6, margin=64, precision="float32")
    assert isinstance(atol, MeasuredAtol) and abs(atol - (1e-7 + 64 * 1e-6 * 20.0)) < 1e-12
    floor = precision_atol(1e-7, expected, noise=0.0, margin=64, precision="float32")  # at least one float32 ulp
    assert abs(floor - (1e-7 + 64 * 2.0 ** -23 * 20.0)) < 1e-12
    assert precision_atol(1e-7, expected, noise=float("inf"), margin=64, precision="float32") == 1e-7
    actual = expected.clone()
    actual[2] += 0.5
    msg = mismatch(actual, expected, atol=atol, rtol=0.0)
    assert "1 of 3 elements differ" in msg and "atol 1e-07 + rtol 0 x |expected| + 0.00128 (float32 rounding: 64 x " \
        "1e-06, the relative error of the reference computed in float32 on this case, x 20, the largest" in msg
    assert mismatch(expected + 1e-3, expected, atol=atol, rtol=0.0) is None


def test_a_nan_in_both_is_still_a_mismatch():
    """Bit-identical tensors pass at once; a NaN never counts as identical, even where the reference has one too."""
    both = torch.tensor([1.0, float("nan")])
    assert "1 of 2 elements differ" in mismatch(both.clone(), both, atol=1, rtol=1)
    assert mismatch(torch.tensor([1.0, float("inf")]), torch.tensor([1.0, float("inf")]), atol=0, rtol=0) is None


def test_identical_values_in_another_dtype_still_fail_the_dtype():
    t = torch.randn(3)
    assert "dtype float64" in mismatch(t.double(), t, atol=1, rtol=1)
    assert mismatch(t.double(), t, atol=1e-6, rtol=0, check_dtype=False) is None
