"""The pass registry: pass name -> pass class. Nothing registers itself on import."""

from __future__ import annotations

from pmapc.passes.flatten_maps import FlattenMapsPass
from pmapc.passes.lower_collectives import LowerCollectivesPass
from pmapc.passes.verify_axes import VerifyAxesPass

PASSES: dict[str, type] = {
    "verify-axes": VerifyAxesPass,
    "flatten-maps": FlattenMapsPass,
    "lower-collectives": LowerCollectivesPass,
}

# Named pipelines, usable wherever a pass name is.
PIPELINES: dict[str, str] = {
    "pmapc-to-stablehlo": "verify-axes,flatten-maps,lower-collectives",
}

__all__ = ["PASSES", "PIPELINES"]
