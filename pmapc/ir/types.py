"""Types: tensors, element types and their numpy names.

(pmapc/ir/__init__.py: the one adapter over jaxlib's MLIR bindings.)
"""

from __future__ import annotations

from collections.abc import Sequence

from jaxlib.mlir import ir


def tensor_type(shape: Sequence[int], element_type: ir.Type) -> ir.RankedTensorType:
    return ir.RankedTensorType.get(list(shape), element_type)


def is_ranked_tensor(type_: ir.Type) -> bool:
    return isinstance(type_, ir.RankedTensorType)


def shape_of(type_: ir.Type) -> tuple[int, ...]:
    return tuple(ir.RankedTensorType(type_).shape)


def element_type_of(type_: ir.Type) -> ir.Type:
    return ir.RankedTensorType(type_).element_type


def i1_type() -> ir.Type:
    return ir.IntegerType.get_signless(1)


def i32_type() -> ir.Type:
    return ir.IntegerType.get_signless(32)


def ui32_type() -> ir.Type:
    return ir.IntegerType.get_unsigned(32)


def i64_type() -> ir.Type:
    return ir.IntegerType.get_signless(64)


_FLOAT_DTYPES = (
    (ir.BF16Type, "bfloat16"),
    (ir.F16Type, "float16"),
    (ir.F32Type, "float32"),
    (ir.F64Type, "float64"),
)


def dtype_name(element_type: ir.Type) -> str | None:
    """The numpy/JAX dtype name of an element type ("float32", "bool", "uint8", ...)."""
    for type_class, name in _FLOAT_DTYPES:
        if isinstance(element_type, type_class):
            return name
    if isinstance(element_type, ir.IntegerType):
        integer = ir.IntegerType(element_type)
        if integer.width == 1:
            return "bool"
        return f"{'uint' if integer.is_unsigned else 'int'}{integer.width}"
    if isinstance(element_type, ir.ComplexType):
        part = dtype_name(ir.ComplexType(element_type).element_type)
        return {"float32": "complex64", "float64": "complex128"}.get(part or "")
    return None


def is_complex_type(type_: ir.Type) -> bool:
    return isinstance(type_, ir.ComplexType)


def is_integer_type(type_: ir.Type) -> bool:
    """An integer element type (signless, signed or unsigned; i1 included)."""
    return isinstance(type_, ir.IntegerType)


def is_float_type(type_: ir.Type) -> bool:
    return isinstance(type_, ir.FloatType)


def integer_range(type_: ir.Type) -> tuple[int, int]:
    """(lowest, highest) value of an integer type; i1 is (0, 1)."""
    integer = ir.IntegerType(type_)
    width = integer.width
    if width == 1 or integer.is_unsigned:
        return 0, (1 << width) - 1
    return -(1 << (width - 1)), (1 << (width - 1)) - 1
