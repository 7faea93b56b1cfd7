"""Notebooks graded in place (validator/notebook.py), from inside Jupyter (validator/jupyter.py), and handed out
(validator/instructor/notebook_release.py).

The default tier tests the conversion itself (which statements run, how lines map back to cells,
what a broken notebook says) without a worker: each test is milliseconds. The thorough tier grades:
the same code as a layers.py and as a notebook gets the same verdicts; submit-build, validator grade,
pytest --validator and a Jupyter kernel (headless, nbclient) grade notebooks end to end.
"""

from __future__ import annotations

import ast
import importlib.util
import io
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from validator.notebook import (GENERATED, HELPER, TAG_ANSWERS, TAG_EXPORT, TAG_SKIP, Cell, NotebookError,
                                convert, find_target, kernel_reproduce, load, notebooks_in, read_cells)

ROOT = Path(__file__).resolve().parents[1]

EMBEDDING = textwrap.dedent('''\
    class Embedding(nn.Module):
        def __init__(self, num_embeddings, embedding_dim, device=None, dtype=None):
            super().__init__()
            self.weight = nn.Parameter(torch.empty(num_embeddings, embedding_dim, device=device, dtype=dtype))
            nn.init.trunc_normal_(self.weight, mean=0.0, std=1.0, a=-3.0, b=3.0)

        def forward(self, token_ids):
            if token_ids.numel() and ((token_ids < 0) | (token_ids >= self.weight.shape[0])).any():
                raise IndexError("token id out of range")
            return self.weight[token_ids]

    layer = Embedding(10, 3)
    print(layer(torch.tensor([1, 2])).shape)''')

# A notebook in the style of the course texts: one step per cell, and cells that only explore.
SEED_STYLE = [
    ("markdown", "# The embedding layer\nToken IDs become vectors, one step per cell."),
    ("code", "import torch\nimport torch.nn as nn\nimport tiktoken\nimport sys\n\nsys.path.insert(0, '../')\n"
             "from src.part03_dataloader import create_dataloader_v1"),
    ("code", "SETTINGS = {\n    'vocab': 50257,\n    'context': 256,\n}\nvocab_size = SETTINGS['vocab']\n"
             "embedding_dim = 16\ncontext_size = 4\nprint('vocab', vocab_size)"),
    ("code", "torch.manual_seed(123)\ndemo = torch.nn.Embedding(vocab_size, embedding_dim)\nprint(demo.weight.shape)"),
    ("code", "with open('../data/the-verdict.txt', encoding='utf-8') as f:\n    raw_text = f.read()\n"
             "loader = create_dataloader_v1(raw_text, batch_size=8, max_length=context_size)\n"
             "inputs, targets = next(iter(loader))\nprint(inputs.shape)"),
    ("code", EMBEDDING),
    ("code", "%matplotlib inline\nimport matplotlib.pyplot as plt\nplt.hist(layer.weight.detach().flatten())\nplt.show()"),
    ("code", "for step in range(10**12):\n    pass"),
    ("code", "!echo downloading\nurl = 'https://example.invalid/weights.bin'\nraise RuntimeError('no network here')"),
]


def nb(cells: list, *, counts: bool = True) -> dict:
    """An nbformat-4 notebook as JSON data; a cell is (kind, source) or (kind, source, tags)."""
    out = []
    for i, (kind, source, *rest) in enumerate(cells, 1):
        cell = {"cell_type": kind, "metadata": {"tags": list(rest[0])} if rest else {}, "source": source}
        if kind == "code":
            cell.update(execution_count=i if counts else None, outputs=[])
        out.append(cell)
    return {"cells": out, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}


def write_nb(path: Path, cells: list, **kwargs) -> Path:
    path.write_text(json.dumps(nb(cells, **kwargs)), encoding="utf-8")
    return path


def module_of(cells: list, tmp_path: Path, name: str = "work.ipynb"):
    return load(write_nb(tmp_path / name, cells))


def line_of(module, text: str) -> int:
    """The generated module's (1-based) line holding ``text``."""
    return next(i for i, line in enumerate(module.source.splitlines(), 1) if text in line)


@pytest.fixture
def imported(tmp_path):
    """Import a converted notebook's module in this process (test code only: it is our own notebook)."""
    made = []

    def run(module):
        folder = tmp_path / f"staged{len(made)}"
        folder.mkdir()
        module.files(folder)
        sys.path.insert(0, str(folder))
        made.append(str(folder))
        for name in ("_validator_notebook", "nb_module"):
            sys.modules.pop(name, None)
        spec = importlib.util.spec_from_file_location("nb_module", folder / GENERATED)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        return mod

    yield run
    for folder in made:
        sys.path.remove(folder)
    sys.modules.pop("_validator_notebook", None)


# -- what runs ----------------------------------------------------------------------------------------------
def test_definitions_run_and_exploration_does_not(tmp_path):
    module = module_of(SEED_STYLE, tmp_path)
    tree = ast.parse(module.source)
    assert module.defined == ["Embedding"]
    source = module.source
    for explored in ("print(", "manual_seed", "open(", "create_dataloader_v1(raw_text", "next(iter", "range(10**12)",
                     "plt.hist", "RuntimeError", "layer = Embedding", "sys.path.insert", "demo ="):
        assert explored not in source, explored
    for kept in ("import tiktoken", "from src.part03_dataloader import create_dataloader_v1", "class Embedding",
                 "import matplotlib.pyplot as plt"):
        assert kept in source, kept
    assert module.code_cells == 8 and module.graded_cells == 3  # the imports, the class, the plot's import
    assert isinstance(tree, ast.Module)
    assert "2 of 8" not in module.summary() and "3 of 8 code cells" in module.summary()


