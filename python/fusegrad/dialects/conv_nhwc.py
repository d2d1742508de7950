"""Channels-last twins of the 2-D convolution ops: activations NHWC, weights OIHW.

oneDNN runs a convolution on channels-last activations without reordering them into
its blocked layout and back, which it does per call for NCHW tensors: on the benchmark
CNN (32x3x32x32, convs 3->32 and 32->64, one thread) its five library calls took
5.7 ms channels-last against 7.0 ms NCHW, and converting per call costs more than it
saves. dg-channels-last (transforms/channels_last.py) rewrites whole regions of a graph to
NHWC around these ops, so that no conversion is left between them.

Each twin means its NCHW op between transposes (`decomposition`): that is its
reference, its lowering (every target compiles it) and, through dialects/composite.py,
its derivatives. The CPU pipeline calls PyTorch's kernels on the NHWC buffers as they
are (dg-outline-conv-grads, dg-conv-to-torch). `input_shape` is the NHWC shape of x;
`weight_shape` stays OIHW.
"""
from __future__ import annotations

from typing import Callable

from .composite import jvp_through, vjp_through
from .contraction import _CONV_ATTRS
from .core import (Attr, Kind, ShapeError, define, jvp_rule, lookup, lowering, reference_rule,
                   shape_rule, vjp_rule)

TO_NCHW = (0, 3, 1, 2)
TO_NHWC = (0, 2, 3, 1)

# twin -> (its NCHW op, which operands are activations, is the result one)
TWINS: dict[str, tuple[str, tuple[bool, bool], bool]] = {
    "conv2d_nhwc": ("conv2d", (True, False), True),
    "conv2d_nhwc_input_grad": ("conv2d_input_grad", (True, False), True),
    "conv2d_nhwc_weight_grad": ("conv2d_weight_grad", (True, True), False),
}
NCHW_TWIN = {base: twin for twin, (base, _, _) in TWINS.items()}

define("conv2d_nhwc", ("x", "weight"), attrs=dict(_CONV_ATTRS), kind=Kind.CONTRACTION,
       summary="dg.conv2d on an NHWC input, giving an NHWC result (weight OIHW)")
define("conv2d_nhwc_input_grad", ("grad", "weight"),
       attrs={**_CONV_ATTRS, "input_shape": Attr.I64S}, kind=Kind.CONTRACTION,
       summary="dg.conv2d_input_grad with grad and result NHWC; input_shape is NHWC")
define("conv2d_nhwc_weight_grad", ("x", "grad"),
       attrs={**_CONV_ATTRS, "weight_shape": Attr.I64S}, kind=Kind.CONTRACTION,
       summary="dg.conv2d_weight_grad with x and grad NHWC (the result, a weight, OIHW)")


def permuted(shape, perm) -> tuple[int, ...]:
    return tuple(shape[p] for p in perm)


def base_attrs(op: str, attrs: dict) -> dict:
    """The NCHW op's attributes: input_shape back in NCHW order."""
    out = dict(attrs)
    if op == "conv2d_nhwc_input_grad" and "input_shape" in out:
        out["input_shape"] = permuted(out["input_shape"], TO_NCHW)
    return out


def twin_attrs(base: str, attrs: dict) -> dict:
    """The twin's attributes for an NCHW op's `attrs`."""
    out = dict(attrs)
    if base == "conv2d_input_grad":
        out["input_shape"] = permuted(out["input_shape"], TO_NHWC)
    return out


@shape_rule(*TWINS)
def _twin_shape(ins, attrs, hint, *, op):
    base, acts, act_result = TWINS[op]
    for v, act in zip(ins, acts):
        if act and v.rank != 4:
            raise ShapeError(f"dg.{op}: activations must be rank 4 (NHWC), got rank {v.rank}")
    nchw = [v.with_shape(permuted(v.shape, TO_NCHW)) if act else v for v, act in zip(ins, acts)]
    try:
        (y,) = lookup(base).shape(nchw, base_attrs(op, attrs), None, op=op)
    except ShapeError as e:
        raise ShapeError(f"{e} (shapes in NCHW order: dg.{op} reads its activations NHWC)") \
            from None
    return [y.with_shape(permuted(y.shape, TO_NHWC)) if act_result else y]


@reference_rule(*TWINS)
def _twin_ref(*ins, op, attrs, out):
    base, acts, act_result = TWINS[op]
    nchw = [v.permute(*TO_NCHW) if act else v for v, act in zip(ins, acts)]
    (y,) = lookup(base).reference(*nchw, op=base, attrs=base_attrs(op, attrs), out=out)
    return [y.permute(*TO_NHWC).contiguous() if act_result else y]


def decomposition(op: str, attrs: dict) -> Callable:
    """`op` as its NCHW op between dg.transposes."""
    base, acts, act_result = TWINS[op]
    nchw_attrs = base_attrs(op, attrs)

    def decompose(b, *ins):
        args = [b.transpose(v, perm=TO_NCHW) if act else v for v, act in zip(ins, acts)]
        y = b.create(base, args, **nchw_attrs)
        return [b.transpose(y, perm=TO_NHWC) if act_result else y]
    return decompose


@lowering(*TWINS)
def _twin_lower(op, operands, *, op_name, attrs, out):
    """The decomposition (dg ops that dg-lower-to-linalg lowers in turn); the CPU pipeline
    calls PyTorch's kernels on the NHWC buffers instead (codegen/cpu/library/conv_to_torch.py)."""
    from .builder import Builder
    return list(decomposition(op_name, attrs)(Builder(), *operands))


@vjp_rule(*TWINS)
def _twin_vjp(b, ins, outs, cts, *, op, attrs):
    return vjp_through(b, decomposition(op, attrs), ins, cts)


@jvp_rule(*TWINS)
def _twin_jvp(b, ins, outs, tangents, *, op, attrs):
    return jvp_through(b, decomposition(op, attrs), ins, tangents)
