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
"""
from __future__ import annotations

from typing import Any, Optional

import torch


class GraphedFunction:
    """Function `name` of a `CudaProgram`, replayed from a CUDA graph after its first call."""

    def __init__(self, program: Any, name: str) -> None:
        self.program, self.name = program, name
        self.forwarded: dict[int, int] = program.plan.functions[name].forwarded
        self.returns_arguments = bool(self.forwarded)
        self.graph: Any = None
        self.inputs: list = []  # what the graph reads: callers' tensors, or its own copies
        self.copied: set[int] = set()  # inputs copied in on every call
        self.outputs: list = []  # the graph's outputs (overwritten by each replay)
        self.last: Optional[list[int]] = None  # the input addresses of the previous call

    def __call__(self, *inputs: Any) -> list:
        if self.last is None or torch.cuda.is_current_stream_capturing():
            outputs = self.program.run(self.name, *inputs)  # checks the inputs
            self.last = [x.data_ptr() for x in inputs]
            return outputs
        self.program.check_index_errors(wait=False)
        self.program.check_inputs(self.name, inputs)
        addresses = [x.data_ptr() for x in inputs]
        moved = {i for i, (a, x) in enumerate(zip(addresses, self.inputs))
                 if i not in self.copied and a != x.data_ptr()}
        if self.graph is None or moved:
            self.copied |= moved | {i for i, (a, b) in enumerate(zip(addresses, self.last))
                                    if a != b}
            self._capture(inputs)
        elif self.copied:
            order = sorted(self.copied)
            torch._foreach_copy_([self.inputs[i] for i in order], [inputs[i] for i in order])
        self.last = addresses
        self.graph.replay()
        self.program.after_call(self.name)
        return [inputs[self.forwarded[j]] if j in self.forwarded else o.clone()
                for j, o in enumerate(self.outputs)]

    def _capture(self, inputs: tuple) -> None:
        self.graph = None
        self.inputs = [x.detach().clone(memory_format=torch.contiguous_format)
                       if i in self.copied else x.detach() for i, x in enumerate(inputs)]
        graph = torch.cuda.CUDAGraph()
        # thread_local: the backward is captured on autograd's thread while the main
        # thread may go on issuing work
        with torch.cuda.graph(graph, capture_error_mode="thread_local"):
            self.outputs = self.program.run(self.name, *self.inputs, capturing=True)
        self.graph = graph
