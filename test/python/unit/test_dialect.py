"""The dg dialect layer: IRDL, rule coverage, builders, verifier, TensorSpec."""
from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch
from mlir import ir
from mlir.dialects import func

from fusegrad.context import make_context
from fusegrad.dialects import OPS, ShapeError, TensorSpec
from fusegrad.dialects.builder import Builder, erase_if_unused
from fusegrad.dialects.elementwise import BINARY, UNARY
from fusegrad.dialects.irdl import dialect_irdl
from fusegrad.dialects.verify import VerifyError, verify
from fusegrad.dialects.types import DEFAULT_SIZE_HINT
from fusegrad.runtime import abi

DIALECT_TESTS = Path(__file__).resolve().parents[2] / "Dialect"
F = TensorSpec((2, 3), "f32")
I32 = TensorSpec((2, 3), "i32")
B = TensorSpec((2, 3), "i1")


def test_irdl_text_loads_and_names_every_op():
    text = dialect_irdl()
    for name in OPS:
        assert f"irdl.operation @{name} {{" in text
    ctx = make_context()
    assert all(ctx.is_registered_operation(f"dg.{name}") for name in OPS)


def test_make_context_is_fresh_and_strict():
    a, b = make_context(), make_context()
    assert a is not b
    assert not a.allow_unregistered_dialects
    with a:
        with pytest.raises(ir.MLIRError, match="dg.nope"):
            ir.Module.parse('"dg.nope"() : () -> ()')


@pytest.mark.parametrize("name", sorted(OPS))
def test_every_op_has_shape_and_reference_rules(name):
    assert OPS[name].shape is not None and OPS[name].reference is not None


def test_every_op_is_round_tripped_by_a_lit_test():
    text = "".join(p.read_text() for p in DIALECT_TESTS.glob("*.mlir"))
    missing = [n for n in OPS if not re.search(rf'"dg\.{n}"', text)]
    assert not missing, f"ops without a test/Dialect test: {missing}"


# one builder call per op family, covering every op in the table
def _build_all(b: Builder, f, i32, p, v3, idx, idx1, src, a3, b3, img, w, seed):
    out = [b.create(n, [f]) for n in UNARY if n != "not"]
    out += [b.neg(i32), b.create("not", [i32]), b.create("not", [p])]
    out += [b.create(n, [f, f]) for n in BINARY if n not in ("and", "or")]
    out += [b.create("and", [i32, i32]), b.create("or", [p, p])]
    c = b.compare(f, f, direction="le")
    out += [c, b.select(c, f, f), b.convert(f, dtype="f16")]
    out += [b.reduce_sum(f, dims=[1]), b.reduce_max(f, dims=[0]), b.reduce_min(f, dims=[0, 1]),
            b.argmax(f, dim=1), b.argmin(f, dim=0),
            b.evenly_read(f, b.reduce_max(f, dims=[0, 1]))]
    out += [*b.scan(f, dim=1, combiner="add", reverse=0), *b.scan(i32, dim=0, combiner="max",
                                                                  reverse=1),
            b.scan_mul_grad(f, f, dim=1, reverse=0)]
    out += [b.broadcast_in_dim(v3, shape=(2, 3), dims=[1]), b.reshape(f, shape=(6,)),
            b.transpose(f, perm=[1, 0]), b.slice(f, start=[0, 0], limit=[2, 3], stride=[2, 2]),
            b.reverse(f, dims=[1]), b.pad(f, low=[0, 1], high=[1, 0], interior=[0, 1], value=0.0),
            b.concatenate(f, f, dim=1)]
    out += [b.gather(f, idx, dim=1), b.index_select(f, idx1, dim=0),
            b.scatter_add(f, idx, src, dim=1), b.scatter(f, idx, src, dim=1),
            *(b.create(op, [f, idx, src], dim=1)
              for op in ("scatter_max", "scatter_min", "scatter_mul"))]
    conv = dict(stride=[2, 2], padding=[1, 1], dilation=[1, 1], groups=1)
    y = b.conv2d(img, w, **conv)
    out += [b.matmul(a3, b3), b.matmul_add(a3, b3, b.matmul(a3, b3)), y,
            b.conv2d_input_grad(y, w, input_shape=(1, 2, 6, 6), **conv),
            b.conv2d_weight_grad(img, y, weight_shape=(3, 2, 3, 3), **conv)]
    grouped = dict(conv, groups=3)  # img read as NHWC: 6 channels, 3 groups of w's 2
    y_nhwc = b.conv2d_nhwc(img, w, **grouped)
    out += [y_nhwc, b.conv2d_nhwc_input_grad(y_nhwc, w, input_shape=(1, 2, 6, 6), **grouped),
            b.conv2d_nhwc_weight_grad(img, y_nhwc, weight_shape=(3, 2, 3, 3), **grouped)]
    mask = b.full(shape=(1, 1, 1, 1), dtype="f32", value=0.0)
    att = b.attention(img, img, img, mask, scale=0.5, causal=1)
    out += [*att, *b.attention_grad(img, img, img, img, *att, mask, scale=0.5, causal=1)]
    out += [b.constant(torch.arange(6.0).reshape(2, 3)), b.full(shape=(3,), dtype="i32", value=7),
            b.iota(shape=(2, 3), dtype="i64", dim=0)]
    out += [b.rng_uniform(seed, shape=(5,), dtype="f32"),
            b.rng_bernoulli(seed, shape=(5,), dtype="f64", p=0.5)]
    return out


