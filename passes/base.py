"""What every pass is: a frozen dataclass with a `name` and `run(module, analyses,
rewriter) -> bool`; and the analyses the passes share.

Options are the dataclass's typed fields; `from_options` builds a pass from
the `{key=value ...}` text of a pipeline string. Every pass gets the analyses
shared with the passes around it and a rewriter (pmapc/rewriter.py) to edit
through.

Analyses follow MLIR's model: a pass that changed the IR drops every analysis
but those it keeps, each kept current by a keeper listening to its rewriter. A
keeper is declared beside its analysis (`KeptAnalysis`); the passes' registry
lists the analyses that have one (`passes.KEPT_ANALYSES`). A pass that edits
only through its rewriter keeps all of them, by default; one that edits
otherwise (MLIR's passes) says which it keeps, none, in `keeps`. A pass names
the analyses it reads (`reads`), so a pipeline keeps an analysis current only
through the passes before one that reads it (`kept_through`). A pass that
computes an analysis some cheaper way hands it over with `Analyses.provide`,
and its keeper keeps it from there (flatten-maps, the op index).
"""

from __future__ import annotations

import contextlib
import dataclasses
import enum
from collections.abc import Callable, Collection, Iterator, Sequence
from typing import ClassVar, Generic, Protocol, TypeVar, cast

from pmapc import dialect, ir
from pmapc.errors import PipelineError
from pmapc.rewriter import Listener, Rewriter

Result = TypeVar("Result")
# An analysis: a function of the module, its result shared through `Analyses`.
Analysis = Callable[[ir.Module], object]


class Form(enum.Enum):
    """The forms a module takes between passes, in pipeline order (passes/forms.py
    says what each holds and checks it)."""

    PMAPC = "pmapc IR"  # maps and collectives named by axis: before flatten-maps
    FLATTENED = "flattened"  # one program over `pmapc.mesh`, collectives by mesh axes
    LOWERED = "lowered"  # StableHLO collectives over device positions, no pmapc op


class Pass(Protocol):
    name: ClassVar[str]
    # The analyses it reads from `analyses` (`Analyses.get` refuses any other).
    reads: ClassVar[tuple[Analysis, ...]]
    # Optionally, `accepts: ClassVar[Form]`: the form of module it takes, which the
    # pass manager checks on entry (passes/forms.py); and `produces: ClassVar[Form]`,
    # for a pass that leaves another form than it takes. A pass that says nothing takes
    # any valid module and leaves it in its form.
    # Optionally, `keeps: ClassVar[tuple[Analysis, ...]]`: the analyses it keeps
    # current, for a pass that edits other than through its rewriter (`()`: none).
    # A pass that says nothing edits only through its rewriter, whose listeners
    # keep every analysis that has a keeper current (`kept_by`).

    def run(self, module: ir.Module, analyses: Analyses, rewriter: Rewriter) -> bool:
        """Rewrite `module` in place; return whether anything changed."""
        ...


def kept_by(pass_: object, kept: Collection[Analysis]) -> tuple[Analysis, ...]:
    """The analyses `pass_` keeps current: those it names in `keeps`, or, for a pass
    that edits only through its rewriter (it names none), all of `kept` (the
    analyses that have keepers)."""
    return tuple(getattr(pass_, "keeps", kept))


class Keeper(Listener):
    """Keeps an analysis's result current by listening to a pass's rewriter, from the
    result at hand when it is made."""

    def __init__(self, result, module: ir.Module) -> None:
        raise NotImplementedError

    def result(self) -> object:
        """The analysis's result for the IR as the pass left it."""
        raise NotImplementedError

    @staticmethod
    def holds(result, module: ir.Module) -> bool:
        """Whether `result`, kept, is right for `module` as it now is (for tests:
        `run_passes(check_preserved=True)`)."""
        raise NotImplementedError


@dataclasses.dataclass(frozen=True, eq=False)
class KeptAnalysis(Generic[Result]):
    """An analysis that a keeper keeps current through a pass's rewrites: called as
    the analysis function `compute` is, and found with its keeper. Each is defined
    once, and is itself (compared and hashed as an object: the analyses of a run
    are keyed by it)."""

    name: str
    compute: Callable[[ir.Module], Result]
    keeper: type[Keeper]

    def __call__(self, module: ir.Module) -> Result:
        return self.compute(module)

    @property
    def __name__(self) -> str:
        return self.name


