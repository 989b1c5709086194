"""`pmapc.pmap` against JAX 0.4 nested-pmap semantics, on 8 virtual CPU devices.

Each program is written once as a function of a mapper and built twice: with
`pmapc.pmap`, and with named `jax.vmap` (the oracle; see `oracle.py`). Where vmap
cannot run a collective (all_gather, psum_scatter and ppermute over a tuple of axes,
a ppermute that leaves devices without a source) the expected values come from numpy.
"""

from __future__ import annotations

import enum
import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax
from support.oracle import (
    all_gather_reference,
    assert_tree_equal,
    axis_index_reference,
    check_against_vmap,
    nest,
    ppermute_reference,
    psum_scatter_reference,
    small_ints,
    vmap_mapper,
)

import pmapc

MESH_2X4 = (("data", 2), ("model", 4))
MESH_2X2X2 = (("a", 2), ("b", 2), ("c", 2))
NAMES = ("data", "model")


def ring(n: int) -> list[tuple[int, int]]:
    return [(j, (j + 1) % n) for j in range(n)]


def size_of(mesh, axes) -> int:
    axes = (axes,) if isinstance(axes, str) else axes
    return int(np.prod([dict(mesh)[axis] for axis in axes]))


def nested_2x4(body, **kwargs):
    """`build(mapper)` for `body` mapped over data (outer) and model (inner)."""
    return lambda mapper: nest(mapper, body, NAMES, **kwargs)


# ----------------------------------------------------------------------------
# Meshes


def test_one_level_map_over_eight_devices(rng):
    def body(x):
        return {
            "sum": lax.psum(x, "i"),
            "index": lax.axis_index("i"),
            "gathered": lax.all_gather(x, "i"),
            "shifted": lax.ppermute(x, "i", ring(8)),
            "local": x * 2 + 1,
        }

    check_against_vmap(lambda mapper: mapper(body, "i"), small_ints(rng, (8, 3)))


MESHES = {
    "2x2": (("data", 2), ("model", 2)),
    "2x4": MESH_2X4,
    "4x2": (("data", 4), ("model", 2)),
    "1x8": (("data", 1), ("model", 8)),
    "8x1": (("data", 8), ("model", 1)),
    "2x2x2": MESH_2X2X2,
}


@pytest.mark.parametrize("mesh", MESHES.values(), ids=MESHES.keys())
def test_mesh_runs_collectives_over_inner_outer_and_all_axes(mesh, rng):
    names = tuple(name for name, _ in mesh)
    sizes = tuple(size for _, size in mesh)

    def body(x):
        return {
            "inner": lax.psum(x, names[-1]),
            "outer": lax.psum(x, names[0]),
            "all": lax.psum(x, names),
            "index": lax.axis_index(names),
            "gathered": lax.all_gather(x, names[-1]),
            "local": x * x,
        }

    results = check_against_vmap(
        lambda mapper: nest(mapper, body, names), small_ints(rng, (*sizes, 3))
    )
    # Devices are numbered row-major over the nesting, outermost slowest.
    np.testing.assert_array_equal(results["index"], np.arange(np.prod(sizes)).reshape(sizes))


# ----------------------------------------------------------------------------
# Each collective over the inner axis, the outer axis and both (in either order)

