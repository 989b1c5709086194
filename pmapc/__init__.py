"""pmapc: a compiler for nested pmap programs.

`pmapc.pmap` is `jax.pmap` that nests: an outer map over one axis calling an
inner map over another runs on a 2-D device mesh, with named-axis collectives
along either axis or both.
"""

from pmapc.api import Compiled, Lowered, MappedFunction, pmap, use_host_devices
from pmapc.errors import (
    ArgumentError,
    AxisError,
    DeviceError,
    DiagnosticError,
    PipelineError,
    PmapcError,
    ShapeError,
)

__all__ = [
    "ArgumentError",
    "AxisError",
    "Compiled",
    "DeviceError",
    "DiagnosticError",
    "Lowered",
    "MappedFunction",
    "PipelineError",
    "PmapcError",
    "ShapeError",
    "pmap",
    "use_host_devices",
]
