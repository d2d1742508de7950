"""Which target a graph compiles for: the device its tensors live on.

A graph compiles for CUDA when its tensors are on a CUDA device and for the CPU
when they are on the CPU; `CompileOptions.target` may insist on one. Tensors on
several devices, or on a device fusegrad has no target for, are an error that
names the tensor: eager PyTorch would mostly fail on them too, and silently
compiling for one device would copy the others on every call.
"""
from __future__ import annotations

from typing import Sequence

import torch

TARGETS = ("cpu", "cuda")


class DeviceError(ValueError):
    """The graph's tensors are on several devices, or not where `target` asks."""


def select_target(requested: str | None, tensors: Sequence[tuple[str, torch.Tensor]]) -> str:
    """The target for a graph of the (name, tensor) pairs `tensors` (`requested`: the
    option, None to follow the tensors). Raises DeviceError."""
    first: dict[str, str] = {}  # device type -> name of the first tensor there
    for name, t in tensors:
        first.setdefault(t.device.type, name)
    if len(first) > 1:
        where = ", ".join(f"{name} on {device}" for device, name in first.items())
        raise DeviceError(f"fusegrad: the graph's tensors are on several devices ({where}); "
                          "move the model and its inputs to one device")
    device, name = next(iter(first.items()), ("cpu", ""))
    if device not in TARGETS:
        raise DeviceError(f"fusegrad: {name} is on {device}; fusegrad compiles for "
                          f"{' and '.join(TARGETS)} tensors")
    if requested is not None and requested != device:
        raise DeviceError(f"fusegrad: target={requested!r}, but {name} is on {device}; "
                          f"move the model and its inputs to {requested}")
    return device
