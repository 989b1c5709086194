"""lower-collectives: named-axis collectives become StableHLO collectives.

Needs the mesh that flatten-maps records. Each `@pmapc.<kind>` becomes its
StableHLO collective with explicit `replica_groups` over the mesh (a tuple of
axes groups over the product of those axes, ordered as the tuple names them),
written as those mesh axes (`#stablehlo.replica_group_mesh_axes` over an
`sdy.mesh` op added once; their axes of size 1 left out, which change no
group), or as device ids with the option `replica-groups=dense`, for groups
split by index groups, and where the XLA in use cannot read an axis's name.
Groups over axes are never listed device by device, so a collective costs the
same on any mesh:

  psum, pmax, pmin -> all_reduce (add, maximum, minimum)
  all_gather       -> all_gather (untiled: a unit dimension gathered)
  psum_scatter     -> reduce_scatter (untiled: the unit dimension dropped)
  all_to_all       -> all_to_all (untiled: JAX's expand, exchange, squeeze)
  ragged_all_to_all -> XLA's custom call, or all_to_alls of padded slices
                      (the `ragged` option: passes/ragged.py)
  ppermute         -> collective_permute over every group's device pairs
  axis_index       -> replica_id arithmetic, done once per function and axes

With `axis_index_groups`, every group over the axes splits into one replica
group per index group (`replica_groups_for`, device ids), and an index group's
size is what all_gather, reduce_scatter and all_to_all exchange over. XLA's
ragged-all-to-all custom call reads device ids only.

One function per rule; `RULES`, at the end, names the rule of each kind
(the records of pmapc/collectives.py).

The result is target-neutral: `stablehlo.replica_id` stands for the device's
position in the mesh, and groups and pairs list mesh positions. A target pass
picks how XLA runs it and sets the module's device counts: to-partitions
(partition_id, channel handles; what jax.jit runs) or to-replicas.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import ClassVar

from pmapc import collectives, dialect, hlo, ir, options
from pmapc.collectives import Collective
from pmapc.dialect import CollectiveView
from pmapc.errors import Category, PipelineError, ShapeError
from pmapc.mesh import (
    Mesh,
    axis_index_terms,
    canonical_axes,
    permutation_pairs,
    replica_groups_for,
)
from pmapc.options import DEFAULT_GROUP_FORM, DEFAULT_RAGGED_FORM, GroupForm, RaggedForm
from pmapc.passes import ragged
from pmapc.passes.base import Analyses, Analysis, Form
from pmapc.passes.op_index import index_of, op_index
from pmapc.passes.to_partitions import MeshNames, group_form
from pmapc.rewriter import Builder, Rewriter


@dataclasses.dataclass(frozen=True)
class LowerCollectivesPass:
    """Rewrite named-axis collectives into StableHLO collectives with replica groups."""

    name: ClassVar[str] = "lower-collectives"
    accepts: ClassVar[Form] = Form.FLATTENED
    produces: ClassVar[Form] = Form.LOWERED
    # native: XLA's ragged-all-to-all (GPU, TPU); expanded: all_to_alls (every XLA)
    ragged: RaggedForm = DEFAULT_RAGGED_FORM
    # named: groups that are whole mesh axes written as those axes; dense: device ids
    replica_groups: GroupForm = DEFAULT_GROUP_FORM
    reads: ClassVar[tuple[Analysis, ...]] = (op_index,)

    def __post_init__(self) -> None:
        # a pipeline string gives the options as text: read them here, once
        form = options.parse(RaggedForm, self.ragged)
        if form is None:
            choices = " or ".join(options.choices(RaggedForm))
            raise PipelineError(
                f"option 'ragged' of pass '{self.name}' takes {choices}, got '{self.ragged}'"
            )
        object.__setattr__(self, "ragged", form)
        groups = group_form(self.replica_groups, f"pass '{self.name}'")
        object.__setattr__(self, "replica_groups", groups)

    def run(self, module: ir.Module, analyses: Analyses, rewriter: Rewriter) -> bool:
        views = analyses.views
        ops = []
        for op in index_of(module, analyses).ops(dialect.CUSTOM_CALL):
            target = views.target(op)
            if target == dialect.MAP_TARGET:
                raise dialect.error_at(
                    op, "'pmapc.map' is still here; run flatten-maps before lower-collectives"
                )
            if dialect.is_pmapc_target(target):
                ops.append(op)
        lowering = Lowering(views.mesh_of(module), views, rewriter, self.ragged)
        lowering.name_groups(module, self.replica_groups)
        for op in ops:
            lowering.lower(op)
        lowering.finish()
        return bool(ops)


class Lowering:
    """The state of one run: the mesh, and values, groups and ops built once."""

    def __init__(
        self,
        mesh: Mesh,
        views: dialect.Views,
        rewriter: Rewriter,
        ragged_form: RaggedForm = DEFAULT_RAGGED_FORM,
    ):
        self.mesh = mesh
        self.ragged_form = ragged_form
        self.views = views
        self.rewriter = rewriter
        # Values computed once per function (by its symbol name): the replica id, and
        # axis indices by axes; the placeholder they go before.
        self.entry_values: dict[tuple[str, tuple[str, ...] | None], ir.Value] = {}
        self.anchors: dict[str, ir.Operation] = {}
        # Replica groups by (axes, index groups, written as axes).
        self.group_attrs: dict[tuple, ir.Attribute] = {}
        # Where groups over whole axes are written as those axes (`name_groups`; none:
        # every group is device ids).
        self.names: MeshNames | None = None
        # (kind, config) of the collectives whose axes and index groups were checked.
        self.checked: set[tuple] = set()
        # The first op built for each key (see `cloned`).
        self.templates: dict[tuple, ir.Operation] = {}

    def lower(self, op: ir.Operation) -> None:
        """Replace `op` by what its rule builds."""
        view = self.views.collective(op)
        if (view.kind, view.config) not in self.checked:
            self.check_axes(view)
            self.check_index_groups(view)
            self.checked.add((view.kind, view.config))
        rule = RULES[view.collective]
        self.rewriter.replace(op, rule(self, view, self.rewriter.before(op)))

    def check_axes(self, view: CollectiveView) -> None:
        for axis in view.axes:
            if axis not in self.mesh.axis_names:
                names = ", ".join(f"'{n}'" for n in self.mesh.axis_names) or "none"
                raise dialect.error_at(
                    view.op,
                    f"axis '{axis}' is not an axis of the mesh "
                    f"(axes: {names}); run flatten-maps first",
                    Category.AXIS,
                )
        if len(set(view.axes)) != len(view.axes):
            raise dialect.error_at(
                view.op,
                f"'{view.kind}' names an axis twice: {list(view.axes)}; name each axis once",
                Category.AXIS,
            )

    def check_index_groups(self, view: CollectiveView) -> None:
        """Index groups that do not split the group over the axes (verify-axes' check,
        for modules that come here without it)."""
        if view.params.index_groups is None:
            return
        try:
            view.collective.check_index_groups(
                view.params, view.axes, self.mesh.group_size(view.axes)
            )
        except ShapeError as error:
            raise dialect.error_at(view.op, str(error), Category.SHAPE) from None

    def acting_size(self, view: CollectiveView) -> int:
        """How many devices exchange data in each of the op's replica groups."""
        return view.collective.acting_size(view.params, self.mesh.group_size(view.axes))

    def name_groups(self, module: ir.Module, form: GroupForm) -> None:
        """Write groups that are whole mesh axes as those axes, if `form` is named and
        the XLA in use reads every axis name of the mesh."""
        names = MeshNames(module, self.mesh, form, self.rewriter)
        self.names = names if names.mesh is not None else None

    def groups(self, view: CollectiveView, dense: bool = False) -> ir.Attribute:
        """The op's replica groups: its mesh axes (`canonical_axes`), or device ids
        where index groups split them, the form is dense or `dense` asks for them."""
        index_groups = view.params.index_groups
        names = self.names if index_groups is None and not dense else None
        key = (view.axes, index_groups, names is not None)
        if key not in self.group_attrs:
            if names is not None:
                axes = canonical_axes(self.mesh, view.axes)
                attr = ir.mesh_axis_groups_attr(names.symbol(), axes)
            else:
                attr = hlo.groups_attr(replica_groups_for(self.mesh, view.axes, index_groups))
            self.group_attrs[key] = attr
        return self.group_attrs[key]

    def cloned(self, key: tuple, b: Builder) -> ir.Operation | None:
        """A copy by `b` of the op built for `key` before; None the first time (the
        caller builds it and keeps it in `templates`).

        One native clone instead of building the op and its reducer region again;
        the caller replaces the copy's operands.
        """
        template = self.templates.get(key)
        if template is None:
            return None
        op = b.clone(template)
        if op.location != b.loc:
            ir.set_locations(op, b.loc)
        return op

    def axis_index_in(self, function: ir.Operation, axes: tuple[str, ...], loc) -> ir.Value:
        """The device's index along `axes`, computed once at the top of `function`."""
        key = (ir.symbol_name(function), axes)
        if key not in self.entry_values:
            b = self.entry_point(function, loc)
            device = self.replica_id_in(function, loc)
            index = None
            for stride, size, weight in axis_index_terms(self.mesh, axes):
                coord = device
                if stride != 1:
                    coord = hlo.binary(b, "divide", coord, hlo.i32_scalar(b, stride))
                if stride * size != self.mesh.size:
                    coord = hlo.binary(b, "remainder", coord, hlo.i32_scalar(b, size))
                if weight != 1:
                    coord = hlo.binary(b, "multiply", coord, hlo.i32_scalar(b, weight))
                index = coord if index is None else hlo.binary(b, "add", index, coord)
            self.entry_values[key] = index if index is not None else hlo.i32_scalar(b, 0)
        return self.entry_values[key]

    def replica_id_in(self, function: ir.Operation, loc) -> ir.Value:
        """The device's id as i32, read once at the top of `function`."""
        key = (ir.symbol_name(function), None)
        if key not in self.entry_values:
            b = self.entry_point(function, loc)
            self.entry_values[key] = hlo.convert(b, hlo.replica_id(b), ir.i32_type())
        return self.entry_values[key]

    def entry_point(self, function: ir.Operation, loc) -> Builder:
        """Where per-function values go: at the top of the function, in creation order.

        They go before a placeholder put first in the function (the function's
        first op may be a collective this pass erases); finish() removes it.
        """
        key = ir.symbol_name(function)
        if key not in self.anchors:
            top = self.rewriter.at_start(ir.function_entry_block(function), function.location)
            self.anchors[key] = hlo.constant_op(
                top, ir.scalar_i32_attr(0), ir.tensor_type([], ir.i32_type())
            )
        return self.rewriter.before(self.anchors[key], loc)

    def finish(self) -> None:
        for placeholder in self.anchors.values():
            self.rewriter.erase(placeholder)


