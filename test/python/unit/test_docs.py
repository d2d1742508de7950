"""The docs agree with the code: the pipeline picture is drawn from the pipelines."""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


def test_the_pipeline_picture_is_drawn_from_the_pipelines():
    spec = importlib.util.spec_from_file_location("pipeline_diagram",
                                                  ROOT / "scripts" / "pipeline_diagram.py")
    diagram = sys.modules["pipeline_diagram"] = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(diagram)
    committed = (ROOT / "docs" / "pipeline.svg").read_text()
    assert committed == diagram.diagram(), (
        "docs/pipeline.svg is out of date: run "
        "`.venv/bin/python scripts/pipeline_diagram.py docs/pipeline.svg`")


def test_every_pass_and_pipeline_is_documented():
    from fusegrad.passes import PASSES
    from fusegrad.pipelines import PIPELINES

    text = "".join(p.read_text() for p in (ROOT / "docs").glob("*.md"))
    missing = [name for name in [*PASSES, *PIPELINES] if name not in text]
    assert not missing, f"not described in docs/: {missing}"


def test_nothing_refers_to_files_outside_the_repository():
    """The repository stands alone: no docs or code point at a sibling checkout or /tmp."""
    suspects = []
    for path in [*ROOT.glob("*.md"), *(ROOT / "docs").glob("*.md"),
                 *(ROOT / "python").rglob("*.py"), *(ROOT / "benchmarks").glob("*.md")]:
        text = path.read_text()
        for needle in ("../shared", "shared/notes", "shared/DESIGN"):
            if needle in text:
                suspects.append(f"{path.relative_to(ROOT)}: {needle}")
    assert not suspects, suspects
