"""The collective calls of the generated golden programs (`golden_generated.py`).

An `Op` is one call as a body makes it: the kind, its parameters as they appear in
the program's name, the shape of the block it takes, and the function. The builders
take the axes as a tuple (one name is passed bare, as users write it) and the size n
of the group, from which they size the blocks that need a dimension of n. Uses only
APIs present in JAX 0.4.30 and current JAX.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from jax import lax

BLOCK = (2, 4)  # a device's operand where a collective does not need a dimension of size n


@dataclass(frozen=True)
class Op:
    """A collective as a body calls it: `apply(x)` on a block of shape `block`."""

    kind: str
    variant: str  # the parameters, as they appear in the program's name ("" for none)
    block: tuple[int, ...]
    apply: Callable
    # JAX 0.4.30 differentiates it wrongly (see `all_to_all`).
    jax_gradient_wrong: bool = False


def axis_arg(axes: Sequence[str]):
    """The axis argument as a user writes it: a bare name for one axis, else a tuple."""
    return axes[0] if len(axes) == 1 else tuple(axes)


def groupsjoin_label(groups) -> str:
    return "groups=" + "|".join(",".join(map(str, group)) for group in groups)


def _with_groups(groups) -> tuple[dict, str]:
    if groups is None:
        return {}, ""
    return {"axis_index_groups": [list(g) for g in groups]}, groupsjoin_label(groups)


def join_label(*parts: str) -> str:
    return "/".join(part for part in parts if part)


def reduction(kind: str, axes, groups=None) -> Op:
    collective = {"psum": lax.psum, "pmean": lax.pmean, "pmax": lax.pmax, "pmin": lax.pmin}[kind]
    kwargs, label = _with_groups(groups)
    return Op(kind, label, BLOCK, lambda x: collective(x, axis_arg(axes), **kwargs))


def axis_index(axes) -> Op:
    """The index, and the block scaled by it (so it also meets the data)."""

    def apply(x):
        index = lax.axis_index(axis_arg(axes))
        return index, x * (index + 1)

    return Op("axis_index", "", BLOCK, apply)


def all_gather(axes, dim: int, tiled: bool, groups=None) -> Op:
    kwargs, label = _with_groups(groups)
    return Op(
        "all_gather",
        join_label(f"dim{dim}", "tiled" if tiled else "untiled", label),
        BLOCK,
        lambda x: lax.all_gather(x, axis_arg(axes), axis=dim, tiled=tiled, **kwargs),
    )


def psum_scatter(axes, n: int, dim: int, tiled: bool, groups=None) -> Op:
    """Scatter dimension `dim` of size n (untiled) or 2n (tiled) over a group of n."""
    size = 2 * n if tiled else n
    block = (size, 4) if dim == 0 else (2, size)
    kwargs, label = _with_groups(groups)
    variant = join_label(f"dim{dim}", "tiled" if tiled else "untiled", label)
    return Op(
        "psum_scatter",
        variant,
        block,
        lambda x: lax.psum_scatter(x, axis_arg(axes), scatter_dimension=dim, tiled=tiled, **kwargs),
    )


def all_to_all(axes, n: int, split: int, concat: int, tiled: bool, groups=None) -> Op:
    """Split dimension `split` of size n (untiled) or 2n (tiled) over a group of n."""
    size = 2 * n if tiled else n
    block = (size, 4) if split == 0 else (2, size)
    kwargs, label = _with_groups(groups)
    variant = join_label(f"split{split}", f"concat{concat}", "tiled" if tiled else "untiled", label)
    # JAX's transpose of an untiled all_to_all whose split and concat axes differ calls
    # the user-level all_to_all on the cotangent, which adds its unit dimension again:
    # JAX 0.10 fails its type check, JAX 0.4.30 (unchecked) reshapes a wrongly laid out
    # cotangent and returns a wrong gradient (checked against numpy by hand).
    return Op(
        "all_to_all",
        variant,
        block,
        lambda x: lax.all_to_all(x, axis_arg(axes), split, concat, tiled=tiled, **kwargs),
        jax_gradient_wrong=not tiled and split != concat,
    )


def shift_perm(n: int) -> list[tuple[int, int]]:
    """Every device sends to the next one, cyclically, over the product of the axes."""
    return [(j, (j + 1) % n) for j in range(n)]


def partial_perm(n: int) -> list[tuple[int, int]]:
    """Even devices send to the mirrored position; the others receive zeros."""
    return [(j, n - 1 - j) for j in range(0, n, 2)]


def ppermute(axes, n: int, name: str) -> Op:
    perm = {"shift": shift_perm, "partial": partial_perm}[name](n)
    return Op("ppermute", name, BLOCK, lambda x: lax.ppermute(x, axis_arg(axes), perm))


def every_op(axes, n: int) -> list[Op]:
    """Every kind, in the variants the `inner` family crosses with every tuple of axes."""
    return [
        *(reduction(kind, axes) for kind in ("psum", "pmean", "pmax", "pmin")),
        axis_index(axes),
        all_gather(axes, 0, False),
        all_gather(axes, 2, False),
        all_gather(axes, 0, True),
        all_gather(axes, 1, True),
        psum_scatter(axes, n, 0, False),
        psum_scatter(axes, n, 0, True),
        psum_scatter(axes, n, 1, True),
        all_to_all(axes, n, 0, 0, False),
        all_to_all(axes, n, 0, 1, False),
        all_to_all(axes, n, 1, 0, False),
        all_to_all(axes, n, 0, 0, True),
        all_to_all(axes, n, 1, 0, True),
        ppermute(axes, n, "shift"),
        ppermute(axes, n, "partial"),
    ]


def core_ops(axes, n: int) -> list[Op]:
    """One or two variants of every kind except axis_index: the other families' set."""
    return [
        *(reduction(kind, axes) for kind in ("psum", "pmean", "pmax", "pmin")),
        all_gather(axes, 0, False),
        all_gather(axes, 1, True),
        psum_scatter(axes, n, 0, False),
        psum_scatter(axes, n, 1, True),
        all_to_all(axes, n, 0, 1, False),
        all_to_all(axes, n, 1, 0, True),
        ppermute(axes, n, "shift"),
        ppermute(axes, n, "partial"),
    ]


