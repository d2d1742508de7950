"""dg-fuse: region formation (kernel counts) and numerics of fused vs unfused IR."""
from __future__ import annotations

import pytest
import torch
from mlir import ir

from fusegrad.context import make_context
from fusegrad.dialects.interpreter import run_function
from fusegrad.pass_manager import run_pipeline
from fusegrad.pipelines import fusion_pipeline
from fusegrad.passes import functions
from fusegrad.transforms.fusion.fuse import count_kernels, fuse_function
from fusegrad.codegen.cpu.compile import compile_cpu

T = "tensor<4x8xf32>"
R = "tensor<4xf32>"

SOFTMAX = f"""
func.func @f(%x: {T}) -> {T} {{
  %m = "dg.reduce_max"(%x) {{dims = array<i64: 1>}} : ({T}) -> {R}
  %bm = "dg.broadcast_in_dim"(%m) {{dims = array<i64: 0>}} : ({R}) -> {T}
  %d = "dg.sub"(%x, %bm) : ({T}, {T}) -> {T}
  %e = "dg.exp"(%d) : ({T}) -> {T}
  %s = "dg.reduce_sum"(%e) {{dims = array<i64: 1>}} : ({T}) -> {R}
  %bs = "dg.broadcast_in_dim"(%s) {{dims = array<i64: 0>}} : ({R}) -> {T}
  %y = "dg.div"(%e, %bs) : ({T}, {T}) -> {T}
  return %y : {T}
}}"""

LAYERNORM = f"""
func.func @f(%x: {T}, %w: tensor<8xf32>) -> ({T}, {R}) {{
  %n = "dg.full"() {{value = 8.0}} : () -> {R}
  %eps = "dg.full"() {{value = 1.0e-5}} : () -> {R}
  %s1 = "dg.reduce_sum"(%x) {{dims = array<i64: 1>}} : ({T}) -> {R}
  %mean = "dg.div"(%s1, %n) : ({R}, {R}) -> {R}
  %mr = "dg.reshape"(%mean) : ({R}) -> tensor<4x1xf32>
  %bm = "dg.broadcast_in_dim"(%mr) {{dims = array<i64: 0, 1>}} : (tensor<4x1xf32>) -> {T}
  %xc = "dg.sub"(%x, %bm) : ({T}, {T}) -> {T}
  %sq = "dg.mul"(%xc, %xc) : ({T}, {T}) -> {T}
  %s2 = "dg.reduce_sum"(%sq) {{dims = array<i64: 1>}} : ({T}) -> {R}
  %var = "dg.div"(%s2, %n) : ({R}, {R}) -> {R}
  %ve = "dg.add"(%var, %eps) : ({R}, {R}) -> {R}
  %rstd = "dg.rsqrt"(%ve) : ({R}) -> {R}
  %br = "dg.broadcast_in_dim"(%rstd) {{dims = array<i64: 0>}} : ({R}) -> {T}
  %bw = "dg.broadcast_in_dim"(%w) {{dims = array<i64: 1>}} : (tensor<8xf32>) -> {T}
  %y0 = "dg.mul"(%xc, %br) : ({T}, {T}) -> {T}
  %y = "dg.mul"(%y0, %bw) : ({T}, {T}) -> {T}
  return %y, %rstd : {T}, {R}
}}"""

GELU = f"""
func.func @f(%x: {T}, %b: tensor<8xf32>) -> tensor<8x4xf32> {{
  %bb = "dg.broadcast_in_dim"(%b) {{dims = array<i64: 1>}} : (tensor<8xf32>) -> {T}
  %h = "dg.add"(%x, %bb) : ({T}, {T}) -> {T}
  %c = "dg.full"() {{value = 0.7071067811865476}} : () -> {T}
  %half = "dg.full"() {{value = 0.5}} : () -> {T}
  %one = "dg.full"() {{value = 1.0}} : () -> {T}
  %hc = "dg.mul"(%h, %c) : ({T}, {T}) -> {T}
  %e = "dg.erf"(%hc) : ({T}) -> {T}
  %e1 = "dg.add"(%e, %one) : ({T}, {T}) -> {T}
  %g0 = "dg.mul"(%h, %half) : ({T}, {T}) -> {T}
  %g = "dg.mul"(%g0, %e1) : ({T}, {T}) -> {T}
  %t = "dg.transpose"(%g) {{perm = array<i64: 1, 0>}} : ({T}) -> tensor<8x4xf32>
  return %t : tensor<8x4xf32>
}}"""

