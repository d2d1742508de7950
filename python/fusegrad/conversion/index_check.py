"""Checked indices for gather-like lowerings: memory-safe, and errors reach the caller.

Compiled code cannot raise. An index outside [0, size) is clamped to 0, so the
kernel never touches memory outside the tensor, and the op's site number is
stored in the module global `ERROR_GLOBAL`. The module attribute `SITES_ATTR`
lists the sites ("dg.gather at file:line"), and the function `TAKE_ERROR`
(out: memref<i32>) reads and clears the global. The CPU runtime calls it after
every call and raises IndexError naming the site, as eager PyTorch would.
"""
from __future__ import annotations

from mlir import ir
from mlir.dialects import arith, memref, scf

ERROR_GLOBAL = "__fusegrad_index_error"
TAKE_ERROR = "__fusegrad_take_index_error"
SITES_ATTR = "dg.index_sites"

_GLOBALS = f"""
memref.global @{ERROR_GLOBAL} : memref<i32> = dense<0>
func.func @{TAKE_ERROR}(%out: memref<i32>) attributes {{llvm.emit_c_interface}} {{
  %flag = memref.get_global @{ERROR_GLOBAL} : memref<i32>
  %site = memref.load %flag[] : memref<i32>
  memref.store %site, %out[] : memref<i32>
  %zero = arith.constant 0 : i32
  memref.store %zero, %flag[] : memref<i32>
  return
}}
"""


def _module_of(op: ir.Operation) -> ir.Operation:
    while op.operation.name != "builtin.module":
        op = op.operation.parent
    return op.operation


def _register_site(op: ir.Operation) -> int:
    """The 1-based site number of `op`, creating the error global on first use."""
    module = _module_of(op)
    sites = [ir.StringAttr(s).value for s in ir.ArrayAttr(module.attributes[SITES_ATTR])] \
        if SITES_ATTR in module.attributes else []
    if not sites:
        body = module.regions[0].blocks[0]
        first = body.operations[0]
        for decl in ir.Module.parse(_GLOBALS).body.operations:
            decl.operation.clone(ip=ir.InsertionPoint(first))
    loc = str(op.location)
    sites.append(f"{op.name} at {loc[4:-1] if loc.startswith('loc(') else loc}")
    module.attributes[SITES_ATTR] = ir.ArrayAttr.get([ir.StringAttr.get(s) for s in sites])
    return len(sites)


def checked_index(op: ir.Operation, value: ir.Value, size: int) -> ir.Value:
    """`value` (an integer index scalar) as `index`, clamped into [0, size); records `op`
    as the failing site when it is out of range."""
    site = _register_site(op)
    i = arith.IndexCastOp(ir.IndexType.get(), value).result
    zero = arith.ConstantOp(ir.IndexType.get(), 0).result
    bound = arith.ConstantOp(ir.IndexType.get(), size).result
    ok = arith.AndIOp(arith.CmpIOp(arith.CmpIPredicate.sge, i, zero).result,
                      arith.CmpIOp(arith.CmpIPredicate.slt, i, bound).result).result
    bad = arith.XOrIOp(ok, arith.ConstantOp(ir.IntegerType.get_signless(1), 1).result).result
    flag_type = ir.MemRefType.get([], ir.IntegerType.get_signless(32))
    if_op = scf.IfOp(bad)
    with ir.InsertionPoint(if_op.then_block):
        flag = memref.GetGlobalOp(flag_type, ERROR_GLOBAL).result
        memref.StoreOp(arith.ConstantOp(ir.IntegerType.get_signless(32), site).result, flag, [])
        scf.YieldOp([])
    return arith.SelectOp(ok, i, zero).result
