"""Reference semantics: evaluate dg functions with eager torch.

This is the executable specification every lowering and every autodiff rule
is tested against; it is not meant to be fast.
"""
from __future__ import annotations

from typing import Sequence

from mlir import ir

from .core import attrs_of, lookup
from .region_ops import FUSION_TERMINATOR, is_fusion
from .types import TensorSpec, torch_dtype
from .lazy_torch import torch


class InterpreterError(RuntimeError):
    pass


def _run_block(block: ir.Block, args: Sequence[torch.Tensor], module: ir.Operation | None,
               env: dict | None = None):
    env = dict(env or {})  # a fusion region sees the values of its enclosing block
    for a, t in zip(block.arguments, args):
        env[a] = t
    for op in block.operations:
        name = op.operation.name
        if name in ("func.return", FUSION_TERMINATOR):
            return [env[v] for v in op.operands]
        if is_fusion(op):
            outs = _run_block(op.regions[0].blocks[0], [], module, env)
            for r, t in zip(op.results, outs):
                env[r] = t
            continue
        ins = [env[v] for v in op.operands]
        if name == "func.call":
            callee = ir.FlatSymbolRefAttr(op.attributes["callee"]).value
            outs = run_function(_find_func(module, callee), ins)
        elif name.startswith("dg."):
            d = lookup(name)
            out_specs = [TensorSpec.from_mlir(r.type) for r in op.results]
            outs = d.reference(*ins, op=d.name, attrs=attrs_of(op.operation), out=out_specs)
        else:
            raise InterpreterError(f"the reference interpreter cannot run '{name}' at {op.location}")
        for r, t in zip(op.results, outs):
            s = TensorSpec.from_mlir(r.type)
            if tuple(t.shape) != s.shape or t.dtype != torch_dtype(s.dtype):
                raise InterpreterError(f"{name} at {op.location}: reference produced "
                                       f"{tuple(t.shape)} {t.dtype}, IR says {s}")
            env[r] = t
    raise InterpreterError("block has no terminator")


def _find_func(module: ir.Operation | None, name: str) -> ir.Operation:
    if module is None:
        raise InterpreterError(f"call to @{name} outside a module")
    for op in module.regions[0].blocks[0].operations:
        if op.operation.name == "func.func" and ir.StringAttr(op.attributes["sym_name"]).value == name:
            return op.operation
    raise InterpreterError(f"no function @{name}")


def run_function(func_op: ir.Operation, args: Sequence[torch.Tensor]) -> list[torch.Tensor]:
    """Evaluate a `func.func` of dg ops on torch tensors."""
    func_op = func_op.operation
    parent = func_op.parent
    module = parent.operation if parent is not None else None
    return _run_block(func_op.regions[0].blocks[0], list(args), module)