class Analyses:
    """What the passes of one run learned about the module, shared while it holds
    (MLIR's analysis manager, simplified): an analysis is a function of the module;
    its result is kept until a pass changes the IR (`after_pass` then drops it),
    unless that pass kept it current (`keeps`)."""

    def __init__(self, kept: Collection[KeptAnalysis] = ()) -> None:
        # The ops' schemas and the mesh, each distinct attribute read once for the
        # whole run (attributes never change: an edit sets a new one).
        self.views = dialect.Views()
        # analysis -> the keeper that brings its result up to date
        self._keepers: dict[Callable, type[Keeper]] = {a: a.keeper for a in kept}
        self._results: dict[Callable, object] = {}
        self._preserved: set[Callable] = set()
        # While a pass runs: the pass, its rewriter, the analyses worth keeping
        # (None: all), and the keepers listening to its rewriter.
        self._running: Pass | None = None
        self._rewriter: Rewriter | None = None
        self._wanted: Collection[Analysis] | None = None
        self._kept: dict[Callable, Keeper] = {}

    def get(self, analysis: Callable[[ir.Module], Result], module: ir.Module) -> Result:
        """`analysis(module)`, computed once while the IR stays as it is."""
        running = self._running
        assert running is None or analysis in running.reads, (
            f"pass '{running.name}' reads analysis '{analysis.__name__}' but does not "
            "say so in its `reads`"
        )
        if analysis not in self._results:
            self._results[analysis] = analysis(module)
        return cast(Result, self._results[analysis])

    def cached(self, analysis: Callable[[ir.Module], Result]) -> Result | None:
        """The result of `analysis` if it is at hand (None: it would have to be computed)."""
        return cast("Result | None", self._results.get(analysis))

    def provide(
        self, analysis: Callable[[ir.Module], Result], result: Result, module: ir.Module
    ) -> None:
        """Say that `result` is `analysis(module)` for the IR as it now is (computed
        some cheaper way). In a pass, its keeper keeps it current through the pass's
        edits from here, if a later pass wants it."""
        self._results[analysis] = result
        if self._rewriter is not None and self._worth_keeping(analysis):
            self._keep(analysis, module, self._rewriter)

    def after_pass(self, changed: bool) -> None:
        """Drop what the pass that just ran made stale: every result, if it changed
        the IR, but those it kept current."""
        if changed:
            self._results = {
                analysis: result
                for analysis, result in self._results.items()
                if analysis in self._preserved
            }
        self._preserved.clear()

    def preserved(self) -> dict[Callable, object]:
        """The analyses the pass that just ran kept current, with their results."""
        return {analysis: self._results[analysis] for analysis in self._preserved}

    @contextlib.contextmanager
    def running(
        self,
        pass_: Pass,
        module: ir.Module,
        rewriter: Rewriter,
        wanted: Collection[Analysis] | None = None,
    ) -> Iterator[None]:
        """While `pass_` runs: `get` gives it only the analyses it `reads`, and each
        analysis it keeps (of those in `wanted`, if given) is computed if not at hand
        and kept current by its keeper, listening to `rewriter`."""
        self._running, self._rewriter, self._wanted = pass_, rewriter, wanted
        self._kept = {}
        try:
            for analysis in kept_by(pass_, self._keepers):
                if self._worth_keeping(analysis):
                    if analysis not in self._results:
                        self._results[analysis] = analysis(module)
                    self._keep(analysis, module, rewriter)
            yield
        finally:
            self._running, self._rewriter, self._wanted = None, None, None
            self._kept = {}

    def preserve_kept(self) -> None:
        """The running pass changed the IR: the results its keepers kept are current."""
        for analysis, keeper in self._kept.items():
            self._results[analysis] = keeper.result()
            self._preserved.add(analysis)

    def _worth_keeping(self, analysis: Analysis) -> bool:
        return analysis in self._keepers and (self._wanted is None or analysis in self._wanted)

    def _keep(self, analysis: Analysis, module: ir.Module, rewriter: Rewriter) -> None:
        keeper = self._keepers[analysis](self._results[analysis], module)
        self._kept[analysis] = keeper
        rewriter.listen(keeper)


def run_pass(
    pass_: Pass, module: ir.Module, analyses: Analyses, keep: Collection[Analysis] | None = None
) -> bool:
    """Run one pass with a rewriter of its own; the analyses it keeps (those in
    `keep`, if given: `kept_through`) are preserved if it changed the IR."""
    rewriter = Rewriter()
    with analyses.running(pass_, module, rewriter, keep):
        changed = pass_.run(module, analyses, rewriter)
        if changed:
            analyses.preserve_kept()
    return changed


def kept_through(passes: Sequence, keepable: Collection[Analysis]) -> list[frozenset[Analysis]]:
    """For each pass of a pipeline, the analyses worth keeping current through it:
    those a later pass reads, as far back as every pass between keeps them (of
    `keepable`, the analyses that have keepers)."""
    kept: list[frozenset[Analysis]] = []
    later: frozenset[Analysis] = frozenset()
    for pass_ in reversed(passes):
        kept.append(later)
        later = frozenset(pass_.reads) | (later & frozenset(kept_by(pass_, keepable)))
    return kept[::-1]


def summary(pass_class: type) -> str:
    """The first line of a pass's docstring (shown by --list-passes)."""
    return (pass_class.__doc__ or "").strip().splitlines()[0]


def option_fields(pass_class: type) -> dict[str, dataclasses.Field]:
    """A pass's options by their names in a pipeline string (kebab-case)."""
    return {f.name.replace("_", "-"): f for f in dataclasses.fields(pass_class)}


def from_options(pass_class: type, options: dict[str, str]):
    """Instantiate `pass_class` with option values parsed by their field types."""
    fields = option_fields(pass_class)
    values = {}
    for key, text in options.items():
        field = fields.get(key)
        if field is None:
            known = ", ".join(sorted(fields)) or "none"
            raise PipelineError(
                f"pass '{pass_class.name}' has no option '{key}'; its options are: {known}"
            )
        values[field.name] = _parse_option(pass_class.name, key, text, field.type)
    return pass_class(**values)


def _parse_option(pass_name: str, key: str, text: str, type_name) -> object:
    type_name = getattr(type_name, "__name__", type_name)
    if type_name == "bool":
        if text in ("true", "1"):
            return True
        if text in ("false", "0"):
            return False
        raise PipelineError(
            f"option '{key}' of pass '{pass_name}' takes true or false, got '{text}'"
        )
    if type_name == "int":
        try:
            return int(text)
        except ValueError:
            raise PipelineError(
                f"option '{key}' of pass '{pass_name}' takes an integer, got '{text}'"
            ) from None
    return text
