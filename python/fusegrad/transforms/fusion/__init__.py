"""Fusion regions (dg-fuse) and the rewrites that give fusion its shape."""

# the rewrites dg-fuse expects before it, in order (pipelines.FUSION_REWRITES): casts,
# scalars and transposes absorbed by matmuls, reshapes and gathers moved to region
# inputs (and reshapes to region outputs), stop_gradient dropped
REWRITES = (
    "dg-drop-stop-gradients",
    "dg-narrow-matmuls",
    "dg-matmul-scalars",
    "dg-hoist-reshapes",
    "dg-sink-reshapes",
    "dg-scatter-into-sums",
    "dg-sink-gathers",
    "dg-transposes-to-matmuls",
    "dg-transpose-matmul-results",  # then hoists reshapes again where it transposed one
)
