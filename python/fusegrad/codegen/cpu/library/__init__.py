"""Library calls from compiled CPU code: BLAS, and PyTorch's convolution and attention kernels."""