# ----------------------------------------------------------------------------
# One rule per kind: (lowering, view) -> the values that replace the op's results


def lower_reduction(lowering: Lowering, view: CollectiveView, b: Builder) -> list[ir.Value]:
    results = []
    groups, reducer = lowering.groups(view), view.collective.combiner
    for operand in view.op.operands:
        key = ("stablehlo.all_reduce", reducer, operand.type, groups)
        op = lowering.cloned(key, b)
        if op is None:
            op = b.create(
                "stablehlo.all_reduce",
                [operand],
                [operand.type],
                {"replica_groups": groups},
                regions=1,
            )
            hlo.build_reducer(b, op.regions[0], ir.element_type_of(operand.type), reducer)
            lowering.templates[key] = op
        else:
            b.rewriter.set_operand(op, 0, operand)
        results.append(op.result)
    return results


def lower_all_gather(lowering: Lowering, view: CollectiveView, b: Builder) -> list[ir.Value]:
    params = view.params
    assert isinstance(params, collectives.AllGatherParams)
    operand, dim = view.op.operands[0], params.all_gather_dimension
    if not params.tiled:
        operand = hlo.insert_unit_dim(b, operand, dim)
    attributes = {"all_gather_dim": ir.i64_attr(dim), "replica_groups": lowering.groups(view)}
    op = b.create("stablehlo.all_gather", [operand], [view.op.results[0].type], attributes)
    return [op.result]


