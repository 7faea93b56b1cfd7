"""Your implementations of the LLM-layer challenges.

Replace each `raise NotImplementedError` with your code. Keep the names,
signatures and parameter names: the grader imports this file and calls them
as the docstrings describe. Each challenge is explained in challenges/<id>.md.
"""

import math

import torch
from jaxtyping import Bool, Float, Int
from torch import Tensor, nn


def embedding(
    token_ids: Int[Tensor, "..."],
    weight: Float[Tensor, "num_embeddings embedding_dim"],
) -> Float[Tensor, "... embedding_dim"]:
    """Look up the rows of ``weight`` named by ``token_ids`` (stateless).

    ``token_ids`` is an int64 or int32 tensor of any shape ``(...)``, 0-d and
    zero-size included; the result has shape ``(..., embedding_dim)``, the dtype
    of ``weight``, and is differentiable with respect to ``weight``. An ID
    outside ``[0, num_embeddings)`` raises ``IndexError`` naming the ID, because
    a negative ID would otherwise silently select a row from the end.
    Library embedding layers are not allowed: this is the lookup itself.
    """
    raise NotImplementedError(
        "embedding: see challenges/embedding_functional.md")


class Embedding(nn.Module):
    """A learned lookup table mapping token IDs to vectors.

    Holds one ``nn.Parameter`` named ``weight`` of shape
    ``(num_embeddings, embedding_dim)``, created with the given ``device`` and
    ``dtype`` and initialised from a normal distribution with mean 0 and
    std 1, truncated to [-3, 3], so that every row starts at unit scale with no
    outliers.
    """

    def __init__(self, num_embeddings: int, embedding_dim: int, device=None, dtype=None) -> None:
        """Create and initialise ``weight`` (``device="meta"`` must work)."""
        super().__init__()
        raise NotImplementedError(
            "Embedding.__init__: see challenges/token_embedding.md")

    def forward(self, token_ids: Int[Tensor, "..."]) -> Float[Tensor, "... embedding_dim"]:
        """Return ``weight[token_ids]`` with shape ``(..., embedding_dim)``.

        Repeated IDs accumulate gradient, rows never looked up get exactly zero
        gradient, the weights are not modified, and an ID outside
        ``[0, num_embeddings)`` raises ``IndexError``.
        """
        raise NotImplementedError(
            "Embedding.forward: see challenges/token_embedding.md")


def sinusoidal_positional_encoding(
    max_seq_len: int, embedding_dim: int, base: float = 10000.0
) -> Float[Tensor, "max_seq_len embedding_dim"]:
    """The fixed sinusoidal position table of "Attention Is All You Need".

    ``PE[p, 2i] = sin(p / base^(2i/d))`` and ``PE[p, 2i+1] = cos(p / base^(2i/d))``
    with ``d = embedding_dim``: sine and cosine of the same frequency sit side by
    side, so row 0 is ``[0, 1, 0, 1, ...]``. The result has the default float
    dtype and does not require gradient. An odd ``embedding_dim`` raises
    ``ValueError``, because every frequency fills a (sin, cos) pair of columns.
    """
    raise NotImplementedError(
        "sinusoidal_positional_encoding: see challenges/sinusoidal_positional_encoding.md")


class SinusoidalPositionalEncoding(nn.Module):
    """Adds the fixed sinusoidal position table to its input.

    Has no trainable parameters. Because the table is a formula, inputs longer
    than ``max_seq_len`` still work: positions past it are computed as well.
    """

    def __init__(self, embedding_dim: int, max_seq_len: int = 2048, base: float = 10000.0) -> None:
        """Prepare the table for the first ``max_seq_len`` positions.

        An odd ``embedding_dim`` raises ``ValueError``.
        """
        super().__init__()
        raise NotImplementedError(
            "SinusoidalPositionalEncoding.__init__: see challenges/sinusoidal_positional_encoding.md")

    def forward(
        self, x: Float[Tensor, "... seq_len embedding_dim"]
    ) -> Float[Tensor, "... seq_len embedding_dim"]:
        """Return ``x + PE[:seq_len]`` in the dtype of ``x``, for any ``seq_len``."""
        raise NotImplementedError(
            "SinusoidalPositionalEncoding.forward: see challenges/sinusoidal_positional_encoding.md")


