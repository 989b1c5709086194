"""The pmapc IR: named maps and named-axis collectives inside StableHLO.

A map is `stablehlo.custom_call @pmapc.map(...)` calling a private function;
a collective is `stablehlo.custom_call @pmapc.<kind>(...)`. Both carry their
parameters in a `backend_config` dictionary (docs/ir.md). This module is the
one place that reads and writes that schema: passes and the tracer use the
typed views below and never pick attributes apart themselves.

After `flatten-maps`, the module records its device mesh in `pmapc.mesh` and
every entry argument and result records how the global array is split over
the mesh in `pmapc.split`.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

from pmapc import collectives, ir
from pmapc.collectives import Collective, Params
from pmapc.errors import Category, Diagnostic, DiagnosticError, SourceLoc
from pmapc.mesh import Mesh

if TYPE_CHECKING:
    from pmapc.rewriter import Builder

CUSTOM_CALL = "stablehlo.custom_call"
MAP_TARGET = "pmapc.map"
MESH_ATTR = "pmapc.mesh"
SPLIT_ATTR = "pmapc.split"
PREDICATED_ATTR = "pmapc.predicated"
# The tracer's note of control flow it ran on every device (an identity of its
# operands; not a `pmapc.*` op: no pass but predicate-divergent reads it).
PREDICATED_NOTE = "pmapc_predicated"
TYPED_FFI_API_VERSION = 4
# The most devices a mesh may have: XLA numbers devices with 32-bit ids (replica
# groups, source-target pairs, `replica_id`), 0 .. 2^31 - 1.
MAX_DEVICES = 2**31


def error_at(op: ir.Operation, message: str, category: Category = Category.IR) -> DiagnosticError:
    """A DiagnosticError at `op`'s location; `category` says what it is about."""
    return DiagnosticError(
        Diagnostic("error", message, ir.source_loc(op.location), category=category)
    )


def target_of(op: ir.Operation) -> str | None:
    """The call target of a custom_call, or None for any other op."""
    if op.name != CUSTOM_CALL:
        return None
    return ir.as_string(op.attributes["call_target_name"])


def is_pmapc_target(target: str | None) -> bool:
    return target is not None and target.startswith("pmapc.")


def is_pmapc_op(op: ir.Operation) -> bool:
    return is_pmapc_target(target_of(op))


# The targets JAX gives the custom_calls of host callbacks (`jax.debug.print`,
# `jax.debug.callback`, `pure_callback`, `io_callback`) on CPU and GPU: XLA calls
# the Python function at position `index` of the `mhlo.backend_config` dict in the
# callbacks the executable was compiled with, so such a module runs only in the
# process that traced it. They run per device, as every op of a flattened program.
HOST_CALLBACK_TARGETS = frozenset(
    f"xla_ffi{partitioned}_python_{device}_callback"
    for partitioned in ("", "_partitioned")
    for device in ("cpu", "gpu")
)
HOST_CALLBACK_CONFIG = "mhlo.backend_config"


def is_host_callback(op: ir.Operation) -> bool:
    return target_of(op) in HOST_CALLBACK_TARGETS


def host_callback_index(op: ir.Operation) -> int | None:
    """The position of a host callback's Python function among the module's callbacks."""
    attributes = op.attributes
    if HOST_CALLBACK_CONFIG not in attributes:
        return None
    config = ir.as_dict(attributes[HOST_CALLBACK_CONFIG]) or {}
    return ir.as_int(config["index"]) if "index" in config else None


def set_host_callback_index(op: ir.Operation, index: int) -> None:
    config = ir.as_dict(op.attributes[HOST_CALLBACK_CONFIG]) or {}
    config["index"] = ir.uint64_attr(index)
    op.attributes[HOST_CALLBACK_CONFIG] = ir.dict_attr(config)


def host_callbacks_of(module: ir.Module) -> list[ir.Operation]:
    """The host-callback ops of a module, in every function."""
    return [
        op
        for function in ir.functions(module).values()
        for op in ir.walk_custom_calls(function)
        if is_host_callback(op)
    ]


def is_map(op: ir.Operation) -> bool:
    return target_of(op) == MAP_TARGET


def is_collective(op: ir.Operation) -> bool:
    target = target_of(op)
    return is_pmapc_target(target) and target != MAP_TARGET


def collective_of(op: ir.Operation) -> Collective | None:
    """The record of a `@pmapc.<kind>` op's kind; None for any other op (a map, an
    unknown `pmapc.*` target, not a custom_call). Reads no parameters."""
    return _collective_of_target(target_of(op))


