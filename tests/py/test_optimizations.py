"""Each optimization pass fires on the program it targets, and the answer stays right.

Every program here runs through the default pipeline and is compared with
the nested-vmap oracle; the IR after the pass proves the pass changed what it
should.
"""

import jax
import numpy as np
import pytest

import pmapc
from pmapc.passes import fold_reshapes


def vmap_nest(outer_body, inner_body, outer_axes=("data", "model"), **inner_kw):
    """The nested-vmap oracle of a two-level program."""

    def outer(x):
        inner = jax.vmap(inner_body, axis_name=outer_axes[1], **inner_kw)
        return outer_body(inner, x)

    return jax.vmap(outer, axis_name=outer_axes[0])


def pmapc_nest(outer_body, inner_body, outer_axes=("data", "model"), **inner_kw):
    def outer(x):
        inner = pmapc.pmap(inner_body, axis_name=outer_axes[1], **inner_kw)
        return outer_body(inner, x)

    return pmapc.pmap(outer, axis_name=outer_axes[0])


def stage_changed(lowered, before, after):
    return lowered.as_text(before) != lowered.as_text(after)


def check_against_oracle(outer_body, inner_body, x, **inner_kw):
    program = pmapc_nest(outer_body, inner_body, **inner_kw)
    got = program(x)
    want = vmap_nest(outer_body, inner_body, **inner_kw)(x)
    jax.tree_util.tree_map(
        lambda g, w: np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-6), got, want
    )
    return program.lower(x)


X = np.arange(2 * 4 * 8, dtype=np.float32).reshape(2, 4, 8) / 7


def test_flatten_maps_splits_the_entry_over_every_level():
    """An argument each level maps straight into the next arrives split over both
    levels, and a result each returns straight leaves so: nothing for sink-slices and
    sink-gathers to do."""
    lowered = check_against_oracle(lambda inner, x: inner(x), lambda y: y * 2 + 1, X)
    split = 'tensor<1x1x8xf32> {pmapc.split = [["data"], ["model"], []]}'
    assert split in lowered.as_text("flatten-maps")
    assert "dynamic_slice" not in lowered.as_text("flatten-maps")
    assert "all_gather" not in lowered.as_text("flatten-maps")
    assert not stage_changed(lowered, "fold-gather-slice", "sink-slices")
    assert not stage_changed(lowered, "sink-slices", "sink-gathers")


def test_sink_slices_sends_each_device_its_block():
    """Through a `jax.jit` call the inner map's operand is no entry argument to
    flatten-maps: it slices it, and sink-slices splits the argument."""
    lowered = check_against_oracle(
        lambda inner, x: jax.jit(inner)(x) * 2, lambda y: jax.lax.psum(y, "model"), X
    )
    assert stage_changed(lowered, "fold-gather-slice", "sink-slices")
    assert 'tensor<1x1x8xf32> {pmapc.split = [["data"], ["model"], []]}' in lowered.as_text()
    assert "dynamic_slice" not in lowered.as_text()


def test_sink_gathers_returns_blocks_without_all_gather():
    lowered = check_against_oracle(
        lambda inner, x: jax.jit(inner)(x), lambda y: jax.lax.psum(y, "data") + 1, X
    )
    assert stage_changed(lowered, "sink-slices", "sink-gathers")
    final = lowered.as_text()
    assert "all_gather" not in final
    assert (
        '-> (tensor<1x1x8xf32> {jax.result_info = "result", '
        'pmapc.split = [["data"], ["model"], []]})'
    ) in final


def test_sink_gathers_moves_past_scaling_by_a_constant():
    lowered = check_against_oracle(
        lambda inner, x: inner(x) * 0.5 + 3.0, lambda y: jax.lax.psum(y, "data"), X
    )
    final = lowered.as_text()
    assert "all_gather" not in final
    assert (
        '-> (tensor<1x1x8xf32> {jax.result_info = "result", '
        'pmapc.split = [["data"], ["model"], []]})'
    ) in final


def test_sink_gathers_moves_past_a_comparison_keeping_its_direction():
    lowered = check_against_oracle(
        lambda inner, x: inner(x) > 2.0, lambda y: jax.lax.psum(y, "data"), X
    )
    final = lowered.as_text()
    assert "all_gather" not in final
    assert (
        '-> (tensor<1x1x8xi1> {jax.result_info = "result", '
        'pmapc.split = [["data"], ["model"], []]})'
    ) in final


def test_sink_gathers_moves_below_a_psum_over_the_outer_axis():
    lowered = check_against_oracle(
        lambda inner, x: jax.lax.psum(inner(x), "data"), lambda y: y * 2, X
    )
    assert "all_gather" not in lowered.as_text()


