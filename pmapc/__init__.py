"""pmapc: a compiler for nested pmap programs.

`pmapc.pmap` is `jax.pmap` that nests: an outer map over one axis calling an
inner map over another runs on a 2-D device mesh, with named-axis collectives
along either axis or both. It composes with `jax.jit`, `grad` and `vmap`;
`pmapc.lower(f, *args)` shows the IR of every compiler stage for any function
that calls it.
"""

from importlib import metadata as _metadata

from pmapc.api import MappedFunction, fold_onto, lower, pmap, use_host_devices
from pmapc.compiler.agreement import set_process_timeout
from pmapc.compiler.targets import target_devices
from pmapc.errors import (
    ArgumentError,
    AxisError,
    DeviceError,
    DiagnosticError,
    FoldError,
    PassFailure,
    PipelineError,
    PmapcError,
    ProcessError,
    ShapeError,
    UnsupportedError,
)
from pmapc.jax_releases import UntestedJaxWarning, warn_if_untested
from pmapc.stages import Compiled, Lowered

warn_if_untested()

try:
    # The version is written once, in pyproject.toml; the installed metadata has it.
    __version__ = _metadata.version("pmapc")
except _metadata.PackageNotFoundError:  # imported from a tree that was never installed
    __version__ = "0+unknown"

__all__ = [
    "ArgumentError",
    "AxisError",
    "Compiled",
    "DeviceError",
    "DiagnosticError",
    "FoldError",
    "Lowered",
    "MappedFunction",
    "PassFailure",
    "PipelineError",
    "PmapcError",
    "ProcessError",
    "ShapeError",
    "UnsupportedError",
    "UntestedJaxWarning",
    "__version__",
    "fold_onto",
    "lower",
    "pmap",
    "set_process_timeout",
    "target_devices",
    "use_host_devices",
]
