"""lit configuration for pmapc's FileCheck tests.

Run from the repository root with `lit -v tests/lit`. The tools are taken
from the environment that runs lit: `pmapc` and `filecheck` next to
`sys.executable` (a virtualenv's bin/), else from PATH.
"""

# lit defines `config` and `lit_config` before it runs this file.
# ruff: noqa: F821

import importlib.util
import os
import shutil
import sys

import lit.formats

# `config` and `lit_config` are provided by lit when it loads this file.
config.name = "pmapc"
config.test_format = lit.formats.ShTest(execute_external=False)
config.suffixes = [".mlir", ".py"]
config.excludes = ["Inputs", "lit.cfg.py", "__pycache__"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = config.test_source_root

# lit kills a test that runs too long only where it can kill the whole process
# tree (psutil, which the test extras install); without that, a timeout would
# crash lit instead, so the suite runs without one and says so.
TIMEOUT_SECONDS = 60
timeout_supported, why_not = lit_config.maxIndividualTestTimeIsSupported
if timeout_supported:
    config.maxIndividualTestTime = TIMEOUT_SECONDS
else:
    lit_config.warning(
        f"no per-test timeout ({TIMEOUT_SECONDS} s): {why_not} "
        "(pip install -e '.[test]' installs psutil)"
    )


def find_tool(name):
    """`name` in the bin/ folder of the Python running lit, else on PATH."""
    beside_python = os.path.join(os.path.dirname(sys.executable), name)
    if os.access(beside_python, os.X_OK):
        return beside_python
    on_path = shutil.which(name)
    if on_path is None:
        lit_config.fatal(
            f"cannot find '{name}' next to {sys.executable} or on PATH; "
            "install the package with its test extras (pip install -e '.[test]')"
        )
    return on_path


def tool_pattern(name):
    """Match `name` as a command word, not inside a path, a flag or another word."""
    return rf"(?<![-\w./]){name}(?![-\w./])"


config.substitutions.append((tool_pattern("pmapc"), find_tool("pmapc")))
config.substitutions.append((tool_pattern("FileCheck"), find_tool("filecheck")))
config.substitutions.append(("%PYTHON", sys.executable))

# JAX on the CPU: with libtpu and the CUDA plugin installed (the targets extra), JAX
# would first try to start a TPU and a GPU, and log why it cannot. Tests that compile
# for a TPU pod or a GPU machine (`pmapc ... --topology`) say `REQUIRES: targets`.
config.environment["JAX_PLATFORMS"] = os.environ.get("JAX_PLATFORMS", "cpu")


def installed(module):
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:  # its package is missing
        return False


if installed("libtpu") and installed("jax_plugins.xla_cuda12"):
    config.available_features.add("targets")
