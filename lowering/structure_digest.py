"""A map's structure as another process reads it: the digest that keys its program
in JAX's persistent compilation cache (compiler/persistent.py).

A structure (lowering/structure.py) is a key of this process's objects: JAX's
primitives, abstract values, tracebacks and contexts, which compare by value
here but print differently in each process. `stable_digest` encodes each part
by value instead, every value tagged and length-prefixed so that no two read
the same:

- plain values (None, booleans, integers, strings, bytes, enums, dtypes, types by
  their module and name) as they are, numbers by their bits;
- tuples and lists item by item, sets and dicts sorted by their items' encodings
  (their order in a set follows hashes, which differ between processes);
- a primitive by its name, if a module of JAX or pmapc defines it (a user's may
  lower differently in the next process under the same name);
- an equation's traceback by its user frames (those JAX locates an op by), each
  by its code and instruction: the user's line and column in the program's
  metadata;
- JAX's and pmapc's other objects (abstract values, shardings, meshes, name stacks,
  an equation's context, effects) by their class and fields: those of Python
  classes, and those of the few JAX keeps in C++ (a sharding, a partition spec)
  as `jax_structure.native_fields` reads them; an object of another C++ class
  has no fields Python sees, and no digest.

A part known only by its identity in this process (a function, such as a
`custom_jvp`'s rule, or an object of another package) has no digest: such a
map's program is kept by its lowered IR instead, which costs JAX's lowering.
What the digest cannot see is a lowering rule a user registers in place of one
of JAX's for a primitive of JAX's: edited between two processes, it would lower
the same structure otherwise (JAX's own cache, keyed by the lowered module,
would tell them apart).

Its cost is Python's, a constant per part, each class's encoding decided once:
linear in the equations and small beside the lowering it saves
(benchmarks/new_programs.py, its restart rows; tests/py/test_growth.py).
"""

from __future__ import annotations

import enum
import functools
import hashlib
import os
from collections.abc import Callable
from types import CodeType
from typing import Any

import numpy as np

from pmapc.lowering import jax_structure

# The packages whose classes are values of their fields, and whose primitives are
# the same in every process of the same releases.
OWN_PACKAGES = ("jax", "jaxlib", "pmapc")


class _Unstable(Exception):
    """A part of the structure known only by its identity in this process."""


def stable_digest(key: Any, whole_paths: bool = True) -> str | None:
    """The digest of `key` (a structure, with what else decides its program) that
    every process running the same source with the same releases computes for an
    equal key; None where a part is known only by its identity. Without
    `whole_paths`, a source file is encoded by its name alone: the same code checked
    out under other folders (on other hosts) has one digest."""
    try:
        return hashlib.sha256(_Encoder(whole_paths).encoded(key)).hexdigest()
    except _Unstable:
        return None


class _Encoder:
    """Values as bytes; an object met again (an abstract value, a traceback's frames'
    code) from its first encoding."""

    def __init__(self, whole_paths: bool = True) -> None:
        self.seen: dict[int, bytes] = {}  # id -> encoding; the key keeps them alive
        self.whole_paths = whole_paths

    def encoded(self, value: Any) -> bytes:
        kind = type(value)
        plain = _PLAIN.get(kind)
        if plain is not None:
            return plain(value)
        encoded = self.encoded
        if kind is tuple:
            return b"(" + b"".join([encoded(item) for item in value]) + b")"
        if kind is list:
            return b"[" + b"".join([encoded(item) for item in value]) + b"]"
        if kind is frozenset or kind is set:
            return b"{" + b"".join(sorted([encoded(item) for item in value])) + b"}"
        if kind is dict:
            items = [encoded(k) + encoded(v) for k, v in value.items()]
            return b"<" + b"".join(sorted(items)) + b">"
        known = self.seen.get(id(value))
        if known is None:
            encode = _ENCODINGS.get(kind)
            if encode is None:
                encode = _ENCODINGS[kind] = _encoding_of(kind)
            known = self.seen[id(value)] = encode(self, value)
        return known

    def code(self, code: CodeType) -> bytes:
        """A frame's code: its file, function and first line."""
        known = self.seen.get(id(code))
        if known is None:
            name = getattr(code, "co_qualname", code.co_name)  # Python 3.11 added it
            file = code.co_filename if self.whole_paths else os.path.basename(code.co_filename)
            location = _text(file) + _text(name) + b"%d;" % code.co_firstlineno
            known = self.seen[id(code)] = b"c" + location
        return known


# How an object of a class is encoded, decided once per class (the encoder's cost
# is Python's, per part: deciding by the object each time was most of it).
_Encoding = Callable[[_Encoder, Any], bytes]
_ENCODINGS: dict[type, _Encoding] = {}


