"""What both targets share: loop ops, memref facts, bufferization helpers, library-call outlining."""
