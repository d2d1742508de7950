"""Launch plans: read the host side of a CUDA-lowered module into runtime steps.

After `dg-lower-to-cuda` the host functions are memref code: allocations,
views, copies, `gpu.launch_func`, library contractions, deallocations. The
plan builder walks each public function in order (notes §4(b)) into the
steps of `fusegrad.runtime.cuda.LaunchPlan`, and collects one kernel module
per `gpu.binary` (PTX per chip; cubins from `ptxas` when it is found).

A function of run-time sizes (a program compiled once for every size) computes its
sizes on the host: `memref.dim` of its arguments, size arguments
(`dg-size-arguments`), `arith` on them. The walker evaluates each such value as an
expression of the program's symbols (the arguments' dims are their signature's), and
writes allocation shapes, view geometry, grids and size kernel arguments as those
expressions' text (`runtime/plan_sizes.py` evaluates them at each call).

`compile.compile_cuda(module)` runs the pipeline and builds the plan;
`format_plan` prints it (`python -m fusegrad.codegen.cuda.compile FILE.mlir`).
"""
from __future__ import annotations

import json
import logging
import re
from typing import Optional, Sequence

from mlir import ir
from mlir.dialects import gpu

from ...conversion.sizes import SIZE_ARGUMENTS_ATTR
from ...dialects.types import TensorSpec
from ...runtime import abi
from ...runtime.abi import TensorSig
from ...runtime.cuda import Constant, Image, KernelModule, LaunchPlan, PlanError, PlanFunction
from ...runtime.sdpa import STEP_BUFFERS as ATTENTION_STEP_BUFFERS
from ..common.memrefs import SIZE_OPS
from .host_sizes import HostSizes
from .kernels import OVERWRITE_ATTR
from ..common.outline import ATTENTION_CALL, CONV_GRAD_CALL as CONV_GRAD
from ...conversion.index_check import ERROR_GLOBAL, SITES_ATTR
from ..common.memrefs import VIEWS
from ..common.entries import entry_signatures as common_entry_signatures

log = logging.getLogger(__name__)

_FORMAT_ISA = 2
_FORMAT_BIN = 3
_DTYPE = {"f16": "f16", "bf16": "bf16", "f32": "f32", "f64": "f64", "i1": "i1", "i8": "i8",
          "i16": "i16", "i32": "i32", "i64": "i64", "index": "i64"}


def _dtype(t: ir.Type) -> str:
    name = str(t)
    if name not in _DTYPE:
        raise PlanError(f"element type {name} has no runtime dtype")
    return _DTYPE[name]


def _contiguous_strides(shape: Sequence[int]) -> list[int]:
    strides, acc = [], 1
    for s in reversed(list(shape)):
        strides.append(acc)
        acc *= s
    return list(reversed(strides))


def _const_int(v: ir.Value, what: str) -> int:
    owner = v.owner
    if isinstance(owner, ir.Block) or owner.operation.name != "arith.constant":
        raise PlanError(f"{what} is not a constant: the launch plan needs static launch "
                        "sizes")
    return ir.IntegerAttr(owner.operation.attributes["value"]).value


def _dense_pair(op: ir.Operation, name: str) -> list[int]:
    attr = ir.DenseIntElementsAttr(op.attributes[name])
    return [int(x) for x in attr]


def _constant_globals(module: ir.Module) -> dict[str, ir.Operation]:
    return {ir.StringAttr(op.operation.attributes["sym_name"]).value: op.operation
            for op in module.body.operations if op.operation.name == "memref.global"
            and "constant" in op.operation.attributes}


def _constant(glob: ir.Operation, element: ir.Type) -> Constant:
    """The data of a constant `memref.global`, as the buffer type `element` reads it."""
    import numpy as np

    name = ir.StringAttr(glob.attributes["sym_name"]).value
    t = ir.MemRefType(ir.TypeAttr(glob.attributes["type"]).value)
    dtype = _dtype(element)
    array = np.array(ir.DenseElementsAttr(glob.attributes["initial_value"]))
    want = {"f32": np.float32, "f64": np.float64, "i8": np.int8, "i16": np.int16,
            "i32": np.int32, "i64": np.int64, "i1": np.bool_}.get(dtype)
    if want is None or array.dtype == object:
        raise PlanError(f"memref.global @{name}: {dtype} constants cannot be uploaded yet")
    data = np.broadcast_to(array, list(t.shape)).astype(want)
    return Constant(list(t.shape), dtype, np.ascontiguousarray(data).tobytes())


