"""FX -> dg: turn a functional core-ATen `torch.fx.GraphModule` into a dg function.

`import_graph(gm)` builds `func.func @name(inputs...) -> outputs...` in a new
module. It must run inside an MLIR context from `fusegrad.context.make_context()`
(`with ctx:`); pass `ctx=` to have it entered for you.

Contracts:
- every tensor value has a shape and dtype taken from `node.meta['val']`;
  each node's dg result types are checked against it (a mismatch is an
  internal error naming the node: it means an `aten_ops` mapping is wrong);
- shapes are static, or, for a graph traced with symbolic sizes
  (`capture.capture_symbolic`), symbolic: Dynamo's size symbols named `s0`, `s1`,
  ... in order of first appearance in the tensor inputs' shapes
  (`symbolic.SizeSymbols`), their hints the module's `dg.size_hints`; integer inputs
  are then not arguments (each is a size the tensors' shapes bind, or one of its own
  that the function takes as a size argument), and a node whose
  value is an integer (`sym_size`, `operator.mul` of sizes) is its size expression,
  which handlers read where they read ints;
- the per-op mappings live in `aten_ops.HANDLERS`; an op without one raises
  `UnsupportedOp`, which names the op and the user's source line so the caller
  can run the graph eagerly;
- each op is located at `NameLoc(aten op, FileLineColLoc(user file, line, col))`
  from the last user frame of `node.meta['stack_trace']`;
- random ops read a 0-d i64 seed appended as the LAST function argument; the
  function then carries `dg.seed_input = <its index> : i64`, and the runtime
  must pass a fresh seed (e.g. drawn from torch's generator) on every call.
"""
from __future__ import annotations

import functools
import importlib.util
import linecache
import logging
import operator
import os
import re
from typing import Any, Sequence

import torch
import torch.fx
from mlir import ir
from mlir.dialects import func

from . import aten_ops
from ..dialects.builder import Builder, spec
from ..dialects.core import ShapeError
from ..dialects.types import SIZE_HINTS_ATTR, TensorSpec, from_torch_dtype
from .symbolic import SYM_TYPES, NotExpressible, SizeSymbols

log = logging.getLogger(__name__)

SEED_ATTR = "dg.seed_input"


# where a user learns what runs eagerly and how to report an op (a pip install has no
# source tree to edit); developers add the mapping in frontend/aten_ops/
NO_MAPPING = ("no dg mapping for this op yet; 'What runs eagerly' in fusegrad's "
              "docs/usage.md says how to report it (developers: frontend/aten_ops/)")
_REPORT = ("; please report it as 'What runs eagerly' in fusegrad's docs/usage.md says "
           "(developers: the mapping is in frontend/aten_ops/)")


def _no_mapping(target: Any) -> str:
    """Why an op without a handler is not compiled: a library's own operator is opaque
    (its kernel runs as it is); an ATen op waits for a mapping."""
    if target in aten_ops.KEPT_EAGER:
        return aten_ops.KEPT_EAGER[target]
    namespace = getattr(target, "namespace", "aten")
    if namespace not in ("aten", "prims"):
        return (f"a custom operator of the '{namespace}' library, whose kernel fusegrad "
                "cannot see into")
    return NO_MAPPING


class UnsupportedOp(Exception):
    """An FX node fusegrad cannot import; it runs eagerly (`graph_split`).

    `node` is the ATen node to blame, when there is one: its `from_node`
    provenance leads back to the user's graph. `mapped`: the op has a mapping, which
    refused these arguments or sizes (at static sizes it may compile)."""

    def __init__(self, op_name: str, reason: str, where: str = "",
                 node: torch.fx.Node | None = None, mapped: bool = False) -> None:
        self.op_name = op_name
        self.reason = reason
        self.where = where
        self.node = node
        self.mapped = mapped
        at = f" at {where}" if where else ""
        super().__init__(f"fusegrad cannot compile '{op_name}'{at}: {reason}")


class ImporterError(RuntimeError):
    """An internal importer bug (e.g. a mapping produced the wrong type)."""


# ------------------------------------------------------------------ locations
@functools.lru_cache(maxsize=1)
def _library_dirs() -> tuple[str, ...]:
    # found, not imported: importing the passes costs 0.3 s that a compile-cache hit,
    # which runs none of them, would pay here
    dirs = [os.path.dirname(torch.__file__), os.path.dirname(__file__)]
    for package in ("dialects", "passes"):
        spec = importlib.util.find_spec(f"{__package__}.{package}")
        if spec is not None and spec.submodule_search_locations:
            dirs.extend(spec.submodule_search_locations)
    return tuple(os.path.realpath(d) + os.sep for d in dirs)


