"""What a map's structure reads of JAX's jaxprs (lowering/structure.py), from JAX's
internals: literals and fresh variables, the surgery that hoists literals into
arguments, the trace context, and what of JAX's objects reads the same in
another process (for keys of JAX's persistent cache, compiler/persistent.py).

(lowering/jax_api.py says which JAX releases, and why one adapter per area.)
"""

from __future__ import annotations

import sys
import threading
from types import CodeType

from jax._src import config as _config
from jax._src import core as _core
from jax._src import custom_derivatives as _custom_derivatives
from jax._src import source_info_util as _source_info
from jax._src.lib import _jax  # pyright: ignore[reportPrivateImportUsage]
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from pmapc.lowering.jax_api import Primitive


def is_literal(atom) -> bool:
    """Whether a jaxpr equation's operand is a literal (a scalar written in the
    jaxpr, as `mul b 0.001:f32[]`) rather than a variable."""
    return isinstance(atom, _core.Literal)


def new_var(aval):
    """A fresh jaxpr variable of abstract value `aval`."""
    return _core.Var(aval)


def with_operands(jaxpr, invars: list, eqns: list):
    """`jaxpr` (open) with these arguments and equations: JAX renames arguments it
    cannot name any more (`debug_info`) when `invars` changes."""
    return jaxpr.replace(invars=invars, eqns=eqns)


# The parameters of a custom derivative's equation that its lowering leaves alone:
# its rules, functions each trace makes anew, which only differentiation reads. An
# outermost map is lowered after every transformation, so they decide nothing of
# its program (JAX lowers the equation as its `call_jaxpr`).
_RULES = {
    _custom_derivatives.custom_jvp_call_p: frozenset({"jvp_jaxpr_fun"}),
    _custom_derivatives.custom_vjp_call_p: frozenset({"fwd_jaxpr_thunk", "bwd", "out_trees"}),
}


def lowered_params(eqn) -> dict:
    """A jaxpr equation's parameters, but those its lowering leaves alone (a custom
    derivative's rules)."""
    rules = _RULES.get(eqn.primitive)
    if rules is None:
        return eqn.params
    return {name: value for name, value in eqn.params.items() if name not in rules}


def trace_context() -> tuple:
    """The configuration that decides how JAX traces and lowers (what its own caches
    of jitted functions are keyed on besides the function and its arguments)."""
    return _config.trace_context()


def is_traceback_class(cls: type) -> bool:
    return issubclass(cls, _jax.Traceback)


def user_frames(traceback) -> list[tuple[CodeType, int]]:
    """The user's frames of a jaxpr equation's traceback, each as (its code, the
    instruction it was at): the frames JAX's lowering locates an op by (its own and
    pmapc's left out), which give the same lines and columns in every process that
    runs the same source."""
    codes, instructions = traceback.raw_frames()
    return [
        (code, at)
        for code, at in zip(codes, instructions)
        if _source_info.is_user_filename(code.co_filename)
    ]


# Slots of JAX's classes that cache a value derived from the others, filled or not
# as this process's history has it (0.12's ShapedArray keeps its weak_type=False
# twin in one).
CACHE_SLOTS = frozenset({"_stripped_weak_type"})


def has_native_fields(cls: type) -> bool:
    """Whether `native_fields` reads the objects of `cls`."""
    return issubclass(cls, (Mesh, NamedSharding, PartitionSpec))


def native_fields(value) -> list[tuple[str, object]]:
    """The fields that make a sharding, a partition spec or a mesh of devices what it
    is: JAX keeps the state of the first two in C++, where no Python attribute shows
    it, and a mesh's devices are this process's objects (each is its platform and
    id). For an object of a class `has_native_fields` accepts."""
    if isinstance(value, Mesh):
        if value.empty:  # a jit's context mesh outside any mesh
            return [("empty", True)]
        return [
            ("axis_names", value.axis_names),
            ("shape", value.devices.shape),
            ("axis_types", value.axis_types),
            ("devices", tuple((d.platform, d.id) for d in value.devices.flat)),
        ]
    if isinstance(value, NamedSharding):
        return [
            ("mesh", value.mesh),
            ("spec", value.spec),
            ("memory_kind", value.memory_kind),
            ("device_ids", getattr(value, "_logical_device_ids", None)),
        ]
    return [
        ("partitions", tuple(value)),
        ("unreduced", getattr(value, "unreduced", None)),
        ("reduced", getattr(value, "reduced", None)),
        ("unreduced_kind", getattr(value, "unreduced_kind", None)),
    ]


def is_primitive_class(cls: type) -> bool:
    return issubclass(cls, Primitive)


def defined_by(primitive, packages: tuple[str, ...]) -> bool:
    """Whether `primitive` is one a module of `packages` defines (at its top level):
    the same primitive in every process, with the rules of that release, where one a
    user defines may have other rules in the next process under the same name."""
    with _DEFINED.lock:
        known = _DEFINED.by_packages.setdefault(packages, ({}, set()))
        primitives, scanned = known
        if primitive not in primitives:
            _scan(packages, primitives, scanned)
        return primitives.get(primitive, False)


class _Defined:
    lock = threading.Lock()
    # packages -> (primitive -> True for those their modules define, modules scanned)
    by_packages: dict[tuple[str, ...], tuple[dict, set]] = {}  # noqa: RUF012


_DEFINED = _Defined()


def _scan(packages: tuple[str, ...], primitives: dict, scanned: set) -> None:
    """Record the primitives of the modules of `packages` imported since the last scan."""
    for name, module in list(sys.modules.items()):
        if name in scanned or module is None or name.split(".", 1)[0] not in packages:
            continue
        scanned.add(name)
        for value in list(vars(module).values()):
            if isinstance(value, Primitive):
                primitives[value] = True
