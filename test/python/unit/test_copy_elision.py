"""dg-elide-copies' arithmetic: which strides view an array under another shape, and
whether two strided boxes of one buffer share an element, against brute force."""
from __future__ import annotations

import itertools
import random

import torch

from fusegrad.codegen.cpu.elide_copies import _overlap, view_strides


def _elements(box):
    offset, sizes, strides = box
    return {offset + sum(i * s for i, s in zip(index, strides))
            for index in itertools.product(*(range(n) for n in sizes))}


def test_overlap_matches_brute_force():
    rng = random.Random(0)
    for _ in range(3000):
        rank = rng.randint(1, 3)
        strides = [rng.randint(0, 9) for _ in range(rank)]
        a = (rng.randint(0, 20), [rng.randint(0, 4) for _ in range(rank)], strides)
        b = (rng.randint(0, 20), [rng.randint(0, 4) for _ in range(rank)], strides)
        assert _overlap(a, b) == bool(_elements(a) & _elements(b)), (a, b)


def test_overlap_of_interleaved_parts():
    even = (0, [32, 8, 8, 1, 64], [8192, 1024, 128, 64, 1])
    odd = (64, [32, 8, 8, 1, 64], [8192, 1024, 128, 64, 1])
    assert not _overlap(even, odd)
    assert _overlap(even, (63, [32, 8, 8, 1, 64], [8192, 1024, 128, 64, 1]))


def _factorization(n: int, rng: random.Random) -> list[int]:
    dims = []
    while n > 1:
        d = rng.choice([k for k in range(2, n + 1) if n % k == 0])
        dims.append(d)
        n //= d
    for _ in range(rng.randint(0, 2)):
        dims.insert(rng.randint(0, len(dims)), 1)
    return dims or [1]


def test_view_strides_match_torch_views():
    """Where torch can view a strided tensor under a new shape, the strides are torch's;
    where it cannot (a RuntimeError), None."""
    rng = random.Random(1)
    base = torch.zeros(1 << 14)
    for _ in range(500):
        shape = [rng.randint(1, 4) for _ in range(rng.randint(1, 4))]
        strides, step = [], rng.choice([1, 2])
        for size in reversed(shape):  # row-major, some dims padded or reordered
            strides.insert(0, step)
            step *= size + rng.choice([0, 0, 1])
        if rng.random() < 0.2:
            rng.shuffle(strides)
        src = base.as_strided(shape, strides)
        new_shape = _factorization(src.numel(), rng)
        try:
            want = list(src.view(new_shape).stride())
        except RuntimeError:
            want = None
        got = view_strides(shape, strides, new_shape)
        assert got == want, (shape, strides, new_shape)
