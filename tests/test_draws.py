"""Seeded test tensors are drawn once per process and handed out as copies (validator.draws)."""

from __future__ import annotations

import torch

from validator import draws


def test_a_remembered_draw_is_the_seeded_draw_and_each_asking_gets_its_own_copy():
    draws.forget()
    gen = torch.Generator().manual_seed(5)
    expected = [torch.randn(s, generator=gen, dtype=torch.float64).to(torch.float32) for s in [(3, 2), (4,)]]
    first = draws.seeded_normal([(3, 2), (4,)], 5, torch.float32)
    assert all(torch.equal(a, b) and a.dtype == b.dtype for a, b in zip(first, expected))
    first[0].add_(100)  # what a careless check might do
    again = draws.seeded_normal([(3, 2), (4,)], 5, torch.float32)
    assert torch.equal(again[0], expected[0])
    assert not torch.equal(draws.seeded_normal([(3, 2), (4,)], 6, torch.float32)[0], expected[0])  # the seed is in the key


def test_the_remembered_draws_stay_within_their_byte_budget(monkeypatch):
    draws.forget()
    monkeypatch.setattr(draws, "LIMIT_BYTES", 4 * 100 * 8)  # four draws of 100 float64 values
    calls = []

    def draw(k):
        calls.append(k)
        return {"w": torch.zeros(100, dtype=torch.float64), "n": k}

    for k in range(6):
        assert draws.remembered(("t", k), lambda: draw(k))["n"] == k
    assert draws._HELD[0] <= draws.LIMIT_BYTES and len(draws._KEPT) == 4
    draws.remembered(("t", 5), lambda: draw(5))  # the latest are kept
    draws.remembered(("t", 0), lambda: draw(0))  # the oldest went first: drawn again
    assert calls == [0, 1, 2, 3, 4, 5, 0]
    big = draws.remembered(("big",), lambda: torch.zeros(1000, dtype=torch.float64))  # over a quarter: never kept
    assert big.numel() == 1000 and ("big",) not in draws._KEPT
    draws.forget()