@functools.lru_cache(maxsize=4096)
def _in_library(path: str) -> bool:
    """Is `path` a file of torch or fusegrad? (cached: every node's stack trace names
    the same few dozen files, and resolving one is several system calls)"""
    return os.path.realpath(path).startswith(_library_dirs())


_FRAME = re.compile(r'^\s*File "(?P<file>[^"]+)", line (?P<line>\d+)')


def user_frame(stack_trace: str | None) -> tuple[str, int, int] | None:
    """(file, line, col) of the last frame outside torch and fusegrad."""
    if not stack_trace:
        return None
    lines = stack_trace.splitlines()
    found = None
    for i, text in enumerate(lines):
        m = _FRAME.match(text)
        if not m or _in_library(m["file"]):
            continue
        found = (m["file"], int(m["line"]), _column(m["file"], int(m["line"]), lines[i + 2:i + 3]))
    return found


def _column(path: str, line: int, caret_lines: list[str]) -> int:
    """1-based column from a traceback caret line (`~~~^^^`), else 1."""
    if not caret_lines or not set(caret_lines[0].strip()) <= set("~^") or not caret_lines[0].strip():
        return 1
    source = linecache.getline(path, line)
    indent = len(source) - len(source.lstrip())
    caret = caret_lines[0]
    return indent + (len(caret) - len(caret.lstrip())) - 4 + 1


def node_location(node: torch.fx.Node) -> ir.Location:
    name = str(node.target) if node.op == "call_function" else node.name
    frame = user_frame(node.meta.get("stack_trace"))
    child = ir.Location.file(*frame) if frame else ir.Location.unknown()
    return ir.Location.name(name, childLoc=child)


def describe_location(node: torch.fx.Node) -> str:
    frame = user_frame(node.meta.get("stack_trace"))
    return f"{frame[0]}:{frame[1]}" if frame else f"FX node '{node.name}'"


# ------------------------------------------------------------------ types
def meta_specs(node: torch.fx.Node, sizes: SizeSymbols | None = None) -> list[TensorSpec | None]:
    """The TensorSpecs of a node's results (None for non-tensor entries). `sizes`: the
    graph's size symbols, for a graph of symbolic sizes (`SizeSymbols.of`): its dims are
    then dg's sizes `s0`, `s1`, ..., and a size it cannot name raises UnsupportedOp."""
    val = node.meta.get("val")
    vals = list(val) if isinstance(val, (tuple, list)) else [val]
    out = []
    for v in vals:
        if isinstance(v, torch.Tensor):
            try:
                dtype = from_torch_dtype(v.dtype)
            except TypeError as e:
                raise UnsupportedOp(str(node.target), str(e), describe_location(node),
                                    node) from None
            if sizes is None:
                out.append(TensorSpec(tuple(int(d) for d in v.shape), dtype))
                continue
            try:
                out.append(TensorSpec(tuple(sizes.dim(d) for d in v.shape), dtype))
            except NotExpressible as e:
                raise UnsupportedOp(str(node.target), str(e), describe_location(node),
                                    node) from None
        else:
            out.append(None)
    return out


def same_dim(a: Any, b: Any) -> bool:
    """Are sizes `a` and `b` equal (symbolic ones as expressions of the same sizes)?"""
    if a == b:
        return True
    if isinstance(a, int) and isinstance(b, int):
        return False
    import sympy
    difference = sympy.expand(a - b)
    return difference == 0 or sympy.simplify(difference) == 0


def same_spec(a: TensorSpec, b: TensorSpec) -> bool:
    """`a == b` with symbolic dims compared as expressions (`4*s0 + 4` is `4*(s0 + 1)`)."""
    return a.dtype == b.dtype and a.rank == b.rank and all(
        same_dim(x, y) for x, y in zip(a.shape, b.shape))


def _is_random(node: torch.fx.Node) -> bool:
    return node.op == "call_function" and node.target in aten_ops.RANDOM_OPS


# ------------------------------------------------------------------ the importer
# nodes that only restate conditions on sizes: dropped where Dynamo's guards (or the
# sizes' ranges) ensure them, else unsupported (graphs of symbolic sizes)
_SIZE_ASSERTIONS = frozenset({torch.ops.aten._assert_scalar.default,
                              torch.ops.aten.sym_constrain_range_for_size.default,
                              torch.ops.aten.sym_constrain_range.default})