def _collective_of_target(target: str | None) -> Collective | None:
    if target is None or not is_pmapc_target(target):
        return None
    return collectives.BY_KIND.get(target.removeprefix("pmapc."))


class Views:
    """The functions above and `read_mesh`, for one pipeline run, each distinct schema
    read once.

    MLIR uniques attributes in their context: every op of one kind with equal
    parameters carries the very same `call_target_name` and `backend_config`,
    so a pass that reads thousands of collectives parses a handful of configs.
    A view's `params` are shared between the ops of one config: read them only.
    Make one per run of a pipeline, whose passes share it (passes/base.py:
    `Analyses.views`), or of a pass (it keeps attributes of that run's context).
    """

    def __init__(self) -> None:
        self._targets: dict[ir.Attribute, str | None] = {}
        self._collectives: dict[tuple, tuple] = {}
        self._maps: dict[tuple, tuple] = {}
        self._meshes: dict[ir.Attribute, Mesh] = {}

    def absorb(self, other: Views) -> None:
        """What `other` (of the same context) has read, known here too.

        How an analysis's reads reach a run's views, in two pieces: an analysis is
        a function of the module alone (`Analyses.get` calls `analysis(module)`,
        and keeps its result apart from any pass), so no run's views can be handed
        to it; it returns its own with its result (`Nesting.views`), and the pass
        that reads the same ops again takes them in here. The result is the
        passes' and these tables are this module's, which passes never touch."""
        self._targets.update(other._targets)
        self._collectives.update(other._collectives)
        self._maps.update(other._maps)
        self._meshes.update(other._meshes)

    def read_mesh(self, module: ir.Module) -> Mesh | None:
        """`read_mesh(module)`."""
        attributes = module.operation.attributes
        if MESH_ATTR not in attributes:
            return None
        attr = attributes[MESH_ATTR]
        if attr not in self._meshes:
            mesh = read_mesh(module)
            assert mesh is not None
            self._meshes[attr] = mesh
        return self._meshes[attr]

    def write_mesh(
        self, module: ir.Module, mesh: Mesh, folded: Sequence[tuple[str, int]] = ()
    ) -> None:
        """`write_mesh(module, mesh, folded)`, whose mesh is then known unread."""
        self._meshes[write_mesh(module, mesh, folded)] = mesh

    def mesh_of(self, module: ir.Module) -> Mesh:
        """`mesh_of(module)`."""
        mesh = self.read_mesh(module)
        return mesh if mesh is not None else Mesh((), ())

    def target(self, op: ir.Operation) -> str | None:
        if op.name != CUSTOM_CALL:
            return None
        attr = op.attributes["call_target_name"]
        if attr not in self._targets:
            self._targets[attr] = ir.as_string(attr)
        return self._targets[attr]

    def is_map(self, op: ir.Operation) -> bool:
        return self.target(op) == MAP_TARGET

    def is_pmapc_op(self, op: ir.Operation) -> bool:
        return is_pmapc_target(self.target(op))

    def is_collective(self, op: ir.Operation) -> bool:
        target = self.target(op)
        return is_pmapc_target(target) and target != MAP_TARGET

    def collective_of(self, op: ir.Operation) -> Collective | None:
        return _collective_of_target(self.target(op))

    def collective(self, op: ir.Operation) -> CollectiveView:
        """`read_collective(op)`."""
        return self._read(
            op,
            "call_target_name",
            "backend_config",
            self._collectives,
            read_collective,
            CollectiveView,
        )

    def map(self, op: ir.Operation) -> MapView:
        """`read_map(op)`."""
        return self._read(
            op, "backend_config", "called_computations", self._maps, read_map, MapView
        )

    @staticmethod
    def _read(op: ir.Operation, first: str, second: str, parsed: dict, read, view_class):
        """`read(op)`, or the view parsed before from equal attributes `first` and
        `second` (its fields but `op`, kept in `parsed`) with `op` in it."""
        attributes = op.attributes
        try:
            key = (attributes[first], attributes[second])
        except KeyError:
            return read(op)  # the error that says what is missing
        fields = parsed.get(key)
        if fields is not None:
            return view_class(op, *fields)
        view = read(op)
        parsed[key] = tuple(getattr(view, name) for name in _fields_after_op(view_class))
        return view


