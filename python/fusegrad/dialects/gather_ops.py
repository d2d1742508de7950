"""Indexing dg ops: gather, index_select and the scatters: scatter_add, scatter_max,
scatter_min, scatter_mul (scatter_reduce) and scatter (indices are i32/i64)."""
from __future__ import annotations


from .core import Attr, Kind, ShapeError, define, lowering, reference_rule, require, shape_rule
from .reduction import check_dims
from .lazy_torch import torch

define("gather", ("x", "indices"), attrs={"dim": Attr.I64}, kind=Kind.GATHER,
       summary="torch.gather: out[i..] = x[i.. with i_dim := indices[i..]]; result shape = indices shape")
define("index_select", ("x", "indices"), attrs={"dim": Attr.I64}, kind=Kind.GATHER,
       summary="take along dim: result shape = x.shape[:dim] + indices.shape + x.shape[dim+1:]")
define("scatter_add", ("x", "indices", "src"), attrs={"dim": Attr.I64}, kind=Kind.GATHER,
       summary="torch.scatter_add: x with src[i..] added at x[i.. with i_dim := indices[i..]]")
for _extremum in ("max", "min"):
    define(f"scatter_{_extremum}", ("x", "indices", "src"), attrs={"dim": Attr.I64},
           kind=Kind.GATHER,
           summary=f"torch.scatter_reduce a{_extremum}: x with each target the {_extremum}imum "
                   "of it and the src elements sent to it (NaN-propagating)")
define("scatter_mul", ("x", "indices", "src"), attrs={"dim": Attr.I64}, kind=Kind.GATHER,
       summary="torch.scatter_reduce prod: x with each target multiplied by the src "
               "elements sent to it")
define("scatter", ("x", "indices", "src"), attrs={"dim": Attr.I64}, kind=Kind.GATHER,
       summary="torch.scatter: x with src[i..] stored at x[i.. with i_dim := indices[i..]] "
               "(in order: of repeated indices the last one stays)")


def _check_indices(idx, what):
    if idx.dtype not in ("i32", "i64"):
        raise ShapeError(f"{what}: indices must be i32 or i64, got {idx.dtype}")


@shape_rule("gather")
def _gather_shape(ins, attrs, hint, *, op):
    x, idx = ins
    _check_indices(idx, "dg.gather")
    (dim,) = check_dims([attrs["dim"]], x.rank, "dg.gather")
    if idx.rank != x.rank:
        raise ShapeError(f"dg.gather: indices rank {idx.rank} differs from operand rank {x.rank}")
    for d in range(x.rank):
        if d != dim:
            require(idx.shape[d] <= x.shape[d], f"dg.gather: indices dim {d} of size "
                    f"{idx.shape[d]} exceeds operand size {x.shape[d]}")
    return [idx.with_dtype(x.dtype)]


@shape_rule("index_select")
def _index_select_shape(ins, attrs, hint, *, op):
    x, idx = ins
    _check_indices(idx, "dg.index_select")
    (dim,) = check_dims([attrs["dim"]], x.rank, "dg.index_select")
    return [x.with_shape(x.shape[:dim] + idx.shape + x.shape[dim + 1:])]


# the elementwise dg op each accumulating scatter combines a target and a src element with
_COMBINE = {"scatter_add": "add", "scatter_max": "max", "scatter_min": "min",
            "scatter_mul": "mul"}


@shape_rule(*_COMBINE, "scatter")
def _scatter_shape(ins, attrs, hint, *, op):
    what = f"dg.{op}"
    x, idx, src = ins
    _check_indices(idx, what)
    (dim,) = check_dims([attrs["dim"]], x.rank, what)
    if src.dtype != x.dtype:
        raise ShapeError(f"{what}: src dtype {src.dtype} differs from operand {x.dtype}")
    if idx.shape != src.shape:
        raise ShapeError(f"{what}: indices shape {list(idx.shape)} differs from src "
                         f"shape {list(src.shape)}")
    if idx.rank != x.rank:
        raise ShapeError(f"{what}: indices rank {idx.rank} differs from operand rank {x.rank}")
    for d in range(x.rank):
        if d != dim:
            require(idx.shape[d] <= x.shape[d], f"{what}: indices dim {d} of size "
                    f"{idx.shape[d]} exceeds operand size {x.shape[d]}")
    return [x]


