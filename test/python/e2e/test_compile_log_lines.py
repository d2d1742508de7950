"""FUSEGRAD_LOG=info: one line per compiled graph (which graph, its dg ops, what was
compiled, how long, compiled or from the cache), and not the malloc notice."""
from __future__ import annotations

import logging
import re

import pytest
import torch

import fusegrad
from fusegrad import compile_cache
from fusegrad.runtime import host_memory

LINE = re.compile(r"^(?P<graph>graph\d+(\.\S+)?|graph [0-9a-f]{8}) \((?P<ops>\d+) dg ops\): "
                  r"(?P<what>.+) for cpu, (?P<how>.+) in \d+\.\d\d s$")


def _lines(caplog) -> list[re.Match]:
    info = [r for r in caplog.records if r.name.startswith("fusegrad")
            and r.levelno == logging.INFO]
    assert not [r for r in info if "malloc" in r.getMessage()]
    records = [r for r in info if r.name == "fusegrad.compile_cache"]
    matches = [LINE.match(r.getMessage()) for r in records]
    assert all(matches), [r.getMessage() for r in records]
    return matches


def _model() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(13, 7), torch.nn.Tanh(), torch.nn.Linear(7, 3))


def test_one_info_line_per_compiled_graph(caplog):
    x = torch.randn(5, 13)
    with caplog.at_level(logging.INFO, logger="fusegrad"):
        fusegrad.compile(_model())(x).sum().backward()
    (line,) = _lines(caplog)
    assert line["what"] == "training forward and backward"
    assert line["how"] == "compiled (cache miss)" and int(line["ops"]) > 5
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="fusegrad"):
        fusegrad.compile(_model())(x).sum().backward()  # a new module, the same graph
    (again,) = _lines(caplog)
    assert again["how"] in ("loaded (cache hit)", "already loaded in this process (cache hit)")
    assert again["ops"] == line["ops"]
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="fusegrad"), torch.no_grad():
        fusegrad.compile(_model())(x)
    (forward,) = _lines(caplog)
    assert forward["what"] == "forward"


def test_the_line_says_when_the_cache_is_off(caplog, monkeypatch):
    monkeypatch.setenv("FUSEGRAD_CACHE", "0")
    with caplog.at_level(logging.INFO, logger="fusegrad"), torch.no_grad():
        fusegrad.compile(lambda x: x.sin() * 3 + 1)(torch.randn(17))
    (line,) = _lines(caplog)
    assert line["how"] == "compiled (compile cache off)" and line["what"] == "forward"


@pytest.mark.parametrize("derivation, words", [
    ("forward", "forward"),
    ("training wrt0-5", "training forward and backward"),
    ("training wrt0-5 forward", "training forward (its backward compiles at first use)"),
    ("training wrt0-5 backward", "backward"),
    ("training wrt0-5 constant2 backward without [1, 3]",
     "backward (no gradient for outputs [1, 3])"),
])
def test_derivations_in_words(derivation, words):
    assert compile_cache.purpose(derivation) == words


def test_a_given_label_names_the_graph():
    text = '%0 = "dg.add"(%a, %b)\n  %1 = "dg.mul"(%0, %0)\n  "dg.yield"(%1)\n'
    assert compile_cache.describe(text, "forward", "graph7", "cpu", "compiled (cache miss)",
                                  0.5) == \
        "graph7 (3 dg ops): forward for cpu, compiled (cache miss) in 0.50 s"


def test_the_malloc_notice_is_debug(caplog, monkeypatch):
    monkeypatch.delenv("FUSEGRAD_MALLOC", raising=False)
    host_memory.keep_freed_memory.cache_clear()
    try:
        with caplog.at_level(logging.DEBUG, logger="fusegrad"):
            host_memory.keep_freed_memory()
    finally:
        host_memory.keep_freed_memory.cache_clear()
    notices = [r for r in caplog.records if r.name == "fusegrad.runtime.host_memory"]
    assert notices and all(r.levelno == logging.DEBUG for r in notices)
