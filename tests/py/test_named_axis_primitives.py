"""Every named-axis primitive of the JAX in use, inside nested maps: lowered where it
has a meaning in a nest (each against numpy or nested `jax.vmap`), refused with a
typed pmapc error at the user's line otherwise, never an internal error of JAX or
pmapc. A leftover `jax.pmap` in a body is refused the same way.
"""

from __future__ import annotations

import inspect
import types

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax
from support.oracle import assert_tree_equal, nest, vmap_mapper

import pmapc
from pmapc.errors import UnsupportedError
from pmapc.lowering import jax_api, primitives

GRID = np.arange(2 * 4 * 3, dtype=np.float32).reshape(2, 4, 3)
AXES = ["data", "model"]


def run(body, x=GRID):
    return np.asarray(nest(pmapc.pmap, body, AXES)(x))


def from_device(model_index):
    """What a broadcast from index `model_index` of 'model' gives every device."""
    return np.broadcast_to(GRID[:, model_index : model_index + 1], GRID.shape)


@pytest.mark.parametrize("axis_name", ["model", ("model",)], ids=["name", "tuple"])
def test_pbroadcast_from_a_static_source(axis_name):
    assert_tree_equal(run(lambda y: lax.pbroadcast(y, axis_name, 2)), from_device(2))


def test_pbroadcast_over_both_axes():
    got = run(lambda y: lax.pbroadcast(y, ("data", "model"), 5))
    assert_tree_equal(got, np.broadcast_to(GRID[1, 1], GRID.shape))


def test_pbroadcast_of_integers_and_bools():
    ints = GRID.astype(np.int32)
    assert_tree_equal(
        run(lambda y: lax.pbroadcast(y, "model", 3), ints), from_device(3).astype(np.int32)
    )
    odd = (GRID % 2).astype(bool)
    got = run(lambda y: lax.pbroadcast(y, "model", 1), odd)
    assert_tree_equal(got, np.broadcast_to(odd[:, 1:2], odd.shape))


@pytest.mark.skipif(not hasattr(lax, "psum_scatter_start"), reason="JAX 0.12 pbroadcast")
def test_pbroadcast_from_a_traced_source():
    got = run(lambda y: lax.pbroadcast(y, "model", lax.axis_index("data") + 1))
    want = np.stack([from_device(1)[0], from_device(2)[1]])
    assert_tree_equal(got, want)


@pytest.mark.skipif(not hasattr(lax, "psum_scatter_start"), reason="added in JAX 0.12")
def test_psum_scatter_start_done_is_psum_scatter():
    def program(mapper):
        def body(y):
            tiled = jnp.tile(y, 4)
            if mapper is pmapc.pmap:
                return lax.psum_scatter_start(tiled, "model", tiled=True).done()
            return lax.psum_scatter(tiled, "model", tiled=True)

        return nest(mapper, body, AXES)

    assert_tree_equal(np.asarray(program(pmapc.pmap)(GRID)), program(vmap_mapper)(GRID))


# JAX's asynchronous collectives (`<name>_start(...).done()`; jax.lax exports
# psum_scatter_start from 0.12, the module of JAX's collectives has the others),
# each against its synchronous form under nested jax.vmap.
ASYNC = {
    "all_gather": (lambda y, p: p.all_gather_start(y, "model").done(), lax.all_gather),
    # From 0.11 psum_start returns the sum itself outside shard_map, not a future.
    "psum": (
        lambda y, p: (
            p.psum_start(y, "model") if jax_api.SINCE_0_11 else p.psum_start(y, "model").done()
        ),
        lax.psum,
    ),
    "ppermute": (
        lambda y, p: p.ppermute_start(y, "model", [(0, 1), (1, 2), (2, 3), (3, 0)]).done(),
        lambda y, axis: lax.ppermute(y, axis, [(0, 1), (1, 2), (2, 3), (3, 0)]),
    ),
    "all_to_all": (
        lambda y, p: p.all_to_all_start(jnp.tile(y, 4), "model", 0, 0, tiled=True).done(),
        lambda y, axis: lax.all_to_all(jnp.tile(y, 4), axis, 0, 0, tiled=True),
    ),
}


@pytest.mark.parametrize("name", sorted(ASYNC))
def test_async_collectives_run_as_their_synchronous_form(name):
    from jax._src.lax import parallel  # the async forms' home, in every JAX pmapc admits

    start, sync = ASYNC[name]
    if not hasattr(parallel, f"{name}_start"):
        pytest.skip(f"no {name}_start in this JAX")
    want = nest(vmap_mapper, lambda y: sync(y, "model"), AXES)(GRID)
    assert_tree_equal(run(lambda y: start(y, parallel)), want)


def test_all_gather_to_invarying():
    if "to" not in inspect.signature(lax.all_gather).parameters:
        pytest.skip("all_gather has no to= in this JAX")
    body = lambda y: lax.all_gather(y, "model", to="invarying")  # noqa: E731
    if jax_api.JAX_VERSION < (0, 12):
        # JAX 0.10's and 0.11's tracers assert on it outside shard_map; pmapc says what to
        # write, and from which release it traces.
        with pytest.raises(UnsupportedError, match="all_gather needs no to=") as raised:
            run(body)
        assert "JAX 0.12 and later trace it" in str(raised.value)
        assert raised.value.location.file == __file__
        return
    want = nest(vmap_mapper, lambda y: lax.all_gather(y, "model"), AXES)(GRID)
    assert_tree_equal(run(body), want)


