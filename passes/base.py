"""What every pass is: a frozen dataclass with a `name` and `run(module) -> bool`.

Options are the dataclass's typed fields; `from_options` builds a pass from
the `{key=value ...}` text of a pipeline string.
"""

from __future__ import annotations

import dataclasses
from typing import ClassVar, Protocol

from pmapc import ir
from pmapc.errors import PipelineError


class Pass(Protocol):
    name: ClassVar[str]

    def run(self, module: ir.Module) -> bool:
        """Rewrite `module` in place; return whether anything changed."""
        ...


def summary(pass_class: type) -> str:
    """The first line of a pass's docstring (shown by --list-passes)."""
    return (pass_class.__doc__ or "").strip().splitlines()[0]


def from_options(pass_class: type, options: dict[str, str]):
    """Instantiate `pass_class` with option values parsed by their field types."""
    fields = {f.name.replace("_", "-"): f for f in dataclasses.fields(pass_class)}
    values = {}
    for key, text in options.items():
        field = fields.get(key)
        if field is None:
            known = ", ".join(sorted(fields)) or "none"
            raise PipelineError(
                f"pass '{pass_class.name}' has no option '{key}'; its options are: {known}"
            )
        values[field.name] = _parse_option(pass_class.name, key, text, field.type)
    return pass_class(**values)


def _parse_option(pass_name: str, key: str, text: str, type_name) -> object:
    type_name = getattr(type_name, "__name__", type_name)
    if type_name == "bool":
        if text in ("true", "1"):
            return True
        if text in ("false", "0"):
            return False
        raise PipelineError(f"option '{key}' of pass '{pass_name}' takes true or false, "
                            f"got '{text}'")
    if type_name == "int":
        try:
            return int(text)
        except ValueError:
            raise PipelineError(f"option '{key}' of pass '{pass_name}' takes an integer, "
                                f"got '{text}'") from None
    return text
