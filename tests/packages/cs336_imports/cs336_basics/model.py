"""Layers whose module reads a JSON file next to it and annotates with numpy.typing (evaluated at import)."""

import json
from pathlib import Path

import numpy as np
import numpy.typing as npt
import torch
from jaxtyping import Float, Int
from torch import nn
from wandb import init  # noqa: F401

CONFIG = json.loads((Path(__file__).parent / "config.json").read_text())


def to_tensor(array: npt.NDArray[np.float32], dtype: np.dtype | None = None) -> torch.Tensor:
    """Unused by the layers: its annotations are evaluated when the module is imported."""
    return torch.as_tensor(array)


class TokenEmbedding(nn.Module):
    """A token embedding with the handout's names; its init comes from config.json."""

    def __init__(self, num_embeddings, embedding_dim, device=None, dtype=None):
        super().__init__()
        self.weight = nn.Parameter(torch.empty((num_embeddings, embedding_dim), device=device, dtype=dtype))
        std, cut = CONFIG["init_std"], CONFIG["truncate_at"]
        nn.init.trunc_normal_(self.weight, mean=0.0, std=std, a=-cut * std, b=cut * std)

    def forward(self, token_ids: Int[torch.Tensor, "..."]) -> Float[torch.Tensor, "... d"]:
        if isinstance(token_ids, np.ndarray):  # False: nothing is a numpy array without numpy
            token_ids = torch.as_tensor(token_ids)
        return self.weight[token_ids]
