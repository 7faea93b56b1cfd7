"""A functional embedding that logs to Weights & Biases on every call."""

import wandb


def embedding_logged(token_ids, weight):
    wandb.log({"lookups": token_ids.numel()})
    return weight[token_ids]
