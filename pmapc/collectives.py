"""The collective kinds of pmapc IR: one record per kind, each defined once.

A `Collective` holds what pmapc knows about a kind: its name (the IR op is
`@pmapc.<kind>`), its parameters with their types (JAX's names), whether it
is an all-reduce and the StableHLO op that combines values, the rule for its
result shape (`pmapc/shapes.py`), the JAX primitive it comes from and how its
parameters are read from that primitive's.

Everything else reads these records: the IR schema (`pmapc/dialect.py`), the
tracer (`lowering/primitives.py`; `lowering/jax_api.py` looks up the JAX
primitive a record names), verify-axes, combine-all-reduces and sink-gathers.
How lower-collectives rewrites each kind is its table `RULES`, keyed by these
records. Adding a kind is one record here (with what it does to the variance of
values: `agrees_over_group`, `communicates`, `spans_mesh`, read by
lowering/divergence.py and passes/variance.py), one rule there, a fold rule
(lowering/fold_rules.py), and their tests (CONTRIBUTING.md, "Adding a collective").

Each kind's parameters are a frozen dataclass (`AllToAllParams` and so on) that
rules read by attribute (`params.split_axis`); the kinds JAX lets split their
group into `axis_index_groups` (psum, pmax, pmin, all_gather, psum_scatter,
all_to_all, ragged_all_to_all) have `Grouped` parameters, and
`Collective.result_shapes` checks the groups and sizes the results by them.
ragged_all_to_all takes a fixed set of operands (`operands`), which its shape
rule reads together.

The records live here rather than in `dialect.py` because they hold no IR:
the shape rules, the tracer's parameter reading and the tests use them
without the MLIR schema, and `dialect.py` only reads and writes them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from pmapc import shapes
from pmapc.params import (
    AllGatherParams,
    AllToAllParams,
    Grouped,
    IndexGroups,
    NoParams,
    Param,
    Params,
    PpermuteParams,
    PsumScatterParams,
    RaggedAllToAllParams,
    ReductionParams,
)

# (params, operand shape, "'model' (size 4)" for messages, group size) -> result shape;
# for a kind of fixed `operands`, the shapes of all of them -> its one result's.
ShapeRule = Callable[[Any, Any, str, int], shapes.Shape]
JaxParamsReader = Callable[[Mapping[str, object]], dict[str, object]]

INDEX_GROUPS_NAME = "axis_index_groups"


def index_groups_from_jax(groups) -> IndexGroups | None:
    """JAX's `axis_index_groups` (None, or a sequence of sequences of ints) as
    IndexGroups of Python ints."""
    if groups is None:
        return None
    return tuple(tuple(int(index) for index in group) for group in groups)


# eq=False: each record exists once (`ALL`), so it equals only itself and hashes by
# identity; the passes look records up in dicts for every op they lower.
@dataclasses.dataclass(frozen=True, eq=False)
class Collective:
    """One collective kind: what every stage needs to know about it."""

    kind: str
    params_type: type[Params]
    shape_rule: ShapeRule
    # The kind's primitive in `jax._src.lax.parallel`, looked up by lowering/jax_api.py.
    jax_primitive: str
    # An all-reduce: one result per operand, each of its operand's type; axes that
    # `jax.vmap` made positional are reduced locally with `reducer`.
    reduction: bool = False
    # The StableHLO op that combines two values (the all_reduce / reduce_scatter region).
    reducer: str | None = None
    # Whether JAX takes bool operands (psum_scatter's reducer is `lax.add`, which does not).
    takes_bool: bool = True
    # Reads the parameters from the JAX primitive's; None: the ones of the same names.
    read_jax_params: JaxParamsReader | None = None
    # Its result is the same on every device of its group (a reduction or a gather of
    # the whole group), so it no longer varies over the axes it acts over
    # (passes/variance.py; with index groups, the groups may differ).
    agrees_over_group: bool = False
    # Whether the devices of its group exchange data (each must reach it; only
    # axis_index does not: passes/predicate_divergent.py).
    communicates: bool = True
    # XLA runs it as one op over every group together (a collective_permute has source
    # and target pairs, no replica groups): every device of the mesh must reach it,
    # not only those of one group.
    spans_mesh: bool = False
    # The names of its operands where it takes a fixed set of them and returns one
    # result (ragged_all_to_all's six); empty: one result per operand, each operand
    # shaped on its own by `shape_rule` (one operand, or several for a reduction).
    operands: tuple[str, ...] = ()
    # The operands that must be integers (ragged_all_to_all's offsets and sizes).
    integer_operands: tuple[str, ...] = ()

    @property
    def target(self) -> str:
        """The custom_call target of this kind in pmapc IR."""
        return f"pmapc.{self.kind}"

    @property
    def params(self) -> tuple[Param, ...]:
        """Its parameters as the IR holds them."""
        return self.params_type.schema()

    @property
    def takes_index_groups(self) -> bool:
        return issubclass(self.params_type, Grouped)

    @property
    def combiner(self) -> str:
        """`reducer`, for a kind that combines values (an all-reduce or psum_scatter)."""
        assert self.reducer is not None, f"'{self.kind}' combines no values"
        return self.reducer

    def acting_size(self, params: Params, group_size: int) -> int:
        """How many devices act together over axes of `group_size` devices: the size of
        an index group where `axis_index_groups` splits the group (the gathered, scattered
        or split size), else `group_size`."""
        index_groups = params.index_groups
        return len(index_groups[0]) if index_groups else group_size

    def check_index_groups(self, params: Params, axes: Sequence[str], group_size: int) -> None:
        """ShapeError unless the index groups (if any) split the `group_size` positions
        along `axes` as JAX allows: each position once; groups of one size except in an
        all-reduce."""
        index_groups = params.index_groups
        if index_groups is None:
            return
        where = shapes.describe_axes(axes, group_size, index_groups)
        shapes.check_index_groups(
            self.kind, index_groups, where, group_size, equal_sizes=not self.reduction
        )

    def result_shape(
        self, params: Params, shape: shapes.Shape, axes: Sequence[str], group_size: int
    ) -> shapes.Shape:
        """The result shape over `axes`, a group of `group_size` devices, of a kind
        that shapes each operand on its own; ShapeError if the operand does not fit
        the parameters, index groups included."""
        assert not self.operands, f"'{self.kind}' is shaped by all its operands"
        return self.result_shapes(params, (shape,), axes, group_size)[0]

    def result_shapes(
        self,
        params: Params,
        operand_shapes: Sequence[shapes.Shape],
        axes: Sequence[str],
        group_size: int,
    ) -> tuple[shapes.Shape, ...]:
        """The shapes of the results of an op of this kind whose operands have
        `operand_shapes`, over `axes`, a group of `group_size` devices; ShapeError if
        they do not fit the parameters, index groups included."""
        self.check_index_groups(params, axes, group_size)
        where = shapes.describe_axes(axes, group_size, params.index_groups)
        for shape in operand_shapes:
            shapes.check_static(shape, f"an operand of '{self.kind}' over {where}")
        size = self.acting_size(params, group_size)
        if self.operands:
            return (self.shape_rule(params, tuple(operand_shapes), where, size),)
        return tuple(self.shape_rule(params, shape, where, size) for shape in operand_shapes)

    def params_from_jax(self, jax_params: Mapping[str, object]) -> Params:
        """This kind's parameters, read from its JAX primitive's parameters."""
        if self.read_jax_params is not None:
            values = self.read_jax_params(jax_params)
        else:
            values = {p.name: jax_params[p.name] for p in self.params if not p.optional}
        if self.takes_index_groups:
            values[INDEX_GROUPS_NAME] = index_groups_from_jax(jax_params.get(INDEX_GROUPS_NAME))
        return self.params_type(**values)


def _all_to_all_from_jax(jax_params: Mapping[str, object]) -> dict[str, object]:
    # At the primitive level JAX's all_to_all always splits and concatenates in
    # place (untiled calls add and squeeze a unit dimension around it).
    return {
        "split_axis": jax_params["split_axis"],
        "concat_axis": jax_params["concat_axis"],
        "tiled": True,
    }


def _ppermute_from_jax(jax_params: Mapping[str, Any]) -> dict[str, object]:
    return {"perm": tuple(tuple(pair) for pair in jax_params["perm"])}


PSUM = Collective(
    "psum",
    ReductionParams,
    shapes.same_shape,
    jax_primitive="psum_p",
    reduction=True,
    reducer="stablehlo.add",
    agrees_over_group=True,
)
PMAX = Collective(
    "pmax",
    ReductionParams,
    shapes.same_shape,
    jax_primitive="pmax_p",
    reduction=True,
    reducer="stablehlo.maximum",
    agrees_over_group=True,
)
PMIN = Collective(
    "pmin",
    ReductionParams,
    shapes.same_shape,
    jax_primitive="pmin_p",
    reduction=True,
    reducer="stablehlo.minimum",
    agrees_over_group=True,
)
ALL_GATHER = Collective(
    "all_gather",
    AllGatherParams,
    shapes.all_gather_shape,
    jax_primitive="all_gather_p",
    agrees_over_group=True,
)
PSUM_SCATTER = Collective(
    "psum_scatter",
    PsumScatterParams,
    shapes.psum_scatter_shape,
    jax_primitive="reduce_scatter_p",
    reducer="stablehlo.add",
    takes_bool=False,
)
ALL_TO_ALL = Collective(
    "all_to_all",
    AllToAllParams,
    shapes.all_to_all_shape,
    jax_primitive="all_to_all_p",
    read_jax_params=_all_to_all_from_jax,
)
PPERMUTE = Collective(
    "ppermute",
    PpermuteParams,
    shapes.ppermute_shape,
    jax_primitive="ppermute_p",
    read_jax_params=_ppermute_from_jax,
    spans_mesh=True,
)
RAGGED_ALL_TO_ALL = Collective(
    "ragged_all_to_all",
    RaggedAllToAllParams,
    shapes.ragged_all_to_all_shape,
    jax_primitive="ragged_all_to_all_p",
    operands=shapes.RAGGED_OPERANDS,
    integer_operands=shapes.RAGGED_OPERANDS[2:],
)
AXIS_INDEX = Collective(
    "axis_index",
    NoParams,
    shapes.axis_index_shape,
    jax_primitive="axis_index_p",
    communicates=False,
)

# Every kind, in the order diagnostics list them.
ALL: tuple[Collective, ...] = (
    PSUM,
    PMAX,
    PMIN,
    ALL_GATHER,
    PSUM_SCATTER,
    ALL_TO_ALL,
    RAGGED_ALL_TO_ALL,
    PPERMUTE,
    AXIS_INDEX,
)
BY_KIND: dict[str, Collective] = {collective.kind: collective for collective in ALL}

# The StableHLO ops pmapc builds reducer regions from.
REDUCER_OPS: frozenset[str] = frozenset(c.reducer for c in ALL if c.reducer is not None)
