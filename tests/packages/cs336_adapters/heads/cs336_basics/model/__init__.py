from cs336_basics.model.attention import Attention, MultiHead, Rotary
from cs336_basics.model.basic import Linear, TokenEmbedding
from cs336_basics.model.block import Block, FeedForward, Norm

__all__ = ["Attention", "MultiHead", "Rotary", "Linear", "TokenEmbedding", "Block", "FeedForward", "Norm"]
