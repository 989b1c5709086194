"""The compiler driver: from a traced module to something that runs.

trace      lowering/trace.py: a Python function -> pmapc IR
passes     compiler/pipeline.py's `default_pipeline`: verify, flatten the
           maps, move less data, lower the collectives, pick the target form
embed      compiler/embed.py: inside jax.jit, the per-device program in a
           shard_map over the mesh (JAX compiles and runs it)
compile    compiler/xla.py: XLA, one partition (or replica) per device,
           for `Lowered.compile()` and `pmapc run`
execute    compiler/runtime.py: place inputs, run, assemble outputs
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Sequence

from pmapc import dialect, ir
from pmapc.compiler import runtime
from pmapc.compiler.pipeline import default_pipeline
from pmapc.errors import Diagnostic, DiagnosticError, typed_error
from pmapc.lowering import mesh_devices, trace
from pmapc.mesh import Mesh
from pmapc.options import (
    DEFAULT_GROUP_FORM,
    DEFAULT_RAGGED_FORM,
    DEFAULT_TARGET,
    GroupForm,
    RaggedForm,
    Target,
)
from pmapc.passes.manager import Element, Timer, run_passes


@dataclasses.dataclass
class Compilation:
    """A module taken through the passes, with what happened on the way.

    `source` is a copy of the pmapc IR the passes started from. The IR after
    each stage ("pmapc", each pass name) is made on first use (`snapshots`), by
    running the passes again on a copy of `source`, recording: copying the
    module after every pass would cost more than the passes themselves, for IR
    most compilations never show. `timings` has the seconds each pass took and,
    under "verify", the seconds the verification of the result took.
    """

    module: ir.Module
    source: ir.Operation
    passes: tuple[Element, ...]
    timings: dict[str, float]
    host_callbacks: tuple = ()  # what the module's host-callback ops call (trace.PmapcIR)
    _snapshots: dict[str, ir.Operation] | None = None
    _texts: dict[str, str] = dataclasses.field(default_factory=dict)

    @property
    def mesh(self) -> Mesh:
        return dialect.mesh_of(self.module)

    @property
    def stage_names(self) -> list[str]:
        """ "pmapc", each pass's name, and "stablehlo" (the result), in order."""
        return ["pmapc", *(p.name for p in self.passes), "stablehlo"]

    @property
    def snapshots(self) -> dict[str, ir.Operation]:
        """Stage name -> a copy of the IR after it ("pmapc", each pass)."""
        if self._snapshots is None:
            self._snapshots = record_stages(self.source, self.passes)
        return self._snapshots

    def stage_op(self, stage: str) -> ir.Operation:
        """The IR after `stage` (one of `stage_names`)."""
        if stage == "stablehlo":
            return self.module.operation
        return self.source if stage == "pmapc" else self.snapshots[stage]

    def stage_text(self, stage: str) -> str:
        """The IR after `stage` (one of `stage_names`) as text."""
        if stage not in self._texts:
            self._texts[stage] = ir.print_module(self.stage_op(stage))
        return self._texts[stage]

    @property
    def stages(self) -> dict[str, str]:
        """Stage name -> IR text: "pmapc", each pass, and "stablehlo" (the result)."""
        return {stage: self.stage_text(stage) for stage in self.stage_names}

    def plan(self, devices=None):
        """The communication plan of the compiled module (compiler/plan.py); with the
        devices it runs on, its bytes inside and between hosts and slices."""
        from pmapc.compiler import plan  # plan reads what the driver produces

        return plan.plan_of(self.module, devices)

    def traced_with_locations(self) -> str:
        """The traced pmapc IR with its locations (the user's files and lines)."""
        return ir.print_module(self.source, debug_info=True)


def record_stages(source: ir.Operation, passes: Sequence[Element]) -> dict[str, ir.Operation]:
    """A copy of the IR after each stage: `source` ("pmapc"), then each of `passes`
    run on a copy of it (passes are deterministic: the result is the IR they made)."""
    snapshots = {"pmapc": source}

    def record(pass_, module) -> None:
        snapshots[pass_.name] = ir.detached_clone(module.operation)

    module = ir.copy_into(source, ir.make_context())
    run_passes(module, passes, after_pass=record, verify_each=False)
    return snapshots


