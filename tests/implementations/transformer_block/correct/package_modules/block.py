"""The block, in a helper module that imports its sublayers from another."""

from torch import nn

from sublayers import MultiHeadSelfAttention, RMSNorm, SwiGLU


class TransformerBlock(nn.Module):
    def __init__(self, d_model, num_heads, d_ff, max_seq_len, theta, device=None, dtype=None):
        super().__init__()
        self.ln1 = RMSNorm(d_model, device=device, dtype=dtype)
        self.attn = MultiHeadSelfAttention(d_model, num_heads, max_seq_len, theta, device=device, dtype=dtype)
        self.ln2 = RMSNorm(d_model, device=device, dtype=dtype)
        self.ffn = SwiGLU(d_model, d_ff, device=device, dtype=dtype)

    def forward(self, x):
        y = x + self.attn(self.ln1(x))
        return y + self.ffn(self.ln2(y))
