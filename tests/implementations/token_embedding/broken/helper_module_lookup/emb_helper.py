"""The helper module: the forbidden call lives here."""

import torch.nn.functional as F


def lookup(token_ids, weight):
    return F.embedding(token_ids, weight)