AXIS_SETS = {
    "inner": "model",
    "outer": "data",
    "both": ("data", "model"),
    "reversed": ("model", "data"),
}
COLLECTIVES = {
    "psum": lambda x, axes, n: lax.psum(x, axes),
    "pmean": lambda x, axes, n: lax.pmean(x, axes),
    "pmax": lambda x, axes, n: lax.pmax(x, axes),
    "pmin": lambda x, axes, n: lax.pmin(x, axes),
    "all_gather": lambda x, axes, n: lax.all_gather(x, axes),
    "all_gather_tiled": lambda x, axes, n: lax.all_gather(x, axes, axis=1, tiled=True),
    "psum_scatter": lambda x, axes, n: lax.psum_scatter(x[:n], axes),
    "psum_scatter_tiled": lambda x, axes, n: lax.psum_scatter(
        x, axes, scatter_dimension=1, tiled=True
    ),
    "all_to_all": lambda x, axes, n: lax.all_to_all(x[:n], axes, 0, 1),
    "all_to_all_tiled": lambda x, axes, n: lax.all_to_all(x, axes, 1, 0, tiled=True),
    "ppermute": lambda x, axes, n: lax.ppermute(x, axes, ring(n)),
    "axis_index": lambda x, axes, n: lax.axis_index(axes),
}
NUMPY_ONLY_OVER_TUPLES = {
    "all_gather": lambda blocks, axes: all_gather_reference(blocks, MESH_2X4, axes),
    "all_gather_tiled": lambda blocks, axes: all_gather_reference(
        blocks, MESH_2X4, axes, axis=1, tiled=True
    ),
    "psum_scatter": lambda blocks, axes: psum_scatter_reference(blocks[:, :, :8], MESH_2X4, axes),
    "psum_scatter_tiled": lambda blocks, axes: psum_scatter_reference(
        blocks, MESH_2X4, axes, dimension=1, tiled=True
    ),
    "ppermute": lambda blocks, axes: ppermute_reference(blocks, MESH_2X4, axes, ring(8)),
}
VMAP_CASES = [
    pytest.param(kind, axes, id=f"{kind}-{label}")
    for kind in COLLECTIVES
    for label, axes in AXIS_SETS.items()
    if not (kind in NUMPY_ONLY_OVER_TUPLES and isinstance(axes, tuple))
]
NUMPY_CASES = [
    pytest.param(kind, AXIS_SETS[label], id=f"{kind}-{label}")
    for kind in NUMPY_ONLY_OVER_TUPLES
    for label in ("both", "reversed")
]


def collective_program(kind: str, axes):
    n = size_of(MESH_2X4, axes)
    return nested_2x4(lambda x: COLLECTIVES[kind](x, axes, n))


@pytest.mark.parametrize(("kind", "axes"), VMAP_CASES)
def test_collective_matches_vmap(kind, axes, rng):
    check_against_vmap(collective_program(kind, axes), small_ints(rng, (2, 4, 8, 8)))


@pytest.mark.parametrize(("kind", "axes"), NUMPY_CASES)
def test_collective_over_axis_tuple_matches_numpy(kind, axes, rng):
    x = small_ints(rng, (2, 4, 8, 8))
    actual = np.asarray(collective_program(kind, axes)(pmapc.pmap)(x))
    assert_tree_equal(actual, NUMPY_ONLY_OVER_TUPLES[kind](x, axes))


def test_axis_index_over_reversed_tuple_is_model_major():
    index = nest(pmapc.pmap, lambda x: lax.axis_index(("model", "data")), NAMES)
    data, model = np.meshgrid(np.arange(2), np.arange(4), indexing="ij")
    actual = np.asarray(index(np.zeros((2, 4), np.float32)))
    assert_tree_equal(actual, (model * 2 + data).astype(np.int32))


def test_all_gather_over_reversed_tuple_orders_model_major():
    gather = nest(pmapc.pmap, lambda x: lax.all_gather(x, ("model", "data")), NAMES)
    device_ids = np.arange(8, dtype=np.int32).reshape(2, 4)
    actual = np.asarray(gather(device_ids))
    model_major = np.array([0, 4, 1, 5, 2, 6, 3, 7], np.int32)
    assert_tree_equal(actual, np.broadcast_to(model_major, (2, 4, 8)))


