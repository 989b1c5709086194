"""Host callbacks inside maps: `jax.debug.print`, `jax.debug.callback`, `pure_callback`
and `io_callback` run once per device with that device's block, as JAX 0.4.30's
nested `jax.pmap` ran them, in every way a map compiles (a call, `jax.jit`, the AOT
stages in either target form) and under `grad`. The oracle is numpy (what each
device's block is) and nested `jax.vmap` (the values around the callbacks).
"""

from __future__ import annotations

import threading

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax
from jax.experimental import io_callback
from support.oracle import assert_tree_equal, nest, vmap_mapper

import pmapc
from pmapc.errors import DiagnosticError, PmapcError
from pmapc.tools.main import main

GRID = np.arange(2 * 4 * 3, dtype=np.float32).reshape(2, 4, 3)


def sine_body(y):
    """`pure_callback` of numpy's sine, scaled by a psum over both axes."""
    shape = jax.ShapeDtypeStruct(y.shape, y.dtype)
    return jax.pure_callback(np.sin, shape, y) * lax.psum(1.0, ("data", "model"))


def run_each_way(program, x):
    """The program's results called, under `jax.jit`, and through the AOT stages in
    both target forms."""
    results = {"call": program(x), "jit": jax.jit(program)(x)}
    for target in ("partitions", "replicas"):
        results[target] = pmapc.lower(program, x, target=target).compile()(x)
    return results


def test_pure_callback_gives_each_device_its_block():
    program = nest(pmapc.pmap, sine_body, ["data", "model"])
    for way, result in run_each_way(program, GRID).items():
        np.testing.assert_allclose(np.asarray(result), np.sin(GRID) * 8, rtol=1e-6, err_msg=way)


def test_pure_callback_in_a_one_level_map():
    x = np.arange(8.0, dtype=np.float32)
    shape = jax.ShapeDtypeStruct((), jnp.float32)
    result = pmapc.pmap(lambda v: jax.pure_callback(np.sin, shape, v), axis_name="i")(x)
    np.testing.assert_allclose(np.asarray(result), np.sin(x), rtol=1e-6)


class Calls:
    """What a `jax.debug.callback` saw, from any thread XLA runs it on."""

    def __init__(self):
        self.seen = []
        self.lock = threading.Lock()

    def __call__(self, *values):
        with self.lock:
            self.seen.append(tuple(np.asarray(v).tolist() for v in values))


def test_debug_callback_runs_once_per_device_with_its_block():
    calls = Calls()

    def body(y):
        index = (lax.axis_index("data"), lax.axis_index("model"))
        jax.debug.callback(calls, *index, y)
        return y + 1

    program = nest(pmapc.pmap, body, ["data", "model"])
    for way, run in (("call", program), ("jit", jax.jit(program))):
        calls.seen.clear()
        np.testing.assert_array_equal(np.asarray(run(GRID)), GRID + 1)
        jax.effects_barrier()
        expected = [(d, m, GRID[d, m].tolist()) for d in range(2) for m in range(4)]
        assert sorted(calls.seen) == expected, way


def test_debug_print_prints_each_device_once(capfd):
    def body(y):
        jax.debug.print(
            "device {d},{m}: {y}", d=lax.axis_index("data"), m=lax.axis_index("model"), y=y[0]
        )
        return y

    nest(pmapc.pmap, body, ["data", "model"])(GRID)
    jax.effects_barrier()
    lines = sorted(
        line for line in capfd.readouterr().out.splitlines() if line.startswith("device")
    )
    assert lines == [f"device {d},{m}: {GRID[d, m, 0]}" for d in range(2) for m in range(4)]


def test_a_map_that_only_prints_is_not_dropped():
    calls = Calls()

    def outer(x):
        nest(pmapc.pmap, lambda y: jax.debug.callback(calls, y) or y, ["data", "model"])(x)
        return x * 2

    np.testing.assert_array_equal(np.asarray(jax.jit(outer)(GRID)), GRID * 2)
    jax.effects_barrier()
    assert len(calls.seen) == 8


def test_io_callback_returns_per_device_values():
    def body(y):
        shape = jax.ShapeDtypeStruct(y.shape, y.dtype)
        doubled = io_callback(lambda v: np.asarray(v * 2), shape, y)
        return doubled + lax.psum(y, "model")

    program = nest(pmapc.pmap, body, ["data", "model"])
    expected = GRID * 2 + GRID.sum(axis=1, keepdims=True)
    for way, result in run_each_way(program, GRID).items():
        np.testing.assert_array_equal(np.asarray(result), expected, err_msg=way)


def test_grad_through_a_body_that_prints():
    def program(mapper):
        def body(y):
            jax.debug.callback(lambda _: None, y)
            return jnp.sin(y) * lax.psum(y, "model")

        return lambda x: nest(mapper, body, ["data", "model"])(x).sum()

    got = jax.grad(program(pmapc.pmap))(GRID)
    want = jax.grad(program(vmap_mapper))(GRID)
    assert_tree_equal(got, want, rtol=1e-5)


@pytest.mark.parametrize(
    "call",
    [
        lambda y: io_callback(lambda v: v, jax.ShapeDtypeStruct(y.shape, y.dtype), y, ordered=True),
        lambda y: jax.debug.print("{}", y, ordered=True) or y,
    ],
    ids=["io_callback", "debug_print"],
)
def test_ordered_callbacks_are_refused_as_jax_refused_them(call):
    with pytest.raises(PmapcError, match="Ordered effects not supported in `pmap`") as raised:
        pmapc.pmap(call, axis_name="i")(np.arange(8.0, dtype=np.float32))
    assert isinstance(raised.value, ValueError)
    assert raised.value.location is not None
    assert raised.value.location.file == __file__
    assert "ordered=False" in str(raised.value)


def test_a_saved_module_with_callbacks_is_refused(tmp_path, capsys):
    program = nest(pmapc.pmap, sine_body, ["data", "model"])
    saved = tmp_path / "callback.mlir"
    saved.write_text(pmapc.lower(program, GRID).as_text("pmapc"))
    assert main(["run", str(saved), "--input", _save(tmp_path, GRID)]) == 1
    error = capsys.readouterr().err
    assert error.startswith(f"{saved}:"), error
    assert "calls back into the Python process that traced the program" in error
    assert len(error.strip().splitlines()) == 1


def test_an_executable_without_its_callbacks_is_refused():
    program = nest(pmapc.pmap, sine_body, ["data", "model"])
    compilation = pmapc.lower(program, GRID).compilation
    with pytest.raises(DiagnosticError, match="xla_ffi_python_cpu_callback"):
        pmapc.compiler.runtime.Executable(compilation.module, jax.devices()[:8])


def _save(folder, array) -> str:
    path = folder / "x.npy"
    np.save(path, array)
    return str(path)
