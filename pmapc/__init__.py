"""pmapc: a compiler for nested pmap programs."""

from pmapc.errors import (
    AxisError,
    DeviceError,
    DiagnosticError,
    PipelineError,
    PmapcError,
    ShapeError,
)

__all__ = [
    "AxisError",
    "DeviceError",
    "DiagnosticError",
    "PipelineError",
    "PmapcError",
    "ShapeError",
]