REFUSED = {
    "pcast": (lambda y: lax.pcast(y, "model", to="varying"), "pcast or pvary is not needed"),
    "jax.pmap": (
        lambda y: jax.pmap(lambda v: lax.psum(v, "z"), axis_name="z")(y.reshape(3, 1)),
        "use pmapc.pmap for the inner map",
    ),
}
if hasattr(lax, "psend"):  # deprecated in 0.12
    REFUSED["psend"] = (lambda y: lax.psend(y, "model", [(0, 1)]), "use jax.lax.ppermute")
    REFUSED["precv"] = (
        lambda y: lax.precv(y, jax.ShapeDtypeStruct(y.shape, y.dtype), "model", [(0, 1)]),
        "use jax.lax.ppermute",
    )
if jax_api.JAX_VERSION >= (0, 12, 0):
    REFUSED["psum_scatter_start untiled"] = (
        lambda y: lax.psum_scatter_start(jnp.tile(y, 4).reshape(4, 3), "model").done(),
        "psum_scatter",
    )


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_refused_at_the_users_line(name):
    body, advice = REFUSED[name]
    with pytest.raises(UnsupportedError, match=advice) as raised:
        run(body)
    assert raised.value.location is not None
    assert raised.value.location.file == __file__


def test_jax_pmap_outside_maps_is_jax_s():
    x = np.arange(8.0, dtype=np.float32)
    result = jax.pmap(lambda v: lax.psum(v, "i"), axis_name="i")(x)
    np.testing.assert_array_equal(np.asarray(result), np.full(8, x.sum(), np.float32))


@pytest.mark.skipif(not hasattr(jax.sharding, "no_collectives"), reason="added in JAX 0.12")
def test_no_collectives_keeps_working_around_and_inside_maps():
    """Collectives over the other axes run; one over a forbidden axis gets JAX's error."""

    def body(axis):
        def forbid_model(y):
            with jax.sharding.no_collectives(frozenset({"model"})):
                return lax.psum(y, axis) + 1

        return forbid_model

    with jax.sharding.no_collectives(frozenset({"model"})):
        got = run(body("data"))
    assert_tree_equal(got, GRID.sum(axis=0, keepdims=True).repeat(2, axis=0) + 1)
    with pytest.raises(Exception, match="forbidden by `no_collectives`") as raised:
        run(body("model"))
    assert type(raised.value).__name__ == "ForbiddenCollectiveError"


def test_every_named_axis_primitive_is_lowered_or_refused():
    """Each primitive of JAX's collectives module, in an equation over a bound axis:
    pmapc lowers it, or refuses it with its name (not an internal error)."""
    lowered = primitives.lowered_primitives()
    refused = []
    for primitive in jax_api.named_axis_primitives():
        if primitive in lowered:
            continue
        for key in ("axes", "axis_name"):
            eqn = types.SimpleNamespace(
                primitive=primitive,
                params={key: ("model",)},
                source_info=jax_api.current_source_info(),
            )
            with pytest.raises(UnsupportedError, match=f"'{primitive.name}' over 'model'"):
                primitives.check_supported(types.SimpleNamespace(eqns=[eqn]), ["model"])
        refused.append(primitive.name)
    assert "psum" not in refused and "all_gather" not in refused
    assert "ragged_all_to_all" not in refused  # tests/py/test_ragged.py


def _times_psum_of_a_weak_value(y, axis):
    weak = jnp.where(lax.axis_index(axis) == 0, 1.0, 2.0)  # a weakly typed float32
    return y * lax.psum(weak, axis)


@pytest.mark.parametrize("count", [None, 2], ids=["unfolded", "folded"])
def test_psum_of_a_weak_value_promotes_as_the_running_jaxs_pmap(count):
    """JAX 0.12.1's psum keeps its operand's weak type, earlier releases drop it: a
    bfloat16 block times the psum of a weak float32 is bfloat16 from 0.12.1 on and
    float32 before, in JAX's own single-level `jax.pmap` and in pmapc alike."""
    blocks = np.arange(4 * 3).reshape(4, 3).astype(jnp.bfloat16)
    jax_pmap = jax.pmap(
        lambda y: _times_psum_of_a_weak_value(y, "i"), axis_name="i", devices=jax.devices()[:4]
    )
    want_dtype = jax_pmap(blocks).dtype
    grid = np.broadcast_to(blocks, (2, 4, 3))
    body = lambda y: _times_psum_of_a_weak_value(y, "model")  # noqa: E731
    if count is None:
        got = run(body, grid)
    else:
        with pmapc.fold_onto(jax.devices()[:count]):
            got = run(body, grid)
    want = nest(vmap_mapper, body, AXES)(grid)
    assert got.dtype == want_dtype
    np.testing.assert_array_equal(got.astype(np.float32), np.asarray(want, np.float32))
