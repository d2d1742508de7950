"""Target-independent dg -> dg passes: differentiation, layout, decompositions, fusion."""
