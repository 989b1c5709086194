"""Running passes: verified after each pass (`pmapc opt`, mlir-opt's default) or once
at the end (the driver), and a pass that breaks the IR named either way."""

import ast
import dataclasses
import gc
import pathlib
from typing import ClassVar

import pytest

from pmapc import hlo, ir
from pmapc.compiler import driver
from pmapc.compiler.pipeline import default_pipeline
from pmapc.errors import DiagnosticError, PassFailure
from pmapc.passes import KEPT_ANALYSES
from pmapc.passes.base import Analyses, kept_by, kept_through
from pmapc.passes.combine_all_reduces import reduction_keys
from pmapc.passes.flatten_maps import FlattenMapsPass
from pmapc.passes.fold_reshapes import FoldReshapesPass
from pmapc.passes.manager import UpstreamPass, cyclic_gc_paused, run_passes
from pmapc.passes.nesting import analyze
from pmapc.passes.op_index import op_index
from pmapc.passes.verify_axes import VerifyAxesPass, verified_nesting
from pmapc.rewriter import Rewriter
from pmapc.tools.main import main

EXAMPLE_IR = pathlib.Path(__file__).parents[2] / "examples" / "nested_2x4.mlir"


@dataclasses.dataclass(frozen=True)
class BreakResultTypePass:
    """Declare @main's results as i32 scalars: its return no longer matches (invalid IR)."""

    name: ClassVar[str] = "break-result-type"
    keeps: ClassVar[tuple] = ()  # it edits without the rewriter
    reads: ClassVar[tuple] = ()

    def run(self, module: ir.Module, analyses, rewriter) -> bool:
        main_function = ir.functions(module)["main"]
        signature = ir.function_type(main_function)
        scalar = ir.tensor_type([], ir.i32_type())
        ir.set_function_type(main_function, signature.inputs, [scalar] * len(signature.results))
        return True


BROKEN = (VerifyAxesPass(), FlattenMapsPass(), BreakResultTypePass(), FoldReshapesPass())


@dataclasses.dataclass(frozen=True)
class AskForAnalysisPass:
    """Ask the shared analyses for `analysis`; say the IR changed if `changes`."""

    name: ClassVar[str] = "ask-for-analysis"
    keeps: ClassVar[tuple] = ()  # it edits without the rewriter
    analysis: object
    changes: bool = False

    @property
    def reads(self) -> tuple:
        return (self.analysis,)

    def run(self, module: ir.Module, analyses, rewriter) -> bool:
        analyses.get(self.analysis, module)
        return self.changes


def example_module() -> ir.Module:
    return ir.parse_module(EXAMPLE_IR.read_text(), ir.make_context())


def broken_pass_note(error: DiagnosticError):
    notes = [d for d in error.diagnostics if d.severity == "note"]
    assert notes, error.diagnostics
    return notes[-1].message


def test_verify_each_names_the_pass_and_stops_there():
    with pytest.raises(DiagnosticError) as raised:
        run_passes(example_module(), BROKEN, verify_each=True)
    assert broken_pass_note(raised.value) == (
        "invalid IR after pass 'break-result-type' (passes run before it: verify-axes, "
        "flatten-maps); this is a pmapc bug, please report it"
    )


def test_without_verify_each_nothing_is_verified_between_passes():
    module = example_module()
    assert run_passes(module, BROKEN, verify_each=False)
    with pytest.raises(DiagnosticError):
        ir.verify(module)


def test_the_driver_verifies_the_result_and_replays_to_name_the_pass():
    with pytest.raises(DiagnosticError) as raised:
        driver.run_pipeline(EXAMPLE_IR.read_text(), passes=BROKEN)
    assert "invalid IR after pass 'break-result-type'" in broken_pass_note(raised.value)


def test_the_driver_times_every_pass_and_the_verification():
    compilation = driver.run_pipeline(EXAMPLE_IR.read_text())
    names = [p.name for p in default_pipeline()]
    assert list(compilation.timings) == [*names, "verify"]
    assert list(compilation.stages) == ["pmapc", *names, "stablehlo"]


@pytest.mark.parametrize("flag", ["--verify-each=false", "--verify-each=true", "--verify-each"])
def test_opt_output_does_not_depend_on_verify_each(flag, capsys):
    assert main(["opt", str(EXAMPLE_IR), "--pmapc-to-stablehlo"]) == 0
    expected = capsys.readouterr().out
    assert main(["opt", str(EXAMPLE_IR), "--pmapc-to-stablehlo", flag]) == 0
    assert capsys.readouterr().out == expected


