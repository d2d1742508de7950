"""runtime.host_memory: large outputs of compiled code reuse the memory of dead outputs
(the pool) or ask for huge pages on their 2 MiB-aligned interior before their first
touch; small ones are plain torch.empty."""
from __future__ import annotations

import gc
import os
import pickle
import platform
import subprocess
import sys

import pytest

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
    host_memory.POOL.clear()
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


def test_pool_reuses_the_block_of_a_dead_output_only():
    pool = host_memory.OutputPool(64 * MIB)
    a = pool.empty((1024, 1024), torch.float32, 4 * MIB)
    address = a.data_ptr()
    view = a[1:]
    del a
    gc.collect()
    b = pool.empty((1024, 1024), torch.float32, 4 * MIB)
    assert b.data_ptr() != address  # a view of the first output is alive
    del view
    c = pool.empty((2048, 512), torch.float32, 4 * MIB)
    assert c.data_ptr() == address and c.shape == (2048, 512)
    d = pool.empty((1024, 2048), torch.float32, 8 * MIB)  # another size: a new block
    assert d.data_ptr() not in (address, b.data_ptr())
    del b, c, d
    assert pool.free_bytes == 16 * MIB
    pool.clear()
    assert pool.free_bytes == 0


def test_usage_counts_lent_and_free_blocks():
    pool = host_memory.OutputPool(64 * MIB)
    a = pool.empty((1024, 1024), torch.float32, 4 * MIB)
    b = pool.empty((1024, 2048), torch.float32, 8 * MIB)
    assert pool.usage() == host_memory.PoolUsage(free_bytes=0, lent_bytes=12 * MIB)
    view = b[1:]
    del a, b
    gc.collect()
    assert pool.usage() == (4 * MIB, 8 * MIB)  # a view keeps b's block lent
    del view
    c = pool.empty((2048, 512), torch.float32, 4 * MIB)  # reuses a's block
    assert pool.usage() == (8 * MIB, 4 * MIB)
    del c
    pool.clear()
    assert pool.usage() == (0, 0)


def test_pool_keeps_at_most_its_cap_oldest_dropped():
    pool = host_memory.OutputPool(8 * MIB)
    first = pool.empty((MIB,), torch.float32, 4 * MIB)
    second = pool.empty((MIB,), torch.float32, 4 * MIB)
    third = pool.empty((2 * MIB,), torch.float32, 8 * MIB)
    del first, second
    assert pool.free_bytes == 8 * MIB
    del third  # 16 MiB free: the two oldest go
    assert pool.free_bytes == 8 * MIB
    fourth = pool.empty((MIB,), torch.float32, 4 * MIB)  # no 4 MiB block is left to reuse
    assert pool.usage() == (8 * MIB, 4 * MIB)
    del fourth


def test_pooled_outputs_are_ordinary_tensors(tmp_path):
    pool = host_memory.OutputPool(64 * MIB)
    t = pool.empty((1024, 1024), torch.float32, 4 * MIB)
    t.fill_(2.0).add_(1.0)
    assert t.is_contiguous() and t.sum().item() == 3.0 * 1024 * 1024
    w = t.requires_grad_()
    (w * w).sum().backward()
    torch.testing.assert_close(w.grad, 2 * t.detach())
    torch.save(t.detach(), tmp_path / "t.pt")
    torch.testing.assert_close(torch.load(tmp_path / "t.pt"), t.detach())
    assert pickle.loads(pickle.dumps(t.detach())).sum().item() == t.sum().item()
    assert t.detach().numpy().shape == (1024, 1024)


def test_compiled_outputs_reuse_dead_outputs_memory():
    import fusegrad
    f = fusegrad.compile(lambda x: x * 2)
    x = torch.randn(1024, 1024)
    first = f(x)
    address = first.data_ptr()
    kept = f(x)
    assert kept.data_ptr() != address
    torch.testing.assert_close(kept, x * 2)
    del first
    again = f(x)
    assert again.data_ptr() == address
    torch.testing.assert_close(again, x * 2)
    torch.testing.assert_close(kept, x * 2)  # untouched by the reuse


def test_pool_off_and_its_setting(monkeypatch):
    monkeypatch.setenv("FUSEGRAD_HOST_POOL_BYTES", "0")
    assert host_memory._pool_bytes() == 0
    monkeypatch.setenv("FUSEGRAD_HOST_POOL_BYTES", "lots")
    assert host_memory._pool_bytes() > 0  # the default, with a warning in the log
    monkeypatch.setattr(host_memory, "POOL", host_memory.OutputPool(0))
    a = host_memory.empty((1024, 1024), torch.float32, 4 * MIB)
    assert a.untyped_storage().resizable()  # a plain torch.empty
    del a
    assert host_memory.POOL.free_bytes == 0


def test_a_new_workspace_asks_for_huge_pages(monkeypatch):
    """Every kernel of a step reads and writes the workspace (tens of MiB in the HF
    models): on 4 KiB pages it spans far more than the TLB covers."""
    from fusegrad.runtime import cpu
    calls = []
    monkeypatch.setattr(host_memory, "_MADVISE", lambda a, n, advice: calls.append((a, n)))
    monkeypatch.setattr(cpu._WORKSPACE, "buffer", None)
    address = cpu._WORKSPACE.data_ptr(8 * MIB)
    assert len(calls) == 1 and address <= calls[0][0] and calls[0][1] >= 4 * MIB
    calls.clear()
    assert cpu._WORKSPACE.data_ptr(4 * MIB) == address and calls == []  # kept, not advised again


_KEEP = "from fusegrad.runtime import host_memory; print(host_memory.keep_freed_memory())"


def _keeps(**env: str) -> str:
    clean = {k: v for k, v in os.environ.items()
             if not k.startswith("MALLOC_") and k not in ("FUSEGRAD_MALLOC", "GLIBC_TUNABLES")}
    return subprocess.run([sys.executable, "-c", _KEEP], env={**clean, **env}, check=True,
                          capture_output=True, text=True).stdout.strip()


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="glibc's mallopt")
def test_glibc_keeps_freed_memory_unless_told_otherwise():
    """The library calls' own results (PyTorch allocations) stop page-faulting: glibc
    keeps freed memory. A user's FUSEGRAD_MALLOC=default or glibc setting wins."""
    assert _keeps() == "True"
    assert _keeps(FUSEGRAD_MALLOC="default") == "False"
    assert _keeps(MALLOC_TRIM_THRESHOLD_="1000000") == "False"
