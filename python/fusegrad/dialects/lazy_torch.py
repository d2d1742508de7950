"""`torch`, imported on first attribute access.

The IR tools (fusegrad-opt, lit tests, passes) never touch tensors; importing
PyTorch would triple their start-up time. Reference rules and runtime-facing
helpers use `torch.*` only inside functions, so they pay for it when called.
"""
from __future__ import annotations

import importlib
from typing import Any


class _LazyTorch:
    def __getattr__(self, name: str) -> Any:
        return getattr(importlib.import_module("torch"), name)


torch: Any = _LazyTorch()
