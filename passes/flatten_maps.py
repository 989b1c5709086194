"""flatten-maps: turn nested maps into one SPMD program over the device mesh.

The mesh refines every chain of nested maps (`pmapc/layout.py`): one axis per
nesting depth when the maps at each depth agree, and each map binds one or
more consecutive mesh axes when siblings differ. Devices are numbered
row-major over it. Every map is inlined where it stands:

- a mapped operand becomes the device's own slice (`axis_index` of the map's
  axis, then `dynamic_slice` and `reshape`); an unmapped (unit) operand passes
  through, since values outside a map are replicated over its axis;
- a mapped result becomes an untiled `all_gather` over the map's axis (what
  every device of the axis needs afterwards), not JAX 0.4's psum of a
  zero-padded buffer; an unmapped result is the device's own value;
- `func.call`s whose callees hold maps or collectives are inlined too, and
  every collective's axis names are resolved (shadowing included) to the mesh
  axes of the map that binds them.

At the entry the slices and gathers of `@main`'s own maps become per-device
arguments and results: an argument used only as mapped operand #k of maps with
one `in_axes` entry is passed split, and so on down the levels for as long as
each body passes it straight on to inner maps that all map it alike; a result
returned straight from a map (whose body returns straight from an inner one,
and so on) is returned split over those levels; `pmapc.split` records how
(docs/ir.md). No slice and no gather is built for them (sink-slices and
sink-gathers find the rest). The module gets `pmapc.mesh`. Collectives stay
named; lower-collectives lowers them.
"""

from __future__ import annotations

import collections
import dataclasses
from typing import ClassVar

from pmapc import collectives, dialect, hlo, ir
from pmapc.errors import Category
from pmapc.layout import Chain, Layout
from pmapc.passes.base import Analyses, Analysis, Form
from pmapc.passes.nesting import Contents, Inlining, Nesting, walk_contents
from pmapc.passes.op_index import INDEXED, Entry, OpIndex, op_index
from pmapc.passes.verify_axes import unbound_axis_message, verified_nesting
from pmapc.rewriter import Builder, Rewriter, Walk


@dataclasses.dataclass(frozen=True)
class FlattenMapsPass:
    """Inline nested maps into one SPMD program over the device mesh."""

    name: ClassVar[str] = "flatten-maps"
    accepts: ClassVar[Form] = Form.PMAPC
    produces: ClassVar[Form] = Form.FLATTENED
    # Pass @main's mapped arguments and results split over the mesh (else replicated).
    split_entry: bool = True
    reads: ClassVar[tuple[Analysis, ...]] = (verified_nesting,)
    # It provides the op index itself (from the nesting analysis's walks, kept from
    # there), so no pass before it need keep one; it keeps nothing else.
    keeps: ClassVar[tuple[Analysis, ...]] = ()

    def run(self, module: ir.Module, analyses: Analyses, rewriter: Rewriter) -> bool:
        # The checked nesting analysis: free after verify-axes, else checked here. The
        # maps and collectives it read are read again here and after.
        nesting = analyses.get(verified_nesting, module)
        views = analyses.views
        views.absorb(nesting.views)
        layout = nesting.layout()
        if not layout.mesh.axis_names and views.read_mesh(module) is not None:
            return False  # no map, and the mesh of a program flattened before
        # The op index of every function @main reaches, as the analysis walked them
        # (the others are erased): its keeper keeps it through the inlining below.
        walked = {name: contents.entries for name, contents in nesting.contents.items()}
        analyses.provide(op_index, OpIndex(walked), module)
        # a nest folded onto fewer devices: its outermost map's record, for the mesh
        folded = [
            entry
            for op in nesting.contents["main"].custom_calls
            if dialect.is_map(op)
            for entry in dialect.map_fold(op)
        ]
        _Flattener(module, nesting, layout, self.split_entry, views, rewriter).run()
        views.write_mesh(module, layout.mesh, tuple(dict(folded).items()))
        return True


