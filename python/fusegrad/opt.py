"""fusegrad-opt: an mlir-opt for the dg dialect.

Parses IR (dg plus every upstream dialect), checks it with the dg verifier,
runs a pass pipeline mixing dg and upstream passes, verifies again and prints
the result. Every failure is reported as `file:line:col: error: message` on
stderr with exit status 1, never as a Python traceback.
"""
from __future__ import annotations

import argparse
import logging
import re
import sys
from dataclasses import dataclass, field
from typing import Iterable, Sequence

from mlir import ir

from .context import make_context
from .dialects.irdl import dialect_irdl
from .dialects.verify import VerifyError, verify
from .pass_manager import build_pass_manager, split_pipeline
from .passes import PASSES
from .pipelines import PIPELINES

log = logging.getLogger(__name__)

PROG = "fusegrad-opt"
SPLIT_MARKER = "// -----"
PIPELINE_NAME = "<pass-pipeline>"
STDIN_NAME = "<stdin>"
_SEVERITY = {
    ir.DiagnosticSeverity.ERROR: "error",
    ir.DiagnosticSeverity.WARNING: "warning",
    ir.DiagnosticSeverity.NOTE: "note",
    ir.DiagnosticSeverity.REMARK: "remark",
}
# notes MLIR attaches to parser/verifier errors: noise for a CLI user
_NOISE_NOTE = "see current operation"


class CliError(Exception):
    """A failure that ends the run: already formatted as a located diagnostic."""


@dataclass
class Diag:
    """One diagnostic, resolved to a file position (line None: no position)."""

    severity: str
    message: str
    file: str
    line: int | None = None
    col: int | None = None
    notes: list["Diag"] = field(default_factory=list)

    def render(self) -> str:
        where = self.file if self.line is None else f"{self.file}:{self.line}:{self.col}"
        text = f"{where}: {self.severity}: {self.message}"
        return "\n".join([text] + [n.render() for n in self.notes])


# ---------------------------------------------------------------- diagnostics from MLIR
def _position(loc: ir.Location) -> tuple[str, int, int] | None:
    """The first file:line:col inside `loc` (name, callsite and fused locations)."""
    if loc.is_a_file():
        return loc.filename, loc.start_line, loc.start_col
    if loc.is_a_name():
        return _position(loc.child_loc)
    if loc.is_a_callsite():
        return _position(loc.callee)
    if loc.is_a_fused():
        for inner in loc.locations:
            found = _position(inner)
            if found:
                return found
    return None


def _diag(severity: str, message: str, loc: ir.Location, input_name: str) -> Diag:
    pos = _position(loc)
    if pos is None:
        return Diag(severity, message, input_name)
    filename, line, col = pos
    # Module.parse names its buffer "-": the input we parsed
    return Diag(severity, message, input_name if filename == "-" else filename, line, col)


def _from_mlir(d, input_name: str) -> Diag:
    """A Diag from an `ir.Diagnostic` or an `MLIRError` diagnostic record."""
    out = _diag(_SEVERITY.get(d.severity, "error"), str(d.message), d.location, input_name)
    out.notes = [_from_mlir(n, input_name) for n in d.notes
                 if not str(n.message).startswith(_NOISE_NOTE)]
    return out


# ---------------------------------------------------------------- --verify-diagnostics
_EXPECTED = re.compile(r"expected-(error|warning|note|remark)\s*"
                       r"(?:@([+-]\d+|above|below|unknown|\d+))?\s*\{\{(.*?)\}\}")


@dataclass
class Expected:
    severity: str
    text: str
    line: int | None  # None: a diagnostic without a file location (`@unknown`)
    at: tuple[int, int]  # where the expected-... comment is
    matched: bool = False


def parse_expectations(text: str, first_line: int) -> list[Expected]:
    """The `expected-<severity>[@+N|@-N|@above|@below] {{msg}}` comments of `text`.

    `first_line` is the file line of `text`'s first line. As in mlir-opt,
    `@above`/`@below` skip lines that hold only expected-... comments.
    """
    out: list[Expected] = []
    pending_below: list[Expected] = []
    last_code_line = first_line
    for n, line in enumerate(text.splitlines(), first_line):
        stripped = line.strip()
        only_designators = stripped.startswith("//") and "expected-" in stripped
        for m in _EXPECTED.finditer(line):
            severity, where, msg = m.groups()
            e = Expected(severity, msg, n, (n, m.start() + 1))
            if where == "above":
                e.line = last_code_line
            elif where == "below":
                pending_below.append(e)
            elif where == "unknown":
                e.line = None
            elif where:
                e.line = n + int(where) if where[0] in "+-" else int(where)
            out.append(e)
        if not only_designators:
            for e in pending_below:
                e.line = n
            pending_below.clear()
            last_code_line = n
    return out


