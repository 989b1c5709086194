"""The stages of `pmapc.pmap` and `pmapc.lower`: lowering, compiling, caching and devices
(errors: test_errors.py)."""

import functools

import jax
import numpy as np
import pytest

import pmapc
from pmapc import ir
from pmapc.compiler.pipeline import default_pipeline
from pmapc.passes.manager import run_passes


def nested_psum(inner_axis_size=4):
    @functools.partial(pmapc.pmap, axis_name="data")
    def outer(x):
        inner = pmapc.pmap(lambda y: jax.lax.psum(y, "model"), axis_name="model")
        return jax.lax.psum(inner(x), "data")

    return outer


def expected_nested_psum(x):
    return np.broadcast_to(x.sum(axis=(0, 1)), x.shape)


def test_lower_exposes_every_stage():
    x = np.ones((2, 4, 3), np.float32)
    lowered = nested_psum().lower(x)
    assert list(lowered.stages) == [
        "pmapc",
        "verify-axes",
        "flatten-maps",
        "predicate-divergent",
        "fold-gather-slice",
        "sink-slices",
        "sink-gathers",
        "lower-collectives",
        "combine-all-reduces",
        "to-partitions",
        "fold-reshapes",
        "canonicalize",
        "cse",
        "stablehlo",
    ]
    assert "@pmapc.map" in lowered.as_text("pmapc")
    assert "pmapc.mesh" in lowered.as_text("flatten-maps")
    final = lowered.as_text()
    assert "pmapc.psum" not in final and "pmapc.map" not in final
    groups = lowered.as_text("lower-collectives")  # whole mesh axes, named from the start
    assert 'axes = [#stablehlo.axis_ref<name = "model">]' in groups
    assert "dense<[[0, 1, 2, 3], [4, 5, 6, 7]]>" not in groups
    assert 'axes = [#stablehlo.axis_ref<name = "model">]' in final
    assert 'axes = [#stablehlo.axis_ref<name = "data">]' in final


def test_the_stages_are_recorded_when_first_asked_for_and_match_the_passes_run_alone():
    x = np.ones((2, 4, 3), np.float32)
    lowered = nested_psum().lower(x)
    assert lowered.compilation._snapshots is None  # lower() copies the IR once, not per pass
    source = lowered.as_text("pmapc", debug_info=True)
    assert lowered.compilation._snapshots is None  # the traced IR is the copy it keeps
    # The IR after two passes, recorded now, is what those two passes make of it.
    module = ir.parse_module(source, ir.make_context())
    run_passes(module, default_pipeline()[:2])
    assert lowered.as_text("flatten-maps") == ir.print_module(module)
    # The last pass's IR is the result's, and the stages keep their locations.
    assert lowered.as_text("cse") == lowered.as_text()
    assert "test_stages.py" in lowered.as_text("lower-collectives", debug_info=True)


def test_lowered_compile_runs():
    x = np.arange(24, dtype=np.float32).reshape(2, 4, 3)
    compiled = nested_psum().lower(x).compile()
    np.testing.assert_allclose(np.asarray(compiled(x)), expected_nested_psum(x))
    assert "all-reduce" in compiled.as_text()


def test_compiled_reports_xla_analyses_and_takes_static_arguments_again():
    f = pmapc.pmap(lambda v, k: v * k, axis_name="i", static_broadcasted_argnums=1)
    x = np.ones((8, 4), np.float32)
    compiled = f.lower(x, 3.0).compile()
    np.testing.assert_array_equal(np.asarray(compiled(x, 3.0)), np.full((8, 4), 3.0))
    np.testing.assert_array_equal(np.asarray(compiled(x)), np.full((8, 4), 3.0))
    assert compiled.cost_analysis()["flops"] > 0
    assert compiled.memory_analysis().argument_size_in_bytes == 4 * 4


def test_global_arg_shapes_accepts_none_only():
    assert pmapc.pmap(lambda v: v, axis_name="i", global_arg_shapes=None)(
        np.ones((8, 1), np.float32)
    ).shape == (8, 1)
    with pytest.raises(pmapc.ArgumentError, match="global_arg_shapes=None only"):
        pmapc.pmap(lambda v: v, axis_name="i", global_arg_shapes=((4,),))


def test_compiles_once_per_signature():
    f = nested_psum()
    x = np.arange(24, dtype=np.float32).reshape(2, 4, 3)
    for _ in range(3):
        np.testing.assert_allclose(np.asarray(f(x)), expected_nested_psum(x))
    assert f._jitted._cache_size() == 1
    np.asarray(f(np.ones((2, 4, 5), np.float32)))
    np.asarray(f(np.ones((2, 4, 5), np.int32)))
    assert f._jitted._cache_size() == 3


def test_results_are_jax_arrays_split_over_the_outer_axis():
    x = np.arange(24, dtype=np.float32).reshape(2, 4, 3)
    result = nested_psum()(x)
    assert isinstance(result, jax.Array)
    assert result.shape == (2, 4, 3)
    assert len(result.sharding.device_set) == 8


def test_devices_on_outermost_map():
    devices = jax.devices()[4:8]
    f = pmapc.pmap(lambda v: jax.lax.psum(v, "i"), axis_name="i", devices=devices)
    result = f(np.arange(4, dtype=np.int32))
    np.testing.assert_array_equal(np.asarray(result), [6, 6, 6, 6])
    assert result.sharding.device_set == set(devices)


def test_use_host_devices_after_start_needs_no_more_devices():
    pmapc.use_host_devices(8)
    with pytest.raises(pmapc.DeviceError, match="already started"):
        pmapc.use_host_devices(64)


def test_devices_as_a_mesh_or_an_array_of_the_nest_shape():
    nested = nested_psum()
    x = np.arange(24, dtype=np.float32).reshape(2, 4, 3)
    grid = np.array(jax.devices()[::-1]).reshape(2, 4)
    for devices in (grid, jax.sharding.Mesh(grid, ("rows", "columns"))):
        f = pmapc.pmap(nested.spec.fun, axis_name="data", devices=devices)
        result = f(x)
        np.testing.assert_allclose(np.asarray(result), expected_nested_psum(x))
        assert list(result.sharding.mesh.devices.flat) == list(grid.flat)
    wrong = pmapc.pmap(nested.spec.fun, axis_name="data", devices=grid.reshape(4, 2))
    with pytest.raises(pmapc.DeviceError, match=r"has shape \(4, 2\), but the nest's mesh"):
        wrong(x)


def test_every_error_a_user_meets_is_importable_from_pmapc():
    """Each exception class of pmapc/errors.py is `pmapc.<its name>`: what a traceback
    names can be caught by that name (the fold's error was pmapc.lowering.fold's)."""
    import inspect

    from pmapc import errors

    members = inspect.getmembers(errors, inspect.isclass)
    classes = [c for _, c in members if issubclass(c, Exception)]
    assert classes and all(getattr(pmapc, c.__name__, None) is c for c in classes), classes


def test_the_package_says_it_is_typed():
    """A `py.typed` marker beside pmapc's modules: users' type checkers read its hints."""
    import pathlib

    assert (pathlib.Path(pmapc.__file__).parent / "py.typed").is_file()
