"""Each hook pmapc has on JAX's implementation (lowering/jax_api.py, compiler/xla.py),
tested directly, so that a JAX release on which one stops working fails here by name
instead of degrading a message or a gradient somewhere else."""

from __future__ import annotations

import inspect
import os
import sys
import threading
import traceback

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax
from jax.sharding import AbstractMesh, AxisType, NamedSharding, PartitionSpec

import pmapc
import pmapc.api
import pmapc.lowering
from pmapc import ir
from pmapc.lowering import jax_api, jax_frames, jax_lowering, jax_structure, primitives

THIS_FILE = os.path.abspath(__file__)


def error_of(function, *args) -> Exception:
    """The error JAX raises tracing `function` with axis 'i' bound, with JAX's own
    frames in its traceback (as when pmapc traces a body inside an outer trace;
    JAX drops them from an error that leaves its outermost call)."""
    filtering = jax.config.jax_traceback_filtering
    jax.config.update("jax_traceback_filtering", "off")
    try:
        with pytest.raises(Exception) as info:
            jax.make_jaxpr(function, axis_env=[("i", 4)])(*args)
    finally:
        jax.config.update("jax_traceback_filtering", filtering)
    return info.value


# -- frames read for messages ---------------------------------------------------


@pytest.mark.parametrize(
    "collective",
    [
        lambda x: lax.psum(x, "nope"),
        lambda x: lax.axis_index("nope") + x,
        lambda x: lax.all_gather(x, "nope"),
    ],
    ids=["psum", "axis_index", "all_gather"],
)
def test_unbound_axis_name_reads_the_axis_from_jax_frames(collective):
    error = error_of(collective, np.ones(4, np.float32))
    assert isinstance(error, NameError)
    assert jax_frames.unbound_axis_name(error) == "nope"


def test_refused_index_groups_reads_the_call_from_jax_frames():
    error = error_of(
        lambda x: lax.psum(x, "i", axis_index_groups=[[0, 1], [1, 2]]), np.ones(4, np.float32)
    )
    assert isinstance(error, ValueError)
    refused = jax_frames.refused_index_groups(error)
    assert refused is not None
    assert refused.function == "psum"
    assert refused.axis_name in ("i", ("i",))  # as the user gave it, or as a tuple
    assert [list(group) for group in refused.index_groups] == [[0, 1], [1, 2]]
    assert jax_frames.raised_by_collective(error.__traceback__)


def test_an_error_outside_the_collectives_is_not_theirs():
    error = error_of(lambda x: x + np.ones(3), np.ones(4, np.float32))
    assert not jax_frames.raised_by_collective(error.__traceback__)
    assert jax_frames.refused_index_groups(error) is None


def test_user_line_of_an_equation_is_the_line_that_made_it():
    def body(x):
        return lax.psum(x, "i")

    line = inspect.getsourcelines(body)[1] + 1
    closed = jax.make_jaxpr(body, axis_env=[("i", 4)])(np.ones(4, np.float32))
    assert jax_frames.user_line(closed.eqns[0]) == (THIS_FILE, line)


def test_lowered_user_line_names_the_call_inside_a_map():
    def body(x):
        return lax.psum(x, ("i", "i"))  # JAX refuses an axis named twice

    line = inspect.getsourcelines(body)[1] + 1
    with pytest.raises(ValueError) as info:
        pmapc.pmap(body, axis_name="i").lower(np.ones((4, 3), np.float32))
    assert f"{THIS_FILE}:{line}" in str(info.value)


def test_source_locations_name_the_users_file_not_pmapcs():
    assert jax_frames.is_user_file(THIS_FILE)
    assert not jax_frames.is_user_file(jax_api.__file__)
    assert not jax_frames.is_user_file(jax.__file__)


