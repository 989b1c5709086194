"""The one adapter over jaxlib's MLIR Python bindings.

Every use of `jaxlib.mlir` in pmapc goes through this module: contexts,
parsing and printing, locations, types, attributes, generic op creation,
verification and upstream passes. When JAX moves its bindings, this file
changes and nothing else.
"""

from __future__ import annotations

import contextlib
import ctypes
import dataclasses
import io
import re
import sys
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from typing import Any, NamedTuple, cast

import jaxlib.version
import numpy as np
import numpy.typing as npt
from jaxlib.mlir import ir
from jaxlib.mlir import passmanager as _passmanager
from jaxlib.mlir._mlir_libs import _jax_mlir_ext
from jaxlib.mlir.dialects import chlo as _chlo
from jaxlib.mlir.dialects import sdy as _sdy
from jaxlib.mlir.dialects import stablehlo as _stablehlo

from pmapc.errors import Diagnostic, DiagnosticError, SourceLoc

# The binding types the rest of pmapc names (in annotations, and to build).
Context = ir.Context
Module = ir.Module
Operation = ir.Operation
Block = ir.Block
Region = ir.Region
Value = ir.Value
Type = ir.Type
Attribute = ir.Attribute
Location = ir.Location
InsertionPoint = ir.InsertionPoint
MLIRError = ir.MLIRError


# MLIR's upstream dialects that JAX's modules use (func, and what JAX's lowering
# rules emit besides StableHLO), as jaxlib registers them for JAX.
_UPSTREAM_DIALECTS = ir.DialectRegistry()
_jax_mlir_ext.register_dialects(_UPSTREAM_DIALECTS)


def make_context() -> ir.Context:
    """A new context of pmapc's own, with the dialects JAX loads into its contexts:
    stablehlo, chlo, sdy and func (which pmapc builds ops of) loaded, the other
    upstream ones jaxlib registers loaded when a module first uses them (loading
    every one up front took 1.4 ms, more than the rest of the context).

    pmapc never uses or changes a context JAX hands out (from 0.11 on, JAX reuses
    one per thread for later lowerings): it reads JAX's modules into its own
    (`copy_into`). Verification and passes run on the calling thread only: with
    MLIR's thread pool, a verifier error raised on a worker thread needs the GIL
    to reach Python's error capture while the parsing thread holds it, and the
    process deadlocks (found by scripts/fuzz_ir.py).
    """
    context = ir.Context()
    context.append_dialect_registry(_UPSTREAM_DIALECTS)
    context.get_dialect_descriptor("func")  # loads it
    for dialect in (_stablehlo, _chlo, _sdy):
        dialect.register_dialect(context)
    context.allow_unregistered_dialects = False
    context.enable_multithreading(False)
    return context


def copy_into(module: ir.Module | ir.Operation, context: ir.Context) -> ir.Module:
    """A copy of `module` (a module or a module op, of another context) in `context`,
    locations included; it shares nothing with the original.

    Through MLIR bytecode: about 8 microseconds per collective of a pmapc-IR module.
    """
    return ir.Module.parse(bytecode(module), context=context)


def bytecode(module: ir.Module | ir.Operation) -> bytes:
    """`module` (a module or a module op) as MLIR bytecode (what XLA's client reads,
    and the cheapest copy)."""
    buffer = io.BytesIO()
    module.operation.write_bytecode(buffer)
    return buffer.getvalue()


# ----------------------------------------------------------------------------
# Parsing, printing, verifying


def parse_module(text: str, context: ir.Context, filename: str = "-") -> ir.Module:
    """Parse `text`, read from `filename`; a syntax or verifier error becomes a
    DiagnosticError. Op locations name `filename` (the parser itself says "-")."""
    try:
        with context:
            module = ir.Module.parse(text)
    except ir.MLIRError as error:
        raise DiagnosticError(diagnostics_of(error, filename)) from None
    if filename != "-":
        _name_source(module, filename)
    return module


def _name_source(module: ir.Module, filename: str) -> None:
    def visit(op: ir.Operation) -> ir.WalkResult:
        location = op.location
        if isinstance(location, ir.FileLineColLoc) and location.filename == "-":
            op.location = ir.Location.file(
                filename, location.start_line, location.start_col, context=module.context
            )
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit)