def test_passes_share_an_analysis_until_one_changes_the_ir():
    computed = []

    def analysis(module):
        computed.append(module)
        return len(computed)

    ask, ask_and_change = AskForAnalysisPass(analysis), AskForAnalysisPass(analysis, True)
    run_passes(example_module(), [ask, ask, ask_and_change, ask, ask], verify_each=False)
    assert len(computed) == 2  # once at the start, once after the pass that changed it


@dataclasses.dataclass(frozen=True)
class ReadUndeclaredPass:
    """Ask for the op index without naming it in `reads`."""

    name: ClassVar[str] = "read-undeclared"
    reads: ClassVar[tuple] = ()

    def run(self, module: ir.Module, analyses, rewriter) -> bool:
        analyses.get(op_index, module)
        return False


def test_a_pass_gets_only_the_analyses_it_reads():
    with pytest.raises(PassFailure, match="reads analysis 'op_index' but does not say so"):
        run_passes(example_module(), [ReadUndeclaredPass()])


def test_an_analysis_is_kept_current_only_through_passes_before_one_that_reads_it():
    passes = default_pipeline()
    kept = dict(zip([p.name for p in passes], kept_through(passes, KEPT_ANALYSES), strict=True))
    # flatten-maps builds the op index, so verify-axes keeps nothing of it.
    assert kept["verify-axes"] == {verified_nesting}
    assert kept["flatten-maps"] == {op_index, reduction_keys}
    assert kept["lower-collectives"] == {op_index, reduction_keys}
    # No pass after combine-all-reduces reads its keys; fold-reshapes reads the index.
    assert kept["combine-all-reduces"] == {op_index}
    assert kept["to-partitions"] == {op_index}
    assert kept["fold-reshapes"] == set()


def test_a_pass_that_drops_every_analysis_ends_what_is_kept_before_it():
    @dataclasses.dataclass(frozen=True)
    class DropEverythingPass:
        name: ClassVar[str] = "drop-everything"
        reads: ClassVar[tuple] = ()
        keeps: ClassVar[tuple] = ()  # it edits without the rewriter

    passes = (VerifyAxesPass(), DropEverythingPass(), FoldReshapesPass())
    assert kept_through(passes, KEPT_ANALYSES) == [frozenset(), {op_index}, frozenset()]


def test_a_pass_that_edits_through_its_rewriter_keeps_every_kept_analysis_by_default():
    """Each keeper is declared beside its analysis; a pass says nothing to keep them,
    and no pass imports another's analysis to say it keeps it."""
    assert all(analysis.keeper is not None for analysis in KEPT_ANALYSES)
    lowering = next(p for p in default_pipeline() if p.name == "lower-collectives")
    assert kept_by(lowering, KEPT_ANALYSES) == KEPT_ANALYSES
    assert kept_by(UpstreamPass("cse", "cse"), KEPT_ANALYSES) == ()
    root = pathlib.Path(__file__).resolve().parents[2] / "passes"
    importers = sorted(
        path.name
        for path in root.glob("*.py")
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.ImportFrom)
        and any(alias.name in ("reduction_keys", "op_index") for alias in node.names)
        and node.module == "pmapc.passes.combine_all_reduces"
    )
    assert importers == ["__init__.py"]


def test_flatten_maps_on_the_nesting_verify_axes_kept_flattens_the_same():
    shared, alone = example_module(), example_module()
    analyses = Analyses()
    with ir.building(shared):
        VerifyAxesPass().run(shared, analyses, Rewriter())
        assert analyses.get(analyze, shared).chains == analyze(alone).chains
        FlattenMapsPass().run(shared, analyses, Rewriter())
    with ir.building(alone):
        FlattenMapsPass().run(alone, Analyses(), Rewriter())
    assert ir.print_module(shared, debug_info=True) == ir.print_module(alone, debug_info=True)


@dataclasses.dataclass(frozen=True)
class ReshapeWrongCountPass:
    """Ask the reshape builder for @main's argument with another element count."""

    name: ClassVar[str] = "reshape-wrong-count"
    reads: ClassVar[tuple] = ()

    def run(self, module: ir.Module, analyses, rewriter: Rewriter) -> bool:
        main_function = ir.functions(module)["main"]
        block = ir.function_entry_block(main_function)
        hlo.reshape(rewriter.at_start(block, main_function.location), block.arguments[0], [3])
        return True