def check_expectations(diags: Iterable[Diag], expected: list[Expected],
                       input_name: str) -> list[Diag]:
    """Errors for unexpected diagnostics and for expectations nothing produced."""
    problems: list[Diag] = []
    flat = []
    for d in diags:
        flat.append(d)
        flat.extend(d.notes)
    for d in flat:
        line = d.line if d.file == input_name else None
        for e in expected:
            if (not e.matched and e.severity == d.severity and e.line == line
                    and e.text in d.message):
                e.matched = True
                break
        else:
            problems.append(Diag("error", f"unexpected {d.severity}: {d.message}",
                                 d.file, d.line, d.col))
    for e in expected:
        if not e.matched:
            problems.append(Diag("error", f'expected {e.severity} "{e.text}" was not produced',
                                 input_name, *e.at))
    return problems


# ---------------------------------------------------------------- pipeline
def _clean_pass_error(message: str) -> tuple[int, str]:
    """(column offset, one-line message) from a pipeline ValueError's text."""
    m = re.search(r"Parser:1:(\d+): error: ([^\n]*)", message)
    if m:
        return int(m.group(1)) - 1, m.group(2)
    message = re.sub(r"^unknown pass or bad pipeline element '[^']*': ", "", message)
    message = message.replace("<Pass-Options-Parser>: ", "")
    return 0, "; ".join(part.strip() for part in message.splitlines() if part.strip())


def check_pipeline(pipeline: str) -> None:
    """Raise CliError locating the first bad element of `pipeline` (needs a context)."""
    try:
        elements = split_pipeline(pipeline)
    except ValueError as e:
        raise CliError(Diag("error", str(e), PIPELINE_NAME, 1, 1).render()) from None
    pos = 0
    for element in elements:
        start = pipeline.find(element, pos)
        pos = start + len(element)
        try:
            build_pass_manager(element)
        except ValueError as e:
            offset, message = _clean_pass_error(str(e))
            raise CliError(Diag("error", message, PIPELINE_NAME, 1, start + 1 + offset).render()) \
                from None


# ---------------------------------------------------------------- one input buffer
@dataclass
class Chunk:
    text: str
    first_line: int  # file line of the chunk's first line


def split_input(text: str, split: bool) -> list[Chunk]:
    if not split:
        return [Chunk(text, 1)]
    chunks, current, start = [], [], 1
    for n, line in enumerate(text.splitlines(keepends=True), 1):
        if line.strip().startswith(SPLIT_MARKER):
            chunks.append(Chunk("".join(current), start))
            current, start = [], n + 1
        else:
            current.append(line)
    chunks.append(Chunk("".join(current), start))
    return chunks


def process(ctx: ir.Context, chunk: Chunk, args: argparse.Namespace,
            input_name: str) -> tuple[list[Diag], str | None]:
    """Parse, verify, run the pipeline and verify again: (diagnostics, printed IR or None)."""
    diags: list[Diag] = []

    def on_diagnostic(d: ir.Diagnostic) -> bool:
        diags.append(_from_mlir(d, input_name))
        return True

    handler = ctx.attach_diagnostic_handler(on_diagnostic)
    try:
        with ctx, ir.Location.unknown():
            # pad with newlines so locations are lines of the whole file
            text = "\n" * (chunk.first_line - 1) + chunk.text
            try:
                module = ir.Module.parse(text)
                verify(module.operation)
                if args.pass_pipeline:
                    pm = build_pass_manager(args.pass_pipeline)
                    if args.print_ir_after_all:
                        pm.enable_ir_printing(print_after_all=True,
                                              enable_debug_info=args.mlir_print_debuginfo)
                    if args.mlir_timing:
                        pm.enable_timing()
                    pm.run(module.operation)
                    verify(module.operation)
            except ir.MLIRError as e:
                diags.extend(_from_mlir(d, input_name) for d in e.error_diagnostics)
                return diags, None
            except VerifyError as e:
                diags.append(_diag("error", str(e), e.location, input_name))
                return diags, None
            output = module.operation.get_asm(enable_debug_info=args.mlir_print_debuginfo)
            return diags, output
    finally:
        handler.detach()