@pytest.mark.parametrize(
    ("kind", "collective", "shape", "params"),
    [
        (
            "psum_scatter",
            lambda x: lax.psum_scatter(x[None, :6], "i", scatter_dimension=-1, tiled=True),
            (1, 6),
            {"scatter_dimension": 1, "tiled": True, "axis_index_groups": None},
        ),
        (
            "psum_scatter",
            lambda x: lax.psum_scatter(x[:3], "i", axis_index_groups=[[0, 1], [2, 3]]),
            (3,),
            {"scatter_dimension": 0, "tiled": False, "axis_index_groups": ((0, 1), (2, 3))},
        ),
        (
            "all_to_all",
            lambda x: lax.all_to_all(x[None, :6], "i", -1, 0, tiled=True),
            (1, 6),
            {"split_axis": 1, "concat_axis": 0, "tiled": True, "axis_index_groups": None},
        ),
        (
            "all_to_all",
            lambda x: lax.all_to_all(x[:6], "i", 0, 0),
            (6,),
            {"split_axis": 0, "concat_axis": 0, "tiled": False, "axis_index_groups": None},
        ),
    ],
    ids=["psum_scatter", "psum_scatter_groups", "all_to_all", "all_to_all_untiled"],
)
def test_refused_shape_reads_the_call_from_jax_frames(kind, collective, shape, params):
    error = error_of(collective, np.ones(8, np.float32))
    assert isinstance(error, ValueError)
    assert jax_frames.refused_shape(error) == jax_frames.RefusedShape(kind, ("i",), shape, params)


def test_an_error_outside_the_shape_checks_is_no_refused_shape():
    error = error_of(lambda x: lax.psum(x, "i", axis_index_groups=[[0, 1], [1, 2]]), np.ones(4))
    assert jax_frames.refused_shape(error) is None


# -- frames hidden from tracebacks --------------------------------------------------


def frames_of(error: BaseException) -> list[str]:
    return [frame.filename for frame in traceback.extract_tb(error.__traceback__)]


def package_files(frames: list[str]) -> list[str]:
    directories = [os.path.join(os.path.abspath(d), "") for d in pmapc.lowering.__path__]
    directories += [os.path.join(os.path.abspath(d), "") for d in pmapc.__path__]
    return [f for f in frames if os.path.abspath(f).startswith(tuple(directories))]


def unbound_axis_error() -> pmapc.AxisError:
    with pytest.raises(pmapc.AxisError) as info:
        pmapc.pmap(lambda v: lax.psum(v, "nope"), axis_name="i")(np.ones((4, 3), np.float32))
    return info.value


def test_jax_filters_pmapcs_frames_from_an_error_that_leaves_a_map_call():
    """pmapc's directories are among JAX's traceback exclusions, and a map's call is a
    boundary at which JAX filters them (pmapc's frames above JAX's jit included)."""
    frames = frames_of(unbound_axis_error())
    assert THIS_FILE in frames
    assert package_files(frames) == []


def test_jax_keeps_pmapcs_frames_with_traceback_filtering_off():
    filtering = jax.config.jax_traceback_filtering
    jax.config.update("jax_traceback_filtering", "off")
    try:
        frames = frames_of(unbound_axis_error())
    finally:
        jax.config.update("jax_traceback_filtering", filtering)
    assert os.path.abspath(pmapc.api.__file__) in frames
    assert any(f.endswith("trace.py") for f in package_files(frames))


# -- the all_to_all transpose ---------------------------------------------------


N = 4


def all_to_all_in_numpy(x: np.ndarray, split: int, concat: int) -> np.ndarray:
    """Untiled all_to_all over N devices: out[d] stacks, along `concat`, every
    source j's block x[j] taken at index d along `split`."""
    return np.stack(
        [np.stack([np.take(x[j], d, axis=split) for j in range(N)], axis=concat) for d in range(N)]
    )


