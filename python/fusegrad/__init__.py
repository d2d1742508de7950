"""fusegrad: an MLIR compiler for differentiable PyTorch programs.

The public API is imported lazily (on first attribute access), so
`import fusegrad` stays cheap; MLIR and Dynamo load when first needed.
"""
from __future__ import annotations

import importlib
import logging
import os
import warnings
from typing import Any

logging.getLogger(__name__).addHandler(logging.NullHandler())


def _configure_logging() -> None:
    """`FUSEGRAD_LOG=debug|info|warning|error`: fusegrad's log to stderr at that level
    (the standard `logging.getLogger("fusegrad")` works as well)."""
    setting = os.environ.get("FUSEGRAD_LOG")
    if not setting:
        return
    level = logging.getLevelName(setting.upper())
    if not isinstance(level, int):
        warnings.warn(f"FUSEGRAD_LOG={setting!r} is not a level; use debug, info, warning "
                      "or error", stacklevel=2)
        return
    logger = logging.getLogger(__name__)
    handler = logging.StreamHandler()
    handler.setFormatter(logging.Formatter("[%(name)s %(levelname)s] %(message)s"))
    logger.addHandler(handler)
    logger.setLevel(level)


_configure_logging()

__version__ = "0.1.0"

# public name -> defining submodule (never a module of the same name: importing
# it would make the package attribute the module instead of the function)
_EXPORTS = {
    "compile": "torch_compile",
    "CompileOptions": "program",
    "fusegrad_backend": "frontend.backend",
    "FusegradFallbackWarning": "frontend.backend",
    "FusegradEagerOpWarning": "frontend.backend",
    "grad": "functional",
    "value_and_grad": "functional",
    "vjp": "functional",
    "jvp": "functional",
    "hvp": "functional",
    "hessian": "functional",
    "explain": "explain_report",
    "compile_history": "frontend.compile_history",
    "export": "aot_export",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'fusegrad' has no attribute '{name}'")
    value = getattr(importlib.import_module(f".{_EXPORTS[name]}", __name__), name)
    globals()[name] = value
    return value


def _register_backend() -> None:
    """Make `torch.compile(..., backend="fusegrad")` work.

    An installed fusegrad declares the `torch_dynamo_backends` entry point,
    which Dynamo loads and registers on first use (registering here as well
    would make that registration fail as a duplicate); only without the
    entry point (e.g. running from a source tree) do we register ourselves.
    """
    from importlib.metadata import entry_points

    if entry_points(group="torch_dynamo_backends", name="fusegrad"):
        return
    from torch._dynamo import register_backend

    register_backend(importlib.import_module(".frontend.backend", __name__).fusegrad_backend,
                     name="fusegrad")


_register_backend()
