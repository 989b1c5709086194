"""An outermost map inside `jax.jit`: pmapc's per-device program in JAX's module.

When JAX lowers a jitted function that holds an outermost `pmapc_map`, the
map's lowering rule (registered by this module, when imported) runs the whole
pmapc compiler on that map and hands JAX the result, unless a map of the same
structure (lowering/structure.py: float literals aside) was compiled lately,
whose program it takes from `SHARED_PROGRAMS`, writing this map's literals into it:

    trace      lowering/trace.py: the map as pmapc IR (a one-map `@main`)
    passes     compiler/pipeline.py: `embedded_pipeline`, the default one for the
               partition form with dense groups, less MLIR's canonicalize and
               cse (XLA simplifies after), ragged_all_to_all native or expanded
               by the lowering's platforms
    embed      a `jax.shard_map` over the nest's mesh, every axis manual, whose
               body is the per-device `main` (its other functions inserted
               into JAX's module)

`pmapc.split` of each argument and result becomes the shard_map's in and out
specs, so JAX places the inputs and assembles the outputs; everything around
the map (other ops, `grad`, `vmap`, donation, dispatch) is JAX's.

The program embedded keeps its replica groups as device ids: groups named by
mesh axes would bring an `sdy.mesh` op of pmapc's into JAX's module beside
JAX's own meshes, and JAX (0.10 to 0.12) then merges meshes of the same axes
whatever their devices and rebuilds the outputs of a call across processes
on the wrong one (tests/py/test_multiprocess.py: an IndivisibleError).
`pmapc.lower`, `pmapc run` and `pmapc trace` compile pmapc's module alone,
and name them.
"""

from __future__ import annotations

import collections
import dataclasses
import itertools
import json
import math
import threading
import time
import weakref
from collections.abc import Callable, Sequence

import jax
import numpy as np
from jax.sharding import PartitionSpec

from pmapc import dialect, hlo, ir
from pmapc.compiler import driver, persistent, pipeline, runtime
from pmapc.errors import PmapcError
from pmapc.lowering import (
    jax_api,
    jax_lowering,
    jax_structure,
    placement,
    primitives,
    structure,
    structure_digest,
    trace,
)
from pmapc.lowering.locations import at_user_call_site
from pmapc.options import GroupForm, Target, ragged_form_for
from pmapc.passes import ragged
from pmapc.passes.manager import cyclic_gc_paused
from pmapc.rewriter import unobserved

spmd_call_p = jax_api.Primitive("pmapc_spmd_call")
spmd_call_p.multiple_results = True


@jax_api.cache_weakly
@dataclasses.dataclass(frozen=True, eq=False)
class SpmdProgram:
    """A map compiled for its mesh: the per-device module and how its values are split.

    The parameter of the `spmd_call_p` equation in the jitted function's jaxpr, so
    it lives as long as JAX keeps that jaxpr (its cache entry for the pmapc
    function) and no longer: JAX's caches keyed on parameters hold it weakly."""

    bytecode: bytes  # the per-device module, locations included
    in_specs: tuple[PartitionSpec, ...]
    out_specs: tuple[PartitionSpec, ...]
    block_avals_out: tuple
    host_callbacks: tuple  # what its host-callback ops call, by index

    def to_bytes(self) -> bytes:
        """The program as a persistent cache entry (one without host callbacks): a
        JSON header of its specs and block shapes, then its bytecode."""
        assert not self.host_callbacks, "a program that calls back is not kept"
        header = {
            "in_specs": [list(spec) for spec in self.in_specs],
            "out_specs": [list(spec) for spec in self.out_specs],
            "block_avals_out": [
                [list(aval.shape), str(aval.dtype), aval.weak_type] for aval in self.block_avals_out
            ],
        }
        encoded = json.dumps(header).encode()
        return len(encoded).to_bytes(4, "little") + encoded + self.bytecode

    @classmethod
    def from_bytes(cls, entry: bytes) -> SpmdProgram:
        """A program `to_bytes` wrote."""
        size = int.from_bytes(entry[:4], "little")
        header = json.loads(entry[4 : 4 + size])
        return cls(
            bytecode=entry[4 + size :],
            in_specs=tuple(_read_spec(spec) for spec in header["in_specs"]),
            out_specs=tuple(_read_spec(spec) for spec in header["out_specs"]),
            block_avals_out=tuple(
                jax_api.ShapedArray(tuple(shape), jax.numpy.dtype(dtype), weak_type=weak)
                for shape, dtype, weak in header["block_avals_out"]
            ),
            host_callbacks=(),
        )