def compile_traced(
    traced,
    name: str,
    *,
    target: Target = DEFAULT_TARGET,
    replica_groups: GroupForm = DEFAULT_GROUP_FORM,
    ragged: RaggedForm = DEFAULT_RAGGED_FORM,
    argument_names: Sequence[str] | None = None,
) -> Compilation:
    """A `jax.jit(...).trace(...)` result through pmapc, for the AOT stages
    (`pmapc.lower`) and `pmapc trace`: its pmapc IR (JAX's lowering with pmapc's
    rules, `argument_names` naming @main's arguments if given), then `compile_ir`."""
    start = time.perf_counter()
    traced_ir = trace.pmapc_ir(traced, name)
    if argument_names is not None:
        ir.set_argument_names(ir.functions(traced_ir.module)["main"], argument_names)
    lowered = time.perf_counter() - start
    return compile_ir(
        traced_ir, lowered, target=target, replica_groups=replica_groups, ragged=ragged
    )


def compile_ir(
    traced_ir: trace.PmapcIR,
    lowered: float,
    *,
    target: Target = DEFAULT_TARGET,
    replica_groups: GroupForm = DEFAULT_GROUP_FORM,
    ragged: RaggedForm = DEFAULT_RAGGED_FORM,
    passes: Sequence[Element] | None = None,
) -> Compilation:
    """Traced pmapc IR through `passes`, by default the pipeline for `target`, replica
    groups written `replica_groups` ("named" or "dense"), ragged_all_to_all lowered
    `ragged` ("native" or "expanded"); a diagnostic becomes the typed error of its
    category (an AxisError, a ShapeError). `lowered` is the seconds JAX's lowering
    to pmapc IR took (`timings["lower"]`)."""
    try:
        if passes is None:
            passes = default_pipeline(target, replica_groups, ragged)
        compilation = run_pipeline(traced_ir.module, passes)
    except DiagnosticError as error:
        raise typed_error(error) from None
    compilation.timings = {"lower": lowered, **compilation.timings}
    compilation.host_callbacks = traced_ir.host_callbacks
    return compilation


def run_pipeline(
    source: str | ir.Module,
    passes: Sequence[Element] | None = None,
    target: Target = DEFAULT_TARGET,
) -> Compilation:
    """Run `passes` (default: the default pipeline for `target`) on pmapc IR, text or
    module.

    The result is verified once, after the last pass (`timings["verify"]`). When it
    is invalid (a pmapc bug), the passes run again on a copy of the input,
    verifying after each one, so the error names the pass that broke the IR.
    """
    module = source if isinstance(source, ir.Module) else ir.parse_module(source, ir.make_context())
    passes = tuple(default_pipeline(target) if passes is None else passes)
    original = ir.detached_clone(module.operation)
    timer = Timer()

    def after(pass_, _module) -> None:
        timer.lap(pass_.name)

    timer.restart()
    changed = run_passes(module, passes, after_pass=after, verify_each=False)
    if changed:
        verify_result(module, original, passes)
    timer.lap("verify")
    return Compilation(module, original, passes, timer.seconds)


def verify_result(module: ir.Module, original: ir.Operation, passes: Sequence[Element]) -> None:
    """Verify what `passes` made of `original`; if it is invalid, name the pass that
    broke it by running them again on a copy, verifying after each."""
    try:
        ir.verify(module)
    except DiagnosticError as error:
        run_passes(ir.copy_into(original, ir.make_context()), passes, verify_each=True)
        names = ", ".join(p.name for p in passes)
        raise DiagnosticError(
            [
                *error.diagnostics,
                Diagnostic(
                    "note",
                    f"invalid IR after the pass pipeline ({names}), though valid after each "
                    "pass when run one at a time; this is a pmapc bug, please report it",
                ),
            ]
        ) from None


def compile_for_devices(
    compilation: Compilation, devices=None, backend=None, compiler_options: dict | None = None
):
    """XLA-compile for the mesh's devices: a runtime.Executable."""
    chosen = mesh_devices.pick_devices(compilation.mesh, devices, backend)
    return runtime.Executable(
        compilation.module, chosen, compiler_options, compilation.host_callbacks
    )
