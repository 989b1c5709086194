"""The pipeline pmapc runs, on one screen, and its named forms.

`default_pipeline` is the one definition of the stages after tracing and
their order; the driver, `pmapc opt`'s named pipelines and `--list-passes`
read it. Named pipelines (`pmapc-to-stablehlo`, `pmapc-lower{target=replicas}`)
expand in place in a pipeline string (passes/pipeline_text.py); their options
`target` (the pass that puts the program in its execution form:
passes/__init__.py's TARGETS), `replica-groups` and `ragged` reach the passes
that take them. Running a pipeline is passes/manager.py's.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

from pmapc import options
from pmapc.errors import PipelineError
from pmapc.options import (
    DEFAULT_GROUP_FORM,
    DEFAULT_RAGGED_FORM,
    DEFAULT_TARGET,
    GroupForm,
    RaggedForm,
    Target,
)
from pmapc.passes import TARGETS, Pass, pipeline_text
from pmapc.passes.combine_all_reduces import CombineAllReducesPass
from pmapc.passes.flatten_maps import FlattenMapsPass
from pmapc.passes.fold_gather_slice import FoldGatherSlicePass
from pmapc.passes.fold_reshapes import FoldReshapesPass
from pmapc.passes.lower_collectives import LowerCollectivesPass
from pmapc.passes.manager import Element, UpstreamPass
from pmapc.passes.predicate_divergent import PredicateDivergentPass
from pmapc.passes.sink_gathers import SinkGathersPass
from pmapc.passes.sink_slices import SinkSlicesPass
from pmapc.passes.to_partitions import ToPartitionsPass, group_form
from pmapc.passes.verify_axes import VerifyAxesPass


def default_pipeline(
    target: Target = DEFAULT_TARGET,
    replica_groups: GroupForm = DEFAULT_GROUP_FORM,
    ragged: RaggedForm = DEFAULT_RAGGED_FORM,
) -> tuple[Element, ...]:
    """`pmapc-to-stablehlo`: every stage after tracing, in order; in partition form
    the replica groups written as `replica_groups` says ("named" or "dense"), and
    ragged_all_to_all lowered in form `ragged` ("native" or "expanded")."""
    return (
        VerifyAxesPass(),  # every axis bound, every shape right
        FlattenMapsPass(),  # nested maps -> one SPMD program over the mesh
        PredicateDivergentPass(),  # no device waits in a collective others skip
        FoldGatherSlicePass(),  # a gather then a slice of one's own block cancel
        SinkSlicesPass(),  # arguments split over inner axes too
        SinkGathersPass(),  # results returned split, not gathered
        # named collectives -> groups of mesh positions (mesh axes, unless dense)
        LowerCollectivesPass(ragged=ragged, replica_groups=lowered_groups(target, replica_groups)),
        CombineAllReducesPass(),  # independent all_reduces -> one
        target_pass(target, replica_groups),  # the form jax.jit runs, or the replica form
        *SIMPLIFY,  # fewer reshapes, constants shared, dead ops gone
    )


# `simplify`: reshape chains folded, then MLIR's canonicalize and cse, last because
# MLIR's passes drop every op object pmapc's passes share (the op index).
# Canonicalize runs without region simplification (merging blocks, dropping
# unreachable ones and dead block arguments): StableHLO's regions are single
# blocks, where it finds nothing to do, and it cost a third of its time on W4.
CANONICALIZE = UpstreamPass("canonicalize", "canonicalize{region-simplify=disabled}")
SIMPLIFY: tuple[Element, ...] = (FoldReshapesPass(), CANONICALIZE, UpstreamPass("cse", "cse"))


@functools.cache  # its passes are options only, so one pipeline serves every map
def embedded_pipeline(ragged: RaggedForm) -> tuple[Element, ...]:
    """The pipeline of a map inside `jax.jit` (compiler/embed.py): `pmapc-to-stablehlo`
    for the partition form, groups as device ids, without MLIR's canonicalize and
    cse. XLA simplifies after, its CSE included (on pmapc's programs it moves the
    constants up). In JAX's MLIR context, where every dialect is loaded,
    canonicalize's set-up alone gathers the patterns of every op of every dialect
    for each new program (pmapc's own context loads four dialects); and a
    pipeline of pmapc's passes alone runs without MLIR's pass manager
    (passes/manager.py)."""
    passes = default_pipeline(Target.PARTITIONS, GroupForm.DENSE, ragged)
    return tuple(p for p in passes if not isinstance(p, UpstreamPass))


# The stages every program needs; the others only move less data.
REQUIRED: tuple[type[Pass], ...] = (
    VerifyAxesPass,
    FlattenMapsPass,
    PredicateDivergentPass,
    LowerCollectivesPass,
    *TARGETS.values(),
)


def lowered_groups(target: Target, replica_groups: GroupForm) -> GroupForm:
    """How lower-collectives writes groups: as the partition form writes them; as
    device ids for the replica form (which XLA reads no other way)."""
    return replica_groups if target is Target.PARTITIONS else GroupForm.DENSE


def target_pass(target: Target, replica_groups: GroupForm = DEFAULT_GROUP_FORM) -> Pass:
    """The pass that puts a lowered program in `target` form."""
    if target is Target.PARTITIONS:
        return ToPartitionsPass(replica_groups=replica_groups)
    return TARGETS[target]()


def lowering_pipeline(
    target: Target = DEFAULT_TARGET,
    replica_groups: GroupForm = DEFAULT_GROUP_FORM,
    ragged: RaggedForm = DEFAULT_RAGGED_FORM,
) -> tuple[Element, ...]:
    """`pmapc-lower`: the required stages of the default pipeline, in its order."""
    passes = default_pipeline(target, replica_groups, ragged)
    return tuple(p for p in passes if type(p) in REQUIRED)


# Named pipelines, usable wherever a pass name is: `pmapc-lower{target=replicas}`,
# `pmapc-to-stablehlo{replica-groups=dense}`.
PIPELINES: dict[str, Callable[[Target, GroupForm, RaggedForm], tuple[Element, ...]]] = {
    "pmapc-lower": lowering_pipeline,
    "pmapc-to-stablehlo": default_pipeline,
    "simplify": lambda *_: SIMPLIFY,
}
# The named pipelines that take no option.
WITHOUT_OPTIONS = frozenset(("simplify",))


def parse_pipeline(text: str) -> list:
    """Pass instances for a pipeline string (passes/pipeline_text.py), the named
    pipelines above usable in it."""
    named = {name: functools.partial(_expand, name) for name in PIPELINES}
    return pipeline_text.parse_pipeline(text, named)


def _expand(name: str, given: dict[str, str]) -> tuple[Element, ...]:
    if name in WITHOUT_OPTIONS and given:
        raise PipelineError(f"pipeline '{name}' takes no options, got '{sorted(given)[0]}'")
    return PIPELINES[name](*_pipeline_options(name, given))


def describe(name: str, target: Target = DEFAULT_TARGET) -> str:
    """A named pipeline's passes, comma-separated (for --list-passes and --help)."""
    passes = PIPELINES[name](target, DEFAULT_GROUP_FORM, DEFAULT_RAGGED_FORM)
    return ",".join(p.text if isinstance(p, UpstreamPass) else p.name for p in passes)


def _pipeline_options(name: str, given: dict[str, str]) -> tuple[Target, GroupForm, RaggedForm]:
    """The `target`, `replica-groups` and `ragged` options of a named pipeline, read as
    types."""
    unknown = sorted(set(given) - {"target", "replica-groups", "ragged"})
    if unknown:
        raise PipelineError(
            f"pipeline '{name}' has no option '{unknown[0]}'; its options are: "
            "target, replica-groups, ragged"
        )
    text = given.get("target", DEFAULT_TARGET)
    target = options.parse(Target, text)
    if target is None:
        choices = " or ".join(options.choices(Target))
        raise PipelineError(f"option 'target' of pipeline '{name}' takes {choices}, got '{text}'")
    form = group_form(given.get("replica-groups", DEFAULT_GROUP_FORM), f"pipeline '{name}'")
    text = given.get("ragged", DEFAULT_RAGGED_FORM)
    ragged = options.parse(RaggedForm, text)
    if ragged is None:
        choices = " or ".join(options.choices(RaggedForm))
        raise PipelineError(f"option 'ragged' of pipeline '{name}' takes {choices}, got '{text}'")
    return target, form, ragged
