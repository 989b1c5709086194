"""Tracing `pmapc.pmap` calls: arguments to mapped leaves, bodies to jaxprs.

Every call traces its body to a jaxpr under the map's axis (`jax_api.trace_flat`,
what `jax.make_jaxpr` makes) and binds `map_p` with the body as a parameter. A
call made while a body is being traced is a nested map; the outermost call also
finds the nest's mesh. The pmapc IR of any traced function is its StableHLO with
maps and collectives lowered to `@pmapc.*` ops (`pmapc_ir`).
"""

from __future__ import annotations

import dataclasses
import inspect
import math
import re
import threading
from collections.abc import Callable, Hashable, Sequence
from typing import NamedTuple

import jax
import numpy as np

from pmapc import axis_labels, collectives, dialect, ir, shapes
from pmapc.errors import (
    ArgumentError,
    AxisError,
    PmapcError,
    ShapeError,
    SourceLoc,
    UnsupportedError,
    did_you_mean,
    first_line,
)
from pmapc.lowering import (
    divergence,
    fold,
    jax_api,
    jax_frames,
    jax_lowering,
    jax_messages,
    placement,
    primitives,
)


class _Active(threading.local):
    def __init__(self):
        self.axes: list[tuple[Hashable, int]] = []


_active = _Active()


def enclosing_axes() -> list[tuple[Hashable, int]]:
    """The (name, size) of every map whose body is being traced, outermost first."""
    return _active.axes


@dataclasses.dataclass(frozen=True)
class MapSpec:
    """What a `pmapc.pmap` call maps: its settings, from `pmapc.pmap(...)`."""

    fun: Callable
    axis_name: str
    in_axes: object
    out_axes: object
    static_argnums: tuple[int, ...]
    axis_size: int | None
    name: str


@dataclasses.dataclass
class MappedCall:
    """One call's arguments, flattened: leaves, their tree and their mapped axes."""

    leaves: list
    in_tree: object
    leaf_axes: list[int | None]
    static_args: dict[int, object]
    axis_size: int


def flatten_call(spec: MapSpec, args: Sequence, kwargs: dict | None = None) -> MappedCall:
    """A call's mapped leaves. Keyword arguments are mapped over their leading axis,
    as in `jax.pmap` (`in_axes` describes the positional ones)."""
    kwargs = kwargs or {}
    check_argnums(spec.name, "static_broadcasted_argnums", spec.static_argnums, len(args))
    static = {i: args[i] for i in spec.static_argnums}
    positional = tuple(a for i, a in enumerate(args) if i not in static)
    dynamic = (positional, kwargs)
    leaves, in_tree = jax.tree_util.tree_flatten(dynamic)
    in_axes = _positional_in_axes(spec, len(args), static, kwargs)
    leaf_axes = broadcast_prefix(
        spec,
        "in_axes",
        in_axes,
        positional,
        lambda: jax_messages.in_axes_not_a_prefix(in_axes, positional, kwargs),
    )
    leaf_axes += [0] * (len(leaves) - len(leaf_axes))
    paths = [_argument_path(path) for path, _ in jax.tree_util.tree_flatten_with_path(dynamic)[0]]
    leaves = [_as_array(spec, leaf, path) for leaf, path in zip(leaves, paths)]
    leaf_axes = [
        _normalize_axis(spec, "in_axes", axis, np.ndim(leaf), path)
        for axis, leaf, path in zip(leaf_axes, leaves, paths)
    ]
    call = MappedCall(leaves, in_tree, leaf_axes, static, 0)
    return dataclasses.replace(call, axis_size=_axis_size(spec, call))


def check_argnums(name: str, what: str, argnums: Sequence[int], count: int) -> None:
    """Refuse argument numbers that name no positional argument of the call."""
    missing = [i for i in argnums if not 0 <= i < count]
    if missing:
        raise ArgumentError(
            f"{what}={tuple(argnums)}, but '{name}' was called with {count} "
            f"positional argument(s), so {missing[0]} names none; pass that "
            f"argument or use numbers in 0..{count - 1}"
        )


def _argument_path(path) -> str:
    """`args[0]['w']` or `kwargs['bias']` for a leaf of (positional, keyword) arguments."""
    where, rest = path[0], path[1:]
    return ("args" if where.idx == 0 else "kwargs") + jax.tree_util.keystr(rest)


