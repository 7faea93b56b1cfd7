"""The course's adapters, filled in: each builds the student's module, loads the weights, calls it."""
from __future__ import annotations

import torch

from cs336_basics import layers


def run_linear(d_in, d_out, weights, in_features):
    linear = layers.Linear(d_in, d_out)
    linear.load_state_dict({"W": weights})
    return linear.forward(in_features)


def run_embedding(vocab_size, d_model, weights, token_ids):
    emb = layers.Embedding(vocab_size, d_model)
    emb.load_state_dict({"table": weights})
    return emb(token_ids)


def run_swiglu(d_model, d_ff, w1_weight, w2_weight, w3_weight, in_features):
    ffn = layers.SwiGLU(d_model, d_ff)
    ffn.load_state_dict({"w1.W": w1_weight, "w2.W": w2_weight, "w3.W": w3_weight})
    return ffn(in_features)


def run_scaled_dot_product_attention(Q, K, V, mask=None):
    return layers.scaled_dot_product_attention(Q, K, V, mask)


def run_multihead_self_attention(d_model, num_heads, q_proj_weight, k_proj_weight, v_proj_weight, o_proj_weight,
                                 in_features):
    mha = layers.MultiHeadSelfAttention(d_model, num_heads)
    mha.load_state_dict({"q_proj.W": q_proj_weight, "k_proj.W": k_proj_weight, "v_proj.W": v_proj_weight,
                         "output_proj.W": o_proj_weight})
    return mha(in_features)


def run_multihead_self_attention_with_rope(d_model, num_heads, max_seq_len, theta, q_proj_weight, k_proj_weight,
                                           v_proj_weight, o_proj_weight, in_features, token_positions=None):
    mha = layers.MultiHeadSelfAttention(d_model, num_heads, max_seq_len, theta)
    mha.load_state_dict({"q_proj.W": q_proj_weight, "k_proj.W": k_proj_weight, "v_proj.W": v_proj_weight,
                         "output_proj.W": o_proj_weight})
    return mha(in_features, token_positions)


def run_rope(d_k, theta, max_seq_len, in_query_or_key, token_positions):
    return layers.RotaryPositionalEmbedding(theta, d_k, max_seq_len)(in_query_or_key, token_positions)


def run_transformer_block(d_model, num_heads, d_ff, max_seq_len, theta, weights, in_features):
    block = layers.TransformerBlock(d_model, num_heads, d_ff, max_seq_len, theta)
    renamed = {k.replace(".weight", ".W").replace("ln1.W", "ln1.g").replace("ln2.W", "ln2.g"): v
               for k, v in weights.items()}
    block.load_state_dict(renamed)
    return block(in_features)


def run_rmsnorm(d_model, eps, weights, in_features):
    norm = layers.RMSNorm(d_model, eps)
    norm.load_state_dict({"g": weights})
    return norm(in_features)


def run_softmax(in_features, dim):
    return layers.softmax(in_features, dim)


def run_silu(in_features):
    return layers.silu(in_features)


def run_transformer_lm(*args, **kwargs):
    raise NotImplementedError
