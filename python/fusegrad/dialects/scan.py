"""Scans: running sums, products, extremes and log-sum-exps along one dim.

`dg.scan` combines each element with the running value before it, along `dim`
(from its end when `reverse` = 1), as eager's cumsum, cumprod, cummax/cummin and
logcumsumexp do on the CPU, NaN and infinities included (the combiners' rules:
conversion/scans.py). `max` and `min` also return the index of the running extreme
(i64, cummax's indices). Its lowering is a serial loop along `dim` inside loops over
the other dims (conversion/scans.py), which the CPU target vectorizes
(codegen/cpu/scans.py).

`dg.scan_mul_grad` is the cotangent of a `mul` scan's operand: eager's
cumprod_backward, whose gradient at a zero is the product of the others and at a NaN
is NaN. Its derivatives go through a formula exact around the point (zeros included),
since eager's masks, held constant, lose the terms a later zero cancels.
"""
from __future__ import annotations

from ..conversion.scans import ARG_COMBINERS, COMBINERS
from .core import Attr, Kind, ShapeError, define, lowering, reference_rule, shape_rule
from .lazy_torch import torch
from .types import is_float, torch_dtype

define("scan", ("x",), ("result", "*indices"),
       attrs={"dim": Attr.I64, "combiner": Attr.STR, "reverse": Attr.I64}, kind=Kind.SCAN,
       summary="inclusive scan along dim with combiner " + "/".join(COMBINERS) +
               " (max/min also give the i64 index of the running extreme)")
define("scan_mul_grad", ("x", "grad"), attrs={"dim": Attr.I64, "reverse": Attr.I64},
       kind=Kind.SCAN,
       summary="the cotangent of x for the cotangent grad of dg.scan(x){combiner = \"mul\"}")


def _check_direction(op: str, x, attrs) -> None:
    d = attrs["dim"]
    if not 0 <= d < x.rank:
        raise ShapeError(f"dg.{op}: dim {d} out of range for rank {x.rank}")
    if attrs["reverse"] not in (0, 1):
        raise ShapeError(f"dg.{op}: reverse must be 0 or 1, got {attrs['reverse']}")


@shape_rule("scan")
def _scan_shape(ins, attrs, hint, *, op):
    (x,) = ins
    _check_direction(op, x, attrs)
    combiner = attrs["combiner"]
    if combiner not in COMBINERS:
        raise ShapeError(f"dg.scan: combiner must be one of {COMBINERS}, got {combiner!r}")
    if x.dtype == "i1":
        raise ShapeError("dg.scan does not take i1 operands; convert first")
    if combiner == "logaddexp" and not is_float(x.dtype):
        raise ShapeError(f"dg.scan: logaddexp takes floating-point operands, got {x.dtype}")
    return [x] + ([x.with_dtype("i64")] if combiner in ARG_COMBINERS else [])


@shape_rule("scan_mul_grad")
def _scan_mul_grad_shape(ins, attrs, hint, *, op):
    x, g = ins
    _check_direction(op, x, attrs)
    if g != x or not is_float(x.dtype):
        raise ShapeError(f"dg.scan_mul_grad: x and grad must be one floating-point type, got "
                         f"{x} and {g}")
    return [x]


def _flip(t, d: int, reverse: int):
    return torch.flip(t, [d]) if reverse else t


@reference_rule("scan")
def _scan_ref(x, *, op, attrs, out):
    d, combiner, rev = attrs["dim"], attrs["combiner"], attrs["reverse"]
    x = _flip(x, d, rev)
    if combiner == "add":
        results = [torch.cumsum(x, d, dtype=x.dtype)]
    elif combiner == "mul":
        results = [torch.cumprod(x, d, dtype=x.dtype)]
    elif combiner == "logaddexp":
        results = [torch.logcumsumexp(x, d)]
    else:
        values, indices = (torch.cummax if combiner == "max" else torch.cummin)(x, d)
        results = [values, x.shape[d] - 1 - indices if rev else indices]
    return [_flip(r, d, rev) for r in results]


