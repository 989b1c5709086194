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
import contextlib
import dataclasses
from collections.abc import Iterator
from typing import ClassVar

from pmapc import collectives, dialect, hlo, ir
from pmapc.errors import Category
from pmapc.layout import Chain, Layout
from pmapc.passes.base import Analyses, Analysis
from pmapc.passes.nesting import Contents, Inlining, Nesting, walk_contents
from pmapc.passes.op_index import INDEXED, Entry, OpIndex, op_index
from pmapc.passes.verify_axes import unbound_axis_message, verified_nesting
from pmapc.rewriter import Builder, Rewriter


@dataclasses.dataclass(frozen=True)
class FlattenMapsPass:
    """Inline nested maps into one SPMD program over the device mesh."""

    name: ClassVar[str] = "flatten-maps"
    # Pass @main's mapped arguments and results split over the mesh (else replicated).
    split_entry: bool = True
    # It moves ops (the bodies it inlines) and builds the op index of what it makes.
    keeps_analyses_current: ClassVar[bool] = False
    reads: ClassVar[tuple[Analysis, ...]] = (verified_nesting,)

    def run(self, module: ir.Module, analyses: Analyses, rewriter: Rewriter) -> bool:
        views = dialect.Views()
        # The checked nesting analysis: free after verify-axes, else checked here.
        nesting = analyses.get(verified_nesting, module)
        layout = nesting.layout()
        if not layout.mesh.axis_names and dialect.read_mesh(module) is not None:
            return False  # no map, and the mesh of a program flattened before
        built = _BuiltOps()
        rewriter.listen(built)
        flattener = _Flattener(module, nesting, layout, self.split_entry, views, rewriter, built)
        analyses.preserve(op_index, flattener.run())
        dialect.write_mesh(module, layout.mesh)
        return True


class _BuiltOps:
    """A rewriter listener: the indexed ops built while `collecting`, in order."""

    watches_attributes: ClassVar[bool] = False

    def __init__(self) -> None:
        self.span: list[Entry] | None = None

    def op_created(
        self, op: ir.Operation, key: int, ip: ir.InsertionPoint, source: int | None
    ) -> None:
        if self.span is not None and op.name in INDEXED:
            self.span.append((op.name, op, key))

    def op_erased(self, op: ir.Operation, key: int) -> None:
        pass  # flatten-maps erases none of the ops it builds

    def op_modified(self, op: ir.Operation, key: int) -> None:
        pass

    @contextlib.contextmanager
    def collecting(self) -> Iterator[list[Entry]]:
        self.span = []
        try:
            yield self.span
        finally:
            self.span = None