class _HostWalker:
    """Walks one host function into plan steps. Its arguments are its inputs (`inputs`,
    their specs), then its size arguments (`size_arguments`, their symbols), then its
    out-params (`outputs`: the outputs it computes); buffers are named `arg<i>` for the
    inputs and out-params in order, as the runtime binds them."""

    def __init__(self, fn: ir.Operation, inputs: Sequence[TensorSpec],
                 size_arguments: Sequence[str], outputs: Sequence[TensorSpec],
                 globals_: Optional[dict[str, ir.Operation]] = None) -> None:
        self.fn = fn
        self.globals = globals_ or {}
        self.constants: dict[str, Constant] = {}
        module = fn.parent
        self.functions = {ir.StringAttr(o.operation.attributes["sym_name"]).value: o.operation
                          for o in module.regions[0].blocks[0].operations
                          if o.operation.name == "func.func"}
        self.names: dict = {}
        self.steps: list[dict] = []
        self.count = 0
        args = list(fn.regions[0].blocks[0].arguments)
        n_in = len(inputs)
        buffers = args[:n_in] + args[n_in + len(size_arguments):]
        for i, a in enumerate(buffers):
            self.names[a] = f"arg{i}"
        self.sizes = HostSizes(
            {a: spec.shape for a, spec in zip(buffers, [*inputs, *outputs])},
            {a: abi.symbol(n) for a, n in zip(args[n_in:], size_arguments)})

    def name(self, v: ir.Value, op: ir.Operation) -> str:
        if v not in self.names:
            raise PlanError(f"{op.name} at {op.location}: operand is not a buffer the plan "
                            "knows (an argument, an alloc or a view)")
        return self.names[v]

    def fresh(self, v: ir.Value) -> str:
        n = f"t{self.count}"
        self.count += 1
        self.names[v] = n
        return n

    def walk(self) -> list[dict]:
        for op in self.fn.regions[0].blocks[0].operations:
            op = op.operation
            try:
                self.step(op)
            except PlanError as e:
                raise PlanError(f"@{ir.StringAttr(self.fn.attributes['sym_name']).value}: "
                                f"{e}") from None
        return self.steps

    def step(self, op: ir.Operation) -> None:
        name = op.name
        if name in ("arith.constant", "func.return") or name in SIZE_OPS:
            return  # (sizes: `HostSizes` evaluates those it needs)
        if name == "memref.alloc" or name == "memref.alloca":
            t = ir.MemRefType(op.results[0].type)
            shape, _, _ = self.sizes.geometry(op.results[0])
            self.steps.append({"op": "alloc", "buf": self.fresh(op.results[0]),
                               "shape": _sizes_json(shape), "dtype": _dtype(t.element_type)})
        elif name == "memref.get_global":
            symbol = ir.FlatSymbolRefAttr(op.attributes["name"]).value
            if symbol == ERROR_GLOBAL:
                self.steps.append({"op": "index_flag", "buf": self.fresh(op.results[0])})
                return
            if symbol not in self.globals:
                raise PlanError(f"memref.get_global @{symbol} at {op.location}: only constant "
                                "globals can be uploaded to the device")
            element = ir.MemRefType(op.results[0].type).element_type
            self.constants[symbol] = _constant(self.globals[symbol], element)
            self.steps.append({"op": "constant", "buf": self.fresh(op.results[0]),
                               "name": symbol})
        elif name == "memref.dealloc":
            self.steps.append({"op": "free", "buf": self.name(op.operands[0], op)})
        elif _pointer_cast(op):  # a kernel's buffer of run-time sizes: its pointer
            self.names[op.results[0]] = self.name(op.operands[0], op)
        elif name in VIEWS:
            shape, strides, offset = self.sizes.geometry(op.results[0])
            base = op.operands[0]
            # offsets are relative to the root allocation
            while not isinstance(base.owner, ir.Block) and base.owner.operation.name in VIEWS:
                base = base.owner.operation.operands[0]
            self.steps.append({"op": "view", "buf": self.fresh(op.results[0]),
                               "base": self.name(base, op), "offset": _size_json(offset),
                               "shape": _sizes_json(shape), "strides": _sizes_json(strides)})
        elif name == "memref.copy":
            self.steps.append({"op": "copy", "src": self.name(op.operands[0], op),
                               "dst": self.name(op.operands[1], op)})
        elif name == "gpu.launch_func":
            self.launch(op)
        elif name == "func.call":
            self.library_call(op)
        elif name in ("linalg.matmul", "linalg.batch_matmul"):
            a, b = list(op.opview.inputs)
            (c,) = list(op.opview.outputs)
            if str(ir.MemRefType(c.type).element_type) not in ("f32", "f64", "f16", "bf16"):
                raise PlanError(f"{name} at {op.location}: only float matmuls run as library "
                                "calls")
            self.steps.append({"op": "matmul", "a": self.name(a, op), "b": self.name(b, op),
                               "c": self.name(c, op),
                               "overwrite": OVERWRITE_ATTR in op.attributes})
        elif name in ("linalg.conv_2d_nchw_fchw", "linalg.conv_2d_ngchw_gfchw"):
            x, w = list(op.opview.inputs)
            (y,) = list(op.opview.outputs)
            self.steps.append({"op": "conv2d", "x": self.name(x, op), "w": self.name(w, op),
                               "y": self.name(y, op), "stride": _dense_pair(op, "strides"),
                               "dilation": _dense_pair(op, "dilations"), "groups": 1,
                               "overwrite": OVERWRITE_ATTR in op.attributes})
        else:
            raise PlanError(f"'{name}' at {op.location} cannot run on the CUDA host side "
                            "(the CUDA pipeline should have made it a kernel)")

    def library_call(self, op: ir.Operation) -> None:
        """A call of a function outlined for a library kernel: a convolution gradient or
        an attention."""
        callee = ir.FlatSymbolRefAttr(op.attributes["callee"]).value
        fn = self.functions.get(callee)
        if fn is not None and CONV_GRAD in fn.attributes and len(op.operands) == 3:
            self.conv_grad(op, ir.DictAttr(fn.attributes[CONV_GRAD]))
        elif fn is not None and ATTENTION_CALL in fn.attributes:
            self.attention(op, ir.DictAttr(fn.attributes[ATTENTION_CALL]))
        else:
            raise PlanError(f"func.call @{callee} at {op.location}: only convolution "
                            "gradients and attention are called from the CUDA host side")

    def attention(self, op: ir.Operation, tag: ir.DictAttr) -> None:
        """A call of an outlined dg.attention or dg.attention_grad (dg-outline-attention):
        one `attention` or `attention_grad` step, PyTorch's fused SDPA kernel (and its
        backward) on the buffers; the mask is null where it is a constant 0."""
        which = ir.StringAttr(tag["op"]).value
        fields = ATTENTION_STEP_BUFFERS[which]
        if len(op.operands) != len(fields):
            raise PlanError(f"func.call of dg.{which} at {op.location}: {len(op.operands)} "
                            f"buffers, expected {len(fields)} ({', '.join(fields)})")
        step = {"op": which, **{k: self.name(v, op) for k, v in zip(fields, op.operands)}}
        if ir.IntegerAttr(tag["unmasked"]).value:
            step["mask"] = None
        step["scale"] = ir.FloatAttr(tag["scale"]).value
        step["causal"] = bool(ir.IntegerAttr(tag["causal"]).value)
        self.steps.append(step)

    def conv_grad(self, op: ir.Operation, tag: ir.DictAttr) -> None:
        """A call of an outlined convolution gradient (dg-outline-conv-grads): one library
        call, PyTorch's convolution_backward asked for that one gradient."""
        which = ir.StringAttr(tag["op"]).value  # conv2d_input_grad | conv2d_weight_grad
        a, b, out = (self.name(v, op) for v in op.operands)
        step = {"op": "conv2d_grad", "grad": a if which == "conv2d_input_grad" else b,
                "input": None if which == "conv2d_input_grad" else a,
                "weight": b if which == "conv2d_input_grad" else None, "out": out}
        for k in ("stride", "padding", "dilation"):
            step[k] = list(ir.DenseI64ArrayAttr(tag[k]))
        step["groups"] = ir.IntegerAttr(tag["groups"]).value
        self.steps.append(step)

    def launch(self, op: ir.Operation) -> None:
        v = op.opview
        kernel = ir.SymbolRefAttr(op.attributes["kernel"]).value  # [module, kernel]
        grid = _sizes_json([self.sizes.size(x) for x in (v.gridSizeX, v.gridSizeY,
                                                         v.gridSizeZ)])
        block = [_const_int(x, "block size") for x in (v.blockSizeX, v.blockSizeY,
                                                       v.blockSizeZ)]
        smem = v.dynamicSharedMemorySize
        smem = 0 if smem is None else _const_int(smem, "dynamic shared memory size")
        args = []
        for a in v.kernelOperands:
            if isinstance(a.type, ir.MemRefType):
                mt = ir.MemRefType(a.type)
                strides, offset = mt.get_strides_and_offset()
                if offset != 0 or list(strides) != _contiguous_strides(mt.shape):
                    raise PlanError(f"kernel {kernel[-1]} at {op.location}: a non-contiguous "
                                    "memref argument cannot use the bare-pointer ABI")
                args.append({"buf": self.name(a, op)})
            else:
                owner = a.owner
                t = _dtype(a.type)
                if not isinstance(owner, ir.Block) and owner.operation.name == "arith.constant":
                    attr = owner.operation.attributes["value"]
                    val = ir.FloatAttr(attr).value if t.startswith("f") else \
                        ir.IntegerAttr(attr).value
                    args.append({"scalar": val, "type": t})
                    continue
                try:
                    size = self.sizes.size(a)
                except PlanError as e:
                    raise PlanError(f"kernel {kernel[-1]} at {op.location}: scalar argument "
                                    f"is neither a constant nor a size ({e})") from None
                args.append({"scalar": size, "type": t} if isinstance(size, int)
                            else {"size": abi.format_dim(size), "type": t})
        self.steps.append({"op": "launch", "module": kernel[0], "kernel": kernel[-1],
                           "grid": grid, "block": block, "smem": smem, "args": args})


