"""Function transforms compiled end to end: grad, value_and_grad, vjp, jvp, hvp, hessian.

Each traces the function of tensors with make_fx (capture), imports it into
dg once per input signature (shapes and dtypes), and derives what it needs
with the dg passes: `grad` runs the joint `@f_vjp` (dg-autodiff joint=true),
`vjp` the `@f_fwd`/`@f_bwd` pair, `jvp` `@f_jvp` (dg-jvp), and `hvp`/`hessian`
forward-over-reverse (dg-jvp applied to `@f_vjp`). Results go through
`run_program`, so they are differentiable by torch.autograd in turn.

Options are keywords, as `fusegrad.compile` takes them (`fusegrad.grad(f, fusion=False)`);
`options=CompileOptions(...)` is accepted too, but not together with keywords.
"""
from __future__ import annotations

import dataclasses
import weakref
from typing import Any, Callable, Sequence

import torch

from .autograd_function import run_program, with_seed
from .frontend.capture import Captured, capture, read_from_outside
from .devices import select_target
from .program import CompileOptions, Program
from .runtime.autograd import unaliased

Argnums = int | tuple[int, ...]

_CACHE: "weakref.WeakKeyDictionary[Callable, dict]" = weakref.WeakKeyDictionary()

OPTION_NAMES = tuple(f.name for f in dataclasses.fields(CompileOptions))


def compile_options(where: str, options: CompileOptions | None,
                    keywords: dict[str, Any]) -> CompileOptions | None:
    """The CompileOptions of a call of `fusegrad.<where>`: its option keywords (those of
    `fusegrad.compile`, the fields of CompileOptions), or `options=` (the older style),
    not both."""
    unknown = sorted(set(keywords) - set(OPTION_NAMES))
    if unknown:
        raise TypeError(f"fusegrad.{where}: unknown option(s) {', '.join(unknown)}; the "
                        f"options are {', '.join(OPTION_NAMES)}")
    if options is not None and not isinstance(options, CompileOptions):
        raise TypeError(f"fusegrad.{where}: options= takes a fusegrad.CompileOptions, got a "
                        f"{type(options).__name__}; or pass the options as keywords")
    if options is not None and keywords:
        raise TypeError(f"fusegrad.{where}: pass options as keywords ({', '.join(keywords)}=...) "
                        "or as options=CompileOptions(...), not both")
    return CompileOptions(**keywords) if keywords else options


class _Traced:
    """`fn` captured and imported for one input signature."""

    def __init__(self, fn: Callable[..., Any], args: Sequence[torch.Tensor],
                 options: CompileOptions) -> None:
        self.captured: Captured = capture(fn, args)
        if self.captured.mutated:
            raise ValueError(f"fusegrad: {getattr(fn, '__name__', fn)} mutates its inputs "
                             f"{list(self.captured.mutated)} in place; function transforms "
                             "need pure functions")
        self.program = Program.from_graph(self.captured.gm, options,
                                          label=getattr(fn, "__name__", "fn").strip("<>"))

    def inputs(self, args: Sequence[torch.Tensor]) -> list[torch.Tensor]:
        """The program's inputs for `args`: the tensors `fn` closes over (`lifted`) first,
        a fresh seed last where the program takes one."""
        return with_seed(self.program, [*self.captured.lifted, *args])

    def positions(self, argnums: Sequence[int]) -> tuple[int, ...]:
        """The program input positions of arguments `argnums`."""
        return tuple(len(self.captured.lifted) + i for i in argnums)


def _traced(fn: Callable[..., Any], args: Sequence[torch.Tensor],
            options: CompileOptions | None) -> _Traced:
    """The cached `_Traced` of `fn` for the shapes/dtypes of `args`."""
    for i, a in enumerate(args):
        if not isinstance(a, torch.Tensor):
            raise TypeError(f"fusegrad: argument {i} is a {type(a).__name__}; function transforms "
                            "take tensors (close over other values)")
    options = options or CompileOptions()
    options = options.with_(target=select_target(
        options.target, [(f"argument {i}", a) for i, a in enumerate(args)]))
    key = (options, tuple((tuple(a.shape), a.dtype) for a in args), _outside_tensors(fn))
    per_fn = _CACHE.setdefault(fn, {})
    if key not in per_fn:
        per_fn[key] = _Traced(fn, args, options)
    return per_fn[key]


def _outside_tensors(fn: Callable[..., Any]) -> tuple[int, ...]:
    """The identities of the tensors and modules `fn` names from outside: part of the
    trace's key, so that rebinding such a name traces anew (`_lift_closed_over` passes
    the traced objects themselves)."""
    return tuple(id(value) for _, _, _, value in read_from_outside(fn)
                 if isinstance(value, (torch.Tensor, torch.nn.Module)))


