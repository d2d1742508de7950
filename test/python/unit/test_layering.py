"""The package's import graph: no cycles, and each layer imports only the layers below it.

The graph is read from the source (every `import` and `from ... import`, at module level
or inside functions), so a lazy import that closes a cycle counts as one. The pass table
(`passes.PASSES`) loads pass modules by name, which is the one way down the layers that
the graph does not see.
"""
from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[3] / "python" / "fusegrad"

# layer -> the layers it must not import (by module-name prefix under fusegrad.)
FORBIDDEN = {
    "runtime": ["*"],  # only itself: it loads and runs what the compiler made
    "dialects": ["frontend", "transforms", "codegen", "program", "pipelines",
                 "pass_manager"],
    "transforms": ["frontend", "codegen", "program", "pipelines", "pass_manager"],
    "conversion": ["frontend", "transforms", "codegen", "program", "pipelines",
                   "pass_manager"],
    "codegen.common": ["frontend", "transforms", "codegen.cpu", "codegen.cuda", "program"],
    "codegen.cpu": ["frontend", "transforms", "codegen.cuda", "program"],
    "codegen.cuda": ["frontend", "transforms", "codegen.cpu", "program"],
    "passes": ["*"],
}


def _module_name(path: Path) -> str:
    parts = ["fusegrad", *path.relative_to(PACKAGE).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in PACKAGE.rglob("*.py")}


def _imports(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The fusegrad modules `name` imports (a package's `from . import x` counts x)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[:len(package.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            # `from pkg import mod` imports mod (pkg is its parent, loaded first anyway)
            submodules = [f"{target}.{a.name}" for a in node.names
                          if f"{target}.{a.name}" in modules]
            candidates = submodules if len(submodules) == len(node.names) else \
                [target, *submodules]
        elif isinstance(node, ast.Import):
            candidates = [a.name for a in node.names]
        else:
            continue
        found.update(c for c in candidates if c in modules and c != name)
    return found


@pytest.fixture(scope="module")
def graph() -> dict[str, set[str]]:
    modules = _modules()
    return {name: _imports(name, path, modules) for name, path in modules.items()}


def test_the_package_has_no_import_cycle(graph):
    # iterative DFS; a back edge is a cycle, reported as the path that closes it
    state: dict[str, int] = {}
    for root in sorted(graph):
        if root in state:
            continue
        stack = [(root, iter(sorted(graph[root])))]
        path = [root]
        state[root] = 1
        while stack:
            node, edges = stack[-1]
            nxt = next(edges, None)
            if nxt is None:
                state[node] = 2
                stack.pop()
                path.pop()
            elif state.get(nxt) == 1:
                cycle = path[path.index(nxt):] + [nxt]
                pytest.fail("import cycle: " + " -> ".join(cycle))
            elif nxt not in state:
                state[nxt] = 1
                stack.append((nxt, iter(sorted(graph[nxt]))))
                path.append(nxt)


def _layer(name: str) -> str | None:
    rest = name.removeprefix("fusegrad.")
    for layer in sorted(FORBIDDEN, key=len, reverse=True):
        if rest == layer or rest.startswith(layer + "."):
            return layer
    return None


@pytest.mark.parametrize("layer", sorted(FORBIDDEN))
def test_each_layer_imports_only_the_layers_below_it(graph, layer):
    bad = []
    for name, deps in graph.items():
        if _layer(name) != layer:
            continue
        for dep in deps:
            rest = dep.removeprefix("fusegrad.")
            if any(f == "*" and _layer(dep) != layer or rest == f or rest.startswith(f + ".")
                   for f in FORBIDDEN[layer]):
                bad.append(f"{name} imports {dep}")
    assert not bad, "\n".join(sorted(bad))


def test_the_runtime_imports_without_mlir_and_without_the_compiler():
    """`fusegrad.runtime` is what an exported artifact needs: torch (and cuda-bindings
    for CUDA), never MLIR, and none of the compiler's modules."""
    runtime = sorted(n for n in _modules() if n.startswith("fusegrad.runtime"))
    code = (
        "import builtins, importlib, sys\n"
        "real = builtins.__import__\n"
        "def guard(name, *a, **k):\n"
        "    if name == 'mlir' or name.startswith('mlir.'):\n"
        "        raise ImportError('no MLIR here')\n"
        "    return real(name, *a, **k)\n"
        "builtins.__import__ = guard\n"
        f"for m in {runtime!r}:\n"
        "    importlib.import_module(m)\n"
        "loaded = sorted(m for m in sys.modules if m.startswith('fusegrad.')\n"
        "                and not m.startswith('fusegrad.runtime'))\n"
        "print(loaded)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, env={**os.environ, "PYTHONPATH": str(PACKAGE.parent)})
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]", f"the runtime loaded {done.stdout.strip()}"


def test_no_folder_of_the_package_holds_more_than_20_modules():
    crowded = {str(d.relative_to(PACKAGE.parent)): n for d in [PACKAGE, *PACKAGE.rglob("*")]
               if d.is_dir() and d.name != "__pycache__"
               and (n := sum(1 for p in d.glob("*.py") if p.name != "__init__.py")) > 20}
    assert not crowded, crowded
