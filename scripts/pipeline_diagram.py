"""Draw fusegrad's compile pipeline as SVG, from the pipeline definitions themselves.

    .venv/bin/python scripts/pipeline_diagram.py docs/pipeline.svg

Each box is a stage of `fusegrad.compile`; the passes listed in it are the elements of
the named pipeline that runs there (`fusegrad/pipelines.py`), dg passes in black,
upstream MLIR passes in grey. test/python/unit/test_docs.py checks that the committed
picture is what this script draws, so it cannot drift from the code.
"""
from __future__ import annotations

import sys
from dataclasses import dataclass
from html import escape

from fusegrad.pass_manager import split_pipeline
from fusegrad.passes import PASSES
from fusegrad.pipelines import PIPELINES, cuda_pipeline

FONT = 11
LINE = 14
WIDTH = 330  # one column's box width
CHARS = 46  # characters that fit on a line of a column's box
GAP = 28  # vertical gap between boxes (an arrow)
MARGIN = 20


@dataclass
class Box:
    title: str
    lines: list[str]  # pipeline elements, or plain text when `text`
    text: bool = False

    @property
    def height(self) -> int:
        return LINE * (len(self.lines) + 1) + 12


def _elements(name: str) -> list[str]:
    """The elements of named pipeline `name`, named pipelines inside it expanded."""
    out = []
    for element in split_pipeline(PIPELINES[name][0]):
        if element in PIPELINES:
            out.extend(_elements(element))
        else:
            out.append(element)
    return out


def _short(element: str) -> str:
    """An element that does not fit keeps its pass name; its options become `{...}`."""
    if len(element) <= CHARS:
        return element
    cut = min((element.index(c), c) for c in "{(" if c in element)
    return element[:cut[0]] + cut[1] + "..." + {"{": "}", "(": ")"}[cut[1]]


def _stage(title: str, pipeline: str) -> Box:
    return Box(f"{title}  [{pipeline}]", [_short(e) for e in _elements(pipeline)])


def _draw_box(box: Box, x: int, y: int, width: int) -> list[str]:
    parts = [f'<rect x="{x}" y="{y}" width="{width}" height="{box.height}" rx="6" '
             'fill="#f6f8fa" stroke="#57606a"/>',
             f'<text x="{x + 8}" y="{y + LINE}" font-weight="bold">{escape(box.title)}</text>']
    for k, line in enumerate(box.lines):
        name = line.split("{")[0]
        color = "#24292f" if box.text or name in PASSES else "#8c959f"
        parts.append(f'<text x="{x + 16}" y="{y + LINE * (k + 2)}" fill="{color}">'
                     f'{escape(line)}</text>')
    return parts


def _arrow(x: int, y0: int, y1: int) -> str:
    return (f'<line x1="{x}" y1="{y0}" x2="{x}" y2="{y1 - 2}" stroke="#57606a" '
            'marker-end="url(#head)"/>')


def diagram() -> str:
    """The SVG text."""
    shared = [
        Box("PyTorch model or function", ["fusegrad.compile(model), torch.compile(model,",
                                          "backend='fusegrad'), fusegrad.grad/jvp/export"],
            text=True),
        Box("frontend: capture and import", [
            "Dynamo graph -> make_fx under no_grad: functional core ATen",
            "  (frontend/capture.py, decompositions.py, graph_split.py)",
            "ATen -> dg: func.func of dg ops (frontend/importer.py, aten_ops/)"], text=True),
        Box("transforms/autodiff: differentiation", [
            "dg-autodiff{wrt=... ct_outputs=...}  @f -> @f_fwd, @f_bwd",
            "dg-autodiff{joint=true}             @f -> @f_vjp (double backward)",
            "dg-jvp{wrt=...}                     @f -> @f_jvp"], text=True),
    ]
    cpu = [_stage("optimize", "dg-optimize"), _stage("CPU: to linalg", "dg-cpu-linalg"),
           _stage("CPU: bufferize", "dg-cpu-bufferize"), _stage("CPU: to LLVM", "dg-cpu-llvm"),
           Box("codegen/cpu/compile.py", [
               "LLVM dialect -> machine code: LLVM's tools",
               "in parallel processes (llvm/native_code.py)",
               "or the ExecutionEngine (llvm/jit.py)",
               "-> runtime.cpu.CpuModule"], text=True)]
    cuda = [_stage("optimize", "dg-optimize-cuda"), _stage("CUDA: to linalg", "dg-gpu-linalg"),
            _stage("CUDA: bufferize", "dg-gpu-bufferize"),
            Box("CUDA: kernels", [e for e in split_pipeline(cuda_pipeline())
                                  if e in ("dg-gpu-kernels", "dg-widen-bool-memrefs")]),
            _stage("CUDA: outline", "dg-gpu-outline"), _stage("CUDA: to PTX", "dg-gpu-nvvm"),
            Box("codegen/cuda/compile.py", [
                "host memref code -> launch plan",
                "(launch_plan.py), PTX -> cubin (ptxas.py)",
                "-> runtime.cuda.CudaProgram"], text=True)]

    body = []
    full = 2 * WIDTH + 40
    y = MARGIN
    centre = MARGIN + full // 2
    for k, box in enumerate(shared):
        body += _draw_box(box, MARGIN, y, full)
        y += box.height
        body.append(_arrow(centre if k < len(shared) - 1 else MARGIN + WIDTH // 2, y, y + GAP))
        y += GAP
    body.append(_arrow(MARGIN + full - WIDTH // 2, y - GAP, y))
    bottom = y
    for column, boxes in ((MARGIN, cpu), (MARGIN + WIDTH + 40, cuda)):
        cy = y
        for k, box in enumerate(boxes):
            body += _draw_box(box, column, cy, WIDTH)
            cy += box.height
            if k < len(boxes) - 1:
                body.append(_arrow(column + WIDTH // 2, cy, cy + GAP))
                cy += GAP
        bottom = max(bottom, cy)
    body.append(f'<text x="{MARGIN}" y="{bottom + 22}" fill="#57606a">CPU target (left), '
                'CUDA target (right). Black: dg passes (fusegrad/passes.py); grey: upstream '
                'MLIR passes.</text>')
    height = bottom + 36
    width = full + 2 * MARGIN
    head = ('<defs><marker id="head" markerWidth="8" markerHeight="8" refX="6" refY="4" '
            'orient="auto"><path d="M0,0 L8,4 L0,8 z" fill="#57606a"/></marker></defs>')
    return "\n".join([
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'font-family="monospace" font-size="{FONT}">',
        '<rect width="100%" height="100%" fill="white"/>', head, *body, "</svg>", ""])


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    with open(argv[1], "w") as f:
        f.write(diagram())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