@reference_rule("scan_mul_grad")
def _scan_mul_grad_ref(x, g, *, op, attrs, out):
    """Values: eager's cumprod_backward (first order); derivatives: those of the sum of
    omitted products (eager's double backward), which is exact at zeros."""
    d, rev = attrs["dim"], attrs["reverse"]
    x, g = _flip(x, d, rev), _flip(g, d, rev)
    exact = _omitted_products(x.movedim(d, -1), g.movedim(d, -1)).movedim(-1, d)
    eager = _eager_cumprod_grad(x.detach(), g.detach(), d)
    grad = eager + torch.where(torch.isfinite(exact), exact - exact.detach(),
                               torch.zeros_like(exact))
    return [_flip(grad, d, rev)]


def _omitted_products(x, g):
    """sum over j >= k of g_j * prod_{i <= j, i != k} x_i, along the last dim."""
    n = x.shape[-1]
    omitted = torch.where(torch.eye(n, dtype=torch.bool), 1, x.unsqueeze(-2)).cumprod(-1)
    later = torch.ones(n, n, dtype=torch.bool).triu()
    return (torch.where(later, omitted, 0) * g.unsqueeze(-2)).sum(-1)


def _eager_cumprod_grad(x, g, d: int):
    """eager's cumprod_backward (FunctionsManual.cpp) of the first order, along d."""
    y = x.cumprod(d)
    count = (x == 0).cumsum(d)
    before, first_segment = count == 0, count == 1
    ahead = torch.where(before, y * g, 0).flip(d).cumsum(d).flip(d) / x
    first = (x == 0) & first_segment
    products = torch.where(first_segment & ~first, x, 1).cumprod(d)
    total = (products * torch.where(first_segment, g, 0)).sum(d, keepdim=True)
    previous = torch.cat([torch.ones_like(y.narrow(d, 0, 1)), y.narrow(d, 0, y.shape[d] - 1)], d)
    return torch.where(before, ahead, torch.where(first, total * previous, 0))


@lowering("scan")
def _scan_lower(op, operands, *, op_name, attrs, out):
    """Loops (conversion/scans.py); along a dim of one element, the operand itself."""
    from ..conversion import linalg_builders as lb
    from ..conversion.scans import scan_nest
    (x,) = operands
    d, combiner = attrs["dim"], attrs["combiner"]
    if out[0].shape[d] == 1:
        return [x] + ([lb.full(out[0].shape, "i64", 0)] if combiner in ARG_COMBINERS else [])
    return scan_nest(x, [o.dtype for o in out], d, combiner, bool(attrs["reverse"]))


@lowering("scan_mul_grad")
def _scan_mul_grad_lower(op, operands, *, op_name, attrs, out):
    """eager's formula as dg ops, which dg-lower-to-linalg lowers in turn."""
    from .builder import Builder
    x, g = operands
    return [_Scans(Builder(), x, attrs["dim"], attrs["reverse"]).eager_grad(x, g)]


# (end of lowering rules)


# ---------------------------------------------------------------- autodiff (vjp, jvp)
from .builder import spec  # noqa: E402
from .composite import jvp_through, vjp_through  # noqa: E402
from .core import jvp_rule, vjp_rule  # noqa: E402


