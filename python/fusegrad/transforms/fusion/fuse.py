"""dg-fuse: group the dg ops of each function into fusion regions, one kernel each.

Greedy, in the spirit of Inductor's scheduler: cheap index ops and sources
(`full`, `iota`, splat constants, broadcasts, transposes) are first cloned
per consumer so every region can absorb its own copy; then, in program order,
each op joins the regions of its producers (pointwise chains, a reduction's
prologue, its epilogue), and finally regions that read a common value are
merged (sibling fusion, multi-output regions). A merge is kept only if
`conversion.fusion_regions.plan_region` accepts the union (one source of truth for
what a region may hold) and it creates no cycle between regions.
Contractions, gathers, random ops and data movement stay their own kernels.
Outlining computes equal ops once per region; afterwards, a cheap output read
only by later regions is recomputed by them instead of stored
(`_sink_cheap_outputs`).

`count_kernels` defines the kernel count reported everywhere (explain,
benchmarks): each fusion region is 1 kernel, and each other top-level dg op is 1,
except ops that lower to no loop (`ZERO_COST`: dense literals and the views
reshape/slice, which become tensor.expand/collapse_shape/extract_slice).

The rewrites that give the graph the shape this pass expects (`dg-fusion-rewrites`:
casts, scalars and transposes absorbed by matmuls, reshapes and gathers moved to region
inputs, stop_gradient dropped) are passes of their own, listed before it in the
pipeline (pipelines.py).
"""
from __future__ import annotations

import functools
import logging
import math
from dataclasses import dataclass
from typing import Optional

from mlir import ir

from ...dialects.builder import Builder, erase_dead, recreate
from ...dialects.core import attrs_of, is_pointwise
from ...dialects.region_ops import fusion_body, fusion_inputs, is_fusion
from ...dialects.types import TensorSpec
from ...passes import functions
from ...conversion.fusion_regions import (REDUCTIONS, TRANSCENDENTAL, Plan, duplicable, fusible,
                                          plan_region)
from .matmul_transposes import swaps_last_two


log = logging.getLogger(__name__)

ZERO_COST = ("dg.constant", "dg.reshape", "dg.slice")
RETURN = -1  # user index standing for the function's terminator


def count_kernels(root: ir.Operation) -> int:
    """Kernels `root` (a module or func) runs: fusion region = 1, other dg ops = 1, ZERO_COST = 0."""
    root = root.operation
    funcs = [root] if root.name == "func.func" else list(functions(root))
    n = 0
    for fn in funcs:
        for op in fn.regions[0].blocks[0].operations:
            name = op.operation.name
            if is_fusion(op) or (name.startswith("dg.") and name not in ZERO_COST):
                n += 1
    return n


def count_dg_ops(root: ir.Operation) -> int:
    """dg ops of `root`'s functions, counting the bodies of fusion regions, not the regions."""
    n = 0

    def visit(op: ir.Operation) -> ir.WalkResult:
        nonlocal n
        if op.name.startswith("dg."):
            n += 1
        return ir.WalkResult.ADVANCE
    root.operation.walk(visit)
    return n


def _give_each_user_a_copy(op: ir.Operation) -> None:
    """Clone `op` for each of its fusible users (keeping it for the others)."""
    uses = [(u.owner.operation, u.operand_number) for u in op.results[0].uses]
    fusible_uses = [(u, i) for u, i in uses if u.name.startswith("dg.") and fusible(u)]
    if len(uses) < 2 or not fusible_uses:
        return
    keep_original = len(fusible_uses) < len(uses)
    for user, i in fusible_uses[0 if keep_original else 1:]:
        with ir.InsertionPoint(user):
            copy = recreate(op, op.operands)
        user.operands[i] = copy.results[0]


