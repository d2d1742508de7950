"""fusegrad: an MLIR compiler for differentiable PyTorch programs."""
from __future__ import annotations

import logging

logging.getLogger(__name__).addHandler(logging.NullHandler())

__version__ = "0.1.0"