def _read_spec(entries: list) -> PartitionSpec:
    """A spec as `to_bytes` wrote it (a dimension: None, an axis, or a list of axes)."""
    return PartitionSpec(*(tuple(e) if isinstance(e, list) else e for e in entries))


class SharedPrograms:
    """The per-device programs of the last `size` map structures compiled
    (lowering/structure.py), least recently used first out: a new map of a known
    structure (the next program of a sweep) takes its program from here, its
    float literals written into it as constants (`Literals`), instead of going
    through the compiler."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._programs: collections.OrderedDict[tuple, SpmdProgram] = collections.OrderedDict()
        self._lock = threading.Lock()  # threads may lower jitted functions at once
        self.hits = self.misses = 0

    def get(self, key: tuple, compile: Callable[[], SpmdProgram]) -> SpmdProgram:
        """The program of structure `key`, made by `compile()` if none is kept."""
        with self._lock:
            program = self._programs.get(key)
            if program is not None:
                self.hits += 1
                self._programs.move_to_end(key)
                return program
            self.misses += 1
        program = compile()
        if program.host_callbacks:  # what its callbacks call is its function's own
            return program
        with self._lock:
            self._programs[key] = program
            if len(self._programs) > self.size:
                self._programs.popitem(last=False)
        return program

    # What `jax.clear_caches()` calls (jax_api.register_cache).
    def cache_clear(self) -> None:
        with self._lock:
            self._programs.clear()
            self.hits = self.misses = 0

    def cache_info(self) -> str:
        return f"hits={self.hits} misses={self.misses} currsize={len(self._programs)}"

    def cache_keys(self) -> list[tuple]:
        return list(self._programs)


# Each entry holds one per-device module's bytecode (a few KiB for a small step).
SHARED_PROGRAMS = SharedPrograms(64)
jax_api.register_cache(SHARED_PROGRAMS, "pmapc: per-device programs by map structure")


def lower_outermost(ctx, *operands, mesh, **params) -> Sequence:
    """`map_p`'s lowering rule inside `jax.jit`: an outermost map through pmapc
    (see the module docstring); a nested map lowered on its own is refused."""
    primitives.check_in_its_program(mesh, params["axis_name"])
    try:
        mesh = placement.concrete(mesh)
    except PmapcError as error:
        raise at_user_call_site(error) from None
    # The compiler's Python objects are freed by reference counting; the cyclic
    # collector, which walks the whole heap (JAX's too), waits until it is done.
    with cyclic_gc_paused():
        program, constants, built = _program(ctx, mesh, params)
        return _lower_on_mesh(ctx, program, constants, built, mesh, operands)


def _program(ctx, mesh, params) -> tuple[SpmdProgram, tuple, Built | None]:
    """The program of the map (`ctx` its rule context), shared with the maps of its
    structure when it has one; the constants its leading operands take; and its
    module, if compiled here."""
    shared = structure.shared_map(params)
    if shared is None:
        program, built = compile_map(ctx, mesh, params, ctx.avals_in)
        return program, (), built
    constant_avals = shared.params["jaxpr"].in_avals[: len(shared.constants)]
    avals_in = [*constant_avals, *ctx.avals_in]
    context = jax_structure.trace_context()
    key = (shared.key, tuple(ctx.avals_in), tuple(ctx.avals_out), mesh, _platforms(ctx), context)

    compiled: list[Built] = []  # the module, if `made` compiles one

    def made() -> SpmdProgram:
        kept = _kept_by_structure((shared.key, context), mesh, avals_in, ctx)
        if kept is not None and kept.program is not None:
            return kept.program
        program, module = compile_map(ctx, mesh, shared.params, avals_in, kept)
        if module is not None:
            compiled.append(module)
        return program

    program = SHARED_PROGRAMS.get(key, made)
    return program, shared.constants, compiled[0] if compiled else None


def compile_map(
    ctx, mesh, params, avals_in, kept: _Kept | None = None
) -> tuple[SpmdProgram, Built | None]:
    """The map of `map_p`'s parameters `params` on operands `avals_in` as pmapc IR
    (lowered inside JAX's lowering that `ctx` is a rule context of by
    `trace.lower_map`, in its MLIR context, and cleaned there by `trace.map_ir`),
    through the passes for the partition target; kept in JAX's persistent cache as
    `kept` says, or (None) by its lowered IR. With the program, the module the
    passes made (None for a program found in the persistent cache)."""
    avals_out = ctx.avals_out
    start = time.perf_counter()
    one_map_jaxpr = jax_lowering.one_equation(
        primitives.map_p, {**params, "mesh": mesh}, list(avals_in), "pmapc's outermost map"
    )
    lowered = trace.lower_map(ctx, one_map_jaxpr, params["name"])
    if kept is None:
        kept = _kept_by_ir(lowered, mesh, avals_in, ctx)
        if kept.program is not None:
            return kept.program, None
    compilation = driver.compile_ir(
        trace.map_ir(lowered, params["name"]),
        time.perf_counter() - start,
        passes=pipeline.embedded_pipeline(ragged_form_for(_platforms(ctx))),
    )
    if compilation.mesh != placement.pmapc_mesh(mesh):
        raise PmapcError(
            f"pmapc bug: the passes found the mesh {compilation.mesh}, the "
            f"tracer {placement.pmapc_mesh(mesh)}; please report it"
        )
    arguments, results = runtime.signatures(compilation.module, compilation.mesh)
    out_specs = tuple(_spec(sig, aval) for sig, aval in zip(results, avals_out))
    program = SpmdProgram(
        bytecode=ir.bytecode(compilation.module),
        in_specs=tuple(_spec(sig, aval) for sig, aval in zip(arguments, avals_in)),
        out_specs=out_specs,
        block_avals_out=tuple(map(_block_of, avals_out, out_specs, itertools.repeat(mesh))),
        host_callbacks=compilation.host_callbacks,
    )
    kept.store(program)
    return program, Built(compilation.module)


def _platforms(ctx) -> tuple[str, ...]:
    return tuple(ctx.module_context.platforms)


@dataclasses.dataclass
class _Kept:
    """A map's program in JAX's persistent cache (compiler/persistent.py): `program`
    if it was there; else where `store` puts the one compiled (nowhere without a
    cache, or for a program that calls back to Python)."""

    program: SpmdProgram | None = None
    entries: persistent.Entries | None = None
    key: str | None = None

    @classmethod
    def at(cls, entries: persistent.Entries, key: str) -> _Kept:
        """The program under `key`, or where to store it."""
        entry = entries.get(key)
        if entry is None:
            return cls(entries=entries, key=key)
        return cls(program=SpmdProgram.from_bytes(entry))

    def store(self, program: SpmdProgram) -> None:
        if self.entries is not None and self.key is not None and not program.host_callbacks:
            self.entries.put(self.key, program.to_bytes())


def _described(mesh, avals_in, ctx) -> tuple:
    """What decides a map's program besides its IR or structure: its abstract values
    in and out, the mesh, the platforms and the compiler's options."""
    platforms = _platforms(ctx)
    options = (Target.PARTITIONS, GroupForm.DENSE, ragged_form_for(platforms))
    return (tuple(avals_in), tuple(ctx.avals_out), placement.pmapc_mesh(mesh), platforms, options)


