"""Nests folded onto fewer devices than their meshes have positions (`pmapc.fold_onto`,
`devices=` listing a device more than once) give the values of the unfolded nest.

The oracles are the suites' own: the values JAX 0.4.30's nested `jax.pmap` recorded
(`goldens/`), the numpy interpreter and nested `jax.vmap` of the random programs. Every
program runs folded onto 1, 2 and 4 of the 8 CPU devices.
"""

from __future__ import annotations

import builtins

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import event, given
from hypothesis import strategies as st
from support.golden_generated import PROGRAMS as GENERATED
from support.golden_programs import PROGRAMS, Program, evaluate
from support.golden_store import Recorded
from support.oracle import assert_tree_equal, running_jax_value
from support.random_programs import (
    TRANSFORMATIONS,
    build,
    folded,
    programs,
    run_numpy,
    run_transformed,
    run_with_pmapc,
    sample_arguments,
    search_settings,
    split_budget,
    transformable_programs,
    transformation_inputs,
    vmap_can_run,
    vmap_mapper,
)
from test_golden_generated import assert_same_array
from test_golden_generated import goldens as generated_goldens  # noqa: F401 (a fixture)
from test_goldens import goldens, recorded_for  # noqa: F401 (a fixture)
from test_random_programs import INTERESTING, REGRESSIONS, RTOL

import pmapc
from pmapc import folding

COUNTS = (1, 2, 4)
# Random programs, split evenly among the device counts (a search each).
RANDOM_FOLDED = 150
RANDOM_TRANSFORMED_FOLDED = 100


def fold_onto(count: int):
    return pmapc.fold_onto(jax.devices()[:count])


# ----------------------------------------------------------------------------
# The goldens of JAX 0.4.30


@pytest.mark.parametrize("count", COUNTS)
@pytest.mark.parametrize("program", PROGRAMS, ids=lambda program: program.name)
def test_golden_program_folded(program: Program, count: int, goldens):  # noqa: F811
    recorded = recorded_for(goldens, program)
    inputs = []
    while f"input{len(inputs)}" in recorded:
        inputs.append(recorded[f"input{len(inputs)}"])
    with fold_onto(count):
        actual = evaluate(program, pmapc.pmap, inputs)
    for key, want in recorded.items():
        if key.startswith("input"):
            continue
        want = running_jax_value(program, key, want)
        got = np.asarray(actual[key])
        assert got.shape == want.shape and got.dtype == want.dtype, key
        if np.issubdtype(want.dtype, np.inexact):
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5, err_msg=key)
        else:
            np.testing.assert_array_equal(got, want, err_msg=key)


@pytest.mark.parametrize("count", COUNTS)
@pytest.mark.parametrize("program", GENERATED, ids=lambda program: program.name)
def test_generated_golden_program_folded(
    program: Program,
    count: int,
    generated_goldens: dict[str, Recorded],  # noqa: F811
):
    recorded = generated_goldens[program.name]
    inputs = [
        recorded.arrays[f"input{k}"]
        for k in range(len(recorded.arrays))
        if f"input{k}" in recorded.arrays
    ]
    if recorded.error is not None:
        with pytest.raises(getattr(builtins, recorded.error)), fold_onto(count):
            evaluate(program, pmapc.pmap, inputs)
        return
    with fold_onto(count):
        actual = evaluate(program, pmapc.pmap, inputs)
    for key, want in recorded.arrays.items():
        if key.startswith("input") or (program.jax_gradient_wrong and key.startswith("grad")):
            continue  # a wrong recorded gradient is checked numerically by test_golden_generated
        assert_same_array(np.asarray(actual[key]), want, f"{program.name}/{key}")


# ----------------------------------------------------------------------------
# Random programs, and JAX's transformations of them


def check_folded(program, count: int, process) -> None:
    arrays = sample_arguments(program)
    expected = run_numpy(program, arrays)
    if vmap_can_run(program):
        vmapped = np.asarray(jax.jit(build(program, vmap_mapper))(*arrays))
        assert_tree_equal(vmapped, expected, rtol=RTOL)
    actual = process.run(folded, count, run_with_pmapc, program, arrays)
    assert_tree_equal(actual, expected, rtol=RTOL)


@pytest.mark.parametrize("count", COUNTS)
@search_settings(split_budget(RANDOM_FOLDED, len(COUNTS)))
@given(program=programs())
def test_random_program_folded(count: int, program, pmapc_process):
    check_folded(program, count, pmapc_process)


@pytest.mark.parametrize("count", COUNTS)
@pytest.mark.parametrize(
    "program", [*INTERESTING.values(), *REGRESSIONS.values()], ids=[*INTERESTING, *REGRESSIONS]
)
def test_listed_random_program_folded(program, count: int, pmapc_process):
    check_folded(program, count, pmapc_process)