def verify(module: ir.Module, filename: str = "-") -> None:
    """Run MLIR's verifier; raise DiagnosticError with its messages."""
    try:
        module.operation.verify()
    except ir.MLIRError as error:
        raise DiagnosticError(diagnostics_of(error, filename)) from None


def print_module(module: ir.Module | ir.Operation, debug_info: bool = False) -> str:
    """A module (or a detached copy of one) as text; `debug_info` adds locations."""
    op = module.operation if isinstance(module, ir.Module) else module
    return str(op.get_asm(enable_debug_info=debug_info))


def current_insertion_point() -> ir.InsertionPoint:
    """The insertion point set by the innermost `with InsertionPoint(...)`."""
    return ir.InsertionPoint.current  # pyright: ignore[reportReturnType]


def current_location() -> ir.Location:
    """The location set by the innermost `with Location...`."""
    return ir.Location.current  # pyright: ignore[reportReturnType]


def diagnostics_of(error: ir.MLIRError, filename: str = "-") -> list[Diagnostic]:
    """Render an MLIRError's diagnostics (never shown raw to users)."""
    result = []
    for diag in error.error_diagnostics:
        notes = tuple(
            Diagnostic("note", note.message, source_loc(note.location, filename))
            for note in diag.notes
        )
        result.append(Diagnostic("error", diag.message, source_loc(diag.location, filename), notes))
    if not result:
        result.append(Diagnostic("error", str(error).strip().splitlines()[-1]))
    return result


def source_loc(location: ir.Location | None, filename: str = "-") -> SourceLoc | None:
    """The first file:line:col inside `location`, as it prints: a named location's
    child, a call site's callee before its caller, a fused location's parts in order.

    Locations that come from parsing stdin or a string say "-"; `filename`
    replaces that with the name of the file that was read.
    """
    location = _typed_location(location)
    if isinstance(location, ir.FileLineColLoc):
        file = location.filename
        if file in ("-", "") and filename:
            file = filename
        return SourceLoc(file, location.start_line, location.start_col)
    if isinstance(location, ir.NameLoc):
        return source_loc(location.child_loc, filename)
    if isinstance(location, ir.CallSiteLoc):
        return source_loc(location.callee, filename) or source_loc(location.caller, filename)
    if isinstance(location, ir.FusedLoc):
        for part in location.locations:
            found = source_loc(cast(ir.Location, part), filename)
            if found is not None:
                return found
    return None


_LOCATION_CLASSES = (ir.FileLineColLoc, ir.NameLoc, ir.CallSiteLoc, ir.FusedLoc)


def _typed_location(location: ir.Location | None) -> ir.Location | None:
    """`location` as its own class (diagnostics hand out plain `Location`s)."""
    if location is None or isinstance(location, _LOCATION_CLASSES):
        return location
    for location_class in _LOCATION_CLASSES:
        try:
            return location_class(location)
        except ValueError:
            continue
    return location


@contextlib.contextmanager
def building(module: ir.Module) -> Iterator[None]:
    """Enter the module's context (for creating attributes, types and ops)."""
    with module.context, ir.Location.unknown(module.context):
        yield


def run_upstream_passes(module: ir.Module, pipeline: str) -> None:
    """Run upstream MLIR passes, e.g. "symbol-dce" or "cse", on the module.

    MLIR's pass manager does not verify between them: the pmapc pass that runs
    them is verified like any other (compiler/pipeline.py).
    """
    with module.context:
        manager = _passmanager.PassManager.parse(f"builtin.module({pipeline})")
        manager.enable_verifier(False)
        manager.run(module.operation)


@dataclasses.dataclass(frozen=True)
class Instrumentation:
    """What MLIR's pass manager reports besides running the passes: mlir-opt's
    `--mlir-print-ir-*`, `--mlir-timing`, `--mlir-pass-statistics` and
    `--dump-pass-pipeline`, printed on stderr in MLIR's formats."""

    print_before_all: bool = False
    print_after_all: bool = False
    print_after_change: bool = False
    print_after_failure: bool = False
    print_module_scope: bool = False
    print_debuginfo: bool = False
    timing: bool = False
    statistics: bool = False
    dump_pipeline: bool = False  # print the pipeline before running it

    @property
    def reports(self) -> bool:
        """Whether it prints anything (the locations of dumps print nothing alone)."""
        return self.prints_ir or self.timing or self.statistics or self.dump_pipeline

    @property
    def prints_ir(self) -> bool:
        return (
            self.print_before_all
            or self.print_after_all
            or self.print_after_change
            or self.print_after_failure
        )


