"""The user's FILE.py, as `pmapc trace FILE.py:FUNC` runs it: the file imported
as a module, FUNC found in it, and errors located in the user's file.

An error the file raises as it is imported or traced is one line at the
user's innermost frame (`file:line: error: NameError: ...`); a FUNC the file
lacks names the file and a close match; an error about FUNC itself (not a
function, a bad static argument) is at FUNC's definition.
"""

from __future__ import annotations

import ast
import difflib
import importlib.util
import inspect
import os
import sys
import types
from collections.abc import Callable

from pmapc.errors import PmapcError, SourceLoc
from pmapc.lowering.locations import innermost_user_line


class UserCodeError(PmapcError):
    """The user's file raised while it was imported or traced: its exception, at the
    user's line."""


class TraceInputError(PmapcError):
    """FILE:FUNC or a --static names nothing `pmapc trace` can use; located at the
    user's file (and the function's definition, where known)."""


def load_function(target: str) -> tuple[Callable, SourceLoc]:
    """The function FUNC of FILE.py (the file runs as a module, not __main__) and
    where it is defined."""
    path, sep, name = target.rpartition(":")
    if not sep or not path or not name:
        raise ValueError(f"'{target}' must be FILE.py:FUNC, e.g. examples/quickstart.py:step")
    if not os.path.isfile(path):
        raise ValueError(f"no such file '{path}'")
    module = import_file(path)
    bindings = top_level_bindings(path)
    function = getattr(module, name, None)
    if function is None:
        raise TraceInputError(missing_function_message(module, name, bindings), whole_file(path))
    definition = bindings.get(name) or definition_site(function, path) or whole_file(path)
    if not callable(function):
        raise TraceInputError(
            f"'{name}' is a {type(function).__name__}, not a function; "
            "name a function that calls pmapc.pmap",
            definition,
        )
    return function, definition


def import_file(path: str) -> types.ModuleType:
    """Run `path` as a module; an error it raises is one line at the user's line."""
    spec = importlib.util.spec_from_file_location("_pmapc_traced_module", path)
    if spec is None or spec.loader is None:
        raise TraceInputError(
            "Python cannot load this file as a module; name a .py file", whole_file(path)
        )
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, os.path.dirname(os.path.abspath(path)))
    sys.modules[spec.name] = module  # as an import does: dataclasses and pickle look it up
    try:
        spec.loader.exec_module(module)
    except SyntaxError as error:
        filename = _as_given(error.filename or path, path)
        where = SourceLoc(filename, error.lineno or 0, error.offset or 0)
        raise UserCodeError(f"SyntaxError: {error.msg}", where) from None
    except SystemExit as error:
        exited = user_code_error(error, path)
        raise TraceInputError(
            "the file exits while it is imported; put its script code under "
            '`if __name__ == "__main__":`',
            exited.location,
        ) from None
    except Exception as error:
        raise user_code_error(error, path) from None
    return module


def top_level_bindings(path: str) -> dict[str, SourceLoc]:
    """Where `path` binds each top-level name by `def`, `class` or assignment (the
    last binding of a name)."""
    with open(path, "rb") as handle:  # bytes: Python reads the file's coding line
        tree = ast.parse(handle.read(), path)
    bindings: dict[str, SourceLoc] = {}
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bindings[node.name] = SourceLoc(path, node.lineno, node.col_offset + 1)
        targets = node.targets if isinstance(node, ast.Assign) else []
        if isinstance(node, ast.AnnAssign):
            targets = [node.target]
        for target in targets:
            if isinstance(target, ast.Name):
                bindings[target.id] = SourceLoc(path, target.lineno, target.col_offset + 1)
    return bindings


def definition_site(function: Callable, path: str) -> SourceLoc | None:
    """The first line of `function`'s definition (its first decorator's), for a
    function bound outside the top level of `path` (imported, made in a loop)."""
    code = getattr(inspect.unwrap(function), "__code__", None)
    if code is None:
        return None
    return SourceLoc(_as_given(code.co_filename, path), code.co_firstlineno, 0)


def missing_function_message(
    module: types.ModuleType, name: str, bindings: dict[str, SourceLoc]
) -> str:
    """Why FUNC is not found, with the closest function the file defines."""
    functions = [n for n in bindings if callable(getattr(module, n, None))]
    message = f"no top-level function '{name}' in this file"
    close = difflib.get_close_matches(name, functions, n=1)
    if close:
        return f"{message}; did you mean '{close[0]}' (line {bindings[close[0]].line})?"
    if functions:
        return f"{message}; its functions are {', '.join(functions)}"
    return f"{message}; it defines no function"


def whole_file(path: str) -> SourceLoc:
    """A location that names `path` only (line 0: the whole file)."""
    return SourceLoc(path, 0, 0)


def user_code_error(error: BaseException, path: str) -> UserCodeError:
    """`error`, raised by the user's code, as one line at its innermost user frame
    (FILE.py as the command line named it, `path`)."""
    first_line = str(error).splitlines()[0] if str(error) else ""
    message = f"{type(error).__name__}: {first_line}"
    where = innermost_user_line(error.__traceback__)
    if where is None:
        return UserCodeError(message, whole_file(path))
    return UserCodeError(message, SourceLoc(_as_given(where[0], path), where[1], 0))


def _as_given(filename: str, path: str) -> str:
    """`filename` written as `path` when both name the same file (Python reports
    absolute paths; the user wrote `path`)."""
    try:
        return path if os.path.samefile(filename, path) else filename
    except OSError:
        return filename