@reference_rule("gather")
def _gather_ref(x, idx, *, op, attrs, out):
    return [torch.gather(x, attrs["dim"], idx.long())]


@reference_rule("index_select")
def _index_select_ref(x, idx, *, op, attrs, out):
    dim = attrs["dim"]
    flat = torch.index_select(x, dim, idx.reshape(-1).long())
    return [flat.reshape(out[0].shape)]


@reference_rule("scatter_add")
def _scatter_add_ref(x, idx, src, *, op, attrs, out):
    return [torch.scatter_add(x, attrs["dim"], idx.long(), src)]


@reference_rule("scatter_max", "scatter_min", "scatter_mul")
def _scatter_combine_ref(x, idx, src, *, op, attrs, out):
    reduce = {"scatter_max": "amax", "scatter_min": "amin", "scatter_mul": "prod"}[op]
    return [torch.scatter_reduce(x, attrs["dim"], idx.long(), src, reduce)]


@reference_rule("scatter")
def _scatter_ref(x, idx, src, *, op, attrs, out):
    return [torch.scatter(x, attrs["dim"], idx.long(), src)]


# ---------------------------------------------------------------- lowering (dg-lower-to-linalg)
# Indices must lie in [0, size) of the indexed dim: out-of-range ones are clamped (memory
# safe) and reported, and the runtime raises IndexError (conversion/index_check.py).
def _to_index(op, v, size: int):
    from ..conversion.index_check import checked_index
    return checked_index(op, v, size)


def _checked(op, idx, size: int):
    """The indices tensor `idx` clamped into [0, size) (as i64), by a kernel of its own
    that records `op` as the failing site when one is out of range. The gather that reads
    it then holds no store: with the check in its inner loop, LLVM loaded an embedding's
    contiguous rows with gathers and scattered the error flag, at 5x eager's time."""
    from mlir import ir
    from ..conversion import linalg_builders as lb
    shape = lb.dims(idx)
    return lb.elementwise([idx], shape, ["i64"],
                          lambda a: [lb.index_cast(_to_index(op, a[0], size), "i64")])[0]


@lowering("gather")
def _gather_lower(op, operands, *, op_name, attrs, out):
    """A generic over the indices: out[i..] = x[i.. with i_dim := indices[i..]]. Each
    element reads x at an index of its own, so nothing vectorizes anyway and the index is
    checked in place (a checking kernel of its own would read and write the int64 indices
    once more: a 1024x1024 gather measured 0.60x eager's speed that way, 1.12x in place)."""
    from mlir import ir
    from ..conversion import linalg_builders as lb
    x, idx = operands
    o, dim = out[0], attrs["dim"]
    size = lb.dims(x)[dim]
    rows = _broadcast_rows(idx, dim)
    if rows is not None:  # one index per slice along dim (a scatter_add's gradient)
        rows = _checked(op, rows, size)

        def per_slice(_):
            i = lb.index_cast(lb.extract(rows, [lb.loop_index(dim)]), ir.IndexType.get())
            return [lb.extract(x, [i if d == dim else lb.loop_index(d) for d in range(o.rank)])]
        return [lb.elementwise([], o.shape, [o.dtype], per_slice)[0]]

    def body(a):
        coords = [_to_index(op, a[0], size) if d == dim else lb.loop_index(d)
                  for d in range(o.rank)]
        return [lb.extract(x, coords)]

    return lb.elementwise([idx], o.shape, [o.dtype], body)