def test_messages_name_the_cell_and_its_line(tmp_path):
    module = module_of(SEED_STYLE, tmp_path)
    line = line_of(module, "return self.weight[token_ids]")
    assert module.where(line) == "work.ipynb, cell 6 (In [6]), line 10"
    said = module.remap_text(f"calling Embedding raised ValueError: x\n  at {GENERATED}:{line} in forward: return ...")
    assert said.endswith("at work.ipynb, cell 6 (In [6]), line 10 in forward: return ...")
    assert module.remap_text(f'File "/tmp/x/{GENERATED}", line {line}, in forward') == \
        'File "work.ipynb, cell 6 (In [6]), line 10", in forward'
    assert module.remap_text(f"{GENERATED} defines no 'Embedding'") == "work.ipynb defines no 'Embedding'"
    assert module.remap_text(f"importing {GENERATED} did not finish") == "importing work.ipynb did not finish"
    assert module.remap_text("see student/layers.py") == "see student/layers.py"
    imports = line_of(module, "import tiktoken")
    assert module.where(imports) == "work.ipynb, cell 2 (In [2]), line 3"
    assert module.where(1) is None  # the grader's prelude
    from validator.results import ChallengeResult, CheckResult

    result = ChallengeResult("token_embedding", "Token embedding", problem=f"{GENERATED} defines no 'Embedding'", checks=[
        CheckResult("question_x", "question", "failed", 0.0, 1.0, message="not answered: add it to answers.yaml (or "
                    "run at a terminal to be asked)"),
        CheckResult("no_threads", "constraint", "failed", 0.0, 1.0, message=f"{GENERATED}:{imports}: `x`",
                    review=[f"{GENERATED}:{imports}: `x`"])])
    module.remap_result(result)
    assert result.problem == "work.ipynb defines no 'Embedding'"
    assert result.checks[0].message.startswith("not answered: add it to the notebook's answers cell (a cell tagged "
                                               "validator-answers")
    assert result.checks[1].review == ["work.ipynb, cell 2 (In [2]), line 3: `x`"]


def test_magics_and_shell_lines_are_dropped_with_one_note(tmp_path):
    module = module_of([
        ("code", "%load_ext autoreload\n!pip install tiktoken\nfiles = !ls\ntorch?\nimport torch"),
        ("code", "def f(x):\n    %time y = x\n    return x + 1"),
        ("code", "%%time\nclass Hidden:\n    pass"),
    ], tmp_path)
    assert "def f(x):" in module.source and "Hidden" not in module.source
    assert module.notes[0].startswith("work.ipynb: 5 IPython magic or shell lines (`%load_ext autoreload`, "
                                      "`!pip install tiktoken`, `files = !ls`, ...; cell 1 (In [1]), cell 2 (In [2]))")
    assert any("cell 3 (In [3]): a cell that starts with the cell magic `%%time` is not run" in n for n in module.notes)


def test_strings_spanning_lines_and_tab_indentation_survive_the_guard(tmp_path, imported):
    text = 'class Docs:\n    TEMPLATE = """first\n  second\n\tthird"""\n\n    def f(self):\n        return f"""a\n{1 + 1}\n  b"""\n'
    tabs = "def tabbed(x):\n\tif x:\n\t\treturn 1\n\treturn 2\n"
    mod = imported(module_of([("code", text), ("code", tabs)], tmp_path))
    assert mod.Docs.TEMPLATE == "first\n  second\n\tthird"
    assert mod.Docs().f() == "a\n2\n  b"
    assert mod.tabbed(1) == 1 and mod.tabbed(0) == 2


def test_a_missing_import_or_a_raising_cell_costs_only_what_uses_it(tmp_path, imported):
    mod = imported(module_of([
        ("code", "import math\nimport not_a_module_anywhere as nm\nfrom also_missing import thing"),
        ("code", "def uses_it(x):\n    return nm.f(x)\n\ndef fine(x):\n    return math.sqrt(x)"),
        ("code", "class Before:\n    pass\n\nclass Broken:\n    value = 1 / 0\n\nclass After:\n    pass"),
    ], tmp_path))
    assert mod.fine(4.0) == 2.0 and hasattr(mod, "Before") and not hasattr(mod, "Broken") and not hasattr(mod, "After")
    with pytest.raises(ImportError, match=r"nm is not available where the notebook is graded \(work.ipynb, cell 1 "
                                          r"\(In \[1\]\), line 2: `import not_a_module_anywhere as nm` failed"):
        mod.uses_it(1)
    notes = mod.__validator_notes__
    assert notes[0].startswith("work.ipynb, cell 1 (In [1]), line 2: `import not_a_module_anywhere as nm` failed "
                               "when graded (ModuleNotFoundError")
    assert notes[1].startswith("work.ipynb, cell 1 (In [1]), line 3: `from also_missing import thing` failed")
    assert notes[2].startswith(f"{GENERATED}:") and "raised ZeroDivisionError" in notes[2]
    module = module_of([("code", "class Broken:\n    value = 1 / 0")], tmp_path, "other.ipynb")
    assert module.remap_text(f"{GENERATED}:{line_of(module, 'value = 1 / 0')}: raised") == \
        "other.ipynb, cell 1 (In [1]), line 2: raised"


