"""dg-channels-last: 2-D convolutions on NHWC activations, and the ops between them too.

oneDNN reorders NCHW activations into its blocked layout and back on every call, and
runs channels-last ones as they are. Converting at each call costs more than it saves
(conv_layout.py measured it), so, like Inductor's layout optimization, this pass moves
whole stretches of the graph to channels-last. Every f32/f64 convolution, grouped ones
too (`dg.conv2d`, `dg.conv2d_input_grad`, `dg.conv2d_weight_grad`), whose activations
outweigh its weight (`_is_seed`) becomes its NHWC twin
(dialects/conv_nhwc.py); its activations are asked for with the channel dim last, and
its activation result is produced that way. That layout then flows forward through the
ops that can compute in it with their attributes remapped: pointwise ops, broadcasts,
reductions, slices, pads, reverses, concatenations, reshapes that keep the channel dim
whole, and transposes (which compose with it). An operand of such an op that is not
yet channels-last is made so: a `dg.full` or broadcast is re-emitted in the new
layout, anything else transposed (dg-fuse folds a transpose into its reader). Any
other op reads a value transposed back, once per value.

Between @f_fwd and @f_bwd, saved values keep the layout they have: the forward returns
them channels-last and the backward takes them so, with no transpose on either side.
What a function returns to the caller keeps its logical layout.

Measured with one thread, training steps against the same code without this pass: the
benchmark CNN's five library calls 7.0 -> 5.7 ms; HF ResNet 1.18x, MobileNetV2 1.29x
(with its depthwise convolutions left NCHW, as conv_layout.py measured them per call,
the layouts alternated and it ran 0.96x), ConvNeXt 1.05x.
"""
from __future__ import annotations

import logging
import math
from typing import Optional

from mlir import ir

from ..dialects.builder import Builder, spec
from ..dialects.conv_nhwc import NCHW_TWIN, TWINS, twin_attrs
from ..dialects.core import (SIZES_SUFFIX, attrs_of, encode_attrs, equal, holds,
                             is_pointwise, lookup)
from ..dialects.types import size_hints, tensor_type
from .autodiff.common import NUM_OUTPUTS, forward_backward_pairs, func_name
from ..passes import functions


log = logging.getLogger(__name__)

SEEDS = tuple(NCHW_TWIN)


def moved(rank: int, k: int) -> list[int]:
    """The transpose perm that moves dim k last (physical from logical)."""
    return [i for i in range(rank) if i != k] + [k]


def _inverse(perm: list[int]) -> list[int]:
    inv = [0] * len(perm)
    for i, p in enumerate(perm):
        inv[p] = i
    return inv


def _newpos(d: int, k: int, rank: int) -> int:
    """Where logical dim d lies once dim k is moved last."""
    return rank - 1 if d == k else d - (d > k)


def _permute(v: ir.Value, perm: list[int]) -> ir.Value:
    """dg.transpose, or a dg.reshape where the perm only moves dims of size 1."""
    shape = spec(v).shape
    kept = [p for p in perm if shape[p] != 1]
    if kept == sorted(kept):
        return Builder().reshape(v, shape=[shape[p] for p in perm])
    return Builder().transpose(v, perm)


def _phys_type(v: ir.Value, k: int) -> ir.Type:
    shape = spec(v).shape
    return tensor_type([shape[p] for p in moved(len(shape), k)],
                       ir.RankedTensorType(v.type).element_type)


def _is_seed(op: ir.Operation) -> bool:
    """An f32/f64 convolution (or gradient), unless its weight has a kernel wider than
    1x1 and outweighs its activations. oneDNN converts such an NCHW weight to
    channels-last on every call with NHWC activations (a 1x1 kernel's two layouts are
    the same bytes), so where the weight is the larger (a ResNet's last stages on small
    images: 4x512x2x2 activations, a 512x512x3x3 weight) the conversions cost more than
    the activations' reorders that NHWC saves: torchvision's ResNet-18 on 4x3x64x64
    trained at 0.58x eager with every convolution NHWC, 0.76x with these NCHW."""
    if op.name[3:] not in SEEDS or spec(op.results[0]).dtype not in ("f32", "f64"):
        return False
    weight = op.results[0] if op.name == "dg.conv2d_weight_grad" else op.operands[1]
    if math.prod(spec(weight).shape[2:]) == 1:
        return True
    activations = [v for v in (*op.operands, *op.results) if v != weight]
    hints = size_hints(op)  # symbolic sizes weigh at their hints
    return max(spec(v).hinted(hints).numel for v in activations) >= \
        spec(weight).hinted(hints).numel