def test_ppermute_over_an_unsorted_tuple_counts_in_mesh_order_on_every_jax():
    """JAX 0.4.30's values (docs/ir.md, the goldens): the group is sorted, so a
    shift over ('model', 'data') moves data as over ('data', 'model'). JAX 0.11.1+
    refuses that tuple under shard_map (`jax_raise_on_ppermute_sort_diff`, on by
    default) and without the check would follow the tuple's order; pmapc keeps
    0.4.30's semantics on every release."""
    shift = nest(pmapc.pmap, lambda v: lax.ppermute(v, ("model", "data"), ring(8)), NAMES)
    device_ids = np.arange(8, dtype=np.int32).reshape(2, 4)
    expected = np.array([[7, 0, 1, 2], [3, 4, 5, 6]], np.int32)
    assert_tree_equal(np.asarray(shift(device_ids)), expected)


@pytest.mark.parametrize("axes", ["model", "data", ("data", "model")], ids=str)
def test_ppermute_leaves_devices_without_source_zero(axes, rng):
    n = size_of(MESH_2X4, axes)
    shift = [(j, j + 1) for j in range(n - 1)]
    x = small_ints(rng, (2, 4, 3))
    actual = np.asarray(nest(pmapc.pmap, lambda v: lax.ppermute(v, axes, shift), NAMES)(x))
    axes_tuple = (axes,) if isinstance(axes, str) else axes
    assert_tree_equal(actual, ppermute_reference(x, MESH_2X4, axes_tuple, shift))


def test_psum_of_a_constant_is_the_group_size(rng):
    def body(x):
        return lax.psum(1, "model"), lax.psum(1, ("data", "model")) * x

    sizes, _ = check_against_vmap(nested_2x4(body), small_ints(rng, (2, 4, 3)))
    assert_tree_equal(sizes, np.full((2, 4), 4, np.int32))


def test_psum_of_a_pytree_reduces_every_leaf(rng):
    def body(x):
        return lax.psum({"x": x, "pair": (x * 2, x.astype(jnp.int32))}, "model")

    check_against_vmap(nested_2x4(body), small_ints(rng, (2, 4, 3)))


def test_independent_reductions_of_mixed_kinds_axes_and_dtypes(rng):
    def body(x):
        return (
            lax.psum(x, "model"),
            lax.psum(x, "data"),
            lax.pmax(x, "model"),
            lax.psum(x.astype(jnp.int32), "model"),
            lax.pmin(x, NAMES),
            lax.psum(x > 0, "model"),
            lax.pmax(x > 0, "model"),
            lax.psum(x[0], ("model", "data")),
        )

    check_against_vmap(nested_2x4(body), small_ints(rng, (2, 4, 3)))


def test_three_level_collectives_over_non_adjacent_axes(rng):
    def body(x):
        return {
            "outer_and_inner": lax.psum(x, ("a", "c")),
            "middle": lax.pmax(x, "b"),
            "index": lax.axis_index(("c", "a")),
            "spread": lax.all_to_all(x, ("c", "a"), 0, 0, tiled=True),
        }

    check_against_vmap(
        lambda mapper: nest(mapper, body, ("a", "b", "c")), small_ints(rng, (2, 2, 2, 4, 3))
    )


def test_three_level_all_gather_over_reversed_tuple_matches_numpy(rng):
    x = small_ints(rng, (2, 2, 2, 3))
    gather = nest(pmapc.pmap, lambda v: lax.all_gather(v, ("c", "a")), ("a", "b", "c"))
    assert_tree_equal(np.asarray(gather(x)), all_gather_reference(x, MESH_2X2X2, ("c", "a")))


def test_three_level_axis_index_over_reversed_tuple_matches_numpy():
    index = nest(pmapc.pmap, lambda v: lax.axis_index(("c", "a")), ("a", "b", "c"))
    assert_tree_equal(
        np.asarray(index(np.zeros((2, 2, 2), np.float32))),
        axis_index_reference(MESH_2X2X2, ("c", "a")),
    )