def _positional_in_axes(spec: MapSpec, count: int, static: dict, kwargs: dict) -> tuple:
    in_axes = spec.in_axes
    if isinstance(in_axes, list):
        in_axes = tuple(in_axes)
    if not isinstance(in_axes, tuple):
        return tuple(in_axes for i in range(count) if i not in static)
    if len(in_axes) == count and static:
        return tuple(a for i, a in enumerate(in_axes) if i not in static)
    if len(in_axes) != count - len(static):
        positional = tuple(None for i in range(count) if i not in static)
        raise ShapeError(
            jax_messages.explained(
                jax_messages.in_axes_not_a_prefix(in_axes, positional, kwargs),
                f"pmapc.pmap over '{spec.axis_name}': in_axes has {len(in_axes)} entries for "
                f"{count - len(static)} mapped positional arguments; give one entry per "
                "argument (or a single int or None for all)",
            )
        )
    return in_axes


def broadcast_prefix(
    spec: MapSpec, what: str, axes_tree, values_tree, jax_wording: Callable[[], str]
) -> list:
    """The axis of every leaf of `values_tree`, from an `in_axes`/`out_axes` prefix tree;
    `jax_wording()` is JAX 0.4.30's message when it is not a prefix."""
    try:
        per_leaf = jax.tree_util.tree_map(
            lambda axis, sub: _SameAxis(axis, len(jax.tree_util.tree_leaves(sub))),
            axes_tree,
            values_tree,
            is_leaf=lambda x: x is None,
        )
    except (ValueError, TypeError):
        structure = jax.tree_util.tree_structure(values_tree)
        raise ShapeError(
            jax_messages.explained(
                jax_wording(),
                f"pmapc.pmap over '{spec.axis_name}': {what} {axes_tree!r} does not match the "
                f"structure of the values it describes, {structure}; give a prefix of that "
                "structure",
            )
        ) from None
    groups = jax.tree_util.tree_leaves(per_leaf)
    return [group.axis for group in groups for _ in range(group.count)]


@dataclasses.dataclass(frozen=True)
class _SameAxis:
    """One prefix entry's axis for `count` leaves (a pytree leaf, unlike a list)."""

    axis: int | None
    count: int


def _normalize_axis(spec, what, axis, rank, path, extra=0) -> int | None:
    if axis is None:
        return None
    if not isinstance(axis, (int, np.integer)) or isinstance(axis, bool):
        raise ShapeError(
            f"pmapc.pmap over '{spec.axis_name}': {what} entries must be int or "
            f"None, got {axis!r} for {path or 'the value'}"
        )
    limit = rank + extra
    if limit == 0:
        raise ShapeError(
            f"pmapc.pmap over '{spec.axis_name}': {path or 'the value'} is a "
            f"scalar, so {what} entry {axis} cannot map it; use None for it"
        )
    if not -limit <= axis < limit:
        raise ShapeError(
            f"pmapc.pmap over '{spec.axis_name}': {what} entry {axis} is out of "
            f"range for {path or 'the value'} of rank {rank}; use an axis in "
            f"{-limit}..{limit - 1} or None"
        )
    return int(axis) % limit


