"""The CUDA target: kernels (gpu.launch), PTX/cubin, and the launch plan the runtime runs."""
