"""The parameters of each collective kind, as typed records (JAX's names).

Below both the records of pmapc/collectives.py and the shape rules of
pmapc/shapes.py, which take them: neither imports the other for them.
"""

from __future__ import annotations

import dataclasses
import functools

IndexGroups = tuple[tuple[int, ...], ...]


@dataclasses.dataclass(frozen=True)
class Param:
    """A parameter of a collective as the IR holds it: its name (JAX's) and the Python
    type of its value.

    `int` and `bool` are i64 and bool attributes; `list` is ppermute's array of
    [source, target] pairs; `tuple` is an array of arrays of i64 (`IndexGroups`).
    An optional parameter may be absent from the IR; its value is then None.
    """

    name: str
    value_type: type
    optional: bool = False


def _ir(value_type: type) -> dict[str, type]:
    """A parameter field's metadata: the type its IR attribute holds (see `Param`)."""
    return {"value_type": value_type}


@dataclasses.dataclass(frozen=True, kw_only=True)
class Params:
    """The parameters of one collective (a kind's subclass; JAX's names)."""

    @classmethod
    @functools.cache
    def schema(cls) -> tuple[Param, ...]:
        """The parameters as the IR holds them (read once a kind: every collective read
        asks for them)."""
        fields = sorted(dataclasses.fields(cls), key=lambda f: f.default is None)
        return tuple(
            Param(f.name, f.metadata["value_type"], f.default is None) for f in fields
        )  # the optional ones (index groups) last

    def as_dict(self) -> dict[str, object]:
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}

    @property
    def index_groups(self) -> IndexGroups | None:
        """`axis_index_groups`, for the kinds that take them (else None)."""
        return None


@dataclasses.dataclass(frozen=True, kw_only=True)
class Grouped(Params):
    """Parameters of a kind JAX lets split its group into `axis_index_groups`: the
    collective acts within each group of positions along its axes (positions in the
    product of `axes`, row-major in their order). None: one group of every position."""

    axis_index_groups: IndexGroups | None = dataclasses.field(default=None, metadata=_ir(tuple))

    @property
    def index_groups(self) -> IndexGroups | None:
        return self.axis_index_groups


@dataclasses.dataclass(frozen=True, kw_only=True)
class NoParams(Params):
    """axis_index's (none)."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class ReductionParams(Grouped):
    """psum's, pmax's and pmin's."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class AllGatherParams(Grouped):
    all_gather_dimension: int = dataclasses.field(metadata=_ir(int))
    tiled: bool = dataclasses.field(metadata=_ir(bool))


@dataclasses.dataclass(frozen=True, kw_only=True)
class PsumScatterParams(Grouped):
    scatter_dimension: int = dataclasses.field(metadata=_ir(int))
    tiled: bool = dataclasses.field(metadata=_ir(bool))


@dataclasses.dataclass(frozen=True, kw_only=True)
class AllToAllParams(Grouped):
    split_axis: int = dataclasses.field(metadata=_ir(int))
    concat_axis: int = dataclasses.field(metadata=_ir(int))
    tiled: bool = dataclasses.field(metadata=_ir(bool))


@dataclasses.dataclass(frozen=True, kw_only=True)
class RaggedAllToAllParams(Grouped):
    """ragged_all_to_all's (only index groups: its offsets and sizes are operands)."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class PpermuteParams(Params):
    perm: tuple[tuple[int, int], ...] = dataclasses.field(metadata=_ir(list))