def _encoding_of(cls: type) -> _Encoding:
    """How `_Encoder` encodes an object of `cls` (one it does not encode as a plain
    value or a container)."""
    if issubclass(cls, type):
        return lambda _, value: _type(value)
    if issubclass(cls, enum.Enum):
        prefix = b"e" + _type(cls)
        return lambda _, value: prefix + _text(value.name)
    if issubclass(cls, (np.dtype, np.generic, np.ndarray, float, complex)):
        return lambda _, value: _number(value)
    if issubclass(cls, tuple):  # a NamedTuple: its type and items
        prefix = b"n" + _type(cls)
        return lambda encoder, value: (
            prefix + b"".join([encoder.encoded(item) for item in value]) + b")"
        )
    if jax_structure.is_primitive_class(cls):
        return _primitive
    if jax_structure.is_traceback_class(cls):
        return _traceback
    prefix = b"o" + _type(cls)
    if jax_structure.has_native_fields(cls):
        return lambda encoder, value: _fields_encoded(
            encoder, prefix, jax_structure.native_fields(value)
        )
    if _callable(cls) or not _fields_tell(cls):
        return _unstable
    return _object_of(cls, prefix)


def _callable(cls: type) -> bool:
    """Whether an object of `cls` is callable (a function's state is its identity)."""
    return any("__call__" in vars(base) for base in cls.__mro__)


def _primitive(_: _Encoder, value: Any) -> bytes:
    if not jax_structure.defined_by(value, OWN_PACKAGES):
        raise _Unstable
    return b"p" + _text(value.name)


def _traceback(encoder: _Encoder, value: Any) -> bytes:
    frames = jax_structure.user_frames(value)
    return b"k" + b"".join([encoder.code(code) + b"%d;" % at for code, at in frames]) + b")"


def _unstable(_: _Encoder, value: Any) -> bytes:
    raise _Unstable


def _fields_encoded(encoder: _Encoder, prefix: bytes, fields) -> bytes:
    encoded = encoder.encoded
    return prefix + b"".join([_text(name) + encoded(field) for name, field in fields]) + b")"


def _object_of(cls: type, prefix: bytes) -> _Encoding:
    """The encoding of an object of `cls` by its fields: its slots (of every class it
    derives from) and attributes, without those that cache a value derived from the
    others (filled or not as this process's history has it: a
    `functools.cached_property`, `CACHE_SLOTS`)."""
    slots = [
        (name, _text(name))
        for base in cls.__mro__
        for name in getattr(base, "__slots__", ())
        if name not in ("__weakref__", "__dict__") and name not in jax_structure.CACHE_SLOTS
    ]
    cached = frozenset(
        name
        for base in cls.__mro__
        for name in vars(base)
        if isinstance(getattr(cls, name, None), functools.cached_property)
    )

    def encode(encoder: _Encoder, value: Any) -> bytes:
        encoded = encoder.encoded
        parts = [prefix]
        parts += [text + encoded(getattr(value, name, _MISSING)) for name, text in slots]
        attributes = getattr(value, "__dict__", None)
        if attributes:
            parts += [
                _text(name) + encoded(field)
                for name, field in sorted(attributes.items())
                if name not in cached
            ]
        return b"".join(parts) + b")"

    return encode


def _text(text: str) -> bytes:
    data = text.encode()
    return b"%d:%s" % (len(data), data)


def _number(value) -> bytes:
    """A number, an array or a dtype by its dtype, shape and bits (an array of Python
    objects holds their addresses)."""
    if isinstance(value, np.dtype):
        return b"d" + _text(value.str)
    array = np.asarray(value)
    if array.dtype.hasobject:
        raise _Unstable
    return b"a" + _text(array.dtype.str) + _text(str(array.shape)) + array.tobytes()


_TYPES: dict[type, bytes] = {}  # a class -> its encoding (classes live as long)


def _type(cls: type) -> bytes:
    known = _TYPES.get(cls)
    if known is None:
        known = _TYPES[cls] = b"t" + _text(f"{cls.__module__}.{cls.__qualname__}")
    return known


_PLAIN: dict[type, Callable[[Any], bytes]] = {
    type(None): lambda _: b"N",
    bool: lambda value: b"T" if value else b"F",
    int: lambda value: b"i%d;" % value,
    str: lambda value: b"s" + _text(value),
    bytes: lambda value: b"b%d:%s" % (len(value), value),
    float: _number,
    type: _type,  # a class whose metaclass is `type`
}


# Where the classes an object's class derives from may come from, besides JAX's
# and pmapc's own (abstract bases, which hold no state).
_STATELESS_BASES = ("builtins", "abc", "collections.abc", "typing")


def _fields_tell(cls: type) -> bool:
    """Whether an object of `cls` is what its Python fields hold: every class it
    derives from is JAX's or pmapc's, written in Python, or a stateless base
    (jaxlib's classes keep their state in C++, out of Python's sight)."""
    known = _FIELDS_TELL.get(cls)
    if known is None:
        known = _FIELDS_TELL[cls] = _python_class(cls) and all(
            _python_class(base) or base.__module__ in _STATELESS_BASES for base in cls.__mro__
        )
    return known


_FIELDS_TELL: dict[type, bool] = {}


def _python_class(cls: type) -> bool:
    return cls.__module__.split(".", 1)[0] in ("jax", "pmapc")


class _Missing:
    """A slot never set."""


_MISSING = _Missing()
