"""The forms a module takes between passes, and the check of each: what a pass accepts.

    pmapc IR   (Form.PMAPC) maps and collectives named by axis, no mesh yet: what
               the tracer makes, what verify-axes and flatten-maps take
    flattened  (Form.FLATTENED) one program over the mesh `pmapc.mesh` records,
               no map, collectives named by mesh axes: what flatten-maps makes, what
               the passes up to lower-collectives take
    lowered    (Form.LOWERED) StableHLO collectives over device positions (and
               XLA's ragged-all-to-all), no pmapc op: what lower-collectives makes,
               what combine-all-reduces, the target passes and the plan take

A pass declares the form it takes (`accepts`) and, if it leaves another, that one
(`produces`). The pass manager checks the module on entry to the first pass of a
pipeline that declares one, and again wherever a pass takes a form the pass
before did not leave it in (passes/manager.py): a pass run alone on a module it
cannot take stops at a located error that names the form it needs, never in an
IndexError deep inside it, and a module pmapc's own passes made is not checked
again (a pass that leaves invalid IR is a pmapc bug, reported as one).

Each op is checked as its form reads it, once, in one walk of the module: in
pmapc IR by verify-axes' analysis (passes/verify_axes.py, passes/nesting.py: axes
bound, shapes static and fitting, the mesh within XLA's device ids); in a
flattened module each named collective by the same checks over the mesh's axes;
in both later forms each StableHLO collective by `check_device_collective` (its
groups of the kinds StableHLO writes, naming devices of the mesh each once, its
pairs within the mesh, XLA's ragged op's `backend_config` keys, static shapes).
Equal attributes are checked once (MLIR uniques them).
"""

from __future__ import annotations

import math

import numpy as np

from pmapc import dialect, hlo, ir, shapes
from pmapc.errors import Category, Diagnostic, DiagnosticError
from pmapc.passes import ragged
from pmapc.passes.base import Analyses, Form
from pmapc.passes.nesting import missing_main, only_declared
from pmapc.passes.op_index import OpIndex, op_index, walk_op_index
from pmapc.passes.to_partitions import (
    CHANNEL_HANDLE,
    GLOBAL_DEVICE_IDS,
    NUM_PARTITIONS,
    NUM_REPLICAS,
    REPLICA_GROUPS,
    WITH_GLOBAL_DEVICE_IDS,
    read_groups,
    still_named,
)
from pmapc.passes.verify_axes import check_collective, verified_nesting

# The ops a check looks at: custom_calls (pmapc's, XLA's ragged op) and collectives.
_CHECKED = frozenset((dialect.CUSTOM_CALL, *hlo.COLLECTIVE_OPS))


def check(module: ir.Module, form: Form, reader: str, analyses: Analyses | None = None) -> None:
    """A DiagnosticError at the first op (or the module) that keeps `module` from being
    in `form`, which `reader` (a pass's name, "the plan") takes; `analyses` shares the
    walks of the module (verify-axes' analysis, the op index) with the passes that
    read them."""
    analyses = analyses or Analyses()
    with ir.building(module):  # verify-axes' checks build the types they expect
        if form is Form.PMAPC:
            analyses.get(verified_nesting, module)
        if form is not Form.PMAPC or dialect.MESH_ATTR in module.operation.attributes:
            # (pmapc IR with a mesh: lowered already, nothing left to do but read it)
            index = analyses.get(op_index, module)
            _Checker(module, reader, named=form is Form.FLATTENED).run(index)


def verify_ops(module: ir.Module) -> None:
    """Check every `pmapc.*` op's schema, the tracer's notes' and the module's mesh, in
    any form (as MLIR verifies ops after parsing): an unknown `@pmapc.<name>`, a
    malformed backend_config or `pmapc.mesh` is a DiagnosticError."""
    dialect.read_mesh(module)
    views = dialect.Views()
    for op in walk_op_index(module).ops(dialect.CUSTOM_CALL):
        target = views.target(op)
        if target == dialect.MAP_TARGET:
            views.map(op)
        elif dialect.is_pmapc_target(target):
            views.collective(op)
        elif target == dialect.PREDICATED_NOTE:
            dialect.read_predicated_note(op)


def check_lowered(module: ir.Module, reader: str, devices: int | None = None) -> None:
    """`check(module, Form.LOWERED, reader)`, its device ids within `devices` (default:
    the mesh's, else the counts the module declares)."""
    _Checker(module, reader, named=False, devices=devices).run(walk_op_index(module))