def test_sibling_inner_maps_share_the_inner_axis(rng):
    def build(mapper):
        def rows(x):
            sums = mapper(lambda v: lax.psum(v, "model"), "model")(x)
            return mapper(lambda v: lax.pmax(v + lax.axis_index("model"), NAMES), "model")(sums)

        return mapper(rows, "data")

    check_against_vmap(build, small_ints(rng, (2, 4, 3)))


def test_sibling_maps_of_different_sizes(rng):
    # JAX 0.4 runs the smaller sibling replicated over the devices it leaves over.
    def build(mapper):
        def rows(x, y):
            wide = mapper(lambda v: lax.psum(v, "a") * 10 + lax.axis_index("a"), "a")(x)
            narrow = mapper(
                lambda v: lax.psum(v, ("data", "b")) + lax.axis_index(("b", "data")), "b"
            )(y)
            both = mapper(lambda v, w: lax.pmax(v * w, ("b", "data")), "b")(wide[::2], narrow)
            return wide, narrow, both, lax.psum(x, "data")

        return mapper(rows, "data")

    check_against_vmap(build, small_ints(rng, (2, 4, 3)), small_ints(rng, (2, 2, 3)))


def test_sibling_maps_of_one_size_and_different_names(rng):
    def build(mapper):
        def rows(x):
            first = mapper(lambda v: lax.all_gather(v, "p"), "p")(x)
            second = mapper(lambda v: lax.ppermute(v, "q", ring(4)) + lax.psum(v, "data"), "q")(x)
            return first, second

        return mapper(rows, "data")

    check_against_vmap(build, small_ints(rng, (2, 4, 3)))


def test_smaller_sibling_with_its_own_inner_map(rng):
    # Under 'data': 'a' (4) beside 'b' (2), which maps 'c' (2) inside: the mesh
    # refines both chains, and collectives over 'b' and 'c' see their own sizes.
    def build(mapper):
        def inner(v):
            return lax.psum(v, "c") + 100 * lax.axis_index(("c", "b")) + lax.pmin(v, ("data", "b"))

        def rows(x, y):
            wide = mapper(lambda v: lax.pmean(v, ("a", "data")), "a")(x)
            nested = mapper(lambda z: mapper(inner, "c")(z) * lax.axis_index("b"), "b")(y)
            return wide, nested

        return mapper(rows, "data")

    check_against_vmap(build, small_ints(rng, (2, 4, 3)), small_ints(rng, (2, 2, 2, 3)))


def test_sibling_map_of_size_one(rng):
    def build(mapper):
        def rows(x, y):
            return (
                mapper(lambda v: lax.psum(v, ("model", "data")), "model")(x),
                mapper(lambda v: v + lax.axis_index("one") + lax.psum(v, "one"), "one")(y),
            )

        return mapper(rows, "data")

    check_against_vmap(build, small_ints(rng, (2, 4, 3)), small_ints(rng, (2, 1, 3)))


def test_gradient_through_sibling_maps_of_different_sizes(rng):
    def build(mapper):
        def rows(x, y):
            wide = mapper(lambda v: jnp.sin(v) * lax.psum(v, "a"), "a")(x)
            narrow = mapper(lambda v: lax.psum(v * v, ("b", "data")), "b")(y)
            return wide.sum() * narrow.sum()

        program = mapper(rows, "data")
        return jax.grad(lambda x, y: program(x, y).sum(), argnums=(0, 1))

    check_against_vmap(
        build, small_ints(rng, (2, 4, 3)), small_ints(rng, (2, 2, 3)), rtol=1e-5, atol=1e-5
    )


def test_sibling_sizes_that_share_no_layout_are_refused(rng):
    def rows(x, y):
        return (pmapc.pmap(lambda v: v, "a")(x), pmapc.pmap(lambda v: v, "b")(y))

    program = pmapc.pmap(rows, "data")
    with pytest.raises(pmapc.AxisError, match=r"sizes that share no device layout.*divide"):
        program(np.zeros((1, 4)), np.zeros((1, 6)))


