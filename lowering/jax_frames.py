"""What pmapc reads of JAX's frames: the user's file and line of an equation or a
call, the frames JAX's traceback filtering and source locations leave out, and
what JAX's own checks refused (an unbound axis, index groups, an operand shape),
read from the checking frame's variables, never from the message.
(lowering/jax_api.py says which JAX releases, and why one adapter.)"""

from __future__ import annotations

import dataclasses
import importlib.util
import os
from collections.abc import Callable
from typing import Any, TypeVar

import numpy as np
from jax._src import core as _core
from jax._src import source_info_util as _source_info
from jax._src import traceback_util as _traceback_util
from jax._src.lax import parallel as _parallel

from pmapc import collectives

_F = TypeVar("_F", bound=Callable[..., Any])


def called_collective(tb) -> tuple[str, tuple[str, int] | None] | None:
    """(the `jax.lax` function the user called, the user's (file, line) that called it)
    when a traceback went through JAX's collectives module; else None."""
    frame, where = _collective_frame(tb)
    return None if frame is None else (frame.f_code.co_name, where)


def _collective_frame(tb):
    """(the first frame of JAX's collectives module a traceback went through, which
    is the `jax.lax` function the user called; the user's (file, line) that called
    it), or (None, None) where it went through none."""
    where = None
    while tb is not None:
        code = tb.tb_frame.f_code
        if code.co_filename == _parallel.__file__:
            return tb.tb_frame, where
        if is_user_file(code.co_filename):
            where = (code.co_filename, tb.tb_lineno)
        tb = tb.tb_next
    return None, None


def user_line(eqn) -> tuple[str, int] | None:
    """(file, line) of the user's code that made a jaxpr equation, if known."""
    return _user_line_in(eqn.source_info.traceback)


def lowered_user_line() -> tuple[str, int] | None:
    """(file, line) of the user's code whose equation a lowering rule is lowering now
    (JAX sets the equation's traceback as the current source info around each rule)."""
    return _user_line_in(_source_info.current().traceback)


def _user_line_in(traceback) -> tuple[str, int] | None:
    frame = _source_info.user_frame(traceback)
    return (frame.file_name, frame.start_line) if frame is not None else None


def hide_from_locations(*modules) -> None:
    """Leave pmapc's own frames out of the source locations JAX records.

    Ops then carry the user's file and line, not the tracer's.
    """
    for module in modules:
        _source_info.register_exclusion(os.path.dirname(module.__file__) + os.sep)


def hide_from_tracebacks(*packages: str) -> None:
    """Leave the frames of the files of the packages named `packages` out of the
    tracebacks of errors that leave a JAX or pmapc API call, as JAX leaves out its
    own (JAX's traceback filtering: its note "JAX has removed its internal frames"
    then covers them, and `JAX_TRACEBACK_FILTERING=off` shows them again).

    Each package's directories are registered, as installed (an editable install
    maps pmapc's subpackages to directories of their own), found without importing
    the package: the face hides the command line's frames (`pmapc.tools`, the
    layer above it) without importing it.
    """
    for name in packages:
        spec = importlib.util.find_spec(name)
        assert spec is not None and spec.submodule_search_locations is not None, name
        for directory in spec.submodule_search_locations:
            _traceback_util.register_exclusion(os.path.join(os.path.abspath(directory), ""))


def api_boundary(function: _F) -> _F:
    """`function` as an entry point of pmapc's API: an error leaving it has the
    frames `hide_from_tracebacks` hides (and JAX's) filtered from its traceback, as
    an error leaving `jax.jit` has; an entry point called inside another (or
    inside a JAX transformation) leaves the filtering to the outermost."""
    return _traceback_util.api_boundary(function)


def is_user_file(filename: str) -> bool:
    """Whether a frame in `filename` is the user's (not JAX's, pmapc's or Python's)."""
    return _source_info.is_user_filename(filename) and not filename.startswith("<frozen")


def unbound_axis_name(error: NameError):
    """The axis JAX's axis environment was asked for and does not bind, if `error`
    is that lookup's NameError (read from the failing frame, not the message)."""
    lookups = {
        _core.AxisEnv.axis_size.__code__: "axis_name",
        _parallel._check_axis_names.__code__: "name",
    }
    tb = error.__traceback__
    while tb is not None:
        variable = lookups.get(tb.tb_frame.f_code)
        if variable is not None:
            return tb.tb_frame.f_locals.get(variable)
        tb = tb.tb_next
    return None


@dataclasses.dataclass(frozen=True)
class RefusedIndexGroups:
    """`axis_index_groups` that JAX's own check refused, and the call they were given to."""

    function: str | None  # the `jax.lax` function the user called ('pmean', ...), if seen
    axis_name: object  # its axis name or tuple of names
    index_groups: object


