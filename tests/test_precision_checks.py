"""Dtype contracts under reduced precision: `output_follows: input` on the dtype test and
`input_dtype:` on the case tests, on a small RMSNorm-like spec graded end to end."""

from __future__ import annotations

import textwrap

import pytest

from validator.api import grade
from validator.spec import SpecError, load_challenge

SPEC = """\
id: norm
title: Norm
summary: a tiny RMSNorm
contract: computes in float32, returns the input's dtype
entries:
  Norm: {kind: module, init: [d], accepts: [device, dtype], call: [x], parameters: {weight: [d]}}
  sm: {kind: function, call: [x, dim]}
dims: {d: [32, 64]}
inputs:
  x: {type: float, shape: [3, 5, d]}
  dim: {type: value, value: -1}
checks:
  - {id: follows_input, kind: structure, test: dtype, dtype: float64, output_follows: input, points: 1}
  - {id: bf16_out, kind: structure, test: dtype, input_dtype: bfloat16, output_follows: input, points: 1}
  - {id: bf16_accuracy, kind: values, test: values, input_dtype: bfloat16, points: 1}
  - {id: fp16_accuracy, kind: values, test: values, input_dtype: float16, points: 1}
  - {id: scale_invariant, kind: values, test: invariance, transform: {input: x, scale: [2.0, 64.0]}, points: 1,
     tolerance: {float32: {atol: 1.0e-5, rtol: 1.0e-4}}}
  - {id: stable, kind: values, test: stability, entry: sm, scale: [1.0e4, -1.0e4], points: 1,
     tolerance: {float32: {atol: 1.0e-6, rtol: 2.0e-3}}}
  - {id: shift_invariant, kind: values, test: invariance, entry: sm, transform: {shift: [-32.0, 64.0]}, points: 1,
     tolerance: {float32: {atol: 1.0e-6, rtol: 3.0e-5}}}
  - {id: wrong_relation, kind: values, test: invariance, entry: sm, transform: {scale: [2.0]}, expect: scaled,
     points: 1}
"""

HEADER = """\
import torch
from torch import nn


class Norm(nn.Module):
    def __init__(self, d, device=None, dtype=None):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d, device=device, dtype=dtype))

    def forward(self, x):
"""

SOFTMAX = """

def sm(x, dim):
    e = torch.exp(x - x.amax(dim=dim, keepdim=True))
    return e / e.sum(dim=dim, keepdim=True)
"""

NAIVE_SOFTMAX = """

def sm(x, dim):
    e = torch.exp(x)
    return e / e.sum(dim=dim, keepdim=True)
"""

REFERENCE = HEADER + """\
        x32 = x.to(torch.promote_types(x.dtype, torch.float32))
        return (x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + 1e-5) * self.weight).to(x.dtype)
""" + SOFTMAX

BODIES = {
    # a float32 computation by another formula: every check passes
    "correct": "x32 = x.float()\n"
               "        return (self.weight * x32 / torch.sqrt((x32 * x32).sum(-1, keepdim=True) / x.shape[-1] + 1e-5))"
               ".to(x.dtype)",
    # the output follows the parameters (float64 when built with dtype=float64)
    "follows_params": "x32 = x.float()\n"
                      "        return x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + 1e-5) * self.weight",
    # no upcast: the statistics are computed in bf16/fp16, the result cast back
    "no_upcast": "return (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5) * self.weight).to(x.dtype)",
    # no square root: x / mean(x²) is not scale-invariant
    "no_sqrt": "x32 = x.float()\n"
               "        return (x32 / (x32.pow(2).mean(-1, keepdim=True) + 1e-5) * self.weight).to(x.dtype)",
}


@pytest.fixture(scope="module")
def tree(tmp_path_factory):
    root = tmp_path_factory.mktemp("precision")
    (root / "challenges").mkdir()
    (root / "challenges" / "norm.yaml").write_text(SPEC)
    (root / "reference").mkdir()
    (root / "reference" / "layers.py").write_text(REFERENCE)
    (root / "reference" / "answer_key.yaml").write_text("{}\n")
    for name, body in BODIES.items():
        (root / f"{name}.py").write_text(HEADER + "        " + body + "\n" + (NAIVE_SOFTMAX if name == "no_sqrt" else SOFTMAX))
    return root


