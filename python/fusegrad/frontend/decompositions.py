"""The decomposition table handed to `make_fx`: what reaches the importer.

Starting point: `torch._decomp.core_aten_decompositions()`. On top of it we
decompose composite ops whose PyTorch decompositions are already built from
ops the importer maps one-to-one (so the importer stays small and dg stays
closed), and we *keep* the few ops whose decompositions would produce worse
dg than a direct mapping.

Added (decomposed before import):
  _softmax, _log_softmax          amax/sub/exp/sum/div (same order as eager), the
                                  max behind fusegrad::stop_gradient (see below)
  _safe_softmax (attention)       the same, a row of -inf gives 0 with a 0 derivative
  native_layer_norm               var_mean + rsqrt
  native_batch_norm, _native_batch_norm_legit{,_no_training,.no_stats}
  native_group_norm               reshape + var_mean
  gelu (both approximate modes)   erf / tanh pointwise chains
  leaky_relu, elu, celu, selu, mish, softplus, logit
  addmm, addmv, addbmm, baddbmm   mm/bmm + scaled adds
  lerp, addcmul, addcdiv, xlogy, logaddexp, logaddexp2, frac,
  log_sigmoid_forward, rsub, square, dist, *_copy views
  diagonal, trace                 as_strided (a gather of computed indices)
  tril_indices, triu_indices      constants
  addbmm (ours)                   one mm over the batch folded into the contraction
  _trilinear (ours: bilinear)     einsum, so two matmuls
  elu, celu, softplus, mish (ours) PyTorch's, with the exponential of the branch `where`
                                  drops clamped (its 0 * inf made large inputs' gradient NaN)
  index_fill (ours)               a select by a mask of the indexed positions (PyTorch's
                                  copies the value per index: a repeated index doubled
                                  the value's gradient)

Corrected (PyTorch registers these decompositions as the op's Python autograd or
CompositeImplicitAutograd kernel, which runs while tracing before any table is
consulted; `corrected_kernels` swaps ours in for the trace):
  multilabel_margin_loss_forward  PyTorch's, with the slots after a -1 masked
  upsample_linear1d, upsample_bilinear2d, upsample_trilinear3d (.vec, and .default:
                                  in the table where no autograd kernel is registered)
                                  eager's weights and order of operations
                                  (linear_interpolation.py), so infinities spread as
                                  in eager

Kept where exact (mapped to dg.attention by `aten_ops`):
  _scaled_dot_product_flash_attention_for_cpu
                       f32/f64 without dropout, from 256 keys on: PyTorch's flash
                       kernel runs it on the CPU; otherwise its decomposition

Kept (removed from the core table, mapped directly by `aten_ops`):
  adaptive_avg_pool2d, adaptive_avg_pool3d
                       the core decomposition builds index tensors; the
                       importer maps divisible sizes to reshape + mean
  bernoulli            the core decomposition calls `rand_like`; the importer
                       maps it onto dg.rng_* with the function's seed input
  eye                  the core decomposition compares uint8 aranges (no dg
                       dtype); the importer compares two iotas
  select_scatter (and slice_scatter, kept too)
                       what functionalization writes a mutated slice back with;
                       their decompositions return contiguous results where the
                       op keeps the input's strides, and functionalization then
                       replays the base's views on them: a view of a permuted
                       einsum result failed to trace (HF Funnel). The importer
                       pads the source into place and selects.
  hardtanh, hardsigmoid, hardswish
                       their decompositions clamp, whose gradient passes at
                       the bounds; theirs does not (relu6 is hardtanh)
  std.correction, std_mean.correction, linalg_vector_norm, sinc
                       sqrt(var), sum(|x|^p)^(1/p) and sin(pi x)/(pi x) have a 0/0
                       gradient at 0; eager's is 0 there
  var/std/var_mean.correction and clamp.Tensor are left to the importer too:
  their PyTorch decompositions are `torch._refs` that emit prims.* ops.
"""
from __future__ import annotations

import contextlib
import sys
from typing import Any, Callable, Iterator

import torch
from torch._decomp import core_aten_decompositions, get_decompositions
try:
    from torch._decomp.decompositions import _softmax_unbacked_safe_amax
except ImportError:  # torch < 2.12 (the CUDA machines' torch 2.11): static shapes only
    def _softmax_unbacked_safe_amax(x: torch.Tensor, dim: int) -> torch.Tensor:
        if x.numel() == 0:  # amax has no identity; any value of the right shape will do
            return x.sum(dim, keepdim=True)
        return torch.amax(x, dim, keepdim=True)
