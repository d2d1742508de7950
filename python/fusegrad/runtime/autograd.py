"""A compiled forward/backward pair as one autograd node (importable without MLIR).

`CompiledFunction` runs `@f_fwd` in the forward and `@f_bwd` on what it saved in
the backward. The values `@f_fwd` saves are held by `save_for_backward`, so they
are freed after the backward and `retain_graph=True` works. A backward that is
itself differentiated (`create_graph=True`) calls `again(inputs, cotangents)`
instead, which must compute the gradients with ops autograd records: the
compiler passes its joint `@f_vjp` there; a loaded artifact, which holds no
joint, passes None and such a backward raises. Both `fusegrad.compile` and
`runtime.exported` run training through here.

An output the loss does not read gets no gradient (autograd's zeros are not
materialized). The compiler's backward is compiled at the first backward, for the
outputs that got a gradient there (a language model's loss, not its logits: no
work for the logits' zero cotangent, and no backward compiled that is never run);
a later backward with other outputs missing runs a compiled backward that takes
zeros for them, or one compiled for them from `SPECIALIZE_MIN_BYTES` of zeros on.
An input that only such outputs depend on gets None, as in eager (a parameter of
an unused head keeps `.grad` None, so an optimizer skips it: no weight decay, no
momentum step), not the zeros the compiled backward computes for it.
"""
from __future__ import annotations

import functools
import logging
from dataclasses import dataclass, field
from typing import Callable, Protocol, Sequence

import torch

log = logging.getLogger(__name__)


class Executable(Protocol):
    """A compiled function of tensors (`runtime.cpu.CpuFunction`, a CUDA plan function, ...)."""

    def __call__(self, *tensors: torch.Tensor) -> list[torch.Tensor]: ...


@dataclass
class Training:
    """Compiled `@f_fwd(inputs) -> (outputs, saved)` and `@f_bwd(saved, cts) -> grads`
    (one gradient per `wrt` input, from the cotangents of the `ct_outputs`).

    `reached_by`: per wrt input, the outputs whose cotangents reach its gradient (None:
    unknown, every gradient is returned). `compile_backward(missing)`: `@f_bwd` for zero
    cotangents of the outputs `missing`, taking the others only (`()`: all of them);
    None where the backwards are all given (a loaded artifact: `backwards[()]`)."""

    fwd: Executable
    num_outputs: int
    wrt: tuple[int, ...]
    ct_outputs: tuple[int, ...]
    reached_by: tuple[tuple[int, ...], ...] | None = None
    compile_backward: Callable[[tuple[int, ...]], Executable] | None = None
    backwards: dict[tuple[int, ...], Executable] = field(default_factory=dict, repr=False)
    _kept: dict = field(default_factory=dict, repr=False)
    _failed: set = field(default_factory=set, repr=False)  # `missing` that did not compile
    # per `missing`, the key of the backward `backward_for` took for it
    _chosen: dict = field(default_factory=dict, repr=False)

    @functools.cached_property
    def reached_outputs(self) -> frozenset[int] | None:
        """The outputs some wrt input reaches (None: unknown); the others do not require
        grad, as in eager."""
        return None if self.reached_by is None else frozenset().union(*self.reached_by)

    def kept_gradients(self, missing: tuple[int, ...]) -> tuple[bool, ...]:
        """Per wrt input, whether an output with a gradient (not in `missing`) reaches it:
        the others get None, as in eager (memoized: a step's pattern repeats)."""
        if missing not in self._kept:
            self._kept[missing] = (
                (True,) * len(self.wrt) if self.reached_by is None else
                tuple(any(o not in missing for o in outputs) for outputs in self.reached_by))
        return self._kept[missing]

    @staticmethod
    def from_metadata(fwd: Executable, meta: dict, bwd: Executable | None = None,
                      compile_backward: Callable[[tuple[int, ...]], Executable] | None = None,
                      ) -> "Training":
        """From the compiler's JSON metadata of the pair (`reached_by` is absent from
        artifacts exported before it was recorded), with the full backward `bwd` or a
        `compile_backward`."""
        reached_by = meta.get("reached_by")
        return Training(fwd, int(meta["num_outputs"]), tuple(meta["wrt"]),
                        tuple(meta["ct_outputs"]),
                        None if reached_by is None else tuple(map(tuple, reached_by)),
                        compile_backward, {} if bwd is None else {(): bwd})

    @property
    def bwd(self) -> Executable:
        """The backward taking every cotangent (compiled on first use)."""
        return self.backward_for(())[1]

    def backward_for(self, missing: tuple[int, ...],
                     nbytes: Callable[[set[int]], int] = lambda outputs: 0,
                     ) -> tuple[tuple[int, ...], Executable]:
        """`(skipped, bwd)` for a backward whose outputs `missing` got no gradient: `bwd`
        takes the cotangents of the ct_outputs not in `skipped` (a subset of `missing`),
        zeros for the rest of `missing`. The one compiled for the most zeros is taken;
        `bwd` is compiled for `missing` when there is none, or when it leaves
        `nbytes(outputs) >= SPECIALIZE_MIN_BYTES` of zeros. That is decided at the
        first backward of each `missing` and kept: a program of symbolic sizes would
        otherwise compile again in mid-run, when a longer sequence passes the bytes."""
        if missing in self._chosen:  # a step's pattern repeats
            best = self._chosen[missing]
            return best, self.backwards[best]
        taken = set(missing)
        usable = [k for k in self.backwards if taken.issuperset(k)]
        best = max(usable, key=lambda k: nbytes(set(k)), default=None)
        if self.compile_backward is not None and missing not in self._failed and (
                best is None or taken != set(best)
                and nbytes(taken - set(best)) >= SPECIALIZE_MIN_BYTES):
            try:
                self.backwards[missing] = self.compile_backward(missing)
                best = missing
            except Exception as e:  # the full backward, with zeros, still computes them
                if not missing:
                    raise
                self._failed.add(missing)
                log.warning("compiling the backward for outputs %s without gradient failed "
                            "(%s: %s); the full backward runs, with zeros for them",
                            list(missing), type(e).__name__, e)
                if () not in self.backwards:
                    self.backwards[()] = self.compile_backward(())
                best = ()
        if best is None:
            raise RuntimeError("fusegrad: no backward for outputs without gradient "
                               f"{list(missing)} and none to compile it")
        self._chosen[missing] = best
        return best, self.backwards[best]