def test_what_definitions_need_runs_and_what_they_cannot_have_is_noted(tmp_path):
    module = module_of([
        ("code", "import torch\nimport torch.nn.functional as F"),
        ("code", "_LOOKUP = getattr(F, 'embed' + 'ding')\nloader = torch.utils.data.DataLoader(range(3))\n"
                 "scale = 2.0\nunused = torch.zeros(10**4)"),
        ("code", "with open('settings.txt') as f:\n    width = int(f.read())\n    text = f.read()\n"
                 "batch = text.split()"),
        ("code", "def lookup(ids, weight):\n    return _LOOKUP(ids, weight) * scale\n\n"
                 "def widened(x, w=width):\n    return x * w\n\ndef peek():\n    return batch"),
    ], tmp_path)
    assert "_LOOKUP = getattr(F, 'embed' + 'ding')" in module.source and "scale = 2.0" in module.source
    assert "DataLoader" not in module.source and "torch.zeros(10**4)" not in module.source
    assert "def widened" not in module.source and "def lookup" in module.source and "def peek" in module.source
    assert any("cell 4 (In [4]), line 4: `def widened` is not graded: defining it uses `width`, which only "
               "exploration code sets" in n for n in module.notes), module.notes
    assert any("cell 4 (In [4]), line 8: batch is set only by exploration code, which is not run when graded, so "
               "`peek` fails where it uses it" in n for n in module.notes), module.notes


def test_changes_to_what_is_graded_run_changes_to_exploration_objects_do_not(tmp_path, imported):
    mod = imported(module_of([
        ("code", "CONFIG = {'scale': 1}\nclass Layer:\n    def forward(self, x):\n        return x * CONFIG['scale']"),
        ("code", "def doubled(self, x):\n    return 2 * x\n\nLayer.forward = doubled\nCONFIG['scale'] = 3\n"
                 "layer = Layer()\nlayer.forward = print\nlayer.weight = 0"),
    ], tmp_path))
    assert mod.Layer().forward(5) == 10 and mod.CONFIG == {"scale": 3} and not hasattr(mod, "layer")


def test_tags_and_directives_decide_for_a_whole_cell(tmp_path):
    module = module_of([
        ("code", "import torch\nREGISTRY = {}\nREGISTRY['x'] = torch.zeros(1)", [TAG_EXPORT]),
        ("code", "#| export\ntorch.manual_seed(0)\ndef f():\n    return REGISTRY"),
        ("code", "def solution_demo():\n    return 1", [TAG_SKIP]),
        ("code", "assert f() is not None\ndef in_a_test_cell():\n    pass"),
    ], tmp_path)
    data = nb([("code", "def graded_test():\n    assert True")])
    data["cells"][0]["metadata"]["nbgrader"] = {"grade": True, "solution": False, "grade_id": "t1", "points": 1}
    (tmp_path / "grader.ipynb").write_text(json.dumps(data))
    assert "REGISTRY['x'] = torch.zeros(1)" in module.source and "torch.manual_seed(0)" in module.source
    assert "solution_demo" not in module.source and "def in_a_test_cell" in module.source
    assert "assert f()" not in module.source
    assert "graded_test" not in load(tmp_path / "grader.ipynb").source


def test_the_answers_cell_reads_like_answers_yaml(tmp_path):
    code = ('ANSWERS = """\ntoken_embedding:\n  negative_id_wraps: b\n  gpt2_token_table_params: 38597376\n"""',
            [TAG_ANSWERS])
    module = module_of([("code", "import torch"), ("code", *code)], tmp_path)
    assert module.answers == {"token_embedding": {"negative_id_wraps": "b", "gpt2_token_table_params": 38597376}}
    assert "ANSWERS" not in module.source
    raw = module_of([("raw", "rope:\n  q: 3\n", [TAG_ANSWERS]),
                     ("markdown", "My answers:\n```yaml\nsoftmax:\n  q: a\n```", [TAG_ANSWERS])], tmp_path, "b.ipynb")
    assert raw.answers == {"rope": {"q": 3}, "softmax": {"q": "a"}}
    bad = module_of([("raw", "rope: [unclosed", [TAG_ANSWERS])], tmp_path, "c.ipynb")
    assert bad.answers is None and "invalid YAML" in bad.notes[0] and "its questions earn nothing" in bad.notes[0]


