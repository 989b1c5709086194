"""`Lowered` and `Compiled`: pmapc's ahead-of-time stages, with `jax.stages`' API.

`pmapc.lower(f, *args)` (or `f.lower(*args)`) gives a `Lowered`: the IR after
every stage of pmapc's pipeline, and what `jax.stages.Lowered` has (`in_tree`,
`out_tree`, `in_avals`, `out_info`, `args_info`, `as_text(dialect, debug_info=)`,
`compiler_ir(dialect)`, `cost_analysis()`, `compile(compiler_options)`). Its
`compile()` gives a `Compiled`, which checks a call's pytree and argument types
as `jax.stages.Compiled` does (with JAX 0.4.30's messages) before it runs.
`Lowered.plan()` is the communication plan of what pmapc emits; `Compiled.plan()`
adds, next to each collective, what XLA runs for it.
Typed PRNG keys pass through as keys: the program takes and returns their data.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import TypeAlias

import jax

from pmapc import ir
from pmapc.compiler import agreement, driver, plan_xla, processes, runtime, xla
from pmapc.errors import DeviceError, DiagnosticError, PmapcError, typed_error
from pmapc.lowering import jax_api, jax_frames, mesh_devices, trace
from pmapc.lowering.locations import at_user_call_site

PyTreeDef: TypeAlias = jax.tree_util.PyTreeDef  # pyright: ignore[reportInvalidTypeForm]

PMAPC_DIALECTS = ("stablehlo", "hlo")  # besides the stage names of `Lowered.stages`


@dataclasses.dataclass(frozen=True)
class CallSignature:
    """What a staged call takes and gives, as `jax.stages` reports it: trees of
    (args, kwargs) without the static arguments, and of the results."""

    in_tree: PyTreeDef
    in_avals: tuple  # flat, in in_tree's order (a typed PRNG key's aval is a key's)
    arg_names: tuple[str, ...]  # flat, as JAX names them: 'x', "y['hi']"
    out_tree: PyTreeDef
    out_info: object  # a tree of jax.ShapeDtypeStruct
    args_info: object
    donate_argnums: tuple[int, ...]
    static_argnums: tuple[int, ...]

    @classmethod
    def of(cls, traced, names: Sequence[str | None], static_argnums) -> CallSignature:
        in_avals = tuple(jax.tree_util.tree_leaves(traced.in_avals))
        arg_names = tuple(name or f"{i + 1}/{len(in_avals)}" for i, name in enumerate(names))
        return cls(
            traced.in_tree,
            in_avals,
            arg_names,
            traced.out_tree,
            traced.out_info,
            traced.args_info,
            tuple(traced.donate_argnums),
            tuple(static_argnums),
        )

    @property
    def out_avals(self) -> list:
        return jax.tree_util.tree_leaves(self.out_info)


class _Signed:
    """The `jax.stages` attributes of a stage, read from its CallSignature."""

    signature: CallSignature

    @property
    def in_tree(self):
        return self.signature.in_tree

    @property
    def out_tree(self):
        return self.signature.out_tree

    @property
    def in_avals(self):
        return jax.tree_util.tree_unflatten(self.signature.in_tree, self.signature.in_avals)

    @property
    def out_info(self):
        return self.signature.out_info

    @property
    def args_info(self):
        return self.signature.args_info

    @property
    def donate_argnums(self) -> tuple[int, ...]:
        return self.signature.donate_argnums


class Lowered(_Signed):
    """A traced program and the IR after each stage."""

    def __init__(
        self,
        compilation: driver.Compilation,
        signature: CallSignature,
        devices: Sequence[xla.Device] | None,
        backend: str | None,
    ):
        self.compilation = compilation
        self.signature = signature
        self.devices = devices
        self.backend = backend

    @property
    def stages(self) -> dict[str, str]:
        """Stage name ('pmapc', each pass name, 'stablehlo') -> IR text."""
        return self.compilation.stages

    @property
    def timings(self) -> dict[str, float]:
        """Seconds spent tracing ('trace': JAX's tracing, 'lower': JAX's lowering to pmapc
        IR), in each pass and verifying the result ('verify')."""
        return self.compilation.timings

    def as_text(self, dialect: str | None = None, *, debug_info: bool = False) -> str:
        """The program as text: 'stablehlo' (the default, what XLA compiles), 'hlo' (its
        HLO before XLA's optimizations), or the IR after a stage of `stages`;
        `debug_info` adds the locations (the user's files and lines)."""
        dialect = dialect or "stablehlo"
        if dialect == "hlo":
            return xla.hlo_text(self.compiler_ir("hlo"))
        op = self._stage_op(dialect)
        if debug_info:
            return ir.print_module(op, debug_info=True)
        return self.compilation.stage_text(dialect)

    def compiler_ir(self, dialect: str | None = None):
        """The program as an object: 'stablehlo' (the default), a copy of the module
        XLA compiles; 'hlo', XLA's `XlaComputation` of it."""
        dialect = dialect or "stablehlo"
        if dialect == "hlo":
            module = self.compilation.module
            form = runtime.execution_form(module, self.compilation.mesh)
            return xla.hlo_of(xla.module_for_xla(module, form))
        if dialect != "stablehlo":
            raise ValueError(
                f"unknown dialect '{dialect}'; pmapc gives 'stablehlo' and "
                "'hlo' (as_text also gives each stage's IR)"
            )
        return ir.copy_into(self.compilation.module, ir.make_context())

    def cost_analysis(self) -> dict[str, float]:
        """XLA's cost estimate (flops, bytes accessed, ...) before compilation."""
        client = xla.client_of(self.devices) if self.devices else xla.backend(self.backend)
        return xla.estimated_cost(self.compiler_ir("hlo"), client)

    def plan(self):
        """The communication plan: which devices talk in each collective and the bytes
        they move (`compiler/plan.py`); print `.table()`, draw `.svg()`. These are the
        collectives pmapc emits; `compile().plan()` adds what XLA runs for each. On
        devices of several hosts or slices, it splits the bytes by link and hints at
        a cheaper order of the nest's axes (`compiler/plan_hosts.py`)."""
        try:
            devices = mesh_devices.pick_devices(self.compilation.mesh, self.devices, self.backend)
        except DeviceError:  # lowered for more devices than this process has
            devices = None
        return self.compilation.plan(devices)

    @jax_frames.api_boundary
    def compile(self, compiler_options: dict | None = None) -> Compiled:
        """XLA-compile for the mesh's devices; `compiler_options` are XLA options by
        name, as for `jax.stages.Lowered.compile`."""
        try:
            executable = driver.compile_for_devices(
                self.compilation, self.devices, self.backend, compiler_options
            )
        except DeviceError as error:
            raise at_user_call_site(error) from None
        except DiagnosticError as error:  # the module refused for its devices
            raise typed_error(error) from None
        return Compiled(executable, self.signature, self.compilation)

    def _stage_op(self, stage: str) -> ir.Operation:
        names = self.compilation.stage_names
        if stage not in names:
            known = [*PMAPC_DIALECTS, *names[:-1]]  # the last is the result, "stablehlo"
            raise ValueError(f"unknown dialect or stage '{stage}'; give one of {known}")
        return self.compilation.stage_op(stage)


class Compiled(_Signed):
    """An XLA executable for one signature; call it with the same kinds of arguments."""

    def __init__(
        self, executable, signature: CallSignature, compilation: driver.Compilation | None = None
    ):
        self.executable = executable
        self.signature = signature
        self.compilation = compilation
        self._agreed = False  # by the processes (compiler/agreement.py)
        self._keys_in = [jax_api.is_key_dtype(aval.dtype) for aval in signature.in_avals]
        self._keys_out = [
            aval.dtype if jax_api.is_key_dtype(aval.dtype) else None for aval in signature.out_avals
        ]

    @jax_frames.api_boundary
    def __call__(self, *args, **kwargs):
        """Call with the arguments of the signature this was compiled for; static
        arguments may be passed again (they are ignored) or left out."""
        leaves = self._checked_leaves(self._dynamic(args), kwargs)
        if not self._agreed and self.executable.spans_processes:
            self._agree()
        values = [
            jax.random.key_data(x) if key else trace.as_device_value(x)
            for x, key in zip(leaves, self._keys_in)
        ]
        outputs = [
            out if key_dtype is None else jax_api.wrap_key_data(out, key_dtype)
            for out, key_dtype in zip(self.executable(*values), self._keys_out)
        ]
        return jax.tree_util.tree_unflatten(self.signature.out_tree, outputs)

    call = __call__

    def _agree(self) -> None:
        """Before this program first runs across processes, check that every process
        runs it (compiler/agreement.py)."""
        assert self.compilation is not None, "a program across processes has its lowering"
        digest = processes.program_digest(self.compilation.module)
        shapes = ", ".join(aval.str_short() for aval in self.signature.in_avals)
        program = agreement.Program(digest, "a compiled program", "", shapes)
        try:
            agreement.agree(program, jax.process_index(), processes.process_count())
        except PmapcError as error:
            raise at_user_call_site(error) from None
        self._agreed = True

    @property
    def input_shardings(self):
        return jax.tree_util.tree_unflatten(self.signature.in_tree, self.executable.in_shardings)

    @property
    def output_shardings(self):
        return jax.tree_util.tree_unflatten(self.signature.out_tree, self.executable.out_shardings)

    def as_text(self) -> str:
        """The HLO XLA compiled, after its optimizations."""
        return xla.compiled_hlo_text(self.executable.loaded)

    def cost_analysis(self) -> dict[str, float] | None:
        """XLA's cost estimate of the per-device program (flops, bytes accessed, and on
        TPU `optimal_seconds`, XLA:TPU's estimate of a run's time); None where the
        backend gives none (XLA:GPU)."""
        return xla.cost_analysis(self.executable.loaded)

    def memory_analysis(self):
        """XLA's memory statistics of the per-device program (argument, output, temp
        and generated-code sizes in bytes)."""
        return xla.memory_analysis(self.executable.loaded)

    def plan(self):
        """The communication plan (`Lowered.plan()`'s) with, next to each collective,
        the collective(s) XLA runs for it after its own passes (combined, split, made
        async; `compiler/plan_xla.py`), and XLA's totals beside pmapc's."""
        if self.compilation is None:
            raise ValueError("this Compiled was made without its lowering; it has no plan")
        hlo_text = xla.optimized_hlo_text(self.executable.loaded)
        return plan_xla.plan_with_xla(self.compilation.module, hlo_text, self.executable.devices)

    def runtime_executable(self):
        """XLA's loaded executable."""
        return self.executable.loaded

    def _dynamic(self, args) -> tuple:
        static = self.signature.static_argnums
        if not static or len(args) == len(self.signature.in_tree.children()[0].children()):
            return args
        return tuple(a for i, a in enumerate(args) if i not in static)

    def _checked_leaves(self, args, kwargs) -> list:
        """The call's leaves, after the checks `jax.stages.Compiled` makes."""
        leaves, tree = jax.tree_util.tree_flatten((args, kwargs))
        if tree != self.signature.in_tree:
            raise TypeError(pytree_mismatch(tree, self.signature.in_tree))
        if self.executable.spans_processes and not processes.holds_global_values(leaves):
            return leaves  # process-local parts: the executable checks their shapes
        mismatches = []
        for leaf, aval, name in zip(leaves, self.signature.in_avals, self.signature.arg_names):
            given = jax.typeof(leaf)
            if (given.shape, given.dtype) != (aval.shape, aval.dtype):
                mismatches.append(
                    f"Argument '{name}' compiled with {aval.str_short()} and "
                    f"called with {given.str_short()}"
                )
        if mismatches:
            raise TypeError(argument_mismatch(mismatches))
        return leaves


def pytree_mismatch(given, compiled) -> str:
    """JAX 0.4.30's message for a compiled function called with another pytree."""
    differences = jax_api.pytree_differences(given, compiled)
    lines = [
        "Function compiled with input pytree does not match the input pytree it "
        f"was called with. There are {len(differences)} mismatches, including:"
    ]
    for path, given_thing, compiled_thing, explanation in differences:
        first, *rest = path
        base = ("args", "kwargs")[first.idx]
        lines.append(
            f"    * at {base}{jax.tree_util.keystr(tuple(rest))}, seen "
            f"{compiled_thing} but now given {given_thing}, so {explanation}"
        )
    return "\n".join(lines)


def argument_mismatch(mismatches: list[str], shown: int = 5) -> str:
    """JAX 0.4.30's message for a compiled function called with other argument types."""
    count = f"The first {shown} of {len(mismatches)}" if len(mismatches) >= shown else "The"
    return (
        "Argument types differ from the types for which this computation was "
        f"compiled. {count} mismatches are:\n" + "\n".join(mismatches[:shown])
    )