class LearnedPositionalEmbedding(nn.Module):
    """A trainable vector per position, added to its input (GPT style).

    Holds one ``nn.Parameter`` named ``weight`` of shape
    ``(max_seq_len, embedding_dim)``, initialised normal with mean 0 and
    std 0.02, small next to the token vectors it is added to.
    """

    def __init__(self, max_seq_len: int, embedding_dim: int, device=None, dtype=None) -> None:
        """Create and initialise ``weight`` (``device="meta"`` must work)."""
        super().__init__()
        raise NotImplementedError(
            "LearnedPositionalEmbedding.__init__: see challenges/learned_positional_embedding.md")

    def forward(
        self, x: Float[Tensor, "... seq_len embedding_dim"]
    ) -> Float[Tensor, "... seq_len embedding_dim"]:
        """Return ``x + weight[:seq_len]``; only rows ``[0, seq_len)`` receive gradient.

        A learned table has no row for a position it was not built for, so
        ``seq_len > max_seq_len`` raises ``ValueError`` naming both numbers.
        """
        raise NotImplementedError(
            "LearnedPositionalEmbedding.forward: see challenges/learned_positional_embedding.md")


class TransformerEmbedding(nn.Module):
    """Token embedding, optional scaling, positional information and dropout in one layer.

    ``forward`` computes ``dropout(s * token_embedding.weight[token_ids] + P[:seq_len])``
    with ``s = sqrt(embedding_dim)`` when ``scale`` is true (else 1) and ``P``
    the positional table: learned (``position_embedding.weight``), sinusoidal
    (fixed, no parameters) or ``"none"`` (zeros). Token and learned position
    tables start normal with mean 0 and std 0.02. ``padding_idx``, when given,
    names a row that starts as zeros and never receives gradient.
    ``scale=False, positional="learned"`` is the GPT-2 embedding.
    """

    def __init__(
        self,
        vocab_size: int,
        embedding_dim: int,
        max_seq_len: int,
        dropout: float = 0.0,
        padding_idx: int | None = None,
        positional: str = "learned",
        scale: bool = True,
        device=None,
        dtype=None,
    ) -> None:
        """Build ``token_embedding`` and, for learned positions, ``position_embedding``.

        Raises ``ValueError`` for a ``positional`` other than ``"learned"``,
        ``"sinusoidal"`` or ``"none"``, a ``dropout`` outside ``[0, 1)`` and a
        ``padding_idx`` outside ``[0, vocab_size)``.
        """
        super().__init__()
        raise NotImplementedError(
            "TransformerEmbedding.__init__: see challenges/transformer_embedding.md")

    def forward(
        self, token_ids: Int[Tensor, "... seq_len"]
    ) -> Float[Tensor, "... seq_len embedding_dim"]:
        """Embed ``token_ids`` of shape ``(..., seq_len)`` into ``(..., seq_len, embedding_dim)``.

        Dropout is inverted dropout in training mode and the identity in eval
        mode. Learned positions raise ``ValueError`` for ``seq_len > max_seq_len``;
        sinusoidal positions extend past it.
        """
        raise NotImplementedError(
            "TransformerEmbedding.forward: see challenges/transformer_embedding.md")


