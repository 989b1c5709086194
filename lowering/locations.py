"""Pointing errors at the user's own file and line.

An error found while tracing names the line of the user's code that was
running (the innermost user frame of the traceback); an error about a call
(too few devices, bad arguments) names the line that made the call.
"""

from __future__ import annotations

import sys
import types

from pmapc.errors import PmapcError
from pmapc.lowering import jax_api


def _relocated(error: PmapcError, filename: str, line: int) -> PmapcError:
    if getattr(error, "user_location", None):
        return error
    located = type(error)(f"{filename}:{line}: {error}")
    located.user_location = (filename, line)
    return located


def from_traceback(error: PmapcError, tb: types.TracebackType | None) -> PmapcError:
    """`error` with the innermost user frame of `tb` in front of its message."""
    user_frame = None
    while tb is not None:
        if jax_api.is_user_file(tb.tb_frame.f_code.co_filename):
            user_frame = tb
        tb = tb.tb_next
    if user_frame is None:
        return at_user_call_site(error)
    return _relocated(error, user_frame.tb_frame.f_code.co_filename, user_frame.tb_lineno)


def at_user_call_site(error: PmapcError) -> PmapcError:
    """`error` with the nearest user frame on the current stack in front of its message."""
    frame = sys._getframe(1)
    while frame is not None and not jax_api.is_user_file(frame.f_code.co_filename):
        frame = frame.f_back
    if frame is None:
        return error
    return _relocated(error, frame.f_code.co_filename, frame.f_lineno)
