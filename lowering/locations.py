"""Pointing errors at the user's own file and line.

An error found while tracing names the line of the user's code that was
running (the innermost user frame of the traceback); an error about a call
(too few devices, bad arguments) names the line that made the call.
"""

from __future__ import annotations

import sys
import types

from pmapc.errors import PmapcError, SourceLoc
from pmapc.lowering import jax_frames


def _relocated(error: PmapcError, filename: str, line: int) -> PmapcError:
    if error.location is not None:
        return error
    return error.at(SourceLoc(filename, line, 0))


def innermost_user_line(tb: types.TracebackType | None) -> tuple[str, int] | None:
    """(file, line) of the innermost frame of `tb` in the user's code, if any."""
    found = None
    while tb is not None:
        if jax_frames.is_user_file(tb.tb_frame.f_code.co_filename):
            found = (tb.tb_frame.f_code.co_filename, tb.tb_lineno)
        tb = tb.tb_next
    return found


def from_traceback(error: PmapcError, tb: types.TracebackType | None) -> PmapcError:
    """`error` with the innermost user frame of `tb` in front of its message."""
    where = innermost_user_line(tb)
    if where is None:
        return at_user_call_site(error)
    return _relocated(error, *where)


def at_user_call_site(error: PmapcError) -> PmapcError:
    """`error` with the nearest user frame on the current stack in front of its message."""
    frame = sys._getframe(1)
    while frame is not None and not jax_frames.is_user_file(frame.f_code.co_filename):
        frame = frame.f_back
    if frame is None:
        return error
    return _relocated(error, frame.f_code.co_filename, frame.f_lineno)