class InvalidIR(DiagnosticError):
    """The pass manager failed on its own: MLIR's verifier refused the IR a pass left,
    or an MLIR pass failed (MLIR's diagnostics)."""


class PassManager:
    """jaxlib's MLIR `PassManager` on `builtin.module`, in a module's context: pmapc's
    Python passes (`add_python`) and MLIR's and Shardy's registered ones (`add_upstream`)
    in one pipeline, which MLIR verifies after each pass (`verify_each`), prints and
    times."""

    def __init__(
        self, context: ir.Context, instrumentation: Instrumentation, verify_each: bool = True
    ) -> None:
        self._context = context
        self._dump_pipeline = instrumentation.dump_pipeline
        self._reports = instrumentation.timing or instrumentation.statistics
        self._count = 0
        self._failures: list[BaseException] = []  # what a Python pass raised
        self._manager = _passmanager.PassManager("builtin.module", context=context)
        self._manager.enable_verifier(verify_each)
        if instrumentation.prints_ir:
            # MLIR prints after a pass only on change or failure as a restriction of
            # printing after every pass (mlir-opt's flags set both).
            self._manager.enable_ir_printing(
                print_before_all=instrumentation.print_before_all,
                print_after_all=instrumentation.print_after_all
                or instrumentation.print_after_change
                or instrumentation.print_after_failure,
                print_module_scope=instrumentation.print_module_scope,
                print_after_change=instrumentation.print_after_change,
                print_after_failure=instrumentation.print_after_failure,
                enable_debug_info=instrumentation.print_debuginfo,
            )
        if instrumentation.timing:
            self._manager.enable_timing()
        if instrumentation.statistics:
            self._manager.enable_statistics()

    def add_python(self, run: Callable[[], None], name: str, argument: str, summary: str) -> None:
        """A pass that calls `run()` on the module the manager runs on; `name` is its
        class name, `argument` its pipeline name (as MLIR's passes have both)."""

        failures = self._failures  # not `self`: MLIR's manager holds `pass_body`, and
        # a reference back to the manager would be a cycle the collector cannot see

        def pass_body(op, pass_) -> None:
            del op  # `run` holds the module
            try:
                run()
            except Exception as error:  # a failure of the pass, for MLIR too
                failures.append(error)
                pass_.signal_pass_failure()

        with self._context:
            self._manager.add(pass_body, name=name, argument=argument, description=summary)
        self._count += 1

    def add_upstream(self, pipeline: str) -> None:
        """Pipeline elements of registered MLIR passes, e.g. `canonicalize{max-iterations=2}`
        or `func.func(cse)`; a ValueError names what MLIR could not parse."""
        with self._context:
            self._manager.add(pipeline)
        self._count += 1

    def run(self, module: ir.Module) -> None:
        """Run the pipeline, once. A Python pass's exception fails the pass (MLIR prints
        the IR after it with print_after_failure) and is raised again here; MLIR's own
        failures (its verifier's, its passes') raise InvalidIR with its diagnostics."""
        try:
            self._run(module)
        finally:
            if self._reports:  # MLIR prints timing and statistics when its manager goes
                del self._manager
                sys.stderr.flush()

    def _run(self, module: ir.Module) -> None:
        if self._dump_pipeline:  # as mlir-opt's --dump-pass-pipeline prints it
            print(f"Pass Manager with {self._count} passes:", file=sys.stderr)
            print(self.pipeline_text(), file=sys.stderr, flush=True)
        self._failures.clear()
        try:
            self._manager.run(module.operation)
        except ir.MLIRError as error:
            failure = self._failures.pop() if self._failures else None
            self._failures.clear()
            if failure is not None:
                failure.__suppress_context__ = True  # MLIR's "pass failed" adds nothing
                raise failure  # noqa: B904 (its own __cause__ kept)
            raise InvalidIR(diagnostics_of(error)) from None

    def pipeline_text(self) -> str:
        """The pipeline as MLIR prints it (`--dump-pass-pipeline`), options spelled out."""
        return str(self._manager)