def _verdicts(tree, name, checks=None):
    report = grade(tree / f"{name}.py", seed=3, profile="quick", challenges_dir=tree / "challenges",
                   reference_dir=tree / "reference", reference_mode="live", checks=checks)
    return {c.id: (c.status, c.message) for c in report.challenges[0].checks}


def test_output_follows_input_passes_a_correct_norm_and_names_the_wrong_dtype(tree):
    good = _verdicts(tree, "correct", checks=["follows_input", "bf16_out"])
    assert all(s == "passed" for s, _ in good.values()), good
    bad = _verdicts(tree, "follows_params", checks=["follows_input", "bf16_out"])
    assert bad["follows_input"][0] == "failed"
    assert "the output is float64, expected float32" in bad["follows_input"][1]
    assert bad["bf16_out"][0] == "failed" and "expected bfloat16" in bad["bf16_out"][1]


@pytest.mark.parametrize("bad", [
    "{id: c, kind: structure, test: dtype, dtype: float64, default_dtype: float64, points: 1}",
    "{id: c, kind: structure, test: dtype, output_follows: inputs, points: 1, dtype: float64}",
    "{id: c, kind: structure, test: dtype, points: 1}",                               # nothing to check
    "{id: c, kind: values, test: values, input_dtype: bfloat16, dtype: float64, points: 1}",
    "{id: c, kind: values, test: values, input_dtype: int8, points: 1}",
    "{id: c, kind: values, test: values, input_dtype: float16, ulps: 0, points: 1}",
    "{id: c, kind: gradient, test: gradient, input_dtype: bfloat16, points: 1}",
    "{id: c, kind: values, test: stability, scale: [], points: 1}",
    "{id: c, kind: values, test: stability, scale: [0.0], points: 1}",
    "{id: c, kind: values, test: stability, scale: [2.0], input: y, points: 1}",
    "{id: c, kind: values, test: invariance, transform: {scale: [2.0], shift: [1.0]}, points: 1}",
    "{id: c, kind: values, test: invariance, transform: {shift: [1.0]}, expect: scaled, points: 1}",
    "{id: c, kind: values, test: invariance, transform: {input: dim, scale: [2.0]}, entry: sm, points: 1}",
])
def test_bad_precision_and_relation_options_are_spec_errors(tmp_path, bad):
    text = SPEC.split("checks:")[0] + "checks:\n  - " + bad + "\n"
    path = tmp_path / "norm.yaml"
    path.write_text(textwrap.dedent(text))
    with pytest.raises(SpecError):
        load_challenge(path)


def test_reduced_precision_inputs_pass_a_float32_computation_and_fail_one_in_bf16(tree):
    good = _verdicts(tree, "correct", checks=["bf16_accuracy", "fp16_accuracy"])
    assert all(s == "passed" for s, _ in good.values()), good
    bad = _verdicts(tree, "no_upcast", checks=["bf16_accuracy", "fp16_accuracy"])
    for check in ("bf16_accuracy", "fp16_accuracy"):
        status, message = bad[check]
        assert status == "failed", (check, status, message)
        assert "evaluated on the same" in message and "ulp" in message, message


def test_rounding_comparison_allows_one_ulp_in_few_elements_only():
    import torch

    from validator.compare import rounding_mismatch

    e = torch.linspace(0.5, 4.0, 200).to(torch.bfloat16)

    def up(t):  # one bf16 ulp up (positive values)
        return (t.float() + 2.0 ** (torch.floor(torch.log2(t.float())) - 7)).to(torch.bfloat16)

    assert rounding_mismatch(e.float(), e) is None                       # a float32 output is rounded first
    one_up = e.clone()
    one_up[7] = up(e[7])        # one ulp up in one element: allowed
    assert rounding_mismatch(one_up, e) is None
    many = e.clone()
    many[::3] = up(e[::3])      # a third of them: not a single rounding
    assert "differ from the reference" in rounding_mismatch(many, e)
    far = e.clone()
    far[3] = (e[3].float() * 1.05).to(torch.bfloat16)
    assert "more than 1 ulp" in rounding_mismatch(far, e)
    nan = e.clone()
    nan[0] = float("nan")
    assert rounding_mismatch(nan, e) is not None


