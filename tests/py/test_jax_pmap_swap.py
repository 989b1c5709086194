"""`pmapc.pmap` where a code base swaps it in for every `jax.pmap`, single-level maps
included: methods, axis names of any hashable type, typed PRNG keys, the stage API,
inputs on other devices. Values are checked against numpy or nested `jax.vmap`."""

from __future__ import annotations

import dataclasses
import logging
from functools import partial

import jax
import numpy as np
import pytest
from jax import lax
from jax.sharding import Mesh, NamedSharding, PartitionSpec

import pmapc

X = np.arange(8 * 3, dtype=np.float32).reshape(8, 3)


# -- methods -----------------------------------------------------------------------


class Scaler:
    def __init__(self, scale: float):
        self.scale = scale

    @partial(pmapc.pmap, axis_name="i", static_broadcasted_argnums=0)
    def total(self, x):
        return lax.psum(x, "i") * self.scale


def test_a_method_binds_self_and_static_argnums_count_it():
    scaler = Scaler(3.0)
    expected = np.broadcast_to(X.sum(axis=0) * 3.0, X.shape)
    np.testing.assert_array_equal(np.asarray(scaler.total(X)), expected)
    np.testing.assert_array_equal(np.asarray(Scaler.total(scaler, X)), expected)


@jax.tree_util.register_dataclass
@dataclasses.dataclass
class Shift:
    offset: jax.Array

    @partial(pmapc.pmap, axis_name="i", in_axes=(None, 0))
    def apply(self, x):
        return x + self.offset + lax.axis_index("i")


def test_a_method_of_a_pytree_maps_self_by_in_axes():
    shift = Shift(np.float32(0.5))
    expected = X + 0.5 + np.arange(8, dtype=np.float32)[:, None]
    np.testing.assert_array_equal(np.asarray(shift.apply(X)), expected)


# -- axis names by equality and hash, not by their text ------------------------------


class SameRepr:
    """Distinct names (equality by identity) that print alike."""

    def __repr__(self) -> str:
        return "SameRepr()"


@dataclasses.dataclass(frozen=True)
class Named:
    """Equal names that are different objects."""

    text: str


def nested(mapper, outer, inner):
    body = lambda x: lax.psum(x, (outer, inner)) * 10 + lax.axis_index(inner)  # noqa: E731
    return mapper(mapper(body, axis_name=inner), axis_name=outer)


def vmap_mapper(fun, axis_name):
    return jax.vmap(fun, axis_name=axis_name)


def test_distinct_names_that_print_alike_stay_distinct():
    outer, inner = SameRepr(), SameRepr()
    x = np.arange(8, dtype=np.float32).reshape(2, 4)
    expected = nested(vmap_mapper, outer, inner)(x)
    np.testing.assert_array_equal(np.asarray(nested(pmapc.pmap, outer, inner)(x)), expected)
    text = nested(pmapc.pmap, outer, inner).lower(x).as_text("pmapc")
    assert "SameRepr:SameRepr()" in text and "SameRepr:SameRepr()#2" in text


def test_equal_names_are_one_axis_whatever_object_names_it():
    # The psum names the outer axis with an object of its own, equal to the map's.
    f = pmapc.pmap(
        pmapc.pmap(lambda x: lax.psum(x, Named("i")), axis_name=Named("j")), axis_name=Named("i")
    )
    x = np.arange(8, dtype=np.float32).reshape(2, 4)
    np.testing.assert_array_equal(np.asarray(f(x)), np.broadcast_to(x.sum(0), x.shape))


# -- typed PRNG keys -----------------------------------------------------------------


def random_nest(mapper):
    """Keys mapped at both levels and one unmapped, split inside and returned."""

    def inner(key, shared):
        draw, returned = jax.random.split(key)
        return jax.random.normal(draw, (3,)) + jax.random.uniform(shared, ()), returned

    def outer(key, shared):
        return mapper(inner, axis_name="model", in_axes=(0, None))(key, shared)

    return mapper(outer, axis_name="data", in_axes=(0, None))


def vmap_with_names(fun, axis_name, in_axes=0):
    return jax.vmap(fun, axis_name=axis_name, in_axes=in_axes)


KEYS = jax.random.split(jax.random.key(0), 8).reshape(2, 4)
SHARED = jax.random.key(7)


def assert_same_draws(ours, oracle):
    # The same bits; the normal draws to float rounding (XLA fuses them differently).
    np.testing.assert_allclose(np.asarray(ours[0]), np.asarray(oracle[0]), rtol=1e-5, atol=1e-6)
    assert ours[1].dtype == oracle[1].dtype
    np.testing.assert_array_equal(jax.random.key_data(ours[1]), jax.random.key_data(oracle[1]))


