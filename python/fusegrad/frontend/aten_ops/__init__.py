"""The per-ATen-op mapping table: core-ATen overloads -> dg ops.

`HANDLERS[overload](em, *args, **kwargs)` emits dg at the current insertion
point and returns the node's result value(s). Tensor arguments arrive as
`ir.Value`s, everything else as the Python values in the FX graph. `em.out`
holds the result TensorSpecs PyTorch computed (node.meta['val']): handlers use
them for result shapes and dtypes, and the importer checks that they match.

dg is explicit about dtypes and broadcasting, so handlers promote with
`coerce(em, x, dtype, shape)`: it converts and broadcasts a value, or turns a
Python scalar into `dg.full`. Arithmetic computes in the result dtype (f32 for
f16/bf16 results, like PyTorch's opmath); comparisons in the promoted dtype.

A handler raises `Unsupported(reason)` for an argument combination it cannot
map exactly (the importer turns it into `UnsupportedOp`); it never
approximates silently.

The handlers live in one module per op family, each registering with
`emit.handles`; `emit` also holds `Emit`, the other tables and the helpers the
families share. Importing this package imports every family, so `HANDLERS` is
complete: pointwise, special (special functions), reductions (and sorting),
scans, shapes (views, data movement and sources), indexing, random, nn
(contractions, attention, sampling, pooling).
"""
from __future__ import annotations

from . import (  # noqa: F401  (each family registers its handlers on import)
    emit, indexing, nn, pointwise, random, reductions, scans, shapes, special,
)
from .emit import (
    HANDLERS, IGNORED, KEPT_EAGER, RANDOM_OPS, Emit, Unavailable, Unsupported,
)
from .reductions import SORT_MAX_N

__all__ = ["HANDLERS", "IGNORED", "KEPT_EAGER", "RANDOM_OPS", "SORT_MAX_N", "Emit",
           "Unavailable", "Unsupported"]
