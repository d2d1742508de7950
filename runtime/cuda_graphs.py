"""CUDA-graph replay of one compiled function (`CudaProgram(..., graphs=True)`).

A small model's step is bound by the host: each kernel launch, allocation and
library call issued from Python costs microseconds, often more than the GPU
spends on it. A graph captures the whole function once and replays it with one
call.

Semantics stay those of a plain call:
- the first call runs plainly (it loads the kernel modules and lets cuBLAS and
  cuDNN set up, which must not happen during a capture); the second captures;
- the graph reads its own copies of the inputs: every call copies the inputs in
  (one multi-tensor copy), so callers may free or reuse their tensors;
- outputs are returned as fresh copies, so a later replay never overwrites a
  tensor the caller holds (forward residuals saved for a backward included);
- inside someone else's capture (`torch.cuda.graph` around a compiled model) it
  runs plainly, and so is captured into theirs.
"""
from __future__ import annotations

from typing import Any

import torch


class GraphedFunction:
    """Function `name` of a `CudaProgram`, replayed from a CUDA graph after its first call."""

    returns_arguments = False

    def __init__(self, program: Any, name: str) -> None:
        self.program, self.name = program, name
        self.calls = 0
        self.graph: Any = None
        self.inputs: list = []  # the graph's copies of the inputs
        self.outputs: list = []  # the graph's outputs (overwritten by each replay)

    def __call__(self, *inputs: Any) -> list:
        self.calls += 1
        if self.calls == 1 or torch.cuda.is_current_stream_capturing():
            return self.program.run(self.name, *inputs)
        self.program.check_index_errors(wait=False)
        self.program.check_inputs(self.name, inputs)
        if self.graph is None:
            self._capture(inputs)
        else:
            torch._foreach_copy_(self.inputs, list(inputs))
        self.graph.replay()
        self.program.after_call(self.name)
        return [o.clone() for o in self.outputs]

    def _capture(self, inputs: tuple) -> None:
        self.inputs = [x.detach().clone(memory_format=torch.contiguous_format) for x in inputs]
        graph = torch.cuda.CUDAGraph()
        # thread_local: the backward is captured on autograd's thread while the main
        # thread may go on issuing work
        with torch.cuda.graph(graph, capture_error_mode="thread_local"):
            self.outputs = self.program.run(self.name, *self.inputs, capturing=True)
        self.graph = graph