def test_sink_gathers_keeps_gather_for_a_varying_operand():
    lowered = check_against_oracle(lambda inner, x: inner(x) + x, lambda y: y * 2, X)
    assert "all_gather" in lowered.as_text()


def test_sink_gathers_with_inner_out_axes_1():
    lowered = check_against_oracle(lambda inner, x: inner(x), lambda y: y * 3, X, out_axes=1)
    assert "all_gather" not in lowered.as_text()


def test_fold_gather_slice_cancels_between_two_inner_maps():
    def outer_body(inner, x):
        return jax.lax.psum(inner(inner(x)), "data")  # two inner maps in a row

    lowered = check_against_oracle(outer_body, lambda y: jax.lax.pmax(y, "data") * 2, X)
    assert stage_changed(lowered, "flatten-maps", "fold-gather-slice")
    assert lowered.as_text("fold-gather-slice").count("pmapc.all_gather") == 1


def test_combine_all_reduces_merges_gradient_sums():
    def inner_body(y):
        a = jax.lax.psum(y * 2, "data")
        b = jax.lax.psum(y.sum(), "data")
        return a + b

    lowered = check_against_oracle(lambda inner, x: inner(x), inner_body, X)
    assert stage_changed(lowered, "lower-collectives", "combine-all-reduces")
    combined = lowered.as_text("combine-all-reduces")
    assert combined.count("stablehlo.all_reduce") == 1
    assert "(tensor<8xf32>, tensor<f32>) -> (tensor<8xf32>, tensor<f32>)" in combined
    # The partition form splits it again (XLA's manual regions take one operand per
    # all-reduce; XLA combines them after partitioning).
    assert lowered.as_text().count("stablehlo.all_reduce") == 2


def test_fold_reshapes_computes_on_the_blocks_as_they_arrive():
    """flatten-maps drops each map's unit dimension from a device's block and gives it
    back at the result; fold-reshapes moves the squeeze below the scaling and the
    psum to the reshape that gives the dimensions back, and both go, inside
    `jax.jit` too (XLA compiles the module sooner)."""

    def inner_body(y):
        return jax.lax.psum(y * 3.0, "model") + 1.0

    lowered = check_against_oracle(lambda inner, x: inner(x), inner_body, X)
    assert "stablehlo.reshape" in lowered.as_text("to-partitions")
    assert "stablehlo.reshape" not in lowered.as_text("fold-reshapes")
    assert "(tensor<1x1x8xf32>) -> tensor<1x1x8xf32>" in lowered.as_text("fold-reshapes")
    program = pmapc_nest(lambda inner, x: inner(x), inner_body)
    assert "stablehlo.reshape" not in jax.jit(program).lower(X).as_text()


@pytest.mark.parametrize("psums", [4, 200])
def test_fold_reshapes_lifts_only_where_it_pays(psums):
    """A short chain on a block is lifted and its squeeze and reshape go; a long one
    (more ops than `OPS_PER_SQUEEZE`) keeps them: lifting it would cost fold-reshapes
    in proportion to the chain and save XLA one reshape pair. Both compute what
    nested vmap does."""

    def inner_body(y):
        for index in range(psums):
            y = jax.lax.psum(y, "model" if index % 2 else "data") * 0.5
        return y

    budget = fold_reshapes.OPS_PER_SQUEEZE
    assert 2 * psums < budget or 2 * psums > 2 * budget  # 2 ops a step, 1 or 2 squeezes
    lowered = check_against_oracle(lambda inner, x: inner(x), inner_body, X)
    folded = lowered.as_text("fold-reshapes")
    lifted = 2 * psums < budget
    assert ("stablehlo.reshape" in folded) != lifted
    on_blocks = "}) : (tensor<1x1x8xf32>) -> tensor<1x1x8xf32>" in folded
    on_squeezed = "}) : (tensor<8xf32>) -> tensor<8xf32>" in folded
    assert (on_blocks, on_squeezed) == (lifted, not lifted)


def test_three_levels_fully_split_in_and_out():
    x = np.arange(2 * 2 * 2 * 3, dtype=np.int32).reshape(2, 2, 2, 3)

    def level3(z):
        return jax.lax.psum(z, ("a", "c")) + jax.lax.axis_index("b")

    def build(mapper):
        def level2(y):
            return mapper(level3, "c")(y)

        def level1(v):
            return mapper(level2, "b")(v)

        return mapper(level1, "a")

    got = build(lambda f, name: pmapc.pmap(f, axis_name=name))
    want = build(lambda f, name: jax.vmap(f, axis_name=name))
    np.testing.assert_array_equal(np.asarray(got(x)), np.asarray(want(x)))
    final = got.lower(x).as_text()
    assert '{pmapc.split = [["a"], ["b"], ["c"], []]}' in final
    assert "all_gather" not in final and "dynamic_slice" not in final