def _clone_duplicables(block: ir.Block) -> None:
    """Give each fusible user its own copy of a cheap index op or source (reverse order,
    so a broadcast's per-use copies then get their own copy of a `full` they read)."""
    for op in reversed([o.operation for o in block.operations]):
        if op.name.startswith("dg.") and duplicable(op) and len(op.results) == 1:
            _give_each_user_a_copy(op)


# recompute a pointwise value in each consumer, rather than store and reload it, while
# its cone (pointwise ops back to stored values) costs at most this many ops
RECOMPUTE_BUDGET = 16
RECOMPUTE_MAX_USERS = 4
# what one transcendental (a polynomial of tens of vector ops) counts in that budget
TRANSCENDENTAL_COST = 8


def _pointwise(op: ir.Operation) -> bool:
    return is_pointwise(op) and fusible(op)


def _feeds_row_reduction(op: ir.Operation) -> bool:
    """Does `op`'s result feed a reduction over its trailing dims (a softmax's exp, summed
    per row)? Its other readers then run in the same CPU row kernel, where the stored
    value is a row on the stack (`cpu_kernels._row_temps`), not a pass over memory."""
    rank = len(TensorSpec.from_mlir(op.results[0].type).shape)
    for use in op.results[0].uses:
        user = use.owner.operation
        if user.name.startswith("dg.") and user.name[3:] in REDUCTIONS:
            dims = sorted(attrs_of(user)["dims"])
            if dims and dims[0] > 0 and dims == list(range(rank - len(dims), rank)):
                return True
    return False


def _cost(op: ir.Operation, row_temps: bool) -> int:
    """What recomputing `op` counts against RECOMPUTE_BUDGET: 1 for cheap arithmetic,
    TRANSCENDENTAL_COST for a transcendental, and with `row_temps` (the CPU target)
    beyond the budget for one whose value a row reduction also reads (softmax forward
    8192x1024: 5.5 -> 4.7 ms, one exp per element instead of two). A GPU kernel would
    store such a value to memory and read it back: recomputing is cheaper there."""
    if op.name[3:] not in TRANSCENDENTAL:
        return 1
    if row_temps and _feeds_row_reduction(op):
        return RECOMPUTE_BUDGET + 1
    return TRANSCENDENTAL_COST


def _recompute_cheap_pointwise(block: ir.Block, row_temps: bool) -> None:
    """Give each consumer its own copy of a cheap pointwise value (reverse order, so copies
    of a consumer then get their own copies of its producers): a full-size intermediate
    read by two kernels costs a store and two loads of memory, its recomputation a few
    vector ops. Inductor inlines pointwise producers the same way."""
    cost: dict = {}

    def cone(op: ir.Operation) -> int:
        if op in cost:
            return cost[op]
        total = _cost(op, row_temps)
        for x in op.operands:
            if not isinstance(x.owner, ir.Block):
                producer = x.owner.operation
                if _pointwise(producer):
                    total += cone(producer)
                elif duplicable(producer):
                    total += 0
        cost[op] = total
        return total

    for op in reversed([o.operation for o in block.operations]):
        if not _pointwise(op):
            continue
        users = {u.owner.operation for u in op.results[0].uses}
        if 2 <= len(users) <= RECOMPUTE_MAX_USERS and cone(op) <= RECOMPUTE_BUDGET:
            _give_each_user_a_copy(op)


def _gemm_flag_transpose(op: ir.Operation) -> bool:
    """Is `op` a float transpose of the last two dims (rank 2 or 3) that only matmuls read?
    Left on its own, gemm reads it through its transpose flag (BLAS, cuBLAS) and nothing
    is copied; fused into its producer's region it would be stored column-wise: a linear
    layer's dZ^T for its weight gradient (HF BERT's 1024x1024 GELU gradient, twice a step;
    a Linear(256, 1024) + ReLU training step on 1024 rows: 26.5 -> 19.2 ms, eager 20.0)."""
    if not swaps_last_two(op):
        return False
    s = TensorSpec.from_mlir(op.results[0].type)
    return len(s.shape) <= 3 and s.dtype in ("f32", "f64") and \
        all(u.owner.operation.name == "dg.matmul" for u in op.results[0].uses)


