"""Summing the cotangents of a value used several times, without padding each one.

The VJP of a slice pads its cotangent with zeros back to the full shape, so a
tensor read as several slices (a fused QKV projection split in three, the
four strided windows of a 2x2 max-pool) gets several full-size zero-padded
tensors summed: a zero fill and a strided copy per slice, then a sum over
all of them. Zero pads that cover adjacent blocks of one dim (a split), or
alternate elements of one dim (stride-2 windows), are merged first into one
pad of a concatenation or an interleaving, which writes each element once;
what cannot merge is added as before.
"""
from __future__ import annotations

from typing import Sequence

from mlir import ir

from ..dialects.builder import Builder, erase_if_unused, spec
from ..dialects.core import attrs_of


def _zero_pad(v: ir.Value) -> dict | None:
    """The attributes of the dg.pad with value 0 that produced `v`, if it is one."""
    if isinstance(v.owner, ir.Block) or v.owner.operation.name != "dg.pad":
        return None
    attrs = attrs_of(v.owner.operation)
    return attrs if attrs["value"] == 0.0 else None


def _merge(b: Builder, x: ir.Value, y: ir.Value) -> ir.Value | None:
    """One zero pad equal to pad x + pad y, when they cover adjacent blocks or alternate
    elements of one dim and agree on every other dim; else None."""
    px, py = _zero_pad(x), _zero_pad(y)
    if px is None or py is None or x.type != y.type:
        return None
    rank = spec(x).rank
    differ = [d for d in range(rank)
              if (px["low"][d], px["high"][d], px["interior"][d]) !=
              (py["low"][d], py["high"][d], py["interior"][d])]
    if len(differ) != 1:
        return None
    (d,) = differ
    if px["low"][d] > py["low"][d]:
        x, y, px, py = y, x, py, px
    a, c = x.owner.operation.operands[0], y.owner.operation.operands[0]
    n_a, n_c = spec(a).shape[d], spec(c).shape[d]
    size = spec(x).shape[d]
    if px["interior"][d] == py["interior"][d] == 0 and size - px["high"][d] == py["low"][d]:
        inner = b.concatenate(a, c, dim=d)  # [a; c]
    elif px["interior"][d] == py["interior"][d] == 1 and py["low"][d] == px["low"][d] + 1 \
            and n_a == n_c:
        shape = list(spec(a).shape)
        column = shape[:d + 1] + [1] + shape[d + 1:]
        pairs = b.concatenate(b.reshape(a, shape=column), b.reshape(c, shape=column), dim=d + 1)
        inner = b.reshape(pairs, shape=shape[:d] + [2 * n_a] + shape[d + 1:])  # a0 c0 a1 c1 ..
    else:
        return None
    low, high, interior = list(px["low"]), list(px["high"]), list(px["interior"])
    high[d], interior[d] = py["high"][d], 0
    if not any(low) and not any(high) and not any(interior):
        return inner
    return b.pad(inner, low=low, high=high, interior=interior, value=0.0)


def sum_cotangents(terms: Sequence[tuple[ir.Value, ir.Location]]) -> ir.Value:
    """The sum of the cotangent `terms` (value, location of the VJP that made it), with
    zero pads merged wherever they fit together."""
    values, locs = [v for v, _ in terms], {v: loc for v, loc in terms}
    merged = True
    while merged:
        merged = False
        for i in range(len(values)):
            for j in range(i + 1, len(values)):
                m = _merge(Builder(locs[values[i]]), values[i], values[j])
                if m is None:
                    continue
                locs[m] = locs[values[i]]
                for old in (values[j], values[i]):
                    erase_if_unused(old.owner.operation)
                values = [m] + [v for k, v in enumerate(values) if k not in (i, j)]
                merged = True
                break
            if merged:
                break
    total = values[0]
    for v in values[1:]:
        total = Builder(locs[v]).add(total, v)
    return total
