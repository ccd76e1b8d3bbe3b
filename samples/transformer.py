"""A tiny transformer encoder language model trained a few steps, profiled on CPU.

Exercises what a CNN does not: attention (scaled_dot_product_attention,
softmax, layer norm), embeddings, and AdamW. Run ``transformer``.

    python samples/transformer.py LOGDIR [--gzip]
"""
from __future__ import annotations

import os

import _common  # noqa: F401  (sys.path, seeds, profiler)
import torch
from torch import nn

VOCAB, D_MODEL, HEADS, LAYERS, SEQ, BATCH = 128, 32, 2, 2, 16, 4


class TinyEncoderLM(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, D_MODEL)
        self.pos = nn.Parameter(torch.zeros(1, SEQ, D_MODEL))
        layer = nn.TransformerEncoderLayer(D_MODEL, HEADS, dim_feedforward=64, dropout=0.0, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, LAYERS, enable_nested_tensor=False)
        self.head = nn.Linear(D_MODEL, VOCAB)

    def forward(self, tokens):
        mask = nn.Transformer.generate_square_subsequent_mask(tokens.shape[1])
        x = self.embed(tokens) + self.pos
        return self.head(self.encoder(x, mask=mask, is_causal=True))


def run(logdir: str, use_gzip: bool = False) -> list[str]:
    """Train ``_common.STEPS`` next-token steps into ``logdir/transformer``."""
    _common.setup(seed=0)
    run_dir = os.path.join(logdir, "transformer_memory_snapshot")
    model = TinyEncoderLM()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, foreach=True)
    loss_fn = nn.CrossEntropyLoss()
    g = torch.Generator().manual_seed(1)
    data = torch.randint(0, VOCAB, (_common.STEPS, BATCH, SEQ + 1), generator=g)
    model.train()
    with _common.profiler(run_dir, worker_name="transformer", use_gzip=use_gzip, snapshot=True) as prof:
        for batch in data:
            inputs, targets = batch[:, :-1], batch[:, 1:]
            logits = model(inputs)
            loss = loss_fn(logits.reshape(-1, VOCAB), targets.reshape(-1))
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            prof.step()
    return _common.written(run_dir)


if __name__ == "__main__":
    _common.main(run, __doc__)