@functools.cache
def _fields_after_op(view_class: type) -> tuple[str, ...]:
    """The names of a view's fields but its first, `op`."""
    return tuple(field.name for field in dataclasses.fields(view_class)[1:])


# ----------------------------------------------------------------------------
# Maps


# Views are read-only records, but not frozen dataclasses: passes make one per op
# they read, and a frozen one costs four times as much to make.


@dataclasses.dataclass
class MapView:
    """A parsed `@pmapc.map`; an `in_axes`/`out_axes` entry of None is unmapped."""

    op: ir.Operation
    axis_name: str
    axis_size: int
    in_axes: tuple[int | None, ...]
    out_axes: tuple[int | None, ...]
    callee: str


def too_many_devices(what: str, size: int) -> str:
    """The message for a map or a mesh of more positions than XLA numbers devices."""
    return (
        f"{what} has {size} positions, more than the {MAX_DEVICES} devices XLA numbers "
        f"(32-bit device ids); split the program over at most {MAX_DEVICES} devices"
    )


def read_map(op: ir.Operation) -> MapView:
    config = _backend_config(op)
    axis_name = _required(op, config, "axis_name", ir.as_string, "a string")
    axis_size = _required(op, config, "axis_size", ir.as_int, "an integer")
    if axis_size < 1:
        raise error_at(op, f"'axis_size' of axis '{axis_name}' must be positive, got {axis_size}")
    if axis_size > MAX_DEVICES:
        raise error_at(
            op, too_many_devices(f"map over '{axis_name}'", axis_size), Category.UNSUPPORTED
        )
    in_axes = _required(op, config, "in_axes", _read_axes_list, "an array of integers or 'unit'")
    out_axes = _required(op, config, "out_axes", _read_axes_list, "an array of integers or 'unit'")
    callees = (
        ir.symbol_refs(op.attributes["called_computations"])
        if ("called_computations" in op.attributes)
        else None
    )
    if not callees or len(callees) != 1:
        raise error_at(op, "'pmapc.map' needs 'called_computations' naming exactly one function")
    return MapView(op, axis_name, axis_size, in_axes, out_axes, callees[0])


# The key of a folded nest's outermost map and of `pmapc.mesh` that records the fold:
# a dictionary, axis name -> the positions of it each device runs (docs/ir.md).
FOLD = "folded"


def fold_attr(fold: Sequence[tuple[str, int]]) -> ir.Attribute:
    return ir.dict_attr({axis: ir.i64_attr(positions) for axis, positions in fold})


def read_fold(attr: ir.Attribute | None) -> tuple[tuple[str, int], ...]:
    """A fold record (`FOLD`) as (axis, positions per device) pairs; () for none."""
    entries = ir.as_dict(attr) or {}
    return tuple(
        (name, positions)
        for name, value in entries.items()
        if (positions := ir.as_int(value)) is not None
    )


def map_config(
    axis_name: str,
    axis_size: int,
    in_axes: Sequence[int | None],
    out_axes: Sequence[int | None],
    fold: Sequence[tuple[str, int]] = (),
) -> dict[str, ir.Attribute]:
    """The attributes of a `@pmapc.map` (for the tracer and tests); `fold`, of the
    outermost map of a folded nest: (axis, positions per device) of each folded axis."""
    config = {
        "axis_name": ir.string_attr(axis_name),
        "axis_size": ir.i64_attr(axis_size),
        "in_axes": _axes_list_attr(in_axes),
        "out_axes": _axes_list_attr(out_axes),
    }
    if fold:
        config[FOLD] = fold_attr(fold)
    return {
        "backend_config": ir.dict_attr(config),
        "api_version": ir.i32_attr(TYPED_FFI_API_VERSION),
    }


def _read_axes_list(attr: ir.Attribute) -> tuple[int | None, ...] | None:
    items = ir.as_list(attr)
    if items is None:
        return None
    result: list[int | None] = []
    for item in items:
        if ir.is_unit(item):
            result.append(None)
            continue
        value = ir.as_int(item)
        if value is None or value < 0:
            return None
        result.append(value)
    return tuple(result)


def _axes_list_attr(axes: Sequence[int | None]) -> ir.Attribute:
    return ir.array_attr([ir.unit_attr() if a is None else ir.i64_attr(a) for a in axes])


# ----------------------------------------------------------------------------
# Collectives


