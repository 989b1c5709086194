"""`pmapc.pmap`: jax.pmap's interface (JAX 0.4 semantics) for nested maps.

Every `pmapc.pmap` call binds the map primitive (lowering/primitives.py). The
outermost call runs through `jax.jit`: JAX traces it once per signature and,
when it lowers the map, pmapc compiles the nest for its device mesh
(compiler/embed.py). Calls inside a mapped body become nested maps.
`pmapc.lower` stages any function that calls maps, with the IR of every stage.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import logging
import time
import types
import weakref
from collections.abc import Callable, Sequence

import jax

import pmapc.compiler
import pmapc.lowering
import pmapc.passes
from pmapc import ir, options
from pmapc.compiler import agreement, driver, embed, processes, runtime, xla
from pmapc.errors import (
    ArgumentError,
    DeviceError,
    PmapcError,
)
from pmapc.lowering import (
    jax_api,
    jax_frames,
    jax_messages,
    map_rules,
    mesh_devices,
    placement,
    primitives,
    trace,
)
from pmapc.lowering.locations import at_user_call_site, from_traceback
from pmapc.options import DEFAULT_GROUP_FORM, DEFAULT_TARGET, GroupForm, RaggedForm, Target
from pmapc.stages import CallSignature, Lowered

jax_frames.hide_from_locations(pmapc, pmapc.compiler, pmapc.lowering, pmapc.passes)
# An error in the user's program shows the user's frames, not pmapc's (nor JAX's);
# JAX_TRACEBACK_FILTERING=off shows them all. The entry points below are the
# boundaries where the frames are filtered (`jax_frames.api_boundary`).
jax_frames.hide_from_tracebacks(
    "pmapc", "pmapc.compiler", "pmapc.lowering", "pmapc.passes", "pmapc.tools"
)
_log = logging.getLogger("pmapc")
assert map_rules  # imported for its registrations: autodiff and batching of maps
assert embed  # imported for its registration: an outermost map inside jax.jit


@jax_frames.api_boundary
def pmap(
    fun: Callable | None = None,
    axis_name: str | None = None,
    *,
    in_axes=0,
    out_axes=0,
    static_broadcasted_argnums: int | Sequence[int] = (),
    devices: Sequence[xla.Device] | None = None,
    backend: str | None = None,
    axis_size: int | None = None,
    donate_argnums: int | Sequence[int] = (),
    global_arg_shapes: tuple | None = None,
):
    """Map `fun` over `axis_name`; nest calls to map over a device mesh.

    Same arguments as `jax.pmap`; `devices` is only allowed on the outermost
    map, and `donate_argnums` donates the outermost map's arguments.
    """
    if global_arg_shapes is not None:
        raise ArgumentError(
            "pmapc.pmap takes global_arg_shapes=None only (as JAX 0.4's pmap "
            "outside multi-host xmap); leave it out"
        )
    settings = dict(
        axis_name=axis_name,
        in_axes=in_axes,
        out_axes=out_axes,
        static_broadcasted_argnums=static_broadcasted_argnums,
        devices=devices,
        backend=backend,
        axis_size=axis_size,
        donate_argnums=donate_argnums,
    )
    if fun is None:
        return functools.partial(pmap, **settings)
    return MappedFunction(fun, **settings)


def use_host_devices(count: int) -> None:
    """Give JAX `count` virtual CPU devices; call before JAX first uses a device
    (with several processes: in each process, before `jax.distributed.initialize`)."""
    xla.use_host_devices(count)


@contextlib.contextmanager
def fold_onto(devices: Sequence[xla.Device]):
    """Run every outermost `pmapc.pmap` called inside on `devices`: a nest whose mesh
    has more positions than there are devices folds onto as many of them as divide
    its mesh (each device then runs a block of consecutive positions, inner axes
    first; docs/ir.md), one with fewer runs on the first it needs. A test suite
    written for 8 devices runs so on a machine with fewer:

        with pmapc.fold_onto(jax.devices()):
            out = step(params, batch)  # a 2x4 nest on 1, 2, 4 or 8 devices

    `devices=` given to a map wins over it. A `jax.jit` traced inside keeps its own
    trace for it."""
    listed = list(devices)
    if not listed:
        raise DeviceError("pmapc.fold_onto needs at least one device; pass jax.devices()")
    repeated = [d for i, d in enumerate(listed) if d in listed[:i]]
    if repeated:
        raise DeviceError(
            f"pmapc.fold_onto lists {repeated[0]} twice; list each device once (positions "
            "that share a device are the fold's to choose)"
        )
    if len({d.platform for d in listed}) != 1:
        raise DeviceError(
            f"pmapc.fold_onto mixes platforms ({sorted({d.platform for d in listed})}); "
            "use devices of one kind"
        )
    with jax_api.FOLD_ONTO(tuple(listed)):
        yield


class MappedFunction:
    """A function mapped with `pmapc.pmap`: call it, or `.lower(*args)` it.

    Called outside any map, it runs as a `jax.jit` of the outermost map (one
    compilation per signature, JAX's dispatch, donation); called while an
    enclosing map's body is traced, it binds a nested map.
    """

    def __init__(
        self,
        fun,
        *,
        axis_name,
        in_axes,
        out_axes,
        static_broadcasted_argnums,
        devices,
        backend,
        axis_size,
        donate_argnums,
    ):
        if not callable(fun):
            raise TypeError(f"pmapc.pmap needs a callable, got {type(fun).__name__}")
        functools.update_wrapper(self, fun)
        static = static_broadcasted_argnums
        name = getattr(fun, "__name__", "body")
        self.spec = trace.MapSpec(
            fun=fun,
            # No collective can name an unnamed map's axis; this name only shows up
            # in messages, the IR and the mesh.
            axis_name=axis_name if axis_name is not None else f"<unnamed axis of {name}>",
            in_axes=in_axes,
            out_axes=out_axes,
            static_argnums=(static,) if isinstance(static, int) else tuple(static),
            axis_size=axis_size,
            name=name,
        )
        self.devices = devices
        self.backend = backend
        self.donate_argnums = (
            (donate_argnums,) if isinstance(donate_argnums, int) else tuple(donate_argnums)
        )
        self._in_flight = runtime.InFlight()  # bounds the eager calls' runs queued
        # Whether a call goes straight to the jitted map: no donation to check and
        # one process. Known after the first call (the process count is fixed once
        # JAX has run anything: jax.distributed.initialize must come first).
        self._direct = False
        # The programs (jax.jit's traces) the processes agreed on (compiler/agreement.py).
        self._agreed: weakref.WeakSet = weakref.WeakSet()

    @functools.cached_property
    def _jitted(self):
        """The jitted outermost map, made when first called outermost: most maps
        are nested ones, which only bind the map in their enclosing body."""
        return jax.jit(
            self._outermost_function(),
            inline=jax_api.INLINE_WHILE_TRACING,
            static_argnums=self.spec.static_argnums,
            donate_argnums=self.donate_argnums,
        )

    @jax_frames.api_boundary
    def __call__(self, *args, **kwargs):
        if trace.enclosing_axes():
            return self._call_nested(args, kwargs)
        run = self._jitted if self._direct else self._checked_run(args)
        try:
            outputs = run(*args, **kwargs)
        except (TypeError, ValueError) as error:
            moved = self._moved_to_mesh(args, kwargs)
            if moved is None:
                self._explain(error, args, kwargs)
                raise
            outputs = run(*moved[0], **moved[1])
        self._in_flight.dispatched(outputs)
        return outputs

    def __get__(self, instance, owner=None):
        """A map used as a method binds `self` as its first argument, as a function
        does (as with `jax.pmap`: `static_broadcasted_argnums=0` then makes `self`
        static, and `in_axes` counts it)."""
        if instance is None:
            return self
        return types.MethodType(self, instance)

    def _checked_run(self, args) -> Callable:
        """For a call that checks its donations or runs across processes (or is the
        first): check the donations, and the function that runs the call."""
        elsewhere = self._compile_only_devices
        runs_here = not elsewhere
        if not runs_here and jax_api.tracing_is_idle():  # a call, not a jax.jit's trace
            raise at_user_call_site(DeviceError(runtime.not_runnable_here(elsewhere))) from None
        if self.donate_argnums:
            try:
                check_donations(self.spec.name, self.donate_argnums, args)
            except PmapcError as error:
                raise at_user_call_site(error) from None
        several_processes = processes.process_count() > 1
        self._direct = runs_here and not (self.donate_argnums or several_processes)
        if several_processes:
            return lambda *args, **kwargs: self._call_across_processes(args, kwargs)
        return self._jitted

    @functools.cached_property
    def _compile_only_devices(self) -> list:
        """`devices=` as a list where they are a topology's, which XLA compiles for and
        this process cannot run on (`mesh_devices.compiles_only`); else empty. Read
        once, at the first checked call: `devices=` is fixed when the map is made,
        and most maps are nested ones, which never ask."""
        devices = mesh_devices.listed(self.devices)
        return devices if devices and mesh_devices.compiles_only(devices) else []

    def _moved_to_mesh(self, args, kwargs) -> tuple[list, dict] | None:
        """The call's arguments with every array committed elsewhere moved onto the
        nest's mesh, as `jax.pmap` moves them (`jax.jit` refuses them); None if none
        is, or if the arguments are wrong in another way. Only a call `jax.jit`
        refused gets here: arrays already in place cost nothing."""
        if processes.process_count() > 1:
            return None
        try:
            call = trace.flatten_call(self._global_spec(), args, kwargs)
            args_, kwargs_ = _with_static(call, call.leaves)
            mesh = self._mesh_of(self._jitted.trace(*args_, **kwargs_))
        except (PmapcError, TypeError, ValueError):
            return None
        leaves, moves = placement.onto_mesh(mesh, call.leaves, call.leaf_axes)
        if not moves:
            return None
        names = trace.argument_names(self.spec.fun, call.in_tree, self.spec.static_argnums)
        for index, source in moves:
            _log.info(
                "pmapc.pmap '%s': moved argument %s from %s to the mesh's devices "
                "(jax.pmap moves it too; put it there first to save the copy)",
                self.spec.name,
                names[index],
                source,
            )
        return _with_static(call, leaves)

    def _explain(self, error: Exception, args, kwargs) -> None:
        """Raise what is wrong with arguments `jax.jit` refused, in pmapc's terms, if
        pmapc can tell; else return (the caller re-raises `error`)."""
        if isinstance(error, PmapcError):
            return
        explained = self._argument_error(args, kwargs)
        if explained is not None:
            raise at_user_call_site(explained) from None

    @jax_frames.api_boundary
    def lower(self, *args, **kwargs) -> Lowered:
        """Trace and run the passes: the IR of every stage, ready to `.compile()`.

        Across processes, process-local arguments stand for the global values
        they are this process's rows of (as when calling)."""
        if trace.enclosing_axes():
            raise PmapcError(
                "'.lower()' is for the outermost pmapc.pmap function; call "
                "inner ones directly inside the outer body"
            )
        return lower(self, *args, **kwargs)

    def _global_values(self, args, kwargs) -> tuple[Sequence, dict]:
        """What to stage for a call: across processes, the global shapes process-local
        arguments are this process's rows of; otherwise the arguments, with arrays
        as their shapes and dtypes (staging reads no more, and an array committed
        to other devices than the nest's then stages as any other)."""
        if processes.process_count() == 1 or processes.holds_global_values(
            jax.tree_util.tree_leaves((args, kwargs))
        ):
            static = self.spec.static_argnums
            return (
                [a if i in static else _shapes_of_arrays(a) for i, a in enumerate(args)],
                _shapes_of_arrays(kwargs),
            )
        call = self._flatten(args, kwargs)
        return _with_static(call, processes.global_shapes(call))

    def _call_across_processes(self, args, kwargs):
        """A call on several processes (compiler/processes.py): global values go to
        the jitted map as they are; process-local ones become global arrays on the
        nest's mesh, and the results this process's part of them."""
        leaves = jax.tree_util.tree_leaves((args, kwargs))
        if processes.holds_global_values(leaves):
            if not any(jax_api.is_tracer(leaf) for leaf in leaves):  # else part of a jit's
                self._agree(self._jitted.trace(*args, **kwargs))
            return self._jitted(*args, **kwargs)
        call = self._flatten(args, kwargs)
        global_args, global_kwargs = _with_static(call, processes.global_shapes(call))
        traced = self._jitted.trace(*global_args, **global_kwargs)
        mesh = self._mesh_of(traced)
        self._agree(traced)
        given = jax.tree_util.tree_leaves(
            (tuple(a for i, a in enumerate(args) if i not in call.static_args), kwargs)
        )
        global_args, global_kwargs = _with_static(call, processes.global_leaves(call, given, mesh))
        outputs = self._jitted(*global_args, **global_kwargs)
        return jax.tree_util.tree_map(processes.to_local, outputs)

    def _agree(self, traced) -> None:
        """Before a program first runs across processes, check that every process runs
        it (compiler/agreement.py); a program agreed on runs without asking again."""
        if traced.jaxpr in self._agreed:
            return
        started = time.perf_counter()
        program = processes.program_of(traced, self.spec.fun, self.spec.name)
        try:
            agreement.agree(program, jax.process_index(), processes.process_count())
        except PmapcError as error:
            raise at_user_call_site(error) from None
        agreement.STATS.add(time.perf_counter() - started)
        self._agreed.add(traced.jaxpr)

    def _mesh_of(self, traced):
        """The nest's mesh, from `jax.jit`'s trace of a call on global arguments."""
        for eqn in traced.jaxpr.eqns:
            if eqn.primitive is primitives.map_p:
                return placement.concrete(eqn.params["mesh"])
        raise PmapcError(f"pmapc bug: no map in the traced '{self.spec.name}'; please report it")

    def _outermost_function(self):
        """The function `jax.jit` traces: this map, outermost, bound on its mesh.

        It holds this map weakly: this map holds it (through `_jitted`), and a
        cycle would keep a dropped map, and everything JAX keeps for it (its
        jaxprs, lowerings and executables), alive until the next cyclic
        collection. Without one, the map is freed when the last reference goes."""
        this = weakref.ref(self)

        def outermost(*args, **kwargs):
            self = this()
            assert self is not None, "a map's jitted function outlived the map"
            call = self._flatten(args, kwargs, self._global_spec())
            outs, out_tree = self._traced(
                functools.partial(
                    trace.bind, devices=self.devices, backend=self.backend, outermost=True
                ),
                call,
            )
            return jax.tree_util.tree_unflatten(out_tree, outs)

        outermost.__name__ = outermost.__qualname__ = self.spec.name
        return outermost

    def _argument_error(self, args, kwargs) -> PmapcError | None:
        """What is wrong with the arguments `jax.jit` refused, in pmapc's terms."""
        try:
            call = trace.flatten_call(self.spec, args, kwargs)
        except PmapcError as error:
            return error
        for index, value in call.static_args.items():
            try:
                hash(value)
            except TypeError as error:
                return ArgumentError(
                    jax_messages.explained(
                        jax_messages.not_hashable(value, error),
                        f"static_broadcasted_argnums argument {index} must be hashable, got a "
                        f"{type(value).__name__}; pass a tuple or another hashable value",
                    )
                )
        return None

    def _call_nested(self, args, kwargs):
        if self.devices is not None:
            raise at_user_call_site(
                DeviceError(
                    jax_messages.explained(
                        jax_messages.devices_on_inner_map(),
                        "devices= was given to the inner pmapc.pmap over "
                        f"'{self.spec.axis_name}'; only the outermost map chooses devices: "
                        "pass devices= there",
                    )
                )
            )
        call = self._flatten(args, kwargs)
        outs, out_tree = self._traced(trace.bind, call)
        return jax.tree_util.tree_unflatten(out_tree, outs)

    def _flatten(self, args, kwargs=None, spec: trace.MapSpec | None = None) -> trace.MappedCall:
        try:
            return trace.flatten_call(spec or self.spec, args, kwargs)
        except PmapcError as error:
            raise at_user_call_site(error) from None

    def _global_spec(self) -> trace.MapSpec:
        """The spec for global values: `axis_size` counts one process's rows (as in
        JAX 0.4), so across processes the global size is that times the count."""
        count = processes.process_count()
        if self.spec.axis_size is None or count == 1:
            return self.spec
        return dataclasses.replace(self.spec, axis_size=self.spec.axis_size * count)

    def _traced(self, step, call):
        """Run a tracing step; its errors name the line of user code that caused them."""
        try:
            return step(self.spec, call)
        except PmapcError as error:
            raise from_traceback(error, error.__traceback__) from None


@jax_frames.api_boundary
def lower(
    fun: Callable,
    *args,
    target: Target | str = DEFAULT_TARGET,
    replica_groups: GroupForm | str = DEFAULT_GROUP_FORM,
    ragged: RaggedForm | str | None = None,
    **kwargs,
) -> Lowered:
    """Trace any function that calls `pmapc.pmap` (a plain function, a `jax.jit` of
    one, or a `pmapc.pmap` function) and run the passes for `target` ("partitions",
    what `jax.jit` runs, or "replicas"), writing replica groups in partition form as
    `replica_groups` says: "named" (mesh axes, where groups are whole axes) or
    "dense" (device ids). `ragged` lowers a `ragged_all_to_all` as XLA's own op
    ("native", which XLA runs on GPU and TPU) or as all_to_alls of padded slices
    ("expanded", which every XLA runs); by default, native where the devices run it.

    Like `jax.make_jaxpr`, it stages the whole function: ops around the maps run
    on every device of the mesh. The result has the IR of every stage. Across
    processes, a `pmapc.pmap` function takes process-local arguments (or global
    ones) as when it is called; any other function takes global values, as
    `jax.jit` does.
    """
    start = time.perf_counter()
    target = _option("target", Target, target)
    replica_groups = _option("replica_groups", GroupForm, replica_groups)
    ragged_form = None if ragged is None else _option("ragged", RaggedForm, ragged)
    static_argnums: tuple[int, ...] = ()
    if isinstance(fun, MappedFunction):
        args, kwargs = fun._global_values(args, kwargs)
        staged, devices, backend = fun._jitted, fun.devices, fun.backend
        static_argnums = fun.spec.static_argnums
    else:
        staged, devices, backend = (fun if hasattr(fun, "trace") else jax.jit(fun)), None, None
    traced = staged.trace(*args, **kwargs)
    traced_at = time.perf_counter()
    if devices is None:  # a function around a map: the devices its outermost map found
        devices = placement.nest_devices(traced.jaxpr)
    # JAX named the arguments of `outermost(*args)`; name them after the user's.
    names = (
        trace.argument_names(fun.spec.fun, traced.in_tree, static_argnums)
        if isinstance(fun, MappedFunction)
        else None
    )
    if ragged_form is None:
        ragged_form = options.ragged_form_for(mesh_devices.platforms(devices, backend))
    compilation = driver.compile_traced(
        traced,
        getattr(fun, "__name__", "program"),
        target=target,
        replica_groups=replica_groups,
        ragged=ragged_form,
        argument_names=names,
    )
    compilation.timings = {"trace": traced_at - start, **compilation.timings}
    names = ir.argument_names(ir.functions(compilation.module)["main"])
    devices = placement.devices_for(compilation.mesh, devices)
    return Lowered(compilation, CallSignature.of(traced, names, static_argnums), devices, backend)


def _option(name: str, kind: type[options.Option], value) -> options.Option:
    """A `pmapc.lower` option read as its type (where it enters)."""
    member = options.parse(kind, value)
    if member is None or (kind is GroupForm and not options.writable(member)):
        allowed = " or ".join(map(repr, options.choices(kind)))
        raise ArgumentError(f"pmapc.lower: {name}= takes {allowed}, got {value!r}")
    return member


def _with_static(call: trace.MappedCall, leaves) -> tuple[list, dict]:
    """(args, kwargs) of a call with its dynamic leaves replaced by `leaves`."""
    positional, kwargs = jax.tree_util.tree_unflatten(call.in_tree, leaves)
    args = list(positional)
    for index in sorted(call.static_args):
        args.insert(index, call.static_args[index])
    return args, kwargs


def _shapes_of_arrays(tree):
    """`tree` with each `jax.Array` in it as a `jax.ShapeDtypeStruct`."""
    return jax.tree_util.tree_map(
        lambda x: (
            jax.ShapeDtypeStruct(x.shape, x.dtype, weak_type=jax_api.is_weakly_typed(x))
            if isinstance(x, jax.Array)
            else x
        ),
        tree,
    )


def check_donations(name: str, donate_argnums, args) -> None:
    """Refuse an argument number past the call's arguments, and a buffer donated
    twice (XLA cannot give one buffer to two outputs)."""
    trace.check_argnums(name, "donate_argnums", donate_argnums, len(args))
    seen: dict[int, int] = {}
    for argnum in donate_argnums:
        for leaf in jax.tree_util.tree_leaves(args[argnum]):
            if id(leaf) in seen and seen[id(leaf)] != argnum:
                raise ArgumentError(
                    f"the same buffer is donated twice, by arguments {seen[id(leaf)]} and "
                    f"{argnum}; pass distinct arrays or donate only one of them"
                )
            seen[id(leaf)] = argnum
