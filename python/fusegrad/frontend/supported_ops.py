"""The ops fusegrad claims, by OpInfo name: `op_db` entries (name + variant).

Every claimed op is tested on every float32 OpInfo sample (and float64 where
cheap) against eager PyTorch in `test/python/e2e/test_opinfo.py`. A claim may
exclude samples with `unsupported(sample) -> reason | None`: for those the
importer must raise `UnsupportedOp` (the graph then runs eagerly) rather
than compute anything. `stochastic` ops are checked statistically.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import torch


@dataclass(frozen=True)
class Claim:
    """One OpInfo entry fusegrad compiles."""

    name: str
    variant: str = ""
    note: str = ""
    # reason string for samples that must raise UnsupportedOp, else None
    unsupported: Callable[[Any], str | None] | None = None
    atol: float | None = None  # float32 tolerances when the default is too tight
    rtol: float | None = None
    stochastic: bool = False

    @property
    def key(self) -> str:
        return f"{self.name}.{self.variant}" if self.variant else self.name


def _tensor_start(sample: Any) -> str | None:
    start = sample.args[1] if len(sample.args) > 1 else None
    return "a tensor start is data-dependent" if isinstance(start, torch.Tensor) else None


def _tensors(sample: Any) -> list:
    return [t for t in [sample.input, *sample.args, *sample.kwargs.values()]
            for t in (t if isinstance(t, (list, tuple)) else [t]) if isinstance(t, torch.Tensor)]


def _uint8(sample: Any) -> str | None:
    return "uint8 has no dg dtype" if any(t.dtype == torch.uint8 for t in _tensors(sample)) \
        else None


def _bool_index(sample: Any) -> str | None:
    return "boolean-mask indexing has a data-dependent shape" \
        if any(t.dtype == torch.bool for t in _tensors(sample)[1:]) else None


def _index_put_options(sample: Any) -> str | None:
    """A boolean mask is data-dependent unless it is the only index, covers x's leading
    dims, and the value is the same for every selected element (a select)."""
    indices, values = sample.args[0], sample.args[1]
    masks = [i for i in indices if isinstance(i, torch.Tensor) and i.dtype in (torch.bool,
                                                                                torch.uint8)]
    if not masks:
        return None
    x, k = sample.input, masks[0].dim()
    trailing = x.dim() - k
    if len(indices) == 1 and masks[0].shape == x.shape[:k] and (
            values.dim() <= trailing or values.dim() == trailing + 1 and values.shape[0] == 1):
        return None
    return "boolean-mask indexing has a data-dependent shape"


def _sorted_too_long(sample: Any, dim: int) -> str | None:
    from .aten_ops import SORT_MAX_N
    n = sample.input.shape[dim] if sample.input.dim() else 1
    return None if n <= SORT_MAX_N else f"a dim of {n} > {SORT_MAX_N}: a sort that runs eagerly"


def _topk_options(sample: Any) -> str | None:
    return _sorted_too_long(sample, sample.args[1] if len(sample.args) > 1
                            else sample.kwargs.get("dim", -1))


def _sort_options(sample: Any) -> str | None:
    args = [a for a in sample.args if not isinstance(a, bool)]
    return _sorted_too_long(sample, args[0] if args else sample.kwargs.get("dim", -1))


def _order_options(dim_arg: int) -> Callable[[Any], str | None]:
    """Samples of median/nanmedian (dim the first argument) and kthvalue (the second):
    a sort of the dim, or of all elements without one."""
    def check(sample: Any) -> str | None:
        from .aten_ops import SORT_MAX_N
        args = sample.args
        dim = args[dim_arg] if len(args) > dim_arg else sample.kwargs.get("dim")
        if dim is None and dim_arg:  # kthvalue's default: the last dim
            dim = -1
        if dim is not None:
            return _sorted_too_long(sample, dim)
        n = sample.input.numel()
        return None if n <= SORT_MAX_N else f"{n} elements > {SORT_MAX_N}: a sort that runs eagerly"
    return check


def _grid_sample_options(sample: Any) -> str | None:
    if sample.input.dim() != 4:
        return "volumetric (5-d) grid sampling"
    mode = sample.args[1] if len(sample.args) > 1 else sample.kwargs.get("mode", "bilinear")
    return "bicubic grid sampling" if mode in ("bicubic", 2) else None


def _scatter_options(sample: Any) -> str | None:
    if "reduce" in sample.kwargs:
        return "the deprecated reduce= argument (scatter_reduce's job)"
    return _uint8(sample)


def _embedding_options(sample: Any) -> str | None:
    if sample.kwargs.get("max_norm"):
        return "max_norm renormalises the weight in place"
    if sample.kwargs.get("scale_grad_by_freq"):
        return "scale_grad_by_freq"
    if sample.kwargs.get("sparse"):
        return "sparse=True (a sparse weight gradient)"
    return None


# summation order differs from MKL/oneDNN and from CUDA's block reductions (weighted
# sums that cancel: binary_cross_entropy_with_logits(reduction="sum", weight=...))
_CONTRACTION_TOL = dict(atol=1e-4, rtol=1e-4)
_TRANSCENDENTAL_TOL = dict(atol=1e-5, rtol=1e-5)  # libm vs. vectorised SLEEF ulp differences

_PLAIN = """
add sub mul div.no_rounding_mode div.trunc_rounding div.floor_rounding true_divide rsub
pow neg abs exp log log1p expm1 sqrt rsqrt tanh sigmoid erf sin cos reciprocal sign floor
ceil round trunc square clamp clamp_min clamp_max maximum minimum max.binary min.binary
eq ne lt le gt ge logical_not logical_and logical_or logical_xor where masked_fill
isnan positive sum mean amax amin argmax argmin var var.unbiased std std.unbiased var_mean
var_mean.unbiased std_mean max.reduction_with_dim min.reduction_with_dim
max.reduction_no_dim min.reduction_no_dim any all softmax log_softmax
nn.functional.softmin view reshape view_as reshape_as flatten unflatten permute transpose t
expand expand_as squeeze unsqueeze slice select cat stack split split.list_args
split_with_sizes chunk unbind clone contiguous flip index_select
scatter_add take_along_dim repeat tile roll nn.functional.pad.constant full zeros ones
full_like zeros_like ones_like arange scalar_tensor nn.functional.relu nn.functional.relu6
nn.functional.leaky_relu nn.functional.hardtanh nn.functional.elu nn.functional.hardsigmoid
nn.functional.hardswish nn.functional.silu nn.functional.mse_loss
nn.functional.l1_loss nn.functional.smooth_l1_loss nn.functional.huber_loss
nn.functional.nll_loss lerp addcmul addcdiv frac deg2rad rad2deg remainder fmod
nn.functional.avg_pool2d nn.functional.max_pool2d nn.functional.avg_pool3d
nn.functional.max_pool3d nn.functional.adaptive_max_pool2d nn.functional.adaptive_max_pool1d
tril triu outer
nn.functional.interpolate.nearest nn.functional.upsample_nearest
nn.functional.glu nn.functional.selu nn.functional.celu nn.functional.softsign nn.functional.hardshrink nn.functional.softshrink
nn.functional.threshold nn.functional.kl_div nn.functional.binary_cross_entropy nn.functional.margin_ranking_loss nn.functional.soft_margin_loss nn.functional.hinge_embedding_loss
nn.functional.cosine_embedding_loss nn.functional.triplet_margin_loss nn.functional.pairwise_distance nn.functional.poisson_nll_loss nn.functional.multilabel_soft_margin_loss nn.functional.multilabel_margin_loss nn.functional.rms_norm
nn.functional.instance_norm nn.functional.pixel_shuffle nn.functional.pixel_unshuffle nn.functional.channel_shuffle nn.functional.unfold nn.functional.interpolate.bilinear
nn.functional.interpolate.bicubic nn.functional.interpolate.linear nn.functional.prelu nn.functional.max_pool1d nn.functional.avg_pool1d nn.functional.pad.reflect
nn.functional.pad.replicate nn.functional.pad.circular tensordot kron logit nan_to_num
nansum nanmean addmv addr norm renorm
cross signbit copysign fmax fmin diagonal diag trace eye histc cdist slice_scatter select_scatter
diagonal_scatter unfold unfold_copy
"""

_TOLERANT = """
mm bmm matmul addmm addmm.decomposed baddbmm mv dot nn.functional.linear
nn.functional.conv1d nn.functional.conv2d nn.functional.layer_norm nn.functional.group_norm
nn.functional.batch_norm nn.functional.cross_entropy logsumexp nn.functional.gelu
nn.functional.softplus nn.functional.mish nn.functional.logsigmoid
nn.functional.binary_cross_entropy_with_logits tan log2 log10 xlogy logaddexp
linalg.vector_norm nn.functional.normalize nn.functional.cosine_similarity cumsum
atan asin acos sinh cosh asinh acosh atanh erfc exp2 atan2 hypot logaddexp2 dist prod cumprod
lgamma mvlgamma.mvlgamma_p_1 mvlgamma.mvlgamma_p_3 mvlgamma.mvlgamma_p_5 erfinv
nn.functional.pdist
addbmm einsum nn.functional.bilinear nn.functional.conv_transpose1d
nn.functional.conv_transpose2d nn.functional.adaptive_avg_pool1d
nn.functional.adaptive_avg_pool2d nn.functional.adaptive_avg_pool3d nn.functional.conv3d
nn.functional.conv_transpose3d
nn.functional.local_response_norm
"""


def _split(key: str, **kw: Any) -> Claim:
    name, _, variant = key.partition(".") if key.count(".") and not key.startswith("nn.") \
        else (key, "", "")
    if key.startswith("nn.functional.") and key.count(".") == 3:
        name, variant = key.rsplit(".", 1)
    return Claim(name, variant, **kw)


CLAIMS: list[Claim] = (
    [_split(k) for k in _PLAIN.split()]
    + [_split(k, **(_CONTRACTION_TOL if k in ("mm", "bmm", "matmul", "addmm", "baddbmm", "mv",
                                                "dot", "nn.functional.linear", "addbmm",
                                                "einsum", "nn.functional.bilinear",
                                                "nn.functional.conv_transpose1d",
                                                "nn.functional.conv_transpose2d",
                                                "nn.functional.conv1d", "nn.functional.conv2d",
                                                "nn.functional.conv3d",
                                                "nn.functional.conv_transpose3d",
                                                "nn.functional.binary_cross_entropy_with_logits")
                    else _TRANSCENDENTAL_TOL)) for k in _TOLERANT.split()]
    + [
        Claim("gather", unsupported=_uint8, note="int64/int32 indices"),
        Claim("__getitem__", unsupported=_bool_index, note="no boolean masks"),
        Claim("index_add", note="a scatter_add over the indexed dim"),
        Claim("index_put", unsupported=_index_put_options,
              note="integer indices: a scatter_add (accumulate=True) or a scatter"),
        Claim("scatter", unsupported=_scatter_options,
              note="of repeated indices the last one stays, as on eager's CPU"),
        Claim("index_copy", note="a scatter over the indexed dim"),
        Claim("index_fill", unsupported=_uint8, note="a scatter over the indexed dim"),
        Claim("nn.functional.embedding", unsupported=_embedding_options,
              note="no max_norm, scale_grad_by_freq or sparse"),
        Claim("nn.functional.embedding_bag", unsupported=_embedding_options,
              note="sum and mean by a scatter_add, max by a bags x indices comparison"),
        Claim("narrow", unsupported=_tensor_start, note="int start only"),
        Claim("topk", unsupported=_topk_options,
              note="k rounds of arg-max (a sort beyond 16); ties go to the lower index"),
        Claim("sort", unsupported=_sort_options, note="a bitonic network, stable"),
        Claim("argsort", unsupported=_sort_options, note="a bitonic network, stable"),
        Claim("msort", unsupported=lambda sample: _sorted_too_long(sample, 0),
              note="a bitonic network, stable"),
        Claim("median", unsupported=_order_options(0), note="a position of the sorted dim"),
        Claim("nanmedian", unsupported=_order_options(0), note="a position of the sorted dim"),
        Claim("kthvalue", unsupported=_order_options(1), note="a position of the sorted dim"),
        Claim("cummax", note="a scan of (value, index) pairs"),
        # computed in f64: eager's float32 trigamma (the gradient) is 2e-5 off it near 0
        Claim("digamma", atol=1e-4, rtol=1e-4,
              note="shifted asymptotic series, reflected below 1/2, in f64"),
        Claim("bucketize", note="counts of the boundaries each value comes after"),
        Claim("scatter_reduce", "sum", unsupported=_uint8,
              note="scatter_adds of the values and their counts"),
        Claim("scatter_reduce", "mean", unsupported=_uint8,
              note="scatter_adds of the values and their counts"),
        *[Claim("scatter_reduce", r, unsupported=_uint8,
                note=f"dg.scatter_{op} from the identity where x is left out")
          for r, op in (("amax", "max"), ("amin", "min"), ("prod", "mul"))],
        *[Claim("index_reduce", r, unsupported=_uint8,
                note="scatter_reduce with the index broadcast over the source")
          for r in ("mean", "prod", "amax", "amin")],
        Claim("masked_scatter", unsupported=_uint8,
              note="a gather at the count of set elements before each"),
        Claim("searchsorted", note="counts of the sequence elements each value comes after"),
        # the first gradient sample has values near 1e4, where float32's spacing is 1e-3:
        # eager's gradient is 9.6e-4 off the float64 one there, ours 1.7e-4
        Claim("logcumsumexp", atol=2e-3, rtol=2e-3,
              note="a scan of eager's log-add-exp: hi + log1p(exp(lo - hi))"),
        Claim("cummin", note="a scan of (value, index) pairs"),
        Claim("nn.functional.grid_sample", unsupported=_grid_sample_options,
              note="2-d, bilinear or nearest, every padding mode"),
        Claim("grid_sampler_2d", unsupported=_grid_sample_options,
              note="bilinear or nearest, every padding mode"),
        Claim("nn.functional.dropout", stochastic=True,
              note="seeded by the function's dg.seed_input argument; checked statistically"),
        Claim("bernoulli", stochastic=True, note="checked statistically"),
        Claim("nn.functional.rrelu", stochastic=True,
              note="uniform slopes in training, checked statistically"),
    ]
)

CLAIMED: dict[str, Claim] = {c.key: c for c in CLAIMS}
