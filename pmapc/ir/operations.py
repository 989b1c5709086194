"""Operations: creating them generically, walking, functions and their
arguments, values and their uses, locations.

(pmapc/ir/__init__.py: the one adapter over jaxlib's MLIR bindings.)
"""

from __future__ import annotations

import ctypes
from collections.abc import Collection, Iterable, Sequence

from jaxlib.mlir import ir

from pmapc.ir.attributes import array_attr, as_dict, as_list, dict_attr
from pmapc.ir.core import _typed_location


def create_op(
    name: str,
    operands: Sequence[ir.Value],
    result_types: Sequence[ir.Type],
    attributes: dict[str, ir.Attribute] | None = None,
    *,
    loc: ir.Location,
    ip: ir.InsertionPoint,
    regions: int = 0,
) -> ir.Operation:
    """Create an op of any dialect by name (stable across binding versions)."""
    op = ir.Operation.create(
        name,
        results=list(result_types),
        operands=list(operands),
        attributes=attributes or {},
        regions=regions,
        loc=loc,
        ip=ip,
    )
    return op


def clone(op: ir.Operation, ip: ir.InsertionPoint) -> ir.Operation:
    """A deep copy of `op` at `ip`."""
    return op.clone(ip=ip).operation


def op_key(op: ir.Operation) -> int:
    """An op's identity while it lives: its address. The one identity pmapc gives ops.

    The bindings make a new Python object each time an op is reached (so `id()` of
    two objects of one op differ), hash an op by its contents (so an op's hash
    changes with its operands, and two equal ops collide), and erasing an op through
    one object invalidates that object only. So every dict or set of ops is keyed
    by `op_key`, taken while the op lives (an erased op's address can come back for
    a new op).
    """
    capsule = op._CAPIPtr  # held while its pointer is read
    if _CAPSULE_POINTER_OFFSET is None:
        return _capsule_pointer(capsule, _OPERATION_CAPSULE)
    address = _read_pointer(id(capsule) + _CAPSULE_POINTER_OFFSET).value
    assert address is not None  # a capsule holds no null pointer
    return address


_capsule_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_capsule_pointer.restype = ctypes.c_void_p
_capsule_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
_OPERATION_CAPSULE = b"jaxlib.mlir.ir.Operation._CAPIPtr"  # the name the bindings give it
_read_pointer = ctypes.c_void_p.from_address


def _capsule_pointer_offset() -> int | None:
    """Where a capsule object holds its pointer, if CPython lays capsules out as it
    has since 3.1 (the pointer right after the object header), checked on a capsule
    made here; else None, and `op_key` asks `PyCapsule_GetPointer` (twice the cost:
    ctypes converts its arguments, and passes read some 60,000 keys at 10,000
    collectives)."""
    make = ctypes.pythonapi.PyCapsule_New
    make.restype = ctypes.py_object
    make.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
    pointer = 0x5A5A5A5A0
    probe = make(pointer, b"pmapc.probe", None)
    offset = object.__basicsize__
    if _capsule_pointer(probe, b"pmapc.probe") != pointer:
        return None
    return offset if _read_pointer(id(probe) + offset).value == pointer else None


_CAPSULE_POINTER_OFFSET = _capsule_pointer_offset()


def add_block(region: ir.Region, arg_types: Sequence[ir.Type]) -> ir.Block:
    return ir.Block.create_at_start(region, list(arg_types))


def new_function(
    name: str,
    inputs: Sequence[ir.Type],
    results: Sequence[ir.Type],
    *,
    public: bool,
    loc: ir.Location,
    ip: ir.InsertionPoint,
) -> tuple[ir.Operation, ir.Block]:
    """A `func.func` of that signature with an empty entry block (its arguments at
    unknown locations), and that block."""
    attributes = {
        "sym_name": ir.StringAttr.get(name),
        "function_type": ir.TypeAttr.get(ir.FunctionType.get(list(inputs), list(results))),
        "sym_visibility": ir.StringAttr.get("public" if public else "private"),
    }
    function = create_op("func.func", [], [], attributes, loc=loc, ip=ip, regions=1)
    unknown = [ir.Location.unknown()] * len(inputs)
    return function, ir.Block.create_at_start(function.regions[0], list(inputs), unknown)


def walk(op: ir.Operation, names: str | Collection[str] | None = None) -> list[ir.Operation]:
    """Every op nested inside `op` (not `op` itself), in pre-order, collected first;
    with `names` (e.g. "stablehlo.all_reduce", or a set of names), only those ops.

    The walk is MLIR's, but each visit costs a microsecond or two in Python
    (filtering by the binding's op classes costs more than comparing names),
    so passes walk once and keep what they need.
    """
    wanted = {names} if isinstance(names, str) else names
    found: list[ir.Operation] = []

    def visit(nested: ir.Operation) -> ir.WalkResult:
        if wanted is None or nested.name in wanted:
            found.append(nested)
        return ir.WalkResult.ADVANCE

    op.walk(visit, ir.WalkOrder.PRE_ORDER)
    if found and found[0] == op:
        found.pop(0)
    return found


