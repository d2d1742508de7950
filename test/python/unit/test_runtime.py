"""CPU runtime: marshalling torch tensors to compiled entries, errors, threads, no recompiles."""
from __future__ import annotations

import threading

import pytest
import torch
from mlir import ir
from mlir.dialects import func

from fusegrad.context import make_context
from fusegrad.dialects import TensorSpec
from fusegrad.dialects.builder import Builder
from fusegrad.codegen.cpu import compile as cpu_compile
from fusegrad.codegen.cpu.compile import compile_cpu


def _compile(*funcs):
    """funcs: (name, [TensorSpec], body(b, *values) -> list of values)."""
    with make_context(), ir.Location.unknown():
        module = ir.Module.create()
        with ir.InsertionPoint(module.body):
            for name, specs, body in funcs:
                func.FuncOp.from_py_func(*[s.to_mlir() for s in specs], name=name)(
                    lambda *v, body=body: body(Builder(), *v))
        return compile_cpu(module)


def _in_threads(work, n: int) -> None:
    """Run `work(k)` for k in range(n) on n threads at once; return when all finish."""
    threads = [threading.Thread(target=work, args=(k,)) for k in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


@pytest.fixture(scope="module")
def cm():
    f32 = lambda *s: TensorSpec(s, "f32")  # noqa: E731
    return _compile(
        ("affine", [f32(3, 4), f32(3, 4)], lambda b, x, y: [b.add(b.mul(x, y), x)]),
        ("scalar", [f32(), TensorSpec((), "f64")],
         lambda b, x, y: [b.exp(x), b.neg(y)]),
        ("bools", [TensorSpec((5,), "i1"), TensorSpec((5,), "i1")],
         lambda b, p, q: [b.create("and", [p, q]), b.create("not", [p])]),
        ("ints", [TensorSpec((2, 3), "i64")], lambda b, x: [b.reduce_sum(x, dims=[1]), x]),
        ("empty", [f32(0, 3)], lambda b, x: [b.exp(x), b.reduce_sum(x, dims=[0])]),
        ("passthrough", [f32(2, 2), f32(2, 2)], lambda b, x, y: [y, x]),
    )


def test_non_contiguous_inputs(cm):
    x = torch.randn(4, 3).t()  # (3, 4), strides (1, 3)
    y = torch.randn(3, 8)[:, ::2]  # (3, 4), strides (8, 2)
    base = torch.randn(10)
    z = base[2:].as_strided((3, 4), (0, 1))  # broadcast-like: stride 0
    assert not x.is_contiguous() and not y.is_contiguous()
    fn = cm.function("affine")
    torch.testing.assert_close(fn(x, y)[0], x * y + x)
    torch.testing.assert_close(fn(z, y)[0], z * y + z)
    torch.testing.assert_close(fn(x, z)[0], x * z + x)


def test_zero_dim_and_f64(cm):
    x, y = torch.tensor(0.5), torch.tensor(2.0, dtype=torch.float64)
    ex, ny = cm.function("scalar")(x, y)
    assert ex.shape == () and ny.dtype == torch.float64
    torch.testing.assert_close(ex, torch.exp(x))
    assert ny.item() == -2.0


def test_bool_in_and_out(cm):
    p = torch.tensor([True, False, True, False, True])
    q = torch.tensor([True, True, False, False, True])
    both, notp = cm.function("bools")(p, q)
    assert both.dtype == torch.bool and torch.equal(both, p & q)
    assert torch.equal(notp, ~p)
    assert torch.equal(notp.view(torch.uint8), (~p).view(torch.uint8))  # bytes are 0/1


def test_multiple_outputs_int64_and_returned_input(cm):
    x = torch.arange(6).reshape(2, 3)
    s, same = cm.function("ints")(x)
    assert torch.equal(s, x.sum(1)) and torch.equal(same, x)
    assert same is x  # a returned argument is handed back, not copied
    a, b = torch.randn(2, 2), torch.randn(2, 2)
    ra, rb = cm.function("passthrough")(a, b)
    assert torch.equal(ra, b) and torch.equal(rb, a)
    strided = torch.arange(12).reshape(3, 4)[:, ::2].t()  # (2, 3), not contiguous
    s, same = cm.function("ints")(strided)
    assert same is strided and torch.equal(s, strided.sum(1))  # the argument, not its copy


def test_size_zero_dims(cm):
    e, s = cm.function("empty")(torch.empty(0, 3))
    assert e.shape == (0, 3) and torch.equal(s, torch.zeros(3))


def test_argument_errors_name_function_and_argument(cm):
    fn = cm.function("affine")
    with pytest.raises(TypeError, match=r"@affine: argument #1 is \(3, 5\)"):
        fn(torch.randn(3, 4), torch.randn(3, 5))
    with pytest.raises(TypeError, match=r"@affine: argument #0 is \(3, 4\) torch.float64"):
        fn(torch.randn(3, 4, dtype=torch.float64), torch.randn(3, 4))
    with pytest.raises(TypeError, match="takes 2 tensors"):
        fn(torch.randn(3, 4))
    with pytest.raises(TypeError, match=r"@affine: argument #1 is a float, expected a torch.Tensor"):
        fn(torch.randn(3, 4), 1.0)
    with pytest.raises(TypeError, match=r"@scalar: argument #0 is \(1,\) torch.float32"):
        cm.function("scalar")(torch.ones(1), torch.ones((), dtype=torch.float64))
    with pytest.raises(KeyError, match="no entry function @nope"):
        cm.function("nope")


@pytest.mark.parametrize("torch_threads", [1, 2, 3], indirect=True)
def test_threaded_kernels_split_rows_among_the_team(torch_threads):
    """Kernels above PARALLEL_MIN_WORK run on PyTorch's team, each thread a contiguous
    chunk of rows: an odd row count over 2 and 3 threads leaves no row out or twice."""
    import fusegrad
    rows, width = 515, 256  # 131840 elements per kernel, 515 = 3 * 171 + 2
    model = torch.nn.Sequential(torch.nn.Linear(width, width), torch.nn.LayerNorm(width),
                                torch.nn.GELU(), torch.nn.Linear(width, 10))
    x, y = torch.randn(rows, width), torch.randint(0, 10, (rows,))

    def step(m):
        loss = torch.nn.functional.cross_entropy(m(x).softmax(-1) * 3, y)
        loss.backward()
        return loss, [p.grad for p in m.parameters()]

    torch._dynamo.reset()
    compiled = fusegrad.compile(step)
    got_loss, got = compiled(model)
    model.zero_grad()
    want_loss, want = step(model)
    torch.testing.assert_close(got_loss, want_loss)
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w, atol=1e-5, rtol=1e-4)