class _Grouping:
    """Union of op indices into regions, with legality and cycle checks."""

    def __init__(self, ops: list[ir.Operation], max_ops: int) -> None:
        self.ops = ops
        self.max_ops = max_ops
        index = {op: i for i, op in enumerate(ops)}
        self.producers = [sorted({index[x.owner.operation] for x in op.operands
                                  if not isinstance(x.owner, ir.Block) and x.owner.operation in index})
                          for op in ops]
        # per op: its results, each with the indices of the ops reading it (RETURN: not a
        # dg op of this block)
        self.readers = [[(r, frozenset(index.get(u.owner.operation, RETURN) for u in r.uses))
                         for r in op.results] for op in ops]
        self.group = list(range(len(ops)))  # op -> group id
        self.members = {i: [i] for i in range(len(ops))}
        # the group graph, kept up to date by merges: the cycle checks walk it thousands
        # of times (GPT-2's training graph), which recomputing edges from the ops made
        # the larger part of dg-fuse
        self.succ = {i: {u for _, readers in self.readers[i] for u in readers
                         if u != RETURN and u != i} for i in range(len(ops))}
        self.pred = {i: set(self.producers[i]) - {i} for i in range(len(ops))}
        # a topological order of the group graph, kept by merges (Pearce-Kelly): a path
        # u ~> v needs rank[u] < rank[v], which bounds the cycle checks' searches
        # (unbounded, they were half of dg-fuse's time on HF BERT's training graph)
        self.rank = list(range(len(ops)))

    def _outputs(self, members: list[int]) -> list[ir.Value]:
        inside = set(members)
        return [r for i in members for r, readers in self.readers[i] if not readers <= inside]

    def _merge(self, a: int, b: int, union: list[int]) -> None:
        """Group b joins group a, which takes the later rank of the two."""
        for i in self.members[b]:
            self.group[i] = a
        self.members[a] = union
        del self.members[b]
        for p in self.pred[b] - {a}:
            self.succ[p].discard(b)
            self.succ[p].add(a)
        for q in self.succ[b] - {a}:
            self.pred[q].discard(b)
            self.pred[q].add(a)
        self.succ[a] = (self.succ[a] | self.succ.pop(b)) - {a, b}
        self.pred[a] = (self.pred[a] | self.pred.pop(b)) - {a, b}
        self.rank[a] = max(self.rank[a], self.rank[b])
        for s in list(self.succ[a]):  # successors of the earlier group may rank before
            if self.rank[s] < self.rank[a]:
                self._reorder(a, s)

    def _reorder(self, x: int, y: int) -> None:
        """Restore the order for an edge x -> y ranked backwards: what y reaches below x's
        rank moves after what reaches x above y's rank, in the ranks they held."""
        low, high = self.rank[y], self.rank[x]
        forward = self._closure(y, self.succ, lambda g: self.rank[g] < high)
        backward = self._closure(x, self.pred, lambda g: self.rank[g] > low)
        moved = sorted(backward, key=self.rank.__getitem__) + \
            sorted(forward, key=self.rank.__getitem__)
        for g, r in zip(moved, sorted(self.rank[g] for g in moved)):
            self.rank[g] = r

    @staticmethod
    def _closure(start: int, edges: dict[int, set[int]], within) -> set[int]:
        seen, stack = {start}, [start]
        while stack:
            for h in edges[stack.pop()]:
                if h not in seen and within(h):
                    seen.add(h)
                    stack.append(h)
        return seen

    def _reaches(self, start: set[int], target: int, skip: int) -> bool:
        bound = self.rank[target]
        stack, seen = list(start), set()
        while stack:
            g = stack.pop()
            if g == target:
                return True
            if g in seen or g == skip or self.rank[g] > bound:
                continue
            seen.add(g)
            stack.extend(self.succ[g])
        return False

    def _creates_cycle(self, a: int, b: int) -> bool:
        """True if some path leaves a (or b) through a third region and comes back to b (or a)."""
        return (self._reaches(self.succ[a] - {b}, b, a) or
                self._reaches(self.succ[b] - {a}, a, b))

    def _exports_epilogue(self, union: list[int], outputs: list[ir.Value], plan: Plan) -> bool:
        """Does the union export a full-size value computed from its reduction? Such a
        value is better computed next to the reduction that consumes it, if any."""
        full = {TensorSpec.from_mlir(r.operands[0].type).shape for r in plan.reductions}
        reductions = {r.operation for r in plan.reductions}
        inside = {self.ops[i] for i in union}
        for v in outputs:
            if TensorSpec.from_mlir(v.type).shape not in full:
                continue
            stack, seen = [v], set()
            while stack:
                x = stack.pop()
                if isinstance(x.owner, ir.Block) or x.owner.operation not in inside:
                    continue
                op = x.owner.operation
                if op in reductions:
                    return True
                if op not in seen:
                    seen.add(op)
                    stack.extend(op.operands)
        return False

    def try_merge(self, a: int, b: int, *, defer_epilogues: bool = False) -> bool:
        a, b = self.group[a], self.group[b]
        if a == b:
            return False
        union = sorted(self.members[a] + self.members[b])
        if len(union) > self.max_ops:
            return False
        outputs = self._outputs(union)
        plan = plan_region([self.ops[i] for i in union], outputs, fusible_checked=True)
        if isinstance(plan, str) or self._creates_cycle(a, b):
            return False
        if defer_epilogues and plan.reductions and self._exports_epilogue(union, outputs, plan):
            return False
        self._merge(a, b, union)
        return True

    def _readers_of_values(self) -> list[list[int]]:
        """Per value (function arguments and op results): the ops reading it."""
        readers: dict = {}
        for i, op in enumerate(self.ops):
            for x in op.operands:
                readers.setdefault(x, [])
                if i not in readers[x]:
                    readers[x].append(i)
        return [r for r in readers.values() if len(r) > 1]

    def run(self) -> list[list[int]]:
        fusible_ops = [fusible(op) and not _gemm_flag_transpose(op) for op in self.ops]
        # producer -> consumer in program order; first keep reductions with their prologue
        # (a softmax's exp joins the sum, not the max), then allow epilogues
        for defer in (True, False):
            for i in range(len(self.ops)):
                if fusible_ops[i]:
                    for p in self.producers[i]:
                        if fusible_ops[p]:
                            self.try_merge(p, i, defer_epilogues=defer)
        for readers in self._readers_of_values():  # siblings: consumers of a common value
            readers = [u for u in readers if fusible_ops[u]]
            for u in readers[1:]:
                self.try_merge(readers[0], u)
        return [m for m in self.members.values() if len(m) > 1]


