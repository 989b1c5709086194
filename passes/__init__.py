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

# The execution forms a named pipeline can end in (its `target` option), and
# the pass that produces each. Partitions are what pmapc runs through jax.jit.
TARGETS: dict[str, str] = {"partitions": "to-partitions", "replicas": "to-replicas"}
DEFAULT_TARGET = "partitions"

# Named pipelines, usable wherever a pass name is: `pmapc-lower{target=replicas}`.
# `{target}` stands for the pass of the pipeline's target.
PIPELINES: dict[str, str] = {
    # The passes every program needs: named axes to collectives over devices.
    "pmapc-lower": "verify-axes,flatten-maps,lower-collectives,{target}",
    # What pmapc runs by default: the above with the data-movement optimizations.
    "pmapc-to-stablehlo": (
        "verify-axes,flatten-maps,fold-gather-slice,sink-slices,sink-gathers,"
        "lower-collectives,combine-all-reduces,simplify,{target}"
    ),
}


def expand_pipeline(name: str, target: str = DEFAULT_TARGET) -> str:
    """The passes of the named pipeline `name` for `target`, comma-separated."""
    return PIPELINES[name].format(target=TARGETS[target])


__all__ = ["DEFAULT_TARGET", "PASSES", "PIPELINES", "TARGETS", "expand_pipeline"]
