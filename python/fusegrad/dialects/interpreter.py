"""Reference semantics: evaluate dg functions with eager torch.

This is the executable specification every lowering and every autodiff rule
is tested against; it is not meant to be fast.
"""
from __future__ import annotations

from typing import Sequence

from mlir import ir

from .core import attrs_of, lookup
from .region_ops import FUSION_TERMINATOR, is_fusion
from ..runtime import abi
from .types import TensorSpec, torch_dtype
from .lazy_torch import torch


class InterpreterError(RuntimeError):
    pass


def _run_block(block: ir.Block, args: Sequence[torch.Tensor], module: ir.Operation | None,
               env: dict | None = None, *, sizes: dict[str, int]):
    env = dict(env or {})  # a fusion region sees the values of its enclosing block
    for a, t in zip(block.arguments, args):
        env[a] = t
    for op in block.operations:
        name = op.operation.name
        if name in ("func.return", FUSION_TERMINATOR):
            return [env[v] for v in op.operands]
        if is_fusion(op):
            outs = _run_block(op.regions[0].blocks[0], [], module, env, sizes=sizes)
            for r, t in zip(op.results, outs):
                env[r] = t
            continue
        ins = [env[v] for v in op.operands]
        if name == "func.call":
            callee = ir.FlatSymbolRefAttr(op.attributes["callee"]).value
            outs = run_function(_find_func(module, callee), ins, sizes)
        elif name.startswith("dg."):
            d = lookup(name)
            out_specs = [_concrete(TensorSpec.from_mlir(r.type), sizes) for r in op.results]
            attrs = {k: tuple(abi.eval_dim(abi.as_dim(x), sizes) for x in v)
                     if isinstance(v, tuple) else v for k, v in attrs_of(op.operation).items()}
            outs = d.reference(*ins, op=d.name, attrs=attrs, out=out_specs)
        else:
            raise InterpreterError(f"the reference interpreter cannot run '{name}' at {op.location}")
        for r, t in zip(op.results, outs):
            s = _concrete(TensorSpec.from_mlir(r.type), sizes)
            if tuple(t.shape) != s.shape or t.dtype != torch_dtype(s.dtype):
                raise InterpreterError(f"{name} at {op.location}: reference produced "
                                       f"{tuple(t.shape)} {t.dtype}, IR says {s}")
            env[r] = t
    raise InterpreterError("block has no terminator")


def _concrete(spec: TensorSpec, sizes: dict[str, int]) -> TensorSpec:
    return spec if spec.is_static else spec.with_shape(abi.eval_dim(d, sizes) for d in spec.shape)


def _find_func(module: ir.Operation | None, name: str) -> ir.Operation:
    if module is None:
        raise InterpreterError(f"call to @{name} outside a module")
    for op in module.regions[0].blocks[0].operations:
        if op.operation.name == "func.func" and ir.StringAttr(op.attributes["sym_name"]).value == name:
            return op.operation
    raise InterpreterError(f"no function @{name}")


def bound_sizes(func_op: ir.Operation, args: Sequence[torch.Tensor],
                sizes: dict[str, int] | None = None) -> dict[str, int]:
    """The values of the symbolic sizes of `func_op` called with `args` (and `sizes`, the
    values bound where a backward's forward ran)."""
    block = func_op.operation.regions[0].blocks[0]
    specs = [TensorSpec.from_mlir(a.type) for a in block.arguments]
    try:
        return abi.bind_sizes([s.shape for s in specs], [tuple(t.shape) for t in args],
                              known=sizes)
    except abi.SizeMismatch as e:
        raise InterpreterError(f"arguments do not fit the function: {e}") from None


def run_function(func_op: ir.Operation, args: Sequence[torch.Tensor],
                 sizes: dict[str, int] | None = None) -> list[torch.Tensor]:
    """Evaluate a `func.func` of dg ops on torch tensors. A function of symbolic sizes
    reads their values off `args`; `sizes` gives those they do not show (a backward's
    sizes, bound where its forward ran: `bound_sizes`)."""
    func_op = func_op.operation
    parent = func_op.parent
    module = parent.operation if parent is not None else None
    sizes = bound_sizes(func_op, args, sizes)
    try:
        return _run_block(func_op.regions[0].blocks[0], list(args), module, sizes=sizes)
    except ValueError as e:  # a size its arguments do not bind (abi.eval_dim)
        if "is not known" not in str(e):
            raise
        raise InterpreterError(f"@{ir.StringAttr(func_op.attributes['sym_name']).value}: "
                               f"{e}; pass the values bound where its forward ran "
                               "(run_function(..., sizes=bound_sizes(fwd, fwd_args)))") from None