def untiled_all_to_all_gradient(split: int, concat: int):
    """(gradient function, its value in numpy) of sum(all_to_all(x) * w) over a map,
    with split != concat: JAX's own transpose rule fails its type check on it.
    all_to_all permutes, so the gradient is w sent back along the permutation."""
    shape = (N, N, 3) if split == 0 else (N, 3, N)
    positions = all_to_all_in_numpy(np.arange(np.prod(shape)).reshape(shape), split, concat)
    w = np.arange(positions.size, dtype=np.float32).reshape(positions.shape) % 7
    expected = np.empty(np.prod(shape), np.float32)
    expected[positions.ravel()] = w.ravel()

    def gradient(x):
        # A new map each call: JAX traces and transposes it anew (not from its caches).
        mapped = pmapc.pmap(lambda v: lax.all_to_all(v, "i", split, concat, tiled=False), "i")
        return jax.grad(lambda v: (mapped(v) * w).sum())(x)

    return gradient, np.ones(shape, np.float32), expected.reshape(shape)


@pytest.mark.parametrize(("split", "concat"), [(0, 1), (1, 0)])
def test_gradient_of_an_untiled_all_to_all_takes_pmapcs_rule(split, concat):
    gradient, x, expected = untiled_all_to_all_gradient(split, concat)
    np.testing.assert_array_equal(np.asarray(gradient(x)), expected)


def test_the_rule_stays_installed_in_jaxs_table_and_jaxs_rule_runs_outside_maps():
    assert jax_api._ad_public.primitive_transposes[lax.all_to_all_p] is (
        jax_api.ALL_TO_ALL_TRANSPOSE
    )

    # Outside a map body JAX's own rule runs: a tiled all_to_all under a named
    # jax.vmap, differentiated by JAX alone.
    def loss(x):
        y = jax.vmap(lambda v: lax.all_to_all(v, "i", 0, 0, tiled=True), axis_name="i")(x)
        return (y * np.arange(16, dtype=np.float32).reshape(4, 4)).sum()

    x = np.zeros((4, 4), np.float32)
    gradient = np.asarray(jax.grad(loss)(x))
    # Tiled all_to_all over 4 of 4 elements is a transpose of (device, chunk).
    np.testing.assert_array_equal(gradient, np.arange(16, dtype=np.float32).reshape(4, 4).T)


def test_threads_differentiating_at_once_all_get_pmapcs_rule():
    """Each thread traces, transposes and compiles maps of its own while the others
    do: the rule is per thread (swapping JAX's table around each backward pass let
    threads restore each other's rule), and so are a pass's edit recordings."""
    gradient, x, expected = untiled_all_to_all_gradient(0, 1)
    failures: list[BaseException] = []

    def differentiate():
        try:
            for _ in range(10):
                np.testing.assert_array_equal(np.asarray(gradient(x)), expected)
        except BaseException as error:  # reported below, in the test's thread
            failures.append(error)

    threads = [threading.Thread(target=differentiate) for _ in range(3)]
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads often, inside backward passes too
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        sys.setswitchinterval(interval)
    assert not failures, failures[0]
    assert jax_api._map_backward_passes.depth == 0


# -- tracing a body, a map's structure --------------------------------------------


def test_trace_flat_makes_what_make_jaxpr_makes():
    """A body that closes over an array and a tracer of the enclosing trace, multiplies
    by a Python scalar and sums over a bound axis: `trace_flat` (which stages no
    jit around it) makes the jaxpr `jax.make_jaxpr` makes, constants included."""
    outer = np.arange(3, dtype=np.float32)

    def enclosing(x):
        def body(y):
            return [lax.psum(y * 2.0 + outer + x, "i")]

        avals = [jax_api.ShapedArray((3,), np.dtype(np.float32))]
        ours = jax_api.trace_flat(body, avals, [("i", 4)], "a test body")
        theirs = jax.make_jaxpr(body, axis_env=[("i", 4)])(jax.ShapeDtypeStruct((3,), np.float32))
        assert str(ours) == str(theirs)
        assert len(ours.consts) == len(theirs.consts) == 2
        assert [jax_api.is_tracer(c) for c in ours.consts] == [
            jax_api.is_tracer(c) for c in theirs.consts
        ]
        return x

    jax.make_jaxpr(enclosing)(np.ones(3, np.float32))


