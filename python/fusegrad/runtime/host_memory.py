"""Host memory that steady-state calls neither page-fault nor zero.

With glibc's defaults a large block is mmapped on allocation and unmapped on free, so
every large output a compiled call allocates is fresh memory: the kernel that writes it
first faults in one 4 KiB page at a time (writing a fresh 32 MiB tensor took 12.3 ms
on the development machine, against 1.2 ms into reused memory). Two things avoid that:

- a pool (`OutputPool`): the memory of a dead output goes back to the pool, and the
  next output of the same byte size reuses it, as PyTorch's CUDA caching allocator
  does. An output is a tensor over the pool's block (`torch.frombuffer`); a finalizer
  on the buffer object, which the tensor's storage holds, returns the block when the
  last tensor viewing it dies, so a block is never reused while any view is alive.
  Freed blocks are kept up to a byte cap (`FUSEGRAD_HOST_POOL_BYTES`, 0 turns the pool
  off), oldest dropped first;
- new blocks ask for transparent huge pages on their 2 MiB-aligned interior before
  the first touch (where THP is on `madvise`, a common default): 3.1 ms instead of
  12.3 ms for the 32 MiB above, 512 times fewer faults. PyTorch does the same for
  every allocation under `THP_MEM_ALLOC_ENABLE=1`.

The pool covers only our own outputs. The library calls compiled code makes (oneDNN
convolutions and their gradients) allocate their results through PyTorch, and with
glibc's defaults each large one is fresh memory again: a torchvision ResNet-18 step
(4x3x64x64, 2 threads) took 24K page faults and 85.7 ms, eager 12K and 70.5 ms. So
the first compiled module (`keep_freed_memory`) sets glibc to serve blocks up to
32 MiB from its heap and to keep freed heap memory, what the benchmark suite's
`keep` regime does through the environment: 0.6K faults, 58 ms (eager, in that
regime, 55-61 ms). The process keeps its peak heap instead of returning it to the
system; `FUSEGRAD_MALLOC=default`, or any `MALLOC_*` setting of glibc's own in the
environment, leaves glibc as it is.
"""
from __future__ import annotations

import collections
import ctypes
import functools
import logging
import os
import sys
import threading
import weakref
from typing import NamedTuple, Sequence

import torch

log = logging.getLogger(__name__)

HUGE_PAGE = 2 << 20
# outputs from this size come from the pool, on huge pages (smaller ones are mostly reused
# heap memory)
LARGE_MIN_BYTES = 4 << 20
_MADV_HUGEPAGE = 14


# glibc's mallopt parameters, and what `keep_freed_memory` sets them to
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3
MMAP_THRESHOLD = 32 << 20  # the largest glibc accepts
TRIM_THRESHOLD = 1 << 30
_GLIBC_VARIABLES = ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", "MALLOC_MMAP_MAX_",
                    "MALLOC_TOP_PAD_", "GLIBC_TUNABLES")


@functools.lru_cache(maxsize=1)
def keep_freed_memory() -> bool:
    """Have glibc serve blocks up to MMAP_THRESHOLD from its heap and keep freed heap
    memory (up to TRIM_THRESHOLD at its top), once per process; whether it did."""
    if os.environ.get("FUSEGRAD_MALLOC", "keep") != "keep":
        log.debug("FUSEGRAD_MALLOC=%s: glibc malloc left as it is",
                  os.environ["FUSEGRAD_MALLOC"])
        return False
    chosen = [v for v in _GLIBC_VARIABLES if v in os.environ]
    if chosen:
        log.debug("malloc settings in the environment (%s): left as they are", chosen)
        return False
    try:
        libc = ctypes.CDLL(None)
        libc.gnu_get_libc_version  # noqa: B018 (glibc only: musl's mallopt does nothing)
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    done = bool(mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and \
        bool(mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD))
    log.debug("glibc malloc %s blocks up to %d MiB from its heap and keeps freed memory "
             "(FUSEGRAD_MALLOC=default leaves it as it is)",
             "now serves" if done else "refused to serve", MMAP_THRESHOLD >> 20)
    return done


