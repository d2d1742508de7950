"""Rounding error of compiled reductions against eager's (issue 47; cpu.md, "Reductions").

The cases and the bound (reduction_errors.py): each compiled reduction, and its
gradients, errs at most twice eager's relative error against float64. Special values
(NaN, infinities, denormals, overflow) give eager's special values, and a reduction over
rows gives the same bits on one thread as on two. (On CUDA, in the kernel emulator:
cuda/test_cuda_numerics.py.)
"""
from __future__ import annotations

import pytest
import torch

from compile_options import compiled
from reduction_errors import (BOUND, CASES, FLOOR, Case, assert_within_eager, relative_error,
                              results, uniform)

pytestmark = pytest.mark.usefixtures("no_fallback")


@pytest.mark.parametrize("case", CASES, ids=str)
def test_error_within_eager(case: Case):
    """The compiled result's error (and its gradients') is at most BOUND times eager's."""
    assert_within_eager(case, lambda inputs: results(compiled(case.fn, dynamic=case.dynamic),
                                                     inputs, case.grad))


def _special_values() -> torch.Tensor:
    """64 x 4096 values in [10, 11) with, per row and column, one kind of special value:
    a NaN, +inf, -inf, both infinities, a row of denormals, a row whose sum overflows."""
    x = uniform(64, 4096)(torch.Generator().manual_seed(0))
    x[0, 5] = float("nan")
    x[1, 7] = float("inf")
    x[2, 9] = float("-inf")
    x[3, 11], x[3, 12] = float("inf"), float("-inf")
    x[4, 13], x[5, 13] = float("-inf"), float("inf")
    x[6:8] = torch.rand(2, 4096, generator=torch.Generator().manual_seed(1)) * 1e-39
    x[8] = 1e36  # 4096e36 overflows float32
    return x


SPECIAL_SUMS = {
    "row sums": lambda x: x.sum(1),
    "column sums": lambda x: x.sum(0),
    "row means": lambda x: x.mean(1),
    "sum": lambda x: x.sum(),
}


@pytest.mark.parametrize("name", SPECIAL_SUMS)
def test_special_values(name: str):
    """NaN, infinities and their signs where eager has them (a denormal row sums to its
    value, not to zero: no flushing); the finite results within eager's error."""
    fn, x = SPECIAL_SUMS[name], _special_values()
    got, eager, want = compiled(fn)(x), fn(x), fn(x.double())
    assert torch.equal(got.isnan(), eager.isnan()), name
    assert torch.equal(got.isinf(), eager.isinf()), name
    assert torch.equal(got[got.isinf()], eager[eager.isinf()]), name
    finite = eager.isfinite() & want.isfinite()
    if finite.any():
        bound = max(BOUND * relative_error(eager[finite], want[finite]), FLOOR)
        assert relative_error(got[finite], want[finite]) <= bound, name
    if name == "row sums":  # the denormal rows alone, against their own scale
        for row in (6, 7):
            bound = max(BOUND * relative_error(eager[row], want[row]), FLOOR)
            assert relative_error(got[row], want[row]) <= bound, f"denormal row {row}"


def test_denormal_inputs():
    """Sums of denormals only (column sums through per-block partials, row sums blocked)
    keep their magnitude and eager's accuracy."""
    x = torch.rand(4096, 256, generator=torch.Generator().manual_seed(0)) * 1e-40
    for fn in (lambda t: t.sum(0), lambda t: t.sum(1)):
        got, eager, want = compiled(fn)(x), fn(x), fn(x.double())
        assert relative_error(got, want) <= max(BOUND * relative_error(eager, want), FLOOR)


@pytest.mark.parametrize("torch_threads", [2], indirect=True)
def test_same_bits_on_any_thread_count(torch_threads):
    """A reduction over rows runs in per-block partials on however many threads there
    are; its blocks and their combine do not depend on the threads."""
    x = uniform(65536, 16)(torch.Generator().manual_seed(0))
    fn = compiled(lambda t: t.sum(0))
    on_two = fn(x)
    torch.set_num_threads(1)
    assert torch.equal(fn(x), on_two)