def test_threads_share_one_function(cm):
    fn = cm.function("affine")
    errors = []

    def work(seed):
        g = torch.Generator().manual_seed(seed)
        for _ in range(200):
            x, y = torch.randn(3, 4, generator=g), torch.randn(3, 4, generator=g)
            if not torch.allclose(fn(x, y)[0], x * y + x):
                errors.append(seed)

    _in_threads(work, 4)
    assert not errors


def test_calls_do_not_recompile(cm, monkeypatch):
    def boom(*a, **k):
        raise AssertionError("recompiled")
    monkeypatch.setattr(cpu_compile, "run_pipeline", boom)
    monkeypatch.setattr("mlir.execution_engine.ExecutionEngine", boom)
    fn = cm.function("affine")
    assert fn is cm.function("affine")
    for _ in range(3):
        fn(torch.randn(3, 4), torch.randn(3, 4))


def test_repeated_results_get_distinct_buffers():
    """The same computed value returned twice -> independent outputs; a returned input is
    handed back as it is (callers that give results to users unalias them)."""
    f32 = TensorSpec((3,), "f32")
    cm = _compile(("twice", [f32], lambda b, x: [x, x, b.exp(x), b.exp(x)]),
                  ("full_twice", [f32], lambda b, x: [b.full_like(x, 1.0)] * 2))
    x = torch.randn(3)
    outs = cm.function("twice")(x)
    for o, want in zip(outs, [x, x, x.exp(), x.exp()]):
        torch.testing.assert_close(o, want)
    assert outs[0] is x and outs[1] is x
    assert cm.function("twice").returns_arguments
    assert not cm.function("full_twice").returns_arguments
    assert len({o.data_ptr() for o in outs[2:]} | {x.data_ptr()}) == 3
    a, b = cm.function("full_twice")(x)
    a.add_(1)
    torch.testing.assert_close(b, torch.ones(3))


def test_function_outlives_its_module_object():
    """A CpuFunction keeps its module, hence the JIT engine, alive on its own."""
    fn = _compile(("f", [TensorSpec((2,), "f32")], lambda b, x: [b.neg(x)])).function("f")
    import gc
    gc.collect()
    torch.testing.assert_close(fn(torch.ones(2))[0], -torch.ones(2))


def test_compile_without_a_location_in_scope():
    """Passes get the module's location: no `with ir.Location` needed by callers."""
    with make_context():
        module = ir.Module.parse(
            'func.func @f(%a: tensor<4xf32>, %b: tensor<4xf32>) -> tensor<4xi1> {\n'
            '  %0 = "dg.compare"(%a, %b) {direction = "lt"} : (tensor<4xf32>, tensor<4xf32>) '
            '-> tensor<4xi1>\n  return %0 : tensor<4xi1>\n}')
        fn = compile_cpu(module).function("f")
    a, b = torch.randn(4), torch.randn(4)
    assert torch.equal(fn(a, b)[0], a < b)


