"""Small matchers and clean-ups shared by the optimization passes.

Several passes recognize what flatten-maps produced: slices at the device's
own coordinate, untiled all_gathers over one axis, chains of reshapes that
only add or remove unit dimensions, and values filled with one element (made
again in another shape when a rewrite moves an op). The rest erases what a rewrite left
unused, and repeats a sweep of rewrites until it changes nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from pmapc import collectives, dialect, hlo, ir
from pmapc.rewriter import Builder, Rewriter


def defining_op(value: ir.Value) -> ir.Operation | None:
    op = ir.value_owner_op(value)
    return op.operation if op is not None else None


def axis_index_axes(value: ir.Value, views: dialect.Views) -> tuple[str, ...] | None:
    """The axes of the `pmapc.axis_index` that defines `value`, else None."""
    op = defining_op(value)
    if op is None or views.collective_of(op) is not collectives.AXIS_INDEX:
        return None
    return views.collective(op).axes


def is_zero(value: ir.Value) -> bool:
    """Whether `value` is a `stablehlo.constant` whose elements are all zero."""
    op = defining_op(value)
    if op is None or op.name != "stablehlo.constant":
        return False
    values = ir.as_dense_values(op.attributes["value"])
    return values is not None and not any(values)


def nonunit_dims(shape) -> list[int]:
    return [dim for dim, size in enumerate(shape) if size != 1]


def same_up_to_unit_dims(a, b) -> bool:
    """Whether two shapes differ only by dimensions of size 1."""
    return [s for s in a if s != 1] == [s for s in b if s != 1]


def matching_dim(from_shape, dim: int, to_shape) -> int:
    """The dimension of `to_shape` holding non-unit dimension `dim` of `from_shape`.

    Both shapes must agree up to unit dimensions.
    """
    position = nonunit_dims(from_shape).index(dim)
    return nonunit_dims(to_shape)[position]


def through_unit_reshapes(value: ir.Value) -> ir.Value:
    """Follow reshapes that only add or remove unit dimensions back to their source."""
    while True:
        op = defining_op(value)
        if op is None or op.name != "stablehlo.reshape":
            return value
        source = op.operands[0]
        if not same_up_to_unit_dims(ir.shape_of(source.type), ir.shape_of(value.type)):
            return value
        value = source


def own_slice_of(op: ir.Operation, views: dialect.Views) -> tuple[str, int] | None:
    """(axis, dim) if `op` is a dynamic_slice taking the device's own index along one axis.

    That is: size 1 at `dim`, whose start is `axis_index` of `axis`; every other
    start zero and every other size full. (What flatten-maps emits for a mapped
    operand.)
    """
    if op.name != "stablehlo.dynamic_slice":
        return None
    source, *starts = op.operands
    shape = ir.shape_of(source.type)
    sizes = ir.as_i64_array(op.attributes["slice_sizes"])
    if sizes is None:
        return None
    found = None
    for dim, (start, size) in enumerate(zip(starts, sizes)):
        axes = axis_index_axes(start, views)
        if axes is not None and len(axes) == 1 and size == 1 and found is None:
            found = (axes[0], dim)
        elif not (is_zero(start) and size == shape[dim]):
            return None
    return found


def untiled_gather(value: ir.Value, views: dialect.Views) -> tuple[ir.Operation, str, int] | None:
    """(op, axis, dim) if `value` is an untiled `pmapc.all_gather` of the whole axis
    (one axis, no `axis_index_groups`): the stack of every device's block along it."""
    op = defining_op(value)
    if op is None or views.collective_of(op) is not collectives.ALL_GATHER:
        return None
    view = views.collective(op)
    params = view.params
    if (
        not isinstance(params, collectives.AllGatherParams)
        or params.tiled
        or len(view.axes) != 1
        or params.index_groups is not None
    ):
        return None
    return op, view.axes[0], params.all_gather_dimension


def fill_of(value: ir.Value) -> ir.Operation | None:
    """The op that makes `value` the same at every position: a broadcast scalar or a
    splat constant; else None."""
    producer = defining_op(value)
    return producer if producer is not None and is_fill(producer) else None


