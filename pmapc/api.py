"""`pmapc.pmap`: jax.pmap's interface (JAX 0.4 semantics) for nested maps.

The outermost `pmapc.pmap` call traces the whole nest to pmapc IR, compiles
it once per (argument shapes and dtypes, static arguments, devices) and runs
it on a device mesh; calls inside a mapped body become nested maps.
"""

from __future__ import annotations

import dataclasses
import functools
import threading
import time
from collections.abc import Callable, Sequence

import jax

import pmapc.compiler
import pmapc.lowering
import pmapc.passes
from pmapc import ir
from pmapc.compiler import driver, xla
from pmapc.errors import (
    ArgumentError,
    AxisError,
    DeviceError,
    DiagnosticError,
    PmapcError,
    ShapeError,
)
from pmapc.lowering import jax_api, trace
from pmapc.lowering.locations import at_user_call_site, from_traceback

jax_api.hide_from_locations(ir, pmapc.compiler, pmapc.lowering, pmapc.passes)


def pmap(
    fun: Callable | None = None,
    axis_name: str | None = None,
    *,
    in_axes=0,
    out_axes=0,
    static_broadcasted_argnums: int | Sequence[int] = (),
    devices: Sequence[jax.Device] | None = None,
    backend: str | None = None,
    axis_size: int | None = None,
    donate_argnums: int | Sequence[int] = (),
):
    """Map `fun` over `axis_name`; nest calls to map over a device mesh.

    Same arguments as `jax.pmap`. `donate_argnums` is accepted and ignored
    (donation is a hint); `devices` is only allowed on the outermost map.
    """
    settings = dict(axis_name=axis_name, in_axes=in_axes, out_axes=out_axes,
                    static_broadcasted_argnums=static_broadcasted_argnums, devices=devices,
                    backend=backend, axis_size=axis_size, donate_argnums=donate_argnums)
    if fun is None:
        return functools.partial(pmap, **settings)
    return MappedFunction(fun, **settings)


def use_host_devices(count: int) -> None:
    """Give JAX `count` virtual CPU devices; call before JAX first uses a device."""
    xla.use_host_devices(count)


class MappedFunction:
    """A function mapped with `pmapc.pmap`: call it, or `.lower(*args)` it."""

    def __init__(self, fun, *, axis_name, in_axes, out_axes, static_broadcasted_argnums,
                 devices, backend, axis_size, donate_argnums):
        if not callable(fun):
            raise TypeError(f"pmapc.pmap needs a callable, got {type(fun).__name__}")
        functools.update_wrapper(self, fun)
        static = static_broadcasted_argnums
        self.spec = trace.MapSpec(
            fun=fun,
            axis_name=axis_name if axis_name is not None else f"_pmapc_axis_{id(self)}",
            in_axes=in_axes, out_axes=out_axes,
            static_argnums=(static,) if isinstance(static, int) else tuple(static),
            axis_size=axis_size, name=getattr(fun, "__name__", "body"),
        )
        self.devices = devices
        self.backend = backend
        self.donate_argnums = donate_argnums
        self._cache: dict = {}
        self._lock = threading.Lock()

    def __call__(self, *args):
        if trace.enclosing_axes():
            return self._call_nested(args)
        key, leaves = self._signature_of(args)
        try:
            compiled = self._cache.get(key)
        except TypeError:  # an unhashable static argument: _compile_for says so
            key, compiled = None, None
        if compiled is None:
            compiled = self._compile_for(args, key)
        return compiled.run(leaves)

    def lower(self, *args) -> Lowered:
        """Trace and run the passes: the IR of every stage, ready to `.compile()`."""
        if trace.enclosing_axes():
            raise PmapcError("'.lower()' is for the outermost pmapc.pmap function; call "
                             "inner ones directly inside the outer body")
        call = self._flatten(args)
        return self._lower(call, record_stages=True)

    # -- nested ----------------------------------------------------------------

    def _call_nested(self, args):
        if self.devices is not None:
            raise at_user_call_site(DeviceError(
                f"devices= was given to the inner pmapc.pmap over '{self.spec.axis_name}'; "
                "only the outermost map chooses devices (pass devices= there)"))
        call = self._flatten(args)
        outs, out_tree = self._traced(trace.bind, call)
        return jax.tree_util.tree_unflatten(out_tree, outs)

    # -- outermost -------------------------------------------------------------

    def _flatten(self, args) -> trace.MappedCall:
        try:
            call = trace.flatten_call(self.spec, args)
            check_donations(self.donate_argnums, args)
        except PmapcError as error:
            raise at_user_call_site(error) from None
        if not trace.enclosing_axes() and any(jax_api.is_tracer(x) for x in call.leaves):
            raise at_user_call_site(PmapcError(
                f"the pmapc.pmap function '{self.spec.name}' was called inside a JAX "
                "transformation (jax.jit, jax.grad, ...); pmapc compiles and runs the "
                "outermost map itself: call it outside the transformation, or move the "
                "transformation into the mapped function"))
        return call

    def _signature_of(self, args) -> tuple[object, list]:
        """(cache key, leaves) of a call: argument structure, leaf types, shapes and
        dtypes, and static arguments.

        This is all a warm call computes before running: the full checks of
        `_flatten` run only when a key is new.
        """
        statics = self.spec.static_argnums
        dynamic = tuple(a for i, a in enumerate(args) if i not in statics) if statics else args
        static = tuple(args[i] for i in statics if i < len(args))
        leaves, tree = jax.tree_util.tree_flatten(dynamic)
        if self.donate_argnums:
            try:
                check_donations(self.donate_argnums, args)
            except PmapcError as error:
                raise at_user_call_site(error) from None
        kinds = tuple([(type(x), getattr(x, "shape", None), getattr(x, "dtype", None))
                       for x in leaves])
        return (tree, kinds, static), leaves

    def _compile_for(self, args, key) -> Compiled:
        """Check the call, trace, run the passes and compile (once per key)."""
        with self._lock:
            compiled = self._cache.get(key) if key is not None else None
            if compiled is not None:
                return compiled
            call = self._flatten(args)
            if key is None:
                raise at_user_call_site(ArgumentError(
                    "static_broadcasted_argnums arguments must be hashable, got "
                    f"{[type(v).__name__ for v in call.static_args.values()]}; pass a tuple "
                    "or another hashable value"))
            compiled = self._lower(call, record_stages=False).compile()
            self._cache[key] = compiled
            return compiled

    def _lower(self, call: trace.MappedCall, record_stages: bool) -> Lowered:
        start = time.perf_counter()
        module, out_tree = self._traced(trace.lower_to_module, call)
        traced = time.perf_counter()
        try:
            compilation = driver.run_pipeline(module, record_stages=record_stages)
        except DiagnosticError as error:
            raise typed_error(error) from None
        compilation.timings = {"trace": traced - start, **compilation.timings}
        return Lowered(compilation, out_tree, self.devices, self.backend)

    def _traced(self, step, call):
        """Run a tracing step; its errors name the line of user code that caused them."""
        try:
            return step(self.spec, call)
        except PmapcError as error:
            raise from_traceback(error, error.__traceback__) from None


