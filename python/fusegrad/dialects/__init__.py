"""The dg dialect: op table, IRDL definition, builders, reference semantics.

Importing this package registers every op family; rules from other layers
(lowering, autodiff) register themselves when `fusegrad.passes` is imported.
"""
from . import attention, contraction, conv_nhwc, elementwise, gather_ops, random_ops, reduction  # noqa: F401
from . import region_ops, scan  # noqa: F401
from . import shape_ops, source_ops  # noqa: F401
from .core import OPS, Attr, Kind, OpDef, ShapeError, attrs_of, lookup
from .types import TensorSpec

__all__ = ["OPS", "Attr", "Kind", "OpDef", "ShapeError", "TensorSpec", "attrs_of", "lookup"]
