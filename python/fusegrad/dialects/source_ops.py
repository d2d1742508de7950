"""Ops without tensor operands: constant, full, iota."""
from __future__ import annotations

import numpy as np
from mlir import ir

from .core import (Attr, Kind, ShapeError, define, elements_to_numpy, lowering, reference_rule,
                   shape_rule)
from .types import TensorSpec, torch_dtype
from .lazy_torch import torch

define("constant", (), attrs={"value": Attr.ELEMENTS}, kind=Kind.SOURCE,
       summary="a dense literal; its type is the result type")
define("full", (), attrs={"value": Attr.F64}, kind=Kind.SOURCE,
       summary="every element equals value (converted to the result dtype)")
define("iota", (), attrs={"dim": Attr.I64}, kind=Kind.SOURCE,
       summary="element = its index along dim")


@shape_rule("constant")
def _constant_shape(ins, attrs, hint, *, op):
    return [TensorSpec.from_mlir(ir.DenseElementsAttr(attrs["value"]).type)]


@shape_rule("full")
def _full_shape(ins, attrs, hint, *, op):
    if hint is None:
        raise ShapeError("dg.full needs the result type")
    return list(hint)


@shape_rule("iota")
def _iota_shape(ins, attrs, hint, *, op):
    if hint is None:
        raise ShapeError("dg.iota needs the result type")
    if not 0 <= attrs["dim"] < max(hint[0].rank, 1) or hint[0].rank == 0:
        raise ShapeError(f"dg.iota: dim {attrs['dim']} out of range for rank {hint[0].rank}")
    return list(hint)


@reference_rule("constant")
def _constant_ref(*, op, attrs, out):
    arr = np.array(elements_to_numpy(attrs["value"]))
    return [torch.from_numpy(arr.copy()).to(torch_dtype(out[0].dtype)).reshape(out[0].shape)]


@reference_rule("full")
def _full_ref(*, op, attrs, out):
    from .shape_ops import pad_value
    return [torch.full(out[0].shape, pad_value(out[0].dtype, attrs["value"]),
                       dtype=torch_dtype(out[0].dtype))]


@reference_rule("iota")
def _iota_ref(*, op, attrs, out):
    spec, dim = out[0], attrs["dim"]
    shape = [1] * spec.rank
    shape[dim] = spec.shape[dim]
    ar = torch.arange(spec.shape[dim]).reshape(shape)
    return [ar.expand(spec.shape).to(torch_dtype(spec.dtype)).contiguous()]


# ---------------------------------------------------------------- lowering (dg-lower-to-linalg)
@lowering("constant")
def _constant_lower(op, operands, *, op_name, attrs, out):
    from mlir.dialects import arith
    return [arith.ConstantOp(out[0].to_mlir(), attrs["value"]).result]


@lowering("full")
def _full_lower(op, operands, *, op_name, attrs, out):
    from ..conversion import linalg_builders as lb
    from .shape_ops import pad_value
    o = out[0]
    return [lb.full(o.shape, o.dtype, pad_value(o.dtype, attrs["value"]))]


@lowering("iota")
def _iota_lower(op, operands, *, op_name, attrs, out):
    """A generic yielding linalg.index(dim), converted like dg.convert from i64."""
    from ..conversion import linalg_builders as lb
    from .core import lookup
    o = out[0]
    convert = lookup("convert")
    return lb.elementwise([], o.shape, [o.dtype], lambda a: [convert.scalar(
        [lb.index_cast(lb.loop_index(attrs["dim"]), "i64")], op="convert", attrs={},
        in_dtypes=["i64"], out_dtype=o.dtype)])


# (end of lowering rules)


# ---------------------------------------------------------------- autodiff (vjp, jvp)
from .core import jvp_rule, vjp_rule  # noqa: E402


@vjp_rule("constant", "full", "iota")
def _source_vjp(b, ins, outs, cts, *, op, attrs):
    return []  # no operands


@jvp_rule("constant", "full", "iota")
def _source_jvp(b, ins, outs, tangents, *, op, attrs):
    return [None]