def upstream_pipeline_error(pipeline: str) -> str | None:
    """Why MLIR cannot parse `pipeline` as elements of a `builtin.module` pipeline of
    its registered passes (None: it can)."""
    try:
        with make_context():
            _passmanager.PassManager.parse(f"builtin.module({pipeline})")
    except ValueError as error:
        # MLIR's message, without its parser's name and the caret under the text
        lines = [line.strip() for line in str(error).splitlines() if line.strip()]
        first = lines[0] if lines else "MLIR cannot parse it"
        return re.sub(r"^.*?error: |^<[^>]*>: ", "", first)
    return None


# ----------------------------------------------------------------------------
# Types


def tensor_type(shape: Sequence[int], element_type: ir.Type) -> ir.RankedTensorType:
    return ir.RankedTensorType.get(list(shape), element_type)


def is_ranked_tensor(type_: ir.Type) -> bool:
    return isinstance(type_, ir.RankedTensorType)


def shape_of(type_: ir.Type) -> tuple[int, ...]:
    return tuple(ir.RankedTensorType(type_).shape)


def element_type_of(type_: ir.Type) -> ir.Type:
    return ir.RankedTensorType(type_).element_type


def i1_type() -> ir.Type:
    return ir.IntegerType.get_signless(1)


def i32_type() -> ir.Type:
    return ir.IntegerType.get_signless(32)


def ui32_type() -> ir.Type:
    return ir.IntegerType.get_unsigned(32)


def i64_type() -> ir.Type:
    return ir.IntegerType.get_signless(64)


_FLOAT_DTYPES = (
    (ir.BF16Type, "bfloat16"),
    (ir.F16Type, "float16"),
    (ir.F32Type, "float32"),
    (ir.F64Type, "float64"),
)


def dtype_name(element_type: ir.Type) -> str | None:
    """The numpy/JAX dtype name of an element type ("float32", "bool", "uint8", ...)."""
    for type_class, name in _FLOAT_DTYPES:
        if isinstance(element_type, type_class):
            return name
    if isinstance(element_type, ir.IntegerType):
        integer = ir.IntegerType(element_type)
        if integer.width == 1:
            return "bool"
        return f"{'uint' if integer.is_unsigned else 'int'}{integer.width}"
    if isinstance(element_type, ir.ComplexType):
        part = dtype_name(ir.ComplexType(element_type).element_type)
        return {"float32": "complex64", "float64": "complex128"}.get(part or "")
    return None


def is_complex_type(type_: ir.Type) -> bool:
    return isinstance(type_, ir.ComplexType)


def is_float_type(type_: ir.Type) -> bool:
    return isinstance(type_, ir.FloatType)


def integer_range(type_: ir.Type) -> tuple[int, int]:
    """(lowest, highest) value of an integer type; i1 is (0, 1)."""
    integer = ir.IntegerType(type_)
    width = integer.width
    if width == 1 or integer.is_unsigned:
        return 0, (1 << width) - 1
    return -(1 << (width - 1)), (1 << (width - 1)) - 1


def i64_attr(value: int) -> ir.Attribute:
    return ir.IntegerAttr.get(i64_type(), int(value))


def i32_attr(value: int) -> ir.Attribute:
    return ir.IntegerAttr.get(i32_type(), int(value))


def uint64_attr(value: int) -> ir.Attribute:
    return ir.IntegerAttr.get(ir.IntegerType.get_unsigned(64), int(value))


def bool_attr(value: bool) -> ir.Attribute:
    return ir.BoolAttr.get(bool(value))


def string_attr(value: str) -> ir.Attribute:
    return ir.StringAttr.get(value)


def unit_attr() -> ir.Attribute:
    return ir.UnitAttr.get()


def array_attr(values: Sequence[ir.Attribute]) -> ir.Attribute:
    return ir.ArrayAttr.get(list(values))


def dict_attr(values: dict[str, ir.Attribute]) -> ir.Attribute:
    return ir.DictAttr.get(dict(values))