def test_builders_produce_verified_ir_for_every_op():
    args = [F, I32, B, TensorSpec((3,), "f32"), TensorSpec((2, 2), "i64"), TensorSpec((4,), "i32"),
            TensorSpec((2, 2), "f32"), TensorSpec((4, 2, 3), "f32"), TensorSpec((4, 3, 5), "f32"),
            TensorSpec((1, 2, 6, 6), "f32"), TensorSpec((3, 2, 3, 3), "f32"), TensorSpec((), "i64")]
    with make_context(), ir.Location.unknown():
        module = ir.Module.create()
        with ir.InsertionPoint(module.body):
            f = func.FuncOp("all", ([a.to_mlir() for a in args], []))
            with ir.InsertionPoint(f.add_entry_block()):
                _build_all(Builder(), *f.entry_block.arguments)
                func.ReturnOp([])
        assert module.operation.verify()
        verify(module.operation)
        built = {op.operation.name[3:] for op in f.entry_block.operations
                 if op.operation.name.startswith("dg.")}
    assert built == set(OPS)


def test_builder_rejects_bad_shapes_naming_the_op():
    with make_context(), ir.Location.unknown():
        module = ir.Module.create()
        with ir.InsertionPoint(module.body):
            f = func.FuncOp("bad", ([F.to_mlir(), TensorSpec((3,), "f32").to_mlir()], []))
            with ir.InsertionPoint(f.add_entry_block()):
                x, y = f.entry_block.arguments
                with pytest.raises(ShapeError, match="dg.add"):
                    Builder().add(x, y)


def test_verifier_error_is_located_and_mlir_styled():
    src = ('func.func @f(%a: tensor<4xf32>, %b: tensor<3xf32>) {\n'
           '  %0 = "dg.mul"(%a, %b) : (tensor<4xf32>, tensor<3xf32>) -> tensor<4xf32>\n'
           '  return\n}\n')
    with make_context():
        module = ir.Module.parse(src)
        with pytest.raises(VerifyError) as info:
            verify(module.operation)
    assert str(info.value).startswith("'dg.mul' op operand #1 has shape [3]")
    loc = info.value.location
    assert (loc.start_line, loc.start_col) == (2, 8)


# shape-rule branches that IR cannot reach: the builder calls rules without a hint
@pytest.mark.parametrize("name,ins,attrs", [
    ("convert", [F], {}), ("broadcast_in_dim", [F], {"dims": (0, 1)}), ("reshape", [F], {}),
    ("full", [], {"value": 1.0}), ("iota", [], {"dim": 0}), ("rng_uniform", [TensorSpec((), "i64")], {}),
])
def test_rules_needing_a_result_type_say_so(name, ins, attrs):
    with pytest.raises(ShapeError, match=f"dg.{name} needs the result"):
        OPS[name].shape(ins, attrs, None, op=name)


def test_tensor_spec():
    s = TensorSpec([2, 3], "f32")
    assert s.shape == (2, 3) and s.rank == 2 and s.numel == 6 and s.nbytes == 24
    assert str(s) == "tensor<2x3xf32>" and str(TensorSpec((), "i1")) == "tensor<i1>"
    assert s.with_dtype("i64") == TensorSpec((2, 3), "i64")
    assert s.with_shape([6]) == TensorSpec((6,), "f32")
    assert TensorSpec.of(torch.zeros(4, dtype=torch.bfloat16)) == TensorSpec((4,), "bf16")
    with pytest.raises(TypeError, match="unknown dtype"):
        TensorSpec((1,), "f8")
    with make_context(), ir.Location.unknown():
        assert TensorSpec.from_mlir(s.to_mlir()) == s
        with pytest.raises(TypeError, match="need their sizes as the type's encoding"):
            TensorSpec.from_mlir(ir.Type.parse("tensor<?xf32>"))
        with pytest.raises(TypeError, match="unsupported element type"):
            TensorSpec.from_mlir(ir.Type.parse("tensor<2xui8>"))


