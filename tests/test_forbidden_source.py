"""The AST scan follows import aliases and reports the line."""

from validator.checks.constraint import find_forbidden

BANNED = ["torch.nn.Embedding", "torch.nn.functional.embedding", "torch.embedding"]


def test_aliases_are_followed():
    src = "import torch.nn.functional as F\nfrom torch import nn\nx = F.embedding\ny = nn.Embedding(3, 4)\n"
    hits = find_forbidden(src, BANNED)
    assert [(line, api) for line, _, api in hits] == [(3, "torch.nn.functional.embedding"), (4, "torch.nn.Embedding")]


def test_from_import_is_caught_where_it_is_used():
    hits = find_forbidden("from torch.nn.functional import embedding as lookup\nout = lookup(i, w)\n", BANNED)
    assert [(line, api) for line, _, api in hits] == [(2, "torch.nn.functional.embedding")]


def test_unused_import_is_not_a_use():
    assert find_forbidden("from torch.nn import Embedding\nimport torch\nx = torch.zeros(2)\n", BANNED) == []


def test_plain_torch_embedding():
    assert find_forbidden("import torch\nout = torch.embedding(w, ids)\n", BANNED)[0][0] == 2


def test_allowed_code_is_clean():
    src = "import torch\nclass E(torch.nn.Module):\n    def forward(self, ids):\n        return self.weight[ids]\n"
    assert find_forbidden(src, BANNED) == []


def test_names_in_strings_and_comments_are_not_flagged():
    assert find_forbidden("# do not use nn.Embedding\nx = 'F.embedding'\n", BANNED) == []


# -- the source checks judge the code the graded entries run (issue 19) -----------------------------------
import textwrap  # noqa: E402
from pathlib import Path  # noqa: E402

import pytest  # noqa: E402

from validator.integrity import scan_package, scan_submission  # noqa: E402
from validator.reachability import Source, reachable_lines  # noqa: E402

SOFTMAX = ["torch.softmax", "torch.nn.functional.softmax"]


def _judged(source: str, entries: list[str]) -> tuple[list[int], list[int]]:
    """(lines of findings that cost points, lines that are advice only) in one layers.py."""
    lines = reachable_lines([Source("layers", "layers.py", textwrap.dedent(source))], [("layers", e) for e in entries])
    found = find_forbidden(textwrap.dedent(source), SOFTMAX)
    if lines is None:
        return [line for line, _, _ in found], []
    return ([line for line, _, _ in found if line in lines["layers.py"]],
            [line for line, _, _ in found if line not in lines["layers.py"]])


def _line(source: str, text: str) -> int:
    return next(i for i, line in enumerate(textwrap.dedent(source).splitlines(), 1) if text in line)


LAYER_AND_SAMPLER = """\
    import torch
    import torch.nn.functional as F

    def softmax(x, dim):
        e = torch.exp(x - x.amax(dim=dim, keepdim=True))
        return e / e.sum(dim=dim, keepdim=True)

    def sample(logits, temperature=1.0):
        probs = torch.softmax(logits / temperature, dim=-1)  # decoding, not the layer
        return torch.multinomial(probs, 1)

    class Decoder:
        def generate(self, logits):
            return F.softmax(logits, -1).argmax(-1)
"""


def test_a_sampler_beside_the_layer_is_not_the_layers_code():
    costs, advice = _judged(LAYER_AND_SAMPLER, ["softmax"])
    assert costs == [] and advice == [_line(LAYER_AND_SAMPLER, "torch.softmax("), _line(LAYER_AND_SAMPLER, "F.softmax(")]
    # an alias or a bare decorator computes nothing at import: what it names counts only where it is used
    decorated = LAYER_AND_SAMPLER.replace("    def sample(", "    _sm = torch.softmax\n\n    @torch.no_grad\n    def sample(")
    costs, advice = _judged(decorated, ["softmax"])
    assert costs == [] and _line(decorated, "_sm = torch.softmax") in advice

    # a bare name under its import (a package __init__ quieting a linter) reads the name and runs nothing: a tokenizer
    # class named so is not the layer's code, nor are its methods that torch would call on a module (`train`)
    package_init = LAYER_AND_SAMPLER + "\n    Decoder\n    sample\n"
    costs, advice = _judged(package_init, ["softmax"])
    assert costs == [] and advice == [_line(LAYER_AND_SAMPLER, "torch.softmax("), _line(LAYER_AND_SAMPLER, "F.softmax(")]


