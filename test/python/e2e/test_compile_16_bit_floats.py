"""bfloat16 and float16 programs: products and sums accumulate in f32 and round once
like eager's, and small transposes and reductions compile (dg-narrow-matmuls,
dg-half-loads-as-i16)."""
from __future__ import annotations

import pytest
import torch

from compile_options import compiled

pytestmark = pytest.mark.usefixtures("no_fallback")


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_16_bit_float_matmuls_accumulate_in_f32_like_eager(dtype):
    """bf16/f16 products call PyTorch's kernel (f32 accumulation), transposed operands
    included; linalg's loops had accumulated in bf16, 9x further from the exact product."""
    torch.manual_seed(0)
    a, b = torch.randn(3, 64, 96).to(dtype), torch.randn(3, 128, 96).to(dtype)
    for f in (lambda a, b: a @ b.transpose(1, 2), lambda a, b: a[0] @ b[1].t(),
              lambda a, b: (a.transpose(1, 2) @ a) * 2):
        torch._dynamo.reset()
        assert torch.equal(compiled(f)(a, b), f(a, b))


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_16_bit_float_linear_layers_round_once_like_eager(dtype):
    """PyTorch's addmm decomposition widens 16-bit floats to f32; dg-narrow-matmuls runs
    the products on the 16-bit values, the bias as the gemm's accumulator (rounded once,
    as eager's addmm), backward products too: bitwise eager's forward, under autocast as
    well, and eager's gradients."""
    torch.manual_seed(0)
    x, w, bias = torch.randn(4, 16, 64), torch.randn(32, 64), torch.randn(32)
    f = torch.nn.functional.linear
    torch._dynamo.reset()
    args = [t.to(dtype).requires_grad_() for t in (x, w, bias)]
    got, want = compiled(f)(*args), f(*args)
    assert torch.equal(got, want)
    cotangent = torch.randn_like(want)
    for g, e in zip(torch.autograd.grad(got, args, cotangent),
                    torch.autograd.grad(want, args, cotangent)):
        torch.testing.assert_close(g, e)
    torch._dynamo.reset()
    with torch.autocast("cpu", dtype=dtype):
        assert torch.equal(compiled(f)(x, w, bias), f(x, w, bias))


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_16_bit_float_sums_accumulate_in_f32_like_eager(dtype):
    """A variance (the importer's own reduce_sums) and a bias gradient (autodiff's) of 4096
    values: accumulated in bf16, the variance had come out 2.0 instead of 1.0."""
    torch.manual_seed(0)
    x = (torch.randn(8, 4096) + 3).to(dtype)
    torch.testing.assert_close(compiled(lambda a: a.var(1))(x), x.var(1))
    bias = torch.zeros(64, dtype=dtype, requires_grad=True)
    h = torch.randn(4096, 64).to(dtype)
    (got,) = torch.autograd.grad(compiled(lambda b: (h + b).float().square().sum())(bias), bias)
    (want,) = torch.autograd.grad((h + bias).float().square().sum(), bias)
    torch.testing.assert_close(got, want)


@pytest.mark.parametrize("n", [9, 10, 14, 15, 16])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_small_16_bit_float_transposes_compile(n, dtype):
    """LLVM's SLP vectorizer turned a 9 x 9 bf16 transpose into a masked load of a
    <75 x bfloat> vector, on which the X86 backend with AVX512-BF16 asserted and aborted
    the process (dg-half-loads-as-i16)."""
    x = torch.randn(n, n).to(dtype)
    assert torch.equal(compiled(lambda a: a.t().contiguous())(x), x.t())


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_16_bit_float_reductions_link_without_avx512_bf16(dtype):
    """An outlined reduction loop took its running max as a bf16 argument: on a CPU
    without AVX512-BF16 LLVM narrowed it with __truncsfbf2, which the JIT could not
    find (libgcc_s before GCC 13), and the graph ran eagerly (dg-half-loads-as-i16)."""
    x = torch.randn(7, 9).to(dtype)
    assert torch.equal(compiled(torch.max)(x), torch.max(x))
    assert torch.equal(compiled(lambda a: torch.amax(a, 1))(x), torch.amax(x, 1))
