"""The compiler's options as types, defined once: the form a lowered program is
put in (`Target`), how its replica groups are written (`GroupForm`) and how a
`ragged_all_to_all` is lowered (`RaggedForm`).

Each is read once where it enters (`pmapc.lower`'s arguments, a pipeline
string's options, a pass's option, a command's flag: `parse`) and passed on as
its type. Members are strings too (`Target.PARTITIONS == "partitions"`), so they
print, compare and key dicts as the text a pipeline writes.
"""

from __future__ import annotations

import enum
from typing import TypeVar

from pmapc import ir


class Target(str, enum.Enum):
    """The execution form the target pass puts a program in (docs/ir.md)."""

    PARTITIONS = "partitions"  # one partition per device: what jax.jit runs
    REPLICAS = "replicas"  # one replica per device

    def __str__(self) -> str:
        return self.value


class GroupForm(str, enum.Enum):
    """How partition form writes replica groups."""

    NAMED = "named"  # as mesh axes where the groups are whole axes
    DENSE = "dense"  # as device ids

    def __str__(self) -> str:
        return self.value


class RaggedForm(str, enum.Enum):
    """How lower-collectives lowers a `ragged_all_to_all`."""

    # XLA's own op (JAX's custom call `@ragged_all_to_all`): where XLA runs it, on GPU
    # and TPU; XLA:CPU has no ragged-all-to-all.
    NATIVE = "native"
    # Collectives every XLA runs: each slice padded to the operand's rows, one
    # all_to_all of the padded slices and one of the output offsets, then writes.
    EXPANDED = "expanded"

    def __str__(self) -> str:
        return self.value


# The platforms whose XLA runs ragged-all-to-all itself (jax.Device.platform names).
# (`gpu` and `tpu` are also what `--backend` names.)
NATIVE_RAGGED_PLATFORMS = frozenset(("cuda", "rocm", "gpu", "tpu"))


def ragged_form_for(platforms) -> RaggedForm:
    """The form for a program compiled for `platforms`: native where XLA runs the op on
    every one of them, else expanded."""
    platforms = set(platforms)
    native = platforms and platforms <= NATIVE_RAGGED_PLATFORMS
    return RaggedForm.NATIVE if native else RaggedForm.EXPANDED


DEFAULT_TARGET = Target.PARTITIONS
# Named wherever jaxlib's StableHLO (and so its XLA) has mesh-axis replica groups.
DEFAULT_GROUP_FORM = GroupForm.NAMED if ir.MESH_AXIS_GROUPS else GroupForm.DENSE
# What runs on every platform (a pipeline run without a platform: `pmapc opt`).
DEFAULT_RAGGED_FORM = RaggedForm.EXPANDED

Option = TypeVar("Option", Target, GroupForm, RaggedForm)


def parse(kind: type[Option], value: object) -> Option | None:
    """`value` (a member, or its text) as a member of `kind`; None if it names none."""
    try:
        return kind(value)
    except ValueError:
        return None


def choices(kind: type[Option]) -> list[str]:
    """The texts of `kind`'s members, in order."""
    return [member.value for member in kind]


def writable(form: Target | GroupForm | RaggedForm) -> bool:
    """Whether this jaxlib's StableHLO can write `form` (replica groups named by mesh
    axes need its mesh-axis attribute; every other option always can)."""
    return form is not GroupForm.NAMED or ir.MESH_AXIS_GROUPS