REACHED = [
    ("helper_function", """\
        import torch
        def _probs(s):
            return torch.softmax(s, -1)
        def attention(q, k, v):
            return _probs(q @ k.mT) @ v
     """, "attention", "torch.softmax("),
    ("module_level_alias", """\
        import torch
        _sm = torch.softmax
        def attention(q, k, v):
            return _sm(q @ k.mT, -1) @ v
     """, "attention", "_sm = torch.softmax"),
    ("method_through_self", """\
        import torch
        from torch import nn
        class MHA(nn.Module):
            def forward(self, x):
                return self._attend(x)
            def _attend(self, x):
                return torch.softmax(x, -1)
     """, "MHA", "torch.softmax("),
    ("class_it_builds", """\
        import torch.nn.functional as F
        from torch import nn
        class Core(nn.Module):
            def forward(self, x):
                return F.softmax(x, -1)
        class MHA(nn.Module):
            def __init__(self):
                super().__init__()
                self.core = Core()
            def forward(self, x):
                return self.core(x)
     """, "MHA", "F.softmax("),
    ("base_class_method", """\
        import torch
        class Base:
            def probs(self, x):
                return torch.softmax(x, -1)
        class Attn(Base):
            def forward(self, x):
                return self.probs(x)
     """, "Attn", "torch.softmax("),
    ("patched_at_import", """\
        import torch
        from torch import nn
        def _fast(self, x):
            return torch.softmax(x, -1)
        class MHA(nn.Module):
            def forward(self, x):
                return x
        MHA.forward = _fast
     """, "MHA", "torch.softmax("),
    ("decorator", """\
        import torch
        def wrap(f):
            return lambda *a: torch.softmax(f(*a), -1)
        @wrap
        def attention(q, k, v):
            return q @ k.mT
     """, "attention", "torch.softmax("),
    ("looked_up_at_run_time", """\
        import torch
        def _hidden(s):
            return torch.softmax(s, -1)
        def attention(q, k, v):
            return globals()["_hid" + "den"](q @ k.mT) @ v
     """, "attention", "torch.softmax("),
    ("computed_method_name", """\
        import torch
        class A:
            def forward(self, x):
                return getattr(self, "_" + "p")(x)
            def _p(self, x):
                return torch.softmax(x, -1)
     """, "A", "torch.softmax("),
    ("unknown_entry", """\
        import torch
        def helper(s):
            return torch.softmax(s, -1)
     """, "attention", "torch.softmax("),
    # what defining a name runs at import, whoever uses the name (issue 21)
    ("value_computed_at_import", """\
        import torch
        _probs = torch.softmax(torch.zeros(3), -1)
        def attention(q, k, v):
            return q
     """, "attention", "torch.softmax("),
    ("decorator_of_an_unused_function", """\
        import torch
        def deco(f):
            torch.softmax(torch.zeros(3), -1)
            return f
        @deco
        def unused():
            pass
        def attention(q, k, v):
            return q
     """, "attention", "torch.softmax("),
    ("body_of_an_unused_class", """\
        import torch
        class Unused:
            table = torch.softmax(torch.zeros(3), -1)
        def attention(q, k, v):
            return q
     """, "attention", "torch.softmax("),
    ("default_of_an_unused_function", """\
        import torch
        def unused(p=torch.softmax(torch.zeros(3), -1)):
            return p
        def attention(q, k, v):
            return q
     """, "attention", "torch.softmax("),
]


@pytest.mark.parametrize("name,source,entry,hit", [pytest.param(*case, id=case[0]) for case in REACHED])
def test_what_the_entry_reaches_is_judged(name, source, entry, hit):
    costs, advice = _judged(source, [entry])
    assert _line(source, hit) in costs and advice == [], (name, costs, advice)