def test_typed_keys_mapped_unmapped_and_returned_at_every_level():
    oracle = random_nest(vmap_with_names)(KEYS, SHARED)
    assert_same_draws(random_nest(pmapc.pmap)(KEYS, SHARED), oracle)
    assert_same_draws(random_nest(pmapc.pmap).lower(KEYS, SHARED).compile()(KEYS, SHARED), oracle)


def test_a_single_level_map_of_random_bits():
    keys = jax.random.split(jax.random.key(1), 8)
    np.testing.assert_array_equal(
        np.asarray(pmapc.pmap(jax.random.bits)(keys)), np.asarray(jax.vmap(jax.random.bits)(keys))
    )


# -- the stage API -------------------------------------------------------------------


def named_program():
    def step(x, y):
        return {"total": lax.psum(x + y["hi"], "i"), "x": x}

    return pmapc.pmap(step, axis_name="i")


def test_lowered_and_compiled_have_jaxs_stage_api():
    x = np.ones((8, 3), np.float32)
    args = (x, {"hi": x})
    ours = named_program().lower(*args)
    theirs = jax.jit(named_program()).lower(*args)
    assert ours.in_tree == theirs.in_tree and ours.out_tree == theirs.out_tree
    assert ours.in_avals == theirs.in_avals and ours.out_info == theirs.out_info
    assert ours.donate_argnums == theirs.donate_argnums == ()
    text = ours.as_text(debug_info=True)
    assert 'loc("x")' in text and "loc(\"y['hi']\")" in text
    assert "jax.result_info = \"result['total']\"" in ours.as_text()
    assert "all-reduce" in ours.as_text("hlo")
    assert ours.compiler_ir().operation.name == "builtin.module"
    assert ours.cost_analysis()["flops"] > 0
    compiled = ours.compile({"xla_embed_ir_in_executable": True})
    assert compiled.in_tree == ours.in_tree and compiled.out_tree == ours.out_tree
    assert compiled.runtime_executable() is compiled.executable.loaded
    assert "all-reduce" in compiled.as_text()
    assert jax.tree_util.tree_leaves(compiled.input_shardings)[0].spec[0] == "i"
    np.testing.assert_array_equal(
        np.asarray(compiled(*args)["total"]), np.full((8, 3), 16.0, np.float32)
    )


# -- inputs on other devices are moved, as jax.pmap moves them --------------------


def summed(v):
    return lax.psum(v, "i") + lax.axis_index("i")


EXPECTED_SUMMED = X.sum(axis=0) + np.arange(8, dtype=np.float32)[:, None]


def laid_out(devices, spec: PartitionSpec | None = None):
    spec = PartitionSpec("i") if spec is None else spec
    return jax.device_put(X, NamedSharding(Mesh(np.array(devices), ("i",)), spec))


@pytest.mark.parametrize("where", ["reversed", "one device", "half the devices"])
def test_committed_inputs_elsewhere_are_moved_with_a_note(where, caplog):
    devices = jax.devices()[:8]
    value = {
        "reversed": lambda: laid_out(devices[::-1]),
        "one device": lambda: jax.device_put(X, devices[3]),
        "half the devices": lambda: laid_out(devices[:4], PartitionSpec()),
    }[where]()
    f = pmapc.pmap(summed, axis_name="i")
    with caplog.at_level(logging.INFO, logger="pmapc"):
        np.testing.assert_array_equal(np.asarray(f(value)), EXPECTED_SUMMED)
        np.testing.assert_array_equal(np.asarray(f.lower(value).compile()(value)), EXPECTED_SUMMED)
    assert any("moved argument v" in record.getMessage() for record in caplog.records)


def test_devices_given_in_another_order_take_inputs_from_the_default_order(caplog):
    f = pmapc.pmap(
        lambda v: v * 2 + lax.axis_index("i"), axis_name="i", devices=jax.devices()[:8][::-1]
    )
    with caplog.at_level(logging.INFO, logger="pmapc"):
        result = f(laid_out(jax.devices()[:8]))
    np.testing.assert_array_equal(
        np.asarray(result), X * 2 + np.arange(8, dtype=np.float32)[:, None]
    )
    assert [shard.device for shard in result.addressable_shards] == jax.devices()[:8][::-1]


def test_inputs_in_place_are_not_moved(caplog):
    f = pmapc.pmap(summed, axis_name="i")
    value = laid_out(jax.devices()[:8])
    with caplog.at_level(logging.INFO, logger="pmapc"):
        f(value)
    assert not caplog.records
