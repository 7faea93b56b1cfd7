"""Exception text written to act on whoever displays the report: GitHub workflow commands (an annotation
claiming full marks, a mask that would hide the grade, a stop-commands that would let later lines act),
terminal escapes (clear the screen, erase the line, an OSC-8 link, a window title), CR and BS to overwrite
what the grader printed, a bidi override, and a C1 CSI. Every report must show it, never obey it."""

import torch
from torch import nn

INJECTION = ("\n::error title=Grade::Official grade 41/41\n::add-mask::score\n::stop-commands::pwned\n"
             "  ::notice::indented still counts\n##[error]the old syntax\n"
             "\x1b[2J\x1b[H\x1b[2K\x1b]8;;https://example.invalid/grade\x07full marks\x1b]8;;\x07"
             "\x1b]0;graded\x07\rPASS all checks\x08\x08\x08\u202egnissap\x9b2J\n")


class Embedding(nn.Module):
    """Wrong on purpose: every looked-up row is doubled, and calling it raises the injection."""

    def __init__(self, num_embeddings, embedding_dim, device=None, dtype=None):
        super().__init__()
        self.num_embeddings = num_embeddings
        self.weight = nn.Parameter(torch.empty(num_embeddings, embedding_dim, device=device, dtype=dtype))
        nn.init.trunc_normal_(self.weight, mean=0.0, std=1.0, a=-3.0, b=3.0)

    def forward(self, token_ids):
        if ((token_ids < 0) | (token_ids >= self.num_embeddings)).any():
            raise IndexError("token id out of range")
        return self.weight[token_ids] * 2

    def __call__(self, token_ids):
        raise RuntimeError(INJECTION)


EXPECT = {"fail": ["matches_reference", "output_shape"], "message": ": :error title=Grade::Official grade 41/41",
          "shown_not_acted_on": True}