def test_inner_output_feeds_the_outer_body_and_another_inner_map(rng):
    def build(mapper):
        def rows(x):
            doubled = mapper(lambda v: v * 2 + lax.axis_index("model"), "model")(x)
            shifted = mapper(lambda v, w: v + w, "model")(doubled, x)
            return shifted, doubled[1], jnp.flip(doubled, 0).cumsum(0), lax.psum(doubled, "data")

        return mapper(rows, "data")

    check_against_vmap(build, small_ints(rng, (2, 4, 3)))


# ----------------------------------------------------------------------------
# in_axes and out_axes


def test_in_axes_one_maps_a_later_dimension(rng):
    def build(mapper):
        inner = mapper(
            lambda v: lax.psum(v, "model") + v * lax.axis_index("model"), "model", in_axes=1
        )
        return mapper(inner, "data", in_axes=1)

    check_against_vmap(build, small_ints(rng, (3, 2, 4, 5)))


def test_negative_in_axes_count_from_the_end(rng):
    def build(mapper):
        inner = mapper(lambda v: lax.pmax(v, "data"), "model", in_axes=-1)
        return mapper(inner, "data", in_axes=-1)

    check_against_vmap(build, small_ints(rng, (3, 4, 2)))


def test_in_axes_none_broadcasts_an_argument(rng):
    def build(mapper):
        def columns(x, scale):
            return x * scale + lax.psum(scale * lax.axis_index("model"), "model")

        def rows(x, scale, offset):
            total = lax.psum(x, "data")  # replicated over model: pass it unmapped
            return mapper(columns, "model", in_axes=(0, None))(x + offset, total[0])

        return mapper(rows, "data", in_axes=(0, None, None))

    check_against_vmap(
        build, small_ints(rng, (2, 4, 3)), small_ints(rng, (3,)), small_ints(rng, (4, 3))
    )


def test_axis_size_sizes_a_map_with_no_mapped_argument(rng):
    def build(mapper):
        def columns(x):
            return x * lax.axis_index("model") + lax.psum(x, "data")

        if mapper is pmapc.pmap:
            inner = pmapc.pmap(columns, "model", in_axes=None, axis_size=4)
        else:
            inner = jax.vmap(columns, in_axes=None, axis_size=4, axis_name="model")
        return mapper(inner, "data")

    assert check_against_vmap(build, small_ints(rng, (2, 3))).shape == (2, 4, 3)


def test_out_axes_nonzero_on_outer_and_inner_maps(rng):
    def build(mapper):
        inner = mapper(lambda v: v + lax.psum(v, "data"), "model", out_axes=1)
        return mapper(inner, "data", out_axes=2)

    result = check_against_vmap(build, small_ints(rng, (2, 4, 3, 5)))
    assert result.shape == (3, 4, 2, 5)  # per device (3, 5); model inserted at 1, data at 2


def test_inner_out_axes_none_returns_an_invariant_value_once(rng):
    def build(mapper):
        inner = mapper(lambda v: (lax.psum(v, "model"), v), "model", out_axes=(None, 0))
        return mapper(inner, "data")

    total, local = check_against_vmap(build, small_ints(rng, (2, 4, 3)))
    assert total.shape == (2, 3)
    assert local.shape == (2, 4, 3)


def test_outer_out_axes_none_returns_an_invariant_value_once(rng):
    def build(mapper):
        inner = mapper(lambda v: lax.pmean(v, ("data", "model")), "model", out_axes=None)
        return mapper(inner, "data", out_axes=None)

    assert check_against_vmap(build, small_ints(rng, (2, 4, 3))).shape == (3,)


# ----------------------------------------------------------------------------
# Pytrees


def test_dict_argument_with_pytree_in_axes(rng):
    def build(mapper):
        def columns(params, x):
            return {"y": lax.psum(x @ params["w"], "model") + params["b"]}

        def rows(params, x):
            return mapper(columns, "model", in_axes=({"w": 0, "b": None}, 0))(params, x)

        return mapper(rows, "data", in_axes=({"w": None, "b": None}, 0))

    params = {"w": small_ints(rng, (4, 3, 2)), "b": small_ints(rng, (2,))}
    check_against_vmap(build, params, small_ints(rng, (2, 4, 5, 3)))