@pytest.mark.thorough
def test_reduced_precision_tolerance_holds_for_float32_formulas_on_many_seeds():
    """The derivation behind `ulps: 1, rounded_fraction: 0.02`: other float32 formulas stay inside it on every
    seed; a bf16/fp16 computation does not."""
    import torch

    from validator.compare import rounding_mismatch

    def ref(x, w):
        x32 = x.float()
        return (x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + 1e-5) * w).to(x.dtype)

    formulas = [
        lambda x, w: (x.float() / torch.sqrt(x.float().pow(2).sum(-1, keepdim=True) / x.shape[-1] + 1e-5) * w).to(x.dtype),
        lambda x, w: (w.double() * x.double() / (x.double().pow(2).mean(-1, keepdim=True) + 1e-5).sqrt()).to(x.dtype),
    ]
    caught = 0
    for dtype in (torch.bfloat16, torch.float16):
        for seed in range(300):
            gen = torch.Generator().manual_seed(seed)
            d = int(torch.randint(32, 65, (1,), generator=gen))
            x = torch.randn(3, 5, d, generator=gen).to(dtype)
            w = torch.randn(d, generator=gen)
            for f in formulas:
                assert rounding_mismatch(f(x, w), ref(x, w)) is None, (dtype, seed)
            low = (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5) * w).to(dtype)
            caught += rounding_mismatch(low, ref(x, w)) is not None
    assert caught == 600


def test_invariance_and_stability_pass_correct_code_and_name_the_broken_relation(tree):
    checks = ["scale_invariant", "stable", "shift_invariant"]
    good = _verdicts(tree, "correct", checks=checks)
    assert all(s == "passed" for s, _ in good.values()), good
    bad = _verdicts(tree, "no_sqrt", checks=checks)  # also carries the softmax without max subtraction
    assert bad["scale_invariant"][0] == "failed"
    assert "f(2 * x) == f(x) does not hold" in bad["scale_invariant"][1], bad["scale_invariant"][1]
    assert bad["stable"][0] == "failed"
    assert "not finite" in bad["stable"][1] and "overflowed to inf" in bad["stable"][1], bad["stable"][1]
    assert bad["shift_invariant"][0] == "passed"  # exp(x + 64) still fits in float32: the relation holds


def test_a_relation_the_reference_breaks_is_a_spec_bug_not_a_student_failure(tree):
    verdicts = _verdicts(tree, "correct", checks=["wrong_relation"])
    status, message = verdicts["wrong_relation"]
    assert status == "error" and "spec bug" in message, verdicts


def test_float_inputs_take_a_scale():
    import torch

    from validator.cases import fixed_case
    from validator.spec.schema import Challenge

    ch = Challenge.model_validate({
        "id": "s", "title": "s", "entries": {"f": {"kind": "function", "call": ["x"]}}, "dims": {"d": 64},
        "inputs": {"x": {"type": "float", "shape": [64, "d"], "scale": 1.0e-3}},
        "checks": [{"id": "c", "kind": "values", "test": "values"}]})
    x = fixed_case(ch, ch.entries["f"]).inputs["x"]
    assert 0.5e-3 < float(x.std()) < 2e-3 and x.dtype == torch.get_default_dtype()
    with pytest.raises(ValueError):
        Challenge.model_validate({**ch.model_dump(), "inputs": {"x": {"type": "value", "value": 1, "scale": 2.0}}})


# -- precision: float32 -----------------------------------------------------------------------
# A layer whose softmax is nearly one-hot (scores ~ 8 x N(0, d)): it amplifies rounding, so a part that
# computes in float32 misses a fixed float64 tolerance by far; `precision: float32` measures how much
# float32 rounding explains on each case, and a real bug (a slightly wrong scale) stays far outside.
PEAKY_SPEC = """\
id: peaky
title: Peaky
summary: a nearly one-hot attention-like layer
contract: may compute its softmax in float32
entries:
  Peaky: {kind: module, init: [d], accepts: [device, dtype], call: [x], parameters: {weight: [d, d]}}
dims: {d: [8, 16]}
inputs:
  x: {type: float, shape: [5, d], requires_grad: true}
tolerance:
  float32: {atol: 1.0e-6, rtol: 1.0e-6}
  float64: {atol: 1.0e-10, rtol: 1.0e-10}
checks:
  - {id: fixed, kind: gradient, test: gradient, points: 1}
  - {id: measured, kind: gradient, test: gradient, precision: float32, points: 1}
  - {id: values64, kind: values, test: values, dtype: float64, precision: float32, points: 1}
  - {id: values32, kind: values, test: values, precision: float32, points: 1}
"""

