"""Errors from compiled code: checked indices for gather-like lowerings (memory-safe),
and failed library calls; either reaches the caller.

Compiled code cannot raise. An index outside [0, size) is clamped to 0, so the
kernel never touches memory outside the tensor, and the op's site number is
stored in the module global `ERROR_GLOBAL`. The module attribute `SITES_ATTR`
lists the sites ("dg.gather at file:line"), and the function `TAKE_ERROR`
(out: memref<i32>) reads and clears the global. The CPU runtime calls it after
every call and raises IndexError naming the site, as eager PyTorch would.

A call of PyTorch's C shim that fails (codegen/cpu/library/torch_calls.py) leaves its
outputs unwritten; its helper passes `LIBRARY_FAILED` the failure (the call's number in
runtime.cpu.LIBRARY_CALLS | its code << 8) and the site of the kind of call (`library_site`:
"a compiled convolution"), which stores site | failure << 16 in the same global: the
runtime raises LibraryCallError naming both.
"""
from __future__ import annotations

from typing import Any

from mlir import ir
from mlir.dialects import arith, memref, scf

from .sizes import size_value

ERROR_GLOBAL = "__fusegrad_index_error"
TAKE_ERROR = "__fusegrad_take_index_error"
SITES_ATTR = "dg.index_sites"
LIBRARY_FAILED = "__fusegrad_library_failed"

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

# records a failed library call (`failure` != 0) at `site` (the global is _GLOBALS')
_LIBRARY_FAILED = f"""
memref.global @{ERROR_GLOBAL} : memref<i32> = dense<0>
func.func private @{LIBRARY_FAILED}(%failure: i32, %site: i32) {{
  %zero = arith.constant 0 : i32
  %failed = arith.cmpi ne, %failure, %zero : i32
  scf.if %failed {{
    %c16 = arith.constant 16 : i32
    %high = arith.shli %failure, %c16 : i32
    %value = arith.ori %high, %site : i32
    %flag = memref.get_global @{ERROR_GLOBAL} : memref<i32>
    memref.store %value, %flag[] : memref<i32>
  }}
  return
}}
"""


def _module_of(op: ir.Operation) -> ir.Operation:
    while op.operation.name != "builtin.module":
        op = op.operation.parent
    return op.operation


def _sites(module: ir.Operation) -> list[str]:
    return [ir.StringAttr(s).value for s in ir.ArrayAttr(module.attributes[SITES_ATTR])] \
        if SITES_ATTR in module.attributes else []


def _add_site(module: ir.Operation, site: str) -> int:
    """`site`'s 1-based number, creating the error global on first use."""
    sites = _sites(module)
    if not sites:
        body = module.regions[0].blocks[0]
        first = body.operations[0]
        for decl in ir.Module.parse(_GLOBALS).body.operations:
            decl.operation.clone(ip=ir.InsertionPoint(first))
    sites.append(site)
    module.attributes[SITES_ATTR] = ir.ArrayAttr.get([ir.StringAttr.get(s) for s in sites])
    return len(sites)


def _register_site(op: ir.Operation) -> int:
    """The 1-based site number of `op`, creating the error global on first use."""
    loc = str(op.location)
    return _add_site(_module_of(op),
                     f"{op.name} at {loc[4:-1] if loc.startswith('loc(') else loc}")


def library_site(module: ir.Operation, what: str) -> int:
    """The site number of library calls doing `what` ("a compiled convolution"), and the
    function `LIBRARY_FAILED` that records their failures."""
    sites = _sites(module)
    if what in sites:
        return sites.index(what) + 1
    site = _add_site(module, what)
    body = module.regions[0].blocks[0]
    if not any(LIBRARY_FAILED == ir.StringAttr(o.operation.attributes["sym_name"]).value
               for o in body.operations if "sym_name" in o.operation.attributes):
        for decl in ir.Module.parse(_LIBRARY_FAILED).body.operations:
            if decl.operation.name == "func.func":
                body.append(decl.operation.clone())
    return site


def checked_index(op: ir.Operation, value: ir.Value, size: Any) -> ir.Value:
    """`value` (an integer index scalar) as `index`, clamped into [0, size); records `op`
    as the failing site when it is out of range."""
    site = _register_site(op)
    i = arith.IndexCastOp(ir.IndexType.get(), value).result
    zero = arith.ConstantOp(ir.IndexType.get(), 0).result
    bound = arith.ConstantOp(ir.IndexType.get(), size).result if isinstance(size, int) \
        else size_value(size)
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