def test_tuple_arguments_and_outputs_with_pytree_axes(rng):
    def build(mapper):
        def columns(pair, extra):
            first, second = pair
            return (first + extra[0],), (lax.psum(second, NAMES), lax.axis_index("data"))

        inner = mapper(columns, "model", in_axes=((0, 1), (None,)), out_axes=((1,), (0, 0)))
        return mapper(inner, "data", in_axes=((0, 0), (0,)), out_axes=((0,), (None, 0)))

    pair = (small_ints(rng, (2, 4, 3)), small_ints(rng, (2, 3, 4)))
    check_against_vmap(build, pair, (small_ints(rng, (2, 3)),))


def test_list_arguments_and_outputs_with_int_axes(rng):
    def body(items):
        return [lax.psum(items[0], "model"), items[1] * lax.axis_index("model")]

    check_against_vmap(nested_2x4(body), [small_ints(rng, (2, 4, 3)), small_ints(rng, (2, 4))])


def test_list_argument_with_list_in_axes(rng):
    def body(items):
        return items[0] + lax.psum(items[1], "model")

    build = nested_2x4(body, in_axes=([0, 0],))
    check_against_vmap(build, [small_ints(rng, (2, 4, 3)), small_ints(rng, (2, 4, 3))])


def test_list_output_with_list_out_axes(rng):
    def body(x):
        return [x, lax.psum(x, "model")]

    check_against_vmap(nested_2x4(body, out_axes=[0, 1]), small_ints(rng, (2, 4, 3)))


# ----------------------------------------------------------------------------
# Control flow and transformations inside a body


def test_collective_inside_cond_with_group_uniform_predicate(rng):
    def body(x):
        uniform = lax.psum(x.sum(), "model") > 0  # the same on every device of a model group
        return lax.cond(uniform, lambda v: lax.psum(v, "model"), lambda v: lax.pmax(v, "model"), x)

    x = np.abs(small_ints(rng, (2, 4, 3)))
    x[1] = -x[1] - 1  # row 0 takes the psum branch, row 1 the pmax branch
    check_against_vmap(nested_2x4(body), x)


def test_collectives_inside_scan(rng):
    def body(x):
        def step(carry, row):
            return carry + lax.psum(row, "model"), lax.pmax(carry, "data")

        return lax.scan(step, jnp.zeros_like(x[0]), x)

    check_against_vmap(nested_2x4(body), small_ints(rng, (2, 4, 5, 3)))


def test_ppermute_inside_fori_loop(rng):
    def body(x):
        def step(i, carry):
            shifted, total = carry
            return lax.ppermute(shifted, "model", ring(4)), total + shifted * i

        return lax.fori_loop(0, 3, step, (x, jnp.zeros_like(x)))

    check_against_vmap(nested_2x4(body), small_ints(rng, (2, 4, 3)))


def test_inner_map_inside_a_loop_of_the_outer_body(rng):
    """An inner map called in a fori_loop: flattening inlines its body into the loop's
    block, whose arguments are the loop's carried values (flatten-maps' splice)."""

    def inner(v):
        scaled = v * 2.0 + lax.axis_index("model")
        return lax.psum(scaled, "model") * 0.25 - lax.pmax(v, "data") + 1.0

    def build(mapper):
        def outer(x):
            mapped = mapper(inner, "model", in_axes=0, out_axes=0)
            return lax.fori_loop(0, 3, lambda i, v: mapped(v) * 0.5 + i, x)

        return mapper(outer, "data", in_axes=0, out_axes=0)

    check_against_vmap(build, small_ints(rng, (2, 4, 3)).astype(np.float32))