# zeros for outputs without gradient from which a backward is compiled without them when
# a compiled one could take them: the fill and the pass reading them cost ~0.1 ms per MiB
# and step; a classifier's logits (MobileNetV2: 32 KiB) do not pay for a second compile of
# its backward (6.8 s)
SPECIALIZE_MIN_BYTES = 1 << 20

# (inputs, cotangents of the ct_outputs, None where an output got no gradient) -> gradients
# of the wrt inputs, recorded by autograd
DifferentiableBackward = Callable[[Sequence[torch.Tensor], Sequence[torch.Tensor | None]],
                                  Sequence[torch.Tensor]]


def fresh_seed(device: torch.device | str = "cpu") -> torch.Tensor:
    """A 0-d i64 seed for a program's random ops, from torch's default generator (so
    torch.manual_seed governs it)."""
    return torch.randint(-2**63, 2**63 - 1, (), dtype=torch.int64, device=device)


def unaliased(outputs: Sequence[torch.Tensor], inputs: Sequence[torch.Tensor]) -> list[torch.Tensor]:
    """Outputs never alias inputs (an executable hands back an input it returns)."""
    ptrs = {x.untyped_storage().data_ptr() for x in inputs if x.numel()}
    return [o.clone() if o.numel() and o.untyped_storage().data_ptr() in ptrs else o
            for o in outputs]


