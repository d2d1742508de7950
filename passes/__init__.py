"""Every dg pass, registered by name (see `registry.PASSES`)."""
from . import verify_pass  # noqa: F401
from . import autodiff, jvp  # noqa: F401
from . import lower_to_linalg  # noqa: F401
from . import channels_last, fuse, remat, shared_fills  # noqa: F401
from . import pipelines  # noqa: F401  (CPU helper passes and named pipelines)
from . import gpu_pipeline  # noqa: F401  (CUDA target passes and pipelines)
from .registry import (PASSES, PIPELINES, PassError, build_pass_manager, register_pass,
                       run_pipeline)

__all__ = ["PASSES", "PIPELINES", "PassError", "build_pass_manager", "register_pass",
           "run_pipeline"]
