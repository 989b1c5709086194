"""Programs that `checkify` checks inside nested maps, written once for both JAX versions.

`cases(pmap)` gives, by name, (a function of `pmap`, its argument, the checks
enabled): `jax.pmap` in JAX 0.4.30, `pmapc.pmap` here. scripts/record_checkify.py
records what JAX 0.4.30's `checkify.checkify` of each returns (the error's
message, where in this file it arose, and the outputs) into
goldens/jax0430_checkify.json; tests/py/test_checkify.py checks that pmapc returns
the same.
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.experimental import checkify

GRID = np.arange(2 * 4 * 3, dtype=np.float32).reshape(2, 4, 3)


def nested(pmap, body):
    return pmap(pmap(body, axis_name="model"), axis_name="data")


def user_check(y):
    checkify.check(jnp.all(y < 20), "block too large: max {}", y.max())
    return y * 2


def check_of_a_collective(y):
    total = lax.psum(y, "model")
    checkify.check(jnp.all(total < 50), "row total {} reaches 50", total.max())
    return total


def division(y):
    return y / (y - 5)


def indexing(y):
    index = (lax.axis_index("model") * 2).astype(jnp.int32)
    return y[index]


def nan_result(y):
    return jnp.log(y - 10)


def check_in_the_outer_body(pmap):
    def outer(x):
        inner = pmap(lambda y: lax.psum(y, "model"), axis_name="model")(x)
        checkify.check(jnp.all(inner < 30), "outer check: {}", inner.max())
        return inner

    return pmap(outer, axis_name="data")


def location(error) -> str | None:
    """Where in this file the failed check of a checkify error arose: 'function:line'."""
    exception = error.get_exception()
    if exception is None:
        return None
    frames = exception.traceback_info.frames
    return next(
        f"{frame.function_name.rsplit('.', 1)[-1]}:{frame.line_num}"
        for frame in frames
        if frame.file_name == __file__
    )


def cases(pmap) -> dict:
    return {
        "user check fails": (nested(pmap, user_check), GRID, checkify.user_checks),
        "user check passes": (nested(pmap, user_check), GRID - 100, checkify.user_checks),
        "check of a collective": (nested(pmap, check_of_a_collective), GRID, checkify.user_checks),
        "division by zero": (nested(pmap, division), GRID, checkify.div_checks),
        "index out of bounds": (nested(pmap, indexing), GRID, checkify.index_checks),
        "nan": (nested(pmap, nan_result), GRID, checkify.nan_checks),
        "check in the outer body": (check_in_the_outer_body(pmap), GRID, checkify.user_checks),
    }
