"""Object files -> a shared library, with the system's C compiler as linker."""
from __future__ import annotations

import functools
import os
import shutil
import subprocess
from typing import Sequence


class LinkError(RuntimeError):
    """No C compiler to link with, or linking failed."""


@functools.lru_cache(maxsize=1)
def find_linker() -> str | None:
    """The C compiler that links object files into shared libraries (`$CC`, cc, gcc, clang)."""
    for name in (os.environ.get("CC"), "cc", "gcc", "clang"):
        path = name and shutil.which(name)
        if path:
            return path
    return None


def link(objects: Sequence[str], library: str) -> None:
    """Link the position-independent `objects` into the shared library `library`.
    Raises LinkError."""
    linker = find_linker()
    if linker is None:
        raise LinkError("no C compiler (cc, gcc, clang) to link a shared library")
    # -Bsymbolic: calls inside the library bind to its own functions, never to a symbol of
    # the same name elsewhere in the process (an entry named `main`, another library's kernels)
    cmd = [linker, "-shared", "-Wl,-Bsymbolic", "-o", library, *objects, "-lm"]
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode:
        raise LinkError(f"linking {library} failed: {' '.join(cmd)}: {done.stderr.strip()}")