def test_one_equation_makes_what_tracing_the_bind_makes():
    """The jaxpr an outermost map is lowered from: its equation as tracing a call that
    binds it records it (the primitive, parameters, abstract values, effects)."""
    avals = [jax_api.ShapedArray((4, 3), np.dtype(np.float32))]

    def bind(x):
        return [lax.cumsum_p.bind(x, axis=1, reverse=False)]

    ours = jax_lowering.one_equation(lax.cumsum_p, {"axis": 1, "reverse": False}, avals, "a test")
    theirs = jax_api.trace_flat(bind, avals, [], "a test")
    assert str(ours) == str(theirs)
    assert ours.effects == theirs.effects and not ours.consts


def test_a_literal_is_hoisted_to_a_new_argument():
    """What lowering/structure.py builds a shared map from: literals, new variables,
    a jaxpr with other arguments, hashable source locations and contexts."""
    closed = jax.make_jaxpr(lambda y: y * 0.5)(np.ones(3, np.float32))
    (eqn,) = closed.jaxpr.eqns
    literal = eqn.invars[1]
    assert jax_structure.is_literal(literal) and not jax_structure.is_literal(eqn.invars[0])
    hoisted = jax_structure.new_var(literal.aval)
    jaxpr = jax_structure.with_operands(
        closed.jaxpr,
        [hoisted, *closed.jaxpr.invars],
        [eqn.replace(invars=[eqn.invars[0], hoisted])],
    )
    (result,) = jax.core.eval_jaxpr(jaxpr, [], np.float32(4.0), np.ones(3, np.float32))
    np.testing.assert_array_equal(np.asarray(result), np.full(3, 4.0, np.float32))
    hash((eqn.source_info.traceback, eqn.source_info.name_stack, eqn.ctx))


# -- jit inlining, result handlers ------------------------------------------------


def test_make_jaxpr_of_a_map_shows_the_map_not_a_jit():
    f = pmapc.pmap(lambda x: lax.psum(x, "i"), axis_name="i")
    closed = jax.make_jaxpr(f)(np.ones((4, 3), np.float32))
    assert [eqn.primitive.name for eqn in closed.eqns][-1] == "pmapc_map"


@pytest.mark.parametrize("target", ["partitions", "replicas"])
def test_results_of_both_forms_reach_the_host(target):
    x = np.arange(4 * 3, dtype=np.float32).reshape(4, 3)
    f = pmapc.pmap(lambda v: lax.psum(v, "i") + lax.axis_index("i"), axis_name="i")
    compiled = pmapc.lower(f, x, target=target).compile()
    (result,) = jax.tree_util.tree_leaves(compiled(x))
    expected = x.sum(axis=0) + np.arange(4)[:, None]
    np.testing.assert_array_equal(np.asarray(result), expected)
    np.testing.assert_array_equal(np.asarray(result.addressable_shards[1].data)[0], expected[1])


def test_a_custom_derivatives_lowering_runs_no_rule():
    """The structure leaves a custom derivative's rules out (`jax_structure.lowered_params`)
    because JAX lowers its equation as its primal function: rules that fail whenever
    they run do not stop a jit of them from lowering, compiling and running."""

    def refused(*_):
        raise AssertionError("a rule ran")

    @jax.custom_jvp
    def tangent_ruled(x):
        return jax.numpy.sin(x)

    tangent_ruled.defjvp(refused)

    @jax.custom_vjp
    def cotangent_ruled(x):
        return jax.numpy.cos(x)

    cotangent_ruled.defvjp(refused, refused)

    x = np.linspace(-1, 1, 4, dtype=np.float32)
    closed = jax.make_jaxpr(lambda v: cotangent_ruled(tangent_ruled(v)))(x)
    for eqn in closed.eqns:
        assert set(eqn.params) - set(jax_structure.lowered_params(eqn)), eqn.primitive
    result = jax.jit(lambda v: cotangent_ruled(tangent_ruled(v))).lower(x).compile()(x)
    np.testing.assert_allclose(np.asarray(result), np.cos(np.sin(x)), rtol=1e-6)