def _equal_values(ops: list[ir.Operation]) -> dict[ir.Value, ir.Value]:
    """Result of a later op -> the same result of the first equal op among `ops` (same
    name, operands up to equality, attributes and types; dg ops are pure). Values
    copied per consumer (`_recompute_cheap_pointwise`, `_clone_duplicables`) whose
    consumers end up in one region would otherwise be computed, yielded and stored once
    per copy."""
    same: dict[ir.Value, ir.Value] = {}
    first: dict[tuple, ir.Operation] = {}
    for op in ops:
        key = (op.name, tuple(same.get(x, x) for x in op.operands),
               tuple(sorted((n, str(op.attributes[n])) for n in op.attributes)),
               tuple(str(r.type) for r in op.results))
        kept = first.setdefault(key, op)
        if kept is not op:
            same.update(zip(op.results, kept.results))
    return same


def _region_of(ops: list[ir.Operation], outputs: list[ir.Value], loc: ir.Location,
               same: dict | None = None) -> ir.Operation:
    """A fusion region at the insertion point yielding `outputs`, computed by copies of
    `ops` (program order) that read values from outside as they are (a region captures
    its inputs from above). An op whose results are keys of `same` is not copied: its
    results are read as the values they map to."""
    same = same or {}
    fusion = Builder(loc).fusion([TensorSpec.from_mlir(v.type) for v in outputs])
    env: dict = {}
    with ir.InsertionPoint(fusion.regions[0].blocks[0]):
        for op in ops:
            if op.results[0] in same:
                continue
            operands = [same.get(x, x) for x in op.operands]
            clone = recreate(op, [env.get(x, x) for x in operands])
            env.update(zip(op.results, clone.results))
        Builder(loc).fusion_yield([env.get(v, v) for v in outputs])
    return fusion


