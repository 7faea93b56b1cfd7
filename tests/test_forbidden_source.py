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