# -- the devices of a program ----------------------------------------------------------


def nest_over(axes):
    inner = pmapc.pmap(lambda v, w: lax.psum(jax.numpy.sin(v) * w, axes[1]), axis_name=axes[1])
    return pmapc.pmap(inner, axis_name=axes[0])


def test_jit_reads_the_devices_from_the_maps_placement_not_from_constraints():
    """`jax.jit` finds the mesh's devices in the jaxpr among the outermost map's
    parameters (`jax_api.placement_jaxpr`): no sharding constraint reaches the module,
    and the program runs on the mesh's 8 devices."""
    x = np.arange(8 * 3, dtype=np.float32).reshape(2, 4, 3)
    lowered = jax.jit(nest_over(("data", "model"))).lower(x, x)
    names = {op.name for op in ir.walk(lowered.compiler_ir("stablehlo").operation)}
    assert "sdy.manual_computation" in names
    assert "sdy.sharding_constraint" not in names
    result = lowered.compile()(x, x)
    assert result.sharding.device_set == set(jax.devices()[:8])
    want = np.broadcast_to((np.sin(x) * x).sum(1, keepdims=True), x.shape)
    np.testing.assert_allclose(np.asarray(result), want, rtol=1e-6)


def test_an_eager_map_puts_its_operands_on_its_mesh():
    """JAX's eager `reshard` of a gradient's scalar cotangent leaves an array on one
    device whose abstract value names another program's mesh; `jax.jit` of the map
    would rebuild the sharding XLA chose for it on that mesh, where a [2, 4] shape
    split over a (2, 4) mesh does not fit a (4, 2) one. The eager map first puts it on
    its own mesh (`jax_api.compiled_impl`)."""
    x = np.arange(8, dtype=np.float32).reshape(2, 4)
    nest = nest_over(("d", "m"))
    closed = jax.make_jaxpr(nest)(x, x)
    (eqn,) = [e for e in closed.eqns if e.primitive is primitives.map_p]
    on_mesh = nest(x, np.ones_like(x))  # a result of the map: committed to its mesh
    other = AbstractMesh((4, 2), ("k", "k_1"), axis_types=(AxisType.Auto,) * 2)
    stale = jax.sharding.reshard(jax.numpy.asarray(x), NamedSharding(other, PartitionSpec()))
    (result,) = primitives.map_p.bind(on_mesh, stale, **eqn.params)
    sines = np.broadcast_to(np.sin(x).sum(1, keepdims=True), x.shape)
    want = np.broadcast_to((np.sin(sines) * x).sum(1, keepdims=True), x.shape)
    np.testing.assert_allclose(np.asarray(result), want, rtol=1e-6)


# -- MLIR contexts --------------------------------------------------------------------


def test_pmapc_rewrites_in_a_context_of_its_own_and_leaves_jaxs_as_it_was():
    """From JAX 0.11 on, make_ir_context hands one context per thread to several
    lowerings in turn; pmapc reads JAX's lowering into a context of its own."""
    from jax.interpreters import mlir

    f = pmapc.pmap(lambda v: lax.psum(v, "i"), axis_name="i")
    lowered = f.lower(np.ones((4, 3), np.float32))
    jaxs = mlir.make_ir_context()  # this thread's, reused from 0.11 on
    assert lowered.compilation.module.context != jaxs
    assert not jaxs.allow_unregistered_dialects
    # Every op pmapc builds is registered in its contexts from the start.
    built = ("func.func", "func.call", "func.return", "sdy.mesh", "sdy.manual_computation")
    assert all(ir.make_context().is_registered_operation(name) for name in built)
    assert not ir.make_context().allow_unregistered_dialects