class TiedEmbeddingLM(nn.Module):
    """Input embedding and output projection sharing one weight matrix (weight tying).

    ``embedding.weight`` has shape ``(vocab_size, embedding_dim)`` and is
    initialised like ``Embedding`` (truncated normal, std 1, cut at [-3, 3]);
    ``lm_head.weight`` is the very same ``nn.Parameter`` object, so the model
    has exactly ``vocab_size * embedding_dim`` parameters.
    """

    def __init__(self, vocab_size: int, embedding_dim: int, device=None, dtype=None) -> None:
        """Build the submodules ``embedding`` and ``lm_head`` around one shared weight."""
        super().__init__()
        raise NotImplementedError(
            "TiedEmbeddingLM.__init__: see challenges/tied_lm_head.md")

    def forward(self, token_ids: Int[Tensor, "..."]) -> Float[Tensor, "... vocab_size"]:
        """Return logits ``embedding(token_ids) @ weight.T`` of shape ``(..., vocab_size)``.

        The shared weight receives the sum of the gradients of both uses.
        """
        raise NotImplementedError(
            "TiedEmbeddingLM.forward: see challenges/tied_lm_head.md")


class EmbeddingFunction(torch.autograd.Function):
    """The lookup as an autograd Function with a hand-written backward.

    Used as ``EmbeddingFunction.apply(token_ids, weight)``. ``forward`` returns
    ``weight[token_ids]``; ``backward`` returns ``None`` for ``token_ids`` and,
    for ``weight``, the upstream gradient summed into the looked-up rows
    (repeated IDs accumulate, other rows are zero). Memory must grow with the
    number of tokens, not with tokens x vocabulary: no one-hot matrix.
    """

    @staticmethod
    def forward(
        ctx,
        token_ids: Int[Tensor, "..."],
        weight: Float[Tensor, "num_embeddings embedding_dim"],
    ) -> Float[Tensor, "... embedding_dim"]:
        """Return the looked-up rows and keep what ``backward`` needs."""
        raise NotImplementedError(
            "EmbeddingFunction.forward: see challenges/embedding_backward.md")

    @staticmethod
    def backward(
        ctx, grad_output: Float[Tensor, "... embedding_dim"]
    ) -> tuple[None, Float[Tensor, "num_embeddings embedding_dim"]]:
        """Return ``(None, grad_weight)``.

        ``grad_weight`` has shape ``(num_embeddings, embedding_dim)``; token IDs
        are not differentiable, hence ``None``.
        """
        raise NotImplementedError(
            "EmbeddingFunction.backward: see challenges/embedding_backward.md")


class XavierEmbedding(nn.Module):
    """The token embedding of the ``token_embedding_xavier`` variant: Xavier-uniform initialisation.

    Holds one ``nn.Parameter`` named ``weight`` of shape
    ``(num_embeddings, embedding_dim)``, created with the given ``device`` and
    ``dtype`` and initialised uniform on ``[-a, a]`` with
    ``a = sqrt(6 / (num_embeddings + embedding_dim))`` (``nn.init.xavier_uniform_``).
    """

    def __init__(self, num_embeddings: int, embedding_dim: int, device=None, dtype=None) -> None:
        """Create and initialise ``weight`` (``device="meta"`` must work)."""
        super().__init__()
        raise NotImplementedError(
            "XavierEmbedding.__init__: see challenges/token_embedding_xavier.md")

    def forward(self, token_ids: Int[Tensor, "..."]) -> Float[Tensor, "... embedding_dim"]:
        """Return ``weight[token_ids]``, as ``Embedding.forward`` does."""
        raise NotImplementedError(
            "XavierEmbedding.forward: see challenges/token_embedding_xavier.md")


class Linear(nn.Module):
    """A linear map without bias, ``y = x W^T``, as in the CS336 assignment.

    Holds one ``nn.Parameter`` named ``weight`` of shape ``(out_features, in_features)``,
    created with the given ``device`` and ``dtype`` and initialised from a normal
    distribution with mean 0 and variance ``2 / (in_features + out_features)``,
    truncated at three standard deviations.
    """

    def __init__(self, in_features: int, out_features: int, device=None, dtype=None) -> None:
        """Create and initialise ``weight`` (``device="meta"`` must work)."""
        super().__init__()
        raise NotImplementedError("Linear.__init__: see challenges/linear.md")

    def forward(self, x: Float[Tensor, "... in_features"]) -> Float[Tensor, "... out_features"]:
        """Return ``x @ weight.T`` of shape ``(..., out_features)``, in the weight's dtype."""
        raise NotImplementedError("Linear.forward: see challenges/linear.md")


