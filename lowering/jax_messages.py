"""JAX 0.4.30's wording for the mistakes its `jax.pmap` caught.

Code and tests written for `jax.pmap` match on these messages (`pytest.raises(
ValueError, match=...)`), so each pmapc error for such a mistake starts with
JAX 0.4.30's text and goes on with what pmapc adds: the axis, the shapes and the
fix (`explained`). tests/py/test_errors.py compares each with the message
recorded from JAX 0.4.30 (scripts/record_messages.py).
"""

from __future__ import annotations

import collections
from collections.abc import Hashable, Sequence

from pmapc.lowering import jax_api


def explained(jax_text: str, ours: str) -> str:
    """JAX's text, then pmapc's: in parentheses after a one-line text (a pmapc
    command then still prints one line), in a paragraph below a longer one."""
    jax_text = jax_text.rstrip()
    if "\n" in jax_text:
        return f"{jax_text}\n\n{ours}"
    return f"{jax_text} ({ours})"


def inconsistent_sizes(sizes: Sequence[int], axes: Sequence[int], described: Sequence[str]) -> str:
    """Mapped dimensions of different sizes: `sizes[i]` is dimension `axes[i]` of the
    mapped argument `described[i]` ("argument x of type float32[8,3]")."""
    counts = collections.Counter(sizes).most_common()
    lines = ["pmap got inconsistent sizes for array axes to be mapped:"]
    for rank, (size, count) in enumerate(counts):
        first = sizes.index(size)
        example = f"axis {axes[first]} of {described[first]}"
        if count == 1:
            lines.append(f"  * one axis had size {size}: {example};")
        else:
            which = "most" if rank == 0 else "some"
            lines.append(f"  * {which} axes ({count} of them) had size {size}, e.g. {example};")
    return "\n".join(lines)[:-1]


def axis_size_mismatch(given: int, received: int) -> str:
    return f"Specified axis_size {given} doesn't match received axis_size {received}."


def no_mapped_argument() -> str:
    return "pmap must have at least one non-None value in in_axes"


def in_axes_not_a_prefix(in_axes, args, kwargs) -> str:
    text = jax_api.prefix_error((in_axes, 0), (args, kwargs), "pmap in_axes")
    text += (
        "\n\nThe 'full pytree' here is the tuple of arguments passed positionally to "
        "the pmapped function, and the value of `in_axes` must be a tree prefix of "
        "that tuple. But it was not a prefix."
    )
    if kwargs:
        text += (
            "\n\nWhen some arguments are passed by keyword to the pmapped function, "
            "they are not included in the comparison to `in_axes`. Instead, each "
            "argument passed by keyword is mapped over its leading axis. See the "
            "description of `in_axes` in the `pmap` docstring: "
            "https://jax.readthedocs.io/en/latest/_autosummary/jax.pmap.html#jax.pmap"
        )
    return text + (
        "\n\nCheck that the value of the `in_axes` argument to `pmap` is a tree "
        "prefix of the tuple of arguments passed positionally to the pmapped "
        "function."
    )


def out_axes_not_a_prefix(out_axes, outputs) -> str:
    return jax_api.prefix_error(out_axes, outputs, "pmap out_axes") + (
        "\n\nThe full pytree is the output of the pmapped function. Ensure that the "
        "`out_axes` argument to `pmap` is a pytree prefix of the pmapped function's "
        "output."
    )


def unbound_axis(name: Hashable, bound: Sequence[Hashable]) -> str:
    return (
        f"unbound axis name: {name}. The following axis names (e.g. defined by pmap) "
        f"are available to collective operations: {list(bound)}"
    )


def not_hashable(value, error: TypeError) -> str:
    return (
        "Non-hashable static arguments are not supported. An error occurred while "
        f"trying to hash an object of type {type(value)}, {value}. The error was:\n"
        f"TypeError: {error}\n"
    )


def too_few_devices(required: int, available: int) -> str:
    return (
        f"compiling computation that requires {required} logical devices, but only "
        f"{available} XLA devices are available (num_replicas={required})"
    )


def devices_and_axis_size(axis_size: int, devices: int) -> str:
    return (
        "Leading axis size of input to pmapped function must equal the number of local "
        "devices passed to pmap. Got "
        f"axis_size={axis_size}, num_local_devices={devices}."
    )


def no_devices() -> str:
    return "'devices' argument to pmap must be non-empty, or None."


def nest_and_devices(required: int, devices: int) -> str:
    """`devices=` on the outermost map of a nest, not one device per position of its mesh."""
    return (
        f"pmapped function requires {required} local devices to run due to nested pmapped "
        f"or other parallel functions, but only {devices} are available."
    )


def devices_on_inner_map() -> str:
    return "Nested pmap with explicit devices argument."


def ordered_effects() -> str:
    return "Ordered effects not supported in `pmap`."