def _outline(ops: list[ir.Operation]) -> ir.Operation:
    """Replace `ops` (program order) by one fusion region placed after the last of them."""
    inside = set(ops)
    same = _equal_values(ops)
    escaping = [r for op in ops for r in op.results
                if any(u.owner.operation not in inside for u in r.uses)]
    outputs: list[ir.Value] = []
    for r in escaping:
        if same.get(r, r) not in outputs:
            outputs.append(same.get(r, r))
    with ir.InsertionPoint.after(ops[-1]):
        fusion = _region_of(ops, outputs, ir.Location.fused([op.location for op in ops]), same)
    for v in escaping:
        v.replace_all_uses_with(fusion.results[outputs.index(same.get(v, v))])
    for op in reversed(ops):
        op.erase()
    return fusion


@dataclass
class _Cone:
    """What `_cheap_cone` found: the cone (None: too costly) and every value it visited."""

    found: Optional[tuple[list[ir.Operation], dict]]
    visited: set


def _cheap_cone(v: ir.Value, position: dict, stored: dict, row_temps: bool) -> _Cone:
    """The ops of a region (`position`: its body op -> index) computing `v`, in program
    order, if they are pointwise or cheap index ops within RECOMPUTE_BUDGET reading at most
    one input of `v`'s size (recomputing them where `v` is read then costs no more memory
    traffic than reading `v`; a broadcast smaller value is loop-invariant there, and LLVM
    hoists it), and the region's stored outputs (`stored`: yielded value -> the region's
    result) it reads as inputs (value -> result: stored anyway, so read rather than
    recomputed); else None."""
    size = _numel(v)
    cone: set = set()
    full_inputs: set = set()
    leaves: dict = {}
    visited: set = set()
    cost, stack = 0, [v]
    while stack:
        x = stack.pop()
        visited.add(x)
        op = None if isinstance(x.owner, ir.Block) else x.owner.operation
        if op not in position or (x in stored and x != v):
            if x in stored and x != v:
                leaves[x] = stored[x]
            if _numel(x) >= size:
                full_inputs.add(x)
            continue
        if op in cone:
            continue
        if not (_pointwise(op) or duplicable(op)):
            return _Cone(None, visited)
        cone.add(op)
        cost += _cost(op, row_temps) if _pointwise(op) else 0
        stack.extend(op.operands)
    if not cone or cost > RECOMPUTE_BUDGET or len(full_inputs) > 1:
        return _Cone(None, visited)
    return _Cone((sorted(cone, key=position.__getitem__), leaves), visited)


def _enclosing(op: ir.Operation) -> ir.Operation:
    """The top-level op of the function that holds `op` (possibly `op` itself)."""
    while op.parent is not None and op.parent.operation.name != "func.func":
        op = op.parent.operation
    return op