class RMSNorm(nn.Module):
    """Root-mean-square layer normalisation with a learned gain.

    ``y = x / sqrt(mean(x^2 over the last axis) + eps) * weight``. Holds one
    ``nn.Parameter`` named ``weight`` of shape ``(d_model,)``, initialised to ones.
    The statistics are computed in float32 (or wider): a bfloat16 or float16 input is
    upcast first, and the result is cast back to the input's dtype.
    """

    def __init__(self, d_model: int, eps: float = 1e-5, device=None, dtype=None) -> None:
        """Create ``weight`` (ones) and remember ``eps``."""
        super().__init__()
        raise NotImplementedError(
            "RMSNorm.__init__: see challenges/rms_norm.md")

    def forward(self, x: Float[Tensor, "... d_model"]) -> Float[Tensor, "... d_model"]:
        """Normalise ``x`` over its last axis; the output has ``x``'s shape and dtype."""
        raise NotImplementedError(
            "RMSNorm.forward: see challenges/rms_norm.md")


class SwiGLU(nn.Module):
    """The SwiGLU feed-forward network of LLaMA: ``w2(silu(w1 x) * w3 x)``.

    Holds three bias-free linear maps ``w1`` (``d_model -> d_ff``), ``w3``
    (``d_model -> d_ff``) and ``w2`` (``d_ff -> d_model``), whose weights are the
    parameters ``w1.weight (d_ff, d_model)``, ``w3.weight (d_ff, d_model)`` and
    ``w2.weight (d_model, d_ff)``. ``silu(z) = z * sigmoid(z)``, written by hand.
    """

    def __init__(self, d_model: int, d_ff: int, device=None, dtype=None) -> None:
        """Create ``w1``, ``w2`` and ``w3`` (each initialised like ``Linear``)."""
        super().__init__()
        raise NotImplementedError("SwiGLU.__init__: see challenges/swiglu.md")

    def forward(self, x: Float[Tensor, "... d_model"]) -> Float[Tensor, "... d_model"]:
        """Return ``w2(silu(w1(x)) * w3(x))`` of shape ``(..., d_model)``."""
        raise NotImplementedError("SwiGLU.forward: see challenges/swiglu.md")


def softmax(x: Float[Tensor, "..."], dim: int) -> Float[Tensor, "..."]:
    """``exp(x) / sum(exp(x))`` along ``dim``, stable for inputs of any magnitude.

    The output has the shape and dtype of ``x``; a bfloat16 or float16 input is
    computed in float32 and the result cast back. Subtracting the maximum along
    ``dim`` first leaves the result unchanged and keeps every exponent <= 0, so
    nothing overflows (no inf or NaN at |x| = 1e4).
    """
    raise NotImplementedError("softmax: see challenges/softmax.md")


# =============================================================================================
# The transformer (issue 11, part B): rotary positions, attention, multi-head self-attention and
# the pre-norm block, built on Linear, RMSNorm, SwiGLU and softmax above.
# =============================================================================================


class RotaryPositionalEmbedding(nn.Module):
    """Rotary positional embedding (RoPE) for vectors of size ``d_k`` (even).

    The pair ``(x[2i], x[2i+1])`` of the vector at position ``p`` is rotated by the angle
    ``p * theta^(-2i / d_k)``, for ``i = 0 .. d_k/2 - 1``. The cosines and sines for the
    positions ``0 .. max_seq_len - 1`` are computed once and kept in buffers registered with
    ``persistent=False`` (they are not learned and not saved in ``state_dict``); there are
    no parameters. ``forward`` keeps the input's dtype.
    """

    def __init__(self, theta: float, d_k: int, max_seq_len: int, device=None) -> None:
        """Build the cos/sin tables of shape ``(max_seq_len, d_k // 2)``."""
        super().__init__()
        raise NotImplementedError(
            "RotaryPositionalEmbedding.__init__: see challenges/rope.md")

    def forward(self, x: Float[Tensor, "... seq_len d_k"],
                token_positions: Int[Tensor, "... seq_len"]) -> Float[Tensor, "... seq_len d_k"]:
        """Rotate each adjacent pair of ``x`` by the angle of its token's position.

        ``token_positions`` holds integer positions in ``[0, max_seq_len)`` and broadcasts
        against ``x``'s leading dims; the result has ``x``'s shape and dtype.
        """
        raise NotImplementedError(
            "RotaryPositionalEmbedding.forward: see challenges/rope.md")