class CompiledFunction(torch.autograd.Function):
    """`apply(training, mutated, recorded, again, name, sizes, *inputs)`: the outputs of
    `training.fwd`.

    `mutated`: inputs the caller overwrites with the first outputs right after
    the call; the inputs are kept by value, and those outputs are constants to
    autograd except the `recorded` ones (indices into `mutated`: the caller's copy
    is recorded). `again`: see the module docstring (None: no double backward,
    and the error names `name`). `sizes`: values of sizes the inputs do not show (integer
    inputs that are sizes of their own), or None.
    """

    @staticmethod
    def forward(ctx, training: Training, mutated: tuple[int, ...], recorded: tuple[int, ...],
                again: DifferentiableBackward | None, name: str, sizes: dict[str, int] | None,
                *inputs: torch.Tensor) -> tuple[torch.Tensor, ...]:
        t = training
        results = t.fwd(*inputs) if sizes is None else t.fwd(*inputs, sizes=sizes)
        # a program of symbolic sizes: its backward takes the values bound here (those its
        # own arguments may not show, as a scalar loss's cotangent does not)
        sizes_of = getattr(t.fwd, "sizes_of", None)
        ctx.sizes = None if sizes_of is None else \
            sizes_of(inputs) if sizes is None else sizes_of(inputs, sizes)
        outputs = unaliased(results[:t.num_outputs], inputs)
        saved = unaliased(results[t.num_outputs:], [inputs[i] for i in mutated])
        # a second differentiation needs the inputs; inputs overwritten next are kept by value
        kept = ([x.clone() if i in mutated else x for i, x in enumerate(inputs)]
                if again is not None else [])
        ctx.save_for_backward(*saved, *kept)
        ctx.training, ctx.again, ctx.name = t, again, name
        ctx.num_saved, ctx.num_inputs = len(saved), len(inputs)
        # an output the loss does not read gets no gradient: None, not zeros (backward)
        ctx.set_materialize_grads(False)
        ctx.output_specs = [(o.shape, o.dtype, o.device) for o in outputs]
        # as in eager, an output no input requiring grad reaches does not require grad
        # (an empty one stays differentiable: its computation may have folded away, and
        # eager's batch of 0 still ends in a loss that backward() takes)
        reached = t.reached_outputs
        ctx.mark_non_differentiable(*(o for i, o in enumerate(outputs) if not o.is_floating_point()
                                      or (i < len(mutated) and i not in recorded)
                                      or (reached is not None and i not in reached
                                          and o.numel())))
        return tuple(outputs)

    @staticmethod
    # torch.autograd.grad called inside a compiled function runs eagerly (a graph break)
    # with Dynamo's frame hook still on: it would trace this backward and the compiler
    # it calls for a second differentiation
    @torch.compiler.disable
    def backward(ctx, *cotangents: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        tensors = ctx.saved_tensors  # raises on a second backward without retain_graph
        t: Training = ctx.training
        missing = tuple(i for i in t.ct_outputs if cotangents[i] is None)
        if missing == t.ct_outputs:  # no gradient reached any output: all zero
            return (None,) * (6 + ctx.num_inputs)
        if torch.is_grad_enabled():
            if ctx.again is None:
                raise RuntimeError(
                    f"fusegrad: backward with create_graph=True through {ctx.name} is not "
                    "available: its inputs were not kept for a second differentiation "
                    "(compile with double_backward=True; an exported artifact has none)")
            grads = ctx.again(tensors[ctx.num_saved:],
                              [None if cotangents[i] is None else cotangents[i].contiguous()
                               for i in t.ct_outputs])
        else:
            skipped, bwd = t.backward_for(
                missing, lambda outputs: sum(_nbytes(ctx.output_specs[i]) for i in outputs))
            cts = [_zeros(ctx.output_specs[i]) if cotangents[i] is None
                   else cotangents[i] for i in t.ct_outputs if i not in skipped]
            grads = _per_sample(functools.partial(bwd, *tensors[:ctx.num_saved]) if ctx.sizes is None
                                else functools.partial(bwd, *tensors[:ctx.num_saved],
                                                       sizes=ctx.sizes), cts)
        full: list[torch.Tensor | None] = [None] * ctx.num_inputs
        for i, g, kept in zip(t.wrt, grads, t.kept_gradients(missing)):
            if kept:
                full[i] = g
        return (None, None, None, None, None, None, *full)


def _per_sample(backward: Callable[..., list[torch.Tensor]],
                cts: list[torch.Tensor]) -> list[torch.Tensor]:
    """`backward(*cts)`, also when the cotangents are batched by a vmap over the backward
    (`torch.autograd.grad(..., is_grads_batched=True)` and `jacobian(...,
    vectorize=True)` batch them with PyTorch's legacy vmap, `torch.func` with functorch's):
    compiled code takes plain tensors, so the batch runs one sample at a time and the
    gradients are batched again."""
    functorch = torch._C._functorch
    if any(functorch.is_batchedtensor(ct) for ct in cts):
        level = max(functorch.maybe_get_level(ct) for ct in cts if functorch.is_batchedtensor(ct))
        physical = [functorch.get_unwrapped(ct).movedim(functorch.maybe_get_bdim(ct), 0)
                    if functorch.is_batchedtensor(ct) and functorch.maybe_get_level(ct) == level
                    else None for ct in cts]
        def rebatch(t: torch.Tensor) -> torch.Tensor:
            return functorch._add_batch_dim(t, 0, level)
        sample = functools.partial(_per_sample, backward)  # lower levels are batched still
    elif any(functorch.is_legacy_batchedtensor(ct) for ct in cts):
        level = torch._C._vmapmode_increment_nesting() - 1  # the innermost legacy vmap
        torch._C._vmapmode_decrement_nesting()
        physical = [torch._remove_batch_dim(ct, level, 1, 0)
                    if functorch.is_legacy_batchedtensor(ct) else None for ct in cts]
        def rebatch(t: torch.Tensor) -> torch.Tensor:
            return torch._add_batch_dim(t, 0, level)
        def sample(c: list[torch.Tensor]) -> list[torch.Tensor]:
            return backward(*(ct.contiguous() for ct in c))
    else:
        return backward(*(ct.contiguous() for ct in cts))
    size = next(p for p in physical if p is not None).shape[0]
    samples = [sample([ct if p is None else p[b] for ct, p in zip(cts, physical)])
               for b in range(size)]
    return [rebatch(torch.stack(grads)) for grads in zip(*samples)]


def _nbytes(spec: tuple[torch.Size, torch.dtype, torch.device]) -> int:
    shape, dtype, _ = spec
    return shape.numel() * dtype.itemsize


def _zeros(spec: tuple[torch.Size, torch.dtype, torch.device]) -> torch.Tensor:
    shape, dtype, device = spec
    return torch.zeros(shape, dtype=dtype, device=device)