@lowering("index_select")
def _index_select_lower(op, operands, *, op_name, attrs, out):
    """A generic over the result: loops [dim, dim+k) address the k-d indices tensor."""
    from mlir import ir
    from ..conversion import linalg_builders as lb
    x, idx = operands
    o, dim = out[0], attrs["dim"]
    k = ir.RankedTensorType(idx.type).rank
    x_rank = ir.RankedTensorType(x.type).rank
    idx = _checked(op, idx, lb.dims(x)[dim])

    def body(_):
        i = lb.index_cast(lb.extract(idx, [lb.loop_index(d) for d in range(dim, dim + k)]),
                          ir.IndexType.get())
        coords = [lb.loop_index(d) for d in range(dim)] + [i] + \
                 [lb.loop_index(d + k - 1) for d in range(dim + 1, x_rank)]
        return [lb.extract(x, coords)]

    return lb.elementwise([], o.shape, [o.dtype], body)


@lowering(*_COMBINE, "scatter")
def _scatter_lower(op, operands, *, op_name, attrs, out):
    """A scf.for nest over src carrying the result tensor: extract, combine (add, max, min
    or mul; a boolean sum is an or, a product an and), insert (or just insert, for
    dg.scatter), in order, so repeated indices accumulate, or the last one stays, like
    torch on the CPU. Indices broadcast from 1-D along `dim` (`_broadcast_rows`) are read
    and checked once per slice, before the slice's loops."""
    from mlir import ir
    from mlir.dialects import scf
    from ..conversion import linalg_builders as lb
    from .core import lookup
    x, idx, src = operands
    o, dim = out[0], attrs["dim"]
    shape = lb.dims(src)
    combine = _COMBINE.get(op_name)
    if o.dtype == "i1" and combine in ("add", "mul"):  # or, and: torch's bool sum, product
        combine = "max" if combine == "add" else "min"
    rows = _broadcast_rows(idx, dim)

    def nest(d, acc, ivs, row):
        if rows is not None and d == dim + 1:  # one index per slice along dim
            row = _to_index(op, lb.extract(rows, [ivs[dim]]), o.shape[dim])
        if d == len(shape):
            if row is None:
                row = _to_index(op, lb.extract(idx, ivs), o.shape[dim])
            coords = [row if k == dim else iv for k, iv in enumerate(ivs)]
            if combine is None:
                return lb.insert(lb.extract(src, ivs), acc, coords)
            total = lookup(combine).scalar([lb.extract(acc, coords), lb.extract(src, ivs)],
                                           op=combine, attrs={}, in_dtypes=[o.dtype] * 2,
                                           out_dtype=o.dtype)
            return lb.insert(total, acc, coords)
        loop = scf.ForOp(lb.index(0), lb.index(shape[d]), lb.index(1), [acc])
        with ir.InsertionPoint(loop.body):
            scf.YieldOp([nest(d + 1, loop.inner_iter_args[0], ivs + [loop.induction_variable],
                              row)])
        return loop.results[0]

    return [nest(0, x, [], None)]


def _broadcast_rows(idx, dim: int):
    """The 1-D indices `idx` broadcasts along `dim` (an index_select's or embedding's
    gradient), when it is such a broadcast, else None. The scatter then reads and checks
    one index per slice outside the loops over the slice, which hold no store to the
    error flag and vectorize (checked per element, an embedding's backward takes 1.7x
    eager's time). A broadcast that also computes on each index (index_add's wrapping of
    negative indices, fused into it) computes it once per index, in a 1-D generic of its
    body, not as a full-size int64 tensor checked element by element (which makes a
    40960 x 64 index_add 2.1 ms, eager 0.6)."""
    from mlir import ir
    from ..conversion import linalg_builders as lb
    owner = idx.owner
    if isinstance(owner, ir.Block) or owner.name != "linalg.generic" or \
            len(owner.results) != 1:
        return None
    maps = [ir.AffineMapAttr(m).value for m in ir.ArrayAttr(owner.attributes["indexing_maps"])]
    inputs = list(owner.operands)[:-1]

    def along_dim(m):
        results = list(m.results)
        return len(results) == 1 and isinstance(results[0], ir.AffineDimExpr) and \
            results[0].position == dim
    if not inputs or not all(along_dim(m) for m in maps[:-1]) or \
            maps[-1] != ir.AffineMap.get_identity(maps[-1].n_dims):
        return None
    body = owner.regions[0].blocks[0]
    ops = [o.operation for o in body.operations]
    args = list(body.arguments)[:len(inputs)]
    inside = set(args) | {r for o in ops for r in o.results}
    if any(o.name == "linalg.index" or any(v not in inside and isinstance(v.owner, ir.Block)
                                           for v in o.operands) for o in ops):
        return None
    if len(inputs) == 1 and len(ops) == 1 and ops[0].operands[0] == args[0]:
        return inputs[0]

    def per_index(new_args):
        mapped = dict(zip(args, new_args))
        for o in ops[:-1]:
            clone = o.clone()
            for k, v in enumerate(o.operands):
                if v in mapped:
                    clone.operands[k] = mapped[v]
            mapped.update(zip(o.results, clone.results))
        return [mapped.get(v, v) for v in ops[-1].operands]
    dtype = str(ir.RankedTensorType(idx.type).element_type)
    return lb.elementwise(inputs, lb.dims(inputs[0]), [dtype],
                          per_index)[0]