def _reshape_channel(shape_in: list[int], k: int, shape_out: list[int]) -> Optional[int]:
    """The result dim that is operand dim k of a reshape, when the reshape keeps it whole
    (the dims before it reshape among themselves, and so do those after): then the
    reshape of the channel-last layouts is a plain reshape too."""
    before = 1
    for s in shape_in[:k]:
        before *= s
    prod = 1
    for j, s in enumerate(shape_out):
        if holds(equal(prod, before)) and holds(equal(s, shape_in[k])):
            return j
        prod *= s
        if holds(prod > before) is not False:  # past it, or only the sizes' values say
            return None
    return None


class _Rewrite:
    """Rewrites one function in program order. `phys` maps an original value to the
    value holding it with dim k last; `logical` caches the transposes back."""

    def __init__(self, fn: ir.Operation) -> None:
        self.fn = fn
        self.block = fn.regions[0].blocks[0]
        self.phys: dict[ir.Value, tuple[ir.Value, int]] = {}
        self.logical: dict[ir.Value, ir.Value] = {}
        self.provided: dict[tuple[ir.Value, int], ir.Value] = {}  # logical value, k -> copy

    # ---- values
    def to_logical(self, v: ir.Value) -> ir.Value:
        """`v` in its logical layout: a transpose right after its channel-last value."""
        if v not in self.phys:
            return v
        if v not in self.logical:
            p, k = self.phys[v]  # an argument when a transpose of one kept its layout
            at = ir.InsertionPoint(self.block.operations[0]) if isinstance(p.owner, ir.Block) \
                else ir.InsertionPoint.after(p.owner.operation)
            with at, self._loc(v):
                self.logical[v] = _permute(p, _inverse(moved(spec(v).rank, k)))
        return self.logical[v]

    def _loc(self, v: ir.Value) -> ir.Location:
        return self.fn.location if isinstance(v.owner, ir.Block) else v.owner.location

    def provide(self, v: ir.Value, k: int) -> ir.Value:
        """`v` with dim k last (made at the current insertion point, once)."""
        if (v, k) not in self.provided:
            self.provided[(v, k)] = self._provide(v, k)
        return self.provided[(v, k)]

    def _provide(self, v: ir.Value, k: int) -> ir.Value:
        rank = spec(v).rank
        if k == rank - 1:
            return self.to_logical(v)
        if v in self.phys:
            p, pk = self.phys[v]
            if pk == k:
                return p
            logical_from_p = _inverse(moved(rank, pk))
            return Builder().transpose(p, [logical_from_p[i] for i in moved(rank, k)])
        owner = None if isinstance(v.owner, ir.Block) else v.owner.operation
        if owner is not None and owner.name == "dg.full":
            return Builder().create("full", (), shape=[spec(v).shape[i] for i in moved(rank, k)],
                                    dtype=spec(v).dtype, value=attrs_of(owner)["value"])
        if owner is not None and owner.name == "dg.broadcast_in_dim":
            return self._broadcast(owner, k)
        return _permute(v, moved(rank, k))

    def _broadcast(self, op: ir.Operation, k: int) -> ir.Value:
        """broadcast_in_dim `op` re-emitted with its result's dim k last."""
        x = op.operands[0]
        dims = list(attrs_of(op)["dims"])
        rank = spec(op.results[0]).rank
        if k in dims and spec(x).rank > 1:
            j = dims.index(k)
            x = self.provide(x, j)
            order = moved(len(dims), j)
        else:
            x = self.to_logical(x)
            order = list(range(len(dims)))
        shape = [spec(op.results[0]).shape[i] for i in moved(rank, k)]
        return Builder().create("broadcast_in_dim", (x,), shape=shape,
                                dims=[_newpos(dims[i], k, rank) for i in order])

    # ---- ops
    def run(self, saved_in: dict[int, int], num_outputs: Optional[int]) -> dict[int, int]:
        """Rewrite; `saved_in`: argument index -> k of arguments that arrive channels-last.
        Returns result index -> k of the saved results (those past `num_outputs`) returned
        channels-last."""
        args = list(self.block.arguments)
        first = list(self.block.operations)[0].operation
        for i, k in saved_in.items():
            arg = args[i]
            uses = [(u.owner, u.operand_number) for u in arg.uses]
            rank = spec(arg).rank
            arg.set_type(_phys_type(arg, k))
            with ir.InsertionPoint(first), self.fn.location:
                back = Builder().transpose(arg, _inverse(moved(rank, k)))
            for owner, n in uses:
                owner.operands[n] = back
            self.phys[back] = (arg, k)
            self.logical[back] = back
        saved_out: dict[int, int] = {}
        for op in [o.operation for o in self.block.operations]:
            if op.name == "func.return":
                saved_out = self._return(op, num_outputs)
            elif _is_seed(op):
                self._seed(op)
            elif not any(v in self.phys for v in op.operands) or not self._propagate(op):
                for n, v in enumerate(op.operands):
                    if v in self.phys:
                        with ir.InsertionPoint(op):
                            op.operands[n] = self.to_logical(v)
        # the rewritten ops, and what only they read (broadcasts re-emitted channels-last)
        for op in reversed([o.operation for o in self.block.operations]):
            if op.name.startswith("dg.") and all(not list(r.uses) for r in op.results):
                op.erase()
        ret = list(self.block.operations)[-1].operation
        self.fn.attributes["function_type"] = ir.TypeAttr.get(ir.FunctionType.get(
            [a.type for a in self.block.arguments], [v.type for v in ret.operands]))
        return saved_out

    def _return(self, op: ir.Operation, num_outputs: Optional[int]) -> dict[int, int]:
        saved: dict[int, int] = {}
        for n, v in enumerate(op.operands):
            if v not in self.phys:
                continue
            if num_outputs is not None and n >= num_outputs:
                op.operands[n], saved[n - num_outputs] = self.phys[v]
            else:
                with ir.InsertionPoint(op):
                    op.operands[n] = self.to_logical(v)
        return saved

    def _seed(self, op: ir.Operation) -> None:
        base = op.name[3:]
        twin = NCHW_TWIN[base]
        _, acts, act_result = TWINS[twin]
        with ir.InsertionPoint(op), op.location:
            operands = [self.provide(v, 1) if act else self.to_logical(v)
                        for v, act in zip(op.operands, acts)]
            y = Builder().create(twin, operands, **twin_attrs(base, attrs_of(op)))
        self._result(op, y, 1 if act_result else None)

    def _result(self, op: ir.Operation, new: ir.Value, k: Optional[int]) -> None:
        """`op`'s result is `new`, with dim k last (None: in its logical layout)."""
        if k is None or k == spec(op.results[0]).rank - 1:
            op.results[0].replace_all_uses_with(new)
        else:
            self.phys[op.results[0]] = (new, k)

    def _propagate(self, op: ir.Operation) -> bool:
        """Compute `op` in the channel-last layout of its operands, if it can."""
        if len(op.results) != 1 or not isinstance(op.results[0].type, ir.RankedTensorType):
            return False
        ks = {self.phys[v][1] for v in op.operands if v in self.phys}
        x = op.operands[0] if len(op.operands) else None
        rank = spec(op.results[0]).rank
        name = op.name[3:] if op.name.startswith("dg.") else None
        attrs = attrs_of(op) if name is not None else {}
        if is_pointwise(op) or name == "concatenate":
            if len(ks) != 1 or any(spec(v).shape != spec(op.results[0]).shape
                                   for v in op.operands if name != "concatenate"):
                return False
            k = ks.pop()
            new_attrs = {"dim": _newpos(attrs["dim"], k, rank)} if name == "concatenate" else {}
            return self._emit(op, [k] * len(op.operands), k, new_attrs)
        if x not in self.phys:
            return False
        k = self.phys[x][1]
        in_rank = spec(x).rank
        if name == "broadcast_in_dim":
            out_k = attrs["dims"][k]
            order = moved(in_rank, k)
            return self._emit(op, [k], out_k, {"dims": [_newpos(attrs["dims"][i], out_k, rank)
                                                        for i in order]})
        if name in ("reduce_sum", "reduce_max", "reduce_min", "argmax", "argmin"):
            dims = [attrs["dim"]] if "dim" in attrs else list(attrs["dims"])
            kept = [d for d in range(in_rank) if d not in dims]
            out_k = kept.index(k) if k in kept else None
            new = sorted(_newpos(d, k, in_rank) for d in dims)
            return self._emit(op, [k], out_k, {"dim": new[0]} if "dim" in attrs else {"dims": new})
        if name in ("slice", "pad"):
            order = moved(rank, k)
            keys = ("start", "limit", "stride") if name == "slice" else ("low", "high", "interior")
            return self._emit(op, [k], k, {key: [attrs[key][i] for i in order] for key in keys})
        if name == "reverse":
            return self._emit(op, [k], k, {"dims": sorted(_newpos(d, k, rank)
                                                          for d in attrs["dims"])})
        if name == "reshape":
            out_k = _reshape_channel(list(spec(x).shape), k, list(spec(op.results[0]).shape))
            return out_k is not None and self._emit(op, [k], out_k, {})
        if name == "transpose":
            p, _ = self.phys[x]
            perm = list(attrs["perm"])
            logical_from_p = _inverse(moved(in_rank, k))
            out_k = perm.index(k)
            if [logical_from_p[perm[i]] for i in moved(rank, out_k)] == list(range(rank)):
                # p already is the result with its channel dim last: a 3-d convolution's
                # [n, d, c, h, w] <-> [n, c, d, h, w] around its 2-d one
                self._result(op, p, out_k)
                return True
            with ir.InsertionPoint(op), op.location:
                y = Builder().transpose(p, [logical_from_p[i] for i in perm])
            self._result(op, y, None)
            return True
        return False

    def _emit(self, op: ir.Operation, in_ks: list[int], out_k: Optional[int],
              new_attrs: dict) -> bool:
        """Recreate `op` on its operands with dims in_ks last, with `new_attrs`; its result
        then has dim out_k last (None: logical)."""
        with ir.InsertionPoint(op), op.location:
            operands = [self.provide(v, k) for v, k in zip(op.operands, in_ks)]
            result = op.results[0]
            out_rank = spec(result).rank
            if out_k is None or out_k == out_rank - 1:
                out_type, out_k = result.type, None
            else:
                out_type = _phys_type(result, out_k)
            d = lookup(op.name)
            attributes = {a: op.attributes[a] for a in op.attributes
                          if not (a.endswith(SIZES_SUFFIX) and a[:-len(SIZES_SUFFIX)] in new_attrs)}
            attributes.update(encode_attrs(d, new_attrs))
            new = ir.Operation.create(op.name, results=[out_type], operands=operands,
                                      attributes=attributes, loc=op.location).results[0]
        self._result(op, new, out_k)
        return True


def _has_seed(fn: ir.Operation) -> bool:
    return any(_is_seed(o.operation) for o in fn.regions[0].blocks[0].operations)


def channels_last(module: ir.Operation) -> None:
    paired: set = set()
    for fwd, bwd in forward_backward_pairs(module):
        num_outputs = ir.IntegerAttr(fwd.attributes[NUM_OUTPUTS]).value
        saved = _Rewrite(fwd).run({}, num_outputs) if _has_seed(fwd) else {}
        if saved or _has_seed(bwd):
            _Rewrite(bwd).run(saved, None)
        log.debug("dg-channels-last: @%s saves %d values channels-last", func_name(fwd),
                  len(saved))
        paired.update((fwd, bwd))
    for fn in functions(module):
        if fn not in paired and _has_seed(fn):
            _Rewrite(fn).run({}, None)
