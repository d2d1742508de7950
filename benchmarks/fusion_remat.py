"""Fusion and rematerialization on small models: dg ops, kernels, saved bytes (a results table).

Run: .venv/bin/python benchmarks/fusion_remat.py
"""
from __future__ import annotations

import torch

import fusegrad


def _models():
    torch.manual_seed(0)
    yield ("transformer encoder layer (2,16,64)",
           torch.nn.TransformerEncoderLayer(d_model=64, nhead=4, dim_feedforward=128,
                                            dropout=0.0, batch_first=True),
           torch.randn(2, 16, 64))
    yield ("mlp gelu (32,64)",
           torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.GELU(), torch.nn.Linear(256, 64),
                               torch.nn.LayerNorm(64)),
           torch.randn(32, 64))


def main() -> None:
    header = (f"{'model':<38} {'dg ops':>7} {'kernels':>8} {'ratio':>6} {'saved before':>13} "
              f"{'saved after':>12} {'cut':>5}")
    print(header)
    print("-" * len(header))
    for name, model, x in _models():
        (g,) = fusegrad.explain(model, x).graphs
        ops, kernels = sum(g.dg_ops.values()), sum(g.kernels.values())
        before, after = g.saved_bytes_before_remat, g.saved_bytes_after_remat
        print(f"{name:<38} {ops:>7} {kernels:>8} {kernels / ops:>6.2f} {before:>13} {after:>12} "
              f"{100 * (before - after) / before:>4.0f}%")


if __name__ == "__main__":
    main()
