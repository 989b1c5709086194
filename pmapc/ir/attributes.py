"""Attributes: building them, reading them back, symbol references.

(pmapc/ir/__init__.py: the one adapter over jaxlib's MLIR bindings.)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
from jaxlib.mlir import ir
from jaxlib.mlir.dialects import stablehlo as _stablehlo

from pmapc.ir.types import dtype_name, element_type_of, i32_type, i64_type, shape_of, tensor_type


def i64_attr(value: int) -> ir.Attribute:
    return ir.IntegerAttr.get(i64_type(), int(value))


def i32_attr(value: int) -> ir.Attribute:
    return ir.IntegerAttr.get(i32_type(), int(value))


def uint64_attr(value: int) -> ir.Attribute:
    return ir.IntegerAttr.get(ir.IntegerType.get_unsigned(64), int(value))


def bool_attr(value: bool) -> ir.Attribute:
    return ir.BoolAttr.get(bool(value))


def string_attr(value: str) -> ir.Attribute:
    return ir.StringAttr.get(value)


def unit_attr() -> ir.Attribute:
    return ir.UnitAttr.get()


def array_attr(values: Sequence[ir.Attribute]) -> ir.Attribute:
    return ir.ArrayAttr.get(list(values))


def dict_attr(values: dict[str, ir.Attribute]) -> ir.Attribute:
    return ir.DictAttr.get(dict(values))


def dense_i64_attr(values: npt.ArrayLike) -> ir.Attribute:
    """A dense i64 tensor attribute, e.g. a replica-group matrix."""
    array = np.ascontiguousarray(np.asarray(values, dtype=np.int64))
    return _dense_elements(array, i64_type())


def _dense_elements(array: np.ndarray, element_type: ir.Type) -> ir.Attribute:
    """A dense elements attribute holding `array` (the bindings' stubs type `get` with
    attribute lists only, though it takes a buffer)."""
    get: Any = ir.DenseElementsAttr.get
    return get(array, type=element_type)


def dense_i64_array_attr(values: Sequence[int]) -> ir.Attribute:
    return ir.DenseI64ArrayAttr.get([int(v) for v in values])


def zero_attr(type_: ir.Type) -> ir.Attribute:
    """A splat zero of a tensor type (false for i1)."""
    element = element_type_of(type_)
    if isinstance(element, ir.IntegerType):
        return ir.DenseElementsAttr.get_splat(type_, ir.IntegerAttr.get(element, 0))
    if isinstance(element, ir.ComplexType):  # no scalar complex attribute to splat
        zeros = np.zeros(shape_of(type_), np.dtype(dtype_name(element)))
        return _dense_elements(zeros, element)
    return ir.DenseElementsAttr.get_splat(type_, ir.FloatAttr.get(element, 0.0))


def float_splat_attr(type_: ir.Type, value: float) -> ir.Attribute:
    return ir.DenseElementsAttr.get_splat(type_, ir.FloatAttr.get(element_type_of(type_), value))


def integer_splat_attr(type_: ir.Type, value: int) -> ir.Attribute:
    element = element_type_of(type_)
    if ir.IntegerType(element).width == 1:
        return ir.DenseElementsAttr.get_splat(type_, ir.BoolAttr.get(bool(value)))
    return ir.DenseElementsAttr.get_splat(type_, ir.IntegerAttr.get(element, value))


def scalar_i32_attr(value: int) -> ir.Attribute:
    return ir.DenseElementsAttr.get_splat(tensor_type([], i32_type()), i32_attr(value))


def attributes_of(op: ir.Operation) -> dict[str, ir.Attribute]:
    """An op's attributes by name (iterating `op.attributes` yields only the names)."""
    return dict(op.attributes.items())


def as_dict(attr: ir.Attribute | None) -> dict[str, ir.Attribute] | None:
    if attr is None or not isinstance(attr, ir.DictAttr):
        return None
    dictionary = ir.DictAttr(attr)
    return {named.name: named.attr for named in dictionary}


def as_int(attr: ir.Attribute) -> int | None:
    if isinstance(attr, ir.BoolAttr) or not isinstance(attr, ir.IntegerAttr):
        return None
    return ir.IntegerAttr(attr).value


def as_bool(attr: ir.Attribute) -> bool | None:
    if isinstance(attr, ir.BoolAttr):
        return ir.BoolAttr(attr).value
    return None


def as_string(attr: ir.Attribute) -> str | None:
    if not isinstance(attr, ir.StringAttr):
        return None
    return ir.StringAttr(attr).value


def as_list(attr: ir.Attribute) -> list[ir.Attribute] | None:
    if not isinstance(attr, ir.ArrayAttr):
        return None
    return list(ir.ArrayAttr(attr))


def as_i64_array(attr: ir.Attribute) -> list[int] | None:
    if not isinstance(attr, ir.DenseI64ArrayAttr):
        return None
    return list(ir.DenseI64ArrayAttr(attr))


def as_dense_values(attr: ir.Attribute) -> list | None:
    """The elements of a dense integer or float elements attribute (flat), else None."""
    if not isinstance(attr, (ir.DenseIntElementsAttr, ir.DenseFPElementsAttr)):
        return None
    if attr.is_splat:
        splat: Any = attr.get_splat_value()  # an IntegerAttr or a FloatAttr
        return [splat.value]
    return [attr[i] for i in range(len(attr))]


def dense_int_matrix(attr: ir.Attribute) -> np.ndarray:
    """A dense integer elements attribute (replica_groups, source_target_pairs) as a
    2-D int64 array; an empty one is (0, 0)."""
    values = np.array(ir.DenseIntElementsAttr(attr), dtype=np.int64)
    return values.reshape(0, 0) if values.size == 0 else values.reshape(values.shape[0], -1)


def comparison_direction(compare_op: ir.Operation) -> str:
    """The direction of a stablehlo.compare: "LT", "EQ", ..."""
    return _stablehlo.ComparisonDirectionAttr(compare_op.attributes["comparison_direction"]).value


def comparison_direction_attr(direction: str) -> ir.Attribute:
    """The `comparison_direction` of a stablehlo.compare: "EQ", "LT", ..."""
    return _stablehlo.ComparisonDirectionAttr.get(direction)


def splat_value(attr: ir.Attribute) -> ir.Attribute | None:
    """The element of a splat dense elements attribute, else None."""
    if isinstance(attr, ir.DenseElementsAttr) and attr.is_splat:
        return attr.get_splat_value()
    return None


def splat_attr(type_: ir.Type, element: ir.Attribute) -> ir.Attribute:
    return ir.DenseElementsAttr.get_splat(type_, element)


def is_unit(attr: ir.Attribute) -> bool:
    return isinstance(attr, ir.UnitAttr)


def symbol_refs(attr: ir.Attribute | None) -> list[str] | None:
    """The names of an array of flat symbol references, e.g. called_computations."""
    items = as_list(attr) if attr is not None else None
    if items is None:
        return None
    names = []
    for item in items:
        if not isinstance(item, ir.FlatSymbolRefAttr):
            return None
        names.append(ir.FlatSymbolRefAttr(item).value)
    return names


def symbol_ref_attr(name: str) -> ir.Attribute:
    return ir.FlatSymbolRefAttr.get(name)


def callee_of(call_op: ir.Operation) -> str:
    """The symbol a func.call calls."""
    return ir.FlatSymbolRefAttr(call_op.attributes["callee"]).value
