"""lit configuration for fusegrad's FileCheck tests (`lit test/`)."""
import os
import sys

import lit.formats

config.name = "fusegrad"
config.test_format = lit.formats.ShTest()
config.suffixes = [".mlir"]
config.excludes = ["python", "lit.cfg.py"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.test_source_root, "Output")

# Tools come from the environment running lit (the venv in dev and CI), found
# next to its python, so no PATH set-up is needed.
_bin = os.path.dirname(sys.executable)


def _tool(name):
    path = os.path.join(_bin, name)
    if not os.path.exists(path):
        lit_config.fatal(f"{path} not found: run `bash scripts/dev.sh test` to install it")
    return path


config.substitutions.append(("%python", sys.executable))
config.substitutions.append(("fusegrad-opt", _tool("fusegrad-opt")))
config.substitutions.append(("filecheck", _tool("filecheck")))
config.environment["PYTHONIOENCODING"] = "utf-8"
