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
import dataclasses
import functools
import gc
import re
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from typing import ClassVar

from pmapc import ir, options
from pmapc.errors import (
    Diagnostic,
    DiagnosticError,
    PassFailure,
    PipelineError,
    PmapcError,
    did_you_mean,
)
from pmapc.options import (
    DEFAULT_GROUP_FORM,
    DEFAULT_RAGGED_FORM,
    DEFAULT_TARGET,
    GroupForm,
    RaggedForm,
    Target,
)
from pmapc.passes import KEPT_ANALYSES, PASSES, TARGETS, Pass
from pmapc.passes.base import Analyses, KeptAnalysis, from_options, kept_through, run_pass, summary
from pmapc.passes.combine_all_reduces import CombineAllReducesPass
from pmapc.passes.flatten_maps import FlattenMapsPass
from pmapc.passes.fold_gather_slice import FoldGatherSlicePass
from pmapc.passes.lower_collectives import LowerCollectivesPass
from pmapc.passes.predicate_divergent import PredicateDivergentPass
from pmapc.passes.simplify import SimplifyPass
from pmapc.passes.sink_gathers import SinkGathersPass
from pmapc.passes.sink_slices import SinkSlicesPass
from pmapc.passes.to_partitions import ToPartitionsPass, group_form
from pmapc.passes.verify_axes import VerifyAxesPass


def default_pipeline(
    target: Target = DEFAULT_TARGET,
    replica_groups: GroupForm = DEFAULT_GROUP_FORM,
    ragged: RaggedForm = DEFAULT_RAGGED_FORM,
) -> tuple[Pass, ...]:
    """`pmapc-to-stablehlo`: every stage after tracing, in order; in partition form
    the replica groups written as `replica_groups` says ("named" or "dense"), and
    ragged_all_to_all lowered in form `ragged` ("native" or "expanded")."""
    return (
        VerifyAxesPass(),  # every axis bound, every shape right
        FlattenMapsPass(),  # nested maps -> one SPMD program over the mesh
        PredicateDivergentPass(),  # no device waits in a collective others skip
        FoldGatherSlicePass(),  # a gather then a slice of one's own block cancel
        SinkSlicesPass(),  # arguments split over inner axes too
        SinkGathersPass(),  # results returned split, not gathered
        LowerCollectivesPass(ragged=ragged),  # named collectives -> groups of mesh positions
        CombineAllReducesPass(),  # independent all_reduces -> one
        target_pass(target, replica_groups),  # the form jax.jit runs, or the replica form
        SimplifyPass(),  # canonicalize and cse (last: they drop the op index)
    )


def holds(analysis: Callable[[ir.Module], object], result: object, module: ir.Module) -> bool:
    """Whether `result`, kept, is right for `module` as it now is (its keeper says:
    equal to a fresh result, or, for a cache, what it knows is so)."""
    if isinstance(analysis, KeptAnalysis):
        return analysis.keeper.holds(result, module)
    return analysis(module) == result


# The stages every program needs; the others only move less data.
REQUIRED: tuple[type[Pass], ...] = (
    VerifyAxesPass,
    FlattenMapsPass,
    PredicateDivergentPass,
    LowerCollectivesPass,
    *TARGETS.values(),
)


def target_pass(target: Target, replica_groups: GroupForm = DEFAULT_GROUP_FORM) -> Pass:
    """The pass that puts a lowered program in `target` form."""
    if target is Target.PARTITIONS:
        return ToPartitionsPass(replica_groups=replica_groups)
    return TARGETS[target]()


def lowering_pipeline(
    target: Target = DEFAULT_TARGET,
    replica_groups: GroupForm = DEFAULT_GROUP_FORM,
    ragged: RaggedForm = DEFAULT_RAGGED_FORM,
) -> tuple[Pass, ...]:
    """`pmapc-lower`: the required stages of the default pipeline, in its order."""
    passes = default_pipeline(target, replica_groups, ragged)
    return tuple(p for p in passes if isinstance(p, REQUIRED))


# Named pipelines, usable wherever a pass name is: `pmapc-lower{target=replicas}`,
# `pmapc-to-stablehlo{replica-groups=dense}`.
PIPELINES: dict[str, Callable[[Target, GroupForm, RaggedForm], tuple[Pass, ...]]] = {
    "pmapc-lower": lowering_pipeline,
    "pmapc-to-stablehlo": default_pipeline,
}


