"""An emulator of outlined CUDA kernels on CPU tensors, for the CUDA tests without a GPU.

`EmulatingDriver` is a `FakeDriver` that, instead of recording a launch only, runs the
kernel's `gpu.func` as the pipeline has it before NVVM (`pipelines.cuda_kernels_pipeline`:
gpu, scf, arith, math and memref ops) on the tensors whose pointers the runtime passes,
which are CPU tensors in these tests (`CudaProgram(device="cpu")`). It runs all threads
of the grid at once, SIMT style: each SSA value is a tensor over the threads (or one
value they share), a branch or loop that threads take differently runs under a mask
of the threads taking it, and `gpu.all_reduce` reduces over each block's threads. So
the kernels' indexing, bounds, grids and size parameters are checked against eager
results; what NVVM and ptxas make of them is not (ptxas acceptance is tested apart).
Barriers are no-ops: all threads see every store at once, so a missing barrier goes
unnoticed here. A compare-and-swap (`llvm.cmpxchg`, the loop of a float scatter-max)
succeeds for one thread per address at a time. Every load and store must fall inside a tensor the driver knows
(`EmulatingDriver.tracking`: the tensors allocated meanwhile, and those passed):
an access out of bounds raises IndexError naming the kernel.
"""
from __future__ import annotations

import bisect
import contextlib
import ctypes
from dataclasses import dataclass
from typing import Any, Callable, Iterator

import torch
from mlir import ir

from cuda_fakes import FakeDriver

_DTYPES = {"f16": torch.float16, "bf16": torch.bfloat16, "f32": torch.float32,
           "f64": torch.float64, "i1": torch.bool, "i8": torch.int8, "i16": torch.int16,
           "i32": torch.int32, "i64": torch.int64, "index": torch.int64}


def _dtype(t: ir.Type) -> torch.dtype:
    return _DTYPES[str(t)]


@dataclass
class _Memref:
    """A memref in a kernel: its buffer's address, element type, and strided geometry in
    elements (each a Python int or a tensor over the threads)."""

    address: int
    dtype: torch.dtype
    offset: Any
    sizes: list
    strides: list

    def linear(self, indices: list) -> Any:
        out = self.offset
        for i, s in zip(indices, self.strides):
            out = out + i * s
        return out


def _memory(address: int, dtype: torch.dtype, linear: torch.Tensor,
            check: Callable[[int, int], None]) -> torch.Tensor:
    """The elements at `address` up to the largest of `linear` (element indices, all
    read or written: `check(first byte, end)` raises unless they are known memory), as a
    tensor sharing the memory."""
    size = torch.empty((), dtype=dtype).element_size()
    count = int(linear.max()) + 1
    check(address + int(linear.min()) * size, address + count * size)
    return torch.frombuffer((ctypes.c_char * (count * size)).from_address(address),
                            dtype=dtype, count=count)


def _row_major(shape: list) -> list:
    strides, step = [], 1
    for s in reversed(shape):
        strides.insert(0, step)
        step = step * s
    return strides