def _size_json(d: abi.Dim) -> int | str:
    """A size as a plan holds it: an int, or its expression's text."""
    return d if isinstance(d, int) else abi.format_dim(d)


def _sizes_json(dims: Sequence[abi.Dim]) -> list:
    return [_size_json(d) for d in dims]


def _pointer_cast(op: ir.Operation) -> bool:
    """Is `op` a 0-d `memref.reinterpret_cast` at offset 0 of a buffer of run-time sizes:
    what a kernel takes such a buffer as (`run_time_sizes.pass_sizes`)?"""
    return op.name == "memref.reinterpret_cast" and \
        ir.MemRefType(op.results[0].type).rank == 0 and \
        not ir.MemRefType(op.operands[0].type).has_static_shape and \
        list(ir.DenseI64ArrayAttr(op.attributes["static_offsets"])) == [0]


def _chip_of(target: ir.Attribute) -> str:
    m = re.search(r'chip\s*=\s*"([^"]+)"', str(target))
    if not m:
        raise PlanError(f"cannot read the chip of target {target}")
    return m.group(1)


def kernel_modules(module: ir.Module) -> dict[str, KernelModule]:
    """One KernelModule per gpu.binary (PTX per chip), kernels read off the PTX entries."""
    out = {}
    for op in module.body.operations:
        op = op.operation
        if op.name != "gpu.binary":
            continue
        name = ir.StringAttr(op.attributes["sym_name"]).value
        km = KernelModule(name, [])
        for attr in ir.ArrayAttr(op.attributes["objects"]):
            obj = gpu.ObjectAttr(attr)
            chip = _chip_of(obj.target)
            img = km.images.setdefault(chip, Image(chip))
            if obj.format == _FORMAT_ISA:
                img.ptx = bytes(obj.object)
                for entry in re.findall(rb"\.entry\s+([A-Za-z_$][\w$]*)", img.ptx):
                    if entry.decode() not in km.kernels:
                        km.kernels.append(entry.decode())
            elif obj.format == _FORMAT_BIN:
                img.cubin = bytes(obj.object)
            else:
                raise PlanError(f"gpu.binary @{name}: object format {obj.format} is not PTX "
                                "or cubin")
        out[name] = km
    return out