@dataclasses.dataclass
class CollectiveView:
    """A parsed `@pmapc.<kind>` collective. `config` is the backend_config it was read
    from: collectives of one kind with equal configs have equal axes and parameters."""

    op: ir.Operation
    collective: Collective
    axes: tuple[str, ...]
    params: Params
    config: ir.Attribute

    @property
    def kind(self) -> str:
        return self.collective.kind


def read_collective(op: ir.Operation) -> CollectiveView:
    collective = collective_of(op)
    if collective is None:
        target = target_of(op) or ""
        known = ", ".join(f"'{k.target}'" for k in collectives.ALL)
        raise error_at(op, f"unknown pmapc op '{target}'; expected one of '{MAP_TARGET}', {known}")
    config = _backend_config(op)
    axes = _required(op, config, "axes", _read_string_list, "a non-empty array of axis names")
    _check_keys(op, collective, config)
    values = {}
    for param in collective.params:
        if param.optional and param.name not in config:
            continue
        values[param.name] = _required(
            op, config, param.name, _PARAM_READERS[param.value_type], _PARAM_WHAT[param.value_type]
        )
    return CollectiveView(
        op, collective, axes, collective.params_type(**values), op.attributes["backend_config"]
    )


def _check_keys(op: ir.Operation, collective: Collective, config: dict) -> None:
    """Refuse a key the kind does not take (`axis_index_groups` on a ppermute, say)."""
    known = ["axes", *(param.name for param in collective.params)]
    unknown = [key for key in config if key not in known]
    if unknown:
        listed = ", ".join(f"'{key}'" for key in known)
        raise error_at(
            op,
            f"'{collective.target}' does not take '{unknown[0]}' in its "
            f"backend_config; its keys are {listed}",
        )


def collective_config(kind: str, axes: Sequence[str], params: Params) -> dict[str, ir.Attribute]:
    """The attributes of a `@pmapc.<kind>` op; an optional parameter that is None is
    left out."""
    config = {"axes": ir.array_attr([ir.string_attr(a) for a in axes])}
    for param in collectives.BY_KIND[kind].params:
        value = getattr(params, param.name)
        if value is not None:
            config[param.name] = _PARAM_WRITERS[param.value_type](value)
    return {
        "backend_config": ir.dict_attr(config),
        "api_version": ir.i32_attr(TYPED_FFI_API_VERSION),
    }


def create_collective(
    b: Builder,
    kind: str,
    operands: Sequence[ir.Value],
    result_types: Sequence[ir.Type],
    axes: Sequence[str],
    params: Params,
) -> ir.Operation:
    """`@pmapc.<kind>` over `axes`, built by `b` (pmapc/rewriter.py)."""
    attributes = {"call_target_name": ir.string_attr(collectives.BY_KIND[kind].target)}
    attributes.update(collective_config(kind, axes, params))
    return b.create(CUSTOM_CALL, operands, result_types, attributes)


def with_collective_axes(config: ir.Attribute, axes: Sequence[str]) -> ir.Attribute:
    """A collective's backend_config, acting over `axes` instead (flatten-maps resolves
    axis names, shadowed ones included, to mesh axes)."""
    entries = ir.as_dict(config) or {}
    entries["axes"] = ir.array_attr([ir.string_attr(a) for a in axes])
    return ir.dict_attr(entries)


def _read_string_list(attr: ir.Attribute) -> tuple[str, ...] | None:
    items = ir.as_list(attr)
    if not items:
        return None
    names = [ir.as_string(item) for item in items]
    if any(name is None or name == "" for name in names):
        return None
    return tuple(name for name in names if name is not None)


def _read_int_lists(attr: ir.Attribute) -> list[tuple[int, ...]] | None:
    """An array of arrays of integers, e.g. `[[0, 1], [2, 3]]`."""
    items = ir.as_list(attr)
    if items is None:
        return None
    lists = []
    for item in items:
        inner = ir.as_list(item)
        values = [ir.as_int(v) for v in inner] if inner is not None else None
        if values is None or None in values:
            return None
        lists.append(tuple(values))
    return lists


def _int_lists_attr(lists: Sequence[Sequence[int]]) -> ir.Attribute:
    return ir.array_attr([ir.array_attr([ir.i64_attr(v) for v in inner]) for inner in lists])


def _read_pairs(attr: ir.Attribute) -> tuple[tuple[int, int], ...] | None:
    pairs = _read_int_lists(attr)
    if pairs is None or any(len(pair) != 2 for pair in pairs):
        return None
    return tuple((source, target) for source, target in pairs)