_BINARY = {
    "arith.addf": torch.add, "arith.subf": torch.sub, "arith.mulf": torch.mul,
    "arith.divf": torch.div, "arith.addi": torch.add, "arith.subi": torch.sub,
    "arith.muli": torch.mul, "arith.divui": lambda a, b: torch.div(a, b, rounding_mode="floor"),
    "arith.divsi": lambda a, b: torch.div(a, b, rounding_mode="trunc"),
    "arith.floordivsi": lambda a, b: torch.div(a, b, rounding_mode="floor"),
    "arith.ceildivui": lambda a, b: -torch.div(-a, b, rounding_mode="floor"),
    "arith.ceildivsi": lambda a, b: -torch.div(-a, b, rounding_mode="floor"),
    "arith.remui": torch.remainder, "arith.remsi": torch.fmod,
    "arith.maximumf": torch.maximum, "arith.minimumf": torch.minimum,
    "arith.maxnumf": torch.fmax, "arith.minnumf": torch.fmin,
    "arith.maxsi": torch.maximum, "arith.minsi": torch.minimum,
    "arith.maxui": torch.maximum, "arith.minui": torch.minimum,
    "arith.andi": lambda a, b: a & b, "arith.ori": lambda a, b: a | b,
    "arith.xori": lambda a, b: a ^ b, "arith.remf": torch.fmod,
    "arith.shli": lambda a, b: a << b, "arith.shrsi": lambda a, b: a >> b,
    "math.powf": torch.pow, "math.atan2": torch.atan2,
}
_UNARY = {
    "math.exp": torch.exp, "math.log": torch.log, "math.tanh": torch.tanh,
    "math.rsqrt": torch.rsqrt, "math.sqrt": torch.sqrt, "math.erf": torch.erf,
    "math.sin": torch.sin, "math.cos": torch.cos, "math.absf": torch.abs,
    "math.log1p": torch.log1p, "math.expm1": torch.expm1, "math.floor": torch.floor,
    "math.ceil": torch.ceil, "math.log2": torch.log2, "math.exp2": torch.exp2,
    "math.roundeven": torch.round, "math.atan": torch.atan, "math.tan": torch.tan,
    "arith.negf": torch.neg, "math.absi": torch.abs, "math.trunc": torch.trunc,
    "math.asin": torch.asin, "math.acos": torch.acos, "math.sinh": torch.sinh,
    "math.cosh": torch.cosh, "math.asinh": torch.asinh, "math.acosh": torch.acosh,
    "math.atanh": torch.atanh, "math.erfc": torch.erfc, "math.round": torch.round,
    "math.cbrt": lambda x: x.sign() * x.abs().pow(1 / 3),
}
_CMP = {0: "eq", 1: "ne", 2: "lt", 3: "le", 4: "gt", 5: "ge", 6: "lt", 7: "le", 8: "gt",
        9: "ge"}  # arith.cmpi predicates (signed, then unsigned: sizes are non-negative)
_CMPF = {0: "zeros_like", 1: "eq", 2: "gt", 3: "ge", 4: "lt", 5: "le", 6: "ne",
         7: "zeros_like", 8: "eq", 9: "gt", 10: "ge", 11: "lt", 12: "le", 13: "ne",
         14: "zeros_like", 15: "ones_like"}  # ordered (1-7), unordered (8-14)
# arith.AtomicRMWKind -> how the elements combine
_ATOMIC = {0: "add", 1: "add", 4: "amax", 5: "amax", 6: "amax", 8: "amin", 9: "amin", 10: "amin"}
_REDUCE = {"add": lambda x: x.sum(1), "mul": lambda x: x.prod(1),
           "maximumf": lambda x: x.max(1).values, "minimumf": lambda x: x.min(1).values,
           "maxnumf": lambda x: x.nan_to_num(float("-inf")).max(1).values,
           "minnumf": lambda x: x.nan_to_num(float("inf")).min(1).values,
           "maxsi": lambda x: x.max(1).values, "minsi": lambda x: x.min(1).values,
           "maxui": lambda x: x.max(1).values, "minui": lambda x: x.min(1).values,
           "or": lambda x: x.any(1) if x.dtype == torch.bool else _fold(x, torch.bitwise_or),
           "and": lambda x: x.all(1) if x.dtype == torch.bool else _fold(x, torch.bitwise_and),
           "xor": lambda x: _fold(x, torch.bitwise_xor)}


def _affine(e: ir.AffineExpr, dims: list, symbols: list) -> Any:
    if isinstance(e, ir.AffineDimExpr):
        return dims[e.position]
    if isinstance(e, ir.AffineSymbolExpr):
        return symbols[e.position]
    if isinstance(e, ir.AffineConstantExpr):
        return torch.tensor(e.value)
    a, b = _affine(e.lhs, dims, symbols), _affine(e.rhs, dims, symbols)
    for kind, name in ((ir.AffineAddExpr, "arith.addi"), (ir.AffineMulExpr, "arith.muli"),
                       (ir.AffineFloorDivExpr, "arith.floordivsi"),
                       (ir.AffineCeilDivExpr, "arith.ceildivsi"),
                       (ir.AffineModExpr, "arith.remui")):
        if isinstance(e, kind):
            return _BINARY[name](a, b)
    raise NotImplementedError(f"affine expression {e}")


def _fold(x: torch.Tensor, op) -> torch.Tensor:
    out = x[:, 0]
    for k in range(1, x.shape[1]):
        out = op(out, x[:, k])
    return out


