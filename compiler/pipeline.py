"""The pipeline pmapc runs, pipeline strings, and running passes with verification and timing.

`default_pipeline` is the one definition of the stages after tracing and
their order; the driver, `pmapc opt`'s named pipelines and `--list-passes`
read it. `builtin.module(verify-axes,flatten-maps{split-entry=false})`
follows mlir-opt's textual form; the `builtin.module(...)` wrapper is optional
and named pipelines (`pmapc-to-stablehlo`, `pmapc-lower{target=replicas}`)
expand in place. A named pipeline's one option, `target`, picks the pass that
puts the program in its execution form (passes/__init__.py's TARGETS).
"""

from __future__ import annotations

import contextlib
import gc
import re
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from pmapc import ir
from pmapc.errors import Diagnostic, DiagnosticError, PassFailure, PipelineError, PmapcError
from pmapc.passes import DEFAULT_TARGET, PASSES, TARGETS, Pass
from pmapc.passes.base import Analyses, from_options, kept_through, run_pass
from pmapc.passes.combine_all_reduces import (
    CombineAllReducesPass,
    ReductionKeys,
    reduction_keys,
    reduction_keys_hold,
)
from pmapc.passes.flatten_maps import FlattenMapsPass
from pmapc.passes.fold_gather_slice import FoldGatherSlicePass
from pmapc.passes.lower_collectives import LowerCollectivesPass
from pmapc.passes.op_index import IndexKeeper, op_index
from pmapc.passes.simplify import SimplifyPass
from pmapc.passes.sink_gathers import SinkGathersPass
from pmapc.passes.sink_slices import SinkSlicesPass
from pmapc.passes.to_partitions import DEFAULT_GROUP_FORM, ToPartitionsPass, check_group_form
from pmapc.passes.verify_axes import VerifyAxesPass


def default_pipeline(
    target: str = DEFAULT_TARGET, replica_groups: str = DEFAULT_GROUP_FORM
) -> tuple[Pass, ...]:
    """`pmapc-to-stablehlo`: every stage after tracing, in order; in partition form
    the replica groups written as `replica_groups` says ("named" or "dense")."""
    return (
        VerifyAxesPass(),  # every axis bound, every shape right
        FlattenMapsPass(),  # nested maps -> one SPMD program over the mesh
        FoldGatherSlicePass(),  # a gather then a slice of one's own block cancel
        SinkSlicesPass(),  # arguments split over inner axes too
        SinkGathersPass(),  # results returned split, not gathered
        LowerCollectivesPass(),  # named collectives -> groups of mesh positions
        CombineAllReducesPass(),  # independent all_reduces -> one
        target_pass(target, replica_groups),  # the form jax.jit runs, or the replica form
        SimplifyPass(),  # canonicalize and cse (last: they drop the op index)
    )


# The analyses that passes keep current by listening to their rewriters, and how.
KEPT_ANALYSES = {op_index: IndexKeeper, reduction_keys: ReductionKeys}


# How run_passes(check_preserved=True) checks a preserved result against the IR: equal
# to the analysis computed afresh, or, for a cache, what it holds holds.
CONSISTENT: dict[Callable, Callable[[Any, ir.Module], bool]] = {reduction_keys: reduction_keys_hold}


def holds(analysis: Callable[[ir.Module], object], result: object, module: ir.Module) -> bool:
    """Whether `result`, kept or preserved, is right for `module` as it now is."""
    check = CONSISTENT.get(analysis)
    return check(result, module) if check is not None else analysis(module) == result


# The stages every program needs; the others only move less data.
REQUIRED: tuple[type[Pass], ...] = (
    VerifyAxesPass,
    FlattenMapsPass,
    LowerCollectivesPass,
    *TARGETS.values(),
)


def target_pass(target: str, replica_groups: str = DEFAULT_GROUP_FORM) -> Pass:
    """The pass that puts a lowered program in `target` form."""
    if target == "partitions":
        return ToPartitionsPass(replica_groups=replica_groups)
    return TARGETS[target]()