def _argnums(argnums: Argnums, nargs: int) -> tuple[int, ...]:
    nums = (argnums,) if isinstance(argnums, int) else tuple(argnums)
    for i in nums:
        if not 0 <= i < nargs:
            raise ValueError(f"fusegrad: argnums {argnums} out of range for {nargs} arguments")
    return nums


def _pick(argnums: Argnums, values: Sequence[torch.Tensor]) -> Any:
    return values[0] if isinstance(argnums, int) else tuple(values)


def _output_specs(t: _Traced) -> list[torch.Tensor]:
    return [n.meta["val"] for n in t.captured.gm.graph.output_node().args[0]]


def _scalar_output(t: _Traced, what: str) -> None:
    specs = _output_specs(t)
    if len(specs) != 1 or specs[0].numel() != 1 or not specs[0].is_floating_point():
        raise ValueError(f"fusegrad.{what}: the function must return one floating-point scalar "
                         f"tensor, got {[(tuple(s.shape), s.dtype) for s in specs]}")


def _ones_like_output(t: _Traced) -> torch.Tensor:
    """The cotangent 1 for a scalar-valued function."""
    (out,) = _output_specs(t)
    return torch.ones(out.shape, dtype=out.dtype)


def value_and_grad(fn: Callable[..., torch.Tensor], argnums: Argnums = 0, *,
                   options: CompileOptions | None = None,
                   **compile_kw: Any) -> Callable[..., tuple[torch.Tensor, Any]]:
    """`(*args) -> (fn(*args), d fn / d args[argnums])` for scalar-valued `fn`.
    Options as keywords (`fusion=False`, as `fusegrad.compile` takes them)."""
    options = compile_options("value_and_grad", options, compile_kw)

    def run(*args: torch.Tensor) -> tuple[torch.Tensor, Any]:
        t = _traced(fn, args, options)
        _scalar_output(t, "grad")
        joint = t.program.joint(t.positions(_argnums(argnums, len(args))))
        value, *grads = run_program(joint, [*t.inputs(args), _ones_like_output(t)])
        return value, _pick(argnums, grads)
    return run


def grad(fn: Callable[..., torch.Tensor], argnums: Argnums = 0, *,
         options: CompileOptions | None = None, **compile_kw: Any) -> Callable[..., Any]:
    """`(*args) -> d fn / d args[argnums]` for scalar-valued `fn` (like torch.func.grad).
    Options as keywords (`fusion=False`, as `fusegrad.compile` takes them)."""
    vg = value_and_grad(fn, argnums, options=compile_options("grad", options, compile_kw))
    return lambda *args: vg(*args)[1]


def vjp(fn: Callable[..., Any], *primals: torch.Tensor, options: CompileOptions | None = None,
        **compile_kw: Any) -> tuple[Any, Callable[..., tuple]]:
    """`(fn(*primals), vjp_fn)`; `vjp_fn(cotangents)` returns one gradient per primal.

    The forward runs the compiled `@f_fwd`; `vjp_fn` runs `@f_bwd` on its saved
    values. Cotangents have `fn`'s output structure (its float outputs).
    """
    t = _traced(fn, primals, options)
    wrt = tuple(i for i, p in enumerate(primals) if p.is_floating_point())
    training = t.program.training(t.positions(wrt))
    with torch.no_grad():
        results = training.fwd(*t.inputs(primals))
    outputs = unaliased(results[:training.num_outputs], primals)
    saved = results[training.num_outputs:]

    def vjp_fn(cotangents: Any) -> tuple[torch.Tensor | None, ...]:
        cts, _ = torch.utils._pytree.tree_flatten(cotangents)
        if len(cts) != len(training.ct_outputs):
            raise ValueError(f"fusegrad.vjp: expected {len(training.ct_outputs)} cotangents "
                             f"(one per floating-point output), got {len(cts)}")
        with torch.no_grad():
            grads = training.bwd(*saved, *(c.contiguous() for c in cts))
        full: list[torch.Tensor | None] = [None] * len(primals)
        for i, g in zip(wrt, grads):
            full[i] = g
        return tuple(full)
    return t.captured.rebuild(outputs), vjp_fn


