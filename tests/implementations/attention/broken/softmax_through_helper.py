"""The library softmax, reached through a helper the attention calls (imported under another name).

The source check follows the call from the entry into the helper; the run-time check sees the kernel.
"""

MAY_FAIL = ["no_library_softmax_source", "no_library_softmax_runtime"]
MESSAGES = {"no_library_softmax_source": "write attention yourself"}

import math

from torch.nn.functional import softmax as _normalise


def _probabilities(scores):
    return _normalise(scores, dim=-1)


def scaled_dot_product_attention(Q, K, V, mask=None):
    scores = Q @ K.transpose(-2, -1) / math.sqrt(Q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    return _probabilities(scores) @ V