def _madvise():
    if not sys.platform.startswith("linux"):
        return None
    try:
        fn = ctypes.CDLL(None, use_errno=True).madvise
    except (OSError, AttributeError):
        return None
    fn.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    fn.restype = ctypes.c_int
    return fn


_MADVISE = _madvise()


def advise_huge_pages(address: int, nbytes: int) -> None:
    """Ask for huge pages on the 2 MiB-aligned part of [address, address + nbytes)."""
    start = (address + HUGE_PAGE - 1) & ~(HUGE_PAGE - 1)
    end = (address + nbytes) & ~(HUGE_PAGE - 1)
    if _MADVISE is not None and end > start:
        _MADVISE(start, end - start, _MADV_HUGEPAGE)  # advice only: a failure changes nothing


class PoolUsage(NamedTuple):
    """What a pool holds: blocks kept for reuse, and blocks under live outputs."""

    free_bytes: int
    lent_bytes: int


class OutputPool:
    """Blocks of dead large outputs, by byte size, for the next output of that size."""

    def __init__(self, max_free_bytes: int) -> None:
        self.max_free_bytes = max_free_bytes
        self.free_bytes = 0
        self.lent_bytes = 0  # under outputs still alive (returned by their finalizers)
        self._free: collections.OrderedDict[int, torch.Tensor] = collections.OrderedDict()
        self._lock = threading.Lock()

    def empty(self, shape: Sequence[int], dtype: torch.dtype, nbytes: int) -> torch.Tensor:
        """A tensor of `nbytes` bytes over a free block of that size, or a new one."""
        block = self._take(nbytes)
        if block is None:
            block = torch.empty(nbytes, dtype=torch.uint8)
            advise_huge_pages(block.data_ptr(), nbytes)
        with self._lock:
            self.lent_bytes += nbytes
        buffer = (ctypes.c_char * nbytes).from_address(block.data_ptr())
        # the storage holds `buffer`; when the last view of it dies, the block comes back
        weakref.finalize(buffer, self._give, block).atexit = False
        return torch.frombuffer(buffer, dtype=dtype).view(shape)

    def _take(self, nbytes: int) -> torch.Tensor | None:
        with self._lock:
            for key, block in self._free.items():
                if block.numel() == nbytes:
                    del self._free[key]
                    self.free_bytes -= nbytes
                    return block
        return None

    def _give(self, block: torch.Tensor) -> None:
        with self._lock:
            self.lent_bytes -= block.numel()
            if block.numel() > self.max_free_bytes:
                return
            self._free[id(block)] = block
            self.free_bytes += block.numel()
            while self.free_bytes > self.max_free_bytes:  # drop the oldest
                _, old = self._free.popitem(last=False)
                self.free_bytes -= old.numel()

    def clear(self) -> None:
        """Give the free blocks back to the allocator (live outputs are unaffected)."""
        with self._lock:
            self._free.clear()
            self.free_bytes = 0

    def usage(self) -> PoolUsage:
        """Bytes held now (for memory accounting: benchmarks/real_size.py)."""
        with self._lock:
            return PoolUsage(self.free_bytes, self.lent_bytes)


def _pool_bytes() -> int:
    setting = os.environ.get("FUSEGRAD_HOST_POOL_BYTES")
    if setting:
        try:
            return int(setting)
        except ValueError:
            log.warning("FUSEGRAD_HOST_POOL_BYTES=%r is not a number of bytes; using the "
                        "default", setting)
    try:  # a quarter of the machine's memory, at most 4 GiB
        physical = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        physical = 16 << 30
    return min(physical // 4, 4 << 30)


POOL = OutputPool(_pool_bytes())


def empty(shape: Sequence[int], dtype: torch.dtype, nbytes: int) -> torch.Tensor:
    """`torch.empty(shape, dtype=dtype)` (of `nbytes` bytes): from `POOL` when large."""
    if nbytes < LARGE_MIN_BYTES:
        return torch.empty(shape, dtype=dtype)
    if POOL.max_free_bytes <= 0:
        t = torch.empty(shape, dtype=dtype)
        advise_huge_pages(t.data_ptr(), nbytes)
        return t
    return POOL.empty(shape, dtype, nbytes)
