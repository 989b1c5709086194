"""Nothing of a compilation outlives it: a dropped pmapc function frees its programs.

A process that makes many programs (a sweep, a notebook, a server compiling per
request, this test suite) must not keep each one's compiler: MLIR contexts and
modules, pass managers, passes, analyses. What a program needs at run time lives
as long as JAX keeps the jitted function's cache entry, and goes with the function;
the per-device program of a structure is also one of the last 64 kept
(`embed.SHARED_PROGRAMS`, tests/py/test_shared_programs.py).
"""

from __future__ import annotations

import gc
import weakref
from collections import Counter
from functools import partial

import jax
import numpy as np

import pmapc
from pmapc import ir
from pmapc.compiler import embed
from pmapc.passes import PASSES, manager

# What compiling a program makes: none of it may stay once the program is dropped.
COMPILER_OBJECTS = (
    ir.PassManager,
    manager._PipelineRun,
    manager.IRDumps,
    manager.Timer,
    embed.SpmdProgram,
    *PASSES.values(),
)


def scaled_psum(scale: float):
    """A new 2x4 program: the psum over 'model' of the input times `scale`."""

    @partial(pmapc.pmap, axis_name="data")
    def step(x):
        return pmapc.pmap(lambda y: jax.lax.psum(y * scale, "model"), axis_name="model")(x)

    return step


def census() -> Counter:
    """Live objects of the compiler's classes, and MLIR contexts, by class name."""
    gc.collect()
    watched = {*COMPILER_OBJECTS, type(ir.make_context())}
    return Counter(type(o).__name__ for o in gc.get_objects() if type(o) in watched)


X = np.arange(2 * 4 * 3, dtype=np.float32).reshape(2, 4, 3)


def expected(scale: float) -> np.ndarray:
    """The numpy result of `scaled_psum(scale)(X)`."""
    return np.broadcast_to((X * scale).sum(axis=1, keepdims=True), X.shape)


def test_dropped_function_frees_its_program():
    step = scaled_psum(3.0)
    np.testing.assert_allclose(np.asarray(step(X)), expected(3.0), rtol=1e-6)
    function = weakref.ref(step)
    del step
    gc.collect()
    assert function() is None, "a dropped pmapc function is still alive"


def test_dropped_function_is_freed_without_the_collector():
    """Nothing of a program is a reference cycle: the function and what JAX keeps for it
    go when the last reference does, not at the next cyclic collection (which, with
    a cycle per program, ran every program and took 2 ms of its first call)."""
    np.asarray(scaled_psum(0.5)(X))  # the first program makes what every one shares
    gc.collect()
    gc.disable()
    try:
        step = scaled_psum(6.0)
        np.testing.assert_allclose(np.asarray(step(X)), expected(6.0), rtol=1e-6)
        function = weakref.ref(step)
        del step
        assert function() is None, "a dropped pmapc function waits for the collector"
    finally:
        gc.enable()


def test_compiling_a_program_leaves_no_cyclic_garbage():
    np.asarray(scaled_psum(0.5)(X))
    gc.collect()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        for scale in (7.0, 8.0):
            np.testing.assert_allclose(
                np.asarray(scaled_psum(scale)(X)), expected(scale), rtol=1e-6
            )
        gc.collect()
        pmapcs = [o for o in gc.garbage if type(o).__module__.startswith(PACKAGES)]
        functions = [
            o.__qualname__
            for o in gc.garbage
            if callable(o) and getattr(o, "__module__", None) and o.__module__.startswith(PACKAGES)
        ]
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
    assert not pmapcs and not functions, (
        f"cycles of {sorted({type(o).__name__ for o in pmapcs})} and functions {functions}"
    )


# The packages whose objects a compilation makes (the face's, the compiler's).
PACKAGES = ("pmapc",)


def test_new_programs_leave_no_compiler_behind():
    np.asarray(scaled_psum(0.5)(X))  # the first program makes what every one shares
    before = census()
    for scale in (1.0, 2.0, 4.0):
        np.testing.assert_allclose(np.asarray(scaled_psum(scale)(X)), expected(scale), rtol=1e-6)
    after = census()
    grown = {name: after[name] - before[name] for name in after if after[name] > before[name]}
    assert not grown, f"objects of 3 dropped programs still alive: {grown}"


def test_dropped_compiled_stage_frees_its_executable():
    client = jax.devices()[0].client
    step = scaled_psum(5.0)
    compiled = step.lower(X).compile()
    np.testing.assert_allclose(np.asarray(compiled(X)), expected(5.0), rtol=1e-6)
    live = len(client.live_executables())
    del compiled, step
    gc.collect()
    assert len(client.live_executables()) < live


def test_eager_gradients_keep_a_bounded_number_of_programs():
    """A gradient taken outside `jax.jit` applies the transposed map eagerly: its program
    is kept among pmapc's last EAGER_PROGRAMS, not in JAX's cache of 4,096 eager
    primitives, which would keep every program's jaxprs and executable."""
    from jax._src import dispatch

    def grad_of(scale: float) -> np.ndarray:
        def loss(x):
            return (scaled_psum(scale)(x) ** 2).sum()

        return np.asarray(jax.grad(loss)(X))

    grad_of(1.0)  # JAX's own eager primitives around the map are cached once
    before = dispatch.xla_primitive_callable.cache_info().currsize
    for scale in (2.0, 3.0):
        # d/dx of sum over all of (scale * psum_model(x))^2: each of the 4 model
        # positions of a row sees 2 * scale^2 * (the row's sum over model).
        want = np.broadcast_to(8 * scale**2 * X.sum(axis=1, keepdims=True), X.shape)
        np.testing.assert_allclose(grad_of(scale), want, rtol=1e-5)
    assert dispatch.xla_primitive_callable.cache_info().currsize == before
