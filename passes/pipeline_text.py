"""Pipeline strings in MLIR's textual form: `builtin.module(verify-axes,
flatten-maps{split-entry=false},canonicalize)`.

The `builtin.module(...)` wrapper is optional. An element is one of pmapc's
passes with its options (`passes/__init__.py`'s registry), a named pipeline the
caller gives (compiler/pipeline.py's `pmapc-to-stablehlo{target=replicas}`),
which expands in place, or a registered MLIR pass, run by MLIR's pass manager
as written (`UpstreamPass`, nested pipelines such as `func.func(cse)` too).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping

from pmapc import ir
from pmapc.errors import PipelineError, did_you_mean
from pmapc.passes import PASSES
from pmapc.passes.base import from_options
from pmapc.passes.manager import Element, UpstreamPass

# A named pipeline: its options, as written, -> its passes.
NamedPipeline = Callable[[dict[str, str]], "tuple[Element, ...]"]


# MLIR's passes a pmapc pipeline most often names (any registered one runs).
COMMON_MLIR_PASSES = ("canonicalize", "cse", "inline", "symbol-dce")

_NAME = re.compile(r"\s*([A-Za-z0-9_.-]+)\s*")


def parse_pipeline(text: str, pipelines: Mapping[str, NamedPipeline]) -> list:
    """Pass instances for a pipeline string in MLIR's textual form; PipelineError names
    what is wrong. pmapc's passes, the named `pipelines`, and MLIR's registered passes
    (with their options, nested pipelines such as `func.func(cse)` too), mix freely;
    the `builtin.module(...)` wrapper is optional."""
    body = text.strip()
    wrapper = re.fullmatch(r"builtin\.module\((.*)\)", body, flags=re.S)
    if wrapper:
        body = wrapper.group(1)
    passes = []
    for element in _top_level_elements(body, text):
        name = _NAME.match(element)
        if name is None:
            raise PipelineError(
                f"malformed pass pipeline '{text}' at '{element}'; "
                "write e.g. 'builtin.module(verify-axes,flatten-maps,canonicalize)'"
            )
        rest = element[name.end() :].strip()
        passes.extend(_instantiate(name.group(1), rest, element, text, pipelines))
    return passes


def _top_level_elements(body: str, text: str) -> list[str]:
    """The comma-separated elements of a pipeline body, each with its options and
    nested pipeline (commas inside braces or parentheses do not split)."""
    elements, start = [], 0
    closing = {"(": ")", "{": "}"}
    stack: list[str] = []
    for position, char in enumerate(body):
        if char in closing:
            stack.append(closing[char])
        elif char in ")}":
            if not stack or stack.pop() != char:
                raise PipelineError(f"malformed pass pipeline '{text}': unbalanced '{char}'")
        elif char == "," and not stack:
            elements.append(body[start:position])
            start = position + 1
    if stack:
        raise PipelineError(f"malformed pass pipeline '{text}': unclosed '{stack[-1]}'")
    elements.append(body[start:])
    elements = [element.strip() for element in elements]
    if elements == [""]:
        return []
    if "" in elements:
        raise PipelineError(f"malformed pass pipeline '{text}': an empty element")
    return elements


def _instantiate(
    name: str, rest: str, element: str, text: str, pipelines: Mapping[str, NamedPipeline]
) -> list:
    if name in pipelines or name in PASSES:
        options = re.fullmatch(r"(\{[^{}]*\})?", rest)
        if options is None:
            raise PipelineError(
                f"malformed pass pipeline '{text}' at '{element}'; pmapc's passes run on "
                "the whole module and take only options, e.g. 'flatten-maps{split-entry=false}'"
            )
        parsed = _parse_options(options.group(1) or "")
        if name in pipelines:
            return list(pipelines[name](parsed))
        return [from_options(PASSES[name], parsed)]
    nested = [n for n in re.findall(r"[A-Za-z0-9_.-]+", rest) if n in PASSES or n in pipelines]
    if nested:
        raise PipelineError(
            f"'{nested[0]}' is nested in '{name}(...)' in pipeline '{text}'; pmapc's passes "
            "run on the whole module: put it at the top level"
        )
    why = ir.upstream_pipeline_error(element)
    if why is not None and ir.upstream_pipeline_error(name) is None:
        raise PipelineError(f"MLIR's pass '{name}' in pipeline '{text}': {why}")
    if why is not None:
        known = ", ".join([*PASSES, *pipelines])
        suggestion = did_you_mean(name, [*PASSES, *pipelines, *COMMON_MLIR_PASSES])
        raise PipelineError(
            f"unknown pass '{name}' in pipeline '{text}' ({why}){suggestion}; pmapc's passes: "
            f"{known}; or a registered MLIR pass, e.g. {', '.join(COMMON_MLIR_PASSES)}, sdy-*"
        )
    return [UpstreamPass(name, element)]


def _parse_options(text: str) -> dict[str, str]:
    options = {}
    for item in text.strip("{}").split():
        key, sep, value = item.partition("=")
        if not sep:
            raise PipelineError(f"pass option '{item}' must be written key=value")
        options[key] = value
    return options
