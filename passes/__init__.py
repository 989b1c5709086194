"""The pass registry: pass name -> pass class. Nothing registers itself on import.

The order passes run in is compiler/pipeline.py's `default_pipeline`.
"""

from __future__ import annotations

from pmapc.options import DEFAULT_TARGET, Target
from pmapc.passes.base import KeptAnalysis, Pass
from pmapc.passes.combine_all_reduces import CombineAllReducesPass, reduction_keys
from pmapc.passes.flatten_maps import FlattenMapsPass
from pmapc.passes.fold_gather_slice import FoldGatherSlicePass
from pmapc.passes.fold_reshapes import FoldReshapesPass
from pmapc.passes.lower_collectives import LowerCollectivesPass
from pmapc.passes.op_index import op_index
from pmapc.passes.predicate_divergent import PredicateDivergentPass
from pmapc.passes.sink_gathers import SinkGathersPass
from pmapc.passes.sink_slices import SinkSlicesPass
from pmapc.passes.to_partitions import ToPartitionsPass
from pmapc.passes.to_replicas import ToReplicasPass
from pmapc.passes.verify_axes import VerifyAxesPass

_ALL: tuple[type[Pass], ...] = (
    VerifyAxesPass,
    FlattenMapsPass,
    PredicateDivergentPass,
    FoldGatherSlicePass,
    SinkSlicesPass,
    SinkGathersPass,
    LowerCollectivesPass,
    CombineAllReducesPass,
    FoldReshapesPass,
    ToPartitionsPass,
    ToReplicasPass,
)

# The analyses a keeper keeps current through a pass's rewrites (each declared beside
# its analysis); a pass that edits only through its rewriter keeps them all.
KEPT_ANALYSES: tuple[KeptAnalysis, ...] = (op_index, reduction_keys)

# Pass name -> pass class, for pipeline strings and --list-passes.
PASSES: dict[str, type[Pass]] = {pass_class.name: pass_class for pass_class in _ALL}

# The execution forms a pipeline can put a program in, and the pass that does.
# Partitions are what pmapc runs through jax.jit.
TARGETS: dict[Target, type[Pass]] = {
    Target.PARTITIONS: ToPartitionsPass,
    Target.REPLICAS: ToReplicasPass,
}

__all__ = ["DEFAULT_TARGET", "KEPT_ANALYSES", "PASSES", "TARGETS", "Pass"]