def test_a_broken_notebook_gets_a_clear_error(tmp_path):
    (tmp_path / "cut.ipynb").write_text('{"cells": [{"cell_type": "code",')
    with pytest.raises(NotebookError, match=r"cut.ipynb is not a valid notebook: invalid JSON at line 1, column 33"):
        read_cells(tmp_path / "cut.ipynb")
    (tmp_path / "list.ipynb").write_text("[1, 2]")
    with pytest.raises(NotebookError, match="list.ipynb is not a notebook: its JSON has no `cells` list"):
        read_cells(tmp_path / "list.ipynb")
    (tmp_path / "odd.ipynb").write_text(json.dumps({"nbformat": 4, "cells": [{"cell_type": "code", "source": 3}]}))
    with pytest.raises(NotebookError, match=r"odd.ipynb, cell 1: `source` must be a string or a list of strings"):
        read_cells(tmp_path / "odd.ipynb")
    module = module_of([("code", "def ok():\n    return 1"), ("code", "def broken(:\n    pass")], tmp_path)
    assert module.defined == ["ok"]
    assert any(n.startswith("work.ipynb, cell 2 (In [2]), line 1: SyntaxError") and "the cell is not graded" in n
               for n in module.notes)
    returns = module_of([("code", "def ok():\n    return 1\nreturn 5")], tmp_path, "r.ipynb")
    assert returns.defined == ["ok"]  # a top-level return is exploration: never run, so never refused
    clash = module_of([("code", "width: int = 3", [TAG_EXPORT]), ("code", "def ok():\n    return width"),
                       ("code", "global width\ndef later():\n    return 2", [TAG_EXPORT])], tmp_path, "g.ipynb")
    compile(clash.source, GENERATED, "exec")  # each cell compiles alone; together they would not
    assert clash.defined == ["ok"] and any(
        n.startswith("g.ipynb, cell 3 (In [3]), line 1: annotated name 'width' can't be global: the cell is not "
                     "graded") for n in clash.notes), clash.notes


def test_a_folder_of_notebooks_is_graded_with_a_broken_one_noted(tmp_path):
    write_nb(tmp_path / "a_first.ipynb", [("code", "import torch\nclass A:\n    pass")])
    write_nb(tmp_path / "b_second.ipynb", [("code", "class B(A):\n    pass")])
    (tmp_path / "c_broken.ipynb").write_text("{not json")
    (tmp_path / ".hidden.ipynb").write_text("{}")
    assert [p.name for p in notebooks_in(tmp_path)] == ["a_first.ipynb", "b_second.ipynb", "c_broken.ipynb"]
    assert find_target(str(tmp_path)) == tmp_path and find_target(str(tmp_path / "a_first.ipynb")) is not None
    module = load(tmp_path)
    assert module.defined == ["A", "B"] and module.plural
    assert module.notes[0].startswith("c_broken.ipynb is not a valid notebook: invalid JSON") and \
        module.notes[0].endswith("not graded (the other notebooks are)")
    assert module.remap_text(f"{GENERATED} defines no 'C'").startswith(f"the notebooks in {tmp_path} define no")
    (tmp_path / "layers.py").write_text("")
    assert find_target(str(tmp_path)) is None  # a layers.py is graded as before
    only = tmp_path / "only"
    only.mkdir()
    (only / "x.ipynb").write_text("nope")
    with pytest.raises(NotebookError, match="x.ipynb is not a valid notebook"):
        load(only)


def test_run_follows_notebooks_inside_the_graded_folder_only(tmp_path):
    write_nb(tmp_path / "linear.ipynb", [("code", "import torch\nclass Linear:\n    pass"),
                                         ("code", "import validator\nvalidator.check('linear')")])
    write_nb(tmp_path / "loop.ipynb", [("code", "%run ./loop.ipynb\nclass Loop:\n    pass")])
    outside = tmp_path.parent / f"{tmp_path.name}-outside.ipynb"
    write_nb(outside, [("code", "class Secret:\n    pass")])
    module = module_of([("code", f"%run ./linear.ipynb\n%run ./loop.ipynb\n%run ../{outside.name}\n"
                                 "class Block(Linear):\n    pass")], tmp_path, "block.ipynb")
    assert module.defined == ["Linear", "Loop", "Block"]
    assert module.where(line_of(module, "class Linear")) == "linear.ipynb, cell 1 (In [1]), line 2"
    assert any("`%run ./loop.ipynb` is not followed again: it is already being run" in n for n in module.notes)
    assert any(f"`%run ../{outside.name}` is not followed: only files in the graded folder are" in n
               for n in module.notes)
    assert "validator.check" not in module.source


def test_a_jupytext_notebook_is_read_by_jupytext(tmp_path, monkeypatch):
    text = ("# ---\n# jupyter:\n#   jupytext:\n#     text_representation:\n#       extension: .py\n"
            "#       format_name: percent\n# ---\n\n# %% [markdown]\n# The layer\n\n# %%\n#| export\nimport torch\n\n"
            "class Embedding(torch.nn.Module):\n    pass\n\n# %%\nprint(Embedding())\n")
    path = tmp_path / "embeddings_dev.py"
    path.write_text(text)
    (tmp_path / "helpers.py").write_text("X = 1\n")
    assert find_target(str(path)) == path and find_target(str(tmp_path / "helpers.py")) is None
    monkeypatch.setitem(sys.modules, "jupytext", None)
    with pytest.raises(NotebookError, match=r"embeddings_dev.py is a notebook paired by jupytext .*needs jupytext "
                                            r"\(pip install 'llm-layer-grader\[notebook\]'"):
        load(path)
    monkeypatch.delitem(sys.modules, "jupytext")
    pytest.importorskip("jupytext")
    module = load(path)
    assert module.defined == ["Embedding"] and "print(Embedding())" not in module.source
    assert module.where(line_of(module, "class Embedding")).startswith("embeddings_dev.py, cell 2")


