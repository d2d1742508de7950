"""runtime.host_memory: large outputs of compiled code ask for huge pages on their
2 MiB-aligned interior before their first touch; small ones are plain torch.empty."""
from __future__ import annotations

import torch

from fusegrad.runtime import host_memory

MIB = 1 << 20


def test_advice_covers_the_aligned_interior(monkeypatch):
    calls = []
    monkeypatch.setattr(host_memory, "_MADVISE", lambda a, n, advice: calls.append((a, n, advice)))
    host_memory.advise_huge_pages(3 * MIB + 4096, 8 * MIB)
    assert calls == [(4 * MIB, 6 * MIB, 14)]  # [4 MiB, 10 MiB) of [3 MiB + 4 KiB, 11 MiB + 4 KiB)
    calls.clear()
    host_memory.advise_huge_pages(3 * MIB + 4096, 2 * MIB)  # no whole aligned 2 MiB inside
    assert calls == []


def test_empty_advises_large_tensors_only(monkeypatch):
    calls = []
    monkeypatch.setattr(host_memory, "_MADVISE", lambda a, n, advice: calls.append((a, n)))
    big = host_memory.empty((1024, 1024), torch.float32, 4 * MIB)
    assert big.shape == (1024, 1024) and big.dtype == torch.float32
    assert len(calls) == 1 and calls[0][0] % (2 * MIB) == 0
    assert big.data_ptr() <= calls[0][0] and calls[0][0] + calls[0][1] <= big.data_ptr() + 4 * MIB
    calls.clear()
    small = host_memory.empty((16, 16), torch.float32, 1024)
    assert small.shape == (16, 16) and calls == []


def test_compiled_outputs_use_it(monkeypatch):
    import fusegrad
    seen = []
    real = host_memory.empty

    def spy(shape, dtype, nbytes):
        seen.append((tuple(shape), nbytes))
        return real(shape, dtype, nbytes)
    monkeypatch.setattr(host_memory, "empty", spy)
    f = fusegrad.compile(lambda x, y: (x * 2, y + 1))
    x, y = torch.randn(1024, 1024), torch.randn(8, 8)
    a, b = f(x, y)
    torch.testing.assert_close(a, x * 2)
    torch.testing.assert_close(b, y + 1)
    assert seen == [((1024, 1024), 4 * MIB)]  # the 8x8 result is a plain torch.empty
