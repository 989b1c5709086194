"""The compiler driver: the whole pipeline, stage by stage.

    trace                lowering/: the Python function -> pmapc IR
    verify-axes          passes/: every axis bound, every shape right
    flatten-maps         passes/: nested maps -> one SPMD program over the mesh
    fold-gather-slice    passes/: a gather then a slice of one's own block cancel
    sink-slices          passes/: arguments split over inner axes too
    sink-gathers         passes/: results returned split, not gathered
    lower-collectives    passes/: named collectives -> replica groups
    combine-all-reduces  passes/: independent all_reduces -> one
    simplify             passes/: canonicalize and cse
    compile              compiler/xla.py: XLA, one replica per mesh device
    execute              compiler/runtime.py: place inputs, run, assemble outputs
"""

from __future__ import annotations

import dataclasses

from pmapc import dialect, ir
from pmapc.compiler import runtime
from pmapc.compiler.pipeline import DEFAULT_PIPELINE, parse_pipeline, run_passes
from pmapc.mesh import Mesh


def default_passes() -> list:
    """The passes of the stages above, in order (the `pmapc-to-stablehlo` pipeline)."""
    return parse_pipeline(DEFAULT_PIPELINE)


@dataclasses.dataclass
class Compilation:
    """A module taken through the passes, with the IR text after each stage."""

    module: ir.Module
    stages: dict[str, str]
    traced_with_locations: str

    @property
    def mesh(self) -> Mesh:
        return dialect.read_mesh(self.module) or Mesh((), ())


def run_pipeline(pmapc_ir: str, passes: list | None = None) -> Compilation:
    """Parse pmapc IR text and run the passes; record the IR after each."""
    module = ir.parse_module(pmapc_ir, ir.make_context())
    stages = {"pmapc": ir.print_module(module)}

    def record(pass_, module) -> None:
        stages[pass_.name] = ir.print_module(module)

    run_passes(module, default_passes() if passes is None else passes, after_pass=record)
    stages["stablehlo"] = ir.print_module(module)
    return Compilation(module, stages, pmapc_ir)


def compile_for_devices(compilation: Compilation, devices=None, backend=None):
    """XLA-compile for the mesh's devices: a runtime.Executable."""
    chosen = runtime.pick_devices(compilation.mesh, devices, backend)
    return runtime.Executable(compilation.module, chosen)
