"""How the IR writes an axis name: a label of its own for each distinct name.

JAX tells axis names apart by equality and hash, and any hashable is one; the IR
and the meshes pmapc makes name axes by strings. `axis_label` gives each name its
string, the same for as long as the process runs.
"""

from __future__ import annotations

import enum
import threading


def axis_label(name) -> str:
    """An axis name as the IR writes it: a string as it is, an enum member as
    `Type.MEMBER`, any other hashable (a tuple of strings, ...) as its type and repr.

    Distinct names get distinct labels and equal names the same one (names are
    told apart by equality and hash, as JAX does, not by their text): a name whose
    text another name took first gets `#2`, `#3`, ... after it. The label is also
    the axis's name in the `jax.sharding.Mesh` a program runs on, and JAX 0.11+
    cannot compile a mesh whose axis names hold a single quote (Shardy drops its
    sharding attributes), so a repr's quotes become double quotes.
    """
    if isinstance(name, str):
        return name
    with _LABELS_LOCK:
        label = _LABELS.get(name)
        if label is None:
            label = _LABELS[name] = _unique(_text_of(name))
    return label


def _text_of(name) -> str:
    if isinstance(name, enum.Enum):
        return f"{type(name).__name__}.{name.name}"
    return f"{type(name).__name__}:{name!r}".replace("'", '"')


def _unique(text: str) -> str:
    taken = set(_LABELS.values())
    label, count = text, 1
    while label in taken:
        count += 1
        label = f"{text}#{count}"
    return label


# The label of every non-string axis name seen in this process (kept: a label must
# stay the same for as long as its IR or mesh may be in use).
_LABELS: dict[object, str] = {}
_LABELS_LOCK = threading.Lock()