def is_fill(op: ir.Operation) -> bool:
    """Whether `op` makes a value the same at every position (see `fill_of`)."""
    name = op.name
    if name == "stablehlo.broadcast_in_dim":
        return not ir.shape_of(op.operands[0].type)
    if name == "stablehlo.constant":
        return ir.splat_value(op.attributes["value"]) is not None
    return False


def fill_like(b: Builder, value: ir.Value, shape: Sequence[int]) -> ir.Value:
    """A filled `value` (see `fill_of`) made again in `shape`."""
    producer = fill_of(value)
    assert producer is not None, "fill_like takes a filled value"
    type_ = ir.tensor_type(shape, ir.element_type_of(value.type))
    if producer.name == "stablehlo.broadcast_in_dim":
        return hlo.broadcast_scalar(b, producer.operands[0], type_)
    splat = ir.splat_value(producer.attributes["value"])
    assert splat is not None
    return hlo.constant(b, ir.splat_attr(type_, splat), type_)


def erase_if_unused(op: ir.Operation | None, rewriter: Rewriter) -> None:
    if op is not None and all(not list(result.uses) for result in op.results):
        rewriter.erase(op)


def erase_unused_reshapes(value: ir.Value, rewriter: Rewriter) -> None:
    """Erase the chain of now-unused reshapes that produced `value`."""
    op = defining_op(value)
    while (
        op is not None
        and op.name == "stablehlo.reshape"
        and not any(list(result.uses) for result in op.results)
    ):
        source = op.operands[0]
        rewriter.erase(op)
        op = defining_op(source)


def erase_slice(op: ir.Operation, rewriter: Rewriter) -> None:
    """Erase a `dynamic_slice` whose result is unused, and the start indices only it used."""
    starts: list[ir.Operation] = []  # each once (ops compare equal by identity)
    for start in map(defining_op, op.operands[1:]):
        if start is not None and start not in starts:
            starts.append(start)
    rewriter.erase(op)
    for start in starts:
        erase_if_unused(start, rewriter)


def repeat_until_unchanged(sweep: Callable[[], bool]) -> bool:
    """Run `sweep` until a run changes nothing; whether any run changed something.

    A sweep tries every candidate once and says whether it rewrote any; one
    rewrite can enable another (3-deep nests sink one axis per sweep).
    """
    changed = False
    while sweep():
        changed = True
    return changed


def entry_splits(function: ir.Operation, kind: str) -> list[tuple[tuple[str, ...], ...]]:
    """The `pmapc.split` of each argument (kind="arg") or result ("res") of an entry
    function, the attributes read in one pass, each by its rank in the signature."""
    function_type = ir.function_type(function)
    types = function_type.inputs if kind == "arg" else function_type.results
    attrs = ir.arg_attr_column(function, kind, dialect.SPLIT_ATTR)
    return [dialect.read_split(attr, len(ir.shape_of(t))) for attr, t in zip(attrs, types)]


class Splits:
    """The `pmapc.split` of each argument (kind="arg") or result (kind="res") of
    @main, read once, when first asked (where nothing can be split further, not
    at all), with their ranks from @main's type as the pass found it (a pass sets
    the new type when done); `write` sets those that changed in one edit."""

    def __init__(self, main: ir.Operation, kind: str) -> None:
        self.main = main
        self.kind = kind
        self._splits: list[list[list[str]]] | None = None
        self.changed: set[int] = set()

    @property
    def splits(self) -> list[list[list[str]]]:
        if self._splits is None:
            found = entry_splits(self.main, self.kind)
            self._splits = [[list(axes) for axes in split] for split in found]
        return self._splits

    def split_over(self, index: int, dim: int, axis: str) -> bool:
        """Split dimension `dim` of `index` over `axis` too; False if it already is
        split over `axis` (in any dimension)."""
        split = self.splits[index]
        if any(axis in axes for axes in split):
            return False
        split[dim].append(axis)
        self.changed.add(index)
        return True

    def write(self) -> None:
        values = {index: dialect.split_attr(self.splits[index]) for index in self.changed}
        ir.set_arg_attr_column(self.main, self.kind, dialect.SPLIT_ATTR, values)
