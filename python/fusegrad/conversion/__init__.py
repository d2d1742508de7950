"""dg -> linalg/tensor/arith on tensors: each op by its lowering rule, each fusion region as one loop nest."""