from torch._prims_common import ELEMENTWISE_TYPE_PROMOTION_KIND, elementwise_dtypes

from . import custom_ops  # noqa: F401  (defines torch.ops.fusegrad.stop_gradient)
from . import linear_interpolation

aten = torch.ops.aten


def _shift_by_max(x: torch.Tensor, dim: int,
                  masked_rows: bool = False) -> tuple[torch.Tensor, torch.dtype]:
    """`x - max(x, dim)` in the computation dtype, and the result dtype. The max is only
    there for range: softmax does not depend on it, so its derivative is zero. Held
    constant (as JAX does), autodiff does not differentiate amax, whose derivative
    needs a count of the maxima per row: one more reduction in the forward, saved for
    a backward term that sums to zero. `masked_rows`: a row of -inf shifts by 0 (its
    exps are 0, not -inf - -inf = NaN)."""
    computation, result = elementwise_dtypes(
        x, type_promotion_kind=ELEMENTWISE_TYPE_PROMOTION_KIND.DEFAULT)
    x = x.contiguous().to(computation)
    x_max = torch.ops.fusegrad.stop_gradient(_softmax_unbacked_safe_amax(x, dim))
    if masked_rows:
        x_max = torch.where(x_max == float("-inf"), 0.0, x_max)
    return x - x_max, result


def _softmax(x: torch.Tensor, dim: int, half_to_float: bool) -> torch.Tensor:
    shifted, result = _shift_by_max(x, dim)
    unnormalized = torch.exp(shifted)
    out = unnormalized / torch.sum(unnormalized, dim, keepdim=True)
    return out if half_to_float else out.to(result)


def _safe_softmax(x: torch.Tensor, dim: int, dtype: torch.dtype | None = None) -> torch.Tensor:
    """softmax, with 0 along a row of -inf (attention's query that may attend to no key),
    as eager, and a zero derivative there: PyTorch's decomposition selects zeros over
    that row's NaN softmax, and the select's zero cotangent times NaN made every
    gradient NaN. Here the row's exps are 0 and its sum is taken as 1."""
    shifted, result = _shift_by_max(x if dtype is None else x.to(dtype), dim, masked_rows=True)
    unnormalized = torch.exp(shifted)
    total = torch.sum(unnormalized, dim, keepdim=True)
    return (unnormalized / torch.where(total == 0, 1.0, total)).to(result)


def _log_softmax(x: torch.Tensor, dim: int, half_to_float: bool) -> torch.Tensor:
    shifted, result = _shift_by_max(x, dim)
    out = shifted - torch.log(torch.sum(torch.exp(shifted), dim, keepdim=True))
    return out if half_to_float else out.to(result)


_ADDED = [
    aten.native_layer_norm,
    aten.native_batch_norm,
    aten._native_batch_norm_legit,
    aten._native_batch_norm_legit_no_training,
    aten._native_batch_norm_legit_functional,
    aten.native_group_norm,
    aten.gelu,
    aten.leaky_relu,
    aten.elu,
    aten.celu,
    aten.selu,
    aten.mish,
    aten.softplus,
    aten.logit,
    aten.addmm,
    aten.addmv,
    aten.baddbmm,
    aten.lerp,
    aten.addcmul,
    aten.addcdiv,
    aten.xlogy,
    aten.logaddexp,
    aten.frac,
    aten.log_sigmoid_forward,
    aten.rsub,
    aten.square,
    aten.expand_as,
    aten.squeeze_copy,
    aten.unsqueeze_copy,
    aten.t_copy,
    aten.transpose_copy,
    aten.permute_copy,
    aten.view_copy,
    aten.alias_copy,
    aten.expand_copy,
    aten.diagonal_copy,
    aten.index_select_backward,
    aten.logaddexp2,
    aten.dist,
    aten.diagonal,
    aten.trace,
    aten.tril_indices,
    aten.triu_indices,
]

_REMOVED = [
    aten.adaptive_avg_pool2d.default,
    aten.adaptive_avg_pool3d.default,
    aten.hardsigmoid.default,
    aten.hardswish.default,
    aten.std.correction,
    aten.std_mean.correction,
    aten.sinc.default,
    aten.bernoulli.default,
    aten.eye.default,
    aten.eye.m,
    aten.select_scatter.default,
]