class _Scans:
    """dg ops along one dim of a shape, in one scan direction: what the formulas for
    products and log-sum-exps are written in."""

    def __init__(self, b, like, dim: int, reverse: int) -> None:
        self.b, self.spec, self.dim, self.reverse = b, spec(like), dim, reverse

    def scan(self, v, combiner: str, backward: bool = False):
        """The scan of `v` in this direction (`backward`: the opposite one)."""
        return self.b.scan(v, dim=self.dim, combiner=combiner,
                           reverse=self.reverse ^ int(backward))[0]

    def full(self, value: float, dtype: str | None = None):
        return self.b.full(shape=self.spec.shape, dtype=dtype or self.spec.dtype, value=value)

    def eq(self, v, value: float):
        return self.b.compare(v, self.full(value, spec(v).dtype), direction="eq")

    def previous(self, y):
        """y at the element before each in scan order, 1 before the first."""
        b, shape, d = self.b, self.spec.shape, self.dim
        rank = len(shape)
        one_more = [0] * rank
        one_more[d] = 1
        low, high = (one_more, [0] * rank) if not self.reverse else ([0] * rank, one_more)
        padded = b.pad(y, low=low, high=high, interior=[0] * rank, value=1.0)
        start = [0] * rank
        start[d] = 1 if self.reverse else 0
        limit = list(shape)
        limit[d] = shape[d] + start[d]
        return b.slice(padded, start=start, limit=limit, stride=[1] * rank)

    def zero_counts(self, x):
        """(x == 0, the number of zeros up to each element in scan order, as i32)."""
        zero = self.eq(x, 0.0)
        return zero, self.scan(self.b.convert(zero, dtype="i32"), "add")

    def eager_grad(self, x, g):
        """eager's cumprod_backward (first order): before the first zero, the reversed
        running sum of y * g (zeroed from the first zero on) over x; at the first zero,
        the product before it times the sum of g * (the products after it up to the
        second zero); after it, 0."""
        b = self.b
        y = self.scan(x, "mul")
        zeros = self.full(0.0)
        is_zero, count = self.zero_counts(x)
        before = self.eq(count, 0.0)
        ahead = b.div(self.scan(b.select(before, b.mul(y, g), zeros), "add", backward=True), x)
        first_segment = self.eq(count, 1.0)
        first = b.create("and", [is_zero, first_segment])
        inside = b.create("and", [first_segment, b.create("not", [first])])
        products = self.scan(b.select(inside, x, self.full(1.0)), "mul")
        total = b.reduce_sum(b.mul(products, b.select(first_segment, g, zeros)), dims=[self.dim])
        kept = [k for k in range(self.spec.rank) if k != self.dim]
        at_first = b.mul(b.broadcast_in_dim(total, shape=self.spec.shape, dims=kept),
                         self.previous(y))
        return b.select(before, ahead, b.select(first, at_first, zeros))

    def exact_grad(self, x, g):
        """The same cotangent as a formula exact around x, zeros held where they are:
        sum over j >= k of g_j * prod_{i <= j, i != k} x_i. Before the first zero
        that is the reversed running sum of y * g over x_k. From the l-th zero (l = 1,
        2) to the next, the product before k times the reversed running sum of
        g * v over v_k, v the products of x from after the l-th zero (nonzero up to
        the next one). From the third zero on the value and its first derivatives are
        0 (two zeros before k), so every first derivative of the cotangent is exact:
        what dg-autodiff needs of it for second derivatives."""
        b = self.b
        y = self.scan(x, "mul")
        ones, zeros = self.full(1.0), self.full(0.0)
        is_zero, count = self.zero_counts(x)
        earlier = b.sub(count, b.convert(is_zero, dtype="i32"))  # zeros before each
        later_terms = zeros
        for level in (2, 1):
            here = self.eq(count, float(level))
            v = self.scan(b.select(b.compare(earlier, self.full(level, "i32"), direction="lt"),
                                   ones, x), "mul")
            running = b.div(self.scan(b.mul(g, v), "add", backward=True),
                            b.select(here, v, ones))
            later_terms = b.select(here, running, later_terms)
        before = self.eq(count, 0.0)
        ahead = b.div(self.scan(b.mul(y, g), "add", backward=True), b.select(before, x, ones))
        return b.select(before, ahead, b.mul(self.previous(y), later_terms))

    def cumprod_tangent(self, x, y, t):
        """eager's cumprod_jvp: the running sum of t / x times y before the first zero;
        from it on, the products with the first zero's x replaced by its tangent."""
        b = self.b
        ones = self.full(1.0)
        is_zero, count = self.zero_counts(x)
        first = b.create("and", [is_zero, self.eq(count, 1.0)])
        from_first = b.compare(count, self.full(0.0, "i32"), direction="gt")
        plain = b.mul(self.scan(b.div(t, b.select(is_zero, ones, x)), "add"), y)
        return b.select(from_first, self.scan(b.select(first, t, x), "mul"), plain)

    def logcumsumexp_cotangent(self, x, y, g):
        """eager's logcumsumexp_backward: the positive and negative parts of g, each a
        reversed log-sum-exp of log|g| - y, plus x, exponentiated."""
        b = self.b
        lowest = self.full(torch.finfo(torch_dtype(self.spec.dtype)).min)
        zeros = self.full(0.0)
        log_abs = b.log(b.abs(g))

        def part(direction: str):
            log_part = b.select(b.compare(g, zeros, direction=direction), log_abs, lowest)
            return b.exp(b.add(self.scan(b.sub(log_part, y), "logaddexp", backward=True), x))
        return b.sub(part("gt"), part("lt"))

    def logcumsumexp_tangent(self, x, t):
        """eager's logcumsumexp_jvp: running sums of exp(x - max) * t over those of
        exp(x - max) (below 1e-13: 1), the max over the dim held constant."""
        b = self.b
        kept = [k for k in range(self.spec.rank) if k != self.dim]
        peak = b.stop_gradient(b.reduce_max(x, dims=[self.dim]))
        e = b.exp(b.sub(x, b.broadcast_in_dim(peak, shape=self.spec.shape, dims=kept)))
        sums = self.scan(e, "add")
        tiny = b.compare(sums, self.full(1e-13), direction="lt")
        return b.div(self.scan(b.mul(e, t), "add"), b.select(tiny, self.full(1.0), sums))


