"""Contexts, parsing, printing, verifying and MLIR's pass manager, and the
binding types the rest of pmapc names.

(pmapc/ir/__init__.py: the one adapter over jaxlib's MLIR bindings.)
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import re
import sys
from collections.abc import Callable, Iterator
from typing import cast

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
    every one up front costs more than the rest of the context: a new program's
    first call, benchmarks/new_programs.py).

    pmapc never changes the settings of a context JAX hands out (from 0.11 on, JAX
    reuses one per thread for later lowerings). What it hands to a user or parses
    lives in a context of its own: `pmapc.lower`'s compilation (JAX's lowering read
    in by `copy_into`), `pmapc opt`'s input. A map inside `jax.jit` is rewritten
    where JAX's lowering built it, a module of its own in the enclosing lowering's
    context, dropped once compiled (lowering/trace.py: `map_ir`); its verification
    and passes raise their errors there as here (tests/py/test_jax_hooks.py).
    Parsing runs in pmapc's contexts only, on the calling thread: with MLIR's
    thread pool, a verifier error raised on a worker thread while parsing needs
    the GIL to reach Python's error capture while the parsing thread holds it, and
    the process deadlocks (found by scripts/fuzz_ir.py).
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
