from __future__ import annotations

import torch

from cs336_basics.model import Attention, Block, FeedForward, Linear, MultiHead, Norm, Rotary, TokenEmbedding
from cs336_basics.model.basic import stable_softmax


def _load(module, state):
    with torch.no_grad():
        for name, value in state.items():
            module.get_parameter(name).copy_(value)
    return module


def run_linear(d_in, d_out, weights, in_features):
    linear = Linear(d_in, d_out, device=in_features.device, dtype=in_features.dtype)
    return _load(linear, {"weight": weights})(in_features)


def run_embedding(vocab_size, d_model, weights, token_ids):
    return _load(TokenEmbedding(vocab_size, d_model, dtype=weights.dtype), {"E": weights})(token_ids)


def run_swiglu(d_model, d_ff, w1_weight, w2_weight, w3_weight, in_features):
    ffn = _load(FeedForward(d_model, d_ff, device=in_features.device, dtype=in_features.dtype),
                {"w1.weight": w1_weight, "w2.weight": w2_weight, "w3.weight": w3_weight})
    return ffn(in_features)


def run_scaled_dot_product_attention(Q, K, V, mask=None):
    return Attention()(Q, K, V, mask)


def _heads(prefix, num_heads, q, k, v, o):
    d_head = q.shape[0] // num_heads
    state = {f"{prefix}o.weight": o}
    for h in range(num_heads):
        rows = slice(h * d_head, (h + 1) * d_head)
        state.update({f"{prefix}heads.{h}.q.weight": q[rows], f"{prefix}heads.{h}.k.weight": k[rows],
                      f"{prefix}heads.{h}.v.weight": v[rows]})
    return state


def run_multihead_self_attention(d_model, num_heads, q_proj_weight, k_proj_weight, v_proj_weight, o_proj_weight,
                                 in_features):
    mha = _load(MultiHead(d_model, num_heads, device=in_features.device, dtype=in_features.dtype),
                _heads("", num_heads, q_proj_weight, k_proj_weight, v_proj_weight, o_proj_weight))
    return mha(in_features)


def run_multihead_self_attention_with_rope(d_model, num_heads, max_seq_len, theta, q_proj_weight, k_proj_weight,
                                           v_proj_weight, o_proj_weight, in_features, token_positions=None):
    mha = _load(MultiHead(d_model, num_heads, use_rope=True, max_seq_len=max_seq_len, theta=theta),
                _heads("", num_heads, q_proj_weight, k_proj_weight, v_proj_weight, o_proj_weight))
    return mha(in_features, token_positions)


def run_rope(d_k, theta, max_seq_len, in_query_or_key, token_positions):
    return Rotary(theta, d_k, max_seq_len)(in_query_or_key, token_positions)


def run_transformer_block(d_model, num_heads, d_ff, max_seq_len, theta, weights, in_features):
    # the module built in the input's dtype and on its device, as many students' adapters do
    block = Block(d_model, num_heads, d_ff, max_seq_len=max_seq_len, theta=theta, device=in_features.device,
                  dtype=in_features.dtype)
    state = {"ln1.gain": weights["ln1.weight"], "ln2.gain": weights["ln2.weight"],
             **{f"ffn.{w}.weight": weights[f"ffn.{w}.weight"] for w in ("w1", "w2", "w3")},
             **_heads("attn.", num_heads, weights["attn.q_proj.weight"], weights["attn.k_proj.weight"],
                      weights["attn.v_proj.weight"], weights["attn.output_proj.weight"])}
    return _load(block, state)(in_features)


def run_rmsnorm(d_model, eps, weights, in_features):
    return _load(Norm(d_model, eps, in_features.device, in_features.dtype), {"gain": weights})(in_features)


def run_softmax(in_features, dim):
    return stable_softmax(in_features, dim)