def _sink_into(consumer: ir.Operation, cone: list[ir.Operation], leaves: dict,
               result: ir.Value, v: ir.Value) -> bool:
    """Recompute `cone` (computing `v`, yielded as `result` by another region; `leaves`:
    values of that region it reads -> the results that hold them) at the top of the
    region `consumer` and read that instead of `result`; undone (False) if the region
    would no longer lower."""
    block = consumer.regions[0].blocks[0]
    env: dict = dict(leaves)
    clones = []
    with ir.InsertionPoint.at_block_begin(block):
        for op in cone:
            clone = recreate(op, [env.get(x, x) for x in op.operands])
            env.update(zip(op.results, clone.results))
            clones.append(clone)
    rewired = []
    for op in fusion_body(consumer)[0][len(clones):] + [block.operations[len(block.operations) - 1]]:
        for i, x in enumerate(op.operands):
            if x == result:
                op.operands[i] = env[v]
                rewired.append((op, i))
    if not isinstance(plan_region(*fusion_body(consumer)), str):
        return True
    for op, i in rewired:
        op.operands[i] = result
    for clone in reversed(clones):
        clone.erase()
    return False


def _drop_unused_results(fusion: ir.Operation) -> None:
    """Rebuild `fusion` without the results nothing reads (and the ops only they needed)."""
    body, yielded = fusion_body(fusion)
    kept = [k for k, r in enumerate(fusion.results) if len(list(r.uses)) > 0]
    if len(kept) == len(yielded):
        return
    if not kept:
        fusion.erase()
        return
    live, stack = set(), [yielded[k] for k in kept]
    while stack:
        x = stack.pop()
        if not isinstance(x.owner, ir.Block) and x.owner.operation in body \
                and x.owner.operation not in live:
            live.add(x.owner.operation)
            stack.extend(x.owner.operation.operands)
    with ir.InsertionPoint(fusion):
        new = _region_of([op for op in body if op in live], [yielded[k] for k in kept],
                         fusion.location)
    for j, k in enumerate(kept):
        fusion.results[k].replace_all_uses_with(new.results[j])
    fusion.erase()


def _largest(op: ir.Operation) -> int:
    """Elements of the largest value a kernel (region or single op) computes or reads."""
    ops = fusion_body(op)[0] if is_fusion(op) else [op]
    return max(_numel(x) for o in ops for x in [*o.operands, *o.results])


def _numel(v: ir.Value) -> int:
    """Elements of a tensor value (without building its TensorSpec where its shape is
    static: dg-fuse asks this of every value of every region, many times); a symbolic
    shape counts at the default size hints."""
    if v.type.has_static_shape:
        return math.prod(v.type.shape)
    return TensorSpec.from_mlir(v.type).hinted({}).numel


def _sink_cheap_outputs(block: ir.Block, row_temps: bool) -> int:
    """Recompute a region's cheap outputs inside the regions that read them.

    Grouping fuses a value with its neighbours in program order; a value recomputed
    for the backward (x - mean, a ReLU mask) thus often lands in one region at the start
    of the backward and is stored, while the regions reading it come much later,
    across kernels it could not fuse through. When every reader of such an output is
    a region that can take its cone, the readers recompute it from the region's
    inputs and the output (a store and a load per reader) goes away. Returns how many
    outputs went away."""
    sunk = 0
    for fusion in [o.operation for o in block.operations if is_fusion(o)]:
        cones = _sinkable(fusion, row_temps)
        for result, v in zip(fusion.results, fusion_body(fusion)[1]):
            if result not in cones:
                continue
            consumers = [c if is_fusion(c) else _outline([c])
                         for c in {_enclosing(u.owner.operation) for u in result.uses}]
            if all([_sink_into(c, *cones[result], result, v) for c in consumers]):
                sunk += 1
        _drop_unused_results(fusion)
    return sunk


