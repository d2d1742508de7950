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

dg-split-shared-empties: `cse` also merges the `tensor.empty`s that ops of one
shape write into, and one-shot bufferization analyses every pair of ops writing
into one buffer: on a GRU unrolled over 64 time steps (1800 ops writing into
shared empties) bufferizing the backward took 26 s, growing with the square of
the graph's length. Each empty now serves at most `uses-per-empty` consecutive
users, clones serving the rest: a few neighbours still share (an op written in
place over the input it consumes: no extra temporary), and the analysis stays
linear (the GRU's backward: under 1 s).
"""
from __future__ import annotations

from mlir import ir

from ...passes import PassError


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


def split_shared_fills(module: ir.Operation) -> None:
    fills: list[ir.Operation] = []

    def visit(op: ir.Operation) -> ir.WalkResult:
        if op.name == "linalg.fill" and isinstance(op.results[0].type, ir.RankedTensorType):
            fills.append(op)
        return ir.WalkResult.ADVANCE

    module.walk(visit)
    for fill in fills:
        split_fill(fill)


USES_PER_EMPTY = 8


def split_empties(func_op: ir.Operation, uses_per_empty: int) -> int:
    """Clones of each tensor.empty in `func_op` so that each serves at most
    `uses_per_empty` users, consecutive in program order; the clones sit next to the
    original (dominating every use). Returns how many were made."""
    users: dict[ir.Operation, list[tuple[ir.Operation, int]]] = {}

    def visit(op: ir.Operation) -> ir.WalkResult:  # pre-order: users in program order
        for number, operand in enumerate(op.operands):
            owner = operand.owner
            if not isinstance(owner, ir.Block) and owner.operation.name == "tensor.empty":
                users.setdefault(owner.operation, []).append((op, number))
        return ir.WalkResult.ADVANCE

    func_op.walk(visit, ir.WalkOrder.PRE_ORDER)
    made = 0
    for empty, uses in users.items():
        for group in _groups(uses, uses_per_empty)[1:]:
            with ir.InsertionPoint(empty):
                clone = empty.clone()
            for user, number in group:
                user.operands[number] = clone.results[0]
            made += 1
    return made


def _groups(uses: list, size: int) -> list[list]:
    """`uses` in runs of `size`; a run goes on past that while each user reads the previous
    one's result (which may then be written in place: a chain of ops over one buffer)."""
    groups: list[list] = [[]]
    for user, number in uses:
        last = groups[-1]
        if len(last) >= size and not any(v in list(last[-1][0].results) for v in user.operands):
            groups.append([])
        groups[-1].append((user, number))
    return groups


def split_shared_empties(module: ir.Operation, uses_per_empty: int = USES_PER_EMPTY) -> None:
    if uses_per_empty < 1:
        raise PassError(f"uses-per-empty must be at least 1, not {uses_per_empty}")
    split_empties(module, uses_per_empty)