class _GraphImporter:
    def __init__(self, gm: torch.fx.GraphModule) -> None:
        self.gm = gm
        self.env: dict[torch.fx.Node, Any] = {}
        self.seed: ir.Value | None = None
        self.random_count = 0
        # the size symbols of a graph of symbolic sizes (capture_symbolic's), else None
        self.sizes = SizeSymbols.of(n.meta.get("val") for n in gm.graph.nodes
                                    if n.op == "placeholder")

    def unsupported(self, node: torch.fx.Node, reason: str, mapped: bool = True) -> UnsupportedOp:
        return UnsupportedOp(str(node.target), reason, describe_location(node), node, mapped)

    def next_seed(self, b: Builder) -> ir.Value:
        """A distinct 0-d i64 seed per random op: the input seed plus a counter."""
        k = self.random_count
        self.random_count += 1
        if k == 0:
            return self.seed
        return b.add(self.seed, b.full(shape=(), dtype="i64", value=k))

    def run(self, name: str) -> ir.Module:
        with ir.Location.unknown():
            return self._run(name)

    def _run(self, name: str) -> ir.Module:
        nodes = list(self.gm.graph.nodes)
        inputs = [n for n in nodes if n.op == "placeholder"]
        if self.sizes is not None:  # integer inputs are sizes, not arguments
            for n in inputs:
                if not isinstance(n.meta.get("val"), torch.Tensor):
                    self._integer_input(n)
            inputs = [n for n in inputs if isinstance(n.meta.get("val"), torch.Tensor)]
        in_types, in_specs = [], []
        for n in inputs:
            (s,) = meta_specs(n, self.sizes) or [None]
            if s is None:
                raise UnsupportedOp("placeholder", f"input '{n.name}' is not a tensor "
                                    f"({type(n.meta.get('val')).__name__})", describe_location(n))
            in_types.append(s.to_mlir())
            in_specs.append(s)
        if self.sizes is not None:
            unbound = self.sizes.unbound([s.shape for s in in_specs])
            if unbound:
                raise UnsupportedOp("placeholder", f"size(s) {', '.join(unbound)} appear in the "
                                    "inputs' shapes only within expressions that do not give "
                                    "their values", describe_location(inputs[0]))
        needs_seed = any(_is_random(n) for n in nodes)
        if needs_seed:
            in_types.append(TensorSpec((), "i64").to_mlir())
        output = next(n for n in nodes if n.op == "output")
        out_nodes = self._flat_outputs(output)

        module = ir.Module.create(loc=ir.Location.unknown())
        hints = self.sizes.hints() if self.sizes is not None else {}
        if hints:
            i64 = ir.IntegerType.get_signless(64)
            module.operation.attributes[SIZE_HINTS_ATTR] = ir.DictAttr.get(
                {name: ir.IntegerAttr.get(i64, value) for name, value in hints.items()})
        with ir.InsertionPoint(module.body), ir.Location.unknown():
            fn = func.FuncOp(name, (in_types, [meta_specs(n, self.sizes)[0].to_mlir()
                                               for n in out_nodes]))
            entry = fn.add_entry_block()
            if needs_seed:
                fn.attributes[SEED_ATTR] = ir.IntegerAttr.get(
                    ir.IntegerType.get_signless(64), len(inputs))
                self.seed = entry.arguments[len(inputs)]
            for n, arg in zip(inputs, entry.arguments):
                self.env[n] = arg
            with ir.InsertionPoint(entry):
                for n in nodes:
                    if n.op in ("call_function", "get_attr"):
                        self._import_node(n)
                results = [self._value_of(n, output) for n in out_nodes]
                func.ReturnOp(results, loc=node_location(output))
        return module

    def _flat_outputs(self, output: torch.fx.Node) -> list[torch.fx.Node]:
        flat: list[torch.fx.Node] = []

        def visit(a):
            if isinstance(a, (tuple, list)):
                for x in a:
                    visit(x)
            elif isinstance(a, torch.fx.Node):
                flat.append(a)
            else:
                raise UnsupportedOp("output", f"the graph returns a non-tensor value {a!r}; "
                                    "return only tensors", describe_location(output))
        visit(output.args[0])
        for n in flat:
            specs = meta_specs(n, self.sizes)
            if len(specs) != 1 or specs[0] is None:
                raise UnsupportedOp("output", f"output '{n.name}' is not a single tensor",
                                    describe_location(output))
        return flat

    def _value_of(self, n: torch.fx.Node, user: torch.fx.Node) -> Any:
        v = self.env.get(n)
        if isinstance(v, aten_ops.Unavailable):  # blame the op that cannot produce it
            raise self.unsupported(n, f"{user.name} uses its {v.what}")
        return v

    def _arg(self, a: Any, user: torch.fx.Node) -> Any:
        if isinstance(a, torch.fx.Node):
            if a not in self.env:
                raise self.unsupported(user, f"operand '{a.name}' is not a tensor fusegrad "
                                       "can compute")
            return self._value_of(a, user)
        if isinstance(a, (tuple, list)):
            return type(a)(self._arg(x, user) for x in a)
        return a

    def _integer_input(self, node: torch.fx.Node) -> None:
        """An integer input of a graph of symbolic sizes: its size (dg's symbols; one that
        is no tensor's size is a size of its own, which the caller passes) or constant for
        the ops that read it. A number dg cannot take as a size (a symbolic float or bool)
        is unsupported where the graph reads it."""
        val = node.meta.get("val")
        if not isinstance(val, (*SYM_TYPES, bool, int, float)):
            raise UnsupportedOp("placeholder", f"input '{node.name}' is not a tensor or an "
                                f"integer ({type(val).__name__})", describe_location(node), node)
        try:
            self.env[node] = self._scalar(val)
        except NotExpressible as e:
            if node.users:
                raise UnsupportedOp("placeholder", f"number input '{node.name}' ({val}) is read "
                                    f"by the graph but is not a size ({e}); such numbers are "
                                    "not supported in a graph of symbolic sizes yet",
                                    describe_location(node), node) from None

    def _scalar(self, val: Any) -> Any:
        """A SymInt/SymFloat/SymBool or number as dg's size expression (or number)."""
        if isinstance(val, (torch.SymInt, int)) and not isinstance(val, bool):
            return self.sizes.dim(val)
        return self.sizes.expr(val)

    def _size_assertion(self, node: torch.fx.Node) -> None:
        """`_assert_scalar` / `sym_constrain_range(_for_size)`: dropped where the sizes'
        ranges or Dynamo's guards ensure the condition (the graph was traced under them,
        and Dynamo checks them before each call), else unsupported: compiled code cannot
        raise."""
        value = self._arg(node.args[0], node)
        if node.target is torch.ops.aten._assert_scalar.default:
            conditions = [value]
        else:
            low = node.kwargs.get("min", node.args[1] if len(node.args) > 1 else None)
            high = node.kwargs.get("max", node.args[2] if len(node.args) > 2 else None)
            conditions = [value >= (0 if low is None else low)]
            if high is not None:
                conditions.append(value <= high)
        for condition in conditions:
            if self.sizes.decide(condition) is not True:
                raise self.unsupported(node, f"a runtime condition on sizes ({condition}) that "
                                       "Dynamo's guards do not ensure; compiled code cannot "
                                       "check it")

    def _import_node(self, node: torch.fx.Node) -> None:
        loc = node_location(node)
        b = Builder(loc)
        with loc:
            if self.sizes is not None and node.op == "call_function":
                if node.target in _SIZE_ASSERTIONS:
                    self._size_assertion(node)
                    return
                val = node.meta.get("val")
                if isinstance(val, (*SYM_TYPES, bool, int, float)):
                    # a size computed from sizes (sym_size, operator.mul, sym_max, ...): its
                    # value is its example value's expression, in dg's symbols
                    try:
                        self.env[node] = self._scalar(val)
                    except NotExpressible as e:
                        raise self.unsupported(node, str(e)) from None
                    return
            if node.op == "get_attr":
                value = getattr(self.gm, node.target)
                if not isinstance(value, torch.Tensor):
                    raise self.unsupported(node, "a non-tensor module attribute")
                self.env[node] = b.constant(value.detach())
                self._check(node, [self.env[node]])
                return
            if node.target is operator.getitem:
                seq, i = node.args
                self.env[node] = self._value_of(seq, node)[i]
                if isinstance(self.env[node], ir.Value):
                    (self.env[node],) = self._check(node, [self.env[node]])
                return
            if node.target in aten_ops.IGNORED:
                return
            handler = aten_ops.HANDLERS.get(node.target)
            if handler is None:
                raise self.unsupported(node, _no_mapping(node.target), mapped=False)
            specs = meta_specs(node, self.sizes)
            if any(s is None for s in specs) and not isinstance(node.meta.get("val"), (tuple, list)):
                raise self.unsupported(node, "it produces a non-tensor (data-dependent) value")
            args = self._arg(node.args, node)
            kwargs = {k: self._arg(v, node) for k, v in node.kwargs.items()}
            em = aten_ops.Emit(b, node, specs, self)
            try:
                if len(specs) == 1 and specs[0] is not None and specs[0].numel == 0:
                    # an empty result has no data: no need to lower the op at all
                    result = b.full(shape=specs[0].shape, dtype=specs[0].dtype, value=0.0)
                else:
                    result = handler(em, *args, **kwargs)
            except aten_ops.Unsupported as e:
                raise self.unsupported(node, str(e)) from None
            except NotExpressible as e:
                raise self.unsupported(node, str(e)) from None
            except TypeError as e:
                if self.sizes is None:
                    raise
                # sympy's: a Python comparison or float() of a symbolic size, in a mapping
                # written for static sizes
                raise self.unsupported(node, "its mapping needs static sizes here, and this "
                                       f"graph's are symbolic ({e})") from None
            except ArithmeticError as e:
                if self.sizes is None:
                    raise
                # sympy's PrecisionExhausted: simplifying a condition on floor()s of sizes
                raise self.unsupported(node, "sympy could not compare its symbolic sizes "
                                       f"({type(e).__name__})") from None
            except ShapeError as e:
                raise ImporterError(f"importer bug: mapping node '{node.name}' ({node.target}) at "
                                    f"{describe_location(node)} built invalid dg: {e}"
                                    + _REPORT) from e
            results = list(result) if isinstance(result, (tuple, list)) else [result]
            results = self._check(node, results)
            self.env[node] = results if isinstance(node.meta.get("val"), (tuple, list)) \
                else results[0]

    def _check(self, node: torch.fx.Node, results: Sequence[Any]) -> list[Any]:
        """`results` checked against PyTorch's (`node.meta['val']`). A symbolic size that
        equals PyTorch's written otherwise (`floor((s0 - 1)/2) + 1` for
        `floor((s0 + 1)/2)`) is reshaped to PyTorch's form, which the types of the ops
        reading it are built from, where dg.reshape accepts that (it compares element
        counts as written); else ImporterError."""
        results = list(results)
        for i, (want, got) in enumerate(zip(meta_specs(node, self.sizes), results)):
            if want is None or isinstance(got, aten_ops.Unavailable):
                continue
            have = spec(got)
            if have == want:
                continue
            if self.sizes is not None and same_spec(have, want):
                try:
                    results[i] = Builder(node_location(node)).reshape(got, shape=want.shape)
                    continue
                except ShapeError as e:  # dg.reshape compares the element counts as written
                    raise ImporterError(f"node '{node.name}' ({node.target}) result #{i} is "
                                        f"{have}, PyTorch's {want}: equal sizes written "
                                        f"differently, which dg cannot reconcile ({e})") from e
            raise ImporterError(f"importer bug: node '{node.name}' ({node.target}) result "
                                f"#{i} is {have} but PyTorch says {want}" + _REPORT)
        return results