# (end of lowering rules)


# ---------------------------------------------------------------- autodiff (vjp, jvp)
from .builder import spec  # noqa: E402
from .core import jvp_rule, vjp_rule  # noqa: E402
from .shape_ops import reshape_to  # noqa: E402


@vjp_rule("gather")
def _gather_vjp(b, ins, outs, cts, *, op, attrs):
    (g,) = cts
    if g is None:
        return [None, None]
    x, idx = ins
    dim, xs, ids = attrs["dim"], spec(x), spec(idx)
    if ids.shape[dim] == 1 and all(ids.shape[d] == xs.shape[d]
                                   for d in range(xs.rank) if d != dim):
        return [_one_hot_scatter(b, x, idx, g, dim), None]
    return [b.scatter_add(b.full_like(x, 0.0), idx, g, dim=dim), None]


def _one_hot_scatter(b, x, idx, g, dim: int):
    """scatter_add(zeros_like(x), idx, g) for one index per slice along `dim` (a loss's
    gather of the target logit): select(iota == idx, g, 0) is elementwise, so it fuses
    into the kernel that consumes it instead of filling and re-reading a whole tensor.
    The forward gather already checked the indices."""
    xs = spec(x)
    every = list(range(xs.rank))
    hit = b.compare(b.iota(shape=xs.shape, dtype=spec(idx).dtype, dim=dim),
                    b.broadcast_in_dim(idx, shape=xs.shape, dims=every), direction="eq")
    return b.select(hit, b.broadcast_in_dim(g, shape=xs.shape, dims=every), b.full_like(x, 0.0))


@vjp_rule("index_select")
def _index_select_vjp(b, ins, outs, cts, *, op, attrs):
    (g,) = cts
    if g is None:
        return [None, None]
    x, idx = ins
    dim, x_shape, idx_spec = attrs["dim"], spec(ins[0]).shape, spec(idx)
    # flatten the index dims, then scatter_add along dim with indices broadcast to the rows
    rows = x_shape[:dim] + (idx_spec.numel,) + x_shape[dim + 1:]
    flat_idx = reshape_to(b, idx, (idx_spec.numel,))
    wide_idx = b.broadcast_in_dim(flat_idx, shape=rows, dims=[dim])
    return [b.scatter_add(b.full_like(x, 0.0), wide_idx, reshape_to(b, g, rows), dim=dim), None]


@vjp_rule("scatter_add")
def _scatter_add_vjp(b, ins, outs, cts, *, op, attrs):
    (g,) = cts
    if g is None:
        return [None, None, None]
    return [g, None, b.gather(g, ins[1], dim=attrs["dim"])]