PEAKY = """\
import torch
from torch import nn


class Peaky(nn.Module):
    def __init__(self, d, device=None, dtype=None):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(d, d, device=device, dtype=dtype))

    def forward(self, x):
        s = (x @ self.weight.T) * SCALE
        {softmax}
        return p @ self.weight
"""

PEAKY_SOFTMAX = {
    "reference": "p = torch.softmax(s, dim=-1)",
    # the softmax in float32 whatever the input, cast back: the contract allows it
    "float32_softmax": "p = torch.softmax(s.float(), dim=-1).to(s.dtype)",
    # float64 throughout, another formula: summation order only
    "logsumexp": "p = torch.exp(s - torch.logsumexp(s, dim=-1, keepdim=True))",
}


@pytest.fixture(scope="module")
def peaky(tmp_path_factory):
    root = tmp_path_factory.mktemp("peaky")
    (root / "challenges").mkdir()
    (root / "challenges" / "peaky.yaml").write_text(PEAKY_SPEC)
    (root / "reference").mkdir()
    (root / "reference" / "answer_key.yaml").write_text("{}\n")
    for name, softmax in PEAKY_SOFTMAX.items():
        text = PEAKY.replace("{softmax}", softmax).replace("SCALE", "8.0")
        (root / ("reference/layers.py" if name == "reference" else f"{name}.py")).write_text(text)
    # a real bug, small as bugs go: the scores scaled by 8.05 instead of 8
    (root / "wrong_scale.py").write_text(PEAKY.replace("{softmax}", PEAKY_SOFTMAX["reference"]).replace("SCALE", "8.05"))
    return root


def _peaky(root, name, seed):
    report = grade(root / f"{name}.py", seed=seed, profile="quick", challenges_dir=root / "challenges",
                   reference_dir=root / "reference", reference_mode="live")
    return {c.id: (c.status, c.message) for c in report.challenges[0].checks}


@pytest.mark.thorough
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_precision_float32_accepts_a_float32_part_and_still_catches_a_small_bug(peaky, seed):
    detour = _peaky(peaky, "float32_softmax", seed)
    assert detour["fixed"][0] == "failed", detour   # a fixed float64 tolerance rejects a float32 part
    assert all(detour[c][0] == "passed" for c in ("measured", "values64", "values32")), detour
    exact = _peaky(peaky, "logsumexp", seed)
    assert all(s == "passed" for s, _ in exact.values()), exact
    bug = _peaky(peaky, "wrong_scale", seed)
    assert all(bug[c][0] == "failed" for c in ("measured", "values64", "values32")), bug
    assert "float32 rounding: 64 x" in bug["measured"][1], bug["measured"][1]


def test_precision_takes_float32_only_and_is_no_option_of_other_tests(tmp_path):
    base = PEAKY_SPEC.split("checks:")[0] + "checks:\n  - "
    for bad in ("{id: c, kind: gradient, test: gradient, precision: bfloat16, points: 1}",
                "{id: c, kind: gradient, test: gradient, precision: float32, precision_margin: 0, points: 1}",
                "{id: c, kind: gradient, test: untouched_rows_zero, precision: float32, points: 1}",
                "{id: c, kind: shape, test: shape, precision: float32, points: 1}"):
        path = tmp_path / "peaky.yaml"
        path.write_text(base + bad + "\n")
        with pytest.raises(SpecError):
            load_challenge(path)


def test_an_error_just_past_one_relative_ulp_shows_its_size_and_its_steps():
    """Just below 1.0 float16's spacing halves: one relative ulp (eps x |expected|) is two representable values. A
    real report said "more than 1 ulp ... (1 ulp)" for 1.004 ulp; it shows the figure and the steps."""
    import torch

    from validator.compare import rounding_mismatch

    expected = torch.tensor([-0.995605, 0.5], dtype=torch.float16)
    message = rounding_mismatch(torch.tensor([-0.996582, 0.5], dtype=torch.float16), expected)
    assert "(1.004 ulp, 2 representable float16 values apart)" in message, message