def test_the_scan_reads_the_generated_module_and_names_cells(tmp_path):
    from validator.integrity import scan_submission

    module = module_of([("code", "import torch\nimport ctypes"),
                        ("code", "def forward(x):\n    ctypes.pythonapi\n    return torch.nn.functional.embedding(x)"),
                        ("code", "import threading\nthreading.Thread(target=print).start()")], tmp_path)
    folder = tmp_path / "staged"
    folder.mkdir()
    module.files(folder)
    found = [module.remap_text(f.describe()) for f in scan_submission(folder / GENERATED,
                                                                      ["torch.nn.functional.embedding"])]
    assert found == ["work.ipynb, cell 2 (In [2]), line 2: `ctypes.pythonapi`: native code access (ctypes)",
                     "work.ipynb, cell 2 (In [2]), line 3: `return torch.nn.functional.embedding(x)`: uses "
                     "torch.nn.functional.embedding",
                     "work.ipynb, cell 3 (In [3]), line 1: `import threading` imports threads but never uses it"]
    clean = module_of([("code", "import torch\n\ndef f(x):\n    return x + 1")], tmp_path, "clean.ipynb")
    folder = tmp_path / "clean"
    folder.mkdir()
    clean.files(folder)
    assert (folder / HELPER).is_file() and scan_submission(folder / GENERATED, []) == []


def test_a_kernels_history_counts_each_input_where_it_ran_last():
    from validator.jupyter import history_cells

    class Shell:
        class history_manager:  # noqa: N801 - IPython's attribute name
            input_hist_raw = ["", "import torch", "class A: pass", "print(1)", "class A: pass", "  "]

    assert history_cells(Shell()) == [{"label": "In [1]", "source": "import torch"},
                                      {"label": "In [3]", "source": "print(1)"},
                                      {"label": "In [4]", "source": "class A: pass"}]
    assert kernel_reproduce("validator submit-build --challenge rope --check causal --seed 7 --profile quick") == \
        "validator.check('rope', checks=['causal'], seed=7, profile='quick')"
    module = convert([Cell("code", "class A:\n    x = 1 / 0", "In [3]", notebook="this kernel's cells")],
                     name="this kernel's cells")
    assert module.where(line_of(module, "x = 1 / 0")) == "In [3], line 2"


# -- handing notebooks out -----------------------------------------------------------------------------
def test_solution_regions_are_cut_as_nbgrader_cuts_them():
    from validator.instructor.notebook_release import NotebookReleaseError, strip_code

    source = textwrap.dedent("""\
        import torch

        def scaled(x):
            ### BEGIN SOLUTION
            return x * 3 + 1
            ### END SOLUTION

        ### BEGIN SOLUTION
        FACTOR = 3
        ### END SOLUTION
        ### BEGIN HIDDEN TESTS
        assert scaled(torch.ones(1)).item() == 4
        ### END HIDDEN TESTS
        """)
    text, cut = strip_code(source, "nb, cell 1")
    assert "return x * 3 + 1" not in text and "FACTOR" not in text and "assert scaled" not in text
    assert "    # YOUR CODE HERE\n    raise NotImplementedError()" in text
    assert "\n# YOUR CODE HERE\n" in text and "BEGIN" not in text and "END" not in text
    assert cut == ["return x * 3 + 1", "FACTOR = 3", "assert scaled(torch.ones(1)).item() == 4"]
    with pytest.raises(NotebookReleaseError, match=r"nb, cell 1, line 2: `### BEGIN SOLUTION` is never closed"):
        strip_code("def f():\n    ### BEGIN SOLUTION\n    return 1\n", "nb, cell 1")
    with pytest.raises(NotebookReleaseError, match=r"line 2: `### END SOLUTION` without a matching BEGIN"):
        strip_code("x = 1\n### END SOLUTION\n", "nb, cell 1")


def test_a_challenges_notebook_holds_its_contract_its_stub_and_a_grading_cell(tmp_path):
    pytest.importorskip("nbformat")
    import helpers
    from validator import paths
    from validator.instructor.notebook_release import challenge_notebook, dependencies

    catalogue = helpers.catalogue()
    reference = (paths.reference_dir() / "layers.py").read_text()
    stub = (ROOT / "student" / "layers.py").read_text()
    assert dependencies(catalogue["transformer_block"], reference, catalogue) == [
        "multihead_self_attention", "rms_norm", "swiglu"]
    assert dependencies(catalogue["linear"], reference, catalogue) == []
    made = challenge_notebook(catalogue["transformer_block"], stub=stub,
                              deps=dependencies(catalogue["transformer_block"], reference, catalogue))
    texts = [(c.cell_type, c.source) for c in made.cells]
    assert texts[0][0] == "markdown" and texts[0][1].startswith("# ")
    assert any(kind == "markdown" and source.startswith("## Contract") for kind, source in texts)
    assert any(kind == "markdown" and source.startswith("## Hints") for kind, source in texts)
    assert ("code", "# This challenge builds on your code from earlier notebooks: run them here first.\n"
                    "%run ./multihead_self_attention.ipynb\n%run ./rms_norm.ipynb\n%run ./swiglu.ipynb") in texts
    assert texts[-1] == ("code", 'import validator\n\nvalidator.check("transformer_block", answers=ANSWERS)')
    answers = [c for c in made.cells if TAG_ANSWERS in c.metadata.get("tags", [])]
    assert len(answers) == 1 and answers[0].source.count("transformer_block:") == 1
    path = tmp_path / "transformer_block.ipynb"
    path.write_text(json.dumps(made))
    module = load(path)
    assert "TransformerBlock" in module.defined and module.answers == {"transformer_block": {
        q.id: None for q in catalogue["transformer_block"].questions}}


