"""The adapter over JAX's internals: tracing, primitives and their rules, jaxprs.

pmapc traces bodies to the jaxprs `jax.make_jaxpr` makes (`trace_flat`),
defines its map primitive with `jax.extend.core.Primitive`, and lowers with
`jax.jit(...).trace(...).lower(...)`; what it needs beyond public JAX is
imported from JAX in four files and nowhere else, one area each:

    jax_api.py        tracing, the collective primitives, the map's autodiff,
                      batching and checkify rules, jaxpr helpers, folding
    jax_lowering.py   lowering to MLIR: rules, parameters, contexts
    jax_frames.py     the user's lines and JAX's refusals, read from frames
    jax_structure.py  what a map's structure reads of jaxprs (lowering/structure.py)

pmapc runs on every JAX from 0.10.2 to 0.12 (pyproject.toml); where the two ends
differ, the choice is made here (`SINCE_0_11`), from JAX's public modules where
the running release exports a name (`jax.extend.core`, `jax.interpreters.*`)
and from the private ones otherwise. Each hook on JAX's implementation (frames
read for messages, pmapc's directories among the frames JAX's traceback
filtering hides, the all_to_all transpose rule, the jit inlining mode, tracing
a body without a jit, the jaxpr surgery of a shared map; in jax_lowering.py, a map's
module built in the enclosing lowering's context, its functions as `lower_jaxpr_to_fun`
builds them, a program put on a mesh by `shard_map`'s rule, one equation's jaxpr built
without a trace) has a test in tests/py/test_jax_hooks.py that fails where it breaks.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

import jax
import jax.extend.core
import numpy as np
from jax._src import api_util as _api_util
from jax._src import callback as _callback
from jax._src import checkify as _checkify
from jax._src import compilation_cache as _compilation_cache
from jax._src import config as _config
from jax._src import core as _core
from jax._src import debugging as _debugging
from jax._src import dispatch as _dispatch
from jax._src import effects as _effects
from jax._src import linear_util as _lu
from jax._src import pjit as _pjit
from jax._src import shard_map as _shard_map
from jax._src import source_info_util as _source_info
from jax._src import tree_util as _tree_util
from jax._src import util as _util
from jax._src import xla_bridge as _xla_bridge
from jax._src.array import ArrayImpl as _ArrayImpl
from jax._src.interpreters import ad as _ad
from jax._src.interpreters import batching as _batching
from jax._src.interpreters import partial_eval as _pe
from jax._src.lax import lax as _lax
from jax._src.lax import parallel as _parallel
from jax._src.lib import _jax  # pyright: ignore[reportPrivateImportUsage]
from jax.extend.core import Primitive
from jax.interpreters import ad as _ad_public
from jax.interpreters import batching as _batching_public
from jax.interpreters import mlir as _mlir_public
from jax.interpreters import partial_eval as _pe_public
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from pmapc import collectives
from pmapc.collectives import Collective

__all__ = ["Primitive"]

_Kind = TypeVar("_Kind")


# The JAX release running, for the internals that moved between the releases
# pyproject.toml admits; each use says what changed and when.
JAX_VERSION: tuple[int, ...] = tuple(jax.__version_info__[:3])
SINCE_0_11 = JAX_VERSION >= (0, 11, 0)

# 0.12: one class with Jaxpr, this its alias (which 0.12's stubs leave unexported)
ClosedJaxpr = jax.extend.core.ClosedJaxpr  # pyright: ignore[reportPrivateImportUsage]
Jaxpr = jax.extend.core.Jaxpr

# `jax.jit(..., inline=...)` that inlines the jitted function into an enclosing
# trace, so that `jax.make_jaxpr` of a map shows the map itself: `True` until
# 0.10; from 0.11 on `True` inlines only when lowering (`jax.Inline.JAX_LATE`).
INLINE_WHILE_TRACING = (
    jax.Inline.JAX_EARLY if SINCE_0_11 else True  # pyright: ignore[reportAttributeAccessIssue]
)

ShapedArray = _core.ShapedArray
Tracer = _core.Tracer

if TYPE_CHECKING:  # `jax.Device` is an alias JAX assigns, which type checkers refuse
    from jaxlib._jax import Device
else:
    Device = jax.Device


# The primitives of host callbacks: `jax.pure_callback`, `io_callback`,
# `jax.debug.callback` and `jax.debug.print` (its own primitive since 0.10).
HOST_CALLBACK_PRIMITIVES = frozenset(
    (
        _callback.pure_callback_p,
        _callback.io_callback_p,
        _debugging.debug_callback_p,
        _debugging.debug_print_p,
    )
)


def compiles_only(device: Device) -> bool:
    """Whether `device` is one that XLA compiles for but this process cannot run on:
    a device of a topology (`jax.experimental.topologies`), whose client is XLA's
    compile-only one (what JAX's ahead-of-time compile for a TPU pod uses)."""
    return isinstance(getattr(device, "client", None), _jax.CompileOnlyPyClient)


def collective_primitive(collective: Collective) -> Primitive:
    """JAX's primitive of a pmapc collective kind: the one its record names in
    `jax._src.lax.parallel` (for example `reduce_scatter_p` for psum_scatter)."""
    return getattr(_parallel, collective.jax_primitive)


# Primitives that only mark how a value varies over axes or is laid out over
# devices: identities in pmapc IR.
IDENTITY_PRIMITIVES = tuple(
    p for p in (getattr(_core, "pvary_p", None), _pjit.sharding_constraint_p) if p
)

# `jax.shard_map`, which `jax.pmap` runs as from JAX 0.10 on.
SHARD_MAP = _shard_map.shard_map_p

PBROADCAST = _parallel.pbroadcast_p
# 0.12: `pbroadcast` with a traced source
PBROADCAST_DYNAMIC = getattr(_parallel, "pbroadcast_dynamic_p", None)


def invariant_collectives() -> dict[Primitive, Collective]:
    """JAX's `*_invariant` forms of pmapc's collectives (`psum_invariant`, and
    `all_gather(to='invariant')`'s `all_gather_invariant`): the same values, typed
    as invariant over the axes for `shard_map`'s checks, which pmapc's maps do not
    make. A form is named after its collective's primitive."""
    by_name = {p.name: p for p in named_axis_primitives()}
    return {
        by_name[f"{collective_primitive(c).name}_invariant"]: c
        for c in collectives.ALL
        if f"{collective_primitive(c).name}_invariant" in by_name
    }


class _MapBodies(threading.local):
    depth = 0  # how many map bodies this thread is tracing


_map_bodies = _MapBodies()


@contextlib.contextmanager
def tracing_map_body():
    """Mark the calling thread as tracing a map's body (see `_OneAxisName`)."""
    _map_bodies.depth += 1
    try:
        yield
    finally:
        _map_bodies.depth -= 1


@dataclasses.dataclass(frozen=True)
class _OneAxisName:
    """The abstract evaluation of `pbroadcast_p` (and 0.12's `pbroadcast_dynamic_p`),
    installed once in place of JAX's:
    inside a map body it reads an axis name given as a string as that one name.

    JAX's own checks the axis name's characters one by one as names
    (`lax.pbroadcast(x, 'model', 0)`: "unbound axis name: m"), where every other
    collective takes a string as one name and JAX 0.4.30 took it too.
    """

    jax_rule: Callable[..., Any]

    def __call__(self, *avals, axis_name, **params):
        if _map_bodies.depth and isinstance(axis_name, str):
            axis_name = (axis_name,)
        return self.jax_rule(*avals, axis_name=axis_name, **params)


def _install_one_axis_name(primitive) -> None:
    if not isinstance(primitive.abstract_eval, _OneAxisName):
        primitive.abstract_eval = _OneAxisName(primitive.abstract_eval)


for _primitive in (PBROADCAST, PBROADCAST_DYNAMIC):
    if _primitive is not None:
        _install_one_axis_name(_primitive)


def named_axis_primitives() -> list[Primitive]:
    """Every primitive of JAX's collectives module (`jax._src.lax.parallel`): those
    that act along named axes, from `psum` to the ones a release adds."""
    found = {id(p): p for p in vars(_parallel).values() if isinstance(p, Primitive)}
    return sorted(found.values(), key=lambda p: p.name)


def named_axes(params: dict) -> tuple:
    """The axis names an equation's parameters name (`axes` or `axis_name`, one name or
    a tuple), without the positional axes a `jax.vmap` of a collective adds."""
    names = params.get("axes", params.get("axis_name", ()))
    names = names if isinstance(names, (tuple, list)) else (names,)
    return tuple(n for n in names if not isinstance(n, int) or isinstance(n, bool))


def async_collectives() -> tuple[dict[Primitive, Primitive], tuple[Primitive, ...]]:
    """({start primitive: the synchronous one it starts}, the done primitives) of JAX's
    asynchronous collectives (`lax.psum_scatter_start(...).done()`): a start
    primitive is named after the synchronous one, `<name>_start`, and a done one
    `<name>_done`; a start's result is a future of the synchronous one's."""
    by_name = {p.name: p for p in named_axis_primitives()}
    starts = {
        p: by_name[name.removesuffix("_start")]
        for name, p in by_name.items()
        if name.endswith("_start") and name.removesuffix("_start") in by_name
    }
    dones = tuple(p for name, p in by_name.items() if name.endswith("_done"))
    return starts, dones


def future_value(aval):
    """The value an asynchronous collective's future (its start's result) holds."""
    return aval.inner_aval


def map_effects(jaxpr, axis_name) -> set:
    """The effects a map of body `jaxpr` has where it is called: the body's, less
    those that only say it uses the map's own axis."""
    return set(_core.filter_named_axis_effects(jaxpr.effects, (axis_name,)))


def side_effects(jaxpr) -> list:
    """The effects of `jaxpr` that act outside the program (a host callback's, an
    ordered print's): not those that only say it uses named axes, nor checkify's
    (its checks are values, `checkify` makes them outputs)."""
    return [
        e
        for e in jaxpr.effects
        if not isinstance(e, (_core.NamedAxisEffect, _checkify.ErrorEffect))
    ]


def ordered_effects(jaxpr) -> list:
    """The effects of `jaxpr` that must happen in program order (e.g. those of
    `io_callback(ordered=True)`, `jax.debug.print(ordered=True)`)."""
    return [effect for effect in jaxpr.effects if _effects.ordered_effects.contains(effect)]


def closure_to_arguments(closed: ClosedJaxpr) -> tuple[ClosedJaxpr, list]:
    """Turn a jaxpr's captured constants into leading arguments: (jaxpr, constants)."""
    jaxpr = _convert_constvars_jaxpr(closed.jaxpr)
    return ClosedJaxpr(jaxpr, ()), list(closed.consts)


def trace_flat(fun: Callable, avals: list, axis_env: list, traced_for: str) -> ClosedJaxpr:
    """The closed jaxpr of `fun` (flat arguments to a list of flat results) on
    `avals`, the axes of `axis_env` bound: what `jax.make_jaxpr(fun, axis_env=...)`
    makes (values `fun` closes over, outer tracers included, are its constants),
    without staging a `jax.jit` of it around the trace (most of a small body's
    tracing). `traced_for` names the trace in JAX's messages."""
    debug = _api_util.debug_info(traced_for, fun, avals, {})
    with _core.extend_axis_env_nd(axis_env):
        jaxpr, _, consts = _pe.trace_to_jaxpr_dynamic(_lu.wrap_init(fun, debug_info=debug), avals)
    return ClosedJaxpr(jaxpr, consts)


def is_weakly_typed(value) -> bool:
    """Whether a value's dtype is weak (a Python scalar's: it defers to the other
    operand's dtype in promotion)."""
    return _core.typeof(value).weak_type


def is_tracer(value) -> bool:
    return isinstance(value, Tracer)


def is_concrete_array(value) -> bool:
    """Whether `value` is one concrete `jax.Array` (cheaper than isinstance with
    `jax.Array`, which also admits tracers)."""
    return type(value) is _ArrayImpl


# ----------------------------------------------------------------------------
# What the map primitive needs from JAX's internals


# How many programs of a primitive applied outside `jax.jit` (as a gradient's backward
# pass applies a transposed map) `compiled_impl` keeps: JAX keeps 4,096 of its own
# primitives', each with its jaxprs and its executable, however long ago it ran.
EAGER_PROGRAMS = 64


def compiled_impl(primitive):
    """An impl rule that runs `primitive` the way JAX runs its own (a jitted call of
    the primitive, JAX's `xla_primitive_callable`), keeping the last EAGER_PROGRAMS.

    A primitive with a `mesh` parameter (an outermost map) runs on that mesh's
    devices: an operand on other devices, or on one device uncommitted, is put
    on the mesh first. A gradient's eager steps hand it such arrays whose
    abstract values name the mesh of an earlier program (jax 0.10's eager
    `reshard` of a scalar cotangent), from which `jax.jit` would rebuild the
    sharding XLA chose for them, and fail where its shape does not fit that mesh.
    """

    @functools.lru_cache(maxsize=EAGER_PROGRAMS)
    def program(params: tuple) -> Callable:
        return _dispatch.xla_primitive_callable.__wrapped__(primitive, **dict(params))

    def impl(*args, **params):
        run = program(tuple(params.items()))
        mesh = params.get("mesh")
        if isinstance(mesh, Mesh):
            args = _on_mesh(args, mesh)
        previous = _config.disable_jit.swap_local(False)
        try:
            return run(*args)
        finally:
            _config.disable_jit.set_local(previous)

    register_cache(program, f"pmapc: eager {primitive.name}")
    return impl


def _on_mesh(args, mesh: Mesh) -> list:
    """`args`, each array that is not on `mesh`'s devices put there (replicated)."""
    devices = set(mesh.devices.flat)
    replicated = NamedSharding(mesh, PartitionSpec())
    return [
        jax.device_put(arg, replicated)
        if is_concrete_array(arg) and arg.sharding.device_set != devices
        else arg
        for arg in args
    ]


def persistent_cache():
    """JAX's persistent compilation cache, where `jax_compilation_cache_dir` configures
    one (and `jax_enable_compilation_cache` leaves it on): an object with `get(key)
    -> bytes | None` and `put(key, bytes)`; else None. (Its backend is only asked
    whether its runtime may use the cache: the default one's.)"""
    if not _compilation_cache.is_persistent_cache_enabled():
        return None
    return _compilation_cache._get_cache(_xla_bridge.get_backend())


def register_cache(cache, description: str) -> None:
    """Have `jax.clear_caches()` clear `cache` (an object with `cache_clear`,
    `cache_info` and `cache_keys`, as `functools.lru_cache`'s)."""
    _util.register_cache(cache, description)


def placement_jaxpr(mesh) -> ClosedJaxpr | None:
    """A jaxpr that tells `jax.jit` a program runs on `mesh`'s devices, for an
    outermost map's parameters (None for an abstract mesh, which has no devices).

    `jax.jit` takes its devices from the shardings it finds in the function's
    jaxpr and in the jaxprs among its equations' parameters, and reads no
    primitive of pmapc's. This jaxpr, which nothing runs or lowers, holds one
    sharding constraint on the mesh for it to find. A constraint on the map's
    operands instead reaches XLA: one on each of hundreds of operands slows its
    compile (benchmarks/scaling.py), and one alone led XLA's propagation to give a value of a
    `jax.checkpoint` under `jax.grad` a sharding its shape cannot take.
    """
    if not isinstance(mesh, Mesh):
        return None
    return _placement_jaxpr(mesh)


@functools.lru_cache(maxsize=64)  # one per mesh: JAX's caches keyed on parameters hit
def _placement_jaxpr(mesh: Mesh) -> ClosedJaxpr:
    sharding = NamedSharding(mesh, PartitionSpec())
    scalar = jax.ShapeDtypeStruct((), np.float32)
    return jax.make_jaxpr(lambda x: jax.lax.with_sharding_constraint(x, sharding))(scalar)


def jaxprs_in(params: dict):
    """The jaxprs among a primitive's parameters (bodies of jit, cond, scan, ...)."""
    return jax.extend.core.jaxprs_in_params(params)


def shape_dtype(aval) -> jax.ShapeDtypeStruct:
    return jax.ShapeDtypeStruct(aval.shape, aval.dtype, weak_type=aval.weak_type)


def rank(aval) -> int:
    """The number of dimensions of an array's abstract value (typed as any
    `AbstractValue` from 0.11 on)."""
    return len(aval.shape)


def cache_weakly(kind: type[_Kind]) -> type[_Kind]:
    """Have JAX's caches keyed on a primitive's parameters (its abstract evaluation's,
    for one) hold parameters of class `kind` weakly, as they hold jaxprs: an entry
    goes when its parameter does, not when the cache's bound evicts it."""
    _util.weakref_cache_key_types.add(kind)
    return kind


# Autodiff and batching of the map primitive (lowering/map_rules.py): from JAX's
# public modules where the running release exports the name (0.11 added
# backward_pass, jvp_jaxpr, convert_constvars_jaxpr, partial_eval_jaxpr_nounits
# and new_eqn_recipe), else from the private ones.


def _exported(name: str, public, private):
    return getattr(public, name) if hasattr(public, name) else getattr(private, name)


Zero = _ad_public.Zero
UndefinedPrimal = _ad_public.UndefinedPrimal
is_undefined_primal = _ad_public.is_undefined_primal
instantiate_zeros = _ad_public.instantiate_zeros
jvp_jaxpr = _exported("jvp_jaxpr", _ad_public, _ad)
partial_eval_jaxpr_nounits = _exported("partial_eval_jaxpr_nounits", _pe_public, _pe)
batch_jaxpr = _batching.batch_jaxpr  # private in every release
JaxprTracer = _pe_public.JaxprTracer
PartialVal = _pe_public.PartialVal
new_eqn_recipe = _exported("new_eqn_recipe", _pe_public, _pe)
_convert_constvars_jaxpr = _exported("convert_constvars_jaxpr", _pe_public, _pe)
_backward_pass = _exported("backward_pass", _ad_public, _ad)


def backward_pass(closed: ClosedJaxpr, primals, cotangents) -> list:
    """Cotangents of `closed`'s inputs (Zero where none); `primals` holds
    UndefinedPrimal for the linear inputs.

    A map body's `all_to_all` transposes by `_all_to_all_transpose` here: the
    rule JAX looks up for it (`_AllToAllTranspose`) takes pmapc's while this
    thread runs a map body's backward pass, JAX's own everywhere else.
    """
    depth = _map_backward_passes.depth
    _map_backward_passes.depth = depth + 1
    try:
        return _backward_pass(closed.jaxpr, False, closed.consts, primals, cotangents)
    finally:
        _map_backward_passes.depth = depth


class _BackwardPasses(threading.local):
    depth = 0  # how many map bodies' backward passes this thread is inside


_map_backward_passes = _BackwardPasses()


def _all_to_all_transpose(cts, x, *, axis_name, split_axis, concat_axis, axis_index_groups, tiled):
    """The primitive with split and concat swapped: `all_to_all_p` always splits and
    concatenates in place (an untiled call adds and drops unit dimensions around it).

    JAX 0.10's own rule calls the user-level `all_to_all`, which for an untiled one
    whose split and concat axes differ adds unit dimensions to the cotangent again
    and fails its type check (shard_map fails the same way); JAX 0.4.30 computed the
    values pmapc gets here.
    """
    del x
    return (
        _parallel.all_to_all_p.bind(
            cts,
            axis_name=axis_name,
            split_axis=concat_axis,
            concat_axis=split_axis,
            axis_index_groups=axis_index_groups,
            tiled=tiled,
        ),
    )


@dataclasses.dataclass(frozen=True)
class _AllToAllTranspose:
    """The transpose rule of `all_to_all_p`, installed once in JAX's table: pmapc's
    inside a map body's backward pass on the calling thread, else the rule JAX had.

    Thread-safe where swapping the table's entry around each backward pass is not:
    two threads differentiating at once would restore each other's rule.
    """

    jax_rule: Callable[..., Any]

    def __call__(self, cts, x, **params):
        if _map_backward_passes.depth:
            return _all_to_all_transpose(cts, x, **params)
        return self.jax_rule(cts, x, **params)


def _install_all_to_all_transpose() -> _AllToAllTranspose:
    rules = _ad_public.primitive_transposes
    installed = rules[_parallel.all_to_all_p]
    if not isinstance(installed, _AllToAllTranspose):
        installed = rules[_parallel.all_to_all_p] = _AllToAllTranspose(installed)
    return installed


ALL_TO_ALL_TRANSPOSE = _install_all_to_all_transpose()


def axis_env(axis_name, axis_size):
    """Bind `axis_name` while transforming a map's body (its collectives name it)."""
    return _core.extend_axis_env_nd([(axis_name, axis_size)])


def current_source_info():
    return _source_info.current()


partial_eval_jaxpr_custom = _pe.partial_eval_jaxpr_custom
Var = jax.extend.core.Var
new_jaxpr_eqn = jax.extend.core.new_jaxpr_eqn


def register_map_rules(
    primitive, *, jvp, transpose, partial_eval, partial_eval_staged, batch
) -> None:
    """`partial_eval` splits a map being traced (grad, linearize); `partial_eval_staged`
    splits a map already in a jaxpr (jax.checkpoint, scan's autodiff)."""
    _ad_public.primitive_jvps[primitive] = jvp
    _ad_public.primitive_transposes[primitive] = transpose
    _pe_public.custom_partial_eval_rules[primitive] = partial_eval
    _pe_public.partial_eval_jaxpr_custom_rules[primitive] = partial_eval_staged
    _batching_public.fancy_primitive_batchers[primitive] = batch


def register_identity_rules(primitive) -> None:
    """Make `primitive` (multiple results, each its operand's value) an identity to
    JAX's transformations: its tangents and batched dimensions pass through, and a
    lowering outside pmapc IR returns its operands."""

    def jvp(primals, tangents, **params):
        return primitive.bind(*primals, **params), list(tangents)

    def batch(args, dims, **params):
        return primitive.bind(*args, **params), list(dims)

    _ad_public.primitive_jvps[primitive] = jvp
    _batching_public.primitive_batchers[primitive] = batch
    _mlir_public.register_lowering(primitive, lambda ctx, *operands, **params: operands)


def register_checkify_rule(primitive, rule) -> None:
    """Give `checkify` a rule for `primitive`: `rule(checkify_body, error, *vals,
    **params) -> (error, outs)`, where `checkify_body(jaxpr, err_tree, *avals)` is
    (the checked jaxpr, its output tree): `jaxpr` with the error's leaves as leading
    inputs and outputs and its checks functionalized.

    From 0.12 on checkify's rules take a context first, and its jaxprs are closed
    ones (Jaxpr and ClosedJaxpr merged).
    """
    takes_context = hasattr(_checkify, "CheckifyContext")

    def checkify_rule(*args, **params):
        leading, (error, enabled_errors, *vals) = (
            (args[:1], args[1:]) if takes_context else ((), args)
        )

        def checkify_body(jaxpr, err_tree, *avals):
            to_checkify_jaxpr: Callable[..., Any] = _checkify.jaxpr_to_checkify_jaxpr
            checked, out_tree, _ = to_checkify_jaxpr(
                *leading, jaxpr, enabled_errors, err_tree, *avals
            )
            return checked, out_tree

        return rule(checkify_body, error, *vals, **params)

    _checkify.error_checks[primitive] = checkify_rule


def any_error(error):
    """One checkify error of a map's per-device errors (stacked at axis 0), as JAX
    0.4.30 reduced those of `pmap`: the last device with one, else none."""
    return _checkify._reduce_any_error(error)


def typeof(value):
    return _core.typeof(value)


def tangent_zero(primal) -> Zero:
    """The symbolic zero tangent of a primal value."""
    return Zero(_core.typeof(primal).to_tangent_aval())


def pytree_differences(given, expected) -> list[tuple]:
    """How pytree structure `given` differs from `expected`: (key path, what `given`
    has, what `expected` has, why they differ) per difference, as JAX explains a
    compiled function called with another pytree."""
    return list(_tree_util.equality_errors_pytreedef(given, expected))


def prefix_error(prefix, full, name: str) -> str:
    """JAX's message for `prefix` that is not a pytree prefix of `full` (`name` names
    the prefix: "pmap in_axes")."""
    make_error, *_ = _tree_util.prefix_errors(prefix, full)
    return make_error(name).args[0]


def is_key_dtype(dtype) -> bool:
    """Whether `dtype` is a typed PRNG key's (`jax.random.key` and friends)."""
    return jax.numpy.issubdtype(dtype, jax.dtypes.prng_key)


def wrap_key_data(data, key_dtype):
    """Key data (what a compiled program takes and returns for a key) as keys of
    `key_dtype`'s implementation."""
    return jax.random.wrap_key_data(data, impl=key_dtype._impl)


def tracing_is_idle() -> bool:
    """Whether no JAX transformation is tracing (values are concrete arrays)."""
    return _core.trace_state_clean()


# ----------------------------------------------------------------------------
# Folding a nest onto fewer devices (lowering/fold.py)

# Primitives whose batching rule takes only operands that are all batched, at
# dimension 0 (ragged_dot's: "ragged_dot vmap over any dim but 0 - NYI", 0.10 to 0.12):
# the fold broadcasts every operand over the positions any one varies over.
BATCH_EVERY_OPERAND = frozenset((_lax.ragged_dot_general_p,))

Literal = jax.extend.core.Literal
DropVar = jax.extend.core.DropVar

# `pmapc.fold_onto(devices)`: the devices outermost maps fold onto (a tuple), or None.
# A JAX config state in the trace context, so that a `jax.jit` traced inside and
# outside the `with` keeps one trace for each.
FOLD_ONTO = _config.State(
    "pmapc_fold_onto",
    None,
    "The devices pmapc.fold_onto folds outermost pmapc.pmap calls onto.",
    include_in_jit_key=True,
    include_in_trace_context=True,
)


def bind_equation(eqn, args) -> list:
    """Bind `eqn`'s primitive on `args` at the equation's source location (what
    `jax.core.eval_jaxpr` does for one equation); its results as a list."""
    bind_params = eqn.primitive.get_bind_params(eqn.params)
    name_stack = _source_info.current_name_stack() + eqn.source_info.name_stack
    with _source_info.user_context(eqn.source_info.traceback, name_stack=name_stack):
        with eqn.ctx.manager:
            out = eqn.primitive.bind(*args, **bind_params)
    return list(out) if eqn.primitive.multiple_results else [out]


@contextlib.contextmanager
def at_equation(eqn):
    """Trace at `eqn`'s source location (the user's line in the IR's locations)."""
    name_stack = _source_info.current_name_stack() + eqn.source_info.name_stack
    with _source_info.user_context(eqn.source_info.traceback, name_stack=name_stack):
        yield


def call_body(eqn):
    """(the jaxpr, its constants) that a call-like equation runs on its operands as
    they are (jit, a closed call, checkpoint, a custom_jvp/vjp function's primal),
    or None for other primitives (cond, while, scan: bodies run otherwise)."""
    if eqn.primitive.name not in _CALL_PRIMITIVES:
        return None
    for key in ("jaxpr", "call_jaxpr", "fun_jaxpr"):
        body = eqn.params.get(key)
        if isinstance(body, ClosedJaxpr):
            return body.jaxpr, list(body.consts)
        if isinstance(body, jax.extend.core.Jaxpr):
            return body, []
    return None


# Primitives whose body takes the equation's operands as they are (names stable
# across 0.10-0.12: jit's is "pjit" until 0.11, "jit" after).
_CALL_PRIMITIVES = frozenset(
    {
        "pjit",
        "jit",
        "closed_call",
        "core_call",
        "checkpoint",
        "remat",
        "custom_jvp_call",
        "custom_vjp_call",
        "custom_vjp_call_jaxpr",
    }
)


def scan_operands(params: dict, operands: list) -> tuple[list, list, list]:
    """(constants, initial carry, scanned) of a `scan` equation's operands: counted by
    `num_consts`/`num_carry` until 0.10, split by the flat tree `ft_in` from 0.11 on."""
    if "num_consts" in params:
        consts, carry = params["num_consts"], params["num_carry"]
        return operands[:consts], operands[consts : consts + carry], operands[consts + carry :]
    consts, carry, xs = params["ft_in"].update(operands).unpack()
    return list(consts), list(carry), list(xs)