def argument_names(fun, in_tree, static_argnums: Sequence[int]) -> list[str]:
    """The name of each leaf of a call's (args, kwargs) tree `in_tree` (static
    arguments left out), as JAX names a jitted function's: the parameter of `fun` it
    is passed to and its path inside, `x`, `y['hi']`, `args[2]` past the parameters."""
    try:
        parameters = list(inspect.signature(fun).parameters.values())
    except (TypeError, ValueError):  # a builtin or a callable without a signature
        parameters = []
    positional = [
        p.name
        for p in parameters
        if p.kind in (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    ]
    extra = next((p.name for p in parameters if p.kind is inspect.Parameter.VAR_POSITIONAL), "args")
    given = len(in_tree.children()[0].children()) + len(static_argnums)
    dynamic = [i for i in range(given) if i not in static_argnums]
    paths, _ = jax.tree_util.tree_flatten_with_path(
        jax.tree_util.tree_unflatten(in_tree, [None] * in_tree.num_leaves),
        is_leaf=lambda leaf: leaf is None,
    )
    names = []
    for (kind, key, *rest), _ in paths:
        if kind.idx == 0:  # a positional argument, numbered among the dynamic ones
            index = dynamic[key.idx]
            base = (
                positional[index]
                if index < len(positional)
                else (f"{extra}[{index - len(positional)}]")
            )
        else:
            base = key.key
        names.append(base + jax.tree_util.keystr(tuple(rest)))
    return names


def as_device_value(leaf):
    """A JAX array or tracer as is; anything array-like as a numpy array of JAX's dtype."""
    if jax_api.is_tracer(leaf) or isinstance(leaf, jax.Array):
        return leaf
    array = np.asarray(leaf)
    return array.astype(jax.dtypes.canonicalize_dtype(array.dtype), copy=False)


def _as_array(spec: MapSpec, leaf, path: str):
    if jax_api.is_tracer(leaf) or isinstance(
        leaf, (jax.Array, np.ndarray, np.generic, bool, int, float, complex)
    ):
        return as_device_value(leaf)
    raise ArgumentError(
        f"pmapc.pmap over '{spec.axis_name}': argument {path or ''} is a "
        f"{type(leaf).__name__}, not an array; pass arrays (or mark the argument "
        "static with static_broadcasted_argnums)"
    )


def _axis_size(spec: MapSpec, call: MappedCall) -> int:
    mapped = [
        (index, np.shape(leaf)[axis], axis)
        for index, (leaf, axis) in enumerate(zip(call.leaves, call.leaf_axes))
        if axis is not None
    ]
    sizes = [size for _, size, _ in mapped]
    if len(set(sizes)) > 1:
        names = argument_names(spec.fun, call.in_tree, tuple(call.static_args))
        described = [
            f"argument {names[index]} of type {jax.typeof(call.leaves[index]).str_short()}"
            for index, _, _ in mapped
        ]
        raise ShapeError(
            jax_messages.explained(
                jax_messages.inconsistent_sizes(sizes, [axis for _, _, axis in mapped], described),
                f"pmapc.pmap over '{spec.axis_name}': every mapped dimension must have the same "
                f"size, got sizes {', '.join(str(size) for size in sorted(set(sizes)))}; slice or "
                "pad the arguments to one size, or pass one unmapped with None in in_axes",
            )
        )
    if spec.axis_size is not None and sizes and sizes[0] != spec.axis_size:
        raise ShapeError(
            jax_messages.explained(
                jax_messages.axis_size_mismatch(spec.axis_size, sizes[0]),
                f"pmapc.pmap over '{spec.axis_name}': axis_size={spec.axis_size}, but the mapped "
                f"dimensions have size {sizes[0]}; leave axis_size out or make them agree",
            )
        )
    if spec.axis_size is None and not sizes:
        raise ShapeError(
            jax_messages.explained(
                jax_messages.no_mapped_argument(),
                f"pmapc.pmap over '{spec.axis_name}': no argument is mapped (in_axes is None for "
                "every argument), so the axis size is unknown; map an argument or pass "
                "axis_size=N",
            )
        )
    return spec.axis_size if spec.axis_size is not None else sizes[0]


def trace_body(spec: MapSpec, call: MappedCall):
    """The body's closed jaxpr, its output tree, and the out_axes of each output leaf."""
    body_avals = [
        jax_api.ShapedArray(
            _drop(np.shape(leaf), axis), leaf.dtype, weak_type=jax_api.is_weakly_typed(leaf)
        )
        for leaf, axis in zip(call.leaves, call.leaf_axes)
    ]
    output = {}

    def flat_body(*leaves):
        positional, kwargs = jax.tree_util.tree_unflatten(call.in_tree, leaves)
        args = list(positional)
        for index in sorted(call.static_args):
            args.insert(index, call.static_args[index])
        flat, output["tree"] = jax.tree_util.tree_flatten(spec.fun(*args, **kwargs))
        return flat

    axes = enclosing_axes()
    axes.append((spec.axis_name, call.axis_size))
    try:
        with jax_api.tracing_map_body():
            closed = jax_api.trace_flat(
                flat_body, body_avals, [(spec.axis_name, call.axis_size)], "pmapc.pmap"
            )
    except PmapcError:
        raise  # a nested map's error, already in pmapc's terms
    except NameError as error:
        name = jax_frames.unbound_axis_name(error)
        if name is None:
            raise
        raise unbound_axis(name).with_traceback(error.__traceback__) from None
    except (AssertionError, NotImplementedError) as error:
        refused = unsupported_call(error)
        if refused is None:
            raise
        raise refused.with_traceback(error.__traceback__) from None
    except (ValueError, TypeError) as error:
        if not jax_frames.raised_by_collective(error.__traceback__):
            raise
        raise collective_error(error).with_traceback(error.__traceback__) from None
    finally:
        axes.pop()
    check_effects(spec, closed.jaxpr)
    bound = [name for name, _ in enclosing_axes()] + [spec.axis_name]
    primitives.check_supported(closed.jaxpr, bound)
    out_tree = output["tree"]
    outs = jax.tree_util.tree_unflatten(out_tree, list(closed.out_avals))
    out_axes = broadcast_prefix(
        spec,
        "out_axes",
        spec.out_axes,
        outs,
        lambda: jax_messages.out_axes_not_a_prefix(spec.out_axes, outs),
    )
    out_axes = [
        _normalize_axis(spec, "out_axes", axis, jax_api.rank(aval), "an output", extra=1)
        for axis, aval in zip(out_axes, closed.out_avals)
    ]
    return closed, out_tree, out_axes


def unsupported_call(error: Exception) -> PmapcError | None:
    """pmapc's error for a `jax.lax` collective JAX could not trace inside a map (an
    internal assertion, or a form JAX leaves unimplemented), at the user's line."""
    called = jax_frames.called_collective(error.__traceback__)
    if called is None:
        return None
    function, where = called
    later = TRACED_FROM.get(function)
    since = (
        f"; JAX {'.'.join(map(str, later))} and later trace it"
        if later is not None and jax_api.JAX_VERSION < later
        else ""
    )
    refused = UnsupportedError(
        f"jax.lax.{function} cannot be traced inside pmapc.pmap with JAX "
        f"{jax.__version__} ({type(error).__name__} in JAX{since}); {UNSUPPORTED_ADVICE}"
    )
    return refused.at(SourceLoc(*where, 0)) if where is not None else refused


# The first release whose JAX traces a call inside a map (outside shard_map) that
# earlier admitted releases refuse: `all_gather(..., to=...)` asserts in 0.10 and 0.11.
TRACED_FROM: dict[str, tuple[int, ...]] = {"all_gather": (0, 12)}


# What to write instead of a collective JAX cannot trace in a map body.
UNSUPPORTED_ADVICE = (
    "inside pmapc.pmap every value is per device, so a pcast or pvary is not needed and "
    f"all_gather needs no to=; for others {primitives.COLLECTIVES_PMAPC_LOWERS}"
)


def check_effects(spec: MapSpec, jaxpr) -> None:
    """Refuse effects that must happen in program order (as JAX 0.4.30's pmap did):
    the devices of a map run at once, so their calls have no one order."""
    if not jax_api.ordered_effects(jaxpr):
        return
    error = UnsupportedError(
        jax_messages.explained(
            jax_messages.ordered_effects(),
            f"pmapc.pmap over '{spec.axis_name}': io_callback(ordered=True) and "
            "jax.debug.print(ordered=True) keep their calls in program order, which the "
            "devices of a map, running at once, cannot; pass ordered=False (each device "
            "then calls once, in no set order)",
        )
    )
    where = jax_frames.user_line(_ordered_equation(jaxpr))
    raise error.at(SourceLoc(*where, 0)) if where is not None else error


def _ordered_equation(jaxpr):
    """The first equation of `jaxpr` (or of a jaxpr inside it) with an ordered effect,
    inside the innermost jaxpr that has one."""
    for eqn in jaxpr.eqns:
        if not jax_api.ordered_effects(eqn):
            continue
        for inner in jax_api.jaxprs_in(eqn.params):
            if jax_api.ordered_effects(inner):
                return _ordered_equation(inner)
        return eqn
    raise AssertionError("no equation has the jaxpr's ordered effect")


def bind(spec: MapSpec, call: MappedCall, *, devices=None, backend=None, outermost: bool = False):
    """Trace the body and bind `map_p`: (flat outputs, output tree).

    The outermost map of a nest also finds the mesh the nest runs on (its
    devices are `devices`, or the first ones of `backend`).
    """
    closed, out_tree, out_axes = trace_body(spec, call)
    if outermost:  # the whole nest is traced: what differs between devices is known
        closed = divergence.converted(closed, call.leaf_axes, spec.axis_name, call.axis_size)
    jaxpr, constants = jax_api.closure_to_arguments(closed)
    in_axes = [None] * len(constants) + call.leaf_axes
    operands = [*constants, *call.leaves]
    params = dict(
        jaxpr=jaxpr,
        axis_name=spec.axis_name,
        axis_size=call.axis_size,
        in_axes=in_axes,
        out_axes=out_axes,
        name=symbol_name(spec.name),
    )
    if not outermost:
        return primitives.bind_map(operands, **params), out_tree
    placed = placement.place_nest(jaxpr, spec.axis_name, call.axis_size, devices, backend)
    if isinstance(placed, fold.Fold):
        return fold.bind_folded(placed, operands, placement.mesh_of_nest, **params), out_tree
    return primitives.bind_map(operands, mesh=placed, **params), out_tree


class PmapcIR(NamedTuple):
    """A traced function's pmapc IR, and the Python functions its host-callback ops
    call (`dialect.host_callback_index` is a position in `host_callbacks`)."""

    module: ir.Module
    host_callbacks: tuple


def pmapc_ir(traced, name: str) -> PmapcIR:
    """The pmapc IR of a traced function (a `jax.jit(...).trace(...)` result)."""
    params = jax_lowering.lowering_parameters(primitives.pmapc_ir_rules())
    lowered = traced.lower(_private_parameters=params)
    return _own(jax_lowering.stablehlo_module(lowered), jax_lowering.host_callbacks(lowered), name)


def lower_map(ctx, one_map: jax_api.ClosedJaxpr, name: str) -> jax_lowering.LoweredModule:
    """`one_map`, a jaxpr of one outermost map, lowered with pmapc's rules inside the
    lowering `ctx` is a rule context of (JAX's, of the jitted function that holds
    the map), in its MLIR context: `map_ir` makes it pmapc IR."""
    return jax_lowering.lower_inside(ctx, name, one_map, primitives.pmapc_ir_rules())


def map_ir(lowered: jax_lowering.LoweredModule, name: str) -> PmapcIR:
    """The pmapc IR of a map `lower_map` lowered: its module, cleaned where it stands.

    Unlike `pmapc_ir`'s, this module is not copied into a context of pmapc's own:
    the passes rewrite it in the enclosing lowering's context, and nothing keeps it
    once the embedding has its bytecode (compiler/embed.py), so nothing of it
    outlives the context JAX drops (from 0.11 on, a thread's after 10 lowerings).
    A copy would load the context's dialects anew and write and read the module
    for every new program (benchmarks/new_programs.py)."""
    clean_module(lowered.module, name, calls_back=bool(lowered.host_callbacks))
    return PmapcIR(lowered.module, lowered.host_callbacks)


def _own(module, host_callbacks: tuple, name: str) -> PmapcIR:
    """JAX's lowering, read into a context of pmapc's own and cleaned (`clean_module`)."""
    module = ir.copy_into(module, ir.make_context())
    clean_module(module, name, calls_back=bool(host_callbacks))
    return PmapcIR(module, host_callbacks)


def symbol_name(name: str) -> str:
    cleaned = re.sub(r"[^A-Za-z0-9_]", "_", name) or "body"
    return cleaned if not cleaned[0].isdigit() else f"_{cleaned}"


def _drop(shape, axis):
    shape = tuple(shape)
    return shape if axis is None else shape[:axis] + shape[axis + 1 :]


def unbound_axis(name: Hashable) -> AxisError:
    axes = [axis for axis, _ in enclosing_axes()]
    bound = ", ".join(f"'{axis}'" for axis in axes) or "none"
    return AxisError(
        jax_messages.explained(
            jax_messages.unbound_axis(name, axes),
            f"axis '{name}' is not bound here; bound axes are {bound}{did_you_mean(name, axes)}",
        )
    )


def collective_error(error: Exception) -> ShapeError:
    """pmapc's error for a collective call JAX refused while a body was traced: index
    groups or an operand shape that do not fit the call, in pmapc's words where pmapc's
    rules tell what is wrong (the axes, their size, the dimension and the fix), else
    JAX's first line."""
    groups = jax_frames.refused_index_groups(error) or jax_frames.called_with_index_groups(error)
    explained = index_groups_error(groups) if groups is not None else None
    if explained is None:
        shape = jax_frames.refused_shape(error)
        explained = collective_shape_error(shape) if shape is not None else None
    return explained or ShapeError(first_line(error))


def collective_shape_error(refused: jax_frames.RefusedShape) -> ShapeError | None:
    """pmapc's shape rule's error for an operand JAX refused (naming the axes, their size,
    the dimension and the fix), when the axes are the maps' and the rule refuses it too
    (None for other axes, e.g. a jax.vmap's)."""
    sizes = dict(enclosing_axes())
    if not all(name in sizes for name in refused.axis_name):
        return None
    collective = collectives.BY_KIND[refused.kind]
    labels = tuple(axis_labels.axis_label(name) for name in refused.axis_name)
    size = math.prod(sizes[name] for name in refused.axis_name)
    params = collective.params_type(**refused.params)
    try:
        collective.result_shape(params, refused.shape, labels, size)
    except ShapeError as error:
        return error
    return None


def index_groups_error(refused: jax_frames.RefusedIndexGroups) -> ShapeError | None:
    """pmapc's message for index groups JAX refused (naming the groups, the axes and
    the fix), when the axes are the maps' and pmapc's rules for the called kind
    refuse them too (None for other axes, e.g. a jax.vmap's, and for groups that
    fit: JAX refused something else)."""
    sizes = dict(enclosing_axes())
    names = refused.axis_name
    names = tuple(names) if isinstance(names, (tuple, list)) else (names,)
    if refused.function is None or not all(name in sizes for name in names):
        return None
    size = math.prod(sizes[name] for name in names)
    groups = collectives.index_groups_from_jax(refused.index_groups)
    if groups is None:
        return None
    labels = tuple(axis_labels.axis_label(name) for name in names)
    where = shapes.describe_axes(labels, size, groups)
    collective = collectives.BY_KIND.get(refused.function)
    equal_sizes = collective is not None and not collective.reduction
    try:
        shapes.check_index_groups(refused.function, groups, where, size, equal_sizes=equal_sizes)
    except ShapeError as error:
        return error
    return None


# The attribute in which JAX names each result of @main ("result['a']"), kept.
RESULT_INFO = "jax.result_info"


def clean_module(module, name: str, *, calls_back: bool) -> None:
    """Make JAX's lowering of an outermost call a clean pmapc-IR module.

    Drops what `jax.jit` adds that pmapc IR does not use (replica counts,
    sharding attributes; the Shardy mesh and the sharding constraints it puts on
    @main's typed PRNG key arguments, which keep a key's data whole for JAX's
    partitioner; the one-device sharding of host callbacks, which run on every
    device of a map as every other op of its body: `calls_back` says whether the
    module has any), keeps the names of @main's arguments (their locations) and
    results (`jax.result_info`) and names the module after the user's function.
    """
    with ir.building(module):
        attributes = module.operation.attributes
        attributes["sym_name"] = ir.string_attr(symbol_name(name))
        for key in ("mhlo.num_partitions", "mhlo.num_replicas"):
            if key in attributes:
                del attributes[key]
        functions = ir.functions(module)
        for symbol, function in functions.items():
            ir.keep_arg_attrs(function, "arg", ())
            ir.keep_arg_attrs(function, "res", (RESULT_INFO,) if symbol == "main" else ())
        ir.drop_sharding_constraints(ir.function_entry_block(functions["main"]))
        # A callback's sharding names its mesh: a symbol (lifted by `jax.jit`), or
        # inline (`trace.lower_map`'s module, where no pass lifts it).
        callbacks = dialect.host_callbacks_of(module) if calls_back else ()
        if callbacks or ir.has_meshes(module):
            ir.drop_meshes(module, callbacks)