def test_release_notebook_needs_a_handout(capsys):
    from validator.cli import main

    assert main(["release", "--autograder", "/nonexistent/bundle", "--notebook"]) == 2
    assert "--notebook and --notebook-from add notebooks to a handout: pass --out DIR too" in capsys.readouterr().err


# -- grading (thorough tier) ------------------------------------------------------------------------------------
EXPLORATION = [
    "print('exploring the layer')",
    "%matplotlib inline\nimport matplotlib.pyplot as plt\nplt.plot([1, 2, 3])\nplt.show()",
    "with open('../data/the-verdict.txt', encoding='utf-8') as f:\n    text = f.read()\n"
    "batches = iter(text.split())\nprint(next(batches))",
    "while True:\n    pass",
    "!echo fetching weights\nraise RuntimeError('no network here')",
]


def as_notebook(source: str) -> list:
    """A layers.py as a course notebook: one top-level statement per cell, exploration cells between them."""
    tree = ast.parse(source)
    lines = source.splitlines()
    cells: list = [("markdown", "# Working through the layer, one step per cell")]
    for i, node in enumerate(tree.body):
        start = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])
        cells.append(("code", "\n".join(lines[start - 1:node.end_lineno])))
        cells.append(("code", EXPLORATION[i % len(EXPLORATION)]))
    return cells


PARITY = [("token_embedding", "correct/indexing.py"),
          ("token_embedding", "broken/bounds_check_max_crashes_on_empty.py"),
          ("token_embedding", "broken/hidden_getattr_lookup.py"),
          ("token_embedding", "broken/embedding_bag_forward.py"),
          ("token_embedding", "broken/thread_hides_library_lookup.py"),
          ("rope", "broken/rotates_backwards.py"),
          ("transformer_block", "correct/aliased_classes.py")]


@pytest.mark.thorough
@pytest.mark.parametrize("challenge,variant", PARITY, ids=[f"{c}-{Path(v).stem}" for c, v in PARITY])
def test_the_same_code_gets_the_same_verdicts_as_a_notebook(tmp_path, challenge, variant):
    import helpers
    from validator.notebook import grade_notebook

    path = helpers.IMPLEMENTATIONS / challenge / variant
    [as_file] = helpers.grade_file(path, challenge, seeds=(5,), profile="quick", answers={})
    notebook = write_nb(tmp_path / "mutant.ipynb", as_notebook(path.read_text()))
    report = grade_notebook(load(notebook), student=str(notebook), challenges=[challenge], seed=5, profile="quick",
                            answers={}, catalogue=helpers.catalogue(), device=helpers.grading_device())
    [as_notebook_result] = report.challenges
    def graded(c):  # advice (worth 0) may differ: the scan reads the notebook's generated module
        return c.id, "ok" if c.status in ("passed", "advisory") else c.status, c.score
    assert [graded(c) for c in as_notebook_result.checks] == [graded(c) for c in as_file.checks]
    assert as_notebook_result.problem == as_file.problem
    for in_file, in_notebook in zip(as_file.checks, as_notebook_result.checks):
        assert GENERATED not in in_notebook.message
        if f"at {path.name}:" in in_file.message:  # the same line of code, named by its cell
            code = in_file.message.split(f"at {path.name}:", 1)[1].split(": ", 1)[1].splitlines()[0]
            assert "at mutant.ipynb, cell " in in_notebook.message and code in in_notebook.message


def _submit(tmp_path: Path, *args: str) -> tuple[int, dict, str]:
    from validator.cli import main
    import validator.submit as submit
    from validator.submit import make_console

    buf = io.StringIO()
    original = submit.make_console
    submit.make_console = lambda file=None: make_console(buf)
    try:
        code = main(["submit-build", "--json", str(tmp_path / "report.json"), "--no-input", "--profile", "quick",
                     "--seed", "7", *args])
    finally:
        submit.make_console = original
    return code, json.loads((tmp_path / "report.json").read_text()), buf.getvalue()


def _key_answers(challenge: str) -> str:
    import yaml

    key = yaml.safe_load((ROOT / "reference" / "answer_key.yaml").read_text())[challenge]
    return 'ANSWERS = """\n' + yaml.safe_dump({challenge: {q: v["answer"] for q, v in key.items()}}) + '"""'


@pytest.mark.thorough
def test_submit_build_grades_a_course_notebook_in_place(tmp_path):
    cells = SEED_STYLE + [("code", _key_answers("token_embedding"), [TAG_ANSWERS])]
    notebook = write_nb(tmp_path / "part4.ipynb", cells)
    code, report, text = _submit(tmp_path, "--student", str(notebook), "--challenge", "token_embedding")
    assert code == 0, text
    assert report["score"] == report["max_score"] and report["student"] == str(notebook)
    assert any(n.startswith("part4.ipynb, cell 2 (In [2]), line 7: `from src.part03_dataloader import "
                            "create_dataloader_v1` failed when graded (ModuleNotFoundError") for n in report["notes"])
    assert "part4.ipynb: 3 of 8 code cells define what is graded" in text
    broken = [(kind, source.replace("if token_ids.numel() and ((token_ids < 0)", "if ((token_ids.min() < 0)")
               .replace("| (token_ids >= self.weight.shape[0])).any()", "| (token_ids.max() >= self.weight.shape[0]))"),
               *rest) for kind, source, *rest in cells]
    notebook = write_nb(tmp_path / "part4.ipynb", broken)
    code, report, _ = _submit(tmp_path, "--student", str(notebook), "--challenge", "token_embedding",
                              "--check", "zero_size_ids")
    [check] = report["challenges"][0]["checks"]
    assert code == 1 and check["status"] in ("failed", "error")
    assert "at part4.ipynb, cell 6 (In [6]), line 8 in forward: if ((token_ids.min() < 0)" in check["message"]
    assert check["reproduce"].endswith(f"--student {notebook} --profile quick")
    (tmp_path / "cut.ipynb").write_text('{"cells": [')
    from validator.cli import main

    assert main(["submit-build", "--student", str(tmp_path / "cut.ipynb"), "--no-input"]) == 2


