"""The persistent compile cache: hits across processes, corrupted entries, invalidation,
concurrent writers, the off switch, LRU eviction, and loading without MLIR."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time

import pytest
import torch

import fusegrad
from fusegrad import compile_cache
from fusegrad.frontend.capture import capture
from fusegrad.program import CompileOptions, Program
from fusegrad.codegen.cpu.llvm import link
from fusegrad.runtime import cpu_library

# Compiles a small model with fusegrad.compile and runs a training step, a no-grad call
# and a call with an out-of-range index; prints what it got and the cache counters as JSON.
# With an argument, waits after the imports until that file exists (to start compiling
# at the same moment as another process).
SCRIPT = textwrap.dedent("""
    import json, os, sys, time
    import torch, fusegrad
    from fusegrad import compile_cache

    if len(sys.argv) > 1:
        open(sys.argv[1] + "." + str(os.getpid()), "w").close()
        while not os.path.exists(sys.argv[1]):
            time.sleep(0.01)

    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(6, 4)

        def forward(self, x, i):
            return torch.index_select(torch.tanh(self.lin(x)), 0, i).sum()

    torch.manual_seed(0)
    model, x, i = M(), torch.randn(5, 6), torch.tensor([0, 3, 4])
    eager = model(x, i)
    eager.backward()
    eager_grads = [p.grad.tolist() for p in model.parameters()]
    model.zero_grad()
    cm = fusegrad.compile(model)
    loss = cm(x, i)
    loss.backward()
    with torch.no_grad():
        value = cm(x, i)
        try:
            cm(x, torch.tensor([0, 9, 1]))
            error = None
        except IndexError as e:
            error = str(e)
    print(json.dumps({"loss": loss.item(), "eager": eager.item(), "value": value.item(),
                      "grads": [p.grad.tolist() for p in model.parameters()],
                      "eager_grads": eager_grads, "index_error": error,
                      "stats": compile_cache.stats()}))
