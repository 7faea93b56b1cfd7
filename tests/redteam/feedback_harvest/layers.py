"""Harvest the answer key from the feedback: answer every question wrong, then resubmit whatever the
feedback says (a letter after "the answer is", every number). The red team took question points from
6/75 to 73/75 that way when a wrong answer's feedback said "you chose a, the answer is b". Under the
default answer policy the feedback gives the hint, never the answer, so the second round (built by
tests/test_redteam.py from this submission's results.json) must gain nothing. The code is correct."""

import torch
from torch import nn


class Embedding(nn.Module):
    def __init__(self, num_embeddings, embedding_dim, device=None, dtype=None):
        super().__init__()
        self.num_embeddings = num_embeddings
        self.weight = nn.Parameter(torch.empty(num_embeddings, embedding_dim, device=device, dtype=dtype))
        nn.init.trunc_normal_(self.weight, mean=0.0, std=1.0, a=-3.0, b=3.0)

    def forward(self, token_ids):
        if ((token_ids < 0) | (token_ids >= self.num_embeddings)).any():
            raise IndexError("token id out of range")
        return self.weight[token_ids]


EXPECT = {"code_passes": True, "fail": ["question_gpt2_token_table_params", "question_llama7b_table_fp32_mib",
                                        "question_truncation_shrinks_std", "question_negative_id_wraps",
                                        "question_trunc_normal_cutoffs_absolute"],
          "message": "hint: ", "harvest": True}