def refused_index_groups(error: Exception) -> RefusedIndexGroups | None:
    """What JAX's check of `axis_index_groups` refused, if `error` is that check's
    ValueError (read from its frames, not its message)."""
    check = _parallel._validate_reduce_axis_index_groups.__code__
    function, caller, tb = None, None, error.__traceback__
    while tb is not None:
        code = tb.tb_frame.f_code
        if code is check:
            groups = tb.tb_frame.f_locals.get("axis_index_groups")
            axis_name = caller.f_locals.get("axis_name") if caller is not None else None
            return RefusedIndexGroups(function, axis_name, groups)
        if function is None and code.co_filename == _parallel.__file__:
            function = code.co_name
        caller, tb = tb.tb_frame, tb.tb_next
    return None


def called_with_index_groups(error: Exception) -> RefusedIndexGroups | None:
    """The `jax.lax` collective the user called with `axis_index_groups`, if `error`
    was raised inside that call (read from its frame): JAX may refuse groups there
    before any check of its own reads them. From jax 0.12.1, `all_gather` over
    groups of several sizes binds its primitive with a traced `axis_size` (its
    `psum(1, ...)` is no longer a constant there), which `bind` refuses as an
    unhashable parameter."""
    frame, _ = _collective_frame(error.__traceback__)
    if frame is None or frame.f_locals.get("axis_index_groups") is None:
        return None
    groups = frame.f_locals["axis_index_groups"]
    return RefusedIndexGroups(frame.f_code.co_name, frame.f_locals.get("axis_name"), groups)


@dataclasses.dataclass(frozen=True)
class RefusedShape:
    """A collective's operand that JAX's check refused for its shape (a dimension its
    group does not divide, or not of the group's size), as pmapc's shape rule for the
    kind (`pmapc/shapes.py`) takes it."""

    kind: str  # pmapc's kind: 'psum_scatter', 'all_to_all'
    axis_name: tuple  # the axis names the call named
    shape: tuple[int, ...]  # the refused operand's (one leaf's, for a pytree)
    params: dict[str, object]  # the kind's parameters (pmapc's `Params` fields, JAX's names)


def _dimension(axis, rank: int):
    """A dimension JAX takes negative counted from the end; one out of range as given."""
    return axis + rank if -rank <= axis < 0 else axis


def _names(axis_name) -> tuple:
    return tuple(axis_name) if isinstance(axis_name, (tuple, list)) else (axis_name,)


def _refused_reduce_scatter(variables: dict) -> RefusedShape:
    """From the frame of `reduce_scatter_p`'s abstract evaluation (`psum_scatter`)."""
    shape = tuple(variables["x_aval"].shape)
    return RefusedShape(
        "psum_scatter",
        _names(variables["axis_name"]),
        shape,
        {
            "scatter_dimension": _dimension(variables["scatter_dimension"], len(shape)),
            "tiled": variables["tiled"],
            **_index_groups(variables),
        },
    )


def _refused_all_to_all(variables: dict) -> RefusedShape:
    """From the frame of `all_to_all`'s check of one leaf, before it binds the primitive."""
    shape = tuple(np.shape(variables["x"]))
    return RefusedShape(
        "all_to_all",
        _names(variables["axis_name"]),
        shape,
        {
            "split_axis": _dimension(variables["split_axis"], len(shape)),
            "concat_axis": _dimension(variables["concat_axis"], len(shape)),
            "tiled": variables["tiled"],
            **_index_groups(variables),
        },
    )


def _index_groups(variables: dict) -> dict[str, object]:
    groups = collectives.index_groups_from_jax(variables["axis_index_groups"])
    return {collectives.INDEX_GROUPS_NAME: groups}


def _nested_code(function, name: str):
    """The code of the function `name` defined inside `function` (None if there is none)."""
    found = [c for c in function.__code__.co_consts if getattr(c, "co_name", None) == name]
    return found[0] if len(found) == 1 else None


# The frames in which JAX checks a collective's operand shape, and how to read the call
# from each one's variables.
_SHAPE_CHECKS: dict[Any, Callable[[dict], RefusedShape]] = {
    _parallel._reduce_scatter_effectful_abstract_eval.__code__: _refused_reduce_scatter,
    _nested_code(_parallel._all_to_all_is_async, "bind"): _refused_all_to_all,
}


def refused_shape(error: Exception) -> RefusedShape | None:
    """The collective call whose operand shape JAX's check refused, if `error` is that
    check's (read from the checking frame's variables, not the message)."""
    found, tb = None, error.__traceback__
    while tb is not None:
        read = _SHAPE_CHECKS.get(tb.tb_frame.f_code)
        if read is not None:
            found = (read, tb.tb_frame.f_locals)
        tb = tb.tb_next
    if found is None:
        return None
    read, variables = found
    try:
        return read(dict(variables))
    except (KeyError, AttributeError, TypeError):  # a release that names them otherwise
        return None


def raised_by_collective(tb) -> bool:
    """Whether a traceback went through JAX's collective primitives (a user's bad call)."""
    collectives_file = _parallel.__file__
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == collectives_file:
            return True
        tb = tb.tb_next
    return False
