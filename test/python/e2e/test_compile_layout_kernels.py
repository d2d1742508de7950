"""Data-movement kernels against eager, with gradients: transposing copies in tiles,
long cumsums (vector scans), concatenations written by one row kernel,
as_strided_scatter."""
from __future__ import annotations

import pytest
import torch

from compile_options import compiled

pytestmark = pytest.mark.usefixtures("no_fallback")


@pytest.mark.parametrize("shape, perm", [
    ((128, 32, 64), (1, 2, 0)),  # attention heads: rows 8 KiB apart, 16 x 16 tiles
    ((40, 8, 32), (1, 2, 0)),  # rows 1 KiB apart, partial tiles (40 = 2 x 16 + 8)
    ((2, 64, 16, 16), (0, 2, 3, 1)),  # NCHW -> NHWC
    ((30, 20, 50), (1, 2, 0)),  # other strides keep dim order
    ((256, 512), (1, 0)),  # 2-D: the kernel runs over blocks of 16 input rows
    ((264, 256), (1, 0)),  # 2-D, partial tiles staged by scalar loops
])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_transposing_copies_and_their_gradients_match_eager(shape, perm, dtype):
    def f(x):
        return (x.permute(perm) * 0.5 + 1.0).contiguous()
    x = torch.randn(shape, dtype=dtype, requires_grad=True)
    dy = torch.randn(f(x).shape, dtype=dtype)
    y = compiled(f)(x)
    (g,) = torch.autograd.grad(y, x, dy)
    y_ref = f(x)
    (g_ref,) = torch.autograd.grad(y_ref, x, dy)
    assert torch.equal(y, y_ref) and torch.equal(g, g_ref)


@pytest.mark.parametrize("shape, dim", [((3, 1000), 1), ((1000, 3), 0), ((2, 300, 5), 1),
                                        ((200,), 0), ((4, 129), -1)])
@pytest.mark.parametrize("dtype", [torch.float64, torch.int64])
def test_long_cumsums_match_eager(shape, dim, dtype):
    # rows of several vectors and a scalar tail, columns, a dim in the middle
    x = torch.randint(-3, 4, shape).to(dtype)
    if dtype.is_floating_point:
        x = x + torch.rand(shape, dtype=dtype)
    y = compiled(lambda t: t.cumsum(dim))(x)
    assert y.dtype == x.cumsum(dim).dtype
    torch.testing.assert_close(y, x.cumsum(dim), rtol=1e-12, atol=1e-12)
    if dtype.is_floating_point:
        x.requires_grad_(True)
        # along random directions: a full numerical Jacobian of 3000 elements took 45 s
        assert torch.autograd.gradcheck(compiled(lambda t: t.cumsum(dim).sin()), (x,),
                                        fast_mode=True)


def test_concatenations_written_by_one_row_kernel_match_eager():
    # parts along dim 1 share a row kernel (subviews keep rows); along dim 0 they do not
    def f(x, y):
        wide = torch.cat([x * 2, y.exp(), x - y], 1) * 3
        tall = torch.cat([x, y[:7] + 1], 0).sum(1)
        return wide.softmax(-1), tall
    x, y = torch.randn(33, 40, requires_grad=True), torch.randn(33, 40, requires_grad=True)
    out, ref = compiled(f)(x, y), f(x, y)
    torch.testing.assert_close(out, ref)
    grads = torch.autograd.grad([o.sum() for o in out], (x, y))
    torch.testing.assert_close(grads, torch.autograd.grad([o.sum() for o in ref], (x, y)))


@pytest.mark.parametrize("size,stride,offset", [((2, 2), (1, 2), 1), ((2, 2), (2, 1), 0),
                                                ((3,), (4,), 0)])
def test_as_strided_scatter_writes_the_view(size, stride, offset):
    """x with src written into as_strided(x, size, stride, offset): a scatter at the
    view's positions. Gradients by gradcheck: eager's own gradient for x is the view's
    complement here (it fails gradcheck for the first two views)."""
    def f(x, src):
        return torch.as_strided_scatter(x * 2, src * 3, size, stride, offset)
    x = torch.randn(3, 3, dtype=torch.float64, requires_grad=True)
    src = torch.randn(size, dtype=torch.float64, requires_grad=True)
    cf = compiled(f)
    torch.testing.assert_close(cf(x, src), f(x, src))
    assert torch.autograd.gradcheck(cf, (x, src))
