"""What every pass is: a frozen dataclass with a `name` and `run(module) -> bool`.

Options are the dataclass's typed fields; `from_options` builds a pass from
the `{key=value ...}` text of a pipeline string. A pass that shares analyses
with the passes around it sets `uses_analyses` and takes them as `run`'s
second argument.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import ClassVar, Protocol, TypeVar

from pmapc import ir
from pmapc.errors import PipelineError

Result = TypeVar("Result")


class Pass(Protocol):
    name: ClassVar[str]

    def run(self, module: ir.Module) -> bool:
        """Rewrite `module` in place; return whether anything changed."""
        ...


class Analyses:
    """What the passes of one run learned about the module, shared while it holds
    (MLIR's analysis manager, simplified): an analysis is a function of the module;
    its result is kept until a pass changes the IR (`after_pass` then drops it),
    unless that pass preserved it."""

    def __init__(self) -> None:
        self._results: dict[Callable, object] = {}
        self._preserved: set[Callable] = set()

    def get(self, analysis: Callable[[ir.Module], Result], module: ir.Module) -> Result:
        """`analysis(module)`, computed once while the IR stays as it is."""
        if analysis not in self._results:
            self._results[analysis] = analysis(module)
        return self._results[analysis]

    def cached(self, analysis: Callable[[ir.Module], Result]) -> Result | None:
        """The result of `analysis` if it is at hand (None: it would have to be computed)."""
        return self._results.get(analysis)

    def preserve(self, analysis: Callable[[ir.Module], Result], result: Result) -> None:
        """Say that `result` is `analysis(module)` for the IR the running pass leaves
        (MLIR's markAnalysesPreserved, with the result brought up to date)."""
        self._results[analysis] = result
        self._preserved.add(analysis)

    def after_pass(self, changed: bool) -> None:
        """Drop what the pass that just ran made stale: every result, if it changed
        the IR, but those it preserved."""
        if changed:
            self._results = {analysis: result for analysis, result in self._results.items()
                             if analysis in self._preserved}
        self._preserved.clear()

    def preserved(self) -> dict[Callable, object]:
        """The analyses the running pass preserved, with their results."""
        return {analysis: self._results[analysis] for analysis in self._preserved}


def run_pass(pass_, module: ir.Module, analyses: Analyses) -> bool:
    """Run one pass, handing it the shared analyses if it uses them."""
    if getattr(pass_, "uses_analyses", False):
        return pass_.run(module, analyses)
    return pass_.run(module)


def summary(pass_class: type) -> str:
    """The first line of a pass's docstring (shown by --list-passes)."""
    return (pass_class.__doc__ or "").strip().splitlines()[0]


def from_options(pass_class: type, options: dict[str, str]):
    """Instantiate `pass_class` with option values parsed by their field types."""
    fields = {f.name.replace("_", "-"): f for f in dataclasses.fields(pass_class)}
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
        raise PipelineError(f"option '{key}' of pass '{pass_name}' takes true or false, "
                            f"got '{text}'")
    if type_name == "int":
        try:
            return int(text)
        except ValueError:
            raise PipelineError(f"option '{key}' of pass '{pass_name}' takes an integer, "
                                f"got '{text}'") from None
    return text