def test_helper_modules_are_followed_and_judged_by_reach(tmp_path):
    (tmp_path / "layers.py").write_text("from numerics import probs\nfrom decoding import sample\n\n"
                                        "def softmax(x, dim):\n    return probs(x, dim)\n")
    (tmp_path / "numerics.py").write_text("import torch\n\ndef probs(x, dim):\n    return torch.softmax(x, dim)\n")
    (tmp_path / "decoding.py").write_text("import torch\n\ndef sample(l):\n    return torch.softmax(l, -1).argmax()\n")
    found = scan_submission(tmp_path / "layers.py", SOFTMAX, entries=["softmax"])
    assert sorted((f.file, f.line, f.reachable) for f in found) == [("decoding.py", 4, False), ("numerics.py", 4, True)]
    assert "never runs" in next(f for f in found if not f.reachable).describe()
    # imported inside the function that uses it
    (tmp_path / "layers.py").write_text("import decoding\n\ndef softmax(x, dim):\n    from numerics import probs\n"
                                        "    return probs(x, dim)\n")
    found = scan_submission(tmp_path / "layers.py", SOFTMAX, entries=["softmax"])
    assert sorted((f.file, f.line, f.reachable) for f in found) == [("decoding.py", 4, False), ("numerics.py", 4, True)]


def test_package_modules_are_followed_through_relative_and_absolute_imports():
    files = {
        "pkg/__init__.py": b'import importlib.metadata\n__version__ = importlib.metadata.version("pkg")\n'
                           b"from .decoding import generate\n",
        "pkg/model.py": b"import torch\nfrom . import utils\nfrom pkg.nn import attention\n\n"
                        b"class MHA(torch.nn.Module):\n    def forward(self, x):\n"
                        b"        return attention(utils.scale(x))\n",
        "pkg/utils.py": b"def scale(x):\n    return x * 0.5\n\ndef probs(x):\n    import torch\n"
                        b"    return torch.softmax(x, -1)\n",
        "pkg/nn.py": b"import torch.nn.functional as F\n\ndef attention(x):\n    return F.softmax(x, -1) @ x\n",
        "pkg/decoding.py": b"import torch\n\ndef generate(logits):\n    return torch.softmax(logits, -1)\n",
    }
    found = scan_package(files, ["pkg.model"], SOFTMAX, entries=[("pkg.model", "MHA")])
    assert sorted((f.file, f.line, f.reachable) for f in found) == [
        ("pkg/decoding.py", 4, False), ("pkg/nn.py", 4, True), ("pkg/utils.py", 6, False)]