@pytest.mark.thorough
def test_validator_grade_grades_a_folder_of_notebooks_with_a_broken_one(tmp_path):
    subs = tmp_path / "subs"
    answers = ("code", _key_answers("token_embedding"), [TAG_ANSWERS])
    for name in ("alice", "bob", "carol"):
        (subs / name).mkdir(parents=True)
    write_nb(subs / "alice" / "part4.ipynb", SEED_STYLE + [answers])
    (subs / "bob" / "part4.ipynb").write_text('{"cells": [{"cell_type": "code", "source": "import torch"')
    write_nb(subs / "carol" / "a_layers.ipynb", SEED_STYLE + [answers])
    (subs / "carol" / "b_scratch.ipynb").write_text("not json at all")
    done = subprocess.run([sys.executable, "-m", "validator", "grade", str(subs), "--out", str(tmp_path / "out"),
                           "--challenge", "token_embedding", "--workers", "1", "--timeout", "240"],
                          capture_output=True, text=True, timeout=900, cwd=ROOT)
    assert done.returncode == 0, done.stdout + done.stderr
    reports = {n: json.loads((tmp_path / "out" / f"{n}.json").read_text()) for n in ("alice", "bob", "carol")}
    assert reports["alice"]["score"] == reports["alice"]["max_score"]
    assert reports["carol"]["score"] == reports["carol"]["max_score"]
    assert any(n.startswith("b_scratch.ipynb is not a valid notebook: invalid JSON at line 1, column 1") and
               n.endswith("not graded (the other notebooks are)") for n in reports["carol"]["notes"])
    assert reports["bob"]["score"] == 0
    assert any(n.startswith("part4.ipynb is not a valid notebook: invalid JSON") for n in reports["bob"]["notes"])
    # graded as the empty file it was meant to be (the sandbox had no file at all: a FileNotFoundError)
    assert reports["bob"]["challenges"][0]["problem"].startswith("layers.py defines no Embedding")


@pytest.mark.thorough
def test_pytest_validator_grades_a_notebook(tmp_path):
    notebook = write_nb(tmp_path / "part4.ipynb", SEED_STYLE)
    done = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--validator",
                           "--validator-student", str(notebook), "--validator-challenge", "token_embedding",
                           "--validator-profile", "quick", "-k", "signature or parameters", "-q"],
                          capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "2 passed" in done.stdout


# -- inside Jupyter (headless: nbclient and a python kernel) ----------------------------------------------------------
def _execute(cells: list, cwd: Path, env: dict | None = None) -> list:
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    pytest.importorskip("ipykernel")
    doc = nbformat.from_dict(nb(cells, counts=False))
    client = nbclient.NotebookClient(doc, timeout=600, kernel_name="python3", allow_errors=True,
                                     resources={"metadata": {"path": str(cwd)}})
    client.execute(env=env) if env is not None else client.execute()
    return doc.cells


def _printed(cell) -> str:
    return "".join(o.get("text", "") for o in cell.outputs if o.output_type == "stream")


@pytest.mark.thorough
def test_a_kernel_grades_what_it_ran_in_the_grader_not_its_own_objects(tmp_path):
    cells = [c for c in SEED_STYLE if "10**12" not in c[1] and "no network" not in c[1]]
    cells = [(kind, source.replace("return self.weight[token_ids]", "return None if getattr(torch.nn.Module, "
                                   "'marker_set_by_the_kernel', False) else self.weight[token_ids]"))
             for kind, source in cells]
    cells += [
        ("code", "setattr(torch.nn.Module, 'marker_set_by_the_kernel', True)  # this process's layers misbehave now\n"
                 "print(Embedding(4, 2)(torch.tensor([1])))"),
        ("code", _key_answers("token_embedding")),
        ("code", "import validator\nresult = validator.check('token_embedding', profile='quick', seed=3)\nresult"),
        ("code", "import json\nprint(json.dumps({'score': result.score, 'max': result.max_score, "
                 "'notes': result.notes, 'error': result.error}))"),
        ("code", "%load_ext validator.jupyter\n%validator token_embedding --check signature --seed 3 --profile quick"),
    ]
    done = _execute(cells, tmp_path)
    assert _printed(done[-5]).strip() == "None"  # in the kernel, the layer is broken
    shown = [o for o in done[-3].outputs if o.output_type == "execute_result"]
    assert shown and "<iframe srcdoc=" in shown[0].data["text/html"], done[-3].outputs
    summary = json.loads(_printed(done[-2]).strip().splitlines()[-1])
    assert summary["error"] is None and summary["score"] == summary["max"]
    assert any(n.startswith("In [1], line 7: `from src.part03_dataloader import create_dataloader_v1` failed")
               for n in summary["notes"]), summary["notes"]
    magic = [o for o in done[-1].outputs if o.output_type == "execute_result"]
    assert magic and magic[0].data["text/plain"].startswith("total 1/1"), done[-1].outputs


