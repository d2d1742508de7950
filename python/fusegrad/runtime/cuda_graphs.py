"""CUDA-graph replay of one compiled function (`CudaProgram(..., graphs=True)`).

A small model's step is bound by the host: each kernel launch, allocation and
library call issued from Python costs microseconds, often more than the GPU
spends on it. A graph captures the whole function once and replays it with one
call.

Semantics stay those of a plain call:
- the first call runs plainly (it loads the kernel modules and lets cuBLAS and
  cuDNN set up, which must not happen during a capture); the second captures;
- inputs that were at the same address in the two calls before a capture
  (parameters, buffers) are read in place: the graph holds them, and a call
  passing one at another address captures again, copying that input from then
  on; other inputs (a batch) are copied into the graph's own tensors on every
  call (one multi-tensor copy), so callers may free or reuse them;
- outputs are returned as fresh copies, so a later replay never overwrites a
  tensor the caller holds (forward residuals saved for a backward included),
  except outputs the plan forwards from inputs: those are the caller's inputs;
- inside someone else's capture (`torch.cuda.graph` around a compiled model) it
  runs plainly, and so is captured into theirs.

A function of symbolic sizes has one graph per binding of its sizes (a graph holds
fixed shapes and addresses), each with the bookkeeping above: the first call at a
binding runs plainly, the second captures. At most MAX_GRAPHS bindings get one, the
first ones that come; calls at others run plainly, as do, with graphs="auto", those
whose footprint at their sizes exceeds AUTO_GRAPH_MAX_BYTES. No graph is evicted: a
loop cycling through more shapes than the cap would then capture at nearly every call,
and a capture costs more than a plain call. Each graph keeps its memory (its
footprint at its sizes) while the program lives; bucket sizes to keep the count small.
"""
from __future__ import annotations

from typing import Any, Optional

import torch

# bindings of a function's sizes that get a CUDA graph (a static function has one)
MAX_GRAPHS = 8


class _Graph:
    """One binding's graph and what it reads: callers' tensors or its own copies."""

    def __init__(self) -> None:
        self.graph: Any = None
        self.inputs: list = []  # what the graph reads: callers' tensors, or its own copies
        self.copied: set[int] = set()  # inputs copied in on every call
        self.outputs: list = []  # the graph's outputs (overwritten by each replay)
        self.last: Optional[list[int]] = None  # the input addresses of the previous call


class GraphedFunction:
    """Function `name` of a `CudaProgram`, replayed from a CUDA graph after its first call
    at each binding of its sizes (`graphs`: binding -> its graph, or None where it runs
    plainly)."""

    def __init__(self, program: Any, name: str) -> None:
        self.program, self.name = program, name
        self.forwarded: dict[int, int] = program.plan.functions[name].forwarded
        self.returns_arguments = bool(self.forwarded)
        self.sizes_of = program.sizes_of(name)
        self.graphs: dict[tuple[int, ...], Optional[_Graph]] = {}

    def __call__(self, *inputs: Any, sizes: Optional[dict[str, int]] = None) -> list:
        if torch.cuda.is_current_stream_capturing():
            return self.program.run(self.name, *inputs, sizes=sizes)
        self.program.check_index_errors(wait=False)
        values = self.program.bind(self.name, inputs, sizes)  # checks the inputs
        g = self._graph(values)
        if g is None or g.last is None:
            outputs = self.program.run(self.name, *inputs, sizes=sizes)
            if g is not None:
                g.last = [x.data_ptr() for x in inputs]
            return outputs
        addresses = [x.data_ptr() for x in inputs]
        moved = {i for i, (a, x) in enumerate(zip(addresses, g.inputs))
                 if i not in g.copied and a != x.data_ptr()}
        if g.graph is None or moved:
            g.copied |= moved | {i for i, (a, b) in enumerate(zip(addresses, g.last)) if a != b}
            self._capture(g, inputs, sizes)
        elif g.copied:
            order = sorted(g.copied)
            torch._foreach_copy_([g.inputs[i] for i in order], [inputs[i] for i in order])
        g.last = addresses
        g.graph.replay()
        self.program.after_call(self.name)
        return [inputs[self.forwarded[j]] if j in self.forwarded else o.clone()
                for j, o in enumerate(g.outputs)]

    def _graph(self, values: tuple[int, ...]) -> Optional[_Graph]:
        """The graph of this binding of the sizes (made at its first call), or None where
        its calls run plainly."""
        if values not in self.graphs:
            if len(self.graphs) >= MAX_GRAPHS:
                return None
            self.graphs[values] = _Graph() if self.program.replays(self.name, values) else None
        return self.graphs[values]

    def _capture(self, g: _Graph, inputs: tuple, sizes: Optional[dict[str, int]]) -> None:
        g.graph = None
        g.inputs = [x.detach().clone(memory_format=torch.contiguous_format)
                    if i in g.copied else x.detach() for i, x in enumerate(inputs)]
        graph = torch.cuda.CUDAGraph()
        # thread_local: the backward is captured on autograd's thread while the main
        # thread may go on issuing work
        with torch.cuda.graph(graph, capture_error_mode="thread_local"):
            g.outputs = self.program.run(self.name, *g.inputs, sizes=sizes, capturing=True)
        g.graph = graph
