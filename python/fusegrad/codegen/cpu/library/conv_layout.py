"""The memory layout a grouped convolution runs fastest in through PyTorch's CPU kernel.

oneDNN picks its algorithm from the tensors' layout, and for grouped (depthwise)
convolutions the two layouts differ a lot, either way round, with no rule in the shapes:
ConvNeXt's 7x7 depthwise weight gradient on 8x32x16x16 took 2.6 ms from NCHW tensors
(im2col and gemm) and 0.77 ms from channels-last ones; its forward on 8x256x2x2, 1.1 ms
against 0.05 ms; a MobileNet-like 3x3 stride-2 weight gradient, 1.9 ms in NCHW and 3.2 ms
channels-last. Eager PyTorch runs whatever layout the model's tensors happen to have
(ConvNeXt's permutes make them channels-last). So dg-conv-to-torch measures both, once
per call signature and process, conversions included, and the call converts its
activations when channels-last wins. Ungrouped convolutions are not converted per call:
the copies cost more than the faster kernel saves (the benchmark CNN's second conv, 1.7 ms
NCHW against 2.1 ms converted); dg-channels-last (transforms/channels_last.py) moves them,
and the ops between them, to NHWC buffers instead, which the helpers pass as they are
(layout NHWC).
"""
from __future__ import annotations

import functools
import logging
import time
from dataclasses import dataclass
from typing import Callable

log = logging.getLogger(__name__)

# how the helpers pass activations: NCHW buffers as they are, NCHW buffers converted to
# channels-last copies, or NHWC buffers (dg-channels-last) as they are
NCHW, CHANNELS_LAST, NHWC = 0, 1, 2
POLICIES = ("auto", "nchw", "channels-last")
# channels-last must be this much faster to be chosen (timing noise, conversions)
MARGIN = 0.9
_RUNS = 3


@dataclass(frozen=True)
class ConvCall:
    """One library call: `kind` -1 forward, 0 input gradient, 1 weight gradient; `y` is the
    output (forward) or the output gradient."""

    kind: int
    x: tuple[int, ...]
    w: tuple[int, ...]
    y: tuple[int, ...]
    stride: tuple[int, int]
    padding: tuple[int, int]
    dilation: tuple[int, int]
    groups: int
    dtype: str  # "f32", "f64", "bf16" or "f16"


def layout(call: ConvCall, policy: str = "auto") -> int:
    """NCHW or CHANNELS_LAST for `call` under `policy` (one of POLICIES)."""
    if policy not in POLICIES:
        raise ValueError(f"dg-conv-to-torch: unknown layout policy {policy!r} "
                         f"(expected one of {', '.join(POLICIES)})")
    if call.groups == 1 or policy == "nchw":
        return NCHW
    if policy == "channels-last":
        return CHANNELS_LAST
    return _measured(call)


@functools.lru_cache(maxsize=None)
def _measured(call: ConvCall) -> int:
    nchw, cl = _time(_runner(call, False)), _time(_runner(call, True))
    choice = CHANNELS_LAST if cl < MARGIN * nchw else NCHW
    log.debug("grouped conv %s: NCHW %.0f us, channels-last %.0f us -> %s", call,
              nchw * 1e6, cl * 1e6, "channels-last" if choice else "NCHW")
    return choice


def _time(run: Callable[[], object]) -> float:
    run()
    best = float("inf")
    for _ in range(_RUNS):
        start = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - start)
    return best


def _runner(call: ConvCall, channels_last: bool) -> Callable[[], object]:
    """The call as the compiled helper makes it: contiguous NCHW buffers in and out,
    activations converted to channels-last first when `channels_last`."""
    import torch

    from ....dialects.types import torch_dtype
    dtype = torch_dtype(call.dtype)
    gen = torch.Generator().manual_seed(0)
    x, w, y = (torch.randn(s, generator=gen, dtype=dtype) for s in (call.x, call.w, call.y))
    args = (list(call.stride), list(call.padding), list(call.dilation), False, [0, 0],
            call.groups)

    def activation(t: "torch.Tensor") -> "torch.Tensor":
        return t.contiguous(memory_format=torch.channels_last) if channels_last else t

    def run() -> None:
        with torch.no_grad():
            if call.kind < 0:
                y.copy_(torch.ops.aten.convolution(activation(x), w, None, *args))
            else:
                mask = [call.kind == 0, call.kind == 1, False]
                grads = torch.ops.aten.convolution_backward(activation(y), activation(x), w,
                                                            None, *args, mask)
                (x if call.kind == 0 else w).copy_(grads[call.kind])
    return run
