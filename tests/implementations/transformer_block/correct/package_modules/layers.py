"""The submission's entry module re-exports classes defined in helper modules."""

from block import TransformerBlock  # noqa: F401
from sublayers import Linear, MultiHeadSelfAttention, RMSNorm, RotaryPositionalEmbedding, SwiGLU, softmax  # noqa: F401
