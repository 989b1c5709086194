"""A nested data x model program on a 2x4 mesh of 8 virtual CPU devices.

The outer map splits a batch over `data` (2 rows of devices), the inner map
splits each row's block over `model` (4 columns). Each device scales its
shard by its position; `psum` over `model` adds along a row, over `data`
down a column, and over both across the whole mesh.

    python examples/quickstart.py
    pmapc trace examples/quickstart.py:step --arg f32[2,4,3]
"""

from functools import partial

import numpy as np

import pmapc

pmapc.use_host_devices(8)  # before JAX starts: 8 virtual CPU devices

import jax  # noqa: E402


@partial(pmapc.pmap, axis_name="data")
def step(x):
    @partial(pmapc.pmap, axis_name="model")
    def columns(y):
        scaled = y * (jax.lax.axis_index("model") + 1)
        row_total = jax.lax.psum(scaled, "model")
        return row_total, jax.lax.psum(scaled, ("data", "model"))

    row_totals, grand_totals = columns(x)
    return jax.lax.psum(row_totals, "data"), grand_totals


def main() -> None:
    x = np.arange(2 * 4 * 3, dtype=np.float32).reshape(2, 4, 3)
    column_sums, grand = step(x)
    scaled = x * np.arange(1, 5, dtype=np.float32)[None, :, None]
    expected = np.broadcast_to(scaled.sum(axis=(0, 1)), (2, 4, 3))
    print("mesh: data=2 x model=4 on", len(jax.devices()), "CPU devices")
    print("psum over data of (psum over model), per device [data, model, :]:")
    print(np.asarray(column_sums))
    print("agrees with numpy:", np.allclose(column_sums, expected) and np.allclose(grand, expected))


if __name__ == "__main__":
    main()