def _read_index_groups(attr: ir.Attribute) -> collectives.IndexGroups | None:
    groups = _read_int_lists(attr)
    return tuple(groups) if groups is not None else None


_PARAM_READERS = {int: ir.as_int, bool: ir.as_bool, list: _read_pairs, tuple: _read_index_groups}
_PARAM_WRITERS = {
    int: ir.i64_attr,
    bool: ir.bool_attr,
    list: _int_lists_attr,
    tuple: _int_lists_attr,
}
_PARAM_WHAT = {
    int: "an integer",
    bool: "a boolean",
    list: "an array of [source, target] pairs",
    tuple: "an array of arrays of integers",
}


# ----------------------------------------------------------------------------
# Shared helpers


def _backend_config(op: ir.Operation) -> dict[str, ir.Attribute]:
    attributes = op.attributes
    config = ir.as_dict(attributes["backend_config"] if "backend_config" in attributes else None)
    if config is None:
        raise error_at(op, f"'{target_of(op)}' needs a 'backend_config' dictionary")
    return config


def _required(op, config, key, reader, what):
    if key not in config:
        raise error_at(op, f"'{target_of(op)}' is missing '{key}' in its backend_config")
    value = reader(config[key])
    if value is None:
        raise error_at(op, f"'{key}' of '{target_of(op)}' must be {what}, got {config[key]}")
    return value


# ----------------------------------------------------------------------------
# Mesh and split annotations (written by flatten-maps, read by the runtime)


def read_mesh(module: ir.Module) -> Mesh | None:
    """The mesh flatten-maps recorded, or None when the module records none."""
    attributes = module.operation.attributes
    if MESH_ATTR not in attributes:
        return None
    config = ir.as_dict(attributes[MESH_ATTR]) or {}
    names = _read_string_list(config["axis_names"]) if "axis_names" in config else None
    if "axis_names" in config and ir.as_list(config["axis_names"]) == []:
        names = ()  # a program without maps runs on one device
    sizes = ir.as_i64_array(config["axis_sizes"]) if "axis_sizes" in config else None
    if names is None or sizes is None or len(names) != len(sizes):
        raise _mesh_error(
            module,
            f"'{MESH_ATTR}' needs 'axis_names' (strings) and 'axis_sizes' (an i64 "
            "array) of one length",
        )
    if len(set(names)) != len(names) or any(size < 1 for size in sizes):
        raise _mesh_error(
            module,
            f"'{MESH_ATTR}' needs distinct axis names and positive sizes, got "
            f"{list(names)} and {list(sizes)}",
        )
    size = math.prod(sizes)
    if size > MAX_DEVICES:
        shape = " x ".join(str(s) for s in sizes)
        raise _mesh_error(module, too_many_devices(f"the mesh '{MESH_ATTR}' ({shape})", size))
    return Mesh(tuple(names), tuple(sizes))


def _mesh_error(module: ir.Module, message: str) -> DiagnosticError:
    """An error about the module's mesh, at the module's location (read only for an
    error: reading a location costs tens of microseconds)."""
    return DiagnosticError(Diagnostic("error", message, ir.source_loc(module.operation.location)))


def mesh_of(module: ir.Module) -> Mesh:
    """The module's mesh; a module that records none runs on one device (no axes)."""
    mesh = read_mesh(module)
    return mesh if mesh is not None else Mesh((), ())


def write_mesh(
    module: ir.Module, mesh: Mesh, folded: Sequence[tuple[str, int]] = ()
) -> ir.Attribute:
    """Record the module's mesh, and the fold of a nest folded onto it (`FOLD`): the
    attribute written."""
    config = {
        "axis_names": ir.array_attr([ir.string_attr(n) for n in mesh.axis_names]),
        "axis_sizes": ir.dense_i64_array_attr(mesh.axis_sizes),
    }
    if folded:
        config[FOLD] = fold_attr(folded)
    attr = ir.dict_attr(config)
    module.operation.attributes[MESH_ATTR] = attr
    return attr


def fold_of(module: ir.Module) -> tuple[tuple[str, int], ...]:
    """The fold `pmapc.mesh` records (axis, positions per device); () for none."""
    attributes = module.operation.attributes
    if MESH_ATTR not in attributes:
        return ()
    return read_fold((ir.as_dict(attributes[MESH_ATTR]) or {}).get(FOLD))


def map_fold(op: ir.Operation) -> tuple[tuple[str, int], ...]:
    """The fold a `@pmapc.map` records (its nest's outermost map's); () for none."""
    return read_fold(_backend_config(op).get(FOLD))