# ---------------------------------------------------------------- command line
class _Parser(argparse.ArgumentParser):
    """Usage errors exit 1 with an mlir-opt style message (argparse's default is 2)."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(1, f"{PROG}: error: {message}\n")


def _arg_parser() -> argparse.ArgumentParser:
    p = _Parser(prog=PROG, description="Parse, verify and transform MLIR with the dg dialect.")
    p.add_argument("input", nargs="?", default="-", help="input .mlir file, '-' for stdin")
    p.add_argument("-p", "--pass-pipeline", default="",
                   help="mlir-opt style pipeline, e.g. 'dg-verify,func.func(canonicalize)'")
    p.add_argument("-o", dest="output", default="-", help="output file ('-': stdout)")
    p.add_argument("--list-passes", action="store_true", help="list the dg passes and exit")
    p.add_argument("--list-pipelines", action="store_true",
                   help="list the named pipelines, each with its passes, and exit")
    p.add_argument("--dump-dialect", action="store_true",
                   help="print the dg dialect's IRDL definition and exit")
    p.add_argument("--print-ir-after-all", action="store_true",
                   help="print the IR after every pass, on stderr")
    p.add_argument("--verify-diagnostics", action="store_true",
                   help="check diagnostics against expected-error/warning/note comments")
    p.add_argument("--split-input-file", action="store_true",
                   help=f"process each '{SPLIT_MARKER}'-separated chunk on its own")
    p.add_argument("--mlir-print-debuginfo", action="store_true",
                   help="print locations in the output IR")
    p.add_argument("--mlir-timing", action="store_true",
                   help="report the time each pass took (dg and upstream), on stderr")
    return p


def list_passes() -> str:
    lines = ["dg passes:"]
    for p in sorted(PASSES.values(), key=lambda p: p.name):
        lines.append(f"  {p.name:<24} {p.description}")
        for opt, default in p.options.items():
            lines.append(f"      {opt.replace('_', '-')}={default!r}")
    lines.append("dg pipelines (usable as one pipeline element):")
    for name, (_, description) in sorted(PIPELINES.items()):
        lines.append(f"  {name:<24} {description}")
    lines.append("Upstream passes: every pass that mlir-opt registers "
                 "(see `mlir-opt --help`), with the same names and options.")
    return "\n".join(lines) + "\n"


def list_pipelines() -> str:
    """Each named pipeline, then its elements one per line (named pipelines inside it
    are shown by name, as they are written)."""
    lines = []
    for name, (text, description) in PIPELINES.items():
        lines.append(f"{name}: {description}")
        lines.extend(f"    {element}" for element in split_pipeline(text))
    return "\n".join(lines) + "\n"


def _read_input(path: str) -> tuple[str, str]:
    if path == "-":
        return sys.stdin.read(), STDIN_NAME
    try:
        with open(path, encoding="utf-8") as f:
            return f.read(), path
    except (OSError, UnicodeDecodeError) as e:
        reason = e.strerror if isinstance(e, OSError) and e.strerror else str(e)
        raise CliError(f"{path}: error: could not open input file: {reason}") from None


def _write_output(path: str, text: str) -> None:
    if path == "-":
        sys.stdout.write(text)
        return
    try:
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
    except OSError as e:
        raise CliError(f"{path}: error: could not open output file: {e.strerror}") from None


def run(argv: Sequence[str] | None = None) -> int:
    """The whole command; returns the exit status (raises CliError for fatal input errors)."""
    try:
        args = _arg_parser().parse_args(argv)
    except SystemExit as e:  # --help, or a usage error already reported
        return int(e.code or 0)
    if args.dump_dialect:
        _write_output(args.output, dialect_irdl())
        return 0
    if args.list_passes:
        _write_output(args.output, list_passes())
        return 0
    if args.list_pipelines:
        _write_output(args.output, list_pipelines())
        return 0
    text, input_name = _read_input(args.input)
    ctx = make_context()
    if args.pass_pipeline:
        with ctx:
            check_pipeline(args.pass_pipeline)
    failed = False
    outputs = []
    for chunk in split_input(text, args.split_input_file):
        diags, output = process(ctx, chunk, args, input_name)
        if args.verify_diagnostics:
            expected = parse_expectations(chunk.text, chunk.first_line)
            diags = check_expectations(diags, expected, input_name)
        for d in diags:
            sys.stderr.write(d.render() + "\n")
        if any(d.severity == "error" for d in diags):
            failed = True
        elif not args.verify_diagnostics and output is None:
            failed = True
        if output is not None:
            outputs.append(output)
    if outputs and (not failed or args.verify_diagnostics):
        _write_output(args.output, f"\n{SPLIT_MARKER}\n".join(outputs))
    return 1 if failed else 0


def main(argv: Sequence[str] | None = None) -> int:
    """Console entry point: `fusegrad-opt`."""
    logging.basicConfig(level=logging.WARNING, format=f"{PROG}: %(levelname)s: %(message)s")
    try:
        return run(argv)
    except CliError as e:
        sys.stderr.write(f"{e}\n")
        return 1
    except Exception as e:  # a bug: still one clean line, details with -v logging
        log.debug("internal error", exc_info=True)
        sys.stderr.write(f"{PROG}: error: internal error: {type(e).__name__}: {e}\n")
        return 1


if __name__ == "__main__":
    sys.exit(main())
