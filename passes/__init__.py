"""The pass registry: pass name -> pass class. Nothing registers itself on import."""

from __future__ import annotations

from pmapc.passes.combine_all_reduces import CombineAllReducesPass
from pmapc.passes.flatten_maps import FlattenMapsPass
from pmapc.passes.fold_gather_slice import FoldGatherSlicePass
from pmapc.passes.lower_collectives import LowerCollectivesPass
from pmapc.passes.simplify import SimplifyPass
from pmapc.passes.sink_gathers import SinkGathersPass
from pmapc.passes.sink_slices import SinkSlicesPass
from pmapc.passes.to_partitions import ToPartitionsPass
from pmapc.passes.to_replicas import ToReplicasPass
from pmapc.passes.verify_axes import VerifyAxesPass

PASSES: dict[str, type] = {
    "verify-axes": VerifyAxesPass,
    "flatten-maps": FlattenMapsPass,
    "fold-gather-slice": FoldGatherSlicePass,
    "sink-slices": SinkSlicesPass,
    "sink-gathers": SinkGathersPass,
    "lower-collectives": LowerCollectivesPass,
    "combine-all-reduces": CombineAllReducesPass,
    "simplify": SimplifyPass,
    "to-partitions": ToPartitionsPass,
    "to-replicas": ToReplicasPass,
}

# Named pipelines, usable wherever a pass name is.
PIPELINES: dict[str, str] = {
    # The passes every program needs: named axes to replica groups.
    "pmapc-lower": "verify-axes,flatten-maps,lower-collectives",
    # What pmapc runs by default: the above with the data-movement optimizations.
    "pmapc-to-stablehlo": (
        "verify-axes,flatten-maps,fold-gather-slice,sink-slices,sink-gathers,"
        "lower-collectives,combine-all-reduces,simplify"
    ),
}

__all__ = ["PASSES", "PIPELINES"]