def _sinkable(fusion: ir.Operation, row_temps: bool) -> dict:
    """result -> its cheap cone, for the outputs of `fusion` its readers may recompute.
    A cone reads the outputs that stay stored rather than recompute them, but not one
    that is itself recomputed: a CNN's backward began with a region storing x + bias,
    x - mean, the ReLU mask and more, 5 MiB each, because each cone read the previous
    one, while only the ReLU output (read by the max-pool's slices) had to be stored."""
    body, yielded = fusion_body(fusion)
    candidates = set()
    largest = functools.cache(_largest)  # a region reads many of the outputs
    for result, v in zip(fusion.results, yielded):
        consumers = {_enclosing(u.owner.operation) for u in result.uses}
        size = _numel(v)
        if consumers and fusion not in consumers and all(
                is_fusion(c) or (c.name.startswith("dg.") and fusible(c)) for c in consumers) \
                and all(largest(c) <= size for c in consumers):  # (else: read broadcast,
            candidates.add(result)  # cheaper computed once at its own size)
    position = {op: i for i, op in enumerate(body)}
    value_of = dict(zip(fusion.results, yielded))
    stored = {v: r for r, v in value_of.items() if r not in candidates}
    cones = {r: _cheap_cone(v, position, stored, row_temps)
             for r, v in value_of.items() if r in candidates}
    while True:  # the first output too expensive to recompute stays stored: later cones
        expensive = next((r for r in fusion.results  # (LLaMA's normalized activations)
                          if r in cones and cones[r].found is None), None)  # read it
        if expensive is None:
            return {r: cone.found for r, cone in cones.items()}
        del cones[expensive]
        v = value_of[expensive]
        stored[v] = expensive
        for r, cone in cones.items():  # only the cones that reached `v` change
            if v in cone.visited:
                cones[r] = _cheap_cone(value_of[r], position, stored, row_temps)


def _toposort(block: ir.Block) -> None:
    """Reorder the block so every value is defined before use (stable: keeps program order
    where it can). Needed because a region sits where its last member was."""
    ops = [o.operation for o in block.operations]
    body, terminator = ops[:-1], ops[-1]
    index = {op: i for i, op in enumerate(body)}
    deps = [{index[x.owner.operation] for x in (fusion_inputs(op) if is_fusion(op) else op.operands)
             if not isinstance(x.owner, ir.Block) and x.owner.operation in index} for op in body]
    done: set[int] = set()
    order: list[int] = []

    def place(i: int) -> None:
        stack = [(i, iter(sorted(deps[i])))]
        while stack:
            j, it = stack[-1]
            nxt = next((d for d in it if d not in done), None)
            if nxt is not None:
                stack.append((nxt, iter(sorted(deps[nxt]))))
                continue
            stack.pop()
            if j not in done:
                done.add(j)
                order.append(j)
    for i in range(len(body)):
        if i not in done:
            place(i)
    for i in order:
        body[i].move_before(terminator)


def fuse_function(fn: ir.Operation, max_ops: int = 64, row_temps: bool = True) -> int:
    """Form the fusion regions of one func.func; returns how many were made. `row_temps`:
    the target keeps a row-local value on the stack of a row kernel (the CPU; see
    `_cost`)."""
    block = fn.regions[0].blocks[0]
    _recompute_cheap_pointwise(block, row_temps)
    _clone_duplicables(block)
    ops = [o.operation for o in block.operations if o.operation.name.startswith("dg.")]
    groups = _Grouping(ops, max_ops).run()
    for members in groups:
        _outline([ops[i] for i in sorted(members)])
    sunk = _sink_cheap_outputs(block, row_temps)
    erase_dead(block)  # clones of cheap ops may have left their originals unread
    _toposort(block)
    log.debug("dg-fuse: @%s: %d region outputs recomputed by their readers",
              ir.StringAttr(fn.attributes["sym_name"]).value, sunk)
    return len(groups)


def fuse_pass(module: ir.Operation, max_ops: int = 64, row_temps: bool = True) -> None:
    for fn in functions(module):
        made = fuse_function(fn, max_ops, row_temps)
        log.debug("dg-fuse: @%s: %d regions, %d kernels", ir.StringAttr(fn.attributes["sym_name"]).value,
                  made, count_kernels(fn))