def test_a_program_on_a_mesh_is_lowered_as_jaxs_shard_map_lowers_it():
    """What `jax_lowering.lower_on_mesh` rests on: JAX's rule lowers a body on the blocks
    with the parameters `jax.shard_map` stages, to the manual computation a traced
    `shard_map` lowers to."""
    mesh = jax.sharding.Mesh(np.array(jax.devices()[:8]).reshape(2, 4), ("data", "model"))
    spec = PartitionSpec("data", "model")
    x = np.arange(2 * 4 * 3, dtype=np.float32).reshape(2, 4, 3)

    def body(y):
        return lax.psum(y * 2.0, "model")

    on_blocks = jax.make_jaxpr(body, axis_env=[("data", 2), ("model", 4)])(
        jax.ShapeDtypeStruct((1, 1, 3), np.float32)
    )
    on_mesh = jax_api.Primitive("pmapc_test_on_mesh")
    on_mesh.multiple_results = True
    on_mesh.def_abstract_eval(lambda aval: [aval])

    def rule(ctx, operand):
        return jax_lowering.lower_on_mesh(ctx, [operand], on_blocks, mesh, [spec], [spec])

    jax_lowering.register_lowering(on_mesh, rule, cacheable=False)
    ours = jax.jit(lambda v: on_mesh.bind(v)[0]).lower(x).compiler_ir("stablehlo")
    theirs = (
        jax.jit(jax.shard_map(body, mesh=mesh, in_specs=spec, out_specs=spec, check_vma=False))
        .lower(x)
        .compiler_ir("stablehlo")
    )

    def manual_computation(module):
        (op,) = [op for op in ir.walk(ir.functions(module)["main"], ("sdy.manual_computation",))]
        return op

    assert str(manual_computation(ours)) == str(manual_computation(theirs))
    got = jax.jit(lambda v: on_mesh.bind(v)[0], out_shardings=NamedSharding(mesh, spec))(x)
    np.testing.assert_allclose(
        np.asarray(got), np.broadcast_to(2 * x.sum(1, keepdims=True), x.shape)
    )


@pytest.mark.parametrize("size", [3, 512], ids=["embedded", "hoisted"])
@pytest.mark.parametrize("table_of", [np.asarray, jnp.asarray], ids=["numpy", "jax"])
@pytest.mark.parametrize("main", [True, False], ids=["main", "private"])
def test_a_function_is_lowered_as_jaxs_lower_jaxpr_to_fun_lowers_it(
    main, table_of, size, jaxpr_constants
):
    """`jax_lowering.lower_function`, pmapc's builder of the functions of its IR, makes
    the function JAX's `lower_jaxpr_to_fun` makes of the same jaxpr, locations
    included: closed-over constants (numpy's and JAX's arrays; a large one is hoisted
    under `jax_use_simplified_jaxpr_constants`, and found again by the key of the
    running release), a typed PRNG key, a call, several results."""
    table = table_of(np.arange(size, dtype=np.float32))

    @jax.jit
    def inner(v):
        return jnp.cumsum(v) * table

    def f(v, key):
        return inner(jnp.sin(v)) + table, jax.random.key_data(key), v.sum()

    closed = jax.make_jaxpr(f)(np.ones(size, np.float32), jax.random.key(0))
    # The table is a constant of the closed jaxpr (with the flag on, before 0.12.1, a
    # literal of its equations instead).
    assert closed.consts or jaxpr_constants, closed
    texts = {}
    probe = jax_api.Primitive("pmapc_test_functions")
    probe.def_abstract_eval(lambda aval: aval)

    def rule(ctx, operand):
        for who, build in (
            ("pmapc", jax_lowering.lower_function),
            ("jax", jax_lowering.jaxs_function),
        ):
            module_context = jax_lowering.inner_module_context(ctx, ())
            with ir.building(module_context.module):
                build(module_context, "body", closed, main)
            texts[who] = ir.print_module(module_context.module, debug_info=True)
        return [operand]

    jax_lowering.register_lowering(probe, rule, cacheable=False)
    jax.jit(probe.bind).lower(np.ones(2, np.float32))
    assert "loc(" in texts["pmapc"] and "test_jax_hooks.py" in texts["pmapc"]
    assert texts["pmapc"] == texts["jax"]


