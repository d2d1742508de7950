"""The CPU target at the LLVM dialect: ABI fixes, thread launchers, and turning it into machine code."""
