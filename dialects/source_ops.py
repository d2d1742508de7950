"""Ops without tensor operands: constant, full, iota."""
from __future__ import annotations

import numpy as np
import torch
from mlir import ir

from .core import Attr, Kind, ShapeError, define, elements_to_numpy, reference_rule, shape_rule
from .types import TensorSpec, torch_dtype

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
    return [torch.full(out[0].shape, attrs["value"], dtype=torch_dtype(out[0].dtype))]


@reference_rule("iota")
def _iota_ref(*, op, attrs, out):
    spec, dim = out[0], attrs["dim"]
    shape = [1] * spec.rank
    shape[dim] = spec.shape[dim]
    ar = torch.arange(spec.shape[dim]).reshape(shape)
    return [ar.expand(spec.shape).to(torch_dtype(spec.dtype)).contiguous()]


# ---------------------------------------------------------------- lowering (dg-lower-to-linalg)
# (end of lowering rules)


# ---------------------------------------------------------------- autodiff (vjp, jvp)
from .core import jvp_rule, vjp_rule  # noqa: E402


@vjp_rule("constant", "full", "iota")
def _source_vjp(b, ins, outs, cts, *, op, attrs):
    return []  # no operands


@jvp_rule("constant", "full", "iota")
def _source_jvp(b, ins, outs, tangents, *, op, attrs):
    return [None]
