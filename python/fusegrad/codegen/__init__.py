"""Target code generation from linalg: the CPU (LLVM, in process) and CUDA (NVVM, PTX) pipelines' passes."""