def describe(name: str, target: Target = DEFAULT_TARGET) -> str:
    """A named pipeline's passes, comma-separated (for --list-passes and --help)."""
    passes = PIPELINES[name](target, DEFAULT_GROUP_FORM, DEFAULT_RAGGED_FORM)
    return ",".join(p.name for p in passes)


@dataclasses.dataclass(frozen=True)
class UpstreamPass:
    """A pipeline element of MLIR's or Shardy's registered passes, run by MLIR's pass
    manager as written: `canonicalize{max-iterations=2}`, `func.func(cse)`, `sdy-...`.
    pmapc keeps no analysis across it (it may change anything)."""

    name: str  # the pass, or the op a nested pipeline runs on
    text: str  # the element as the pipeline writes it
    reads: ClassVar[tuple] = ()
    keeps: ClassVar[tuple] = ()  # it edits without pmapc's rewriter

    def run(self, module: ir.Module, analyses: Analyses, rewriter) -> bool:
        """Run it alone (what the pass manager does in a pipeline)."""
        ir.run_upstream_passes(module, self.text)
        return True


# MLIR's passes a pmapc pipeline most often names (any registered one runs).
COMMON_MLIR_PASSES = ("canonicalize", "cse", "inline", "symbol-dce")

_NAME = re.compile(r"\s*([A-Za-z0-9_.-]+)\s*")


def parse_pipeline(text: str) -> list:
    """Pass instances for a pipeline string in MLIR's textual form; PipelineError names
    what is wrong. pmapc's passes and named pipelines, and MLIR's registered passes
    (with their options, nested pipelines such as `func.func(cse)` too), mix freely;
    the `builtin.module(...)` wrapper is optional."""
    body = text.strip()
    wrapper = re.fullmatch(r"builtin\.module\((.*)\)", body, flags=re.S)
    if wrapper:
        body = wrapper.group(1)
    passes = []
    for element in _top_level_elements(body, text):
        name = _NAME.match(element)
        if name is None:
            raise PipelineError(
                f"malformed pass pipeline '{text}' at '{element}'; "
                "write e.g. 'builtin.module(verify-axes,flatten-maps,canonicalize)'"
            )
        passes.extend(_instantiate(name.group(1), element[name.end() :].strip(), element, text))
    return passes


def _top_level_elements(body: str, text: str) -> list[str]:
    """The comma-separated elements of a pipeline body, each with its options and
    nested pipeline (commas inside braces or parentheses do not split)."""
    elements, start = [], 0
    closing = {"(": ")", "{": "}"}
    stack: list[str] = []
    for position, char in enumerate(body):
        if char in closing:
            stack.append(closing[char])
        elif char in ")}":
            if not stack or stack.pop() != char:
                raise PipelineError(f"malformed pass pipeline '{text}': unbalanced '{char}'")
        elif char == "," and not stack:
            elements.append(body[start:position])
            start = position + 1
    if stack:
        raise PipelineError(f"malformed pass pipeline '{text}': unclosed '{stack[-1]}'")
    elements.append(body[start:])
    elements = [element.strip() for element in elements]
    if elements == [""]:
        return []
    if "" in elements:
        raise PipelineError(f"malformed pass pipeline '{text}': an empty element")
    return elements


def _instantiate(name: str, rest: str, element: str, text: str) -> list:
    if name in PIPELINES or name in PASSES:
        options = re.fullmatch(r"(\{[^{}]*\})?", rest)
        if options is None:
            raise PipelineError(
                f"malformed pass pipeline '{text}' at '{element}'; pmapc's passes run on "
                "the whole module and take only options, e.g. 'flatten-maps{split-entry=false}'"
            )
        parsed = _parse_options(options.group(1) or "")
        if name in PIPELINES:
            return list(PIPELINES[name](*_pipeline_options(name, parsed)))
        return [from_options(PASSES[name], parsed)]
    nested = [n for n in re.findall(r"[A-Za-z0-9_.-]+", rest) if n in PASSES or n in PIPELINES]
    if nested:
        raise PipelineError(
            f"'{nested[0]}' is nested in '{name}(...)' in pipeline '{text}'; pmapc's passes "
            "run on the whole module: put it at the top level"
        )
    why = ir.upstream_pipeline_error(element)
    if why is not None and ir.upstream_pipeline_error(name) is None:
        raise PipelineError(f"MLIR's pass '{name}' in pipeline '{text}': {why}")
    if why is not None:
        known = ", ".join([*PASSES, *PIPELINES])
        suggestion = did_you_mean(name, [*PASSES, *PIPELINES, *COMMON_MLIR_PASSES])
        raise PipelineError(
            f"unknown pass '{name}' in pipeline '{text}' ({why}){suggestion}; pmapc's passes: "
            f"{known}; or a registered MLIR pass, e.g. {', '.join(COMMON_MLIR_PASSES)}, sdy-*"
        )
    return [UpstreamPass(name, element)]


