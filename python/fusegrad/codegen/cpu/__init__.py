"""The CPU target: kernels on memrefs, library calls, math expansion, the LLVM dialect and native code."""