def _flash_attention_for_cpu(decomposition: Callable) -> Callable:
    """PyTorch's CPU flash attention, kept for `dg.attention` (its kernel runs it, see
    codegen/cpu/library/attention_to_torch.py) where that computes it exactly (f32/f64, no dropout,
    key/value heads dividing the query heads, a mask of the query's dtype or bool) and
    pays (`attention.MIN_KEYS` keys or more). Otherwise `decomposition`, the math form,
    which autodiff and dg-fuse work on like any other ops."""
    from ..dialects.attention import MIN_KEYS

    def flash(query, key, value, dropout_p=0.0, is_causal=False, *, attn_mask=None,
              scale=None):
        if dropout_p == 0.0 and query.dtype in (torch.float32, torch.float64) and \
                query.size(1) % key.size(1) == 0 and key.size(2) >= MIN_KEYS and \
                (attn_mask is None or attn_mask.dtype in (query.dtype, torch.bool)):
            return NotImplemented  # traced as the op itself
        return decomposition(query, key, value, dropout_p, is_causal, attn_mask=attn_mask,
                             scale=scale)
    return flash


def _addbmm(input: torch.Tensor, batch1: torch.Tensor, batch2: torch.Tensor, *,
            beta: float = 1, alpha: float = 1) -> torch.Tensor:
    """sum_b batch1[b] @ batch2[b] is one [n, B*k] @ [B*k, p] matmul (torch 2.13 has no
    decomposition of its own)."""
    if not input.is_floating_point():  # eager truncates the scalars to the integer dtype
        alpha, beta = int(alpha), int(beta)
    if input.dtype in (torch.float16, torch.bfloat16):  # in f32, rounded once, as addmm's
        return _addbmm(input.float(), batch1.float(), batch2.float(), beta=beta,
                       alpha=alpha).to(input.dtype)
    b, n, k = batch1.shape
    product = batch1.permute(1, 0, 2).reshape(n, b * k) @ batch2.reshape(b * k, -1)
    out = product if alpha == 1 else alpha * product
    if beta == 0:  # input is ignored, NaN included
        return out
    return out + (input if beta == 1 else beta * input)


def _trilinear(i1: torch.Tensor, i2: torch.Tensor, i3: torch.Tensor, expand1: list[int],
               expand2: list[int], expand3: list[int], sumdim: list[int],
               unroll_dim: int = 1) -> torch.Tensor:
    """`bilinear`'s kernel: i1, i2, i3 unsqueezed at their expand dims, multiplied and
    summed over `sumdim` (dropped), written as an einsum (two matmuls, not the full
    product)."""
    rank = i1.dim() + len(expand1)
    letters = "abcdefghijklmnopqrstuvwxyz"[:rank]

    def spec(expand: list[int]) -> str:
        return "".join(c for d, c in enumerate(letters) if d not in expand)
    kept = "".join(c for d, c in enumerate(letters) if d not in sumdim)
    return torch.einsum(f"{spec(expand1)},{spec(expand2)},{spec(expand3)}->{kept}", i1, i2, i3)


def _diagonal_scatter(input: torch.Tensor, src: torch.Tensor, offset: int = 0, dim1: int = 0,
                      dim2: int = 1) -> torch.Tensor:
    """`src` written over a diagonal of `input` as a select by a diagonal mask (PyTorch's
    decomposition writes through a strided view). torch.func.jacrev and jacfwd build
    their basis with it."""
    rows, cols = input.shape[dim1], input.shape[dim2]
    i = torch.arange(rows, device=input.device).unsqueeze(1)
    j = torch.arange(cols, device=input.device).unsqueeze(0)
    on_diagonal = (j - i) == offset
    # element k of the diagonal sits in row k - min(offset, 0), column k + max(offset, 0)
    along = rows if offset >= 0 else cols
    placed = torch.nn.functional.pad(src, (0, along - src.shape[-1]))
    placed = placed.unsqueeze(-1) if offset >= 0 else placed.unsqueeze(-2)
    moved = input.movedim((dim1, dim2), (-2, -1))
    return torch.where(on_diagonal, placed.to(input.dtype), moved).movedim((-2, -1), (dim1, dim2))