def lowering_pipeline(
    target: str = DEFAULT_TARGET, replica_groups: str = DEFAULT_GROUP_FORM
) -> tuple[Pass, ...]:
    """`pmapc-lower`: the required stages of the default pipeline, in its order."""
    return tuple(p for p in default_pipeline(target, replica_groups) if isinstance(p, REQUIRED))


# Named pipelines, usable wherever a pass name is: `pmapc-lower{target=replicas}`,
# `pmapc-to-stablehlo{replica-groups=dense}`.
PIPELINES: dict[str, Callable[[str, str], tuple[Pass, ...]]] = {
    "pmapc-lower": lowering_pipeline,
    "pmapc-to-stablehlo": default_pipeline,
}


def describe(name: str, target: str = DEFAULT_TARGET) -> str:
    """A named pipeline's passes, comma-separated (for --list-passes and --help)."""
    return ",".join(p.name for p in PIPELINES[name](target, DEFAULT_GROUP_FORM))


_ELEMENT = re.compile(r"\s*([A-Za-z0-9_.-]+)\s*(\{[^}]*\})?\s*(,|$)")


def parse_pipeline(text: str) -> list:
    """Pass instances for a pipeline string; PipelineError names what is wrong."""
    body = text.strip()
    wrapper = re.fullmatch(r"builtin\.module\((.*)\)", body, flags=re.S)
    if wrapper:
        body = wrapper.group(1)
    passes = []
    position = 0
    while position < len(body):
        match = _ELEMENT.match(body, position)
        if match is None or match.end() == position:
            raise PipelineError(
                f"malformed pass pipeline '{text}' at '{body[position:]}'; "
                "write e.g. 'builtin.module(verify-axes,flatten-maps)'"
            )
        name, options = match.group(1), _parse_options(match.group(2) or "")
        passes.extend(_instantiate(name, options, text))
        position = match.end()
    return passes


def _instantiate(name: str, options: dict[str, str], text: str) -> list:
    if name in PIPELINES:
        return list(PIPELINES[name](*_pipeline_options(name, options)))
    if name not in PASSES:
        known = ", ".join([*PASSES, *PIPELINES])
        raise PipelineError(f"unknown pass '{name}' in pipeline '{text}'; known passes: {known}")
    return [from_options(PASSES[name], options)]


def _pipeline_options(name: str, options: dict[str, str]) -> tuple[str, str]:
    """The `target` and `replica-groups` options of a named pipeline, checked."""
    unknown = sorted(set(options) - {"target", "replica-groups"})
    if unknown:
        raise PipelineError(
            f"pipeline '{name}' has no option '{unknown[0]}'; its options are: "
            "target, replica-groups"
        )
    target = options.get("target", DEFAULT_TARGET)
    if target not in TARGETS:
        choices = " or ".join(TARGETS)
        raise PipelineError(f"option 'target' of pipeline '{name}' takes {choices}, got '{target}'")
    replica_groups = options.get("replica-groups", DEFAULT_GROUP_FORM)
    check_group_form(replica_groups, f"pipeline '{name}'")
    return target, replica_groups


def _parse_options(text: str) -> dict[str, str]:
    options = {}
    for item in text.strip("{}").split():
        key, sep, value = item.partition("=")
        if not sep:
            raise PipelineError(f"pass option '{item}' must be written key=value")
        options[key] = value
    return options


