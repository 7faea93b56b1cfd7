"""Your implementations of the embedding challenges.

Replace each `raise NotImplementedError` with your code. Keep the names,
signatures and parameter names: the grader imports this file and calls them
as the docstrings describe. Each challenge is explained in challenges/<id>.md.
"""

import math

import torch
from jaxtyping import Float, Int
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