def _index_fill(x: torch.Tensor, dim: int, index: torch.Tensor,
                value: Any) -> torch.Tensor:
    """A select by a mask of the indexed positions along `dim`. PyTorch's decomposition
    copies the value over each index, so a repeated index added the value's gradient
    again (5 indices, 3 of them distinct: 25 where eager counts each filled element once,
    15)."""
    rank = x.dim()
    dim = dim % rank if rank else 0
    size = x.shape[dim] if rank else 1
    index = index.reshape(-1)
    mask = torch.zeros(size, dtype=torch.bool, device=x.device).index_put(
        (index,), torch.ones_like(index, dtype=torch.bool))
    mask = mask.reshape([size if d == dim else 1 for d in range(rank)])
    if not isinstance(value, torch.Tensor):
        value = torch.scalar_tensor(value, dtype=x.dtype, device=x.device)
    return torch.where(mask, value.to(x.dtype), x)


def _new_zeros_with_same_feature_meta(x: torch.Tensor, other: torch.Tensor,
                                      self_num_batch_dims: int = 0) -> torch.Tensor:
    """Zeros of `other`'s shape behind `x`'s batch dims (forward-mode AD's tangents:
    torch.func.jvp and jacfwd)."""
    return torch.zeros((*x.shape[:self_num_batch_dims], *other.shape), dtype=x.dtype,
                       device=x.device)


def _elu(x: torch.Tensor, alpha: float = 1.0, scale: float = 1.0,
         input_scale: float = 1.0) -> torch.Tensor:
    """PyTorch's, with the exponential taken of min(x, 0): the branch `where` drops still
    gets a zero cotangent, and exp(x) overflowing past x = 88 made it 0 * inf = NaN, the
    gradient of every large input (eager's is `scale`). celu and selu are elu."""
    negative = torch.clamp_max(x, 0) * input_scale
    return torch.where(x > 0, scale * x, (alpha * scale) * torch.expm1(negative))


def _celu(x: torch.Tensor, alpha: float = 1.0) -> torch.Tensor:
    return _elu(x, alpha, 1.0, 1.0 / alpha)


def _softplus(x: torch.Tensor, beta: float = 1.0, threshold: float = 20.0) -> torch.Tensor:
    """PyTorch's, with the exponential clamped at the threshold past which `where` takes x
    (as `_elu`: exp overflowing made the large inputs' gradient NaN; mish's too)."""
    scaled = x * beta
    soft = torch.log1p(torch.exp(torch.clamp_max(scaled, threshold))) / beta
    return torch.where(scaled > threshold, x, soft)


def _mish(x: torch.Tensor) -> torch.Tensor:
    return x * torch.tanh(_softplus(x))


def _multilabel_margin_loss_forward(input: torch.Tensor, target: torch.Tensor,
                                    reduction: int) -> tuple[torch.Tensor, torch.Tensor]:
    """PyTorch's decomposition with the terms of the target slots after the first -1
    masked out: torch 2.13's counts each such slot as a target of class 0 (a row
    [0, -1, 1, 1, 1] of 5 classes came out 5 times eager's loss; Inductor's too)."""
    shape = input.shape
    input, target = torch.atleast_2d(input), torch.atleast_2d(target)
    classes = input.shape[1]
    idx = torch.arange(classes, device=target.device)
    end = torch.amin(torch.where(target == -1, idx, classes), dim=-1, keepdim=True)
    in_list = idx < end  # [batch, slot]: the slot holds a target
    u = torch.gather(input, -1, torch.where(in_list, target, 0))
    is_target = torch.any(idx == torch.where(in_list, target, -1).unsqueeze(-1), dim=1)
    z = (1.0 - u.T.unsqueeze(-1) + input).clamp_min(0) / classes  # [slot, batch, class]
    z = torch.where(is_target | ~in_list.T.unsqueeze(-1), 0, z)
    if reduction == 1:  # Reduction::Mean
        z = z.sum(dim=(0, -1)).mean()
    elif reduction == 2:  # Reduction::Sum
        z = z.sum()
    else:
        z = z.sum(dim=(0, -1)).reshape(shape[:-1])
    return z, is_target.to(input.dtype).reshape(shape)


_KERNEL_KEYS = (torch._C.DispatchKey.Autograd, torch._C.DispatchKey.CompositeImplicitAutograd)
_CORRECTED = {aten.multilabel_margin_loss_forward.default: _multilabel_margin_loss_forward,
              **{op: fn for op, fn in linear_interpolation.DECOMPOSITIONS.items()
                 if set(op.py_kernels) & set(_KERNEL_KEYS)}}


