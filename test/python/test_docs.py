"""The docs agree with the code: the pipeline picture is drawn from the pipelines."""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_pipeline_picture_is_drawn_from_the_pipelines():
    spec = importlib.util.spec_from_file_location("pipeline_diagram",
                                                  ROOT / "scripts" / "pipeline_diagram.py")
    diagram = sys.modules["pipeline_diagram"] = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(diagram)
    committed = (ROOT / "docs" / "pipeline.svg").read_text()
    assert committed == diagram.diagram(), (
        "docs/pipeline.svg is out of date: run "
        "`.venv/bin/python scripts/pipeline_diagram.py docs/pipeline.svg`")