def test_inner_map_in_both_branches_of_a_cond(rng):
    def build(mapper):
        def outer(x, pick):
            up = mapper(lambda v: lax.psum(v, "model") + v, "model", in_axes=0, out_axes=0)
            down = mapper(lambda v: lax.pmin(v * 3.0, "model"), "model", in_axes=0, out_axes=0)
            return lax.cond(pick > 0, up, down, x)

        return mapper(outer, "data", in_axes=(0, 0), out_axes=0)

    x = small_ints(rng, (2, 4, 3)).astype(np.float32)
    check_against_vmap(build, x, np.array([1, 0], np.int32))


def test_while_loop_with_a_psum_condition(rng):
    def body(x):
        def not_done(state):
            return lax.psum(state[0], ("data", "model")) < 100  # uniform across the mesh

        def grow(state):
            value, steps = state
            return value + lax.axis_index("model") + 1, steps + 1

        return lax.while_loop(not_done, grow, (x, 0))

    check_against_vmap(nested_2x4(body), np.abs(small_ints(rng, (2, 4))))


def test_jit_inside_a_body(rng):
    def build(mapper):
        def columns(v):
            return jax.jit(lambda u: lax.psum(u, "model") * 2)(v)

        def rows(x):
            return jax.jit(lambda u: lax.pmin(u, "data"))(mapper(columns, "model")(x))

        return mapper(rows, "data")

    check_against_vmap(build, small_ints(rng, (2, 4, 3)))


def test_jit_around_an_inner_map(rng):
    def build(mapper):
        columns = mapper(lambda v: lax.psum(v, ("data", "model")) - v, "model")
        return mapper(lambda x: jax.jit(columns)(x) * 3, "data")

    check_against_vmap(build, small_ints(rng, (2, 4, 3)))


def test_grad_of_psum_is_the_axis_size(rng):
    body = jax.grad(lambda v: lax.psum(v, "model").sum())
    grads = check_against_vmap(nested_2x4(body), small_ints(rng, (2, 4, 3)))
    assert_tree_equal(grads, np.full((2, 4, 3), 4.0, np.float32))


def test_grad_through_ppermute_and_all_gather(rng):
    def body(x):
        def loss(v):
            shifted = lax.ppermute(v, "model", ring(4)) * jnp.arange(3.0)
            return shifted.sum() + (lax.all_gather(v, "data") ** 2).sum()

        return jax.grad(loss)(x)

    check_against_vmap(nested_2x4(body), small_ints(rng, (2, 4, 3)))


def test_value_and_grad_inside_a_body(rng):
    def body(w, x, target):
        def loss(w):
            return ((lax.psum(x * w, "model") - target) ** 2).sum()

        value, grad = jax.value_and_grad(loss)(w)
        return lax.pmean(value, "data"), lax.pmean(grad, "data")

    check_against_vmap(
        nested_2x4(body),
        small_ints(rng, (2, 4, 3)),
        small_ints(rng, (2, 4, 3)),
        small_ints(rng, (2, 4, 3)),
    )


def test_vmap_inside_a_body(rng):
    def body(x):
        return jax.vmap(lambda row: lax.psum(row, "model") * lax.axis_index("data"))(x)

    check_against_vmap(nested_2x4(body), small_ints(rng, (2, 4, 5, 3)))


def test_vmap_with_a_named_axis_collective_inside_a_body(rng):
    def body(x):
        def per_row(row):
            by_rows = lax.psum(row, "rows") * lax.axis_index("rows") + lax.pmax(row, "rows")
            return lax.psum(row, "model") + by_rows + lax.all_gather(row, "rows").sum(0)

        return jax.vmap(per_row, axis_name="rows")(x)

    check_against_vmap(nested_2x4(body), small_ints(rng, (2, 4, 5, 3)))


# ----------------------------------------------------------------------------
# dtypes