def walk_named(op: ir.Operation, names: Collection[str]) -> list[tuple[str, ir.Operation, int]]:
    """(name, op, op_key(op)) of every op named one of `names` nested inside `op`, in
    pre-order (each name read once, for callers that sort the ops by name)."""
    found: list[tuple[str, ir.Operation, int]] = []

    def visit(nested: ir.Operation) -> ir.WalkResult:
        name = nested.name
        if name in names:
            found.append((name, nested, op_key(nested)))
        return ir.WalkResult.ADVANCE

    op.walk(visit, ir.WalkOrder.PRE_ORDER)
    if found and found[0][1] == op:
        found.pop(0)
    return found


def walk_custom_calls(op: ir.Operation) -> list[ir.Operation]:
    """The stablehlo.custom_call ops nested in `op` (pmapc's maps and collectives)."""
    return walk(op, "stablehlo.custom_call")


def set_locations(op: ir.Operation, loc: ir.Location) -> None:
    """Give `op` and every op nested in it the location `loc`."""

    def visit(nested: ir.Operation) -> ir.WalkResult:
        nested.location = loc
        return ir.WalkResult.ADVANCE

    op.walk(visit, ir.WalkOrder.PRE_ORDER)


def detached_clone(op: ir.Operation) -> ir.Operation:
    """A deep copy of `op` outside any block."""
    return op.clone(ip=False)


def symbol_name(function: ir.Operation | ir.OpView) -> str:
    """A func.func's name."""
    return ir.StringAttr(function.attributes["sym_name"]).value


def functions(module: ir.Module) -> dict[str, ir.Operation]:
    """The module's func.func ops by symbol name."""
    result = {}
    for op in module.body.operations:
        op = op.operation
        if op.name == "func.func":
            result[symbol_name(op)] = op
    return result


def argument_names(func: ir.Operation) -> list[str | None]:
    """The name each argument's location gives it (JAX names @main's arguments after
    the user's parameters: `x`, `y['hi']`), or None."""
    names = []
    for argument in function_entry_block(func).arguments:
        location = _typed_location(argument.location)
        names.append(location.name_str if isinstance(location, ir.NameLoc) else None)
    return names


def set_argument_names(func: ir.Operation, names: Sequence[str]) -> None:
    """Name each argument of `func` by its location (as JAX does: `x`, `y['hi']`)."""
    with func.context:
        for argument, name in zip(function_entry_block(func).arguments, names):
            argument.set_location(ir.Location.name(name))


def drop_sharding_constraints(block: ir.Block) -> None:
    """Replace each `sdy.sharding_constraint` directly in `block` by its operand."""
    for op in [op.operation for op in block.operations]:
        if op.name == "sdy.sharding_constraint":
            op.results[0].replace_all_uses_with(op.operands[0])
            op.erase()


SDY_SHARDING = "sdy.sharding"


def has_meshes(module: ir.Module) -> bool:
    """Whether the module has `sdy.mesh` symbols (a scan of its top level only)."""
    return any(op.operation.name == "sdy.mesh" for op in module.body.operations)


def drop_meshes(module: ir.Module, ops: Iterable[ir.Operation] = ()) -> None:
    """Erase the module's `sdy.mesh` symbols, and the Shardy sharding of each of
    `ops` (which may name them)."""
    for op in ops:
        if SDY_SHARDING in op.attributes:
            del op.attributes[SDY_SHARDING]
    for op in [op.operation for op in module.body.operations]:
        if op.name == "sdy.mesh":
            op.erase()


def function_entry_block(func: ir.Operation) -> ir.Block:
    return func.regions[0].blocks[0]


def enclosing_function(op: ir.Operation) -> ir.Operation:
    """The func.func that holds `op` (or `op` itself, if it is one)."""
    op = op.operation  # a func.func's OpView names the function by `name`
    while op.name != "func.func":
        parent = op.parent
        assert parent is not None, f"'{op.name}' stands in no function"
        op = parent.operation
    return op


def terminator(block: ir.Block) -> ir.Operation:
    """The last op of a block (e.g. a function's func.return), found without a walk."""
    last = ir.InsertionPoint.at_block_terminator(block).ref_operation
    assert last is not None, "a block without a terminator"
    return last


def inline_function_at(
    func: ir.Operation, operands: Sequence[ir.Value], ip: ir.InsertionPoint
) -> list[ir.Value]:
    """Move the ops of `func`'s one block to `ip`, in order, `operands` for its
    arguments, and erase its return: the values it returned. `func` is left empty
    for the caller to drop. (The rewriter's `inline` does this for IR its listeners
    hear, before an op; `ip` may be the end of a block no listener watches.)"""
    entry = function_entry_block(func)
    for argument, value in zip(entry.arguments, operands):
        argument.replace_all_uses_with(value)
    returned = terminator(entry)
    results = list(returned.operands)
    returned.erase()
    for op in [op.operation for op in entry.operations]:
        op.detach_from_parent()
        ip.insert(op)
    return results