class _Checker:
    """One walk of a module after flatten-maps: each op checked as its form reads it.
    `named`: named collectives may stay (a flattened module), checked over the mesh."""

    def __init__(
        self, module: ir.Module, reader: str, *, named: bool, devices: int | None = None
    ) -> None:
        self.module = module
        self.reader = reader
        self.named = named
        self.mesh = dialect.read_mesh(module)
        self.devices = devices if devices is not None else declared_devices(module)
        self.scope = tuple(zip(self.mesh.axis_names, self.mesh.axis_sizes)) if self.mesh else ()
        self.meshes = hlo.meshes_of(module)
        self.views = dialect.Views()
        self.checked_named: set[tuple] = set()  # verify-axes' cache of checked collectives
        self.checked_attrs: set[tuple] = set()  # (op name, attribute) of groups checked
        self.named_sizes: dict[ir.Attribute, int] = {}  # devices per group, of mesh axes
        self.static: set[ir.Type] = set()  # the types found static

    def run(self, index: OpIndex) -> None:
        if self.named:
            self.functions(ir.functions(self.module))
        for name, op, _ in index.entries(_CHECKED):
            if name == dialect.CUSTOM_CALL:
                self.custom_call(op)
            else:
                self.device_collective(op)

    def functions(self, functions: dict[str, ir.Operation]) -> None:
        """A flattened module is one program: `@main`, and a body in every function
        (each runs on the devices; the passes read them all)."""
        if "main" not in functions:
            raise missing_main(self.module)
        for name, function in functions.items():
            if not function.regions[0].blocks:
                raise only_declared(function, name)

    def custom_call(self, op: ir.Operation) -> None:
        target = self.views.target(op)
        if target == dialect.PREDICATED_NOTE:
            dialect.read_predicated_note(op)
        elif target == ragged.NATIVE_TARGET:
            self.native_ragged(op)
        elif target == dialect.MAP_TARGET:
            if self.named:
                raise dialect.error_at(
                    op, f"'{target}' is still here; run flatten-maps before {self.reader}"
                )
            raise still_named(op, self.reader)
        elif dialect.is_pmapc_target(target):
            view = self.views.collective(op)  # an unknown pmapc op says so
            if not self.named:
                raise still_named(op, self.reader)
            self.named_collective(view)

    def named_collective(self, view: dialect.CollectiveView) -> None:
        """A collective over mesh axes: each an axis of the mesh, then verify-axes'
        checks over the mesh (axes once each, index groups, operands and types)."""
        names = self.mesh.axis_names if self.mesh else ()
        for axis in view.axes:
            if axis not in names:
                listed = ", ".join(f"'{name}'" for name in names) or "none"
                raise dialect.error_at(
                    view.op,
                    f"axis '{axis}' is not an axis of the mesh (axes: {listed}); "
                    f"{self.reader} takes a flattened module, its collectives over the axes "
                    f"of '{dialect.MESH_ATTR}': run flatten-maps first",
                    Category.AXIS,
                )
        check_collective(view, self.scope, self.checked_named)

    def device_collective(self, op: ir.Operation) -> None:
        attributes = op.attributes
        if (
            op.name in WITH_GLOBAL_DEVICE_IDS
            and CHANNEL_HANDLE in attributes
            and GLOBAL_DEVICE_IDS not in attributes
        ):
            raise dialect.error_at(
                op,
                f"'{op.name}' has a channel_handle but no use_global_device_ids, so its "
                f"replica_groups do not name devices; {self.reader} takes collectives whose "
                "groups name devices (add use_global_device_ids, or drop the channel handle "
                "for replica groups)",
            )
        self.static_types(op)
        if op.name == "stablehlo.collective_permute":
            self.pairs(op)
        else:
            self.groups(op, attributes[REPLICA_GROUPS])
            self.fits_named_groups(op, attributes[REPLICA_GROUPS])

    def native_ragged(self, op: ir.Operation) -> None:
        """XLA's ragged-all-to-all: six operands and a result, and its replica groups (a
        matrix of device ids) in a `backend_config` dictionary."""
        names = shapes.RAGGED_OPERANDS
        if len(op.operands) != len(names) or len(op.results) != 1:
            raise dialect.error_at(
                op,
                f"'@{ragged.NATIVE_TARGET}' takes {len(names)} operands "
                f"({', '.join(names)}) and returns one result, got "
                f"{len(op.operands)} operands and {len(op.results)} results",
                Category.SHAPE,
            )
        self.static_types(op)
        attributes = op.attributes
        config = (
            ir.as_dict(attributes["backend_config"]) if "backend_config" in attributes else None
        )
        if config is None or ragged.REPLICA_GROUPS not in config:
            raise dialect.error_at(
                op,
                f"'@{ragged.NATIVE_TARGET}' needs a 'backend_config' dictionary with its "
                f"'{ragged.REPLICA_GROUPS}' (a matrix of device ids, as JAX writes it)",
            )
        if ragged.CHANNEL_ID in config and ir.as_int(config[ragged.CHANNEL_ID]) is None:
            raise dialect.error_at(
                op, f"'{ragged.CHANNEL_ID}' of '@{ragged.NATIVE_TARGET}' must be an integer"
            )
        groups = _dense_matrix(op, config[ragged.REPLICA_GROUPS], ragged.REPLICA_GROUPS)
        self.device_ids(op, groups, "replica groups")
        _once_each(op, groups, "in one group")

    def static_types(self, op: ir.Operation) -> None:
        for value in [*op.operands, *op.results]:
            type_ = value.type
            if type_ in self.static:
                continue
            if not ir.is_ranked_tensor(type_) or any(dim < 0 for dim in ir.shape_of(type_)):
                raise dialect.error_at(
                    op,
                    f"'{op.name}' moves {type_}: collectives take tensors of static shape; "
                    "give it a size in every dimension",
                    Category.SHAPE,
                )
            self.static.add(type_)

    def groups(self, op: ir.Operation, attr: ir.Attribute) -> None:
        key = (op.name, attr)
        if key in self.checked_attrs:
            return
        try:
            named = ir.as_mesh_axis_groups(attr)
        except ir.MalformedAttribute as error:
            raise dialect.error_at(op, f"'{op.name}': {error}") from None
        if named is None:
            matrix = _dense_matrix(op, attr, REPLICA_GROUPS)
            self.device_ids(op, matrix, REPLICA_GROUPS, padded=True)
            _once_each(op, matrix[matrix >= 0], "in one group")
        else:
            self.named_sizes[attr] = self.named_groups(op, named)
        self.checked_attrs.add(key)

    def fits_named_groups(self, op: ir.Operation, attr: ir.Attribute) -> None:
        """The shapes of a collective whose groups are mesh axes fit their size, as
        MLIR's verifier checks them for groups of device ids (it cannot count devices
        of a mesh): an all_to_all splits into one piece per device of a group, an
        all_gather's result and a reduce_scatter's operand are that many blocks."""
        size = self.named_sizes.get(attr)
        if size is None:
            return
        attributes = op.attributes
        if op.name == "stablehlo.all_to_all":
            count = ir.as_int(attributes["split_count"])
            if count != size:
                raise _group_size_error(op, f"splits into split_count = {count} pieces", size)
            return
        dimension = {
            "stablehlo.all_gather": ("all_gather_dim", 1),
            "stablehlo.reduce_scatter": ("scatter_dimension", -1),
        }.get(op.name)
        if dimension is None:
            return
        name, direction = dimension
        dim = ir.as_int(attributes[name])
        for operand, result in zip(op.operands, op.results):
            small, large = ir.shape_of(operand.type), ir.shape_of(result.type)
            if direction < 0:
                small, large = large, small
            if dim is None or not 0 <= dim < len(small) or large[dim] != small[dim] * size:
                what = f"{'gathers' if direction > 0 else 'scatters'} {operand.type} into "
                what += str(result.type)
                raise _group_size_error(op, f"{what} along {name} = {dim}", size)

    def named_groups(self, op: ir.Operation, named: ir.MeshAxisGroups) -> int:
        """Groups written as mesh axes: of a mesh of the module's devices (its axes are
        checked as they are read, `to_partitions.read_groups`); the devices of each."""
        if isinstance(named.mesh, str):
            where = self.meshes.get(named.mesh)
            if where is None:
                read_groups(op, self.meshes)  # says the mesh is not defined
                raise AssertionError("read_groups names an undefined mesh")
            sizes, ids = where.mesh.axis_sizes, np.asarray(where.device_ids, dtype=np.int64)
        else:
            sizes, ids = tuple(size for _, size in named.mesh), np.zeros(0, dtype=np.int64)
        size = math.prod(sizes)
        if self.devices is None:
            fits, runs_on = size <= dialect.MAX_DEVICES, f"at most {_devices(dialect.MAX_DEVICES)}"
        else:
            fits, runs_on = size == self.devices, _devices(self.devices)
        if not fits:
            raise dialect.error_at(
                op,
                f"'{op.name}' names groups of a mesh of {_devices(size)}, but the module runs "
                f"on {runs_on}; name axes of the module's mesh",
            )
        self.device_ids(op, ids, "mesh")
        _once_each(op, ids, "in its mesh")
        return read_groups(op, self.meshes).size

    def pairs(self, op: ir.Operation) -> None:
        attr = op.attributes["source_target_pairs"]
        key = (op.name, attr)
        if key in self.checked_attrs:
            return
        pairs = _dense_matrix(op, attr, "source_target_pairs")
        if pairs.size and pairs.shape[1] != 2:
            raise dialect.error_at(op, f"'{op.name}' needs [source, target] pairs, got {attr}")
        self.device_ids(op, pairs, "source_target_pairs")
        for column, role in ((0, "a source"), (1, "a target")):
            _once_each(op, pairs[:, column] if pairs.size else pairs, role)
        self.checked_attrs.add(key)

    def device_ids(
        self, op: ir.Operation, ids: np.ndarray, what: str, padded: bool = False
    ) -> None:
        """Device ids within the module's devices (-1: padding, where `padded`)."""
        if ids.size == 0:
            return
        low = -1 if padded else 0
        high = self.devices if self.devices is not None else dialect.MAX_DEVICES
        outside = ids[(ids < low) | (ids >= high)]
        if outside.size:
            mesh = (
                f"the module's {_devices(self.devices)} (0..{self.devices - 1})"
                if self.devices is not None
                else f"XLA's device ids (0..{dialect.MAX_DEVICES - 1})"
            )
            raise dialect.error_at(
                op,
                f"'{op.name}' names device {int(outside[0])} in its {what}, outside {mesh}; "
                "name devices of the mesh",
            )