class _Launch:
    """One launch: `threads` lanes, lane = block * threads_per_block + thread."""

    def __init__(self, grid: list, block: list, check: Callable[[int, int], None]) -> None:
        self.grid, self.block, self.check = grid, block, check
        self.per_block = block[0] * block[1] * block[2]
        self.blocks = grid[0] * grid[1] * grid[2]
        lane = torch.arange(self.blocks * self.per_block)
        b, t = lane // self.per_block, lane % self.per_block
        self.block_id = [b % grid[0], (b // grid[0]) % grid[1], b // (grid[0] * grid[1])]
        self.thread_id = [t % block[0], (t // block[0]) % block[1], t // (block[0] * block[1])]
        self.lanes = lane.numel()

    def run(self, fn: ir.Operation, params: list) -> None:
        body = fn.regions[0].blocks[0]
        env: dict = {}
        for arg, (kind, value) in zip(body.arguments, params):
            if isinstance(arg.type, ir.MemRefType):
                t = ir.MemRefType(arg.type)
                shape = list(t.shape)
                env[arg] = _Memref(value, _dtype(t.element_type), 0, shape, _row_major(shape))
            else:
                env[arg] = value
        self.block_(body, env, torch.ones(self.lanes, dtype=torch.bool))

    def block_(self, block: ir.Block, env: dict, mask: torch.Tensor) -> list:
        for op in block.operations:
            op = op.operation
            if op.name in ("scf.yield", "gpu.yield", "gpu.return", "gpu.terminator"):
                return [env[v] for v in op.operands]
            self.op(op, env, mask)
        return []

    def op(self, op: ir.Operation, env: dict, mask: torch.Tensor) -> None:
        name = op.name
        args = [env.get(v) for v in op.operands]
        if name in _BINARY:
            out = _BINARY[name](_t(args[0]), _t(args[1]))
            out = out.to(_dtype(op.results[0].type)) if isinstance(out, torch.Tensor) else out
        elif name in _UNARY:
            out = _UNARY[name](_t(args[0]))
        elif name == "arith.constant":
            attr = op.attributes["value"]
            t = op.results[0].type
            value = ir.FloatAttr(attr).value if isinstance(attr, ir.FloatAttr) else \
                bool(ir.IntegerAttr(attr).value) if str(t) == "i1" else ir.IntegerAttr(attr).value
            out = torch.tensor(value, dtype=_dtype(t))
        elif name == "arith.cmpi" or name == "arith.cmpf":
            table = _CMP if name == "arith.cmpi" else _CMPF
            p = ir.IntegerAttr(op.attributes["predicate"]).value
            a, b = _t(args[0]), _t(args[1])
            if table[p].endswith("_like"):  # false, ord and uno: by NaNs alone
                out = getattr(torch, table[p])(a + b, dtype=torch.bool)
            else:
                out = getattr(torch, table[p])(a, b)
            if name == "arith.cmpf" and p in (1, 2, 3, 4, 5, 6, 7):
                out = (out | (p == 7)) & ~(a.isnan() | b.isnan())
            elif name == "arith.cmpf" and p in (8, 9, 10, 11, 12, 13, 14):
                out = out | a.isnan() | b.isnan()
        elif name == "arith.select":
            out = torch.where(_t(args[0]), _t(args[1]), _t(args[2]))
        elif name in ("arith.index_cast", "arith.index_castui", "arith.extsi", "arith.extui",
                      "arith.trunci", "arith.sitofp", "arith.uitofp", "arith.extf",
                      "arith.truncf"):
            x = _t(args[0])
            if name == "arith.extui" and x.dtype != torch.bool and x.dtype.is_signed:
                x = x.to(torch.int64) & ((1 << (8 * x.element_size())) - 1)
            out = x.to(_dtype(op.results[0].type))
        elif name == "arith.fptosi":
            out = _t(args[0]).trunc().to(_dtype(op.results[0].type))
        elif name == "gpu.block_id" or name == "gpu.thread_id":
            d = str(op.attributes["dimension"])[-2]  # #gpu<dim x>
            out = (self.block_id if name == "gpu.block_id" else self.thread_id)["xyz".index(d)]
        elif name == "gpu.block_dim":
            out = torch.tensor(self.block["xyz".index(str(op.attributes["dimension"])[-2])])
        elif name == "gpu.grid_dim":
            out = torch.tensor(self.grid["xyz".index(str(op.attributes["dimension"])[-2])])
        elif name == "gpu.barrier":
            return
        elif name == "gpu.all_reduce":
            kind = str(op.attributes["op"]).split()[-1].rstrip(">")
            x = _t(args[0]).expand(self.lanes).reshape(self.blocks, self.per_block)
            out = _REDUCE[kind](x).to(x.dtype).repeat_interleave(self.per_block)
        elif name == "memref.load":
            out = self.load(args[0], [_t(a) for a in args[1:]], mask)
        elif name == "memref.store":
            self.store(args[1], [_t(a) for a in args[2:]], _t(args[0]), mask)
            return
        elif name == "memref.atomic_rmw":
            self.atomic(op, args, mask)
            out = None  # (the old value: unused by the kernels)
        elif name in ("memref.reinterpret_cast", "memref.subview", "memref.expand_shape",
                      "memref.collapse_shape", "memref.cast"):
            out = self.view(op, args)
        elif name == "affine.apply":
            amap = ir.AffineMapAttr(op.attributes["map"]).value
            values = [_t(a) for a in args]
            out = _affine(amap.results[0], values[:amap.n_dims], values[amap.n_dims:])
        elif name == "memref.extract_strided_metadata":
            m = args[0]
            base = _Memref(m.address, m.dtype, 0, [], [])
            env.update(zip(op.results, [base, _t(m.offset), *map(_t, m.sizes),
                                        *map(_t, m.strides)]))
            return
        elif name == "memref.extract_aligned_pointer_as_index":
            out = torch.tensor(args[0].address)
        elif name == "llvm.inttoptr":
            out = _t(args[0])
        elif name == "arith.bitcast":
            out = _t(args[0]).view(_dtype(op.results[0].type))
        elif name == "llvm.load":
            out = self.at_addresses(_t(args[0]), _dtype(op.results[0].type), mask)[0]
        elif name == "llvm.cmpxchg":
            out = self.compare_and_swap(*(_t(a) for a in args), mask)
        elif name == "llvm.extractvalue":
            out = args[0][list(ir.DenseI64ArrayAttr(op.attributes["position"]))[0]]
        elif name == "scf.while":
            env.update(zip(op.results, self.while_(op, args, env, mask)))
            return
        elif name == "memref.dim":
            out = torch.tensor(args[0].sizes[int(_t(args[1]))])
        elif name == "scf.if" or name == "scf.for":
            results = (self.if_ if name == "scf.if" else self.for_)(op, args, env, mask)
            env.update(zip(op.results, results))
            return
        else:
            raise NotImplementedError(f"the kernel emulator has no {name}")
        if len(op.results):
            env[op.results[0]] = out

    def load(self, m: _Memref, indices: list, mask: torch.Tensor) -> torch.Tensor:
        linear = torch.as_tensor(m.linear(indices)).expand(self.lanes)
        active = linear[mask]
        out = torch.zeros(self.lanes, dtype=m.dtype)
        if active.numel():
            out[mask] = _memory(m.address, m.dtype, active, self.check)[active]
        return out

    def store(self, m: _Memref, indices: list, value: torch.Tensor,
              mask: torch.Tensor) -> None:
        linear = torch.as_tensor(m.linear(indices)).expand(self.lanes)
        active = linear[mask]
        if active.numel():
            memory = _memory(m.address, m.dtype, active, self.check)
            memory[active] = value.to(m.dtype).expand(self.lanes)[mask]

    def at_addresses(self, addresses: torch.Tensor, dtype: torch.dtype,
                     mask: torch.Tensor) -> tuple[torch.Tensor, Any, torch.Tensor]:
        """The values at byte `addresses` (active lanes; the others 0), the memory
        holding them and each active lane's element index in it."""
        size = torch.empty((), dtype=dtype).element_size()
        addresses = addresses.expand(self.lanes)[mask]
        out = torch.zeros(self.lanes, dtype=dtype)
        if not addresses.numel():
            return out, None, addresses
        base = int(addresses.min())
        linear = (addresses - base) // size
        memory = _memory(base, dtype, linear, self.check)
        out[mask] = memory[linear]
        return out, memory, linear

    def compare_and_swap(self, address: torch.Tensor, expected: torch.Tensor,
                         new: torch.Tensor, mask: torch.Tensor) -> tuple:
        """`llvm.cmpxchg` by every active lane: of the lanes finding their expected value
        at one address, the first stores its new one; each lane gets the value it found
        and whether it stored."""
        found, memory, linear = self.at_addresses(address, expected.dtype, mask)
        stored = torch.zeros(self.lanes, dtype=torch.bool)
        if memory is not None:
            lanes = mask.nonzero().flatten()  # (the active lanes, as `linear` has them)
            hits = found[lanes] == expected.expand(self.lanes)[lanes]
            first = torch.full((int(linear.max()) + 1,), self.lanes, dtype=torch.long)
            first.scatter_reduce_(0, linear[hits], lanes[hits], "amin")
            won = hits & (first[linear] == lanes)
            stored[lanes[won]] = True
            memory[linear[won]] = new.expand(self.lanes)[lanes[won]]
        return found, stored

    def atomic(self, op: ir.Operation, args: list, mask: torch.Tensor) -> None:
        value, m = _t(args[0]), args[1]
        linear = torch.as_tensor(m.linear([_t(a) for a in args[2:]])).expand(self.lanes)[mask]
        if not linear.numel():
            return
        memory = _memory(m.address, m.dtype, linear, self.check)
        values = value.to(m.dtype).expand(self.lanes)[mask]
        kind = _ATOMIC[ir.IntegerAttr(op.attributes["kind"]).value]
        if kind == "add":
            memory.index_add_(0, linear, values)
        else:
            memory.scatter_reduce_(0, linear, values, kind)

    def view(self, op: ir.Operation, args: list) -> _Memref:
        source: _Memref = args[0]
        t = ir.MemRefType(op.results[0].type)
        if op.name == "memref.cast":
            return source
        dynamic = iter(_t(a) for a in args[1:])
        marker = ir.ShapedType.get_dynamic_size()

        def mixed(attr: str) -> list:
            return [next(dynamic) if x == marker else x
                    for x in ir.DenseI64ArrayAttr(op.attributes[attr])]
        if op.name == "memref.reinterpret_cast":
            offsets, sizes, strides = (mixed("static_offsets"), mixed("static_sizes"),
                                       mixed("static_strides"))
            return _Memref(source.address, source.dtype, offsets[0], sizes, strides)
        if op.name == "memref.subview":
            offsets, sizes, steps = (mixed("static_offsets"), mixed("static_sizes"),
                                     mixed("static_strides"))
            offset = source.linear(offsets)
            strides = [a * b for a, b in zip(source.strides, steps)]
            static = list(ir.DenseI64ArrayAttr(op.attributes["static_sizes"]))
            kept, r = [], list(t.shape)
            for d, s in enumerate(static):
                if len(kept) < len(r) and r[len(kept)] == s:
                    kept.append(d)
            return _Memref(source.address, source.dtype, offset, [sizes[d] for d in kept],
                           [strides[d] for d in kept])
        groups = [[ir.IntegerAttr(d).value for d in ir.ArrayAttr(g)]
                  for g in ir.ArrayAttr(op.attributes["reassociation"])]
        if op.name == "memref.collapse_shape":
            sizes = []
            for g in groups:
                n = 1
                for d in g:
                    n = n * source.sizes[d]
                sizes.append(n)
            return _Memref(source.address, source.dtype, source.offset, sizes,
                           [source.strides[g[-1]] for g in groups])
        shape = mixed("static_output_shape")
        strides = [0] * len(shape)
        for j, g in enumerate(groups):
            step = source.strides[j]
            for d in reversed(g):
                strides[d] = step
                step = step * shape[d]
        return _Memref(source.address, source.dtype, source.offset, shape, strides)

    def if_(self, op: ir.Operation, args: list, env: dict, mask: torch.Tensor) -> list:
        cond = _t(args[0]).expand(self.lanes) & mask
        regions = op.regions
        then = self.block_(regions[0].blocks[0], env, cond) if cond.any() else None
        otherwise = mask & ~cond
        other = self.block_(regions[1].blocks[0], env, otherwise) \
            if len(regions[1].blocks) and otherwise.any() else None
        if not len(op.results):
            return []
        if then is None:
            return other
        if other is None:
            return then
        return [torch.where(cond, _t(a), _t(b)) for a, b in zip(then, other)]

    def while_(self, op: ir.Operation, args: list, env: dict, mask: torch.Tensor) -> list:
        """`scf.while`: each lane loops until its `scf.condition` is false, leaving the
        values it forwarded then."""
        before, after = op.regions[0].blocks[0], op.regions[1].blocks[0]
        carried = [_t(a).expand(self.lanes).clone() for a in args]
        results = [c.clone() for c in carried]
        active = mask.clone()
        while active.any():
            env.update(zip(before.arguments, carried))
            for inner in before.operations:
                inner = inner.operation
                if inner.name == "scf.condition":
                    cond = _t(env[inner.operands[0]]).expand(self.lanes)
                    forwarded = [_t(env[v]) for v in list(inner.operands)[1:]]
                    break
                self.op(inner, env, active)
            leaving = active & ~cond
            results = [torch.where(leaving, f, r) for f, r in zip(forwarded, results)]
            active = active & cond
            if active.any():
                env.update(zip(after.arguments, forwarded))
                new = self.block_(after, env, active)
                carried = [torch.where(active, _t(n), c) for n, c in zip(new, carried)]
        return results

    def for_(self, op: ir.Operation, args: list, env: dict, mask: torch.Tensor) -> list:
        lb, ub, step = (_t(a) for a in args[:3])
        carried = [_t(a) for a in args[3:]]
        body = op.regions[0].blocks[0]
        iv = lb.expand(self.lanes).clone()
        active = mask & (iv < ub)
        while active.any():
            env[body.arguments[0]] = iv
            for a, v in zip(list(body.arguments)[1:], carried):
                env[a] = v
            new = self.block_(body, env, active)
            carried = [torch.where(active, _t(n), _t(c)) for n, c in zip(new, carried)]
            iv = iv + step
            active = active & (iv < ub)
        return carried


def _t(x: Any) -> Any:
    return x if isinstance(x, (torch.Tensor, _Memref)) else torch.as_tensor(x)


class EmulatingDriver(FakeDriver):
    """A fake driver running each launch of `plan` in the emulator: `kernels` is the
    module after `pipelines.cuda_kernels_pipeline` (its `gpu.module`s are the plan's
    kernel modules), in a live context."""

    def __init__(self, kernels: ir.Module, plan: Any) -> None:
        super().__init__()
        self.kernels = kernels  # (its ops live while it does)
        self._starts: list[int] = []  # the known memory: sorted starts, and their ends
        self._ends: dict[int, int] = {}
        # a loaded image's module, by the image's bytes
        self._modules = {image: m.name for m in plan.modules.values()
                         for i in m.images.values() for image in (i.ptx, i.cubin) if image}
        self.functions: dict[tuple[str, str], ir.Operation] = {}  # (module, kernel) -> code
        for op in kernels.body.operations:
            if op.operation.name == "gpu.module":
                module = ir.StringAttr(op.operation.attributes["sym_name"]).value
                for fn in op.operation.regions[0].blocks[0].operations:
                    if fn.operation.name == "gpu.func":
                        name = ir.StringAttr(fn.operation.attributes["sym_name"]).value
                        self.functions[(module, name)] = fn.operation

    def load_module(self, image: bytes, kind: str):
        super().load_module(image, kind)
        return self._modules[image]

    def know(self, *tensors: torch.Tensor) -> None:
        """Kernels may read and write the memory of `tensors`."""
        for t in tensors:
            storage = t.untyped_storage()
            start = storage.data_ptr()
            if start not in self._ends:
                bisect.insort(self._starts, start)
            self._ends[start] = max(self._ends.get(start, start), start + storage.nbytes())

    @contextlib.contextmanager
    def tracking(self, *tensors: torch.Tensor) -> Iterator[None]:
        """Know `tensors` and every tensor `torch.empty` allocates meanwhile (the
        runtime's outputs and temporaries), until the context ends."""
        known = list(self._starts), dict(self._ends)
        self.know(*tensors)
        empty = torch.empty

        def tracked(*args: Any, **kwargs: Any) -> torch.Tensor:
            t = empty(*args, **kwargs)
            self.know(t)
            return t
        torch.empty = tracked
        try:
            yield
        finally:
            torch.empty = empty
            self._starts, self._ends = known

    def _check(self, kernel: str) -> Callable[[int, int], None]:
        def check(first: int, end: int) -> None:
            # (memory freed and allocated again may be known twice, at other starts)
            k = bisect.bisect_right(self._starts, first)
            if not any(end <= self._ends[start] for start in self._starts[:k]):
                raise IndexError(f"kernel {kernel} accesses bytes [{first:#x}, {end:#x}) "
                                 "outside the tensors it was given")
        return check

    def launch(self, function, grid, block, smem, stream, params) -> None:
        super().launch(function, grid, block, smem, stream, params)
        _Launch(list(grid), list(block), self._check("::".join(function))).run(
            self.functions[function], list(params))