def split_attr(split: Sequence[Sequence[str]]) -> ir.Attribute:
    """`[["data"], [], ["model"]]`: per dimension, the mesh axes splitting it, major first."""
    return ir.array_attr([ir.array_attr([ir.string_attr(a) for a in dim]) for dim in split])


def read_split(attr: ir.Attribute | None, rank: int) -> tuple[tuple[str, ...], ...]:
    """The split of an entry argument or result; none recorded means replicated."""
    if attr is None:
        return tuple(() for _ in range(rank))
    dims = ir.as_list(attr) or []
    result = []
    for dim in dims:
        names = [ir.as_string(a) for a in (ir.as_list(dim) or [])]
        result.append(tuple(n for n in names if n is not None))
    return tuple(result)


# ----------------------------------------------------------------------------
# Predicated control flow (written by predicate-divergent, read by the plan)


@dataclasses.dataclass(frozen=True)
class Predicated:
    """A branch or loop whose predicate differs between the devices of a collective's
    groups inside it, which predicate-divergent made every device run: every branch,
    selected per device, or the loop until every device of the group is done."""

    kind: str  # "cond" (a stablehlo.case or if) or "while"
    axes: tuple[str, ...]  # the mesh axes the predicate differs over, there
    location: SourceLoc | None


def add_predicated(module: ir.Module, record: Predicated) -> None:
    """Append `record` to the module's `pmapc.predicated` list."""
    entry = {
        "kind": ir.string_attr(record.kind),
        "axes": ir.array_attr([ir.string_attr(a) for a in record.axes]),
    }
    if record.location is not None:
        entry["file"] = ir.string_attr(record.location.file)
        entry["line"] = ir.i64_attr(record.location.line)
        entry["col"] = ir.i64_attr(record.location.col)
    attributes = module.operation.attributes
    known = ir.as_list(attributes[PREDICATED_ATTR]) if PREDICATED_ATTR in attributes else []
    attributes[PREDICATED_ATTR] = ir.array_attr([*(known or []), ir.dict_attr(entry)])


def predicated_of(module: ir.Module) -> tuple[Predicated, ...]:
    """The module's `pmapc.predicated` records, in the order they were made."""
    attributes = module.operation.attributes
    if PREDICATED_ATTR not in attributes:
        return ()
    records = []
    for attr in ir.as_list(attributes[PREDICATED_ATTR]) or []:
        entry = ir.as_dict(attr) or {}
        file, line, col = (entry.get(key) for key in ("file", "line", "col"))
        location = None
        if file is not None and line is not None and col is not None:
            where = (ir.as_string(file) or "", ir.as_int(line) or 0, ir.as_int(col) or 0)
            location = SourceLoc(*where)
        kind = ir.as_string(entry["kind"]) if "kind" in entry else None
        axes = _read_string_list(entry["axes"]) if "axes" in entry else None
        records.append(Predicated(kind or "?", axes or (), location))
    return tuple(records)


def is_predicated_note(op: ir.Operation) -> bool:
    return target_of(op) == PREDICATED_NOTE


def create_predicated_note(
    b: Builder,
    operands: Sequence[ir.Value],
    result_types: Sequence[ir.Type],
    kind: str,
    axes: Sequence[str],
) -> ir.Operation:
    """`@pmapc_predicated(operands)`: its operands, from a `kind` the tracer ran on
    every device, its predicate differing over `axes`."""
    config = {
        "kind": ir.string_attr(kind),
        "axes": ir.array_attr([ir.string_attr(a) for a in axes]),
    }
    attributes = {
        "call_target_name": ir.string_attr(PREDICATED_NOTE),
        "backend_config": ir.dict_attr(config),
        "api_version": ir.i32_attr(TYPED_FFI_API_VERSION),
    }
    return b.create(CUSTOM_CALL, operands, result_types, attributes)


def read_predicated_note(op: ir.Operation) -> Predicated:
    config = _backend_config(op)
    kind = ir.as_string(config["kind"]) if "kind" in config else None
    axes = _read_string_list(config["axes"]) if "axes" in config else None
    if kind not in ("cond", "while") or axes is None:
        raise error_at(
            op,
            f"'{PREDICATED_NOTE}' needs 'kind' (\"cond\" or \"while\") and 'axes' (axis "
            "names) in its backend_config",
        )
    return Predicated(kind, axes, ir.source_loc(op.location))