def dense_i64_attr(values: npt.ArrayLike) -> ir.Attribute:
    """A dense i64 tensor attribute, e.g. a replica-group matrix."""
    array = np.ascontiguousarray(np.asarray(values, dtype=np.int64))
    return _dense_elements(array, i64_type())


def _dense_elements(array: np.ndarray, element_type: ir.Type) -> ir.Attribute:
    """A dense elements attribute holding `array` (the bindings' stubs type `get` with
    attribute lists only, though it takes a buffer)."""
    get: Any = ir.DenseElementsAttr.get
    return get(array, type=element_type)


def dense_i64_array_attr(values: Sequence[int]) -> ir.Attribute:
    return ir.DenseI64ArrayAttr.get([int(v) for v in values])


def zero_attr(type_: ir.Type) -> ir.Attribute:
    """A splat zero of a tensor type (false for i1)."""
    element = element_type_of(type_)
    if isinstance(element, ir.IntegerType):
        return ir.DenseElementsAttr.get_splat(type_, ir.IntegerAttr.get(element, 0))
    if isinstance(element, ir.ComplexType):  # no scalar complex attribute to splat
        zeros = np.zeros(shape_of(type_), np.dtype(dtype_name(element)))
        return _dense_elements(zeros, element)
    return ir.DenseElementsAttr.get_splat(type_, ir.FloatAttr.get(element, 0.0))


def float_splat_attr(type_: ir.Type, value: float) -> ir.Attribute:
    return ir.DenseElementsAttr.get_splat(type_, ir.FloatAttr.get(element_type_of(type_), value))


def integer_splat_attr(type_: ir.Type, value: int) -> ir.Attribute:
    element = element_type_of(type_)
    if ir.IntegerType(element).width == 1:
        return ir.DenseElementsAttr.get_splat(type_, ir.BoolAttr.get(bool(value)))
    return ir.DenseElementsAttr.get_splat(type_, ir.IntegerAttr.get(element, value))


def scalar_i32_attr(value: int) -> ir.Attribute:
    return ir.DenseElementsAttr.get_splat(tensor_type([], i32_type()), i32_attr(value))


def attributes_of(op: ir.Operation) -> dict[str, ir.Attribute]:
    """An op's attributes by name (iterating `op.attributes` yields only the names)."""
    return dict(op.attributes.items())


def as_dict(attr: ir.Attribute | None) -> dict[str, ir.Attribute] | None:
    if attr is None or not isinstance(attr, ir.DictAttr):
        return None
    dictionary = ir.DictAttr(attr)
    return {named.name: named.attr for named in dictionary}


def as_int(attr: ir.Attribute) -> int | None:
    if isinstance(attr, ir.BoolAttr) or not isinstance(attr, ir.IntegerAttr):
        return None
    return ir.IntegerAttr(attr).value


def as_bool(attr: ir.Attribute) -> bool | None:
    if isinstance(attr, ir.BoolAttr):
        return ir.BoolAttr(attr).value
    return None


def as_string(attr: ir.Attribute) -> str | None:
    if not isinstance(attr, ir.StringAttr):
        return None
    return ir.StringAttr(attr).value


def as_list(attr: ir.Attribute) -> list[ir.Attribute] | None:
    if not isinstance(attr, ir.ArrayAttr):
        return None
    return list(ir.ArrayAttr(attr))


def as_i64_array(attr: ir.Attribute) -> list[int] | None:
    if not isinstance(attr, ir.DenseI64ArrayAttr):
        return None
    return list(ir.DenseI64ArrayAttr(attr))


def as_dense_values(attr: ir.Attribute) -> list | None:
    """The elements of a dense integer or float elements attribute (flat), else None."""
    if not isinstance(attr, (ir.DenseIntElementsAttr, ir.DenseFPElementsAttr)):
        return None
    if attr.is_splat:
        splat: Any = attr.get_splat_value()  # an IntegerAttr or a FloatAttr
        return [splat.value]
    return [attr[i] for i in range(len(attr))]


def dense_int_matrix(attr: ir.Attribute) -> np.ndarray:
    """A dense integer elements attribute (replica_groups, source_target_pairs) as a
    2-D int64 array; an empty one is (0, 0)."""
    values = np.array(ir.DenseIntElementsAttr(attr), dtype=np.int64)
    return values.reshape(0, 0) if values.size == 0 else values.reshape(values.shape[0], -1)