def test_out_of_range_indices_raise_and_stay_in_bounds():
    """Bad indices never touch memory outside the tensor; the call raises IndexError naming
    the op, and the next call with good indices works."""
    from fusegrad.runtime.cpu import OutOfRangeIndex
    x, i64 = TensorSpec((5, 3), "f32"), TensorSpec((2, 3), "i64")
    cm = _compile(("take", [x, TensorSpec((2,), "i64")],
                   lambda b, x, i: [b.index_select(x, i, dim=0)]),
                  ("gather", [x, i64], lambda b, x, i: [b.gather(x, i, dim=0)]),
                  ("scatter", [x, i64, TensorSpec((2, 3), "f32")],
                   lambda b, x, i, s: [b.scatter_add(x, i, s, dim=0)]))
    x = torch.randn(5, 3)
    for name, bad, args in (("take", torch.tensor([1, 5]), []),
                            ("take", torch.tensor([-1, 0]), []),
                            ("gather", torch.tensor([[0, 1, 2], [3, 9, 0]]), []),
                            ("scatter", torch.tensor([[0, 1, 2], [7, 0, 0]]), [torch.ones(2, 3)])):
        with pytest.raises(OutOfRangeIndex, match=f"dg.{'index_select' if name == 'take' else name}"):
            cm.function(name)(x, bad, *args)
    good = torch.tensor([4, 0])
    torch.testing.assert_close(cm.function("take")(x, good)[0], x[good])


def test_compiled_function_from_threads_at_once():
    """Argument descriptors and workspaces (the matmul result is a temporary) are per thread:
    concurrent calls do not see each other's tensors."""
    import fusegrad

    f = fusegrad.compile(lambda a, b: (a @ b).relu() + a)
    errors: list = []

    def worker(seed: int) -> None:
        g = torch.Generator().manual_seed(seed)
        for _ in range(30):
            a, b = torch.randn(48, 48, generator=g), torch.randn(48, 48, generator=g)
            if not torch.allclose(f(a, b), (a @ b).relu() + a, atol=1e-5):
                errors.append(seed)
    f(torch.randn(48, 48), torch.randn(48, 48))  # compile once, outside the threads
    _in_threads(worker, 4)
    assert not errors


def _matmul_chain():
    """x @ w four times: bufferization computes the second and the fourth product in the
    output, so two 256 KiB temporaries remain (the first and the third), never live at
    once."""
    spec = TensorSpec((256, 256), "f32")

    def body(b, x, w):
        for _ in range(4):
            x = b.matmul(x, w)
        return [x]
    return ("chain", [spec, spec], body)


def test_temporaries_live_in_the_threads_workspace():
    from fusegrad.runtime import cpu

    fn = _compile(_matmul_chain()).function("chain")
    assert fn.workspace == 256 * 256 * 4  # packed by liveness: 1 buffer for 2
    x, w = torch.randn(256, 256), torch.randn(256, 256) / 16
    want = x @ w @ w @ w @ w
    torch.testing.assert_close(fn(x, w)[0], want)
    assert cpu.workspace_bytes() >= fn.workspace
    kept = cpu._WORKSPACE.buffer.data_ptr()
    torch.testing.assert_close(fn(x, w)[0], want)
    assert cpu._WORKSPACE.buffer.data_ptr() == kept  # kept between calls, not reallocated


def test_temporaries_of_run_time_size_grow_the_workspace_once():
    """Temporaries of run-time sizes live in the thread's workspace too: a call that
    needs more than it holds runs on a block of its own, and the workspace grows to
    what it needed; a call that fits reuses it (on a fresh thread: an empty workspace)."""
    from fusegrad.runtime import abi, cpu

    name, _, body = _matmul_chain()
    fn = _compile((name, [TensorSpec((abi.symbol("s0"), 256), "f32"),
                          TensorSpec((256, 256), "f32")], body)).function(name)
    assert fn.workspace < 0  # a growing workspace
    w = torch.randn(256, 256) / 16
    seen: list = []

    def calls(_: int) -> None:
        for n in (8, 64, 32, 64):
            x = torch.randn(n, 256)
            before = cpu.workspace_bytes()
            torch.testing.assert_close(fn(x, w)[0], x @ w @ w @ w @ w)
            seen.append((n, before, cpu.workspace_bytes(), cpu._WORKSPACE.buffer.data_ptr()))
    _in_threads(calls, 1)
    assert [n for n, *_ in seen] == [8, 64, 32, 64]  # no call raised
    grew = [after > before for _, before, after, _ in seen]
    assert grew == [True, True, False, False]
    assert seen[1][3] == seen[2][3] == seen[3][3]  # reused, not reallocated
    assert seen[3][2] >= 64 * 256 * 4  # one [64, 256] f32 temporary at a time


def test_shared_library_keeps_workspace_sizes(tmp_path):
    from fusegrad.runtime import cpu_library

    with make_context(), ir.Location.unknown():
        module = ir.Module.create()
        name, specs, body = _matmul_chain()
        with ir.InsertionPoint(module.body):
            func.FuncOp.from_py_func(*[s.to_mlir() for s in specs], name=name)(
                lambda *v: body(Builder(), *v))
        jit = compile_cpu(module, library=str(tmp_path / cpu_library.LIBRARY))
    cpu_library.write(str(tmp_path), jit)
    loaded, _ = cpu_library.read(str(tmp_path))
    fn = loaded.function("chain")
    assert fn.workspace == jit.function("chain").workspace > 0
    x, w = torch.randn(256, 256), torch.randn(256, 256) / 16
    torch.testing.assert_close(fn(x, w)[0], x @ w @ w @ w @ w)
