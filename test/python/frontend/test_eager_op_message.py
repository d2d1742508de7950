"""The eager-op warning points a pip user to the docs, not to the source tree."""
from __future__ import annotations

import warnings
from pathlib import Path

import torch

import fusegrad
from fusegrad import FusegradEagerOpWarning
from fusegrad.frontend.importer import NO_MAPPING

USAGE = Path(__file__).parents[3] / "docs" / "usage.md"


def test_an_op_without_mapping_points_to_the_docs():
    def fn(x):
        q, _ = torch.linalg.qr(x)  # no dg mapping: runs eagerly
        return q.sin()
    torch._dynamo.reset()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with torch.no_grad():
            fusegrad.compile(fn)(torch.randn(4, 4))
    (message,) = [str(w.message) for w in caught
                  if issubclass(w.category, FusegradEagerOpWarning)]
    assert "linalg_qr" in message and NO_MAPPING in message
    assert "'What runs eagerly' in fusegrad's docs/usage.md" in message
    assert "add one to" not in message


def test_the_docs_say_how_to_report_an_op():
    text = USAGE.read_text()
    section = text[text.index("## What runs eagerly"):]
    section = section[:section.index("\n## ", 1)]
    assert "Reporting an op" in section and "FUSEGRAD_DUMP" in section