def test_symbolic_tensor_spec():
    s0, s1 = abi.symbol("s0"), abi.symbol("s1")
    s = TensorSpec((s0, 4, 2 * s1), "f32")
    assert not s.is_static and s.numel == 8 * s0 * s1
    assert str(s) == 'tensor<?x4x?xf32, "s0, 2*s1">'
    assert s.hinted({"s0": 3}) == TensorSpec((3, 4, 2 * DEFAULT_SIZE_HINT), "f32")
    assert abi.TensorSig.from_json(s.to_json()) == abi.TensorSig(s.shape, "f32")
    with make_context(), ir.Location.unknown():
        assert str(s.to_mlir()) == str(s)
        assert TensorSpec.from_mlir(s.to_mlir()) == s
        for bad, why in [('tensor<?x4xf32, "s0, s1">', "2 sizes in the encoding for 1"),
                         ('tensor<?xf32, "x + 1">', "bad symbolic size"),
                         ('tensor<?xf32, "s0/2">', "integer expression")]:
            with pytest.raises(TypeError, match=why):
                TensorSpec.from_mlir(ir.Type.parse(bad))


def test_bind_sizes():
    s0, s1 = abi.symbol("s0"), abi.symbol("s1")
    assert abi.bind_sizes([(s0, 4), (4 * s1 + 1,)], [(3, 4), (9,)]) == {"s0": 3, "s1": 2}
    assert abi.bind_sizes([(s0 * s1,)], [(6,)], known={"s0": 2}) == {"s0": 2, "s1": 3}
    with pytest.raises(abi.SizeMismatch, match="x: dim 0 has size 4, expected s0 = 3"):
        abi.bind_sizes([(s0,), (s0,)], [(3,), (4,)], names=["w", "x"])
    with pytest.raises(abi.SizeMismatch, match=r"leaves size 2\*s0 \+ s1 unknown"):
        abi.bind_sizes([(2 * s0 + s1,)], [(7,)])


def test_viewing_dg_ops_does_not_search_for_a_dialect_module(monkeypatch):
    """The bindings import `mlir.dialects.<namespace>` before building an op's Python
    view, remembering only successes: without a dg module every `.owner` of a dg value
    went through the import machinery (most of dg-fuse's time on large graphs)."""
    import sys

    searched = []

    class Recorder:
        def find_spec(self, name, path=None, target=None):
            searched.append(name)
            return None
    monkeypatch.setattr(sys, "meta_path", [Recorder(), *sys.meta_path])
    with make_context(), ir.Location.unknown():
        module = ir.Module.parse("""
          func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
            %0 = "dg.exp"(%x) : (tensor<4xf32>) -> tensor<4xf32>
            %1 = "dg.neg"(%0) : (tensor<4xf32>) -> tensor<4xf32>
            return %1 : tensor<4xf32>
          }""")
        block = module.body.operations[0].regions[0].blocks[0]
        for op in block.operations:
            for v in op.operands:
                _ = v.owner
    assert "mlir.dialects.dg" not in searched


def test_erase_if_unused_erases_shared_producers_once():
    """A producer read twice (x * x) or by two erased ops (e, by neg(e) and the add)."""
    with make_context(), ir.Location.unknown():
        m = ir.Module.parse("""
func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
  %e = "dg.exp"(%x) : (tensor<4xf32>) -> tensor<4xf32>
  %n = "dg.neg"(%e) : (tensor<4xf32>) -> tensor<4xf32>
  %a = "dg.add"(%n, %e) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %m = "dg.mul"(%a, %a) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %kept = "dg.sin"(%x) : (tensor<4xf32>) -> tensor<4xf32>
  return %kept : tensor<4xf32>
}""")
        block = list(m.body.operations)[0].regions[0].blocks[0]
        erase_if_unused(list(block.operations)[3])
        assert [o.operation.name for o in block.operations] == ["dg.sin", "func.return"]
