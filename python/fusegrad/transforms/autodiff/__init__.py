"""Differentiation as passes over dg (reverse and forward mode), and what a backward saves."""