class Timer:
    """Wall time by name (each pass, and whatever else the caller times), summed
    over repeats, in the order the names first came."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self._since = time.perf_counter()

    def add(self, name: str, seconds: float) -> None:
        self.seconds[name] = self.seconds.get(name, 0.0) + seconds

    @contextlib.contextmanager
    def timing(self, name: str) -> Iterator[None]:
        start = time.perf_counter()
        yield
        self.add(name, time.perf_counter() - start)

    def restart(self) -> None:
        """Start the clock for `lap`."""
        self._since = time.perf_counter()

    def lap(self, name: str) -> None:
        """Add the time since `restart` or the last lap to `name`."""
        now = time.perf_counter()
        self.add(name, now - self._since)
        self._since = now


_gc_pauses = 0  # the pipelines running (in any thread) while the collector is paused
_gc_lock = threading.Lock()


@contextlib.contextmanager
def cyclic_gc_paused() -> Iterator[None]:
    """Pause Python's cyclic garbage collector while passes run (if it is enabled).

    A pass makes a few Python objects for every op it visits, the op index and
    its keepers hold one per indexed op, and each of those counts toward the
    collector's next full collection, which walks every object the process
    holds (JAX's included: tens of milliseconds at 10,000 collectives). Passes
    make no reference cycles to speak of (reference counting frees what they
    drop), so the collector resumes, with nothing forced, when the last
    pipeline running ends.
    """
    global _gc_pauses
    with _gc_lock:
        pause = _gc_pauses > 0 or gc.isenabled()
        if pause:
            _gc_pauses += 1
            gc.disable()
    try:
        yield
    finally:
        if pause:
            with _gc_lock:
                _gc_pauses -= 1
                if _gc_pauses == 0:
                    gc.enable()


# after_pass(pass_instance, module) is called after each pass ran (and, with
# verify_each, was verified).
AfterPass = Callable[[object, ir.Module], None]


def run_passes(
    module: ir.Module,
    passes: Sequence[Pass],
    after_pass: AfterPass | None = None,
    verify_each: bool = True,
    check_preserved: bool = False,
) -> bool:
    """Run `passes` in order; whether any of them changed the IR.

    Passes share analyses until one changes the IR (passes/base.py: Analyses);
    an analysis is kept current through a pass only if a later pass reads it.
    With `verify_each` (mlir-opt's `--verify-each`, its default) the IR is
    verified after each pass that changed it, and a pass that leaves invalid
    IR is named with the passes before it (a compiler bug). Without, nothing
    is verified here: the caller verifies the result once (`verify_result`).
    With `check_preserved` (for tests), every analysis a pass preserved is
    computed again afterwards and must come out equal.
    """
    with cyclic_gc_paused():
        return _run_passes(module, passes, after_pass, verify_each, check_preserved)


def _run_passes(
    module: ir.Module,
    passes: Sequence[Pass],
    after_pass: AfterPass | None,
    verify_each: bool,
    check_preserved: bool,
) -> bool:
    done: list[str] = []
    changed_any = False
    analyses = Analyses(KEPT_ANALYSES)
    for pass_, keep in zip(passes, kept_through(passes), strict=True):
        try:
            with ir.building(module):
                changed = run_pass(pass_, module, analyses, keep)
        except PmapcError:
            raise  # a diagnostic about the input, or a failure already named
        except Exception as error:  # a pmapc bug: name the pass that raised it
            raise PassFailure(pass_.name, done, error) from error
        changed_any |= changed
        preserved = analyses.preserved() if check_preserved else {}
        analyses.after_pass(changed)
        for analysis, result in preserved.items():
            if not holds(analysis, result, module):
                raise AssertionError(
                    f"pass '{pass_.name}' preserved analysis "
                    f"'{analysis.__name__}' but left it stale"
                )
        if verify_each and changed:
            verify_after(module, pass_.name, done)
        done.append(pass_.name)
        if after_pass is not None:
            after_pass(pass_, module)
    return changed_any


def verify_after(module: ir.Module, name: str, before: Sequence[str]) -> None:
    """Verify the IR pass `name` left; an error names it and the passes run before it."""
    try:
        ir.verify(module)
    except DiagnosticError as error:
        raise DiagnosticError(
            [*error.diagnostics, _broke_note(name, ", ".join(before) or "none")]
        ) from None


def _broke_note(name: str, before: str) -> Diagnostic:
    advice = (
        "run verify-axes first to check the input"
        if "verify-axes" not in before
        else "this is a pmapc bug, please report it"
    )
    return Diagnostic(
        "note", f"invalid IR after pass '{name}' (passes run before it: {before}); {advice}"
    )
