"""PTX -> cubin with the CUDA toolkit's ptxas, one process per kernel module and chip.

The driver can JIT-compile PTX itself; cubins assembled ahead of time skip that at load
and report each kernel's registers, spills and shared memory (`ptxas -v`).
"""
from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from typing import Optional

from ...runtime.cuda import LaunchPlan


class PtxasError(RuntimeError):
    """ptxas rejected a kernel module's PTX."""


def find_ptxas() -> Optional[str]:
    """ptxas from PATH, CUDA_HOME, /usr/local/cuda, or the nvidia-cuda-nvcc wheel."""
    found = shutil.which("ptxas")
    if found:
        return found
    for root in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"):
        if root and os.path.exists(os.path.join(root, "bin", "ptxas")):
            return os.path.join(root, "bin", "ptxas")
    try:
        import nvidia.cuda_nvcc  # type: ignore[import-not-found]
        for base in nvidia.cuda_nvcc.__path__:
            p = os.path.join(base, "bin", "ptxas")
            if os.path.exists(p):
                return p
    except ImportError:
        pass
    return None


def ptxas(ptx: bytes, chip: str, what: str, ptxas_path: Optional[str] = None,
          timeout: float = 120.0) -> tuple[bytes, str]:
    """Assemble PTX into a cubin for `chip`; returns (cubin, ptxas -v report)."""
    exe = ptxas_path or find_ptxas()
    if exe is None:
        raise PtxasError("ptxas not found (PATH, CUDA_HOME, /usr/local/cuda, or "
                         "pip install nvidia-cuda-nvcc-cu12)")
    with tempfile.TemporaryDirectory(prefix="fusegrad-ptxas-") as d:
        src, dst = os.path.join(d, "k.ptx"), os.path.join(d, "k.cubin")
        with open(src, "wb") as f:
            f.write(ptx.rstrip(b"\0"))
        try:
            r = subprocess.run([exe, f"-arch={chip}", "-O3", "-v", src, "-o", dst],
                               capture_output=True, text=True, timeout=timeout)
        except (OSError, subprocess.TimeoutExpired) as e:
            raise PtxasError(f"ptxas for {what} ({chip}) did not run: {e}") from None
        if r.returncode != 0:
            raise PtxasError(f"ptxas rejected {what} for {chip}:\n{r.stderr.strip()}")
        with open(dst, "rb") as f:
            return f.read(), r.stderr


def assemble(plan: LaunchPlan, ptxas_path: Optional[str] = None,
             jobs: Optional[int] = None) -> dict[str, str]:
    """Add a cubin beside every PTX image of `plan` (ptxas processes in parallel);
    returns `module.chip` -> ptxas's `-v` report (registers, spills, shared memory)."""
    from concurrent.futures import ThreadPoolExecutor

    exe = ptxas_path or find_ptxas()
    todo = [(m, chip, img) for m in plan.modules.values() for chip, img in m.images.items()
            if img.ptx is not None and img.cubin is None]

    def one(item: tuple) -> tuple[str, bytes, str]:
        m, chip, img = item
        cubin, report = ptxas(img.ptx, chip, f"kernel module {m.name!r} (kernels {m.kernels})",
                              exe)
        return f"{m.name}.{chip}", cubin, report

    reports = {}
    with ThreadPoolExecutor(max_workers=jobs or min(8, os.cpu_count() or 1)) as pool:
        for (m, chip, img), (key, cubin, report) in zip(todo, pool.map(one, todo)):
            img.cubin = cubin
            reports[key] = report
    return reports
