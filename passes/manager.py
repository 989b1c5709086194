"""Running passes: MLIR's pass manager with pmapc's passes in it, and what a run
shares and reports.

`run_passes` runs a pipeline (pmapc's passes and MLIR's, `UpstreamPass`) with
MLIR's `PassManager` (pmapc/ir's adapter): each of pmapc's passes is a Python
pass of it, sharing the analyses (passes/base.py) the passes before kept. It
verifies as mlir-opt does, names the pass that broke the IR, prints the IR
around the passes asked (`IRDumps`, mlir-opt's `--mlir-print-ir-before/after`),
times passes (`Timer`) and pauses Python's cyclic collector while it runs.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import gc
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from typing import ClassVar

from pmapc import ir
from pmapc.errors import Diagnostic, DiagnosticError, PassFailure, PmapcError
from pmapc.passes import KEPT_ANALYSES, forms
from pmapc.passes.base import (
    Analyses,
    Form,
    KeptAnalysis,
    Pass,
    kept_through,
    run_pass,
    summary,
)


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


# An element of a pipeline: one of pmapc's passes, or MLIR's.
Element = Pass | UpstreamPass


def holds(analysis: Callable[[ir.Module], object], result: object, module: ir.Module) -> bool:
    """Whether `result`, kept, is right for `module` as it now is (its keeper says:
    equal to a fresh result, or, for a cache, what it knows is so)."""
    if isinstance(analysis, KeptAnalysis):
        return analysis.keeper.holds(result, module)
    return analysis(module) == result


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
    passes: Sequence[Element],
    after_pass: AfterPass | None = None,
    verify_each: bool = True,
    check_preserved: bool = False,
    instrumentation: ir.Instrumentation | None = None,
    dumps: IRDumps | None = None,
) -> bool:
    """Run `passes` in order with MLIR's pass manager; whether any of pmapc's changed
    the IR (an MLIR pass counts as a change).

    Each of pmapc's passes runs as a Python pass of MLIR's `PassManager`, beside
    MLIR's own (`UpstreamPass`); a pipeline of pmapc's passes alone, neither
    verified after each pass nor instrumented, runs them in turn without it, as
    the manager would. pmapc's passes share analyses until one changes
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
        # The form the module is known to be in: checked on entry to a pass, or left
        # by one of pmapc's passes (a pass that leaves invalid IR is a pmapc bug).
        self.form: Form | None = None

    def run(self, instrumentation: ir.Instrumentation, verify_each: bool) -> bool:
        kept = kept_through(self.passes, KEPT_ANALYSES)
        mlir_passes = any(isinstance(pass_, UpstreamPass) for pass_ in self.passes)
        if not (mlir_passes or verify_each or instrumentation.reports):
            # Nothing MLIR's pass manager alone does is asked for: pmapc's passes are
            # called in turn, without the manager's set-up and its calls into Python
            # (a new program's first call, benchmarks/new_programs.py).
            for index, keep in enumerate(kept):
                self.step(index, keep)
            return self.changed
        manager = ir.PassManager(self.module.context, instrumentation, verify_each)
        for index, (pass_, keep) in enumerate(zip(self.passes, kept)):
            if isinstance(pass_, UpstreamPass):
                self.add_dump(manager, "Before", pass_)
                manager.add_upstream(pass_.text)
                self.add_dump(manager, "After", pass_)
                self.add_after_hook(manager, pass_)
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

    def add_after_hook(self, manager: ir.PassManager, pass_: UpstreamPass) -> None:
        """A pass that tells `after_pass` MLIR's `pass_` ran (for stage snapshots and
        timings), if the caller asked to hear of each pass."""
        if self.after_pass is None:
            return
        hook = functools.partial(self.after_pass, pass_, self.module)
        manager.add_python(hook, "AfterPassHook", "after-pass", "tell the caller a pass ran")

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
                self.check_form(pass_)
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

    def check_form(self, pass_: Pass) -> None:
        """Check the module is in the form `pass_` accepts, unless it is known to be
        (a lowered module is a flattened one with nothing left to lower); then it is
        in the form the pass leaves."""
        accepts: Form | None = getattr(pass_, "accepts", None)
        if accepts is None:
            return  # any valid module: it leaves the form as it was
        known = self.form
        if known is not accepts and not (known is Form.LOWERED and accepts is Form.FLATTENED):
            forms.check(self.module, accepts, pass_.name, self.analyses)
        self.form = getattr(pass_, "produces", accepts)

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
    # The input was valid (parsed and verified, or traced) and in the form the pass
    # takes (checked on entry): the pass made the invalid IR.
    return Diagnostic(
        "note",
        f"invalid IR after pass '{name}' (passes run before it: {before}); this is a "
        "pmapc bug, please report it",
    )