def comparison_direction(compare_op: ir.Operation) -> str:
    """The direction of a stablehlo.compare: "LT", "EQ", ..."""
    return _stablehlo.ComparisonDirectionAttr(compare_op.attributes["comparison_direction"]).value


def comparison_direction_attr(direction: str) -> ir.Attribute:
    """The `comparison_direction` of a stablehlo.compare: "EQ", "LT", ..."""
    return _stablehlo.ComparisonDirectionAttr.get(direction)


def splat_value(attr: ir.Attribute) -> ir.Attribute | None:
    """The element of a splat dense elements attribute, else None."""
    if isinstance(attr, ir.DenseElementsAttr) and attr.is_splat:
        return attr.get_splat_value()
    return None


def splat_attr(type_: ir.Type, element: ir.Attribute) -> ir.Attribute:
    return ir.DenseElementsAttr.get_splat(type_, element)


def is_unit(attr: ir.Attribute) -> bool:
    return isinstance(attr, ir.UnitAttr)


def symbol_refs(attr: ir.Attribute | None) -> list[str] | None:
    """The names of an array of flat symbol references, e.g. called_computations."""
    items = as_list(attr) if attr is not None else None
    if items is None:
        return None
    names = []
    for item in items:
        if not isinstance(item, ir.FlatSymbolRefAttr):
            return None
        names.append(ir.FlatSymbolRefAttr(item).value)
    return names


def symbol_ref_attr(name: str) -> ir.Attribute:
    return ir.FlatSymbolRefAttr.get(name)


def callee_of(call_op: ir.Operation) -> str:
    """The symbol a func.call calls."""
    return ir.FlatSymbolRefAttr(call_op.attributes["callee"]).value


# ----------------------------------------------------------------------------
# Operations


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


def function_type(func: ir.Operation) -> ir.FunctionType:
    return ir.FunctionType(ir.TypeAttr(func.attributes["function_type"]).value)


def set_function_type(
    func: ir.Operation, inputs: Sequence[ir.Type], results: Sequence[ir.Type]
) -> None:
    new_type = ir.FunctionType.get(list(inputs), list(results))
    func.attributes["function_type"] = ir.TypeAttr.get(new_type)


def set_arg_attr(func: ir.Operation, kind: str, index: int, name: str, value: ir.Attribute):
    """Set an attribute on argument (kind="arg") or result (kind="res") `index`."""
    key = f"{kind}_attrs"
    count = len(function_type(func).inputs if kind == "arg" else function_type(func).results)
    existing = as_list(func.attributes[key]) if key in func.attributes else None
    entries = [as_dict(a) or {} for a in existing] if existing else [{} for _ in range(count)]
    entries[index][name] = value
    func.attributes[key] = array_attr([dict_attr(e) for e in entries])


def keep_arg_attrs(func: ir.Operation, kind: str, names: Collection[str]) -> None:
    """Drop every attribute of the arguments (kind="arg") or results (kind="res") of
    `func` but those named `names`."""
    key = f"{kind}_attrs"
    if key not in func.attributes:
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
    key = f"{kind}_attrs"
    if key not in func.attributes:
        return None
    entries = as_list(func.attributes[key]) or []
    if index >= len(entries):
        return None
    return (as_dict(entries[index]) or {}).get(name)


def set_value_type(value: ir.Value, type_: ir.Type) -> None:
    value.set_type(type_)


def value_owner_op(value: ir.Value) -> ir.Operation | None:
    """The op that defines `value`, or None for a block argument."""
    if isinstance(value, ir.BlockArgument):
        return None
    return ir.OpResult(value).owner.operation


def uses_of(value: ir.Value) -> list[tuple[ir.Operation, int]]:
    """(owner op, operand number) for each use of `value`."""
    return [(use.owner.operation, use.operand_number) for use in value.uses]


def fused_loc(locations: Sequence[ir.Location]) -> ir.Location:
    return ir.Location.fused(list(locations))


# ----------------------------------------------------------------------------
# Collective and Shardy attributes