_AXIS_MESSAGES = ("is not bound here", "names axis", "twice; name each axis", "sibling map")


def check_donations(donate_argnums, args) -> None:
    """Refuse a buffer donated twice (pmapc does not donate; a double donation is a bug)."""
    argnums = (donate_argnums,) if isinstance(donate_argnums, int) else tuple(donate_argnums)
    seen: dict[int, int] = {}
    for argnum in argnums:
        if argnum >= len(args):
            continue
        for leaf in jax.tree_util.tree_leaves(args[argnum]):
            if id(leaf) in seen and seen[id(leaf)] != argnum:
                raise ArgumentError(
                    f"the same buffer is donated twice, by arguments {seen[id(leaf)]} and "
                    f"{argnum}; pass distinct arrays or donate only one of them")
            seen[id(leaf)] = argnum


def typed_error(error: DiagnosticError) -> PmapcError:
    """A DiagnosticError from the passes as an AxisError or ShapeError at the user's line."""
    diagnostic = error.diagnostics[0]
    kind = AxisError if any(m in diagnostic.message for m in _AXIS_MESSAGES) else ShapeError
    if diagnostic.loc is None:
        return kind(diagnostic.message)
    located = kind(f"{diagnostic.loc.file}:{diagnostic.loc.line}: {diagnostic.message}")
    located.user_location = (diagnostic.loc.file, diagnostic.loc.line)
    return located


@dataclasses.dataclass
class Lowered:
    """A traced program and the IR after each stage."""

    compilation: driver.Compilation
    out_tree: object
    devices: Sequence[jax.Device] | None
    backend: str | None

    @property
    def stages(self) -> dict[str, str]:
        """Stage name ('pmapc', each pass name, 'stablehlo') -> IR text."""
        return self.compilation.stages

    @property
    def timings(self) -> dict[str, float]:
        """Seconds spent tracing ('trace') and in each pass (its verification included)."""
        return self.compilation.timings

    def as_text(self, stage: str = "stablehlo") -> str:
        if stage not in self.stages:
            raise ValueError(f"unknown stage '{stage}'; stages are {list(self.stages)}")
        return self.stages[stage]

    def compile(self) -> Compiled:
        try:
            executable = driver.compile_for_devices(self.compilation, self.devices,
                                                    self.backend)
        except DeviceError as error:
            raise at_user_call_site(error) from None
        return Compiled(executable, self.out_tree)


class Compiled:
    """An XLA executable for one signature; call it with the same kinds of arguments."""

    def __init__(self, executable, out_tree):
        self.executable = executable
        self.out_tree = out_tree

    def __call__(self, *args):
        """Call with the (non-static) arguments of the signature this was compiled for."""
        leaves = [trace.as_device_value(x) for x in jax.tree_util.tree_leaves(args)]
        outputs = self.executable(*leaves)
        return jax.tree_util.tree_unflatten(self.out_tree, outputs)

    def run(self, leaves):
        """Run on the flattened arguments of a call whose signature compiled this."""
        outputs = self.executable.run(leaves)
        return jax.tree_util.tree_unflatten(self.out_tree, outputs)

    def as_text(self) -> str:
        """The HLO XLA compiled, after its optimizations."""
        return xla.hlo_text(self.executable.loaded)
