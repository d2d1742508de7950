"""fusegrad-opt: exit codes, located diagnostics, never a traceback."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from fusegrad.opt import Diag, check_expectations, main, parse_expectations

OPT = Path(sys.executable).with_name("fusegrad-opt")
GOOD = """func.func @f(%a: tensor<4xf32>) -> tensor<4xf32> {
  %0 = "dg.exp"(%a) : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}
"""
BAD_SHAPE = """func.func @f(%a: tensor<4xf32>) -> tensor<2xf32> {
  %0 = "dg.exp"(%a) : (tensor<4xf32>) -> tensor<2xf32>
  return %0 : tensor<2xf32>
}
"""


@pytest.fixture
def good(tmp_path):
    p = tmp_path / "good.mlir"
    p.write_text(GOOD)
    return p


def run_main(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    assert "Traceback" not in err
    return code, out, err


def test_valid_input_prints_ir(capsys, good):
    code, out, err = run_main(capsys, good, "-p", "dg-verify,func.func(canonicalize)")
    assert code == 0 and '"dg.exp"' in out and err == ""


def test_output_file(capsys, good, tmp_path):
    target = tmp_path / "out.mlir"
    code, out, _ = run_main(capsys, good, "-o", target)
    assert code == 0 and out == "" and '"dg.exp"' in target.read_text()


@pytest.mark.parametrize("text,pipeline,expected", [
    (BAD_SHAPE, "", "bad.mlir:2:8: error: 'dg.exp' op result type(s) tensor<2xf32> do not match"),
    ("func.func @f( {", "", "bad.mlir:1:14: error: expected non-function type"),
    ('"dg.nope"() : () -> ()', "", "bad.mlir:1:1: error: unregistered operation 'dg.nope'"),
    (GOOD, "no-such-pass", "<pass-pipeline>:1:1: error: 'no-such-pass' does not refer"),
    (GOOD, "cse,dg-verify{x=1}", "<pass-pipeline>:1:5: error: pass dg-verify has no option 'x'"),
])
def test_bad_input_gives_one_located_error(capsys, tmp_path, text, pipeline, expected):
    bad = tmp_path / "bad.mlir"
    bad.write_text(text)
    code, out, err = run_main(capsys, bad, "-p", pipeline)
    assert code == 1 and out == ""
    assert err.startswith(str(bad.parent / expected) if expected.startswith("bad") else expected)
    assert len(err.strip().splitlines()) == 1


def test_missing_file(capsys, tmp_path):
    code, _, err = run_main(capsys, tmp_path / "absent.mlir")
    assert code == 1 and "absent.mlir: error: could not open input file" in err


def test_bad_flag_exits_1(capsys):
    code, _, err = run_main(capsys, "--no-such-flag")
    assert code == 1 and err.startswith("fusegrad-opt: error: unrecognized arguments")


def test_expectations_at_offsets():
    text = ("// expected-error @below {{first}}\n"
            "%a = op\n"
            "%b = op // expected-warning {{same line}}\n"
            "%c = op\n"
            "// expected-note @-1 {{one up}}\n"
            "// expected-error @above {{skips designators}}\n")
    got = [(e.severity, e.line, e.text) for e in parse_expectations(text, 10)]
    assert got == [("error", 11, "first"), ("warning", 12, "same line"), ("note", 13, "one up"),
                   ("error", 13, "skips designators")]


def test_check_expectations_reports_both_directions():
    expected = parse_expectations("x // expected-error {{wanted}}\n", 1)
    problems = check_expectations([Diag("error", "surprise", "f.mlir", 1, 3)], expected, "f.mlir")
    assert [p.message for p in problems] == ["unexpected error: surprise",
                                             'expected error "wanted" was not produced']


def test_console_script_and_module_entry_points(good):
    for cmd in ([str(OPT), str(good)], [sys.executable, "-m", "fusegrad.opt", str(good)]):
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        assert r.returncode == 0 and '"dg.exp"' in r.stdout, r.stderr
    r = subprocess.run([str(OPT), "-"], input=BAD_SHAPE, capture_output=True, text=True, timeout=120)
    assert r.returncode == 1 and r.stderr.startswith("<stdin>:2:8: error: 'dg.exp' op")
    assert "Traceback" not in r.stderr