MATMUL = """
func.func @f(%a: tensor<4x8xf32>, %w: tensor<8x8xf32>) -> tensor<4x8xf32> {
  %e = "dg.exp"(%a) : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %m = "dg.matmul"(%e, %w) : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %t = "dg.tanh"(%m) : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %s = "dg.add"(%t, %e) : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  return %s : tensor<4x8xf32>
}"""

# y = exp(x) feeds a reduction whose result feeds back into a consumer of y's
# sibling: fusing exp with the final add would create a cycle through the sum.
SIBLINGS = f"""
func.func @f(%x: {T}) -> ({T}, {T}, {R}) {{
  %a = "dg.exp"(%x) : ({T}) -> {T}
  %b = "dg.neg"(%x) : ({T}) -> {T}
  %s = "dg.reduce_sum"(%x) {{dims = array<i64: 1>}} : ({T}) -> {R}
  return %a, %b, %s : {T}, {T}, {R}
}}"""

# the reduced dim exists only through a broadcast (bias-gradient shape): no operand
# spans the loop domain, so the lowering must supply one
BROADCAST_REDUCE = f"""
func.func @f(%b: tensor<8xf32>) -> tensor<8xf32> {{
  %bb = "dg.broadcast_in_dim"(%b) {{dims = array<i64: 1>}} : (tensor<8xf32>) -> {T}
  %e = "dg.exp"(%bb) : ({T}) -> {T}
  %s = "dg.reduce_sum"(%e) {{dims = array<i64: 0>}} : ({T}) -> tensor<8xf32>
  return %s : tensor<8xf32>
}}"""

CASES = {  # name -> (text, input shapes, expected kernels after fusion)
    "broadcast_reduce": (BROADCAST_REDUCE, [(8,)], 1),
    "softmax": (SOFTMAX, [(4, 8)], 2),
    "layernorm": (LAYERNORM, [(4, 8), (8,)], 2),
    "gelu": (GELU, [(4, 8), (8,)], 1),
    "matmul": (MATMUL, [(4, 8), (8, 8)], 3),
    "siblings": (SIBLINGS, [(4, 8)], 1),
}


def _fused(text: str):
    ref = ir.Module.parse(text)
    fused = ir.Module.parse(text)
    run_pipeline(fused, fusion_pipeline())
    return ref, fused