def test_a_map_inside_jit_is_rewritten_in_the_enclosing_lowerings_context(monkeypatch):
    """A new map structure inside `jax.jit` makes no MLIR context: neither one of
    pmapc's (its module is rewritten where JAX's lowering built it, trace.map_ir)
    nor another of JAX's (0.10 made one per lowering; from 0.11 on a thread reuses
    one for 10 lowerings, and the map's inner lowering is not one of them); JAX's
    context keeps its settings."""
    from jax._src.interpreters import mlir as jax_mlir

    made = {"pmapc": 0, "jax": 0}

    def counted(who, make):
        return lambda: made.__setitem__(who, made[who] + 1) or make()

    monkeypatch.setattr(ir, "make_context", counted("pmapc", ir.make_context))
    monkeypatch.setattr(jax_mlir, "make_ir_context", counted("jax", jax_mlir.make_ir_context))
    x = np.arange(2 * 4 * 7, dtype=np.float32).reshape(2, 4, 7)  # a shape of its own

    def body(v):
        return pmapc.pmap(lambda w: lax.psum(w * 3.0, "model"), axis_name="model")(v)

    out = jax.jit(pmapc.pmap(body, axis_name="data"))(x)
    want = np.broadcast_to((3 * x).sum(1, keepdims=True), x.shape)
    np.testing.assert_allclose(np.asarray(out), want, rtol=1e-6)
    assert made == {"pmapc": 0, "jax": 1}  # the jit's own
    assert not jax_mlir.make_ir_context().allow_unregistered_dialects


# A module in JAX's context whose pipeline breaks all of its 64 functions at once,
# each then verified on a thread of JAX's pool: the error must come back, 20 times.
_FAILING_IN_JAXS_CONTEXT = "\n".join(
    [
        "from jax._src.interpreters import mlir",
        "from pmapc import ir",
        "context = mlir.make_ir_context()",
        "function = ('func.func private @f{i}(%a: tensor<4xf32>) -> tensor<4xf32> {{'",
        "    ' %0 = stablehlo.add %a, %a : tensor<4xf32> return %0 : tensor<4xf32> }}')",
        "text = 'module {' + ''.join(function.format(i=i) for i in range(64)) + '}'",
        "for _ in range(20):",
        "    module = ir.parse_module(text, context)",
        "    def retype():",
        "        with ir.building(module):",
        "            for f in module.body.operations:",
        "                add = ir.function_entry_block(f).operations[0]",
        "                f32 = ir.element_type_of(add.result.type)",
        "                add.result.set_type(ir.tensor_type([5], f32))",
        "    manager = ir.PassManager(context, ir.Instrumentation(), verify_each=True)",
        "    manager.add_upstream('func.func(cse)')",
        "    manager.add_python(retype, 'Retype', 'retype', 'break every function')",
        "    try:",
        "        manager.run(module)",
        "        raise SystemExit('the broken module passed')",
        "    except ir.InvalidIR as error:",
        "        assert 'requires the same shape' in str(error), error",
        "print('raised')",
    ]
)


def test_a_verifier_error_in_jaxs_context_is_raised_not_a_deadlock():
    """What `map_ir` rests on: MLIR's verifier errors on the threads of JAX's pool
    reach pmapc as an error (parsing invalid IR is what deadlocks, and pmapc parses
    what it did not build in its own contexts only). A child process, so that a
    deadlock fails by the timeout."""
    import subprocess

    done = subprocess.run(
        [sys.executable, "-c", _FAILING_IN_JAXS_CONTEXT],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "JAX_PLATFORMS": "cpu"},
    )
    assert done.returncode == 0 and done.stdout.strip() == "raised", done.stderr[-2000:]


