"""Mistakes that JAX 0.4.30's `jax.pmap` catches, written once for both JAX versions.

`cases(pmap, devices)` gives, by name, a function that makes the mistake with `pmap`
(`jax.pmap` in JAX 0.4.30, `pmapc.pmap` here) on 8 `devices`.
scripts/record_messages.py records what JAX 0.4.30 raises for each into
goldens/jax0430_messages.json; tests/py/test_errors.py checks that pmapc raises
the same builtin class with a message that starts as JAX 0.4.30's.
"""

from __future__ import annotations

import jax
import numpy as np
from jax import lax
from jax.experimental import io_callback

X8 = np.ones((8, 3), np.float32)
X4 = np.ones((4, 3), np.float32)
X2X2 = np.ones((2, 2, 3), np.float32)
X4X4 = np.ones((4, 4, 3), np.float32)


def nest(pmap, outer_devices=None, inner_devices=None):
    """A map of a map, each over its argument's leading axis, on the devices given."""
    inner = pmap(lambda b: b, devices=inner_devices)
    return pmap(lambda a: inner(a), devices=outer_devices)


def ordered_io_callback(a):
    return io_callback(lambda v: v, jax.ShapeDtypeStruct(a.shape, a.dtype), a, ordered=True)


def ordered_print(a):
    jax.debug.print("{}", a, ordered=True)
    return a


def cases(pmap, devices) -> dict:
    compiled = pmap(lambda a, b: a + b).lower(X8, X8).compile()
    return {
        "mismatched sizes": lambda: pmap(lambda a, b: a + b)(X8, X4),
        "mismatched sizes of varargs": lambda: pmap(lambda *a: a[0])(X8, X4, X4),
        "axis_size that the arguments do not have": lambda: pmap(lambda a: a, axis_size=4)(X8),
        "in_axes not a prefix": lambda: pmap(lambda a: a["x"], in_axes=({"y": 0},))({"x": X8}),
        "in_axes longer than the arguments": lambda: pmap(lambda a: a, in_axes=(0, 0))(X8),
        "in_axes and a keyword argument": lambda: pmap(lambda a, b: a + b, in_axes=(0, 1))(
            X8, b=X8
        ),
        "out_axes not a prefix": lambda: pmap(lambda a: (a, a), out_axes=(0, 0, 0))(X8),
        "unbound axis name": lambda: pmap(lambda a: lax.psum(a, "batch"), axis_name="i")(X8),
        "no argument mapped": lambda: pmap(lambda a: a, in_axes=None)(X8),
        "more devices than there are": lambda: pmap(lambda a: a)(np.ones((16, 3), np.float32)),
        "devices= fewer than the axis": lambda: pmap(lambda a: a, devices=devices[:4])(X8),
        "devices= empty": lambda: pmap(lambda a: a, devices=[])(X8),
        "a nest needing more devices than there are": lambda: nest(pmap)(X4X4),
        "devices= fewer than a nest needs": lambda: nest(pmap, outer_devices=devices[:2])(X2X2),
        "devices= on an inner map": lambda: nest(pmap, inner_devices=devices[:2])(X2X2),
        "ordered io_callback": lambda: pmap(ordered_io_callback)(X8),
        "ordered debug print": lambda: pmap(ordered_print)(X8),
        "non-hashable static argument": lambda: pmap(lambda a, s: a, static_broadcasted_argnums=1)(
            X8, np.ones(3)
        ),
        "compiled called with fewer arguments": lambda: compiled(X8),
        "compiled called with another pytree": lambda: compiled(X8, {"a": X8}),
        "compiled called with another dtype": lambda: compiled(X8, X8.astype(np.int32)),
        "compiled called with another shape": lambda: compiled(X8, np.ones((8, 4), np.float32)),
    }