@pytest.mark.parametrize("count", COUNTS)
@search_settings(split_budget(RANDOM_TRANSFORMED_FOLDED, len(COUNTS)))
@given(data=st.data())
def test_transformed_random_program_folded(count: int, data, pmapc_process):
    transformation = data.draw(st.sampled_from(TRANSFORMATIONS), label="transformation")
    program = data.draw(transformable_programs(transformation), label="program")
    event(transformation)
    arrays = sample_arguments(program)
    out_shape = run_numpy(program, arrays).shape
    weights, tangents = transformation_inputs(program, arrays, out_shape)
    expected = run_transformed(
        program, transformation, arrays, weights, tangents, mapper=vmap_mapper
    )
    actual = pmapc_process.run(
        folded, count, run_transformed, program, transformation, arrays, weights, tangents
    )
    assert len(actual) == len(expected)
    for ours, oracle in zip(actual, expected):
        assert_tree_equal(ours, oracle, rtol=RTOL)


# ----------------------------------------------------------------------------
# How a fold is asked for


def two_by_two(x):
    """A 2x2 nest of every collective kind, and its value by numpy."""

    def body(x):
        total = jax.lax.psum(x, ("data", "model"))
        rows = jax.lax.all_gather(x, "model")
        shifted = jax.lax.ppermute(x, "data", [(0, 1), (1, 0)])
        index = jax.lax.axis_index(("data", "model"))
        return total + rows.sum() + shifted * 10 + index * 100

    return pmapc.pmap(pmapc.pmap(body, "model"), "data")(x)


def two_by_two_numpy(x):
    total = x.sum()
    rows = x.sum(axis=1, keepdims=True)
    shifted = x[::-1]
    index = np.arange(4).reshape(2, 2)
    return total + rows + shifted * 10 + index * 100


def test_a_device_listed_for_every_position_runs_the_nest():
    """The tutorial's fallback, `jax.local_devices()[:1] * 4`, folds a 2x2 nest onto one
    device."""
    x = np.arange(4.0, dtype=np.float32).reshape(2, 2)

    def body(x):
        return jax.lax.psum(x, ("data", "model")) + jax.lax.axis_index("model")

    devices = jax.local_devices()[:1] * 4
    f = pmapc.pmap(pmapc.pmap(body, "model"), "data", devices=devices)
    out = f(x)
    np.testing.assert_array_equal(np.asarray(out), x.sum() + np.array([[0, 1], [0, 1]]))
    assert out.sharding.device_set == {devices[0]}


def test_devices_listed_in_runs_fold_row_major():
    x = np.arange(4.0, dtype=np.float32).reshape(2, 2)
    d0, d1 = jax.devices()[:2]
    f = pmapc.pmap(pmapc.pmap(lambda x: x, "model"), "data", devices=[d0, d0, d1, d1])
    out = f(x)
    np.testing.assert_array_equal(np.asarray(out), x)
    assert out.sharding.device_set == {d0, d1}


def test_devices_that_do_not_fold_row_major_are_refused():
    d0, d1 = jax.devices()[:2]
    f = pmapc.pmap(pmapc.pmap(lambda x: x, "model"), "data", devices=[d0, d1, d0, d1])
    with pytest.raises(pmapc.DeviceError, match="consecutive positions, row-major"):
        f(np.zeros((2, 2), np.float32))


@pytest.mark.parametrize("count", (1, 2, 3, 4, 8))
def test_fold_onto_uses_as_many_devices_as_divide_the_mesh(count):
    x = np.arange(4.0, dtype=np.float32).reshape(2, 2)
    with fold_onto(count):
        out = two_by_two(x)
    np.testing.assert_array_equal(np.asarray(out), two_by_two_numpy(x))
    expected = {1: 1, 2: 2, 3: 2, 4: 4, 8: 4}[count]
    assert len(out.sharding.device_set) == expected


def test_a_jit_traced_inside_and_outside_fold_onto_keeps_a_trace_for_each():
    x = np.arange(4.0, dtype=np.float32).reshape(2, 2)
    jitted = jax.jit(two_by_two)
    outside = jitted(x)
    with fold_onto(1):
        inside = jitted(x)
    again = jitted(x)
    for out in (outside, inside, again):
        np.testing.assert_array_equal(np.asarray(out), two_by_two_numpy(x))
    assert [len(o.sharding.device_set) for o in (outside, inside, again)] == [4, 1, 4]


def test_fold_onto_refuses_a_device_listed_twice():
    with pytest.raises(pmapc.DeviceError, match="twice"), pmapc.fold_onto(jax.devices()[:1] * 2):
        pass