def _kept_by_structure(structure_key, mesh, avals_in, ctx) -> _Kept | None:
    """A shared map's program in the persistent cache, keyed by its structure (what
    the passes would be run on is not lowered first); None without a cache, or
    where the structure is known only in this process (lowering/structure_digest.py)."""
    entries = persistent.Entries.configured()
    if entries is None:
        return None
    digest = structure_digest.stable_digest(structure_key)
    if digest is None:
        return None
    return _Kept.at(
        entries,
        persistent.program_key("structure", digest.encode(), _described(mesh, avals_in, ctx)),
    )


def _kept_by_ir(lowered, mesh, avals_in, ctx) -> _Kept:
    """A map's program in the persistent cache, keyed by its lowered pmapc IR.

    A miss writes bytecode twice, of two modules: here the pmapc IR before the
    passes, whose digest is the key, and in `compile_map` the per-device program
    they make of it (the passes rewrite this module in place), which is the
    `SpmdProgram`'s bytecode and, as it is, the entry `_Kept.store` writes. Neither
    stands for the other: the key must be known before the passes run, since a
    restarted process looks it up instead of running them, and the entry is what
    they made. A map kept by its structure (`_kept_by_structure`) writes only the
    program's."""
    entries = persistent.Entries.configured()
    if entries is None or lowered.host_callbacks:
        return _Kept()
    key = persistent.program_key("ir", ir.bytecode(lowered.module), _described(mesh, avals_in, ctx))
    return _Kept.at(entries, key)


def _spec(signature: runtime.Signature, aval) -> PartitionSpec:
    """The shard_map spec of a value: its split over its own dimensions. A typed PRNG
    key's module type has the key's data as trailing dimensions (a threefry key is
    two uint32), which are never split and which the key array does not have."""
    return PartitionSpec(*signature.spec()[: len(aval.shape)])