# -- each challenge gives its own hint -----------------------------------------------------------------------
def test_each_forbidden_check_gives_its_own_challenges_hint():
    """The hint after a forbidden API is the challenge's own: an attention that calls torch.softmax is not told to
    'index the weight' (the embedding catalogue's hint, once every spec's default)."""
    import yaml

    from validator import paths
    from validator.checks.constraint import RuntimeParams, SourceParams

    for default in (SourceParams().advice, RuntimeParams().advice):
        assert "embedding" not in default and "weight" not in default, default
    for spec in sorted(paths.challenges_dir().glob("*.yaml")):
        doc = yaml.load(spec.read_text(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
        for check in doc.get("checks", []):
            if check.get("test") in ("forbidden_source", "forbidden_runtime"):
                where = f"{spec.name}: {check['id']}"
                assert check.get("advice"), f"{where} has no advice of its own"
                if "embedding" not in doc["id"] and "lm_head" not in doc["id"]:
                    assert "lookup" not in check["advice"] and "nn.Embedding" not in check["advice"], where


# -- graded: the verdicts and the advice line ------------------------------------------------------------------
@pytest.mark.thorough
def test_a_sampler_beside_a_correct_softmax_is_an_advice_line():
    from helpers import IMPLEMENTATIONS, grade_file

    path = IMPLEMENTATIONS / "softmax" / "correct" / "with_sampling_function.py"
    (result,) = grade_file(path, "softmax", checks=["no_library_softmax_source", "unused_forbidden_import"])
    by_id = {c.id: c for c in result.checks}
    assert by_id["no_library_softmax_source"].status == "passed", by_id["no_library_softmax_source"].message
    advice = by_id["unused_forbidden_import"]
    assert advice.status == "advisory" and advice.score == 0 and advice.review == []
    assert "with_sampling_function.py:18" in advice.message and "never runs" in advice.message, advice.message


@pytest.mark.thorough
def test_cs336_package_with_its_version_line_and_a_decoding_module(tmp_path):
    """CS336's __init__.py reading its version (importlib.metadata, guarded: the staged copy is not installed) and
    a decoding module that calls torch.softmax, imported by the package: full marks on the source checks, no
    review, the decoding module's softmax as advice only."""
    import shutil

    from helpers import catalogue
    from validator.api import grade
    from validator.package import load_package

    root = tmp_path / "pkg"
    shutil.copytree(Path(__file__).resolve().parent / "packages" / "cs336_style", root)
    (root / "cs336_basics" / "__init__.py").write_text(
        'import importlib.metadata\n\ntry:\n    __version__ = importlib.metadata.version("cs336_basics")\n'
        "except importlib.metadata.PackageNotFoundError:\n    __version__ = None\n\n"
        "from .decoding import generate  # noqa: F401\n")
    (root / "cs336_basics" / "decoding.py").write_text(
        "import torch\n\nfrom .transformer import stable_softmax  # noqa: F401\n\n\n"
        "def generate(logits, temperature=1.0):\n"
        "    return torch.multinomial(torch.softmax(logits / temperature, dim=-1), 1)\n")
    report = grade(root, challenges=["softmax", "attention", "multihead_self_attention"], seed=2, profile="quick",
                   catalogue=catalogue(), package=load_package(root, catalogue()),
                   checks=["no_library_softmax_source", "no_library_source", "unused_forbidden_import"])
    statuses = {f"{ch.id}/{c.id}": (c.status, c.review) for ch in report.challenges for c in ch.checks}
    assert statuses == {f"{cid}/{check}": (status, []) for cid, check, status in [
        ("softmax", "no_library_softmax_source", "passed"), ("softmax", "unused_forbidden_import", "advisory"),
        ("attention", "no_library_softmax_source", "passed"), ("attention", "unused_forbidden_import", "advisory"),
        ("multihead_self_attention", "no_library_source", "passed"),
        ("multihead_self_attention", "unused_forbidden_import", "advisory")]}, statuses
    advice = next(c for ch in report.challenges for c in ch.checks if c.id == "unused_forbidden_import")
    assert "cs336_basics/decoding.py:7" in advice.message, advice.message


# -- a forbidden name under another spelling (issue 21) -----------------------------------------------------------
SOFTMAX_NAMES = SOFTMAX + ["torch.Tensor.softmax"]


@pytest.mark.parametrize("src,line", [
    ("def f(x):\n    return x.softmax(-1)\n", 2),
    ("import torch\n\ndef f(x):\n    return torch.Tensor.softmax(x, -1)\n", 4),
    ("import torch\n\ndef f(x):\n    probs = getattr(x, 'soft' + 'max')\n    return probs(-1)\n", 4),
    ("import torch.nn.functional as F\n\ndef f(x):\n    return F.torch.softmax(x, -1)\n", 4),
    ("import torch.nn.modules.activation as act\n\ndef f(x):\n    return act.F.softmax(x, -1)\n", 4),
])
def test_a_forbidden_api_under_another_name_is_a_use(src, line):
    assert [hit_line for hit_line, _, _ in find_forbidden(src, SOFTMAX_NAMES)] == [line]


def test_a_tensor_method_in_code_the_entry_never_runs_stays_advice(tmp_path):
    (tmp_path / "layers.py").write_text(textwrap.dedent(LAYER_AND_SAMPLER).replace(
        "torch.softmax(logits / temperature, dim=-1)", "(logits / temperature).softmax(-1)"))
    found = scan_submission(tmp_path / "layers.py", SOFTMAX_NAMES, entries=["softmax"])
    assert found and all(f.advice_only for f in found), [f.describe() for f in found]
    assert any(f.what == "torch.Tensor.softmax" and "never runs" in f.describe() for f in found)


def test_a_remembered_reach_is_the_reach_of_that_text():
    """reachable_lines is remembered per (sources, roots): two files with the same names and roots but other text
    get their own answers, and an answer cannot be changed by its reader."""
    uses = "import torch\n\ndef helper(x):\n    return torch.softmax(x, -1)\n\ndef layer(x):\n    return helper(x)\n"
    unused = "import torch\n\ndef helper(x):\n    return torch.softmax(x, -1)\n\ndef layer(x):\n    return x\n"
    first = reachable_lines([Source("layers", "layers.py", uses)], [("layers", "layer")])
    second = reachable_lines([Source("layers", "layers.py", unused)], [("layers", "layer")])
    assert 4 in first["layers.py"] and 4 not in second["layers.py"]
    assert reachable_lines([Source("layers", "layers.py", uses)], [("layers", "layer")]) == first
    with pytest.raises(AttributeError):
        first["layers.py"].add(99)  # frozen: a caller cannot change what the next one is told