def jvp(fn: Callable[..., Any], primals: Sequence[torch.Tensor] | torch.Tensor,
        tangents: Sequence[torch.Tensor] | torch.Tensor, *,
        options: CompileOptions | None = None, **compile_kw: Any) -> tuple[Any, Any]:
    """`(fn(*primals), J @ tangents)` by forward mode (dg-jvp), like torch.func.jvp
    (one tensor stands for a tuple of one).

    Non-floating-point outputs get zero tangents.
    """
    primals, tangents, _ = _primals_and_tangents("jvp", primals, tangents)
    t = _traced(fn, primals, compile_options("jvp", options, compile_kw))
    wrt = tuple(i for i, p in enumerate(primals) if p.is_floating_point())
    program = t.program.jvp(t.positions(wrt))
    results = run_program(program, [*t.inputs(primals), *(tangents[i].contiguous() for i in wrt)])
    n = t.program.num_results
    outputs, out_tangents = results[:n], iter(results[n:])
    full = [next(out_tangents) if o.is_floating_point() else torch.zeros_like(o) for o in outputs]
    return t.captured.rebuild(outputs), t.captured.rebuild(full)


def hvp(fn: Callable[..., torch.Tensor], primals: Sequence[torch.Tensor] | torch.Tensor,
        tangents: Sequence[torch.Tensor] | torch.Tensor, *,
        options: CompileOptions | None = None, **compile_kw: Any) -> tuple[torch.Tensor, Any]:
    """`(fn(*primals), H @ tangents)` for scalar `fn`: forward-over-reverse
    (dg-jvp of the joint `@f_vjp`), like torch.autograd.functional.hvp: `primals` and
    `tangents` are both tensors (`hvp(f, x, v)`: the product is a tensor) or both
    sequences of tensors (a tuple of products, None for a non-float primal)."""
    primals, tangents, single = _primals_and_tangents("hvp", primals, tangents)
    t = _traced(fn, primals, compile_options("hvp", options, compile_kw))
    _scalar_output(t, "hvp")
    wrt = tuple(i for i, p in enumerate(primals) if p.is_floating_point())
    fwd_over_rev = t.program.joint(t.positions(wrt)).jvp(t.positions(wrt))
    results = run_program(fwd_over_rev, [*t.inputs(primals), _ones_like_output(t),
                                         *(tangents[i].contiguous() for i in wrt)])
    # results: value, grads..., then the tangents of (value, grads...)
    hvps = dict(zip(wrt, results[-len(wrt):]))
    if single:
        return results[0], hvps.get(0)
    return results[0], tuple(hvps.get(i) for i in range(len(primals)))


def _primals_and_tangents(what: str, primals: Any, tangents: Any
                          ) -> tuple[tuple[torch.Tensor, ...], tuple[torch.Tensor, ...], bool]:
    """`primals` and `tangents` as tuples, and whether both were one tensor; raises a
    TypeError or ValueError saying what to pass."""
    single = isinstance(primals, torch.Tensor)
    if single != isinstance(tangents, torch.Tensor) or \
            not single and not all(isinstance(x, (tuple, list)) for x in (primals, tangents)):
        raise TypeError(f"fusegrad.{what}: pass primals and tangents alike, both tensors "
                        f"({what}(f, x, v)) or both tuples of tensors ({what}(f, (x, y), "
                        f"(v, w))); got a {type(primals).__name__} and a "
                        f"{type(tangents).__name__}")
    primals, tangents = (primals,) if single else tuple(primals), \
        (tangents,) if single else tuple(tangents)
    if len(primals) != len(tangents):
        raise ValueError(f"fusegrad.{what}: {len(primals)} primals but {len(tangents)} tangents")
    for i, (p, v) in enumerate(zip(primals, tangents)):
        if not isinstance(p, torch.Tensor) or not isinstance(v, torch.Tensor):
            raise TypeError(f"fusegrad.{what}: primal and tangent #{i} must be tensors, got a "
                            f"{type(p).__name__} and a {type(v).__name__}")
        if p.is_floating_point() and v.shape != p.shape:
            raise ValueError(f"fusegrad.{what}: tangent #{i} has shape {tuple(v.shape)}, its "
                             f"primal {tuple(p.shape)}")
    return primals, tangents, single


def hessian(fn: Callable[..., torch.Tensor], argnums: int = 0, *,
            options: CompileOptions | None = None,
            **compile_kw: Any) -> Callable[..., torch.Tensor]:
    """`(*args) -> d2 fn / d args[argnums]^2`, shape `x.shape + x.shape`: one compiled
    Hessian-vector product per basis vector (fine for small inputs)."""
    options = compile_options("hessian", options, compile_kw)
    if not isinstance(argnums, int):
        raise TypeError("fusegrad.hessian: argnums must be one int")

    def run(*args: torch.Tensor) -> torch.Tensor:
        x = args[argnums]
        columns = []
        for i in range(x.numel()):
            e = torch.zeros(x.numel(), dtype=x.dtype)
            e[i] = 1
            tangents = [torch.zeros_like(a) if a.is_floating_point() else a for a in args]
            tangents[argnums] = e.reshape(x.shape)
            columns.append(hvp(fn, args, tangents, options=options)[1][argnums])
        return torch.stack(columns).reshape(*x.shape, *x.shape)
    return run