def _partials(b, op: str, ins, out, dim: int):
    """(d out/d x, d out/d src at its target) of scatter_max/min/mul, elementwise. Tied
    extrema share evenly, as eager's; a src element's partial of a product divides it out
    only where it is not zero, and a target's only zero gets the product of the others
    (eager's masking), so zeros give exact partials."""
    x, idx, src = ins
    zero, one = b.full_like(x, 0.0), b.full_like(x, 1.0)
    src_zero, src_one = b.full_like(src, 0.0), b.full_like(src, 1.0)
    if op != "scatter_mul":
        x_won = b.compare(x, out, direction="eq")
        src_won = b.compare(src, b.gather(out, idx, dim=dim), direction="eq")
        share = b.div(one, b.scatter_add(b.select(x_won, one, zero), idx,
                                         b.select(src_won, src_one, src_zero), dim=dim))
        return (b.select(x_won, share, zero),
                b.select(src_won, b.gather(share, idx, dim=dim), src_zero))
    dx = b.scatter_mul(one, idx, src, dim=dim)  # the product of the rest: the src elements
    is_zero = b.compare(src, src_zero, direction="eq")
    zeros_at_target = b.gather(b.scatter_add(zero, idx, b.select(is_zero, src_one, src_zero),
                                             dim=dim), idx, dim=dim)
    only_zero = b.create("and", [is_zero, b.compare(zeros_at_target, src_one, direction="eq")])
    without_it = b.scatter_mul(x, idx, b.select(only_zero, src_one, src), dim=dim)
    dsrc = b.select(only_zero, b.gather(without_it, idx, dim=dim),
                    b.div(b.gather(out, idx, dim=dim), b.select(is_zero, src_one, src)))
    return dx, dsrc


@vjp_rule("scatter_max", "scatter_min", "scatter_mul")
def _scatter_combine_vjp(b, ins, outs, cts, *, op, attrs):
    (g,) = cts
    if g is None:
        return [None, None, None]
    dim = attrs["dim"]
    dx, dsrc = _partials(b, op, ins, outs[0], dim)
    return [b.mul(g, dx), None, b.mul(b.gather(g, ins[1], dim=dim), dsrc)]


@vjp_rule("scatter")
def _scatter_vjp(b, ins, outs, cts, *, op, attrs):
    """The overwritten elements of x get no gradient; every src element gets the
    gradient at its target, a repeated index's losers too (as eager's index_put)."""
    (g,) = cts
    if g is None:
        return [None, None, None]
    x, idx, src = ins
    written = b.scatter(b.full_like(x, 0.0), idx, b.full_like(src, 1.0), dim=attrs["dim"])
    kept = b.select(b.compare(written, b.full_like(x, 0.0), direction="eq"), g,
                    b.full_like(g, 0.0))
    return [kept, None, b.gather(g, idx, dim=attrs["dim"])]


@jvp_rule("gather", "index_select")
def _take_jvp(b, ins, outs, tangents, *, op, attrs):
    t = tangents[0]
    return [None if t is None else b.create(op, (t, ins[1]), **attrs)]


@jvp_rule("scatter_add")
def _scatter_add_jvp(b, ins, outs, tangents, *, op, attrs):
    tx, _, tsrc = tangents
    if tsrc is None:
        return [tx]
    base = b.full_like(ins[0], 0.0) if tx is None else tx
    return [b.scatter_add(base, ins[1], tsrc, dim=attrs["dim"])]


@jvp_rule("scatter_max", "scatter_min", "scatter_mul")
def _scatter_combine_jvp(b, ins, outs, tangents, *, op, attrs):
    tx, _, tsrc = tangents
    if tx is None and tsrc is None:
        return [None]
    dim = attrs["dim"]
    dx, dsrc = _partials(b, op, ins, outs[0], dim)
    total = b.full_like(ins[0], 0.0) if tx is None else b.mul(tx, dx)
    if tsrc is not None:
        total = b.scatter_add(total, ins[1], b.mul(tsrc, dsrc), dim=dim)
    return [total]


@jvp_rule("scatter")
def _scatter_jvp(b, ins, outs, tangents, *, op, attrs):
    tx, _, tsrc = tangents
    if tx is None and tsrc is None:
        return [None]
    return [b.scatter(b.full_like(ins[0], 0.0) if tx is None else tx, ins[1],
                      b.full_like(ins[2], 0.0) if tsrc is None else tsrc, dim=attrs["dim"])]
