"""The exceptions pmapc raises, and the diagnostics they carry.

A user error in IR is a `Diagnostic` at an op's location; a pass or the parser
raises `DiagnosticError` holding one or more of them, and the tools render
them as `file:line:col: error: message`. Errors of the Python API are typed
subclasses of `PmapcError` so callers can tell an axis mistake from a shape
or device mistake.
"""

from __future__ import annotations

import dataclasses
import difflib
import enum
import os
from collections.abc import Hashable, Sequence


@dataclasses.dataclass(frozen=True)
class SourceLoc:
    """A file:line:col position (line and column are 1-based)."""

    file: str
    line: int
    col: int

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.col}"


def shown_file(file: str) -> str:
    """A source file as a message names it: relative to the working directory where it
    lies below it, else as given."""
    if not os.path.isabs(file):
        return file
    relative = os.path.relpath(file)
    return file if relative.startswith("..") else relative


class Category(enum.Enum):
    """What a diagnostic is about; it picks the exception the Python API raises."""

    AXIS = "axis"  # an axis unbound, repeated, or bound differently by siblings
    SHAPE = "shape"  # a shape or dimension that does not fit a map or a collective
    IR = "ir"  # malformed pmapc IR (a hand-written module, or a pmapc bug)
    UNSUPPORTED = "unsupported"  # valid, but not something pmapc can run


@dataclasses.dataclass(frozen=True)
class Diagnostic:
    """One message at one place, with optional notes (MLIR's model)."""

    severity: str  # "error", "warning" or "note"
    message: str
    loc: SourceLoc | None = None
    notes: tuple[Diagnostic, ...] = ()
    category: Category = Category.IR

    def render(self, filename: str | None = None) -> str:
        """`file:line:col: error: message`; `filename` names a "-" (stdin) location."""
        loc = self.loc
        if loc is not None and filename and loc.file in ("-", ""):
            loc = SourceLoc(filename, loc.line, loc.col)
        where = f"{loc}: " if loc else ""
        lines = [f"{where}{self.severity}: {self.message}"]
        lines.extend(note.render(filename) for note in self.notes)
        return "\n".join(lines)


class PmapcError(Exception):
    """Base class of every error pmapc raises on bad input.

    `location` is the user's file and line the error is about (column 0 when
    unknown), if known; the message then starts with `file:line:`.
    """

    def __init__(self, message: str = "", location: SourceLoc | None = None):
        super().__init__(message)
        self.message = message
        self.location = location

    def __str__(self) -> str:
        if self.location is None:
            return self.message
        return f"{self.location.file}:{self.location.line}: {self.message}"

    def at(self, location: SourceLoc) -> PmapcError:
        """The same error at `location` (its type and message kept)."""
        located = type(self)(self.message, location)
        located.__traceback__ = self.__traceback__
        return located


class DiagnosticError(PmapcError):
    """IR-level errors: one or more diagnostics at op locations."""

    def __init__(self, diagnostics: list[Diagnostic] | Diagnostic):
        if isinstance(diagnostics, Diagnostic):
            diagnostics = [diagnostics]
        self.diagnostics = list(diagnostics)
        super().__init__(self.render())

    def __str__(self) -> str:
        return self.render()

    def render(self, filename: str | None = None) -> str:
        return "\n".join(d.render(filename) for d in self.diagnostics)


def first_line(error: BaseException) -> str:
    """The first line of `error`'s message (another library's, quoted in one of
    pmapc's), or its class's name where it has none."""
    lines = str(error).strip().splitlines()
    return lines[0] if lines else type(error).__name__


def did_you_mean(name: Hashable, candidates: Sequence[Hashable]) -> str:
    """`; did you mean 'model'?` when the axis name `name` is a near miss of one of
    `candidates` (the closest, by difflib's ratio), else ''."""
    if not isinstance(name, str):
        return ""
    names = [candidate for candidate in candidates if isinstance(candidate, str)]
    close = difflib.get_close_matches(name, names, n=1)
    return f"; did you mean '{close[0]}'?" if close else ""


# Each error is also the builtin class JAX raises for the same mistake, so
# `except` clauses written for jax.pmap keep working.


class AxisError(PmapcError, NameError):
    """An axis name is unbound, repeated, or bound with conflicting sizes."""


class ShapeError(PmapcError, ValueError):
    """A shape or dimension does not fit a map or a collective."""


class ArgumentError(PmapcError, TypeError, ValueError):
    """An argument is not an array, a static argument is not hashable, or an argument
    number is out of range (JAX raises TypeError for the first two, ValueError for
    the last)."""


class DeviceError(PmapcError, ValueError):
    """The devices available or requested do not fit the mesh."""


class FoldError(DeviceError):
    """A nest that cannot be folded onto the devices asked for (`pmapc.fold_onto`)."""


class ProcessError(PmapcError, RuntimeError):
    """The processes of a multi-process run are about to run different programs, or
    some did not reach the program in time (compiler/agreement.py)."""


class UnsupportedError(PmapcError, ValueError):
    """The program uses a JAX feature pmapc does not run inside a map (the message
    names it and what to write instead)."""


class PipelineError(PmapcError):
    """A pass pipeline string is malformed or names an unknown pass."""


class PassFailure(PmapcError, RuntimeError):
    """A pass raised an error of its own (a pmapc bug): the pass, the passes before it
    and the error, which is also the exception's `__cause__`."""

    def __init__(self, pass_name: str, before: list[str], error: BaseException):
        self.pass_name = pass_name
        super().__init__(
            f"pass '{pass_name}' failed (passes run before it: {', '.join(before) or 'none'}): "
            f"{type(error).__name__}: {error}; this is a pmapc bug, please report it with "
            "the input (pmapc trace --emit=pmapc writes it)"
        )


_ERROR_CLASSES: dict[Category, type[PmapcError]] = {
    Category.AXIS: AxisError,
    Category.SHAPE: ShapeError,
    Category.UNSUPPORTED: UnsupportedError,
}


def typed_error(error: DiagnosticError) -> PmapcError:
    """A DiagnosticError from the passes as the error of its category (AxisError,
    ShapeError) at the user's line; malformed IR stays a DiagnosticError."""
    diagnostic = error.diagnostics[0]
    error_class = _ERROR_CLASSES.get(diagnostic.category)
    if error_class is None:
        return error
    return error_class(diagnostic.message, diagnostic.loc)