def lower_psum_scatter(lowering: Lowering, view: CollectiveView, b: Builder) -> list[ir.Value]:
    params = view.params
    assert isinstance(params, collectives.PsumScatterParams)
    operand, dim = view.op.operands[0], params.scatter_dimension
    result_type = view.op.results[0].type
    scattered_shape = list(ir.shape_of(operand.type))
    scattered_shape[dim] //= lowering.acting_size(view)
    element_type = ir.element_type_of(operand.type)
    attributes = {"scatter_dimension": ir.i64_attr(dim), "replica_groups": lowering.groups(view)}
    op = b.create(
        "stablehlo.reduce_scatter",
        [operand],
        [ir.tensor_type(scattered_shape, element_type)],
        attributes,
        regions=1,
    )
    hlo.build_reducer(b, op.regions[0], element_type, view.collective.combiner)
    return [hlo.reshape(b, op.result, ir.shape_of(result_type))]


def lower_all_to_all(lowering: Lowering, view: CollectiveView, b: Builder) -> list[ir.Value]:
    params = view.params
    assert isinstance(params, collectives.AllToAllParams)
    operand, split, concat = view.op.operands[0], params.split_axis, params.concat_axis
    if not params.tiled and split != concat:
        # concat_axis counts positions after split_axis is removed (JAX's rule).
        if split < concat:
            concat += 1
        operand = hlo.insert_unit_dim(b, operand, concat)
        if concat < split:
            split += 1
    count = lowering.acting_size(view)
    shape = list(ir.shape_of(operand.type))
    shape[split] //= count
    shape[concat] *= count
    attributes = {
        "split_dimension": ir.i64_attr(split),
        "concat_dimension": ir.i64_attr(concat),
        "split_count": ir.i64_attr(count),
        "replica_groups": lowering.groups(view),
    }
    result_type = ir.tensor_type(shape, ir.element_type_of(operand.type))
    op = b.create("stablehlo.all_to_all", [operand], [result_type], attributes)
    return [hlo.reshape(b, op.result, ir.shape_of(view.op.results[0].type))]


