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