def build_plan(module: ir.Module,
               entries: dict[str, tuple[list[TensorSpec], list[TensorSpec]]],
               forwarded: Optional[dict[str, dict[int, int]]] = None) -> LaunchPlan:
    """The launch plan of a module lowered by the CUDA pipeline.

    `entries`: public function -> (input specs, output specs), read before
    lowering (the outputs it computes became trailing out-param arguments);
    `forwarded`: per function, the outputs that are inputs (`forward_arguments`).
    """
    forwarded = forwarded or {}
    functions = {}
    globals_ = _constant_globals(module)
    constants: dict[str, Constant] = {}
    for op in module.body.operations:
        op = op.operation
        if op.name != "func.func" or not op.regions[0].blocks:
            continue
        name = ir.StringAttr(op.attributes["sym_name"]).value
        if name not in entries:
            continue
        ins, outs = entries[name]
        aliases = forwarded.get(name, {})
        size_arguments = [ir.StringAttr(n).value for n in ir.ArrayAttr(
            op.attributes[SIZE_ARGUMENTS_ATTR])] if SIZE_ARGUMENTS_ATTR in op.attributes else []
        computed = [s for j, s in enumerate(outs) if j not in aliases]
        nargs = len(op.regions[0].blocks[0].arguments)
        if nargs != len(ins) + len(size_arguments) + len(computed):
            raise PlanError(f"@{name}: {nargs} arguments after lowering, expected "
                            f"{len(ins)} inputs + {len(size_arguments)} sizes + "
                            f"{len(computed)} out-params")
        walker = _HostWalker(op, ins, size_arguments, computed, globals_)
        steps = walker.walk()
        constants.update(walker.constants)
        functions[name] = PlanFunction(name, [TensorSig(s.shape, s.dtype) for s in ins],
                                       [TensorSig(s.shape, s.dtype) for s in outs], steps,
                                       dict(aliases))
    attrs = module.operation.attributes
    sites = ([ir.StringAttr(s).value for s in ir.ArrayAttr(attrs[SITES_ATTR])]
             if SITES_ATTR in attrs else [])
    plan = LaunchPlan(functions, kernel_modules(module), sites, constants)
    plan.validate()
    return plan