DEVICE_TO_DEVICE_CHANNEL = 1  # stablehlo.channel_handle's type for collectives


def channel_handle_attr(handle: int) -> ir.Attribute:
    return _stablehlo.ChannelHandle.get(int(handle), DEVICE_TO_DEVICE_CHANNEL)


def module_int_attr(module: ir.Module, name: str) -> int | None:
    """An integer attribute of the module (e.g. mhlo.num_partitions), or None."""
    attributes = module.operation.attributes
    return as_int(attributes[name]) if name in attributes else None


def function_type_attr(inputs: Sequence[ir.Type], results: Sequence[ir.Type]) -> ir.Attribute:
    return ir.TypeAttr.get(ir.FunctionType.get(list(inputs), list(results)))


def sdy_mesh_attr(axes: Sequence[tuple[str, int]]) -> ir.Attribute:
    """`#sdy.mesh<["a"=2, "b"=4]>` of (name, size) pairs, major first."""
    return _sdy.MeshAttr.get([_sdy.MeshAxisAttr.get(name, size) for name, size in axes])


def sdy_mesh_axes(attr: ir.Attribute) -> tuple[tuple[tuple[str, int], ...], tuple[int, ...]]:
    """The (name, size) axes of an `#sdy.mesh<...>` attribute, major first, and its
    device ids (empty: the devices in mesh order)."""
    mesh = _sdy.MeshAttr(attr)
    axes = tuple((axis.name, axis.size) for axis in (_sdy.MeshAxisAttr(a) for a in mesh.axes))
    return axes, tuple(int(device) for device in mesh.device_ids)


# Whether jaxlib's StableHLO knows mesh-axis replica groups (and so the XLA shipped
# with it reads them; pmapc's tests run both forms at both ends of its JAX range).
MESH_AXIS_GROUPS: bool = hasattr(_stablehlo, "ReplicaGroupMeshAxesAttr")

# XLA reads mesh-axis groups over axes whose names hold a double quote (pmapc's label
# of a tuple axis name, say) from jaxlib 0.11.2 on; 0.10.2 reports "Unknown axis".
_QUOTED_AXES = tuple(int(part) for part in jaxlib.version.__version__.split(".")[:3]) >= (0, 11, 2)


def mesh_axis_name_readable(name: str) -> bool:
    """Whether the XLA in use reads mesh-axis replica groups over an axis so named."""
    return _QUOTED_AXES or '"' not in name


# The discardable attribute JAX puts on an `sdy.mesh` that replica groups name:
# the mesh as StableHLO spells it.
STABLEHLO_MESH = "stablehlo.mesh"


def mesh_axis_groups_attr(mesh: str, axes: Sequence[str]) -> ir.Attribute:
    """`#stablehlo.replica_group_mesh_axes<mesh = @mesh, axes = [...]>`: one replica
    group for each position along the other axes of the `sdy.mesh` op `mesh`, holding
    the devices along `axes` in their order (the first the most major)."""
    refs = ir.ArrayAttr.get([_stablehlo.AxisRefAttr.get(axis) for axis in axes])
    return _stablehlo.ReplicaGroupMeshAxesAttr.get(ir.FlatSymbolRefAttr.get(mesh), refs)


def stablehlo_mesh_dict(axes: Sequence[tuple[str, int]]) -> ir.Attribute:
    """`{axes = [{name = "a", size = 2 : i64}, ...]}`, the `stablehlo.mesh` attribute."""
    return ir.DictAttr.get(
        {
            "axes": ir.ArrayAttr.get(
                [
                    ir.DictAttr.get({"name": string_attr(name), "size": i64_attr(size)})
                    for name, size in axes
                ]
            )
        }
    )


class MeshAxisGroups(NamedTuple):
    """Replica groups written as mesh axes: the mesh (the symbol of an `sdy.mesh` op,
    or its (name, size) axes written inline) and the axes, major first."""

    mesh: str | tuple[tuple[str, int], ...]
    axes: tuple[str, ...]


class MalformedAttribute(ValueError):
    """An attribute that parses but does not hold what its kind must (a mutated module)."""


