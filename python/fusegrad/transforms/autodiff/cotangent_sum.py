"""Summing the cotangents of a value used several times, without padding each one.

The VJP of a slice pads its cotangent with zeros back to the full shape, so a
tensor read as several slices (a fused QKV projection split in three, the
four strided windows of a 2x2 max-pool) gets several full-size zero-padded
tensors summed: a zero fill and a strided copy per slice, then a sum over
all of them. Zero pads that cover adjacent blocks of one dim (a split), or
alternate elements of one dim (stride-2 windows), are merged first into one
pad of a concatenation or an interleaving, which writes each element once.
Then pads whose blocks overlap on the same lattice of one dim (the shifted
windows of a 3-d convolution's depth taps, of a pooling window wider than its
stride) merge into one pad of the concatenation [only x; x + y; only y]: the
overlap is added once, where it lies. What cannot merge is added as before.
"""
from __future__ import annotations

from typing import Sequence

from mlir import ir

from ...dialects.builder import Builder, erase_if_unused, spec
from ...dialects.core import attrs_of, equal, holds


def _zero_pad(v: ir.Value) -> dict | None:
    """The attributes of the dg.pad with value 0 that produced `v`, if it is one."""
    if isinstance(v.owner, ir.Block) or v.owner.operation.name != "dg.pad":
        return None
    attrs = attrs_of(v.owner.operation)
    return attrs if attrs["value"] == 0.0 else None


def _merge(b: Builder, x: ir.Value, y: ir.Value, overlap: bool) -> ir.Value | None:
    """One zero pad equal to pad x + pad y, when they cover adjacent blocks or alternate
    elements of one dim (or, with `overlap`, overlapping blocks on the same lattice of
    that dim) and agree on every other dim; else None."""
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
    later = holds(px["low"][d] > py["low"][d])
    if later is None:  # symbolic pads in an order only the sizes' values decide
        return None
    if later:
        x, y, px, py = y, x, py, px
    a, c = x.owner.operation.operands[0], y.owner.operation.operands[0]
    n_a, n_c = spec(a).shape[d], spec(c).shape[d]
    size = spec(x).shape[d]
    on_lattice = False
    if px["interior"][d] == py["interior"][d] == 0 and \
            holds(equal(size - px["high"][d], py["low"][d])):
        inner = b.concatenate(a, c, dim=d)  # [a; c]
    elif px["interior"][d] == py["interior"][d] == 1 and \
            holds(equal(py["low"][d], px["low"][d] + 1)) and holds(equal(n_a, n_c)):
        shape = list(spec(a).shape)
        column = shape[:d + 1] + [1] + shape[d + 1:]
        pairs = b.concatenate(b.reshape(a, shape=column), b.reshape(c, shape=column), dim=d + 1)
        inner = b.reshape(pairs, shape=shape[:d] + [2 * n_a] + shape[d + 1:])  # a0 c0 a1 c1 ..
    elif overlap and px["interior"][d] == py["interior"][d]:
        inner = _overlapping(b, a, c, d, py["low"][d] - px["low"][d], px["interior"][d] + 1)
        if inner is None:
            return None
        on_lattice = True
    else:
        return None
    low, high, interior = list(px["low"]), list(px["high"]), list(px["interior"])
    if on_lattice:  # the union stays on the lattice
        high[d] = size - 1 - low[d] - (spec(inner).shape[d] - 1) * (interior[d] + 1)
    else:
        high[d], interior[d] = py["high"][d], 0
    if not any(low) and not any(high) and not any(interior):
        return inner
    return b.pad(inner, low=low, high=high, interior=interior, value=0.0)


def _overlapping(b: Builder, a: ir.Value, c: ir.Value, d: int, shift: int,
                 step: int) -> ir.Value | None:
    """On the lattice of dim d (every `step`-th element), `a` from position 0 and `c`
    from position shift / step, when that is a whole number of steps and the two blocks
    touch or overlap: [only a; a + c; only c] (or a with c added inside it). Static
    sizes only."""
    n_a, n_c = spec(a).shape[d], spec(c).shape[d]
    if not all(isinstance(n, int) for n in (shift, step, n_a, n_c)):
        return None
    m, rest = divmod(shift, step)
    if rest or m > n_a:
        return None
    end = min(n_a, m + n_c)
    parts = []
    if m:
        parts.append(_part(b, a, d, 0, m))
    if end > m:
        parts.append(b.add(_part(b, a, d, m, end), _part(b, c, d, 0, end - m)))
    if n_a > end:
        parts.append(_part(b, a, d, end, n_a))
    elif m + n_c > end:
        parts.append(_part(b, c, d, end - m, n_c))
    inner = parts[0]
    for p in parts[1:]:
        inner = b.concatenate(inner, p, dim=d)
    return inner


def _part(b: Builder, v: ir.Value, d: int, start: int, end: int) -> ir.Value:
    """Elements [start, end) of dim d of `v`."""
    shape = spec(v).shape
    if (start, end) == (0, shape[d]):
        return v
    lo, hi = [0] * len(shape), list(shape)
    lo[d], hi[d] = start, end
    return b.slice(v, start=lo, limit=hi, stride=[1] * len(shape))


def sum_cotangents(terms: Sequence[tuple[ir.Value, ir.Location]]) -> ir.Value:
    """The sum of the cotangent `terms` (value, location of the VJP that made it), with
    zero pads merged wherever they fit together."""
    values, locs = [v for v, _ in terms], {v: loc for v, loc in terms}
    while True:
        # overlapping blocks only once no block fits another exactly: an overlap merge
        # would leave a block that no longer interleaves with its neighbour
        pair = next(((i, j, m) for overlap in (False, True)
                     for i in range(len(values)) for j in range(i + 1, len(values))
                     for m in [_merge(Builder(locs[values[i]]), values[i], values[j], overlap)]
                     if m is not None), None)
        if pair is None:
            break
        i, j, m = pair
        locs[m] = locs[values[i]]
        for old in (values[j], values[i]):
            erase_if_unused(old.owner.operation)
        values = [m] + [v for k, v in enumerate(values) if k not in (i, j)]
    total = values[0]
    for v in values[1:]:
        total = Builder(locs[v]).add(total, v)
    return total
