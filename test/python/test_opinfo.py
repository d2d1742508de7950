"""OpInfo tests: every claimed op on every float32 sample, compiled vs eager.

Each sample becomes a function of its tensors (other arguments are
constants), captured with `fusegrad.capture.capture` (functional core ATen,
`DECOMPOSITIONS`), imported, and executed. All samples of one op are
imported as functions `@s0, @s1, ...` of ONE module and compiled with one
`compile_cpu` call (the JIT dominates the cost), else run by the reference
interpreter when the CPU pipeline is unavailable. Samples a claim marks
unsupported must raise `UnsupportedOp` (or fail capture), never compute.
"""
from __future__ import annotations

import logging
import warnings
from dataclasses import dataclass
from typing import Any, Callable

import pytest
import torch
from mlir import ir
from torch.testing._internal.common_methods_invocations import op_db
from torch.utils import _pytree as pytree

from fusegrad.capture import CaptureError, capture
from fusegrad.context import make_context
from fusegrad.dialects.interpreter import run_function
from fusegrad.importer import UnsupportedOp, import_graph
from fusegrad.supported_ops import CLAIMS, Claim

log = logging.getLogger(__name__)

MAX_SAMPLES = 64  # ops with huge sample sets (max_pool2d: 1440) take an even stride of them
DEFAULT_TOL = {torch.float32: (1e-5, 1.3e-6), torch.float64: (1e-7, 1e-7)}
STATS = {"ops": 0, "samples": 0, "unsupported": 0}

OPINFOS = {o.name + ("." + o.variant_test_name if o.variant_test_name else ""): o for o in op_db}


def _cpu_executor() -> Callable | None:
    """`compile_cpu` if it imports and runs a one-op module, else None."""
    try:
        from fusegrad.passes.pipelines import compile_cpu
        x = torch.randn(3)
        c = capture(lambda a: a + 1, [x])
        with make_context():
            cm = compile_cpu(import_graph(c.gm, name="s0"))
            torch.testing.assert_close(cm.function("s0")(x)[0], x + 1)
        return compile_cpu
    except Exception as e:  # noqa: BLE001 - any failure means "use the interpreter"
        log.warning("compile_cpu unavailable (%s); using the reference interpreter", e)
        return None


COMPILE_CPU = _cpu_executor()
EXECUTOR = "compile_cpu" if COMPILE_CPU else "interpreter"


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


def samples_of(op, dtype: torch.dtype) -> list:
    samples = list(op.sample_inputs("cpu", dtype, requires_grad=False))
    step = max(1, -(-len(samples) // MAX_SAMPLES))
    return samples[::step]


def run_cases(cases: list[Case]) -> list[list[torch.Tensor]]:
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
        if COMPILE_CPU is not None:
            with ir.Location.unknown():  # dg-widen-bool-memrefs needs a default location
                cm = COMPILE_CPU(module)
            return [cm.function(f"s{i}")(*x) for i, x in enumerate(ins)]
        funcs = list(module.body.operations)
        return [run_function(f, x) for f, x in zip(funcs, ins)]


def check_op(claim: Claim, dtype: torch.dtype, samples: list) -> int:
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
    for i, (case, outs) in enumerate(zip(cases, run_cases(cases))):
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
    STATS["samples"] += check_op(claim, torch.float64, samples_of(op, torch.float64)[:1])


def _run_stochastic(fn: Callable, x: torch.Tensor, seed: int) -> torch.Tensor:
    from fusegrad.importer import SEED_ATTR
    c = capture(fn, [x])
    with make_context():
        module = import_graph(c.gm, name="s0")
        func_op = module.body.operations[0]
        assert ir.IntegerAttr(func_op.attributes[SEED_ATTR]).value == len(c.lifted) + 1
        (out,) = run_cases_with_seed(module, [*c.lifted, x, torch.tensor(seed)])
    return out


def run_cases_with_seed(module, ins):
    if COMPILE_CPU is not None:
        with ir.Location.unknown():
            cm = COMPILE_CPU(module)  # keep the engine alive while its function runs
        return cm.function("s0")(*ins)
    return run_function(module.body.operations[0], ins)


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


# ------------------------------------------------------------------ gradients through fusegrad.compile
GRAD_OPS = """
add mul div.no_rounding_mode exp log tanh sigmoid sqrt pow sum mean amax softmax log_softmax
matmul nn.functional.conv2d nn.functional.layer_norm nn.functional.gelu
nn.functional.relu nn.functional.cross_entropy nn.functional.max_pool2d nn.functional.avg_pool2d
nn.functional.embedding where cat index_select gather var nn.functional.linear
""".split()


def _first_grad_sample(op, dtype):
    for sample in op.sample_inputs("cpu", dtype, requires_grad=True):
        case = make_case(op, sample)
        floats = [t for t in case.tensors if t.is_floating_point() and t.requires_grad]
        if floats and isinstance(case.expected, torch.Tensor) and case.expected.numel():
            return case
    pytest.skip("no differentiable sample")


@pytest.fixture
def no_fallback():
    """A graph that falls back to eager would make a gradient test vacuous."""
    from fusegrad.backend import FusegradFallbackWarning
    with warnings.catch_warnings():
        warnings.simplefilter("error", FusegradFallbackWarning)
        yield


@pytest.mark.parametrize("key", GRAD_OPS)
@pytest.mark.usefixtures("no_fallback")
def test_compiled_gradients_float32(key: str):
    import fusegrad
    op = OPINFOS[key]
    case = _first_grad_sample(op, torch.float32)
    torch._dynamo.reset()
    compiled = fusegrad.compile(case.fn)
    leaves = [t for t in case.tensors if t.requires_grad]
    got_out = compiled(*case.tensors)
    ct = torch.randn_like(got_out)
    got = torch.autograd.grad(got_out, leaves, ct, allow_unused=True)
    want = torch.autograd.grad(case.fn(*case.tensors), leaves, ct, allow_unused=True)
    claim = next(c for c in CLAIMS if c.key == key)
    atol, rtol = (claim.atol, claim.rtol) if claim.atol else (1e-5, 1e-5)
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w, atol=atol, rtol=rtol, msg=lambda m: f"{key} grad: {m}")
    STATS["grad_ops"] = STATS.get("grad_ops", 0) + 1


@pytest.mark.parametrize("key", ["mul", "tanh", "softmax", "nn.functional.layer_norm",
                                 "matmul", "nn.functional.conv2d"])
@pytest.mark.usefixtures("no_fallback")
def test_compiled_gradcheck_float64(key: str):
    import fusegrad
    case = _first_grad_sample(OPINFOS[key], torch.float64)
    torch._dynamo.reset()
    compiled = fusegrad.compile(case.fn)
    inputs = tuple(case.tensors)
    assert torch.autograd.gradcheck(compiled, inputs)
    assert torch.autograd.gradgradcheck(compiled, inputs)