def lower_ragged_all_to_all(lowering: Lowering, view: CollectiveView, b: Builder) -> list[ir.Value]:
    operands = list(view.op.operands)
    if lowering.ragged_form is RaggedForm.NATIVE:  # XLA's custom call reads device ids
        groups = lowering.groups(view, dense=True)
        return [ragged.native(b, operands, view.op.results[0].type, groups)]
    return [ragged.expanded(b, operands, lowering.groups(view), lowering.acting_size(view))]


def lower_ppermute(lowering: Lowering, view: CollectiveView, b: Builder) -> list[ir.Value]:
    params = view.params
    assert isinstance(params, collectives.PpermuteParams)
    operand = view.op.operands[0]
    pairs = permutation_pairs(lowering.mesh, view.axes, params.perm)
    if not len(pairs):
        return [hlo.zeros(b, operand.type)]
    attributes = {"source_target_pairs": ir.dense_i64_attr(pairs)}
    op = b.create("stablehlo.collective_permute", [operand], [operand.type], attributes)
    return [op.result]


def lower_axis_index(lowering: Lowering, view: CollectiveView, b: Builder) -> list[ir.Value]:
    return [lowering.axis_index_in(ir.enclosing_function(view.op), view.axes, b.loc)]


Rule = Callable[..., list[ir.Value]]

# How each kind lowers; tests/py/test_collectives.py checks every kind has a rule.
RULES: dict[Collective, Rule] = {
    collectives.PSUM: lower_reduction,
    collectives.PMAX: lower_reduction,
    collectives.PMIN: lower_reduction,
    collectives.ALL_GATHER: lower_all_gather,
    collectives.PSUM_SCATTER: lower_psum_scatter,
    collectives.ALL_TO_ALL: lower_all_to_all,
    collectives.RAGGED_ALL_TO_ALL: lower_ragged_all_to_all,
    collectives.PPERMUTE: lower_ppermute,
    collectives.AXIS_INDEX: lower_axis_index,
}
