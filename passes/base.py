"""What every pass is: a frozen dataclass with a `name` and `run(module, analyses,
rewriter) -> bool`.

Options are the dataclass's typed fields; `from_options` builds a pass from
the `{key=value ...}` text of a pipeline string. Every pass gets the analyses
shared with the passes around it and a rewriter (pmapc/rewriter.py) to edit
through. A pass that changed the IR drops every analysis (MLIR's default) but
those it preserved, and, if it says it `keeps_analyses_current` (every op it
builds, copies or erases goes through its rewriter), those whose keepers
listened to its rewriter. A pass names the analyses it reads (`reads`), so a
pipeline keeps an analysis current only through the passes before one that
reads it (`kept_through`).
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable, Collection, Iterator, Sequence
from typing import ClassVar, Protocol, TypeVar, cast

from pmapc import ir
from pmapc.errors import PipelineError
from pmapc.rewriter import Listener, Rewriter

Result = TypeVar("Result")
# An analysis: a function of the module, its result shared through `Analyses`.
Analysis = Callable[[ir.Module], object]


class Pass(Protocol):
    name: ClassVar[str]
    # Whether every op it builds, copies or erases goes through its rewriter, so that
    # the analyses kept by listening stay current through it.
    keeps_analyses_current: ClassVar[bool]
    # The analyses it reads from `analyses` (`Analyses.get` refuses any other).
    reads: ClassVar[tuple[Analysis, ...]]

    def run(self, module: ir.Module, analyses: Analyses, rewriter: Rewriter) -> bool:
        """Rewrite `module` in place; return whether anything changed."""
        ...


class Keeper(Listener, Protocol):
    """Keeps an analysis's result current by listening to a rewriter. Made from the
    result at hand (None: none is, for a keeper that can start from nothing)."""

    # Whether it needs the result at hand to start from (else it is attached to
    # every pass that keeps analyses current, and its result may be partial).
    needs_result: ClassVar[bool]

    def __init__(self, result, module: ir.Module) -> None: ...

    def result(self) -> object:
        """The analysis's result for the IR as the pass left it."""
        ...


class Analyses:
    """What the passes of one run learned about the module, shared while it holds
    (MLIR's analysis manager, simplified): an analysis is a function of the module;
    its result is kept until a pass changes the IR (`after_pass` then drops it),
    unless that pass preserved it."""

    def __init__(self, keepers: dict[Callable, type[Keeper]] | None = None) -> None:
        # analysis -> the keeper that brings its result up to date
        self._keepers = keepers or {}
        self._results: dict[Callable, object] = {}
        self._preserved: set[Callable] = set()
        self._running: Pass | None = None  # the pass running, while one is

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

    def preserve(self, analysis: Callable[[ir.Module], Result], result: Result) -> None:
        """Say that `result` is `analysis(module)` for the IR the running pass leaves
        (MLIR's markAnalysesPreserved, with the result brought up to date)."""
        self._results[analysis] = result
        self._preserved.add(analysis)

    def after_pass(self, changed: bool) -> None:
        """Drop what the pass that just ran made stale: every result, if it changed
        the IR, but those it preserved."""
        if changed:
            self._results = {
                analysis: result
                for analysis, result in self._results.items()
                if analysis in self._preserved
            }
        self._preserved.clear()

    def preserved(self) -> dict[Callable, object]:
        """The analyses the running pass preserved, with their results."""
        return {analysis: self._results[analysis] for analysis in self._preserved}

    def keepers(
        self, module: ir.Module, wanted: Collection[Analysis] | None = None
    ) -> dict[Callable, Keeper]:
        """A keeper for every analysis at hand that can be kept current, and for every
        one whose keeper can start from nothing; of those in `wanted`, if given."""
        return {
            analysis: keeper(self._results.get(analysis), module)
            for analysis, keeper in self._keepers.items()
            if (analysis in self._results or not keeper.needs_result)
            and (wanted is None or analysis in wanted)
        }

    @contextlib.contextmanager
    def read_by(self, pass_: Pass) -> Iterator[None]:
        """While `pass_` runs: `get` gives it only the analyses it `reads`."""
        self._running = pass_
        try:
            yield
        finally:
            self._running = None


def run_pass(
    pass_: Pass, module: ir.Module, analyses: Analyses, keep: Collection[Analysis] | None = None
) -> bool:
    """Run one pass with a rewriter of its own; the analyses kept by listening to it
    (those in `keep`, if given: `kept_through`) are preserved if the pass changed
    the IR and keeps them current."""
    keepers = analyses.keepers(module, keep) if pass_.keeps_analyses_current else {}
    rewriter = Rewriter(list(keepers.values()))
    with analyses.read_by(pass_):
        changed = pass_.run(module, analyses, rewriter)
    if changed:
        for analysis, keeper in keepers.items():
            if analysis not in analyses.preserved():
                analyses.preserve(analysis, keeper.result())
    return changed


def kept_through(passes: Sequence[Pass]) -> list[frozenset[Analysis]]:
    """For each pass of a pipeline, the analyses worth keeping current through it:
    those a later pass reads, up to the first later pass that drops every analysis
    (one that does not keep analyses current)."""
    kept: list[frozenset[Analysis]] = []
    later: frozenset[Analysis] = frozenset()
    for pass_ in reversed(passes):
        kept.append(later)
        later = frozenset(pass_.reads) | (later if pass_.keeps_analyses_current else frozenset())
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