# Verified after each pass, pmapc's passes run in MLIR's pass manager; else in turn.
@pytest.mark.parametrize("verify_each", [True, False])
def test_a_builder_refuses_ill_typed_ops_and_the_driver_names_the_pass(verify_each):
    module = ir.parse_module(EXAMPLE_IR.read_text(), ir.make_context())
    with pytest.raises(PassFailure) as info:
        run_passes(module, (VerifyAxesPass(), ReshapeWrongCountPass()), verify_each=verify_each)
    message = str(info.value)
    assert "pass 'reshape-wrong-count' failed (passes run before it: verify-axes)" in message
    assert "BuildError: reshape of tensor<2x4x8xf32> to [3]" in message
    assert isinstance(info.value.__cause__, hlo.BuildError)
    assert isinstance(info.value, RuntimeError)


@dataclasses.dataclass(frozen=True)
class ReportCollectorPass:
    """Record whether Python's cyclic garbage collector runs while the pass does."""

    name: ClassVar[str] = "report-collector"
    reads: ClassVar[tuple] = ()
    seen: list = dataclasses.field(default_factory=list)

    def run(self, module: ir.Module, analyses, rewriter) -> bool:
        self.seen.append(gc.isenabled())
        return False


def test_the_collector_pauses_while_passes_run_and_resumes_after():
    module = ir.parse_module(EXAMPLE_IR.read_text(), ir.make_context())
    report = ReportCollectorPass()
    assert gc.isenabled()
    run_passes(module, [report, report])
    assert report.seen == [False, False]
    assert gc.isenabled()


def test_a_collector_the_caller_disabled_stays_disabled():
    module = ir.parse_module(EXAMPLE_IR.read_text(), ir.make_context())
    gc.disable()
    try:
        run_passes(module, [ReportCollectorPass()])
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_the_collector_resumes_when_the_last_of_overlapping_pipelines_ends():
    module = ir.parse_module(EXAMPLE_IR.read_text(), ir.make_context())
    with cyclic_gc_paused():
        run_passes(module, [ReportCollectorPass()])
        assert not gc.isenabled()  # the outer pause still holds
    assert gc.isenabled()


def test_the_collector_resumes_after_a_failing_pass():
    module = ir.parse_module(EXAMPLE_IR.read_text(), ir.make_context())
    with pytest.raises(DiagnosticError):
        run_passes(module, BROKEN)
    assert gc.isenabled()


def test_a_map_inside_jit_runs_the_default_pipeline_less_mlirs_passes(monkeypatch):
    """Inside `jax.jit` XLA simplifies after pmapc, and MLIR's canonicalize, set up in
    JAX's context (every dialect loaded), cost more than it tidies: the embedded
    pipeline is the partition form's default one without MLIR's canonicalize and
    cse (XLA's CSE follows), run without MLIR's pass manager, and computes the same."""
    import jax
    import numpy as np
    from jax import lax

    import pmapc
    from pmapc.options import GroupForm, Target

    ran = []
    run_pipeline = driver.run_pipeline

    def recording(module, passes=None, *args, **kwargs):
        ran.append(tuple(p.name for p in passes))
        return run_pipeline(module, passes, *args, **kwargs)

    monkeypatch.setattr(driver, "run_pipeline", recording)
    monkeypatch.setattr(ir, "PassManager", None)  # no MLIR pass manager is made
    jax.clear_caches()  # no program of this structure kept (embed.SHARED_PROGRAMS)
    x = np.arange(2 * 4 * 9, dtype=np.float32).reshape(2, 4, 9)  # a shape of its own

    def body(v):
        return pmapc.pmap(lambda w: lax.pmax(w - 2.0, "model"), axis_name="model")(v)

    out = jax.jit(pmapc.pmap(body, axis_name="data"))(x)
    np.testing.assert_array_equal(
        np.asarray(out), np.broadcast_to((x - 2).max(1, keepdims=True), x.shape)
    )
    default = [p.name for p in default_pipeline(Target.PARTITIONS, GroupForm.DENSE)]
    assert "canonicalize" in default and "cse" in default
    assert ran == [tuple(name for name in default if name not in ("canonicalize", "cse"))]