def grouped_ops(axes, groups) -> list[Op]:
    """Every kind that takes `axis_index_groups`, with `groups` (each of size m)."""
    m = len(groups[0])
    return [
        *(reduction(kind, axes, groups) for kind in ("psum", "pmean", "pmax", "pmin")),
        all_gather(axes, 0, False, groups),
        all_gather(axes, 1, True, groups),
        psum_scatter(axes, m, 0, False, groups),
        psum_scatter(axes, m, 0, True, groups),
        all_to_all(axes, m, 0, 0, False, groups),
        all_to_all(axes, m, 1, 0, True, groups),
    ]


def differentiable_ops(axes, n: int) -> list[Op]:
    """The core variants of the kinds with a gradient (JAX 0.4.30 has no rule for pmax
    and pmin; axis_index has no tangent)."""
    return [op for op in core_ops(axes, n) if op.kind not in ("pmax", "pmin")]


def weak_ops(axes) -> list[Op]:
    """Python scalars in the body: the result's dtype is the operand's, or int32/float32."""
    a = axis_arg(axes)
    bodies = {
        "psum_plus_int": lambda x: lax.psum(x, a) + 1,
        "pmax_times_float": lambda x: lax.pmax(x, a) * 2.5,
        "times_psum_of_int": lambda x: x * lax.psum(1, a),
        "pmean_of_plus_int": lambda x: lax.pmean(x + 1, a),
        "all_gather_minus_int": lambda x: lax.all_gather(x, a) - 3,
        "returns_scalars": lambda x: (x, 3, 2.5, lax.psum(2.5, a)),
    }
    return [Op(name, "", BLOCK, body) for name, body in bodies.items()]


def error_ops() -> list[Op]:
    """Collectives JAX 0.4.30 refuses on a 2x4 mesh, each for one reason."""
    return [
        Op(
            "ppermute",
            "repeated_target",
            BLOCK,
            lambda x: lax.ppermute(x, "model", [(0, 1), (1, 1)]),
        ),
        Op(
            "psum_scatter",
            "tiled/dim0=3",
            (3, 4),
            lambda x: lax.psum_scatter(x, "model", tiled=True),
        ),
        Op("psum_scatter", "untiled/dim0=2", BLOCK, lambda x: lax.psum_scatter(x, "model")),
        Op("all_to_all", "untiled/split0=2", BLOCK, lambda x: lax.all_to_all(x, "model", 0, 0)),
        Op(
            "all_to_all",
            "tiled/split0=6",
            (6, 4),
            lambda x: lax.all_to_all(x, "model", 0, 0, tiled=True),
        ),
        Op("all_gather", "dim3", BLOCK, lambda x: lax.all_gather(x, "model", axis=3)),
        Op("psum", "unbound_axis", BLOCK, lambda x: lax.psum(x, "batch")),
        Op("psum", "repeated_axis", BLOCK, lambda x: lax.psum(x, ("model", "model"))),
        Op(
            "all_gather",
            "repeated_axis",
            BLOCK,
            lambda x: lax.all_gather(x, ("model", "data", "model")),
        ),
    ]
