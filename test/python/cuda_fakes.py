"""A fake CUDA driver and CUDA graph for the runtime's tests (no GPU, no cuda-bindings)."""
from __future__ import annotations

from fusegrad.runtime.cuda import DriverError


class FakeDriver:
    """Records loads and launches; can fail a chosen call."""

    def __init__(self, fail: str | None = None) -> None:
        self.fail = fail
        self.loaded: list[tuple[bytes, str]] = []
        self.launches: list[dict] = []
        self.unloaded: list = []

    def load_module(self, image: bytes, kind: str):
        if self.fail == "load":
            raise DriverError("cuModuleLoadData", "CUDA_ERROR_INVALID_PTX")
        self.loaded.append((image, kind))
        return ("mod", len(self.loaded))

    def get_function(self, module, name: str):
        if self.fail == "get":
            raise DriverError("cuModuleGetFunction", "CUDA_ERROR_NOT_FOUND")
        return (module, name)

    def launch(self, function, grid, block, smem, stream, params) -> None:
        if self.fail == "launch":
            raise DriverError("cuLaunchKernel", "CUDA_ERROR_INVALID_VALUE")
        self.launches.append({"function": function, "grid": list(grid), "block": list(block),
                              "smem": smem, "stream": stream, "params": list(params)})

    def unload_module(self, module) -> None:
        self.unloaded.append(module)


class FakeGraph:
    """torch.cuda.CUDAGraph's stand-in on the CPU: counts captures and replays."""

    captures = 0

    def __init__(self) -> None:
        self.replays = 0

    def replay(self) -> None:
        self.replays += 1


def fake_capture(graph, capture_error_mode):
    """torch.cuda.graph's stand-in: counts a capture (the calls inside run plainly)."""
    import contextlib
    FakeGraph.captures += 1
    assert capture_error_mode == "thread_local"  # the backward captures on autograd's thread
    return contextlib.nullcontext()