def scaled_dot_product_attention(
    Q: Float[Tensor, "... queries d_k"],
    K: Float[Tensor, "... keys d_k"],
    V: Float[Tensor, "... keys d_v"],
    mask: Bool[Tensor, "... queries keys"] | None = None,
) -> Float[Tensor, "... queries d_v"]:
    """``softmax(Q K^T / sqrt(d_k)) V`` over any leading batch dims.

    ``mask`` (boolean, broadcastable to ``(..., queries, keys)``) says where a query *may*
    attend (True); masked scores get probability exactly zero. The softmax is your own
    (no library softmax or attention kernel).
    """
    raise NotImplementedError(
        "scaled_dot_product_attention: see challenges/attention.md")


class MultiHeadSelfAttention(nn.Module):
    """Causal multi-head self-attention with ``q_proj``, ``k_proj``, ``v_proj`` and ``output_proj``.

    Each projection is a ``Linear(d_model, d_model)`` (weight ``(d_model, d_model)``, no bias).
    The queries, keys and values are split into ``num_heads`` heads of size
    ``d_model // num_heads`` (head ``h`` is the slice ``[h*d_head, (h+1)*d_head)`` of the
    projection), each head attends causally (position i sees positions j <= i), the heads
    are concatenated in order and projected by ``output_proj``. With ``theta`` given, RoPE
    (``RotaryPositionalEmbedding(theta, d_head, max_seq_len)``) rotates the queries and keys
    of every head (not the values) by their token positions.
    """

    def __init__(self, d_model: int, num_heads: int, max_seq_len: int | None = None,
                 theta: float | None = None, device=None, dtype=None) -> None:
        """Create the four projections, and the RoPE tables when ``theta`` is given."""
        super().__init__()
        raise NotImplementedError(
            "MultiHeadSelfAttention.__init__: see challenges/multihead_self_attention.md")

    def forward(self, x: Float[Tensor, "... seq_len d_model"],
                token_positions: Int[Tensor, "... seq_len"] | None = None) -> Float[Tensor, "... seq_len d_model"]:
        """Causal self-attention of ``x``; ``token_positions`` defaults to ``0 .. seq_len-1``."""
        raise NotImplementedError(
            "MultiHeadSelfAttention.forward: see challenges/multihead_self_attention.md")


class TransformerBlock(nn.Module):
    """The pre-norm transformer block: ``y = x + attn(ln1(x))``, then ``y + ffn(ln2(y))``.

    ``ln1`` and ``ln2`` are ``RMSNorm(d_model)``, ``attn`` is
    ``MultiHeadSelfAttention(d_model, num_heads, max_seq_len, theta)`` (causal, with RoPE),
    ``ffn`` is ``SwiGLU(d_model, d_ff)``, all built from your own classes.
    """

    def __init__(self, d_model: int, num_heads: int, d_ff: int, max_seq_len: int, theta: float,
                 device=None, dtype=None) -> None:
        """Create ``ln1``, ``attn``, ``ln2`` and ``ffn``."""
        super().__init__()
        raise NotImplementedError(
            "TransformerBlock.__init__: see challenges/transformer_block.md")

    def forward(self, x: Float[Tensor, "... seq_len d_model"]) -> Float[Tensor, "... seq_len d_model"]:
        """Apply the block; RoPE uses the positions ``0 .. seq_len-1``."""
        raise NotImplementedError(
            "TransformerBlock.forward: see challenges/transformer_block.md")
