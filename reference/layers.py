"""Instructor reference for the LLM-layer challenges.

Every public name implements one contract of the challenge catalogue. The lines
between ``# BEGIN SOLUTION`` and ``# END SOLUTION`` are the solution: the stub
generator replaces each such region with ``raise NotImplementedError``, and the
rest of this file (signatures, annotations, docstrings) is what students see.
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
    # BEGIN SOLUTION
    if token_ids.dtype not in (torch.int64, torch.int32):
        raise TypeError(f"token_ids must be an int64 or int32 tensor, got {token_ids.dtype}")
    num_embeddings = weight.shape[0]
    if token_ids.device.type != "meta":
        invalid = (token_ids < 0) | (token_ids >= num_embeddings)
        if invalid.any():
            bad = int(token_ids[invalid].reshape(-1)[0])
            raise IndexError(
                f"token id {bad} is out of range: valid ids are [0, {num_embeddings})")
    rows = weight.index_select(0, token_ids.reshape(-1))
    return rows.reshape(*token_ids.shape, weight.shape[1])
    # END SOLUTION


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
        # BEGIN SOLUTION
        self.num_embeddings = num_embeddings
        self.embedding_dim = embedding_dim
        self.weight = nn.Parameter(
            torch.empty((num_embeddings, embedding_dim), device=device, dtype=dtype))
        nn.init.trunc_normal_(self.weight, mean=0.0, std=1.0, a=-3.0, b=3.0)
        # END SOLUTION

    def forward(self, token_ids: Int[Tensor, "..."]) -> Float[Tensor, "... embedding_dim"]:
        """Return ``weight[token_ids]`` with shape ``(..., embedding_dim)``.

        Repeated IDs accumulate gradient, rows never looked up get exactly zero
        gradient, the weights are not modified, and an ID outside
        ``[0, num_embeddings)`` raises ``IndexError``.
        """
        # BEGIN SOLUTION
        return embedding(token_ids, self.weight)
        # END SOLUTION


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
    # BEGIN SOLUTION
    if embedding_dim % 2 != 0:
        raise ValueError(
            f"embedding_dim must be even, got {embedding_dim}: each frequency "
            "fills a (sin, cos) pair of columns")
    positions = torch.arange(max_seq_len, dtype=torch.float64)
    exponents = torch.arange(0, embedding_dim, 2, dtype=torch.float64) / embedding_dim
    angles = positions[:, None] / base ** exponents[None, :]
    table = torch.stack((torch.sin(angles), torch.cos(angles)), dim=-1)
    return table.reshape(max_seq_len, embedding_dim).to(torch.get_default_dtype())
    # END SOLUTION


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
        # BEGIN SOLUTION
        self.embedding_dim = embedding_dim
        self.max_seq_len = max_seq_len
        self.base = base
        table = sinusoidal_positional_encoding(max_seq_len, embedding_dim, base)
        self.register_buffer("pe", table, persistent=False)
        # END SOLUTION

    def forward(
        self, x: Float[Tensor, "... seq_len embedding_dim"]
    ) -> Float[Tensor, "... seq_len embedding_dim"]:
        """Return ``x + PE[:seq_len]`` in the dtype of ``x``, for any ``seq_len``."""
        # BEGIN SOLUTION
        seq_len = x.shape[-2]
        if seq_len <= self.max_seq_len and self.pe.dtype == x.dtype:
            table = self.pe[:seq_len]
        else:
            table = sinusoidal_positional_encoding(seq_len, self.embedding_dim, self.base)
        return x + table.to(device=x.device, dtype=x.dtype)
        # END SOLUTION


class LearnedPositionalEmbedding(nn.Module):
    """A trainable vector per position, added to its input (GPT style).

    Holds one ``nn.Parameter`` named ``weight`` of shape
    ``(max_seq_len, embedding_dim)``, initialised normal with mean 0 and
    std 0.02, small next to the token vectors it is added to.
    """

    def __init__(self, max_seq_len: int, embedding_dim: int, device=None, dtype=None) -> None:
        """Create and initialise ``weight`` (``device="meta"`` must work)."""
        super().__init__()
        # BEGIN SOLUTION
        self.max_seq_len = max_seq_len
        self.embedding_dim = embedding_dim
        self.weight = nn.Parameter(
            torch.empty((max_seq_len, embedding_dim), device=device, dtype=dtype))
        nn.init.normal_(self.weight, mean=0.0, std=0.02)
        # END SOLUTION

    def forward(
        self, x: Float[Tensor, "... seq_len embedding_dim"]
    ) -> Float[Tensor, "... seq_len embedding_dim"]:
        """Return ``x + weight[:seq_len]``; only rows ``[0, seq_len)`` receive gradient.

        A learned table has no row for a position it was not built for, so
        ``seq_len > max_seq_len`` raises ``ValueError`` naming both numbers.
        """
        # BEGIN SOLUTION
        seq_len = x.shape[-2]
        if seq_len > self.max_seq_len:
            raise ValueError(
                f"sequence length {seq_len} exceeds max_seq_len {self.max_seq_len}")
        return x + self.weight[:seq_len]
        # END SOLUTION


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
        # BEGIN SOLUTION
        if positional not in ("learned", "sinusoidal", "none"):
            raise ValueError(
                f"positional must be 'learned', 'sinusoidal' or 'none', got {positional!r}")
        if not 0.0 <= dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {dropout}")
        if padding_idx is not None and not 0 <= padding_idx < vocab_size:
            raise ValueError(f"padding_idx must be in [0, {vocab_size}), got {padding_idx}")
        self.vocab_size = vocab_size
        self.embedding_dim = embedding_dim
        self.max_seq_len = max_seq_len
        self.dropout = dropout
        self.padding_idx = padding_idx
        self.positional = positional
        self.scale = math.sqrt(embedding_dim) if scale else 1.0

        self.token_embedding = Embedding(vocab_size, embedding_dim, device=device, dtype=dtype)
        nn.init.normal_(self.token_embedding.weight, mean=0.0, std=0.02)
        if padding_idx is not None:
            with torch.no_grad():
                self.token_embedding.weight[padding_idx].zero_()
        if positional == "learned":
            self.position_embedding = LearnedPositionalEmbedding(
                max_seq_len, embedding_dim, device=device, dtype=dtype)
        elif positional == "sinusoidal":
            table = sinusoidal_positional_encoding(max_seq_len, embedding_dim)
            self.register_buffer("pe", table.to(device=device, dtype=dtype), persistent=False)
        # END SOLUTION

    def forward(
        self, token_ids: Int[Tensor, "... seq_len"]
    ) -> Float[Tensor, "... seq_len embedding_dim"]:
        """Embed ``token_ids`` of shape ``(..., seq_len)`` into ``(..., seq_len, embedding_dim)``.

        Dropout is inverted dropout in training mode and the identity in eval
        mode. Learned positions raise ``ValueError`` for ``seq_len > max_seq_len``;
        sinusoidal positions extend past it.
        """
        # BEGIN SOLUTION
        if token_ids.dim() == 0:
            raise ValueError("token_ids must have shape (..., seq_len), got a 0-d tensor")
        tokens = embedding(token_ids, self.token_embedding.weight)
        if self.padding_idx is not None:
            is_padding = (token_ids == self.padding_idx).unsqueeze(-1)
            tokens = torch.where(is_padding, tokens.detach(), tokens)
        out = tokens * self.scale
        if self.positional == "learned":
            out = self.position_embedding(out)
        elif self.positional == "sinusoidal":
            seq_len = token_ids.shape[-1]
            if seq_len <= self.pe.shape[0]:
                table = self.pe[:seq_len]
            else:
                table = sinusoidal_positional_encoding(seq_len, self.embedding_dim)
            out = out + table.to(device=out.device, dtype=out.dtype)
        return nn.functional.dropout(out, p=self.dropout, training=self.training)
        # END SOLUTION


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
        # BEGIN SOLUTION
        self.vocab_size = vocab_size
        self.embedding_dim = embedding_dim
        self.embedding = Embedding(vocab_size, embedding_dim, device=device, dtype=dtype)
        self.lm_head = nn.Linear(embedding_dim, vocab_size, bias=False, device="meta", dtype=dtype)
        self.lm_head.weight = self.embedding.weight
        # END SOLUTION

    def forward(self, token_ids: Int[Tensor, "..."]) -> Float[Tensor, "... vocab_size"]:
        """Return logits ``embedding(token_ids) @ weight.T`` of shape ``(..., vocab_size)``.

        The shared weight receives the sum of the gradients of both uses.
        """
        # BEGIN SOLUTION
        hidden = self.embedding(token_ids)
        return self.lm_head(hidden)
        # END SOLUTION


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
        # BEGIN SOLUTION
        rows = embedding(token_ids, weight)
        ctx.save_for_backward(token_ids)
        ctx.num_embeddings = weight.shape[0]
        return rows
        # END SOLUTION

    @staticmethod
    def backward(
        ctx, grad_output: Float[Tensor, "... embedding_dim"]
    ) -> tuple[None, Float[Tensor, "num_embeddings embedding_dim"]]:
        """Return ``(None, grad_weight)``.

        ``grad_weight`` has shape ``(num_embeddings, embedding_dim)``; token IDs
        are not differentiable, hence ``None``.
        """
        # BEGIN SOLUTION
        (token_ids,) = ctx.saved_tensors
        if not ctx.needs_input_grad[1]:
            return None, None
        embedding_dim = grad_output.shape[-1]
        grad_weight = grad_output.new_zeros((ctx.num_embeddings, embedding_dim))
        grad_weight.index_add_(0, token_ids.reshape(-1), grad_output.reshape(-1, embedding_dim))
        return None, grad_weight
        # END SOLUTION


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
        # BEGIN SOLUTION
        self.num_embeddings = num_embeddings
        self.embedding_dim = embedding_dim
        self.weight = nn.Parameter(
            torch.empty((num_embeddings, embedding_dim), device=device, dtype=dtype))
        nn.init.xavier_uniform_(self.weight)
        # END SOLUTION

    def forward(self, token_ids: Int[Tensor, "..."]) -> Float[Tensor, "... embedding_dim"]:
        """Return ``weight[token_ids]``, as ``Embedding.forward`` does."""
        # BEGIN SOLUTION
        return embedding(token_ids, self.weight)
        # END SOLUTION


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
        # BEGIN SOLUTION
        self.in_features = in_features
        self.out_features = out_features
        self.weight = nn.Parameter(torch.empty((out_features, in_features), device=device, dtype=dtype))
        std = math.sqrt(2.0 / (in_features + out_features))
        nn.init.trunc_normal_(self.weight, mean=0.0, std=std, a=-3.0 * std, b=3.0 * std)
        # END SOLUTION

    def forward(self, x: Float[Tensor, "... in_features"]) -> Float[Tensor, "... out_features"]:
        """Return ``x @ weight.T`` of shape ``(..., out_features)``, in the weight's dtype."""
        # BEGIN SOLUTION
        return torch.einsum("...i,oi->...o", x, self.weight)
        # END SOLUTION


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
        # BEGIN SOLUTION
        self.d_model = d_model
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d_model, device=device, dtype=dtype))
        # END SOLUTION

    def forward(self, x: Float[Tensor, "... d_model"]) -> Float[Tensor, "... d_model"]:
        """Normalise ``x`` over its last axis; the output has ``x``'s shape and dtype."""
        # BEGIN SOLUTION
        in_dtype = x.dtype
        wide = x.to(torch.promote_types(in_dtype, torch.float32))
        inv_rms = torch.rsqrt(wide.pow(2).mean(dim=-1, keepdim=True) + self.eps)
        return (wide * inv_rms * self.weight).to(in_dtype)
        # END SOLUTION


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
        # BEGIN SOLUTION
        self.w1 = Linear(d_model, d_ff, device=device, dtype=dtype)
        self.w2 = Linear(d_ff, d_model, device=device, dtype=dtype)
        self.w3 = Linear(d_model, d_ff, device=device, dtype=dtype)
        # END SOLUTION

    def forward(self, x: Float[Tensor, "... d_model"]) -> Float[Tensor, "... d_model"]:
        """Return ``w2(silu(w1(x)) * w3(x))`` of shape ``(..., d_model)``."""
        # BEGIN SOLUTION
        gate = self.w1(x)
        return self.w2(gate * torch.sigmoid(gate) * self.w3(x))
        # END SOLUTION