""")


def _env(cache: str, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("FUSEGRAD_")}
    return {**env, "FUSEGRAD_CACHE_DIR": cache, **extra}


def _run_script(tmp_path, cache, *args: str) -> dict:
    script = tmp_path / "script.py"
    script.write_text(SCRIPT)
    done = subprocess.run([sys.executable, str(script), *args], env=_env(str(cache)),
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def _entries(cache) -> list[str]:
    """The code entries (not the graph cache's captures)."""
    return sorted(d for d in os.listdir(cache) if not d.startswith((".", "graph-")))


def _graph_entries(cache) -> list[str]:
    return sorted(d for d in os.listdir(cache) if d.startswith("graph-"))


def test_second_process_hits_with_identical_results(tmp_path):
    """fusegrad.compile in a fresh process loads the training and forward code the first
    process compiled (nothing is compiled again) and computes exactly the same values,
    gradients (equal to eager) and index-error message."""
    cache = tmp_path / "cache"
    first = _run_script(tmp_path, cache)
    assert first["stats"]["misses"] == 2 and first["stats"]["writes"] == 2
    assert len(_entries(cache)) == 2
    # Dynamo traces the model twice: for training, and under no_grad
    assert first["stats"]["graph_writes"] == 2 and len(_graph_entries(cache)) == 2
    second = _run_script(tmp_path, cache)
    assert second["stats"]["hits"] == 2 and second["stats"]["misses"] == 0, second["stats"]
    assert second["stats"]["graph_hits"] == 2  # no capture, no import: Dynamo's graph is the key
    assert {k: v for k, v in first.items() if k != "stats"} == \
        {k: v for k, v in second.items() if k != "stats"}
    assert "index out of range in dg.index_select" in second["index_error"]
    assert "script.py" in second["index_error"]  # the source location survives the cache
    torch.testing.assert_close(torch.tensor(second["loss"]), torch.tensor(second["eager"]))
    for got, want in zip(second["grads"], second["eager_grads"]):
        torch.testing.assert_close(torch.tensor(got), torch.tensor(want))
    # the library runs where MLIR is not importable
    probe = textwrap.dedent(f"""
        import sys
        sys.modules["mlir"] = None  # any import of MLIR fails
        from fusegrad.runtime import cpu_library
        cpu, meta = cpu_library.read(sys.argv[1])
        print(sorted(cpu.names), "mlir" in sys.modules and sys.modules["mlir"] is not None)
    """)
    done = subprocess.run([sys.executable, "-c", probe, str(cache / _entries(cache)[0])],
                          env=_env(str(cache)), capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().endswith("False")


# Trains an MLP at the batch sizes given (the first static, then dynamic for Dynamo) and
# prints the cache counters and whether each step matched eager
DYNAMIC_SCRIPT = textwrap.dedent("""
    import copy, json, sys
    import torch, fusegrad
    from fusegrad import compile_cache

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.Tanh(), torch.nn.Linear(8, 2))
    eager = copy.deepcopy(model)
    cm = fusegrad.compile(model)
    ok = []
    for n in map(int, sys.argv[1].split(",")):
        x = torch.randn(n, 6)
        cm(x).square().sum().backward()
        eager(x).square().sum().backward()
        ok.append(all(torch.allclose(a.grad, b.grad, atol=1e-5)
                      for a, b in zip(model.parameters(), eager.parameters())))
    print(json.dumps({"ok": ok, "stats": compile_cache.stats()}))
""")


def test_program_for_every_size_is_one_entry_for_any_sizes(tmp_path):
    """The program a graph made dynamic compiles to is one cache entry, whatever size
    Dynamo traced it at: a second process running other sizes loads it (only its own
    first, static shape compiles)."""
    cache = tmp_path / "cache"
    script = tmp_path / "dynamic.py"
    script.write_text(DYNAMIC_SCRIPT)

    def run(sizes: str) -> dict:
        done = subprocess.run([sys.executable, str(script), sizes], env=_env(str(cache)),
                              capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout.strip().splitlines()[-1])
    first = run("3,5,7")
    assert all(first["ok"]) and first["stats"]["misses"] == 2
    second = run("4,9,11")
    assert all(second["ok"])
    assert second["stats"]["misses"] == 1 and second["stats"]["hits"] == 1
    assert second["stats"]["graph_hits"] == 1  # the capture for every size too


def test_concurrent_processes_leave_one_valid_entry(tmp_path):
    """Two processes compiling the same model at the same moment both succeed; each
    entry ends up in place once, complete, with no temporary left behind."""
    cache, go = tmp_path / "cache", tmp_path / "go"
    script = tmp_path / "script.py"
    script.write_text(SCRIPT)
    procs = [subprocess.Popen([sys.executable, str(script), str(go)], env=_env(str(cache)),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(2)]
    deadline = time.time() + 240
    while len([p for p in os.listdir(tmp_path) if p.startswith("go.")]) < 2:
        assert time.time() < deadline and all(p.poll() is None for p in procs)
        time.sleep(0.05)
    go.touch()
    results = []
    for p in procs:
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err
        results.append(json.loads(out.strip().splitlines()[-1]))
    assert results[0]["grads"] == results[1]["grads"]
    # each entry was put in place once (if both compiled it, the second rename lost)
    assert sum(r["stats"]["writes"] for r in results) == 2
    assert sum(r["stats"]["graph_writes"] for r in results) == 2
    assert sorted(os.listdir(cache)) == sorted(_entries(cache) + _graph_entries(cache))
    assert len(_entries(cache)) == 2 and len(_graph_entries(cache)) == 2
    for entry in _entries(cache):
        cpu_library.read(str(cache / entry))


# ---------------------------------------------------------------- in this process

def _build_exp(directory):
    from mlir import ir

    from fusegrad.context import make_context
    from fusegrad.codegen.cpu.compile import compile_cpu

    with make_context():
        module = ir.Module.parse('func.func @f(%a: tensor<4xf32>) -> tensor<4xf32> {\n'
                                 '  %0 = "dg.exp"(%a) : (tensor<4xf32>) -> tensor<4xf32>\n'
                                 '  return %0 : tensor<4xf32>\n}')
        library = os.path.join(directory, cpu_library.LIBRARY) if directory else None
        return compile_cpu(module, library), {}


def test_losing_the_rename_race_keeps_the_winners_entry(tmp_path):
    """Another process puts the entry in place while this one compiles: this one keeps
    its own code, and the winner's entry stays, alone and valid."""
    directory, key = str(tmp_path / "cache"), "0" * 64
    winner = compile_cache.CompileCache(directory, 1 << 30)

    def racing(directory):
        winner.get(key, {}, _build_exp)
        return _build_exp(directory)

    writes = compile_cache.stats()["writes"]
    cpu, _ = compile_cache.CompileCache(directory, 1 << 30).get(key, {}, racing)
    assert compile_cache.stats()["writes"] == writes + 1
    assert os.listdir(directory) == [key]
    x = torch.randn(4)
    torch.testing.assert_close(cpu.function("f")(x)[0], x.exp())
    loaded, _ = cpu_library.read(os.path.join(directory, key))
    torch.testing.assert_close(loaded.function("f")(x)[0], x.exp())


def _library(directory, op):
    """A CPU library of `@f(x) = op(x)` (a 4-vector) written to `directory`."""
    from mlir import ir

    from fusegrad.context import make_context
    from fusegrad.codegen.cpu.compile import compile_cpu

    os.makedirs(directory)
    with make_context():
        module = ir.Module.parse('func.func @f(%a: tensor<4xf32>) -> tensor<4xf32> {\n'
                                 f'  %0 = "dg.{op}"(%a) : (tensor<4xf32>) -> tensor<4xf32>\n'
                                 '  return %0 : tensor<4xf32>\n}')
        cpu_library.write(directory, compile_cpu(module, os.path.join(directory,
                                                                      cpu_library.LIBRARY)))


def test_another_library_at_a_loaded_path_runs_its_own_code(tmp_path, monkeypatch):
    """dlopen gives back the library already loaded under a path: a folder written again
    (an artifact exported twice to one path) must still run the new file's code."""
    import shutil

    monkeypatch.setenv("FUSEGRAD_CPU_CODEGEN", "auto")
    x, folder = torch.randn(4), str(tmp_path / "artifact")
    _library(folder, "exp")
    first, _ = cpu_library.read(folder)
    shutil.rmtree(folder)
    _library(folder, "tanh")
    second, _ = cpu_library.read(folder)
    torch.testing.assert_close(first.function("f")(x)[0], x.exp())
    torch.testing.assert_close(second.function("f")(x)[0], x.tanh())


def _f(x):
    return (x.sin() * 2).sum(0)


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """A fresh cache directory, with no entries loaded in this process yet."""
    path = tmp_path / "cache"
    monkeypatch.setenv("FUSEGRAD_CACHE_DIR", str(path))
    monkeypatch.delenv("FUSEGRAD_CACHE", raising=False)
    monkeypatch.delenv("FUSEGRAD_CACHE_MAX_BYTES", raising=False)
    monkeypatch.setattr(compile_cache, "_CACHES", {})
    return path


def _forget_loaded(monkeypatch):
    """As in a new process: nothing loaded yet (entries on disk stay)."""
    monkeypatch.setattr(compile_cache, "_CACHES", {})


def _compiled(fn=_f, shape=(3, 4)):
    x = torch.randn(*shape)
    program = Program.from_graph(capture(fn, [x]).gm, CompileOptions(dump_dir=None))
    return program.forward(), x


def _check(fn=_f, shape=(3, 4)):
    forward, x = _compiled(fn, shape)
    torch.testing.assert_close(forward(x)[0], fn(x))


def _corrupt_library(entry):
    path = entry / "lib.so"
    data = bytearray(path.read_bytes())
    for k in range(len(data) // 2, len(data) // 2 + 64):
        data[k] ^= 0xFF
    path.write_bytes(bytes(data))


def _truncate(name):
    def corrupt(entry):
        path = entry / name
        path.write_bytes(path.read_bytes()[:path.stat().st_size // 2])
    return corrupt


def _stale_format(entry):
    meta = json.loads((entry / "meta.json").read_text())
    meta["version"] = 0
    (entry / "meta.json").write_text(json.dumps(meta))


def _garbage_with_checksum(entry):
    """A library that matches its checksum but does not load."""
    (entry / "lib.so").write_bytes(b"not an ELF file")
    meta = json.loads((entry / "meta.json").read_text())
    meta["sha256"] = cpu_library.sha256_file(str(entry / "lib.so"))
    (entry / "meta.json").write_text(json.dumps(meta))


@pytest.mark.parametrize("damage", [_corrupt_library, _truncate("lib.so"), _truncate("meta.json"),
                                    _stale_format, _garbage_with_checksum],
                         ids=["flipped-bytes", "truncated-library", "truncated-json",
                              "stale-format", "unloadable"])
def test_unusable_entry_is_rebuilt_with_a_warning(cache, monkeypatch, damage):
    _check()
    (entry,) = _entries(cache)
    damage(cache / entry)
    _forget_loaded(monkeypatch)
    before = compile_cache.stats()
    with pytest.warns(compile_cache.CompileCacheWarning, match=entry):
        _check()
    after = compile_cache.stats()
    assert after["rebuilt"] == before["rebuilt"] + 1 and after["writes"] == before["writes"] + 1
    assert _entries(cache) == [entry]
    cpu_library.read(str(cache / entry))  # valid again
    _forget_loaded(monkeypatch)
    hits = compile_cache.stats()["hits"]
    _check()
    assert compile_cache.stats()["hits"] == hits + 1


def test_changed_version_misses(cache, monkeypatch):
    _check()
    _forget_loaded(monkeypatch)
    versions = compile_cache.versions()
    monkeypatch.setattr(compile_cache, "versions", lambda: {**versions, "mlir": "0.0.0"})
    misses = compile_cache.stats()["misses"]
    _check()
    assert compile_cache.stats()["misses"] == misses + 1
    assert len(_entries(cache)) == 2


def test_the_source_hash_covers_every_module_of_the_package():
    """Editing any part of the compiler (a pass in codegen/cpu/, an ATen mapping in
    frontend/) must miss: the hash reads every source of every subpackage."""
    package = os.path.dirname(compile_cache.__file__)
    every = sorted(os.path.relpath(os.path.join(d, f), package)
                   for d, _, files in os.walk(package) if "__pycache__" not in d
                   for f in files if f.endswith(".py"))
    assert compile_cache.source_files() == every
    assert "codegen/cpu/kernels.py" in every and "frontend/importer.py" in every


def test_forward_and_backward_compiled_apart_hit_apart(cache, monkeypatch):
    """A graph compiling its backward at the first backward (above PAIRED_BACKWARD_MAX_OPS
    ops) stores the forward and the backward as two entries; a new process loads both."""
    from fusegrad import program

    monkeypatch.setattr(program, "PAIRED_BACKWARD_MAX_OPS", 0)
    x = torch.randn(3, 4)

    def step():
        w = torch.ones(4, requires_grad=True)
        fusegrad.compile(lambda x, w: (x * w).sin().sum())(x, w).backward()
        return w.grad
    torch._dynamo.reset()
    first = step()
    assert len(_entries(cache)) == 2
    _forget_loaded(monkeypatch)
    torch._dynamo.reset()
    before = compile_cache.stats()
    again = step()
    after = compile_cache.stats()
    assert after["hits"] == before["hits"] + 2 and after["misses"] == before["misses"]
    torch.testing.assert_close(again, first)


def test_loaded_entry_is_shared_within_a_process(cache):
    forward, x = _compiled()
    before = compile_cache.stats()
    again, _ = _compiled()
    after = compile_cache.stats()
    assert after["memory_hits"] == before["memory_hits"] + 1 and after["hits"] == before["hits"]
    torch.testing.assert_close(again(x)[0], forward(x)[0])


def test_off_switch_reads_and_writes_nothing(cache, monkeypatch):
    monkeypatch.setenv("FUSEGRAD_CACHE", "0")
    before = compile_cache.stats()
    _check()
    assert not cache.exists()
    assert compile_cache.stats() == before


def test_unwritable_directory_compiles_with_one_warning(tmp_path, monkeypatch):
    not_a_directory = tmp_path / "file"
    not_a_directory.write_text("")
    monkeypatch.setenv("FUSEGRAD_CACHE_DIR", str(not_a_directory / "cache"))
    monkeypatch.setattr(compile_cache, "_CACHES", {})
    compile_cache._warn_unwritable.cache_clear()
    with pytest.warns(compile_cache.CompileCacheWarning, match="cannot be written") as record:
        _check()
        _check(shape=(2, 4))
    assert len([w for w in record if w.category is compile_cache.CompileCacheWarning]) == 1


def test_no_c_compiler_disables_the_cache_with_one_info_line(cache, monkeypatch, caplog):
    monkeypatch.setattr(link, "find_linker", lambda: None)
    compile_cache._log_no_linker.cache_clear()
    with caplog.at_level("INFO", logger="fusegrad.compile_cache"):
        _check()
        _check(shape=(2, 4))
    assert not cache.exists()
    lines = [r for r in caplog.records if "compile cache disabled" in r.getMessage()]
    assert len(lines) == 1 and lines[0].levelname == "INFO"
    compile_cache._log_no_linker.cache_clear()


def test_least_recently_used_entry_is_evicted(cache, monkeypatch):
    _check(shape=(1, 4))
    (a,) = _entries(cache)
    size = sum(f.stat().st_size for f in (cache / a).iterdir())
    monkeypatch.setenv("FUSEGRAD_CACHE_MAX_BYTES", str(int(size * 2.5)))
    _check(shape=(2, 4))
    (b,) = set(_entries(cache)) - {a}
    now = time.time()
    os.utime(cache / a, (now - 100, now - 100))
    os.utime(cache / b, (now - 50, now - 50))
    _forget_loaded(monkeypatch)
    _check(shape=(1, 4))  # a hit makes `a` the most recently used
    assert (cache / a).stat().st_mtime > now - 10
    evicted = compile_cache.stats()["evicted"]
    _check(shape=(3, 4))  # a third entry exceeds the cap: `b` goes
    assert compile_cache.stats()["evicted"] == evicted + 1
    assert a in _entries(cache) and b not in _entries(cache) and len(_entries(cache)) == 2


# ---------------------------------------------------------------- CUDA launch plans

@pytest.fixture
def fake_gpu(monkeypatch):
    """Programs on the CUDA target run their plans against a fake driver on the CPU (the
    PTX is real; the kernels do not run)."""
    from cuda_fakes import FakeDriver
    from fusegrad.runtime import cuda

    real = cuda.CudaProgram
    monkeypatch.setattr(cuda, "CudaProgram", lambda plan, graphs=False: real(
        plan, driver=FakeDriver(), device="cpu", stream=lambda: 0, chip="sm_90", graphs=graphs))


def _cuda_forward(fn=_f, shape=(3, 4)):
    x = torch.randn(*shape)
    program = Program.from_graph(capture(fn, [x]).gm, CompileOptions(target="cuda"))
    forward = program.forward()
    forward(x)  # the plan's steps against the fake driver
    return forward.program.plan


def test_cuda_plan_is_cached_and_loaded_by_a_new_process(cache, monkeypatch, fake_gpu):
    plan = _cuda_forward()
    (entry,) = _entries(cache)
    files = sorted(os.listdir(cache / entry))
    assert "plan.json" in files and "meta.json" in files and any(f.endswith(".ptx") for f in files)
    _forget_loaded(monkeypatch)
    hits = compile_cache.stats()["hits"]
    again = _cuda_forward()
    assert compile_cache.stats()["hits"] == hits + 1
    assert again.to_json() == plan.to_json()


def test_cpu_and_cuda_code_of_one_graph_are_two_entries(cache, fake_gpu):
    _check()
    _cuda_forward()
    assert len(_entries(cache)) == 2


def test_corrupted_cuda_image_is_rebuilt_with_a_warning(cache, monkeypatch, fake_gpu):
    _cuda_forward()
    (entry,) = _entries(cache)
    ptx = next(p for p in (cache / entry).iterdir() if p.suffix == ".ptx")
    ptx.write_bytes(ptx.read_bytes()[:-10])
    _forget_loaded(monkeypatch)
    with pytest.warns(compile_cache.CompileCacheWarning, match="does not match its checksum"):
        _cuda_forward()
    assert _entries(cache) == [entry]
    from fusegrad.runtime.cuda import read_entry
    read_entry(str(cache / entry))  # valid again


# ---------------------------------------------------------------- the graph cache

def _train_step(x, dtype=torch.float32, **options):
    """One fusegrad training step of a small module, after torch._dynamo.reset() (a new
    Dynamo graph, as in a new process); its gradients."""
    torch._dynamo.reset()
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.Tanh()).to(dtype)
    fusegrad.compile(model, **options)(x.to(dtype)).sum().backward()
    return [p.grad for p in model.parameters()]


def test_a_graph_cache_hit_skips_capture_and_import(cache, monkeypatch):
    """A Dynamo graph seen before (by any process) is neither captured nor imported: the
    capture and the dg module come from the graph cache, the code from the compile cache,
    and the gradients are the same."""
    from fusegrad.frontend import backend

    x = torch.randn(5, 4)
    first = _train_step(x)
    assert len(_graph_entries(cache)) == 1
    _forget_loaded(monkeypatch)

    def no_capture(*args, **kwargs):
        raise AssertionError("captured again")
    monkeypatch.setattr(backend, "capture", no_capture)
    monkeypatch.setattr(Program, "from_graph", no_capture)
    before = compile_cache.stats()
    again = _train_step(x)
    after = compile_cache.stats()
    assert after["graph_hits"] == before["graph_hits"] + 1
    assert after["misses"] == before["misses"]
    for got, want in zip(again, first):
        torch.testing.assert_close(got, want)


def test_what_the_capture_depends_on_is_in_the_graph_key(cache, monkeypatch):
    """Another dtype, another requires_grad, other compile options or another size are
    other captures: each misses the graph cache."""
    x = torch.randn(5, 4)
    _train_step(x)
    for variant in (lambda: _train_step(x, torch.float64), lambda: _train_step(x, fusion=False),
                    lambda: _train_step(torch.randn(6, 4))):
        before = compile_cache.stats()
        variant()
        assert compile_cache.stats()["graph_hits"] == before["graph_hits"]
    torch._dynamo.reset()
    frozen = torch.nn.Linear(4, 3).requires_grad_(False)
    with torch.no_grad():
        fusegrad.compile(frozen)(x)
    assert len(_graph_entries(cache)) == 5


def test_a_constant_attribute_of_the_graph_is_keyed_by_value():
    """A tensor the graph reads that is a plain attribute (not a parameter or buffer,
    which the program takes as inputs: those are keyed by their metadata) is keyed by
    its value."""
    from fusegrad.frontend import graph_cache

    def graph(value):
        g = torch.fx.Graph()
        x = g.placeholder("x")
        g.output(g.call_function(torch.mul, (x, g.get_attr("scale"))))
        gm = torch.fx.GraphModule({"scale": torch.tensor(0.0)}, g)
        del gm.scale  # a buffer, made a plain attribute
        object.__setattr__(gm, "scale", torch.tensor(value))
        return gm
    options, x = CompileOptions(dump_dir=None), [torch.randn(3)]
    keys = [graph_cache.graph_key(graph(v), x, options, for_every_size=False)
            for v in (2.0, 2.0, 3.0)]
    assert keys[0] is not None and keys[0] == keys[1] != keys[2]


def test_an_unusable_graph_cache_entry_is_captured_again(cache, monkeypatch):
    x = torch.randn(5, 4)
    first = _train_step(x)
    (entry,) = _graph_entries(cache)
    (cache / entry / "capture.pkl").write_bytes(b"not a pickle")
    _forget_loaded(monkeypatch)
    before = compile_cache.stats()
    again = _train_step(x)
    after = compile_cache.stats()
    assert after["graph_hits"] == before["graph_hits"]
    assert after["rebuilt"] == before["rebuilt"] + 1
    assert after["graph_writes"] == before["graph_writes"] + 1  # stored again, whole
    for got, want in zip(again, first):
        torch.testing.assert_close(got, want)


def test_the_autocast_dtype_is_in_the_graph_key(cache):
    """One Dynamo graph under bf16 and under fp16 autocast: two captures (the first one's
    ops would compute in the wrong dtype)."""
    x, w = torch.randn(4, 8), torch.randn(3, 8)
    for dtype in (torch.bfloat16, torch.float16):
        torch._dynamo.reset()
        with torch.autocast("cpu", dtype=dtype):
            got = fusegrad.compile(torch.nn.functional.linear)(x, w)
            assert got.dtype == dtype
            assert torch.equal(got, torch.nn.functional.linear(x, w))
    assert len(_graph_entries(cache)) == 2


def test_a_graph_calling_a_users_custom_op_is_not_cached(cache):
    """A custom op's code may change between processes under the same name: a graph that
    calls one (here one the capture traces through) is captured every time."""
    lib = torch.library.Library("fusegrad_test", "DEF")
    lib.define("triple(Tensor x) -> Tensor")
    lib.impl("triple", lambda x: x * 3, "CompositeImplicitAutograd")
    torch._dynamo.reset()
    x = torch.randn(5)
    with torch.no_grad():
        got = fusegrad.compile(lambda x: torch.ops.fusegrad_test.triple(x).sin())(x)
    torch.testing.assert_close(got, (x * 3).sin())
    assert compile_cache.stats()["misses"] and not _graph_entries(cache)
