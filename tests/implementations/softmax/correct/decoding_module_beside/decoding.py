import torch


def sample(logits, temperature=1.0):
    return torch.multinomial(torch.softmax(logits / temperature, dim=-1), num_samples=1)