class _Flattener:
    def __init__(
        self,
        module: ir.Module,
        nesting: Nesting,
        layout: Layout,
        split_entry: bool,
        views: dialect.Views,
        rewriter: Rewriter,
        built: _BuiltOps,
    ):
        self.module = module
        self.rewriter = rewriter
        self.built = built
        # By the identity of each map or call inlined (its op-index entry's): the
        # indexed ops that took its place (the op index of the result is the walks'
        # entries with these expanded). The maps and calls are erased last, so that no
        # op built meanwhile takes one's identity (its address).
        self.inlined: list[ir.Operation] = []
        self.expansions: dict[int, list[Entry]] = {}
        self.layout = layout
        self.split_entry = split_entry
        self.views = views
        self.functions = ir.functions(module)
        self.main = self.functions["main"]
        self.calls = Inlining(self.functions, nesting.contents, views)
        self.remaining = collections.Counter(self.calls.counts)  # inlinings still to come
        self.worklist: collections.deque[tuple[Entry, Chain]] = collections.deque()
        # Entry arguments and results passed split: (dimension, mesh axes).
        self.split_args: dict[ir.Value, tuple[int, tuple[str, ...]]] = {}
        self.result_splits: dict[int, tuple[int, tuple[str, ...]]] = {}
        # (target, backend_config, scope) -> the config naming mesh axes (None: the
        # collective's axis names are already its mesh axes).
        self.resolved: dict[tuple, ir.Attribute | None] = {}

    def run(self) -> OpIndex:
        """Flatten; the op index of the result."""
        if self.split_entry:
            self.split_entry_arguments()
        self.scan(self.calls.contents_of("main"), scope=())
        while self.worklist:
            (name, op, identity), scope = self.worklist.popleft()
            if name == dialect.CUSTOM_CALL:
                self.inline_map(op, identity, scope)
            else:
                self.inline_call(op, identity, scope)
        self.finish_entry()
        self.erase_unreachable_functions()
        index = self.op_index()
        for op in self.inlined:
            self.rewriter.erase(op)
        return index

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
            attributes["backend_config"] = resolved

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

    def inline_map(self, op: ir.Operation, identity: int, scope: Chain) -> None:
        view = self.views.map(op)
        chain = (*scope, (view.axis_name, view.axis_size))
        axes = self.mesh_axes(chain)
        with self.built.collecting() as slices:
            b = self.rewriter.before(op)
            args = [
                self.slice_operand(b, operand, in_axis, axes)
                for operand, in_axis in zip(op.operands, view.in_axes)
            ]
        body_results, body = self.inline_body(view.callee, args, chain, op)
        with self.built.collecting() as gathers:
            b = self.rewriter.before(op)  # the block `op` stands in may be new (`splice`)
            for result, value, out_axis in zip(op.results, body_results, view.out_axes):
                self.replace_map_result(b, result, value, out_axis, axes, at_entry=not scope)
        self.expansions[identity] = [*slices, *body, *gathers]
        self.inlined.append(op)

    def inline_call(self, op: ir.Operation, identity: int, scope: Chain) -> None:
        results, body = self.inline_body(ir.callee_of(op), list(op.operands), scope, op)
        self.expansions[identity] = body
        for result, value in zip(op.results, results):
            result.replace_all_uses_with(value)
        self.inlined.append(op)

    def inline_body(
        self, name: str, args, scope: Chain, site: ir.Operation
    ) -> tuple[list[ir.Value], list[Entry]]:
        """Put function `name`'s body before `site`, with `args` for its arguments: the
        values it returned, and the op-index entries of its ops.

        The body's last inlining takes the function's own ops (unless a func.call
        that stays calls it); earlier ones a copy, made whole (one native clone).
        Either way the ops are moved out (`splice`), so no op is visited twice in
        Python; the body's maps, calls and collectives are scanned in `scope` first.
        """
        self.remaining[name] -= 1
        last = self.remaining[name] == 0 and name not in self.calls.kept_callees
        if last:
            function = self.functions.pop(name)
            contents = self.calls.contents_of(name)
        else:
            function = ir.detached_clone(self.functions[name])
            contents = walk_contents(function)
        block = ir.function_entry_block(function)
        for argument, value in zip(block.arguments, args):
            argument.replace_all_uses_with(value)
        self.scan(contents, scope)
        results = self.splice(block, site)
        self.rewriter.erase(function)
        return results, contents.entries

    def splice(self, body: ir.Block, site: ir.Operation) -> list[ir.Value]:
        """Move the ops of a function's block `body` (its arguments unused by now) before
        `site`, all but its func.return; the values that returned.

        Moving costs a Python call per op, so when `site`'s block is the only one of
        its region and holds fewer ops than `body` (a long map body inlined where
        little else stands), the ops around `site` move into `body` instead, and
        `body` takes the place of `site`'s block (which goes, empty, to `body`'s
        function, for the caller to erase).
        """
        returned = ir.terminator(body)
        results = list(returned.operands)
        self.rewriter.erase(returned)
        host = site.block
        region = host.region
        if len(region.blocks) != 1 or len(host.operations) >= len(body.operations):
            for op in [op.operation for op in body.operations]:
                op.move_before(site)
            return results
        around = [op.operation for op in host.operations]
        at = around.index(site)
        first = body.operations[0].operation
        for op in around[:at]:
            op.move_before(first)
        last = body.operations[len(body.operations) - 1].operation
        for op in around[at:]:
            op.move_after(last)
            last = op
        unused = len(body.arguments)
        adopted_for = {}
        for argument in list(host.arguments):
            adopted = adopted_for[argument] = body.add_argument(argument.type, argument.location)
            argument.replace_all_uses_with(adopted)
            if argument in self.split_args:
                self.split_args[adopted] = self.split_args.pop(argument)
        for _ in range(unused):
            body.erase_argument(0)
        home = body.region
        body.append_to(region)
        host.append_to(home)
        # A body may return an argument of `host` itself (an unmapped operand passed
        # through): `host` goes with its arguments, so return the one `body` adopted.
        return [adopted_for.get(value, value) for value in results]

    # -- slices and gathers --------------------------------------------------

    def slice_operand(self, b: Builder, operand, in_axis, axes) -> ir.Value:
        """The device's own slice of a mapped operand (or the operand, if unmapped)."""
        if in_axis is None:
            return operand
        if operand in self.split_args:
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
            result.replace_all_uses_with(value)
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
        result.replace_all_uses_with(gathered.result)

    # -- the entry -----------------------------------------------------------

    def split_entry_arguments(self) -> None:
        """Pass @main arguments used only as mapped map operands as per-device blocks."""
        for arg in ir.function_entry_block(self.main).arguments:
            split = self.common_split(arg)
            if split is None:
                continue
            shape = list(ir.shape_of(arg.type))
            shape[split[0]] = 1
            ir.set_value_type(arg, ir.tensor_type(shape, ir.element_type_of(arg.type)))
            self.split_args[arg] = split

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
            owner.operands[index] = hlo.insert_unit_dim(b, value, out_axis)
            self.result_splits[index] = (out_axis, axes)

    def finish_entry(self) -> None:
        """Update @main's type to its per-device arguments and results, with their splits."""
        block = ir.function_entry_block(self.main)
        returned = ir.terminator(block)
        arg_types = [arg.type for arg in block.arguments]
        result_types = [value.type for value in returned.operands]
        ir.set_function_type(self.main, arg_types, result_types)
        for index, arg in enumerate(block.arguments):
            split = self.split_of(arg.type, self.split_args.get(arg))
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

    def op_index(self) -> OpIndex:
        """The op index of the flattened module: the walks of the functions left, with
        each map and call inlined into them replaced by what took its place."""

        def expand(entries: list[Entry]) -> list[Entry]:
            expanded = []
            for entry in entries:
                expansion = self.expansions.get(entry[2])
                if expansion is None:
                    expanded.append(entry)
                else:
                    expanded.extend(expand(expansion))
            return expanded

        return OpIndex(
            {
                name: expand(self.calls.contents_of(name).entries)
                for name in ir.functions(self.module)
            }
        )
