"""Fusion regions (dg-fuse) and the rewrites that give fusion its shape."""