def function_type(func: ir.Operation) -> ir.FunctionType:
    return ir.FunctionType(ir.TypeAttr(func.attributes["function_type"]).value)


def set_function_type(
    func: ir.Operation, inputs: Sequence[ir.Type], results: Sequence[ir.Type]
) -> None:
    new_type = ir.FunctionType.get(list(inputs), list(results))
    func.attributes["function_type"] = ir.TypeAttr.get(new_type)


def arg_attr_column(func: ir.Operation, kind: str, name: str) -> list[ir.Attribute | None]:
    """Attribute `name` of every argument (kind="arg") or result (kind="res") of
    `func`, None where it has none, read in one pass over the attribute array."""
    count = len(_signature(func, kind))
    key = f"{kind}_attrs"
    if key not in func.attributes:
        return [None] * count
    entries = ir.ArrayAttr(func.attributes[key])
    column: list[ir.Attribute | None] = [_entry(entries[i], name) for i in range(len(entries))]
    return column + [None] * (count - len(column))


def set_arg_attr_column(
    func: ir.Operation, kind: str, name: str, values: dict[int, ir.Attribute]
) -> None:
    """Set attribute `name` of the arguments (kind="arg") or results (kind="res") of
    `func` at the indices `values` gives, in one edit: the attribute array is read
    once and written once, however many arguments change (MLIR's `setArgAttrsAttr`)."""
    if not values:
        return
    key = f"{kind}_attrs"
    count = len(_signature(func, kind))
    existing = list(ir.ArrayAttr(func.attributes[key])) if key in func.attributes else []
    entries: list[ir.Attribute] = []
    for index in range(count):
        entry = existing[index] if index < len(existing) else None
        if index in values:
            fields = as_dict(entry) or {}
            fields[name] = values[index]
            entry = dict_attr(fields)
        entries.append(entry if entry is not None else dict_attr({}))
    func.attributes[key] = array_attr(entries)


def _signature(func: ir.Operation, kind: str) -> list[ir.Type]:
    signature = function_type(func)
    return signature.inputs if kind == "arg" else signature.results


def _entry(entry: ir.Attribute, name: str) -> ir.Attribute | None:
    """Field `name` of one argument's attribute dictionary, or None."""
    if not isinstance(entry, ir.DictAttr):
        return None
    fields = ir.DictAttr(entry)
    return fields[name] if name in fields else None


def keep_arg_attrs(func: ir.Operation, kind: str, names: Collection[str]) -> None:
    """Drop every attribute of the arguments (kind="arg") or results (kind="res") of
    `func` but those named `names`."""
    key = f"{kind}_attrs"
    if key not in func.attributes:
        return
    if not names:
        del func.attributes[key]
        return
    entries = [
        {name: value for name, value in (as_dict(entry) or {}).items() if name in names}
        for entry in as_list(func.attributes[key]) or []
    ]
    if any(entries):
        func.attributes[key] = array_attr([dict_attr(entry) for entry in entries])
    else:
        del func.attributes[key]


def get_arg_attr(func: ir.Operation, kind: str, index: int, name: str) -> ir.Attribute | None:
    """Attribute `name` of argument (kind="arg") or result (kind="res") `index`, or
    None; one element of the attribute array read, not the array."""
    key = f"{kind}_attrs"
    if key not in func.attributes:
        return None
    entries = ir.ArrayAttr(func.attributes[key])
    return _entry(entries[index], name) if index < len(entries) else None


def set_value_type(value: ir.Value, type_: ir.Type) -> None:
    value.set_type(type_)


def value_owner_op(value: ir.Value) -> ir.Operation | None:
    """The op that defines `value`, or None for a block argument."""
    if isinstance(value, ir.BlockArgument):
        return None
    return ir.OpResult(value).owner.operation


def entry_argument(value: ir.Value) -> tuple[str, int] | None:
    """(the function's name, the argument's position) when `value` is an argument of
    a function's entry block; None for an op's result or a nested block's argument."""
    if not isinstance(value, ir.BlockArgument):
        return None
    block = value.owner
    owner = block.owner.operation
    if owner.name != "func.func" or block != owner.regions[0].blocks[0]:
        return None
    return symbol_name(owner), value.arg_number


def uses_of(value: ir.Value) -> list[tuple[ir.Operation, int]]:
    """(owner op, operand number) for each use of `value`."""
    return [(use.owner.operation, use.operand_number) for use in value.uses]


def fused_loc(locations: Sequence[ir.Location]) -> ir.Location:
    return ir.Location.fused(list(locations))