def import_graph(gm: torch.fx.GraphModule, *, name: str = "main",
                 ctx: ir.Context | None = None) -> ir.Module:
    """Import `gm` as `func.func @name` of dg ops in a new module.

    Runs in `ctx` if given, else in the current MLIR context (which must have
    the dg dialect loaded: `fusegrad.context.make_context()`).

    A graph whose inputs have symbolic sizes (`capture_symbolic`'s) imports as a function
    of symbolic sizes: its arguments are the graph's tensor inputs only, in order (then
    the seed, if any); its integer inputs are sizes bound from those tensors' shapes when
    it is called, so the caller drops them (`Captured.symbolic.tensors` are the positions
    to pass), or sizes of their own the caller passes (`Captured.symbolic.scalars`). The
    module carries `dg.size_hints` (`types.SIZE_HINTS_ATTR`). A number input the graph
    reads that is not a size, a size dg cannot express, or a mapping that needs static
    sizes raises `UnsupportedOp`.
    """
    if ctx is not None:
        with ctx:
            return import_graph(gm, name=name)
    if ir.Context.current is None:
        raise RuntimeError("import_graph needs an MLIR context: call it inside "
                           "`with fusegrad.context.make_context():` or pass ctx=")
    module = _GraphImporter(gm).run(name)
    log.debug("imported @%s:\n%s", name, module)
    return module