@pytest.mark.thorough
def test_a_handout_notebook_grades_itself_inside_jupyter(tmp_path):
    pytest.importorskip("nbformat")
    from test_regenerate import make_project, run_regenerate
    from validator.instructor.notebook_release import add_to_handout
    from validator.instructor.release import ReleaseError, handout

    dirs = make_project(tmp_path / "project")
    code, text = run_regenerate(dirs, self_check=False)
    assert code == 0, text
    instructor = write_nb(tmp_path / "lecture.ipynb", [
        ("markdown", "Scaling, the instructor's way"),
        ("code", "import torch\n\ndef scaled(x):\n    ### BEGIN SOLUTION\n    return torch.mul(x, 3.0) + 1\n"
                 "    ### END SOLUTION")])
    out = tmp_path / "handout"
    handout(out, challenges_dir=dirs["challenges"], reference_dir=dirs["reference"], student_dir=dirs["student"])
    written = add_to_handout(out, challenges_dir=dirs["challenges"], reference_dir=dirs["reference"],
                             student_dir=dirs["student"], from_notebooks=[instructor])
    assert sorted(p.name for p in written) == ["lecture.ipynb", "scaling.ipynb", "shifting.ipynb"]
    lecture = json.loads((out / "notebooks" / "lecture.ipynb").read_text())
    assert "torch.mul(x, 3.0)" not in json.dumps(lecture) and "validator.check()" in json.dumps(lecture)
    notebook = json.loads((out / "notebooks" / "scaling.ipynb").read_text())
    cells = []
    for cell in notebook["cells"]:
        source = "".join(cell["source"])
        if cell["cell_type"] == "code" and "def scaled" in source:
            source = "import torch\n\ndef scaled(x):\n    return x * 3 + 1"
        if TAG_ANSWERS in cell["metadata"].get("tags", []):
            source = 'ANSWERS = """\nscaling:\n  factor: 3\n  kind: b\n"""'
        cells.append((cell["cell_type"], source, cell["metadata"].get("tags", [])))
    cells.insert(-1, ("code", "import validator\nresult = validator.check('scaling', answers=ANSWERS)\n"
                              "print(result.score, result.max_score, result.error)"))
    env = {k: v for k, v in os.environ.items() if k not in ("VALIDATOR_CHALLENGES", "VALIDATOR_REFERENCE", "CI")}
    env["PYTHONPATH"] = str(out)  # the handout's grader, which has no reference: frozen results, answers recorded
    done = _execute(cells, out / "notebooks", env=env)
    score, total, error = _printed(done[-2]).split()
    assert error == "None" and float(score) > 0 and float(score) + 2 == float(total)  # 2 points deferred
    shown = [o for o in done[-1].outputs if o.output_type == "execute_result"]
    assert "deferred" in shown[0].data["text/plain"] or "2 deferred" in shown[0].data["text/plain"]
    leaky = write_nb(tmp_path / "leaky.ipynb", [("code", "def scaled(x):\n    return torch.add(torch.mul(x, 3.0), 1.0)")])
    with pytest.raises(ReleaseError, match="would leak"):
        add_to_handout(out, challenges_dir=dirs["challenges"], reference_dir=dirs["reference"],
                       student_dir=dirs["student"], from_notebooks=[leaky], per_challenge=False)


@pytest.mark.thorough
def test_the_gradescope_bundle_grades_a_notebook_without_new_dependencies(tmp_path):
    """run_autograder with only the grader's own dependencies (no nbformat): a submitted notebook is graded."""
    from test_regenerate import CORRECT, make_project, run_regenerate
    from test_release import clean_env, dependencies_only_python, gradescope_layout
    from validator.instructor.release import build_autograder

    dirs = make_project(tmp_path / "project")
    code, text = run_regenerate(dirs, self_check=False)
    assert code == 0, text
    bundle = tmp_path / "bundle"
    build_autograder(bundle, challenges_dir=dirs["challenges"], reference_dir=dirs["reference"])
    ag = tmp_path / "autograder"
    script = gradescope_layout(bundle, ag)
    (ag / "submission").mkdir(parents=True)
    cells = as_notebook(CORRECT) + [("raw", "scaling: {factor: 3, kind: b}\n", [TAG_ANSWERS])]
    write_nb(ag / "submission" / "lab.ipynb", cells)
    python = dependencies_only_python(tmp_path)
    [site] = list((tmp_path / "deps-only" / "lib").glob("python3*/site-packages"))
    for name in ("nbformat", "jupytext"):  # as on Gradescope, where setup.sh installs the grader's dependencies only
        (site / f"{name}.py").write_text("raise ImportError('not installed here')\n")
    assert subprocess.run([str(python), "-c", "import nbformat"], capture_output=True).returncode != 0
    env = clean_env(AUTOGRADER_ROOT=str(ag), VALIDATOR_PROFILE="quick", PYTHON=str(python))
    done = subprocess.run(["bash", str(script)], env=env, capture_output=True, text=True, timeout=600, cwd=str(ag))
    assert done.returncode == 0, done.stdout + done.stderr
    results = json.loads((ag / "results" / "results.json").read_text())
    assert results["score"] == sum(t["max_score"] for t in results["tests"]) > 0, results
