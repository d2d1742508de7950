"""dg-remat: choose which forward values @f_fwd saves for @f_bwd, by a minimum cut.

Like torch/_functorch/partitioners.py's min-cut rematerialization, on the
@f_fwd/@f_bwd pair that dg-autodiff emits (the joint is re-derived: the
backward reads the saved values, the forward computes them). Every forward
value v is split into v_in -> v_out with capacity bytes(v), doubled for a value
a fused kernel would otherwise never write to memory (what the forward writes
anyway is found by fusing a copy of it: `written_anyway`); def-use edges are
infinite; the values the backward reads feed the sink; inputs and values that
must not be recomputed (contractions, reductions, random and gather ops:
expensive, or better saved than regenerated) hang off the source. A minimum
cut then names the cheapest set of values to save (of equal ones, the one
nearest the backward, which recomputes least); everything between the
cut and what the backward reads (pointwise chains, broadcasts, views) is
recomputed at the start of @f_bwd, where dg-fuse folds it into its kernels.

`memory-budget` (bytes, 0 = off) trades memory back for less recomputation:
while the saved bytes stay within the budget, values the backward reads are
saved directly instead of recomputed (largest recomputation first).

Each rewritten @f_fwd gets `dg.saved_bytes_before` and `dg.saved_bytes`.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass

from mlir import ir
from mlir.dialects import func

from ...dialects.core import Kind, lookup
from ...dialects.region_ops import fusion_body, is_fusion
from ...dialects.types import TensorSpec, size_hints
from .common import NUM_OUTPUTS, forward_backward_pairs, func_name
from .maxflow import INF, FlowGraph
from ...passes import PASSES, PassError
from ..fusion import REWRITES
from ..fusion.fuse import ZERO_COST, fuse_function

log = logging.getLogger(__name__)

RECOMPUTABLE = (Kind.ELEMENTWISE, Kind.BROADCAST, Kind.VIEW, Kind.SOURCE, Kind.DATA_MOVEMENT)


@dataclass
class RematResult:
    """What dg-remat did to one @f_fwd/@f_bwd pair."""

    fwd: str
    saved_bytes_before: int
    saved_bytes_after: int
    num_saved_before: int
    num_saved_after: int
    num_recomputed_ops: int


def nbytes(v: ir.Value, hints: dict[str, int]) -> int:
    """Bytes of `v` (at the module's size hints where its shape is symbolic)."""
    return TensorSpec.from_mlir(v.type).hinted(hints).nbytes


def recomputable(op: ir.Operation) -> bool:
    """Cheap, deterministic ops the backward may recompute instead of loading."""
    return op.name.startswith("dg.") and lookup(op.name).kind in RECOMPUTABLE


class _Forward:
    """The forward's values and def-use edges, indexed for the flow network."""

    def __init__(self, fwd: ir.Operation) -> None:
        block = fwd.regions[0].blocks[0]
        ops = [o.operation for o in block.operations]
        self.ops, self.ret = ops[:-1], ops[-1]
        self.num_outputs = ir.IntegerAttr(fwd.attributes[NUM_OUTPUTS]).value
        self.values: list[ir.Value] = list(block.arguments) + [r for op in self.ops for r in op.results]
        self.index = {v: i for i, v in enumerate(self.values)}
        self.saved = list(self.ret.operands)[self.num_outputs:]
        self.hints = size_hints(fwd)

    def nbytes(self, v: ir.Value) -> int:
        return nbytes(v, self.hints)

    def cut(self, needed: list[ir.Value], forced: set[ir.Value],
            written: set[ir.Value]) -> set[ir.Value]:
        """The minimum-bytes set of values to save so that `needed` is computable;
        `written`: recomputable values the forward writes to memory anyway."""
        n = len(self.values)
        src, sink = 2 * n, 2 * n + 1
        g = FlowGraph(2 * n + 2)
        for i, v in enumerate(self.values):
            owner = v.owner
            materialized = isinstance(owner, ir.Block) or not recomputable(owner.operation)
            # saving a value that would otherwise live only inside a fused kernel costs
            # its write as well as its bytes (Inductor's partitioner weighs it 2x too)
            g.add_edge(2 * i, 2 * i + 1,
                       self.nbytes(v) * (1 if materialized or v in written else 2))
            if materialized or v in forced:
                g.add_edge(src, 2 * i, INF)
        for op in self.ops:
            for x in op.operands:
                for r in op.results:
                    g.add_edge(2 * self.index[x] + 1, 2 * self.index[r], INF)
        for v in needed:
            g.add_edge(2 * self.index[v] + 1, sink, INF)
        _, source_side = g.min_cut(src, sink)
        return {v for i, v in enumerate(self.values)
                if 2 * i in source_side and 2 * i + 1 not in source_side}

    def recompute_ops(self, needed: list[ir.Value], saved: set[ir.Value]) -> list[ir.Operation]:
        """Forward ops (program order) that rebuild `needed` from `saved`."""
        chosen: set = set()
        stack = [v for v in needed if v not in saved]
        while stack:
            v = stack.pop()
            if v in saved or isinstance(v.owner, ir.Block):
                continue
            op = v.owner.operation
            if op not in chosen:
                chosen.add(op)
                stack.extend(op.operands)
        return [op for op in self.ops if op in chosen]


OP_INDEX = "dg.remat_index"  # on the ops of the trial copy: the original op's position


def written_anyway(fwd: ir.Operation, fw: _Forward) -> set[ir.Value]:
    """The forward's values that its fused kernels write to memory when it saves nothing
    (region outputs read by a contraction, by a later region, by the return). Found by
    running the fusion stage on a copy: a residual stream read again after the matmuls
    that depend on it is written anyway, so saving it costs only its bytes; weighing it
    2x made remat recompute the whole stream from the embeddings at the backward's
    start, a chain that made the layers' backward kernels differ."""
    module = ir.Module.create(fwd.location)
    copy = fwd.clone(ir.InsertionPoint(module.body))
    block = copy.regions[0].blocks[0]
    ops = [o.operation for o in block.operations]
    for i, op in enumerate(ops[:-1]):
        op.attributes[OP_INDEX] = ir.IntegerAttr.get(ir.IntegerType.get_signless(64), i)
    _return_only(copy, list(ops[-1].operands)[:fw.num_outputs])
    with fwd.location:
        for name in REWRITES:
            PASSES[name].run(module.operation)
        fuse_function(copy)
    found: set[ir.Value] = set()
    for op in block.operations:
        op = op.operation
        if op.name in ZERO_COST:  # a view stores nothing: saving it copies its source
            continue
        stored = fusion_body(op)[1] if is_fusion(op) else list(op.results)
        for v in stored:
            if isinstance(v, ir.OpResult) and OP_INDEX in v.owner.attributes:
                original = fw.ops[ir.IntegerAttr(v.owner.attributes[OP_INDEX]).value]
                found.add(original.results[v.result_number])
    return found


def _set_function_type(fn: ir.Operation, inputs: list[ir.Type], results: list[ir.Type]) -> None:
    fn.attributes["function_type"] = ir.TypeAttr.get(ir.FunctionType.get(inputs, results))


def _rewrite_backward(bwd: ir.Operation, fw: _Forward, new_saved: list[ir.Value],
                      recompute: list[ir.Operation]) -> None:
    block = bwd.regions[0].blocks[0]
    old = list(block.arguments)
    k = len(fw.saved)
    cts = old[k:]
    loc = bwd.location
    new_args = [block.add_argument(v.type, loc) for v in new_saved]
    new_cts = [block.add_argument(c.type, loc) for c in cts]
    env = dict(zip(new_saved, new_args))
    with ir.InsertionPoint(block.operations[0]):
        for op in recompute:
            clone = ir.Operation.create(op.name, results=[r.type for r in op.results],
                                        operands=[env[x] for x in op.operands],
                                        attributes={a: op.attributes[a] for a in op.attributes},
                                        loc=op.location)
            env.update(zip(op.results, clone.results))
    for arg, v in zip(old[:k], fw.saved):
        if list(arg.uses):
            arg.replace_all_uses_with(env[v])
    for arg, new in zip(cts, new_cts):
        arg.replace_all_uses_with(new)
    for _ in old:
        block.erase_argument(0)
    ftype = ir.FunctionType(ir.TypeAttr(bwd.attributes["function_type"]).value)
    _set_function_type(bwd, [a.type for a in block.arguments], list(ftype.results))


def _return_only(fn: ir.Operation, values: list[ir.Value]) -> None:
    """`fn` returns `values` (of its own) instead; the ops left unread are erased."""
    block = fn.regions[0].blocks[0]
    ret = list(block.operations)[-1].operation
    with ir.InsertionPoint(ret), ret.location:
        func.ReturnOp(values)
    ret.erase()
    for op in reversed([o.operation for o in block.operations]):
        if op.name.startswith("dg.") and all(not list(r.uses) for r in op.results):
            op.erase()
    _set_function_type(fn, [a.type for a in block.arguments], [v.type for v in values])


def rematerialize(fwd: ir.Operation, bwd: ir.Operation, memory_budget: int = 0) -> RematResult:
    """Re-partition one @f_fwd/@f_bwd pair in place (see the module docstring)."""
    fw = _Forward(fwd)
    bwd_args = list(bwd.regions[0].blocks[0].arguments)
    if len(bwd_args) < len(fw.saved):
        raise PassError(f"@{func_name(bwd)} takes {len(bwd_args)} arguments but @{func_name(fwd)} saves "
                        f"{len(fw.saved)} values; is it the matching backward?", bwd.location)
    needed = list(dict.fromkeys(v for v, a in zip(fw.saved, bwd_args) if list(a.uses)))
    before = sum(fw.nbytes(v) for v in dict.fromkeys(fw.saved))
    forced: set = set()
    written = written_anyway(fwd, fw)
    cut = fw.cut(needed, forced, written)
    if memory_budget > 0:  # save directly what fits, biggest recomputation first
        by_work = sorted((v for v in needed if v not in cut),
                         key=lambda v: -len(fw.recompute_ops([v], cut)))
        for v in by_work:
            trial = fw.cut(needed, forced | {v}, written)
            if sum(fw.nbytes(x) for x in trial) <= memory_budget:
                forced.add(v)
                cut = trial
    new_saved = [v for v in fw.values if v in cut]
    recompute = fw.recompute_ops(needed, cut)
    after = sum(fw.nbytes(v) for v in new_saved)
    _rewrite_backward(bwd, fw, new_saved, recompute)
    _return_only(fwd, list(fw.ret.operands)[:fw.num_outputs] + new_saved)
    fwd.attributes["dg.saved_bytes_before"] = ir.IntegerAttr.get(ir.IntegerType.get_signless(64), before)
    fwd.attributes["dg.saved_bytes"] = ir.IntegerAttr.get(ir.IntegerType.get_signless(64), after)
    result = RematResult(func_name(fwd), before, after, len(dict.fromkeys(fw.saved)), len(new_saved),
                         len(recompute))
    log.debug("dg-remat: %s", result)
    return result


def remat_module(module: ir.Operation, memory_budget: int = 0) -> list[RematResult]:
    """Rematerialize every @X_fwd (with dg.num_outputs) / @X_bwd pair of `module`."""
    return [rematerialize(fwd, bwd, memory_budget) for fwd, bwd in forward_backward_pairs(module)]


def remat_pass(module: ir.Operation, memory_budget: int = 0) -> None:
    remat_module(module, memory_budget)
