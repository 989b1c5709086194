"""The examples as modules, for the benchmarks and tests that call their functions.

`load_example(name)` runs examples/<name>.py's module-level code (its
`pmapc.use_host_devices(8)` included: load an example before JAX starts its CPU
backend) but not its `main`, once per process.
"""

from __future__ import annotations

import functools
import importlib.util
from pathlib import Path
from types import ModuleType

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


@functools.cache
def load_example(name: str) -> ModuleType:
    """examples/<name>.py as the module `example_<name>`."""
    spec = importlib.util.spec_from_file_location(f"example_{name}", EXAMPLES / f"{name}.py")
    assert spec is not None and spec.loader is not None, name
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