def _pipeline_options(name: str, given: dict[str, str]) -> tuple[Target, GroupForm, RaggedForm]:
    """The `target`, `replica-groups` and `ragged` options of a named pipeline, read as
    types."""
    unknown = sorted(set(given) - {"target", "replica-groups", "ragged"})
    if unknown:
        raise PipelineError(
            f"pipeline '{name}' has no option '{unknown[0]}'; its options are: "
            "target, replica-groups, ragged"
        )
    text = given.get("target", DEFAULT_TARGET)
    target = options.parse(Target, text)
    if target is None:
        choices = " or ".join(options.choices(Target))
        raise PipelineError(f"option 'target' of pipeline '{name}' takes {choices}, got '{text}'")
    form = group_form(given.get("replica-groups", DEFAULT_GROUP_FORM), f"pipeline '{name}'")
    text = given.get("ragged", DEFAULT_RAGGED_FORM)
    ragged = options.parse(RaggedForm, text)
    if ragged is None:
        choices = " or ".join(options.choices(RaggedForm))
        raise PipelineError(f"option 'ragged' of pipeline '{name}' takes {choices}, got '{text}'")
    return target, form, ragged


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


# after_pass(pass_instance, module) is called after each of pmapc's passes ran.
AfterPass = Callable[[object, ir.Module], None]


@dataclasses.dataclass(frozen=True)
class IRDumps:
    """The passes, by pipeline name, to print the IR before and after (mlir-opt's
    `--mlir-print-ir-before=`/`-after=`). MLIR's Python bindings print every pass or
    none, so these are printed here, in MLIR's format: inside a pass of pmapc's, and
    by a printing pass beside an MLIR pass."""

    before: frozenset[str] = frozenset()
    after: frozenset[str] = frozenset()
    debug_info: bool = False

    @property
    def any(self) -> bool:
        return bool(self.before or self.after)

    def wanted(self, when: str, name: str) -> bool:
        return name in (self.before if when == "Before" else self.after)

    def dump(self, when: str, title: str, module: ir.Module) -> None:
        """Print `module` on stderr under MLIR's dump header, e.g. `IR Dump After
        FlattenMapsPass: flatten-maps`."""
        print(f"// -----// IR Dump {when} {title} //----- //", file=sys.stderr)
        print(ir.print_module(module, debug_info=self.debug_info), file=sys.stderr, flush=True)


def run_passes(
    module: ir.Module,
    passes: Sequence[Pass],
    after_pass: AfterPass | None = None,
    verify_each: bool = True,
    check_preserved: bool = False,
    instrumentation: ir.Instrumentation | None = None,
    dumps: IRDumps | None = None,
) -> bool:
    """Run `passes` in order with MLIR's pass manager; whether any of pmapc's changed
    the IR (an MLIR pass counts as a change).

    Each of pmapc's passes runs as a Python pass of MLIR's `PassManager`, beside
    MLIR's own (`UpstreamPass`). pmapc's passes share analyses until one changes
    the IR (passes/base.py: Analyses), and none survives an MLIR pass; an
    analysis is kept current through a pass only if a later pass reads it. With
    `verify_each` (mlir-opt's `--verify-each`, its default) MLIR verifies the IR
    after each pass, and a pass that leaves invalid IR is named with the passes
    before it (a compiler bug). Without, nothing is verified here: the caller
    verifies the result once (`verify_result`). `instrumentation` asks MLIR to
    print the IR, time the passes or count statistics, and `dumps` prints it
    around the passes it names. With
    `check_preserved` (for tests), every analysis a pass preserved is computed
    again afterwards and must come out equal.
    """
    run = _PipelineRun(module, tuple(passes), after_pass, check_preserved, dumps or IRDumps())
    with cyclic_gc_paused():
        return run.run(instrumentation or ir.Instrumentation(), verify_each)