# -- pytree and key helpers -----------------------------------------------------------


def test_prefix_error_is_jaxs_wording():
    text = jax_api.prefix_error(((0, 0), 0), ((np.ones(3),), {}), "pmap in_axes")
    assert text.startswith("pytree structure error: different lengths of tuple at key path")
    assert "pmap in_axes[0]" in text


def test_pytree_differences_name_the_path_and_the_reason():
    given = jax.tree_util.tree_structure(((1,), {}))
    compiled = jax.tree_util.tree_structure(((1, 2), {}))
    ((path, _, _, explanation),) = jax_api.pytree_differences(given, compiled)
    assert path[0].idx == 0 and "lengths" in explanation


def test_key_data_wraps_back_into_keys_of_the_same_implementation():
    keys = jax.random.split(jax.random.key(3), 4)
    assert jax_api.is_key_dtype(keys.dtype) and not jax_api.is_key_dtype(np.float32)
    again = jax_api.wrap_key_data(jax.random.key_data(keys), keys.dtype)
    assert again.dtype == keys.dtype
    np.testing.assert_array_equal(jax.random.key_data(again), jax.random.key_data(keys))


# -- JAX inside a map -------------------------------------------------------------


def test_host_callbacks_of_a_lowering_are_the_ones_its_ops_index():
    def f(x):
        jax.debug.callback(lambda v: None, x)
        return jax.pure_callback(np.sin, jax.ShapeDtypeStruct(x.shape, x.dtype), x)

    lowered = jax.jit(f).trace(np.ones(3, np.float32)).lower()
    callbacks = jax_lowering.host_callbacks(lowered)
    assert len(callbacks) == 2 and all(callable(c) for c in callbacks)


def test_ordered_effects_are_told_from_unordered_ones():
    def ordered(x):
        jax.debug.print("{}", x, ordered=True)
        return x

    def unordered(x):
        jax.debug.print("{}", x)
        return x

    x = np.ones(3, np.float32)
    assert jax_api.ordered_effects(jax.make_jaxpr(ordered)(x).jaxpr)
    assert not jax_api.ordered_effects(jax.make_jaxpr(unordered)(x).jaxpr)


def test_checkify_finds_pmapcs_rule_for_the_map():
    from jax._src import checkify as jax_checkify

    from pmapc.lowering.primitives import map_p

    assert map_p in jax_checkify.error_checks


def test_async_collectives_pair_each_start_with_its_synchronous_primitive():
    starts, dones = jax_api.async_collectives()
    by_name = {start.name: sync.name for start, sync in starts.items()}
    assert by_name["ppermute_start"] == "ppermute"
    assert by_name["all_gather_start"] == "all_gather"
    assert {p.name for p in dones} >= {"ppermute_done", "all_gather_done"}


def test_invariant_collectives_are_found_by_their_primitives_names():
    names = {p.name: c.kind for p, c in jax_api.invariant_collectives().items()}
    assert names["psum_invariant"] == "psum"
    assert names["all_gather_invariant"] == "all_gather"


def test_pbroadcast_takes_an_axis_name_string_only_inside_map_bodies():
    x = np.ones(3, np.float32)
    with pytest.raises(NameError, match="unbound axis name: m"):
        jax.make_jaxpr(lambda v: lax.pbroadcast(v, "model", 0), axis_env=[("model", 4)])(x)
    with jax_api.tracing_map_body():
        jaxpr = jax.make_jaxpr(lambda v: lax.pbroadcast(v, "model", 0), axis_env=[("model", 4)])(x)
    assert [eqn.primitive for eqn in jaxpr.eqns] == [jax_api.PBROADCAST]


def test_called_collective_names_the_function_and_the_users_line():
    error = error_of(lambda x: lax.pcast(x, "i", to="varying"), np.ones(4, np.float32))
    function, where = jax_frames.called_collective(error.__traceback__)
    assert function == "pcast"
    assert where is not None and where[0] == THIS_FILE