def _group_size_error(op: ir.Operation, what: str, size: int) -> DiagnosticError:
    return dialect.error_at(
        op,
        f"'{op.name}' {what}, but its replica groups over mesh axes have {size} devices "
        "each; make its shapes fit groups of that size",
        Category.SHAPE,
    )


def declared_devices(module: ir.Module) -> int | None:
    """The devices a module runs on: its mesh's, else those its `mhlo.num_replicas`
    and `mhlo.num_partitions` declare; None where it says neither."""
    mesh = dialect.read_mesh(module)
    if mesh is not None:
        return mesh.size
    attributes = module.operation.attributes
    counts = []
    for key in (NUM_REPLICAS, NUM_PARTITIONS):
        if key not in attributes:
            continue
        count = ir.as_int(attributes[key])
        if count is None or not 1 <= count <= dialect.MAX_DEVICES:
            raise DiagnosticError(
                Diagnostic(
                    "error",
                    f"'{key}' must be a device count (1..{dialect.MAX_DEVICES}), got "
                    f"{attributes[key]}",
                    ir.source_loc(module.operation.location),
                )
            )
        counts.append(count)
    return math.prod(counts) if counts else None


def _devices(count: int) -> str:
    return "1 device" if count == 1 else f"{count} devices"


def _dense_matrix(op: ir.Operation, attr: ir.Attribute, what: str) -> np.ndarray:
    """A dense integer matrix attribute (replica groups, pairs) as an array."""
    try:
        return ir.dense_int_matrix(attr)
    except ValueError:  # the bindings cannot read it as dense integers
        raise dialect.error_at(
            op,
            f"'{what}' of '{op.name}' must be a matrix of device ids "
            f"(dense<[[...]]> : tensor<...xi64>), got {attr}",
        ) from None


def _once_each(op: ir.Operation, ids: np.ndarray, where: str) -> None:
    """A located error if a device id appears twice in `ids`."""
    if ids.size < 2:
        return
    ordered = np.sort(ids.reshape(-1))
    repeated = ordered[1:][ordered[1:] == ordered[:-1]]
    if repeated.size:
        raise dialect.error_at(
            op,
            f"'{op.name}' names device {int(repeated[0])} more than once; a device may "
            f"be {where} only once",
        )
