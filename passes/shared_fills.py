"""dg-split-shared-fills: each op that accumulates into a filled tensor gets its own fill.

`cse` merges equal `linalg.fill`s on tensors: every reduction of one shape
starts from the same zero tensor. Bufferization must then keep that tensor
intact for the others, so it fills one buffer and copies it into each
reduction's output: HF GPT-2's training graph made 69 such copies per step
(one 8x128 zero tensor copied nine times, a 1024x256 one three times), and on
the GPU each is a kernel launch. With a fill per accumulating op, each fills
its own output in place (and a zero fill feeding a GPU matmul is dropped).
Convolutions' zero paddings (a fill, then the input inserted into its interior)
split the same way: a copied padding is not one dg-conv-to-torch can leave to
the library.
"""
from __future__ import annotations

from mlir import ir

from .registry import register_pass


def _inits(op: ir.Operation) -> list[ir.Value]:
    """The operands `op` writes in place (a linalg op's outputs, the destination of a
    tensor.insert_slice: a convolution's zero padding), else none."""
    if op.name == "tensor.insert_slice":
        return [op.operands[1]]
    if not op.name.startswith("linalg.") or not hasattr(op.opview, "outputs"):
        return []
    return list(op.opview.outputs)


def split_fill(fill: ir.Operation) -> int:
    """Give every op accumulating into `fill`'s result its own copy of `fill`, placed just
    before it, when the result has more than one use. Returns how many were made."""
    result = fill.results[0]
    uses = [(u.owner.operation, u.operand_number) for u in result.uses]
    if len(uses) < 2:
        return 0
    made = 0
    for user, number in uses:
        if result not in _inits(user):
            continue
        init = fill.operands[len(fill.operands) - 1]
        with ir.InsertionPoint(user):
            # a padding gets a buffer of its own: on a shared empty's buffer, one-shot
            # bufferization fills it again for each padding after the previous one's conv
            # (reductions keep sharing: bufferization then packs their buffers tighter)
            empty = init.owner.operation.clone() if user.name == "tensor.insert_slice" and \
                not isinstance(init.owner, ir.Block) and \
                init.owner.operation.name == "tensor.empty" else None
            clone = fill.clone()
            if empty is not None:
                clone.operands[len(fill.operands) - 1] = empty.results[0]
        user.operands[number] = clone.results[0]
        made += 1
    if not list(result.uses):
        init = fill.operands[len(fill.operands) - 1]
        fill.erase()
        if not isinstance(init.owner, ir.Block) and not list(init.uses):
            init.owner.operation.erase()  # the shared tensor.empty
    return made


@register_pass("dg-split-shared-fills",
               "clone a linalg.fill on tensors for each op that accumulates into it "
               "(before bufferization: no shared zero buffer copied into every reduction)")
def split_shared_fills(module: ir.Operation) -> None:
    fills: list[ir.Operation] = []

    def visit(op: ir.Operation) -> ir.WalkResult:
        if op.name == "linalg.fill" and isinstance(op.results[0].type, ir.RankedTensorType):
            fills.append(op)
        return ir.WalkResult.ADVANCE

    module.walk(visit)
    for fill in fills:
        split_fill(fill)
