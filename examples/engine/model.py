# SPDX-License-Identifier: Apache-2.0
"""A small decoder-only transformer in numpy, with seeded random weights.

The weights are random: the tokens it generates mean nothing. The mechanism is real: every
token's keys and values are computed from the tokens before it through 4 layers of causal
self-attention, written into 16-token KV blocks, and read back by every later token; the
attention probabilities it computes are what the engine reports to the runtime.

Every token is computed alone (a prefill is the same per-token step as a decode), so a block's
KV computed again after a drop goes through the same operations on the same inputs, in the
same shapes, and comes out bit-identical: that is what lets the engine's output be compared bit
for bit with an engine that never evicts.
"""
import numpy as np

LAYERS = 4
KV_HEADS = 4
HEAD_DIM = 32
D_MODEL = KV_HEADS * HEAD_DIM  # one query head per KV head
D_FF = 256
VOCAB = 320
MAX_POSITIONS = 512
TOKENS_PER_BLOCK = 16
DTYPE = np.float32
# One KV block: [layer][K|V][head][token][dim], float32: 2 x 4 x 4 x 32 x 4 B x 16 = 64 KiB.
BLOCK_SHAPE = (LAYERS, 2, KV_HEADS, TOKENS_PER_BLOCK, HEAD_DIM)
BLOCK_BYTES = int(np.prod(BLOCK_SHAPE)) * np.dtype(DTYPE).itemsize


def _rmsnorm(x, g):
    return x / np.sqrt(np.mean(x * x) + DTYPE(1e-5)) * g


class Model:
    """Seeded random weights; forward() computes one token against KV blocks."""

    def __init__(self, seed: int = 1):
        rng = np.random.default_rng(seed)

        def w(*shape, scale):
            return (rng.standard_normal(shape) * scale).astype(DTYPE)

        self.emb = w(VOCAB, D_MODEL, scale=1.0)
        self.pos = w(MAX_POSITIONS, D_MODEL, scale=0.5)
        self.wqkv = w(LAYERS, D_MODEL, 3 * D_MODEL, scale=D_MODEL ** -0.5)
        self.wo = w(LAYERS, D_MODEL, D_MODEL, scale=D_MODEL ** -0.5)
        self.w1 = w(LAYERS, D_MODEL, D_FF, scale=D_MODEL ** -0.5)
        self.w2 = w(LAYERS, D_FF, D_MODEL, scale=D_FF ** -0.5)
        self.g1 = np.ones((LAYERS, D_MODEL), DTYPE)
        self.g2 = np.ones((LAYERS, D_MODEL), DTYPE)
        self.gf = np.ones(D_MODEL, DTYPE)
        self.wout = w(D_MODEL, VOCAB, scale=D_MODEL ** -0.5)
        self.scale = DTYPE(HEAD_DIM ** -0.5)

    def forward(self, token: int, pos: int, blocks):
        """Compute token `token` at position `pos`: write its K and V into blocks[pos // 16] at row
        pos % 16, attend over positions 0..pos (blocks[0..pos // 16], each a BLOCK_SHAPE float32
        array), and return (logits over the vocabulary, attention mass per position summed over
        heads and layers: pos + 1 values adding up to LAYERS * KV_HEADS)."""
        if pos >= MAX_POSITIONS:
            raise ValueError(f"position {pos} is past the model's {MAX_POSITIONS}")
        bi, off = divmod(pos, TOKENS_PER_BLOCK)
        ctx = blocks[:bi + 1]
        n = pos + 1
        x = self.emb[token] + self.pos[pos]
        mass = np.zeros(n, DTYPE)
        for layer in range(LAYERS):
            h = _rmsnorm(x, self.g1[layer])
            q, k, v = (h @ self.wqkv[layer]).reshape(3, KV_HEADS, HEAD_DIM)
            blocks[bi][layer, 0, :, off, :] = k
            blocks[bi][layer, 1, :, off, :] = v
            keys = np.concatenate([b[layer, 0] for b in ctx], axis=1)[:, :n]     # (heads, n, dim)
            values = np.concatenate([b[layer, 1] for b in ctx], axis=1)[:, :n]
            s = np.matmul(keys, q[:, :, None])[:, :, 0] * self.scale            # (heads, n)
            s = np.exp(s - s.max(axis=1, keepdims=True))
            p = s / s.sum(axis=1, keepdims=True)
            o = np.matmul(p[:, None, :], values)[:, 0, :]                        # (heads, dim)
            x = x + o.reshape(D_MODEL) @ self.wo[layer]
            h = _rmsnorm(x, self.g2[layer])
            x = x + np.maximum(h @ self.w1[layer], 0) @ self.w2[layer]
            mass += p.sum(axis=0)
        logits = _rmsnorm(x, self.gf) @ self.wout
        return logits, mass