def as_mesh_axis_groups(attr: ir.Attribute) -> MeshAxisGroups | None:
    """The mesh and axes of `#stablehlo.replica_group_mesh_axes<...>`; None for any
    other attribute (dense groups) and for groups over parts of axes (sub-axes)."""
    if not MESH_AXIS_GROUPS or not _stablehlo.ReplicaGroupMeshAxesAttr.isinstance(attr):
        return None
    groups = _stablehlo.ReplicaGroupMeshAxesAttr(attr)
    entries = list(ir.ArrayAttr(groups.axes))
    if not all(_stablehlo.AxisRefAttr.isinstance(entry) for entry in entries):
        raise MalformedAttribute(
            f"replica groups' axes must be axis references (#stablehlo.axis_ref<...>), "
            f"got {groups.axes}"
        )
    refs = [_stablehlo.AxisRefAttr(entry) for entry in entries]
    if any(ref.sub_axis_info is not None for ref in refs):
        return None
    mesh: str | tuple[tuple[str, int], ...]
    if isinstance(groups.mesh, ir.FlatSymbolRefAttr):
        mesh = groups.mesh.value
    else:
        inline = ir.ArrayAttr(_stablehlo.MeshAttr(groups.mesh).axes)
        mesh = tuple(
            (axis.name, axis.size) for axis in (_stablehlo.MeshAxisAttr(a) for a in inline)
        )
    return MeshAxisGroups(mesh, tuple(ref.name for ref in refs))


def symbol_names(module: ir.Module) -> set[str]:
    """The symbols the module's top-level ops define (functions, meshes, ...)."""
    names = set()
    for op in module.body.operations:
        attributes = op.operation.attributes
        if "sym_name" in attributes and isinstance(attributes["sym_name"], ir.StringAttr):
            names.add(ir.StringAttr(attributes["sym_name"]).value)
    return names


def unused_symbol(taken: Collection[str], base: str) -> str:
    """`base`, else `base_1`, `base_2`, ...: the first that is not in `taken`."""
    candidate, number = base, 0
    while candidate in taken:
        number += 1
        candidate = f"{base}_{number}"
    return candidate


def sdy_sharding_attr(mesh: str, split: Sequence[Sequence[str]]) -> ir.Attribute:
    """`#sdy.sharding<@mesh, [{"a"}, {}]>`: dimension d split over the axes `split[d]`."""
    dimensions = [
        _sdy.DimensionShardingAttr.get(
            [_sdy.AxisRefAttr.get(axis) for axis in axes], is_closed=True
        )
        for axes in split
    ]
    return _sdy.TensorShardingAttr.get(mesh, dimensions, [], [])


def sdy_sharding_per_value_attr(
    mesh: str, splits: Sequence[Sequence[Sequence[str]]]
) -> ir.Attribute:
    return _sdy.TensorShardingPerValueAttr.get([sdy_sharding_attr(mesh, s) for s in splits])


def sdy_manual_axes_attr(axes: Sequence[str]) -> ir.Attribute:
    return _sdy.ManualAxesAttr.get([ir.StringAttr.get(axis) for axis in axes])


def unknown_location(context: ir.Context) -> ir.Location:
    return ir.Location.unknown(context)


def module_body_start(module: ir.Module) -> ir.InsertionPoint:
    return ir.InsertionPoint.at_block_begin(module.body)


def module_body_end(module: ir.Module) -> ir.InsertionPoint:
    return ir.InsertionPoint(module.body)


def copy_module(module: ir.Module) -> ir.Module:
    """A copy of `module` in its context (its attributes and top-level ops)."""
    with module.context, ir.Location.unknown(module.context):
        copy = ir.Module.create()
        attributes = module.operation.attributes
        for name in attributes:
            copy.operation.attributes[name] = attributes[name]
        for op in module.body.operations:
            op.clone(ip=ir.InsertionPoint(copy.body))
    return copy


def parse_into(module: bytes | str, context: ir.Context) -> ir.Module:
    """`module`, bytecode or text, parsed in `context` (a module pmapc wrote: no
    diagnostics expected)."""
    return ir.Module.parse(module, context=context)


def rename_symbol(module: ir.Module, old: str, new: str) -> None:
    """Rename symbol `old` to `new` everywhere in `module`'s uses."""
    ir.SymbolTable.replace_all_symbol_uses(old, new, module.operation)
