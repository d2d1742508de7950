"""OpInfo tests: every claimed op on its float32 samples (an even stride of MAX_SAMPLES of
larger sets), compiled vs eager; its first small float64, int64 and bfloat16 samples too
(bf16: no further from the float64 result than eager's bf16).

Each sample becomes a function of its tensors (other arguments are
constants), captured with `fusegrad.capture.capture` (functional core ATen,
`DECOMPOSITIONS`), imported, fused with `dg-fuse` (as `fusegrad.compile`
does by default; FUSEGRAD_TEST_FUSION=0 skips it) and executed. All samples of
one op are imported as functions `@s0, @s1, ...` of ONE module and compiled
with one `compile_cpu` call (the JIT dominates the cost). Samples a claim
marks unsupported must raise `UnsupportedOp` (or fail capture), never compute.

Gradients go through `fusegrad.compile` (autodiff, remat and fusion on): for
every claimed differentiable op, float32 gradients vs eager, and
`gradcheck`/`gradgradcheck` in float64.
"""
from __future__ import annotations

import contextlib
import logging
import random
from dataclasses import dataclass
from unittest import mock
from typing import Any, Callable

import pytest
import torch
from compile_options import OPTIONS
from mlir import ir
from torch.testing._internal import common_utils
from torch.testing._internal.common_methods_invocations import op_db
from torch.testing._internal.opinfo import core as opinfo_core
from torch.utils import _pytree as pytree

from fusegrad.frontend.capture import CaptureError, capture
from fusegrad.context import make_context
from fusegrad.pass_manager import run_pipeline
from fusegrad.codegen.cpu.compile import compile_cpu
from fusegrad.frontend.importer import UnsupportedOp, import_graph
from fusegrad.frontend.supported_ops import CLAIMS, Claim

log = logging.getLogger(__name__)

MAX_SAMPLES = 32  # ops with more (max_pool2d: 1440, 22 others) take an even stride of them
DEFAULT_TOL = {torch.float32: (1e-5, 1.3e-6), torch.float64: (1e-7, 1e-7)}
STATS = {"ops": 0, "samples": 0, "unsupported": 0}

OPINFOS = {o.name + ("." + o.variant_test_name if o.variant_test_name else ""): o for o in op_db}


EXECUTOR = "compile_cpu + dg-fuse" if OPTIONS["fusion"] else "compile_cpu"


def compile_module(module: ir.Module) -> Callable[[str], Callable]:
    """What `fusegrad.compile` does to a forward graph (fuse, lower, JIT): name -> function."""
    if OPTIONS["fusion"]:
        run_pipeline(module, "dg-fuse")
    return compile_cpu(module).function


@dataclass
class Case:
    """One sample: its captured graph inputs and the eager result."""

    fn: Callable
    tensors: list[torch.Tensor]
    expected: Any
    captured: Any = None


def make_case(op, sample) -> Case:
    flat, spec = pytree.tree_flatten((sample.input, sample.args, sample.kwargs))
    where = [i for i, v in enumerate(flat) if isinstance(v, torch.Tensor)]

    def fn(*tensors):
        leaves = list(flat)
        for i, t in zip(where, tensors):
            leaves[i] = t
        a, args, kwargs = pytree.tree_unflatten(leaves, spec)
        return op.op(a, *args, **kwargs)
    # private copies: samples may share tensors, and eager may mutate them (BatchNorm stats)
    tensors = [flat[i].detach().clone().requires_grad_(flat[i].requires_grad) for i in where]
    with torch.no_grad():
        expected = fn(*[t.detach().clone() for t in tensors])
    return Case(fn, tensors, expected)


def _seed_host_generators(seed: int | None = None) -> None:
    """`common_utils.set_rng_seed` without seeding CUDA/MPS/XPU, whose lazy seeding
    records a formatted stack per sample; the host samples are the same."""
    seed = common_utils.SEED if seed is None else seed
    torch.default_generator.manual_seed(seed)
    random.seed(seed)
    if common_utils.TEST_NUMPY:
        import numpy
        numpy.random.seed(seed)
    if torch.cuda.is_initialized():
        torch.cuda.manual_seed_all(seed)


