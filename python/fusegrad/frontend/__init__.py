"""PyTorch -> dg: capture (Dynamo, make_fx), the ATen op table, import, graph splitting."""