def control_flow(x):
    """Collectives over folded axes inside fori_loop, while_loop (trips that vary over
    'data'), cond (a branch that varies over 'data') and scan."""

    def step(_, x):
        x = jax.lax.psum(x, "data") * 0.5
        return jax.lax.psum(x, "model") * 0.25 + 1.0

    looped = jax.lax.fori_loop(0, 3, step, x)
    trips = jax.lax.axis_index("data") + 2
    _, summed = jax.lax.while_loop(
        lambda c: c[0] < trips, lambda c: (c[0] + 1, jax.lax.psum(c[1], "model")), (0, x)
    )
    branched = jax.lax.cond(
        jax.lax.axis_index("data") == 0,
        lambda v: jax.lax.pmax(v, "model"),
        lambda v: jax.lax.pmin(v, "model"),
        x,
    )
    _, scanned = jax.lax.scan(lambda c, v: (c + jax.lax.psum(v, "model"), c * v), x.sum(), x)
    return looped, summed, branched, scanned


@pytest.mark.parametrize("count", COUNTS)
def test_collectives_inside_control_flow_fold(count):
    x = np.arange(24.0, dtype=np.float32).reshape(2, 4, 3) / 8
    oracle = jax.vmap(jax.vmap(control_flow, axis_name="model"), axis_name="data")(x)
    with fold_onto(count):
        out = pmapc.pmap(pmapc.pmap(control_flow, "model"), "data")(x)
    for ours, want in zip(out, oracle, strict=True):
        np.testing.assert_allclose(np.asarray(ours), np.asarray(want), rtol=1e-6)


def test_a_folded_nest_compiles_ahead_of_time_for_the_fold_s_devices():
    x = np.arange(4.0, dtype=np.float32).reshape(2, 2)
    with pmapc.fold_onto(jax.devices()[2:4]):
        compiled = pmapc.lower(two_by_two, jnp.asarray(x)).compile()
    out = compiled(x)
    np.testing.assert_array_equal(np.asarray(out), two_by_two_numpy(x))
    assert {d.id for d in out.sharding.device_set} == {2, 3}
    d0 = jax.devices()[0]
    listed = pmapc.pmap(pmapc.pmap(lambda v: v * 2, "model"), "data", devices=[d0] * 4)
    np.testing.assert_array_equal(np.asarray(listed.lower(x).compile()(x)), x * 2)


def test_lower_shows_the_mesh_of_the_devices():
    with fold_onto(2):
        lowered = pmapc.lower(two_by_two, jnp.zeros((2, 2), jnp.float32))
    assert lowered.compilation.mesh.size == 2


# ----------------------------------------------------------------------------
# The row-major rule


@pytest.mark.parametrize(
    ("chains", "count", "expected"),
    [
        ([[2, 4]], 8, True),
        ([[2, 4]], 4, True),  # model folds 2 positions per device
        ([[2, 4]], 1, True),
        ([[4, 3]], 6, False),  # 4 devices for 'data', then 6/4: no row-major blocks
        ([[4, 3]], 2, True),
        ([[3, 4]], 6, True),
        ([[2, 2], [2, 4]], 4, True),  # siblings share the outer axis's devices
    ],
)
def test_which_device_counts_fold_a_nest(chains, count, expected):
    assert folding.foldable(chains, count) is expected


def test_fold_onto_takes_the_most_devices_that_fold_the_nest():
    # 3x4 onto at most 8: 6 devices (3 for 'data', 'model' in blocks of 2); 4x3: 6 would
    # split 'model' (3) over 6 / 4 devices, so 4 ('data' on devices, 'model' folded)
    assert folding.fold_count([[3, 4]], 12, 8) == 6
    assert folding.fold_count([[4, 3]], 12, 8) == 4
    assert folding.fold_count([[2, 4]], 8, 3) == 2


def test_a_nest_folded_onto_the_most_devices_that_divide_it():
    x = np.arange(12.0, dtype=np.float32).reshape(4, 3)

    def body(x):
        return jax.lax.psum(x, ("data", "model")) + jax.lax.axis_index("model")

    f = pmapc.pmap(pmapc.pmap(body, "model"), "data")
    with fold_onto(6):
        out = f(x)
    np.testing.assert_array_equal(np.asarray(out), x.sum() + np.arange(3)[None, :] + 0 * x)
    assert len(out.sharding.device_set) == 4


def test_every_collective_has_a_fold_rule():
    """The fold's table covers every collective kind, and reaches each through every
    JAX primitive that runs one (its `*_invariant` form, its asynchronous start)."""
    from pmapc.collectives import ALL
    from pmapc.lowering import fold_rules, primitives

    assert set(fold_rules.RULES) == set(ALL)
    for primitive, collective in primitives.collective_records().items():
        assert fold_rules.rule_for(primitive) is fold_rules.RULES[collective], primitive