def _kernel_keys(op: torch._ops.OpOverload) -> list[Any]:
    """The keys of `op`'s Python kernels that tracing runs (the autograd one, or the
    CompositeImplicitAutograd one that the upsample ops' `.vec` overloads reach first)."""
    return [k for k in _KERNEL_KEYS if k in op.py_kernels] or [_KERNEL_KEYS[0]]


@contextlib.contextmanager
def corrected_kernels() -> Iterator[None]:
    """Trace with the `_CORRECTED` decompositions as the ops' Python kernels."""
    saved = {(op, key): op.py_kernels.get(key) for op in _CORRECTED for key in _kernel_keys(op)}
    try:
        for op, key in saved:
            op.py_kernels[key] = _CORRECTED[op]
            op._dispatch_cache.clear()  # keyed by AutogradCPU etc., as py_impl clears it
        yield
    finally:
        for (op, key), fn in saved.items():
            if fn is None:
                op.py_kernels.pop(key, None)
            else:
                op.py_kernels[key] = fn
            op._dispatch_cache.clear()


def _fma(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
    """`prims.fma`: a multiply and an add, as eager's addcmul computes it."""
    return a * b + c


def _same_dtypes(decomposition: Callable, name: str) -> Callable:
    """`decomposition` behind eager's check that the operands of a product share one
    dtype. PyTorch's decompositions of addmm, linear, matmul and mv promote mixed operands,
    so a
    float32 input to a float64 layer would compile and run (in float64) where eager
    raises: the capture raises instead, the graph runs eagerly, and eager's own error
    reaches the user."""
    def checked(*args: Any, **kwargs: Any) -> Any:
        dtypes = [a.dtype for a in args if isinstance(a, torch.Tensor)]
        if len(set(dtypes)) > 1:
            raise RuntimeError(f"{name}: expected the operands to have the same dtype, but got "
                               f"{', '.join(str(d).removeprefix('torch.') for d in dtypes)} "
                               "(as eager PyTorch raises)")
        return decomposition(*args, **kwargs)
    return checked


def _build() -> dict[torch._ops.OpOverload, Callable]:
    table = dict(core_aten_decompositions())
    table.update(get_decompositions(_ADDED))
    table[aten._softmax.default] = _softmax
    table[aten._log_softmax.default] = _log_softmax
    table[aten._safe_softmax.default] = _safe_softmax
    table[aten.addbmm.default] = _addbmm
    table[aten._trilinear.default] = _trilinear
    table[aten.diagonal_scatter.default] = _diagonal_scatter
    table[aten.index_fill.int_Scalar] = _index_fill
    table[aten.index_fill.int_Tensor] = _index_fill
    table[aten._new_zeros_with_same_feature_meta.default] = _new_zeros_with_same_feature_meta
    table[aten.elu.default] = _elu
    table[aten.celu.default] = _celu
    table[aten.softplus.default] = _softplus
    table[aten.mish.default] = _mish
    table.update(linear_interpolation.DECOMPOSITIONS)
    flash = aten._scaled_dot_product_flash_attention_for_cpu.default
    table[flash] = _flash_attention_for_cpu(table[flash])
    for op in (aten.linear.default, aten.matmul.default, aten.mv.default, aten.addmm.default,
               aten.addmv.default, aten.addbmm.default):
        table[op] = _same_dtypes(table[op], op.__name__.split(".")[0])
    for op in _REMOVED:
        table.pop(op, None)
    return table


DECOMPOSITIONS: dict[torch._ops.OpOverload, Callable] = _build()


def decompositions() -> dict[torch._ops.OpOverload, Callable]:
    """DECOMPOSITIONS, plus `prims.fma` once it exists: Dynamo rewrites `addcmul_`,
    `addcdiv_` with a `value` and `add_` with a tensor `alpha` (optimizers' moment
    updates) into `torch._inductor.inductor_prims.fma`, which defines the op when
    imported (1 s; Dynamo imports it when it rewrites, and fusegrad does not)."""
    prims = sys.modules.get("torch._inductor.inductor_prims")
    if prims is not None and torch.ops.prims.fma.default not in DECOMPOSITIONS:
        DECOMPOSITIONS[torch.ops.prims.fma.default] = _fma
    return DECOMPOSITIONS