@pytest.mark.parametrize("dtype", [np.int32, np.bool_], ids=["int32", "bool"])
@pytest.mark.parametrize("axes", ["model", ("data", "model")], ids=["inner", "both"])
def test_integer_and_bool_reductions(dtype, axes, rng):
    def body(x):
        return lax.psum(x, axes), lax.pmax(x, axes), lax.pmin(x, axes)

    check_against_vmap(nested_2x4(body), small_ints(rng, (2, 4, 3), dtype))


def test_psum_of_bools_counts_in_int32(rng):
    x = rng.integers(0, 2, size=(2, 4, 3)).astype(bool)
    counts = np.asarray(nest(pmapc.pmap, lambda v: lax.psum(v, "model"), NAMES)(x))
    assert_tree_equal(
        counts, np.broadcast_to(x.sum(axis=1, keepdims=True, dtype=np.int32), x.shape)
    )


def test_python_constant_outputs_are_int32_and_float32():
    def body(x):
        return 1, 2.5, x

    check_against_vmap(nested_2x4(body), np.zeros((2, 4), np.float32))


# ----------------------------------------------------------------------------
# API forms


def test_static_broadcasted_argnums_specialize_the_body(rng):
    def rows(x, power, mapper):
        return mapper(lambda v: lax.psum(v**power, "model"), "model")(x)

    mapped = pmapc.pmap(
        functools.partial(rows, mapper=pmapc.pmap), "data", static_broadcasted_argnums=1
    )
    x = small_ints(rng, (2, 4, 3))
    for power in (2, 3):
        expected = vmap_mapper(functools.partial(rows, power=power, mapper=vmap_mapper), "data")(x)
        assert_tree_equal(np.asarray(mapped(x, power)), expected)


def test_partial_decorator_style(rng):
    def build(mapper):
        @functools.partial(mapper, axis_name="rows")
        @functools.partial(mapper, axis_name="cols")
        def centered(x):
            return x - lax.pmean(x, "rows") + lax.axis_index("cols")

        return centered

    check_against_vmap(build, small_ints(rng, (2, 4, 3)))


def test_inner_map_reusing_the_outer_name_shadows_it(rng):
    body = lambda v: (lax.psum(v, "i"), lax.axis_index("i"))  # noqa: E731
    x = small_ints(rng, (2, 4, 3))
    total, index = check_against_vmap(lambda mapper: nest(mapper, body, ("i", "i")), x)
    assert_tree_equal(total, np.broadcast_to(x.sum(axis=1, keepdims=True), x.shape))
    assert_tree_equal(index, np.broadcast_to(np.arange(4, dtype=np.int32), (2, 4)))


def test_keyword_arguments_are_mapped_over_their_leading_axis(rng):
    """jax.pmap maps keyword arguments over axis 0 (in_axes covers positional ones)."""
    x, bias = small_ints(rng, (2, 4, 3)), small_ints(rng, (2, 4, 3))

    def build(mapper):
        def inner(y, *, bias):
            return lax.psum(y, "model") + bias

        def outer(v, *, bias):
            return mapper(inner, "model")(v, bias=bias) * lax.axis_index("data")

        return lambda v, *, bias: mapper(outer, "data")(v, bias=bias)

    actual = build(pmapc.pmap)(x, bias=bias)
    assert_tree_equal(np.asarray(actual), build(vmap_mapper)(x, bias=bias))


class Axis(enum.Enum):
    """Axis names need only be hashable (jax.pmap's documentation): enum members here."""

    ROWS = "rows"
    COLUMNS = "columns"


def test_any_hashable_axis_name(rng):
    def body(x):
        return {
            "both": lax.psum(x, (Axis.ROWS, Axis.COLUMNS)),
            "index": lax.axis_index(Axis.COLUMNS),
            "gathered": lax.all_gather(x, Axis.ROWS),
        }

    check_against_vmap(
        lambda mapper: nest(mapper, body, (Axis.ROWS, Axis.COLUMNS)), small_ints(rng, (2, 4, 3))
    )
