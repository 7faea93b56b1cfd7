from __future__ import annotations

import torch

from cs336_basics import functional
from cs336_basics.nn import Block, CausalSelfAttention, Embedding, Linear, RMSNorm, RoPE, SwiGLU


def run_linear(d_in, d_out, weights, in_features):
    return Linear(d_in, d_out, weight=weights)(in_features)


def run_embedding(vocab_size, d_model, weights, token_ids):
    return Embedding(vocab_size, d_model, weight=weights)(token_ids)


def run_swiglu(d_model, d_ff, w1_weight, w2_weight, w3_weight, in_features):
    return SwiGLU(d_model, d_ff, weights={"w1": w1_weight, "w2": w2_weight, "w3": w3_weight})(in_features)


def run_scaled_dot_product_attention(Q, K, V, mask=None):
    return functional.attention(Q, K, V, mask)


def _attention(d_model, num_heads, q, k, v, o, rope=None):
    attn = CausalSelfAttention(d_model, num_heads, rope=rope)
    attn.qkv.data = torch.cat([q, k, v], dim=0)
    attn.out.weight.data = o
    return attn


def run_multihead_self_attention(d_model, num_heads, q_proj_weight, k_proj_weight, v_proj_weight, o_proj_weight,
                                 in_features):
    return _attention(d_model, num_heads, q_proj_weight, k_proj_weight, v_proj_weight, o_proj_weight)(in_features)


def run_multihead_self_attention_with_rope(d_model, num_heads, max_seq_len, theta, q_proj_weight, k_proj_weight,
                                           v_proj_weight, o_proj_weight, in_features, token_positions=None):
    rope = RoPE(theta, d_model // num_heads, max_seq_len)
    attn = _attention(d_model, num_heads, q_proj_weight, k_proj_weight, v_proj_weight, o_proj_weight, rope)
    return attn(in_features, token_positions)


def run_rope(d_k, theta, max_seq_len, in_query_or_key, token_positions):
    return RoPE(theta, d_k, max_seq_len)(in_query_or_key, token_positions)


def run_transformer_block(d_model, num_heads, d_ff, max_seq_len, theta, weights, in_features):
    block = Block(d_model, num_heads, d_ff, rope=RoPE(theta, d_model // num_heads, max_seq_len))
    block.norm1.scale.data = weights["ln1.weight"]
    block.norm2.scale.data = weights["ln2.weight"]
    block.attention.qkv.data = torch.cat([weights[f"attn.{p}_proj.weight"] for p in "qkv"])
    block.attention.out.weight.data = weights["attn.output_proj.weight"]
    for w in ("w1", "w2", "w3"):
        getattr(block.mlp, w).weight.data = weights[f"ffn.{w}.weight"]
    return block(in_features)


def run_rmsnorm(d_model, eps, weights, in_features):
    norm = RMSNorm(d_model, eps)
    norm.scale.data = weights
    return norm(in_features)


def run_softmax(in_features, dim):
    return functional.softmax(in_features, dim)
