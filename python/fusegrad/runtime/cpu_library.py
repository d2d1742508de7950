"""Compiled CPU code as a shared library plus JSON metadata, and loading it back.

A library directory holds `lib.so` (position-independent object code linked
by the system C compiler) and `meta.json`: the format version,
the library's sha256, each entry's input/output signatures, forwarded
results and workspace bytes, the out-of-range-index sites, and whatever the writer adds (the
compile cache's key inputs and training metadata). The compile cache stores
these; loading needs only torch and ctypes, not MLIR, so the same format can
be run where only torch is installed.

Undefined symbols in the library (BLAS, `GOMP_parallel`, `aoti_torch_*`,
libgcc_s builtins, libm) resolve at load time against the libraries
`runtime.cpu.load_builtins` makes global, exactly as the JIT resolves them.
"""
from __future__ import annotations

import ctypes
import functools
import hashlib
import json
import logging
import os
import shutil
import tempfile
from typing import Any, Mapping, Sequence

from .abi import TensorSig
from .cpu import CpuModule, Entries, load_builtins

log = logging.getLogger(__name__)

FORMAT = "fusegrad-cpu-library"
VERSION = 3  # 2: entries name their workspace bytes; 3: negative for a growing workspace
READABLE = (2, 3)  # versions this runtime loads
LIBRARY = "lib.so"
METADATA = "meta.json"


class LibraryError(RuntimeError):
    """A library directory is missing, corrupted, stale or does not load."""


def sha256_file(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def write(directory: str, cpu: CpuModule, extra: Mapping[str, Any] | None = None) -> None:
    """Describe `directory/lib.so` (the code of `cpu`, made by `link`) in
    `directory/meta.json`, adding the JSON fields `extra`."""
    library = os.path.join(directory, LIBRARY)
    if not os.path.exists(library):
        raise LibraryError(f"{library} was not built (linking it needs a C compiler: cc, gcc "
                           "or clang)")
    meta = dict(extra or {})
    meta.update({
        "format": FORMAT, "version": VERSION, "library": LIBRARY,
        "sha256": sha256_file(library),
        "entries": {name: {"inputs": [TensorSig(s.shape, s.dtype).to_json() for s in ins],
                           "outputs": [TensorSig(s.shape, s.dtype).to_json() for s in outs],
                           "forwarded": {str(k): i for k, i in cpu.forwarded.get(name, {}).items()},
                           "workspace": cpu.workspaces.get(name, 0),
                           "size_arguments": cpu.size_arguments.get(name, [])}
                    for name, (ins, outs) in cpu.entries.items()},
        "index_errors": (None if cpu.index_errors is None else
                         {"function": cpu.index_errors[0], "sites": cpu.index_errors[1]}),
    })
    with open(os.path.join(directory, METADATA), "w") as f:
        json.dump(meta, f, indent=1)


def read(directory: str) -> tuple[CpuModule, dict[str, Any]]:
    """Load the library in `directory`: its `CpuModule` and its metadata (all of
    `meta.json`). Checks the format and the checksum before loading; raises
    LibraryError saying what is wrong."""
    try:
        with open(os.path.join(directory, METADATA)) as f:
            meta = json.load(f)
        if not isinstance(meta, dict) or meta.get("format") != FORMAT or \
                meta.get("version") not in READABLE:
            raise LibraryError(f"not a {FORMAT} library of version "
                               f"{' or '.join(map(str, READABLE))}")
        library = os.path.join(directory, meta["library"])
        if sha256_file(library) != meta["sha256"]:
            raise LibraryError(f"{library} does not match its checksum")
        entries = {name: ([TensorSig.from_json(s) for s in e["inputs"]],
                           [TensorSig.from_json(s) for s in e["outputs"]])
                   for name, e in meta["entries"].items()}
        forwarded = {name: {int(k): int(i) for k, i in e["forwarded"].items()}
                     for name, e in meta["entries"].items()}
        workspaces = {name: int(e["workspace"]) for name, e in meta["entries"].items()}
        sizes = {name: list(e.get("size_arguments", [])) for name, e in meta["entries"].items()}
        errors = meta["index_errors"]
        index_errors = None if errors is None else (errors["function"], list(errors["sites"]))
        cpu = load(library, entries, forwarded, index_errors, workspaces, sizes)
    except LibraryError as e:
        raise LibraryError(f"{directory}: {e}") from None
    except (OSError, ValueError, KeyError, TypeError, AttributeError, RuntimeError) as e:
        raise LibraryError(f"{directory}: {type(e).__name__}: {e}") from None
    return cpu, meta


def load(library: str, entries: Entries, forwarded: Mapping[str, Mapping[int, int]],
         index_errors: tuple[str, Sequence[str]] | None,
         workspaces: Mapping[str, int],
         size_arguments: Mapping[str, Sequence[str]] | None = None) -> CpuModule:
    """The `CpuModule` of the shared library `library` (raises OSError if it does not load)."""
    load_builtins()
    lib = _dlopen(library)
    return CpuModule(functools.partial(_address, lib), lib, entries, forwarded, index_errors,
                     workspaces, size_arguments)


# path -> the file (device, inode, size, mtime) dlopen loaded from it. dlopen hands back
# the library already loaded under a path, whatever file is there now: an artifact
# exported again to the same folder, or a temporary directory's name reused, would run
# the old code
_LOADED: dict[str, tuple[int, int, int, int]] = {}


def _dlopen(library: str) -> ctypes.CDLL:
    """`ctypes.CDLL(library)`, loading the file at `library` now, never an older one."""
    path = os.path.realpath(library)
    st = os.stat(path)
    identity = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
    if _LOADED.setdefault(path, identity) == identity:
        return ctypes.CDLL(path)
    with tempfile.TemporaryDirectory(prefix="fusegrad-lib-") as tmp:
        alias = os.path.join(tmp, "lib.so")  # a name and a file of its own; stays mapped
        shutil.copyfile(path, alias)
        return _dlopen(alias)


def _address(lib: ctypes.CDLL, name: str) -> int:
    """The packed wrapper of entry `name`, as the ExecutionEngine names it (0 if absent)."""
    try:
        return ctypes.cast(getattr(lib, "_mlir__mlir_ciface_" + name), ctypes.c_void_p).value
    except AttributeError:
        return 0