class _Flattener:
    def __init__(
        self,
        module: ir.Module,
        nesting: Nesting,
        layout: Layout,
        split_entry: bool,
        views: dialect.Views,
        rewriter: Rewriter,
    ):
        self.module = module
        self.rewriter = rewriter
        # The maps and calls inlined, erased once everything is built (what is built
        # before one, its slices and gathers, is placed by it).
        self.inlined: list[ir.Operation] = []
        self.layout = layout
        self.split_entry = split_entry
        self.views = views
        self.functions = ir.functions(module)
        self.main = self.functions["main"]
        self.calls = Inlining(self.functions, nesting.contents, views)
        self.remaining = collections.Counter(self.calls.counts)  # inlinings still to come
        self.worklist: collections.deque[tuple[Entry, Chain]] = collections.deque()
        # Entry arguments (by position: inlining may give @main a new entry block)
        # and results passed split: (dimension, mesh axes) of each map level.
        self.split_args: dict[int, list[Level]] = {}
        self.result_splits: dict[int, list[Level]] = {}
        # The levels still to come of each value that arrives split (an entry
        # argument, by position, and each block of one a map passed into its body),
        # as (its dimension, mesh axes), outermost first.
        self.arriving: dict[int, list[Level]] = {}
        self.arrived: dict[ir.Value, list[Level]] = {}
        # The results of maps still to inline that @main returns (a placeholder in
        # its return until then): (return position, the levels outside the map).
        self.pending: dict[ir.Value, list[tuple[int, list[Level]]]] = {}
        # (target, backend_config, scope) -> the config naming mesh axes (None: the
        # collective's axis names are already its mesh axes).
        self.resolved: dict[tuple, ir.Attribute | None] = {}

    def run(self) -> None:
        if self.split_entry:
            self.split_entry_arguments()
        self.scan(self.calls.contents_of("main"), scope=())
        while self.worklist:
            (name, op, _), scope = self.worklist.popleft()
            if name == dialect.CUSTOM_CALL:
                self.inline_map(op, scope)
            else:
                self.inline_call(op, scope)
        self.finish_entry()
        self.erase_unreachable_functions()
        for op in self.inlined:
            self.rewriter.erase(op)

    # -- scanning ------------------------------------------------------------

    def scan(self, contents: Contents, scope: Chain) -> None:
        """Queue the maps and calls of a body (maps first, by their op-index entries)
        and resolve its collectives' axes."""
        calls = []
        for entry in contents.entries:
            name, op, _ = entry
            if name == dialect.CUSTOM_CALL:
                target = self.views.target(op)
                if target == dialect.MAP_TARGET:
                    self.worklist.append((entry, scope))
                elif dialect.is_pmapc_target(target):
                    self.resolve_axes(op, scope)
            elif name == "func.call" and self.calls.inlines(ir.callee_of(op)):
                calls.append((entry, scope))
        self.worklist.extend(calls)

    def resolve_axes(self, op: ir.Operation, scope: Chain) -> None:
        attributes = op.attributes
        key = (
            (attributes["call_target_name"], attributes["backend_config"], scope)
            if ("backend_config" in attributes)
            else None
        )
        if key is not None and key in self.resolved:
            resolved = self.resolved[key]
        else:
            resolved = self.mesh_axes_config(self.views.collective(op), scope)
            if key is not None:
                self.resolved[key] = resolved
        if resolved is not None:
            self.rewriter.set_attributes(op, {"backend_config": resolved})

    def mesh_axes_config(self, view: dialect.CollectiveView, scope: Chain) -> ir.Attribute | None:
        """The config of `view` naming the mesh axes its axes resolve to in `scope`;
        None when they are the same names."""
        mesh_axes: list[str] = []
        for axis in view.axes:
            position = Nesting.resolve(scope, axis)
            if position is None:
                raise dialect.error_at(
                    view.op, unbound_axis_message(axis, Nesting.bound_names(scope)), Category.AXIS
                )
            mesh_axes.extend(self.mesh_axes(scope[: position + 1]))
        if tuple(mesh_axes) == view.axes:
            return None
        return dialect.with_collective_axes(view.config, mesh_axes)

    def mesh_axes(self, chain: Chain) -> tuple[str, ...]:
        """The mesh axes bound by the innermost map of `chain`."""
        return self.layout.axes_of([size for _, size in chain])

    # -- inlining ------------------------------------------------------------

    def inline_map(self, op: ir.Operation, scope: Chain) -> None:
        view = self.views.map(op)
        chain = (*scope, (view.axis_name, view.axis_size))
        axes = self.mesh_axes(chain)
        b = self.rewriter.before(op)
        args = [
            self.slice_operand(b, operand, in_axis, axes)
            for operand, in_axis in zip(op.operands, view.in_axes)
        ]
        body_results = self.inline_body(view.callee, args, chain, op)
        b = self.rewriter.before(op)  # the block `op` stands in may be new (`inline`)
        for result, value, out_axis in zip(op.results, body_results, view.out_axes):
            self.replace_map_result(b, result, value, out_axis, axes, at_entry=not scope)
        self.inlined.append(op)

    def inline_call(self, op: ir.Operation, scope: Chain) -> None:
        results = self.inline_body(ir.callee_of(op), list(op.operands), scope, op)
        for result, value in zip(op.results, results):
            self.rewriter.replace_all_uses(result, value)
        self.inlined.append(op)

    def inline_body(self, name: str, args, scope: Chain, site: ir.Operation) -> list[ir.Value]:
        """Put function `name`'s body before `site`, with `args` for its arguments: the
        values it returned.

        The body's last inlining takes the function's own ops (unless a func.call
        that stays calls it); earlier ones a copy, made whole (one native clone).
        Either way the ops are moved out (`Rewriter.inline`), so no op is visited
        twice in Python; the body's maps, calls and collectives are scanned in
        `scope` first.
        """
        self.remaining[name] -= 1
        last = self.remaining[name] == 0 and name not in self.calls.kept_callees
        if last:
            function = self.functions.pop(name)
            contents = self.calls.contents_of(name)
        else:
            function = ir.detached_clone(self.functions[name])
            contents = walk_contents(function)
        self.scan(contents, scope)
        walked = Walk(INDEXED, contents.entries)  # so the op index's keeper walks no copy
        results = self.rewriter.inline(ir.function_entry_block(function), site, args, walked)
        self.rewriter.erase(function)
        return results

    # -- slices and gathers --------------------------------------------------

    def slice_operand(self, b: Builder, operand, in_axis, axes) -> ir.Value:
        """The device's own slice of a mapped operand (or the operand, if unmapped)."""
        if in_axis is None:
            return operand
        levels = self.levels_arriving(operand)
        if levels and levels[0] == (in_axis, axes):  # its block arrived split
            block = hlo.drop_dim(b, operand, in_axis)
            if len(levels) > 1:  # each level's dimension counts its own block's
                self.arrived[block] = levels[1:]
            return block
        shape = list(ir.shape_of(operand.type))
        index_type = ir.tensor_type([], ir.i32_type())
        index = dialect.create_collective(
            b, collectives.AXIS_INDEX.kind, [], [index_type], list(axes), collectives.NoParams()
        )
        # The device's index along the mapped dimension, 0 along the others (if any).
        zero = hlo.i32_scalar(b, 0) if len(shape) > 1 else index.result
        starts = [index.result if dim == in_axis else zero for dim in range(len(shape))]
        shape[in_axis] = 1
        sliced = hlo.dynamic_slice(b, operand, starts, shape)
        return hlo.drop_dim(b, sliced, in_axis)

    def replace_map_result(
        self, b: Builder, result, value, out_axis, axes, *, at_entry: bool
    ) -> None:
        """Give the map result's users the stacked value: an all_gather over `axes`."""
        stacked = [] if out_axis is None else [(out_axis, axes)]
        for index, outside in self.pending.pop(result, ()):  # @main returns it
            self.return_block(b, index, value, [*outside, *stacked])
        if out_axis is None:
            self.rewriter.replace_all_uses(result, value)
            return
        if at_entry and self.split_entry:
            self.return_split(b, result, value, out_axis, axes)
        if not list(result.uses):
            return
        gathered = dialect.create_collective(
            b,
            collectives.ALL_GATHER.kind,
            [value],
            [result.type],
            list(axes),
            collectives.AllGatherParams(all_gather_dimension=out_axis, tiled=False),
        )
        self.rewriter.replace_all_uses(result, gathered.result)

    # -- the entry -----------------------------------------------------------

    def split_entry_arguments(self) -> None:
        """Pass @main arguments used only as mapped map operands as per-device blocks,
        split over every level of maps that passes them on whole to inner maps."""
        for index, arg in enumerate(ir.function_entry_block(self.main).arguments):
            levels = self.argument_levels(arg, (), frozenset())
            if not levels:
                continue
            shape = list(ir.shape_of(arg.type))
            dims = list(range(len(shape)))
            self.split_args[index] = []
            for in_axis, axes in levels:  # a level's dimension counts the block's
                dim = dims.pop(in_axis)
                shape[dim] = 1
                self.split_args[index].append((dim, axes))
            ir.set_value_type(arg, ir.tensor_type(shape, ir.element_type_of(arg.type)))
            self.arriving[index] = levels

    def argument_levels(self, value: ir.Value, scope: Chain, open_calls: frozenset) -> list[Level]:
        """(dimension, mesh axes) of each level of maps `value` can arrive split over,
        outermost first: every use of it maps it, over one dimension and mesh axes,
        and so on into their bodies as far as all of them agree."""
        first: Level | None = None
        deeper: list[Level] | None = None
        for owner, index in ir.uses_of(value):
            if not self.views.is_map(owner):
                return []
            view = self.views.map(owner)
            in_axis = view.in_axes[index]
            if in_axis is None or view.callee in open_calls:
                return []
            chain = (*scope, (view.axis_name, view.axis_size))
            level = (in_axis, self.mesh_axes(chain))
            if first not in (None, level):
                return []
            first = level
            callee = self.functions.get(view.callee)
            inner: list[Level] = []
            if callee is not None:
                body_arg = ir.function_entry_block(callee).arguments[index]
                inner = self.argument_levels(body_arg, chain, open_calls | {view.callee})
            deeper = inner if deeper is None else _common_prefix(deeper, inner)
        return [first, *(deeper or [])] if first is not None else []

    def levels_arriving(self, value: ir.Value) -> list[Level] | None:
        """The levels `value` arrives split over, if it is such a block."""
        entry = ir.entry_argument(value)
        if entry is not None and entry[0] == "main":
            return self.arriving.get(entry[1])
        return self.arrived.get(value)

    def return_split(self, b: Builder, result, value, out_axis, axes) -> None:
        """Return the device's block of `result` wherever @main returns it."""
        for owner, index in ir.uses_of(result):
            if owner.name != "func.return" or owner.parent != self.main:
                continue
            self.return_block(b, index, value, [(out_axis, axes)])

    def return_block(self, b: Builder, index: int, value, levels: list[Level]) -> None:
        """Return `value` at @main's return position `index` as the device's block of a
        result stacked over `levels` (outermost first); when `value` is itself the
        result of a map still to inline, that map's block, once it is inlined."""
        returned = ir.terminator(ir.function_entry_block(self.main))
        owner = ir.value_owner_op(value)
        if owner is not None and self.views.is_map(owner):
            self.rewriter.set_operand(returned, index, value)  # until that map is inlined
            self.pending.setdefault(value, []).append((index, levels))
            return
        shape, dims = list(ir.shape_of(value.type)), []
        for out_axis, axes in reversed(levels):  # innermost first: each stacks the last
            dims = [(dim + (dim >= out_axis), at) for dim, at in dims]
            dims.append((out_axis, axes))
            shape.insert(out_axis, 1)
        self.rewriter.set_operand(returned, index, hlo.reshape(b, value, shape))
        self.result_splits[index] = dims

    def finish_entry(self) -> None:
        """Update @main's type to its per-device arguments and results, with their splits."""
        block = ir.function_entry_block(self.main)
        returned = ir.terminator(block)
        arg_types = [arg.type for arg in block.arguments]
        result_types = [value.type for value in returned.operands]
        ir.set_function_type(self.main, arg_types, result_types)
        arg_splits = {
            index: self.split_of(type_, self.split_args.get(index))
            for index, type_ in enumerate(arg_types)
        }
        result_splits = {
            index: self.split_of(type_, self.result_splits.get(index))
            for index, type_ in enumerate(result_types)
        }
        ir.set_arg_attr_column(self.main, "arg", dialect.SPLIT_ATTR, arg_splits)
        ir.set_arg_attr_column(self.main, "res", dialect.SPLIT_ATTR, result_splits)

    @staticmethod
    def split_of(type_, levels: list[Level] | None) -> ir.Attribute:
        dims: list[list[str]] = [[] for _ in ir.shape_of(type_)]
        for dim, axes in levels or ():
            dims[dim] = list(axes)
        return dialect.split_attr(dims)

    def erase_unreachable_functions(self) -> None:
        """Erase every function that @main no longer calls (the inlined bodies).

        The func.calls left are those that stay (`kept_callees`); the calls in the
        functions they reach are as the analysis found them.
        """
        reachable, pending = {"main"}, list(self.calls.kept_callees)
        while pending:
            name = pending.pop()
            if name in reachable or name not in self.functions:
                continue
            reachable.add(name)
            pending.extend(ir.callee_of(op) for op in self.calls.contents_of(name).calls)
        for name, function in self.functions.items():
            if name not in reachable:
                self.rewriter.erase(function)


Level = tuple[int, tuple[str, ...]]  # a dimension and the mesh axes a map level splits it over


def _common_prefix(first: list[Level], second: list[Level]) -> list[Level]:
    common = []
    for a, b in zip(first, second):
        if a != b:
            break
        common.append(a)
    return common