def _float(v) -> bool:
    return is_float(spec(v).dtype)


@vjp_rule("scan")
def _scan_vjp(b, ins, outs, cts, *, op, attrs):
    (x,), g = ins, cts[0]
    if g is None or not _float(x):
        return [None]
    d, combiner, rev = attrs["dim"], attrs["combiner"], attrs["reverse"]
    if combiner in ARG_COMBINERS:
        return [b.scatter_add(b.full_like(x, 0.0), outs[1], g, dim=d)]
    s = _Scans(b, x, d, rev)
    if combiner == "add":
        return [s.scan(g, "add", backward=True)]
    if combiner == "mul":
        return [b.scan_mul_grad(x, g, dim=d, reverse=rev)]
    return [s.logcumsumexp_cotangent(x, outs[0], g)]


@jvp_rule("scan")
def _scan_jvp(b, ins, outs, tangents, *, op, attrs):
    (x,), (t,) = ins, tangents
    if t is None or not _float(x):
        return [None] * len(outs)
    d, combiner = attrs["dim"], attrs["combiner"]
    if combiner in ARG_COMBINERS:
        return [b.gather(t, outs[1], dim=d), None]
    s = _Scans(b, x, d, attrs["reverse"])
    if combiner == "add":
        return [s.scan(t, "add")]
    if combiner == "mul":
        return [s.cumprod_tangent(x, outs[0], t)]
    return [s.logcumsumexp_tangent(x, t)]


def _exact_grad(attrs):
    return lambda b, x, g: [_Scans(b, x, attrs["dim"], attrs["reverse"]).exact_grad(x, g)]


@vjp_rule("scan_mul_grad")
def _scan_mul_grad_vjp(b, ins, outs, cts, *, op, attrs):
    return vjp_through(b, _exact_grad(attrs), ins, cts)


@jvp_rule("scan_mul_grad")
def _scan_mul_grad_jvp(b, ins, outs, tangents, *, op, attrs):
    return jvp_through(b, _exact_grad(attrs), ins, tangents)