def entry_signatures(module: ir.Module) -> dict[str, tuple[list[TensorSpec], list[TensorSpec]]]:
    """Public defined functions -> (input specs, output specs), on tensors (before lowering)."""
    try:
        return common_entry_signatures(module)
    except TypeError as e:
        raise PlanError(str(e)) from None


def format_step(s: dict) -> str:
    """One line per step, e.g. `launch m::k grid=[64,1,1] block=[256,1,1] smem=0 (arg0, arg1)`."""
    op = s["op"]
    if op == "launch":
        args = ", ".join(a["buf"] if "buf" in a else f"{a.get('scalar', a.get('size'))}:{a['type']}"
                         for a in s["args"])
        return (f"launch {s['module']}::{s['kernel']} grid={json.dumps(s['grid'])} "
                f"block={json.dumps(s['block'])} smem={s['smem']} ({args})".replace(" ,", ","))
    rest = " ".join(f"{k}={json.dumps(v)}" for k, v in s.items() if k != "op")
    return f"{op} {rest}".replace(", ", ",")


def format_plan(plan: LaunchPlan) -> str:
    """The plan as text: signatures, one line per step, kernel modules and their images."""
    lines = []
    for f in plan.functions.values():
        sig = lambda ts: ", ".join(f"{'x'.join(map(str, t.shape)) or 'scalar'} {t.dtype}"
                                   for t in ts)
        lines.append(f"func @{f.name} ({sig(f.inputs)}) -> ({sig(f.outputs)})")
        lines.extend(f"  result {j} is arg{i}" for j, i in sorted(f.forwarded.items()))
        lines.extend(f"  {format_step(s)}" for s in f.steps)
    for m in plan.modules.values():
        imgs = ", ".join(f"{c}:" + "+".join(k for k in ("ptx", "cubin") if getattr(i, k))
                         for c, i in m.images.items())
        lines.append(f"module {m.name} kernels={','.join(m.kernels)} images={imgs}")
    lines.extend(f"constant {n}: {'x'.join(map(str, c.shape)) or 'scalar'} {c.dtype}"
                 for n, c in plan.constants.items())
    lines.extend(f"index site {k}: {site}" for k, site in enumerate(plan.index_sites, 1))
    return "\n".join(lines)
