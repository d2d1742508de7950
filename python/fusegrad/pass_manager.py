"""Pass managers for mlir-opt style pipelines that mix dg and upstream passes.

A pipeline is a string: `dg-autodiff,canonicalize,func.func(cse),dg-fuse{max-ops=8}`.
Its elements are dg passes (`passes.PASSES`, at the top level), named pipelines
(`pipelines.PIPELINES`, expanded in place) and upstream passes with their options.
"""
from __future__ import annotations

import logging
import os
from typing import Any, Callable

from mlir import ir, passmanager

from .passes import PASSES, Pass, PassError
from .pipelines import PIPELINES

log = logging.getLogger(__name__)


def split_pipeline(text: str) -> list[str]:
    """Top-level comma-separated elements, respecting (), {} and quotes."""
    parts, depth, cur, quote = [], 0, [], False
    for ch in text:
        if ch == '"':
            quote = not quote
        elif not quote and ch in "({":
            depth += 1
        elif not quote and ch in ")}":
            depth -= 1
            if depth < 0:
                raise ValueError(f"unbalanced ')' or '}}' in pipeline {text!r}")
        if ch == "," and depth == 0 and not quote:
            parts.append("".join(cur).strip())
            cur = []
        else:
            cur.append(ch)
    if depth != 0 or quote:
        raise ValueError(f"unbalanced brackets or quotes in pipeline {text!r}")
    parts.append("".join(cur).strip())
    return [p for p in parts if p]


def _parse_options(p: Pass, text: str) -> dict[str, Any]:
    opts = dict(p.options)
    for item in text.split():
        key, _, value = item.partition("=")
        py_key = key.replace("-", "_")
        if py_key not in opts:
            known = ", ".join(k.replace("_", "-") for k in p.options) or "none"
            raise ValueError(f"pass {p.name} has no option '{key}' (options: {known})")
        default = opts[py_key]
        if isinstance(default, bool):
            opts[py_key] = value.lower() in ("", "1", "true", "on")
        elif isinstance(default, int):
            opts[py_key] = int(value)
        elif isinstance(default, float):
            opts[py_key] = float(value)
        else:
            opts[py_key] = value
    return opts


def _external(p: Pass, options: dict[str, Any]) -> Callable:
    def run(op: ir.Operation, pass_) -> None:
        # exceptions must not cross into C++: report and signal failure instead
        try:
            log.debug("running %s %s", p.name, options)
            with op.location:  # ops and types a pass creates default to the module's location
                p.run(op, **options)
        except PassError as e:
            loc = e.location or op.location
            loc.emit_error(f"{p.name}: {e}")
            pass_.signal_pass_failure()
        except Exception as e:  # a bug in the pass: still a located, clean failure
            log.debug("pass %s crashed", p.name, exc_info=True)
            op.location.emit_error(f"{p.name}: internal error: {type(e).__name__}: {e}")
            pass_.signal_pass_failure()
    return run


def _add_element(pm: passmanager.PassManager, element: str) -> None:
    name, _, rest = element.partition("{")
    name = name.strip()
    if name in PIPELINES and not rest:
        for inner in split_pipeline(PIPELINES[name][0]):
            _add_element(pm, inner)
    elif name in PASSES:
        p = PASSES[name]
        options = _parse_options(p, rest.rstrip("}")) if rest else dict(p.options)
        pm.add(_external(p, options), name=name, argument=name, description=p.description)
    else:
        try:
            pm.add(element)
        except ValueError as e:
            raise ValueError(f"unknown pass or bad pipeline element '{element}': {e}") from None


def build_pass_manager(pipeline: str) -> passmanager.PassManager:
    """A module-level PassManager for `pipeline` (uses the current context)."""
    text = pipeline.strip()
    if text.startswith("builtin.module(") and text.endswith(")"):
        text = text[len("builtin.module("):-1]
    pm = passmanager.PassManager("builtin.module")
    for element in split_pipeline(text):
        _add_element(pm, element)
    return pm


def verify_each() -> bool:
    """Verify the IR after every pass (`FUSEGRAD_VERIFY_EACH=1`, what the tests and
    fusegrad-opt do) rather than once after the pipeline: the verifier after each of
    the CPU pipeline's passes was a third of its time on HF GPT-2's training graph."""
    return os.environ.get("FUSEGRAD_VERIFY_EACH", "0") not in ("", "0")


def run_pipeline(module: ir.Module | ir.Operation, pipeline: str) -> None:
    """Run `pipeline` on `module` in place, then verify it; raises MLIRError with
    diagnostics on failure."""
    op = module.operation
    with op.context:
        pm = build_pass_manager(pipeline)
        each = verify_each()
        pm.enable_verifier(each)
        pm.run(op)
        if not each:
            op.verify()
