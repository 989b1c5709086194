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
one `in_axes` entry is passed split, a result returned straight from a map is
returned split, and `pmapc.split` records how (docs/ir.md). The module gets
`pmapc.mesh`. Collectives stay named; lower-collectives lowers them.
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
        views = dialect.Views()
        # The checked nesting analysis: free after verify-axes, else checked here.
        nesting = analyses.get(verified_nesting, module)
        layout = nesting.layout()
        if not layout.mesh.axis_names and dialect.read_mesh(module) is not None:
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
        dialect.write_mesh(module, layout.mesh, tuple(dict(folded).items()))
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
        # and results passed split: (dimension, mesh axes).
        self.split_args: dict[int, tuple[int, tuple[str, ...]]] = {}
        self.result_splits: dict[int, tuple[int, tuple[str, ...]]] = {}
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
        if self.is_split_argument(operand):
            return hlo.drop_dim(b, operand, in_axis)
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
        """Pass @main arguments used only as mapped map operands as per-device blocks."""
        for index, arg in enumerate(ir.function_entry_block(self.main).arguments):
            split = self.common_split(arg)
            if split is None:
                continue
            shape = list(ir.shape_of(arg.type))
            shape[split[0]] = 1
            ir.set_value_type(arg, ir.tensor_type(shape, ir.element_type_of(arg.type)))
            self.split_args[index] = split

    def is_split_argument(self, value: ir.Value) -> bool:
        """Whether `value` is an @main argument passed split."""
        if not self.split_args:
            return False
        arguments = ir.function_entry_block(self.main).arguments
        return any(arguments[index] == value for index in self.split_args)

    def common_split(self, arg: ir.Value) -> tuple[int, tuple[str, ...]] | None:
        """(dimension, mesh axes) if every use of `arg` is a mapped operand of
        outermost maps that split it the same way."""
        splits = set()
        for owner, index in ir.uses_of(arg):
            if not self.views.is_map(owner):
                return None
            view = self.views.map(owner)
            axes = self.mesh_axes(((view.axis_name, view.axis_size),))
            splits.add((view.in_axes[index], axes))
        if len(splits) != 1 or next(iter(splits))[0] is None:
            return None
        return splits.pop()

    def return_split(self, b: Builder, result, value, out_axis, axes) -> None:
        """Return the device's block of `result` wherever @main returns it."""
        for owner, index in ir.uses_of(result):
            if owner.name != "func.return" or owner.parent != self.main:
                continue
            self.rewriter.set_operand(owner, index, hlo.insert_unit_dim(b, value, out_axis))
            self.result_splits[index] = (out_axis, axes)

    def finish_entry(self) -> None:
        """Update @main's type to its per-device arguments and results, with their splits."""
        block = ir.function_entry_block(self.main)
        returned = ir.terminator(block)
        arg_types = [arg.type for arg in block.arguments]
        result_types = [value.type for value in returned.operands]
        ir.set_function_type(self.main, arg_types, result_types)
        for index, arg in enumerate(block.arguments):
            split = self.split_of(arg.type, self.split_args.get(index))
            ir.set_arg_attr(self.main, "arg", index, dialect.SPLIT_ATTR, split)
        for index, type_ in enumerate(result_types):
            split = self.split_of(type_, self.result_splits.get(index))
            ir.set_arg_attr(self.main, "res", index, dialect.SPLIT_ATTR, split)

    @staticmethod
    def split_of(type_, split: tuple[int, tuple[str, ...]] | None) -> ir.Attribute:
        dims: list[list[str]] = [[] for _ in ir.shape_of(type_)]
        if split is not None:
            dim, axes = split
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
