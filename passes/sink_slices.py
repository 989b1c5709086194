"""sink-slices: split @main's arguments over inner axes too.

After flatten-maps, an argument that an inner map slices at the device's own
index (`dynamic_slice` at `axis_index` of the inner axis) is still sent whole
to every device of that axis. When every use of the argument (through
reshapes that only add or drop unit dimensions) is such a slice, along one
axis and dimension, the argument is passed split over that axis as well:
each device receives only its block, and host-to-device bytes fall by the
axis size. Repeats until nothing changes, so 3-deep nests split over all
their axes.
"""

from __future__ import annotations

import dataclasses
from typing import ClassVar

from pmapc import dialect, hlo, ir
from pmapc.mesh import Mesh
from pmapc.passes import patterns
from pmapc.passes.base import Analyses, Analysis, Form
from pmapc.passes.op_index import index_of, op_index
from pmapc.rewriter import Rewriter


@dataclasses.dataclass(frozen=True)
class SinkSlicesPass:
    """Split @main's arguments over the inner axes whose slices are all the program uses."""

    name: ClassVar[str] = "sink-slices"
    accepts: ClassVar[Form] = Form.FLATTENED
    reads: ClassVar[tuple[Analysis, ...]] = (op_index,)

    def run(self, module: ir.Module, analyses: Analyses, rewriter: Rewriter) -> bool:
        views = analyses.views
        mesh = views.read_mesh(module)
        if mesh is None or not index_of(module, analyses).ops("stablehlo.dynamic_slice", "main"):
            return False  # no mesh, or no slice of an argument in @main
        main = ir.functions(module)["main"]
        splits = patterns.Splits(main, "arg")
        changed = patterns.repeat_until_unchanged(
            lambda: sink_arguments(main, splits, mesh, views, rewriter)
        )
        if changed:
            block = ir.function_entry_block(main)
            ir.set_function_type(
                main, [a.type for a in block.arguments], ir.function_type(main).results
            )
            splits.write()
        return changed


def sink_arguments(
    main, splits: patterns.Splits, mesh: Mesh, views: dialect.Views, rewriter: Rewriter
) -> bool:
    """Split every argument that can be over one more axis; whether any was."""
    changed = False
    for index, arg in enumerate(ir.function_entry_block(main).arguments):
        changed |= sink_argument(index, arg, splits, mesh, views, rewriter)
    return changed


def sink_argument(
    index: int,
    arg: ir.Value,
    splits: patterns.Splits,
    mesh: Mesh,
    views: dialect.Views,
    rewriter: Rewriter,
) -> bool:
    slices = own_slices_through_views(arg, views)
    if not slices:
        return False
    targets = {
        (axis, patterns.matching_dim(ir.shape_of(op.operands[0].type), dim, ir.shape_of(arg.type)))
        for op, axis, dim in slices
    }
    if len(targets) != 1:
        return False
    (axis, arg_dim) = targets.pop()
    shape = list(ir.shape_of(arg.type))
    if shape[arg_dim] != mesh.axis_size(axis) or not splits.split_over(index, arg_dim, axis):
        return False
    shape[arg_dim] = 1
    ir.set_value_type(arg, ir.tensor_type(shape, ir.element_type_of(arg.type)))
    for op, _, _ in slices:
        replace_slice(op, arg, rewriter)
    return True


def own_slices_through_views(
    arg: ir.Value, views: dialect.Views
) -> list[tuple[ir.Operation, str, int]] | None:
    """Every use of `arg` as (slice op, axis, dim), looking through unit reshapes.

    None when some use is anything else, or a slice dimension is a unit one.
    """
    found = []
    pending = [arg]
    while pending:
        value = pending.pop()
        for owner, _ in ir.uses_of(value):
            if owner.name == "stablehlo.reshape" and patterns.same_up_to_unit_dims(
                ir.shape_of(owner.operands[0].type), ir.shape_of(owner.results[0].type)
            ):
                pending.append(owner.results[0])
                continue
            own = patterns.own_slice_of(owner, views)
            if own is None or ir.shape_of(value.type)[own[1]] == 1:
                return None
            found.append((owner, *own))
    return found


def replace_slice(op: ir.Operation, arg: ir.Value, rewriter: Rewriter) -> None:
    """The slice's value is now the device's argument block itself."""
    block = hlo.reshape(rewriter.before(op), arg, ir.shape_of(op.results[0].type))
    rewriter.replace_all_uses(op.results[0], block)
    source = op.operands[0]
    patterns.erase_slice(op, rewriter)
    patterns.erase_unused_reshapes(source, rewriter)