def _cheap_sample_tracking():
    """OpInfo's sample iterators look for a unittest.TestCase on the stack (never found
    under pytest functions) with `inspect.stack()` and reseed every generator per sample:
    two thirds of the first-sample tests' time, none of it fusegrad's."""
    patches = contextlib.ExitStack()
    patches.enter_context(mock.patch.multiple(common_utils, extract_test_fn=lambda: None,
                                              set_rng_seed=_seed_host_generators))
    patches.enter_context(mock.patch.object(opinfo_core, "extract_test_fn", lambda: None))
    return patches


def samples_of(op, dtype: torch.dtype, device: str = "cpu") -> list:
    """Up to MAX_SAMPLES samples on `device`, less those making their result on another
    device (`fusegrad.compile` refuses them: frontend/test_compile_devices.py; a
    factory without tensor inputs or a device makes a CPU tensor)."""
    with _cheap_sample_tracking():
        samples = [s for s in op.sample_inputs(device, dtype, requires_grad=False)
                   if device == "cpu" or torch.device(s.kwargs.get("device", "cpu")).type == device
                   or (s.kwargs.get("device") is None and isinstance(s.input, torch.Tensor))]
    step = max(1, -(-len(samples) // MAX_SAMPLES))
    return samples[::step]


def run_cases(cases: list[Case], compile: Callable = compile_module) -> list[list[torch.Tensor]]:
    """Import every case as @s<i> of one module, execute each on its inputs."""
    with make_context():
        module = None
        for i, case in enumerate(cases):
            m = import_graph(case.captured.gm, name=f"s{i}")
            if module is None:
                module = m
            else:
                module.body.append(m.body.operations[0].operation.clone())
        ins = [[*c.captured.lifted, *c.tensors] for c in cases]
        function = compile(module)
        return [function(f"s{i}")(*x) for i, x in enumerate(ins)]


def check_op(claim: Claim, dtype: torch.dtype, samples: list,
             compile: Callable = compile_module) -> int:
    op = OPINFOS[claim.key]
    cases = []
    for sample in samples:
        case = make_case(op, sample)
        reason = claim.unsupported(sample) if claim.unsupported else None
        try:
            case.captured = capture(case.fn, case.tensors)
            if reason:
                with make_context():
                    with pytest.raises(UnsupportedOp):
                        import_graph(case.captured.gm)
                STATS["unsupported"] += 1
                continue
        except CaptureError:
            if reason:
                STATS["unsupported"] += 1
                continue
            raise
        cases.append(case)
    if not cases:
        return 0
    atol, rtol = DEFAULT_TOL[dtype]
    if dtype == torch.float32 and claim.atol is not None:
        atol, rtol = claim.atol, claim.rtol
    for i, (case, outs) in enumerate(zip(cases, run_cases(cases, compile))):
        got = case.captured.rebuild(outs[case.captured.num_mutations:])
        torch.testing.assert_close(got, case.expected, atol=atol, rtol=rtol, equal_nan=True,
                                   msg=lambda m: f"{claim.key} sample {i} ({dtype}): {m}")
    return len(cases)


DETERMINISTIC = [c for c in CLAIMS if not c.stochastic]


@pytest.mark.parametrize("claim", DETERMINISTIC, ids=lambda c: c.key)
def test_opinfo_float32(claim: Claim):
    n = check_op(claim, torch.float32, samples_of(OPINFOS[claim.key], torch.float32))
    STATS["ops"] += 1
    STATS["samples"] += n


@pytest.mark.parametrize("claim", DETERMINISTIC, ids=lambda c: c.key)
def test_opinfo_float64_first_samples(claim: Claim):
    op = OPINFOS[claim.key]
    if torch.float64 not in op.supported_dtypes("cpu"):
        pytest.skip("no float64 support in eager")
    STATS["samples"] += check_op(claim, torch.float64, _small_first(samples_of(op, torch.float64))[:1])


# ops whose index results order ties as the implementation likes (integer and bf16
# samples tie; random float32 ones do not): only their values are compared
_TIES_UNORDERED = {"topk", "kthvalue", "sort", "median", "nanmedian", "argsort"}


# the first-sample tests take the first sample of at most this many elements, if any (sort's
# first is 8000 long: 6 s of compiling a bitonic network per dtype)
FIRST_SAMPLE_MAX_NUMEL = 2048


def _small_first(samples: list) -> list:
    """`samples` with the non-empty ones of at most FIRST_SAMPLE_MAX_NUMEL elements first."""
    def small(sample) -> bool:
        sizes = [t.numel() for t in pytree.tree_leaves((sample.input, sample.args, sample.kwargs))
                 if isinstance(t, torch.Tensor)]
        return 0 < sum(sizes) <= FIRST_SAMPLE_MAX_NUMEL and all(sizes)
    return sorted(samples, key=lambda sample: not small(sample))  # stable


def _first_compiled_sample(claim: Claim, dtype: torch.dtype) -> tuple[Case, Any] | None:
    """The first `dtype` sample the importer takes, with its compiled result and eager's
    (the results to compare); None when eager has no such dtype or every sample runs
    eagerly (an Unsupported op)."""
    op = OPINFOS[claim.key]
    if dtype not in op.supported_dtypes("cpu") or claim.key == "argsort":
        return None
    for sample in _small_first(samples_of(op, dtype)):
        if claim.unsupported and claim.unsupported(sample):
            continue
        case = make_case(op, sample)
        try:
            case.captured = capture(case.fn, case.tensors)
            (outs,) = run_cases([case])
        except (CaptureError, UnsupportedOp):
            continue
        got = pytree.tree_leaves(case.captured.rebuild(outs[case.captured.num_mutations:]))
        want = pytree.tree_leaves(case.expected)
        keep = 1 if claim.key in _TIES_UNORDERED else len(want)
        return case, got[:keep], want[:keep]
    return None


@pytest.mark.parametrize("claim", DETERMINISTIC, ids=lambda c: c.key)
def test_opinfo_int64_first_samples(claim: Claim):
    """Integer semantics (dtypes, truncation, promotion) as eager's: integer results
    exactly, float ones (log1p of an integer) within float32's tolerance."""
    found = _first_compiled_sample(claim, torch.int64)
    if found is None:
        pytest.skip("no int64 sample that compiles")
    case, got, want = found
    for g, e in zip(got, want):
        atol, rtol = DEFAULT_TOL[torch.float32] if isinstance(e, torch.Tensor) and \
            e.is_floating_point() else (0, 0)
        if claim.atol is not None and atol:
            atol, rtol = claim.atol, claim.rtol
        torch.testing.assert_close(g, e, atol=atol, rtol=rtol, equal_nan=True,
                                   msg=lambda m: f"{claim.key} (int64): {m}")
    STATS["samples"] += 1


@pytest.mark.parametrize("claim", DETERMINISTIC, ids=lambda c: c.key)
def test_opinfo_bfloat16_first_samples(claim: Claim):
    """bf16 no further from the float64 result than eager's bf16 (twice its error, plus
    1e-3): sums, variances and matmuls that accumulated in bf16 were 3x to 10x further."""
    found = _first_compiled_sample(claim, torch.bfloat16)
    if found is None:
        pytest.skip("no bfloat16 sample that compiles")
    case, got, want = found
    with torch.no_grad():
        exact = case.fn(*[t.double() if t.is_floating_point() else t for t in case.tensors])
    for g, e, x in zip(got, want, pytree.tree_leaves(exact)):
        if not isinstance(g, torch.Tensor):
            continue
        assert g.dtype == e.dtype and g.shape == e.shape, f"{claim.key}: {g.dtype} {g.shape}"
        if not g.is_floating_point() or not g.numel():
            torch.testing.assert_close(g, e, atol=0, rtol=0)
            continue
        finite = torch.isfinite(x)
        assert torch.equal(torch.isfinite(g), torch.isfinite(e)), f"{claim.key}: inf/NaN"
        ours, eagers = ((v.double() - x)[finite].abs().max().item() if finite.any() else 0.0
                        for v in (g, e))
        assert ours <= 2 * eagers + 1e-3, \
            f"{claim.key} (bf16): {ours:.3g} from float64, eager's bf16 {eagers:.3g}"
    STATS["samples"] += 1


def _run_stochastic(fn: Callable, x: torch.Tensor, seed: int) -> torch.Tensor:
    from fusegrad.frontend.importer import SEED_ATTR
    c = capture(fn, [x])
    with make_context():
        module = import_graph(c.gm, name="s0")
        func_op = module.body.operations[0]
        assert ir.IntegerAttr(func_op.attributes[SEED_ATTR]).value == len(c.lifted) + 1
        (out,) = compile_module(module)("s0")(*c.lifted, x, torch.tensor(seed))
    return out


def test_dropout_statistics():
    x = torch.ones(128, 128)
    fn = lambda a: torch.nn.functional.dropout(a, 0.3, training=True)  # noqa: E731
    y1, y2 = _run_stochastic(fn, x, 1), _run_stochastic(fn, x, 2)
    for y in (y1, y2):
        kept = y != 0
        assert abs(kept.float().mean().item() - 0.7) < 0.02
        torch.testing.assert_close(y[kept], torch.full_like(y[kept], 1 / 0.7))
    assert not torch.equal(y1, y2)
    STATS["samples"] += 2


def test_bernoulli_statistics():
    p = torch.linspace(0.05, 0.95, 64).repeat(256, 1)
    y = _run_stochastic(torch.bernoulli, p, 7)
    torch.testing.assert_close(y.mean(0), p[0], atol=0.1, rtol=0)
    assert set(y.unique().tolist()) <= {0.0, 1.0}
    STATS["samples"] += 1


def test_randn_statistics():
    x = torch.zeros(256, 256)
    fn = lambda a: a + torch.randn_like(a)  # noqa: E731
    y1, y2 = _run_stochastic(fn, x, 3), _run_stochastic(fn, x, 4)
    for y in (y1, y2):
        assert abs(y.mean().item()) < 0.01 and abs(y.std().item() - 1) < 0.01
        assert abs(y.pow(4).mean().item() - 3) < 0.1  # a normal's fourth moment
        assert abs((y.abs() < 1).float().mean().item() - 0.6827) < 0.01
    assert not torch.equal(y1, y2)
    STATS["samples"] += 2


def test_rrelu_statistics():
    x = torch.linspace(-3, 3, 256 * 256).reshape(256, 256)
    y = _run_stochastic(lambda a: torch.nn.functional.rrelu(a, 0.1, 0.3, training=True), x, 8)
    negative = x < 0
    slopes = y[negative] / x[negative]
    assert slopes.min().item() >= 0.1 and slopes.max().item() <= 0.3
    assert abs(slopes.mean().item() - 0.2) < 0.005
    torch.testing.assert_close(y[~negative], x[~negative])
    STATS["samples"] += 1


def test_randint_and_randperm_statistics():
    x = torch.zeros(256, 256)
    r = _run_stochastic(lambda a: a + torch.randint(3, 10, a.shape), x, 9)
    counts = torch.bincount(r.flatten().long(), minlength=10)[3:].float() / r.numel()
    assert r.min().item() == 3 and r.max().item() == 9
    torch.testing.assert_close(counts, torch.full((7,), 1 / 7), atol=0.005, rtol=0)
    v = torch.arange(500.0)
    p = _run_stochastic(lambda a: a[torch.randperm(500)], v, 10)
    assert sorted(p.tolist()) == v.tolist() and not torch.equal(p, v)
    STATS["samples"] += 2


def test_uniform_and_normal_fill_statistics():
    x = torch.zeros(256, 256)
    u = _run_stochastic(lambda a: a + torch.empty_like(a).uniform_(-2.0, 3.0), x, 5)
    assert u.min().item() >= -2.0 and u.max().item() < 3.0
    assert abs(u.mean().item() - 0.5) < 0.02
    n = _run_stochastic(lambda a: a + torch.empty_like(a).normal_(2.0, 3.0), x, 6)
    assert abs(n.mean().item() - 2.0) < 0.03 and abs(n.std().item() - 3.0) < 0.03
    STATS["samples"] += 2


# ------------------------------------------------------------------ gradients through fusegrad.compile
GRAD_CLAIMS = [c for c in DETERMINISTIC if OPINFOS[c.key].supports_autograd]


# gradcheck differentiates numerically, one input element at a time: a sample of
# 8000 elements (sort's first) took minutes
GRADCHECK_MAX_NUMEL = 1024


def _first_grad_sample(claim: Claim, dtype: torch.dtype, device: str) -> Case | None:
    """The first sample with a float input requiring grad and a non-empty float output,
    of at most GRADCHECK_MAX_NUMEL input elements where there is one."""
    op = OPINFOS[claim.key]
    large = None
    with _cheap_sample_tracking():
        for sample in op.sample_inputs(device, dtype, requires_grad=True):
            if claim.unsupported and claim.unsupported(sample):
                continue
            case = make_case(op, sample)
            if any(t.is_floating_point() and t.requires_grad for t in case.tensors) and \
                    _float_outputs(case.expected):
                if sum(t.numel() for t in case.tensors) <= GRADCHECK_MAX_NUMEL:
                    return case
                large = large or case
    return large


def _float_outputs(out: Any) -> list[torch.Tensor]:
    return [t for t in pytree.tree_leaves(out)
            if isinstance(t, torch.Tensor) and t.is_floating_point() and t.numel()]


def _check_float32_grads(claim: Claim, case: Case) -> None:
    import fusegrad
    torch._dynamo.reset()
    compiled = fusegrad.compile(case.fn, **OPTIONS)
    leaves = [t for t in case.tensors if t.requires_grad]
    got_outs = [t for t in _float_outputs(compiled(*case.tensors)) if t.requires_grad]
    want_outs = [t for t in _float_outputs(case.fn(*case.tensors)) if t.requires_grad]
    cts = [torch.randn_like(t) for t in want_outs]
    got = torch.autograd.grad(got_outs, leaves, cts, allow_unused=True)
    want = torch.autograd.grad(want_outs, leaves, cts, allow_unused=True)
    atol, rtol = (claim.atol, claim.rtol) if claim.atol else (1e-5, 1e-5)
    exact = None
    for i, (g, w) in enumerate(zip(got, want)):
        # None and zeros differ only where a mapping drops or adds a dependence eager's
        # autograd records (a slice_scatter covering its whole input)
        if w is None:
            assert g is None or not g.any(), f"{claim.key}: gradient where eager has none"
            continue
        if g is None:
            assert not w.any(), f"{claim.key}: no gradient where eager's is not zero"
            continue
        if torch.allclose(g, w, atol=atol, rtol=rtol, equal_nan=True):
            continue
        # apart from eager's: pass if no further from the float64 gradient than eager's
        # (eager's own float32 error differs by device: logcumsumexp at 1e4 on CUDA)
        if exact is None:
            exact = _float64_grads(case, leaves, want_outs, cts)
        ours, eagers = ((x.double() - exact[i]).abs().max().item() for x in (g, w))
        if ours > max(2 * eagers, atol):
            torch.testing.assert_close(
                g, w, atol=atol, rtol=rtol, equal_nan=True,
                msg=lambda m: f"{claim.key} float32 grad {i}: {ours:.3g} from the float64 "
                              f"gradient (eager {eagers:.3g}): {m}")


def _float64_grads(case: Case, leaves: list, want_outs: list, cts: list) -> list:
    """The gradients `_check_float32_grads` compares, computed in float64 eager."""
    wide = [t.detach().double().requires_grad_(t.requires_grad) if t.is_floating_point()
            else t for t in case.tensors]
    outs = [t for t in _float_outputs(case.fn(*wide)) if t.requires_grad]
    grads = torch.autograd.grad(outs, [t for t in wide if t.requires_grad],
                                [c.double() for c in cts], allow_unused=True)
    return [g if g is not None else torch.zeros_like(x, dtype=torch.float64)
            for g, x in zip(grads, leaves)]


def check_gradients(claim: Claim, device: str) -> None:
    """float32 gradients vs eager; gradcheck and gradgradcheck in float64."""
    import fusegrad
    op = OPINFOS[claim.key]
    case32 = _first_grad_sample(claim, torch.float32, device)
    case64 = _first_grad_sample(claim, torch.float64, device)
    if case32 is None and case64 is None:
        pytest.skip(f"{claim.key}: OpInfo has no sample with a differentiable float output")
    if case32 is not None:
        _check_float32_grads(claim, case32)
    if case64 is not None:
        torch._dynamo.reset()
        compiled = fusegrad.compile(case64.fn, **OPTIONS)
        inputs = tuple(case64.tensors)
        # an op without a small sample (slice_scatter's are 2 x 8000 elements: 67 s of
        # numerical Jacobians) is checked along random directions, as PyTorch's own
        # tests do for large inputs
        fast = sum(t.numel() for t in inputs) > GRADCHECK_MAX_NUMEL
        # atomic adds (grid_sample's backward on CUDA) sum in any order: OpInfo's tolerance
        tol = op.gradcheck_nondet_tol
        assert torch.autograd.gradcheck(compiled, inputs, fast_mode=fast, nondet_tol=tol)
        if op.supports_gradgrad:
            assert torch.autograd.gradgradcheck(compiled, inputs, fast_mode=fast,
                                                nondet_tol=tol)


@pytest.mark.parametrize("claim", GRAD_CLAIMS, ids=lambda c: c.key)
@pytest.mark.usefixtures("no_fallback")
def test_compiled_gradients(claim: Claim):
    check_gradients(claim, "cpu")
    STATS["grad_ops"] = STATS.get("grad_ops", 0) + 1