def softmax(x: Float[Tensor, "..."], dim: int) -> Float[Tensor, "..."]:
    """``exp(x) / sum(exp(x))`` along ``dim``, stable for inputs of any magnitude.

    The output has the shape and dtype of ``x``; a bfloat16 or float16 input is
    computed in float32 and the result cast back. Subtracting the maximum along
    ``dim`` first leaves the result unchanged and keeps every exponent <= 0, so
    nothing overflows (no inf or NaN at |x| = 1e4).
    """
    # BEGIN SOLUTION
    wide = x.to(torch.promote_types(x.dtype, torch.float32))
    shifted = wide - wide.amax(dim=dim, keepdim=True)
    exps = torch.exp(shifted)
    return (exps / exps.sum(dim=dim, keepdim=True)).to(x.dtype)
    # END SOLUTION


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
        # BEGIN SOLUTION
        if d_k % 2:
            raise ValueError(f"d_k must be even to rotate pairs, got {d_k}")
        exponents = torch.arange(0, d_k, 2, device=device, dtype=torch.float64) / d_k
        inv_freq = theta ** (-exponents)
        positions = torch.arange(max_seq_len, device=device, dtype=torch.float64)
        angles = positions[:, None] * inv_freq[None, :]
        table_dtype = torch.get_default_dtype()
        self.register_buffer("cos", angles.cos().to(table_dtype), persistent=False)
        self.register_buffer("sin", angles.sin().to(table_dtype), persistent=False)
        # END SOLUTION

    def forward(self, x: Float[Tensor, "... seq_len d_k"],
                token_positions: Int[Tensor, "... seq_len"]) -> Float[Tensor, "... seq_len d_k"]:
        """Rotate each adjacent pair of ``x`` by the angle of its token's position.

        ``token_positions`` holds integer positions in ``[0, max_seq_len)`` and broadcasts
        against ``x``'s leading dims; the result has ``x``'s shape and dtype.
        """
        # BEGIN SOLUTION
        cos = self.cos[token_positions]
        sin = self.sin[token_positions]
        work = x.to(torch.promote_types(x.dtype, cos.dtype))
        even, odd = work[..., 0::2], work[..., 1::2]
        rotated = torch.stack((even * cos - odd * sin, even * sin + odd * cos), dim=-1)
        return rotated.flatten(-2).to(x.dtype)
        # END SOLUTION


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
    # BEGIN SOLUTION
    d_k = Q.shape[-1]
    scores = (Q @ K.transpose(-2, -1)) / math.sqrt(d_k)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    return softmax(scores, dim=-1) @ V
    # END SOLUTION


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
        # BEGIN SOLUTION
        if d_model % num_heads:
            raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
        self.num_heads = num_heads
        self.d_head = d_model // num_heads
        self.q_proj = Linear(d_model, d_model, device=device, dtype=dtype)
        self.k_proj = Linear(d_model, d_model, device=device, dtype=dtype)
        self.v_proj = Linear(d_model, d_model, device=device, dtype=dtype)
        self.output_proj = Linear(d_model, d_model, device=device, dtype=dtype)
        self.rope = (RotaryPositionalEmbedding(theta, self.d_head, max_seq_len, device=device)
                     if theta is not None else None)
        # END SOLUTION

    def forward(self, x: Float[Tensor, "... seq_len d_model"],
                token_positions: Int[Tensor, "... seq_len"] | None = None) -> Float[Tensor, "... seq_len d_model"]:
        """Causal self-attention of ``x``; ``token_positions`` defaults to ``0 .. seq_len-1``."""
        # BEGIN SOLUTION
        *lead, seq_len, d_model = x.shape

        def heads(t):
            return t.reshape(*lead, seq_len, self.num_heads, self.d_head).transpose(-3, -2)

        q, k, v = heads(self.q_proj(x)), heads(self.k_proj(x)), heads(self.v_proj(x))
        if self.rope is not None:
            if token_positions is None:
                token_positions = torch.arange(seq_len, device=x.device)
            per_head = token_positions.unsqueeze(-2)  # (..., 1, seq_len): the same positions for every head
            q, k = self.rope(q, per_head), self.rope(k, per_head)
        causal = torch.ones(seq_len, seq_len, dtype=torch.bool, device=x.device).tril()
        out = scaled_dot_product_attention(q, k, v, causal)
        return self.output_proj(out.transpose(-3, -2).reshape(*lead, seq_len, d_model))
        # END SOLUTION


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
        # BEGIN SOLUTION
        self.ln1 = RMSNorm(d_model, device=device, dtype=dtype)
        self.attn = MultiHeadSelfAttention(d_model, num_heads, max_seq_len, theta, device=device, dtype=dtype)
        self.ln2 = RMSNorm(d_model, device=device, dtype=dtype)
        self.ffn = SwiGLU(d_model, d_ff, device=device, dtype=dtype)
        # END SOLUTION

    def forward(self, x: Float[Tensor, "... seq_len d_model"]) -> Float[Tensor, "... seq_len d_model"]:
        """Apply the block; RoPE uses the positions ``0 .. seq_len-1``."""
        # BEGIN SOLUTION
        y = x + self.attn(self.ln1(x))
        return y + self.ffn(self.ln2(y))
        # END SOLUTION