@pytest.mark.parametrize("name", sorted(CASES))
def test_fused_matches_unfused(name):
    text, shapes, kernels = CASES[name]
    torch.manual_seed(0)
    xs = [torch.randn(s) for s in shapes]
    with make_context(), ir.Location.unknown():
        ref, fused = _fused(text)
        assert count_kernels(fused.operation) == kernels, str(fused)
        expected = run_function(next(functions(ref.operation)), xs)
        interpreted = run_function(next(functions(fused.operation)), xs)
        cm = compile_cpu(fused)  # keep the engine alive while its function runs
        compiled = cm.function("f")(*xs)
    for e, i, c in zip(expected, interpreted, compiled):
        torch.testing.assert_close(i, e, rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(c, e, rtol=1e-5, atol=1e-5)


def test_matmul_stays_its_own_kernel():
    with make_context(), ir.Location.unknown():
        _, fused = _fused(MATMUL)
        top = [op.operation.name for op in next(functions(fused.operation)).regions[0].blocks[0]]
    assert top.count("dg.matmul") == 1
    assert "dg.exp" in top or top.count("dg.fusion") == 1  # exp feeds both matmul and add


def test_max_ops_limits_region_size():
    with make_context(), ir.Location.unknown():
        m = ir.Module.parse(GELU)
        fuse_function(next(functions(m.operation)), max_ops=3)
        assert count_kernels(m.operation) > 1


def test_random_pointwise_functions():
    """Random chains of pointwise ops + broadcasts: one kernel, same numbers."""
    unary = ["exp", "tanh", "neg", "sigmoid", "abs"]
    binary = ["add", "mul", "sub", "max"]
    for seed in range(5):
        g = torch.Generator().manual_seed(seed)
        lines, vals = [], ["%x", "%y"]
        lines.append(f'%by = "dg.broadcast_in_dim"(%v) {{dims = array<i64: 0>}} : ({R}) -> {T}')
        vals.append("%by")
        for k in range(8):
            pick = lambda: vals[int(torch.randint(len(vals), (1,), generator=g))]
            if k % 2:
                op = unary[int(torch.randint(len(unary), (1,), generator=g))]
                lines.append(f'%t{k} = "dg.{op}"({pick()}) : ({T}) -> {T}')
            else:
                op = binary[int(torch.randint(len(binary), (1,), generator=g))]
                lines.append(f'%t{k} = "dg.{op}"({pick()}, {pick()}) : ({T}, {T}) -> {T}')
            vals.append(f"%t{k}")
        body = "\n  ".join(lines)
        text = (f"func.func @f(%x: {T}, %y: {T}, %v: {R}) -> {T} {{\n  {body}\n"
                f"  return %t7 : {T}\n}}")
        xs = [torch.randn(4, 8), torch.randn(4, 8), torch.randn(4)]
        with make_context(), ir.Location.unknown():
            ref, fused = _fused(text)
            assert count_kernels(fused.operation) == 1
            expected = run_function(next(functions(ref.operation)), xs)
            cm = compile_cpu(fused)
            compiled = cm.function("f")(*xs)
        torch.testing.assert_close(compiled[0], expected[0], rtol=1e-5, atol=1e-5)


def test_cycle_checks_bounded_by_rank_match_unbounded():
    """The cycle checks search only below the target's rank, which merges keep a
    topological order of the region graph: random graphs of pointwise ops, reductions
    and matmuls (which fuse with nothing, so regions can close cycles through them)
    group exactly as with unbounded searches."""
    from fusegrad.transforms.fusion.fuse import _Grouping

    class Unbounded(_Grouping):
        def _reaches(self, start, target, skip):
            stack, seen = list(start), set()
            while stack:
                g = stack.pop()
                if g == target:
                    return True
                if g not in seen and g != skip:
                    seen.add(g)
                    stack.extend(self.succ[g])
            return False

    S = "tensor<8x8xf32>"
    for seed in range(20):
        g = torch.Generator().manual_seed(seed)
        vals, lines = ["%x", "%y"], []
        for k in range(40):
            a, b = (vals[int(torch.randint(len(vals), (1,), generator=g))] for _ in range(2))
            kind = int(torch.randint(4, (1,), generator=g))
            if kind == 0:
                lines.append(f'%t{k} = "dg.matmul"({a}, {b}) : ({S}, {S}) -> {S}')
            elif kind == 1:
                lines.append(f'%r{k} = "dg.reduce_sum"({a}) {{dims = array<i64: 1>}} : ({S}) -> tensor<8xf32>')
                lines.append(f'%t{k} = "dg.broadcast_in_dim"(%r{k}) {{dims = array<i64: 0>}} '
                             f': (tensor<8xf32>) -> {S}')
            else:
                lines.append(f'%t{k} = "dg.{["add", "mul"][kind - 2]}"({a}, {b}) : ({S}, {S}) -> {S}')
            vals.append(f"%t{k}")
        body = "\n  ".join(lines)
        text = f"func.func @f(%x: {S}, %y: {S}) -> {S} {{\n  {body}\n  return %t39 : {S}\n}}"
        with make_context(), ir.Location.unknown():
            module = ir.Module.parse(text)
            fn = next(functions(module.operation))
            ops = [o.operation for o in fn.regions[0].blocks[0].operations
                   if o.operation.name.startswith("dg.")]
            bounded = _Grouping(ops, 64)
            groups = bounded.run()
            assert sorted(map(sorted, groups)) == sorted(map(sorted, Unbounded(ops, 64).run()))
            for u, targets in bounded.succ.items():
                assert all(bounded.rank[u] < bounded.rank[v] for v in targets), seed