def _lower_on_mesh(
    ctx, program: SpmdProgram, constants: tuple, built: Built | None, mesh, operands
) -> Sequence:
    """`program` on every device of `mesh`, lowered where the map's rule context `ctx`
    stands: a `shard_map` over the mesh, every axis manual, whose body calls the
    program on the blocks (`spmd_call_p`), lowered by JAX's rule without being
    traced. `constants` are the values of the program's leading arguments (literals
    of the body), which the embedding writes into it (`Literals`); `built`, the
    module just compiled, if it was."""
    in_specs = program.in_specs[len(constants) :]
    blocks = [_block_of(aval, spec, mesh) for aval, spec in zip(ctx.avals_in, in_specs)]
    params = {"program": program, "literals": Literals.of(constants), "built": built}
    body = jax_lowering.one_equation(spmd_call_p, params, blocks, "pmapc's per-device program")
    return jax_lowering.lower_on_mesh(ctx, operands, body, mesh, in_specs, program.out_specs)


def _block_of(aval, spec: PartitionSpec, mesh):
    """A device's block of a value `spec` splits over the axes of `mesh` (a JAX mesh)."""
    shape = list(aval.shape)
    for dim, axes in enumerate(spec):
        if axes is not None:
            names = axes if isinstance(axes, tuple) else (axes,)
            shape[dim] //= math.prod(mesh.shape[name] for name in names)
    return jax_api.ShapedArray(tuple(shape), aval.dtype, weak_type=aval.weak_type)


@dataclasses.dataclass(frozen=True)
class Literals:
    """The values of a program's leading arguments, the float literals hoisted out of
    its map's structure (lowering/structure.py), compared by their bits (-0.0 is
    not 0.0 here, where JAX's caches key a lowering by its parameters).

    The embedding writes them into the program as constants, where XLA sees
    literals as it sees JAX's: passed in as arguments of the per-device function,
    they make XLA's compile of a large training step slower for the same optimized
    module (benchmarks/scaling.py, the training-step series)."""

    bits: tuple[tuple[str, bytes], ...]  # each value's dtype name and bytes

    @classmethod
    def of(cls, values) -> Literals:
        arrays = [np.asarray(value) for value in values]
        return cls(tuple((array.dtype.name, array.tobytes()) for array in arrays))

    def values(self) -> list[np.ndarray]:
        # Scalars, each (structure.py hoists no array): a reshape to () says so.
        return [
            np.frombuffer(data, jax.numpy.dtype(dtype)).reshape(()) for dtype, data in self.bits
        ]


@dataclasses.dataclass(eq=False)  # compared by identity, as a parameter
class Built:
    """A per-device module just compiled, in the MLIR context of the lowering that
    compiled it: the embedding takes its ops as they stand, instead of reading the
    program's bytecode back (a new program's first call, benchmarks/new_programs.py)."""

    module: ir.Module


def _spmd_call_abstract_eval(*avals, program, literals, built):
    return list(program.block_avals_out)


def _spmd_call_lowering(ctx, *blocks, program, literals, built):
    module_context = ctx.module_context
    return embed_program(
        program.bytecode if built is None else built.module,
        module_context.module,
        module_context.symbol_table,
        module_context.new_channel,
        _host_callback_adder(module_context, program.host_callbacks),
        literals.values(),
        list(blocks),
    )


def _literal_constants(main, values) -> list[ir.Value]:
    """Constants of `values` (float scalars) where JAX is lowering, one for each
    leading argument of the embedded `main`, of its type."""
    b = unobserved(ir.current_insertion_point(), main.location)
    types = ir.function_type(main).inputs
    return [
        hlo.constant(b, ir.float_splat_attr(type_, float(value)), type_)
        for value, type_ in zip(values, types)
    ]


# Where each target module's next `_fresh_prefix` scan starts, by the module
# (JAX's ModuleContext, a slots dataclass, takes no attribute of pmapc's, and its
# module is the same object for the whole lowering); an entry goes with its module.
_NEXT_PREFIX: weakref.WeakKeyDictionary[ir.Module, int] = weakref.WeakKeyDictionary()
_NEXT_PREFIX_LOCK = threading.Lock()  # threads may lower jitted functions at once


def _fresh_prefix(target: ir.Module, symbol_table, names) -> str:
    """`pmapcK_` for the first K, from where the last scan of JAX's module `target`
    ended, under which none of `names` is a symbol of `target` yet.

    Each embedded program takes the next number, so a function of many outermost
    maps looks up about one prefix a map, not one for each map before it. The
    names are the same in every process that lowers the same function (JAX lowers
    its maps in the same order in each, and the numbers depend on nothing else),
    so that JAX's persistent cache finds its executable again after a restart."""
    with _NEXT_PREFIX_LOCK:
        start = _NEXT_PREFIX.get(target, 0)
    for number in itertools.count(start):
        prefix = f"pmapc{number}_"
        if all(prefix + name not in symbol_table for name in names):
            with _NEXT_PREFIX_LOCK:
                _NEXT_PREFIX[target] = number + 1
            return prefix
    raise AssertionError("unreachable")