class _PipelineRun:
    """One run of a pipeline: the pass manager, and what pmapc's passes share."""

    def __init__(self, module, passes, after_pass, check_preserved, dumps: IRDumps) -> None:
        self.module = module
        self.dumps = dumps
        self.passes = passes
        self.after_pass = after_pass
        self.check_preserved = check_preserved
        self.analyses = Analyses(KEPT_ANALYSES)
        self.done: list[str] = []
        self.last: int | None = None  # the index of the last of pmapc's passes started
        self.changed = False

    def run(self, instrumentation: ir.Instrumentation, verify_each: bool) -> bool:
        manager = ir.PassManager(self.module.context, instrumentation, verify_each)
        kept = kept_through(self.passes, KEPT_ANALYSES)
        for index, (pass_, keep) in enumerate(zip(self.passes, kept)):
            if isinstance(pass_, UpstreamPass):
                self.add_dump(manager, "Before", pass_)
                manager.add_upstream(pass_.text)
                self.add_dump(manager, "After", pass_)
                self.changed = True
                continue
            manager.add_python(
                functools.partial(self.step, index, keep),
                type(pass_).__name__,
                pass_.name,
                summary(type(pass_)),
            )
        try:
            manager.run(self.module)
        except ir.InvalidIR as error:
            raise DiagnosticError([*error.diagnostics, self.broke_note()]) from None
        return self.changed

    def add_dump(self, manager: ir.PassManager, when: str, pass_: UpstreamPass) -> None:
        """A pass that prints the IR before or after MLIR's `pass_`, if asked for."""
        if not self.dumps.wanted(when, pass_.name):
            return
        dump = functools.partial(self.dumps.dump, when, pass_.text, self.module)
        manager.add_python(dump, "PrintIRPass", "print-ir", "print the IR on stderr")

    def step(self, index: int, keep) -> None:
        """Run pmapc's pass `index` (the pass manager calls it)."""
        pass_ = self.passes[index]
        if index and isinstance(self.passes[index - 1], UpstreamPass):
            self.analyses.after_pass(True)  # an MLIR pass ran: nothing kept holds
        self.last = index
        title = f"{type(pass_).__name__}: {pass_.name}"
        if self.dumps.wanted("Before", pass_.name):
            self.dumps.dump("Before", title, self.module)
        try:
            with ir.building(self.module):
                changed = run_pass(pass_, self.module, self.analyses, keep)
        except PmapcError:
            raise  # a diagnostic about the input, or a failure already named
        except Exception as error:  # a pmapc bug: name the pass that raised it
            raise PassFailure(pass_.name, self.done, error) from error
        self.changed |= changed
        preserved = self.analyses.preserved() if self.check_preserved else {}
        self.analyses.after_pass(changed)
        for analysis, result in preserved.items():
            if not holds(analysis, result, self.module):
                raise AssertionError(
                    f"pass '{pass_.name}' preserved analysis "
                    f"'{analysis.__name__}' but left it stale"
                )
        self.done.append(pass_.name)
        if self.dumps.wanted("After", pass_.name):
            self.dumps.dump("After", title, self.module)
        if self.after_pass is not None:
            self.after_pass(pass_, self.module)

    def broke_note(self) -> Diagnostic:
        """Which pass left the IR the verifier refused: the last of pmapc's passes that
        ran, or an MLIR pass after it (MLIR verifies after each pass)."""
        last = -1 if self.last is None else self.last
        following = []
        for pass_ in self.passes[last + 1 :]:
            if not isinstance(pass_, UpstreamPass):
                break
            following.append(pass_.name)
        if last < 0:
            return _broke_note(" or ".join(following), "none")
        name = self.passes[last].name
        if following:
            name = f"{name}' or an MLIR pass after it ('{', '.join(following)}"
        return _broke_note(name, ", ".join(self.done[:-1]) or "none")


def _broke_note(name: str, before: str) -> Diagnostic:
    advice = (
        "run verify-axes first to check the input"
        if "verify-axes" not in before
        else "this is a pmapc bug, please report it"
    )
    return Diagnostic(
        "note", f"invalid IR after pass '{name}' (passes run before it: {before}); {advice}"
    )