def _host_callback_adder(module_context, host_callbacks: tuple) -> Callable[[int], int]:
    """index in `host_callbacks` -> index among the callbacks of JAX's module, each
    callback added to JAX's module (which XLA compiles with them) once."""
    indices: dict[int, int] = {}

    def add(index: int) -> int:
        if index not in indices:
            module_context.add_host_callback(host_callbacks[index])
            indices[index] = len(module_context.host_callbacks) - 1
        return indices[index]

    return add


# The ops that may carry a channel handle (collectives; send and recv, as JAX
# lowers host transfers) or call back to Python: the only ones `embed_program`
# reads, since reading every op's attributes grows with the whole program
# (benchmarks/scaling.py).
_RENUMBERED_OPS = frozenset(
    [
        *hlo.COLLECTIVE_OPS,
        "stablehlo.collective_broadcast",
        "stablehlo.send",
        "stablehlo.recv",
        "stablehlo.custom_call",
    ]
)


def embed_program(
    module: bytes | str | ir.Module,
    target: ir.Module,
    symbol_table,
    new_channel: Callable[[], int],
    host_callback: Callable[[int], int],
    literals: Sequence[np.ndarray],
    blocks: Sequence[ir.Value],
) -> list[ir.Value]:
    """Run the per-device program `module` (bytecode or text, or a module in `target`'s
    context, whose ops it takes) on `blocks` where JAX is lowering (in the body of
    the `sdy.manual_computation` of `_lower_on_mesh`'s shard_map, in `target`'s
    context): the values its `main` returns.

    `main`'s ops are put there as they are, its leading arguments constants of
    `literals` (where XLA sees them as it sees JAX's literals): a call of `main`
    would give XLA more to compile than JAX's own shard_map, whose body stands in
    the manual computation (benchmarks/new_programs.py). Its other functions move into
    `target`, each renamed `prefix + name` (`_fresh_prefix`) and made private.
    Collectives get fresh channel handles from `new_channel()` (unique in
    `target`; a native ragged_all_to_all its channel id), host callbacks the index
    `host_callback(index)` among `target`'s callbacks.
    """
    if isinstance(module, ir.Module):
        assert module.context == target.context, "a module embedded from another context"
        source = module
    else:
        source = ir.parse_into(module, target.context)
    functions = ir.functions(source)
    main = functions.pop("main")
    prefix = _fresh_prefix(target, symbol_table, functions)
    for name in functions:
        ir.rename_symbol(source, name, prefix + name)
    for function in (main, *functions.values()):
        for op in ir.walk(function, _RENUMBERED_OPS):
            if "channel_handle" in op.attributes:
                op.attributes["channel_handle"] = ir.channel_handle_attr(new_channel())
            elif ragged.is_native(op):  # XLA's op keeps its channel in its config
                op.attributes["backend_config"] = ragged.with_channel(op, new_channel())
            index = dialect.host_callback_index(op) if dialect.is_host_callback(op) else None
            if index is not None:
                dialect.set_host_callback_index(op, host_callback(index))
    for name, function in functions.items():
        function.attributes["sym_name"] = ir.string_attr(prefix + name)
        function.attributes["sym_visibility"] = ir.string_attr("private")
        ir.keep_arg_attrs(function, "arg", ())
        ir.keep_arg_attrs(function, "res", ())
        target.body.append(function)
        symbol_table.insert(function)
    operands = [*_literal_constants(main, literals), *blocks]
    return ir.inline_function_at(main, operands, ir.current_insertion_point())


spmd_call_p.def_abstract_eval(_spmd_call_abstract_eval)
# Both rules run in place: JAX would emit a cacheable rule's lowering as a function
# of its own and clone it where the equation stands (from 0.10 on), a copy of the
# whole program for each rule; a map met again takes its program from
# `SHARED_PROGRAMS` instead.
jax_lowering.register_lowering(spmd_call_p, _spmd_call_lowering, cacheable=False)
# Replaces the tracer's rule for maps (lowering/primitives.py), which knows no
# compiler: the compiler depends on the tracer, never back. The face imports this
# module, so `import pmapc` registers it.
jax_lowering.register_lowering(primitives.map_p, lower_outermost, cacheable=False)
