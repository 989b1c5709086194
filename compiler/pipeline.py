"""Pass pipelines: parse a pipeline string and run it, verifying after each pass.

`builtin.module(verify-axes,flatten-maps{split-entry=false},lower-collectives)`
follows mlir-opt's textual form; the `builtin.module(...)` wrapper is optional
and named pipelines (`pmapc-to-stablehlo`, `pmapc-lower{target=replicas}`)
expand in place. A named pipeline's one option, `target`, picks the pass it
ends in (passes/__init__.py's TARGETS).
"""

from __future__ import annotations

import re
from collections.abc import Callable

from pmapc import ir
from pmapc.errors import Diagnostic, DiagnosticError, PipelineError
from pmapc.passes import DEFAULT_TARGET, PASSES, PIPELINES, TARGETS, expand_pipeline
from pmapc.passes.base import from_options

DEFAULT_PIPELINE = "pmapc-to-stablehlo"

_ELEMENT = re.compile(r"\s*([A-Za-z0-9_.-]+)\s*(\{[^}]*\})?\s*(,|$)")


def parse_pipeline(text: str) -> list:
    """Pass instances for a pipeline string; PipelineError names what is wrong."""
    body = text.strip()
    wrapper = re.fullmatch(r"builtin\.module\((.*)\)", body, flags=re.S)
    if wrapper:
        body = wrapper.group(1)
    passes = []
    position = 0
    while position < len(body):
        match = _ELEMENT.match(body, position)
        if match is None or match.end() == position:
            raise PipelineError(f"malformed pass pipeline '{text}' at '{body[position:]}'; "
                                "write e.g. 'builtin.module(verify-axes,flatten-maps)'")
        name, options = match.group(1), _parse_options(match.group(2) or "")
        passes.extend(_instantiate(name, options, text))
        position = match.end()
    return passes


def _instantiate(name: str, options: dict[str, str], text: str) -> list:
    if name in PIPELINES:
        return parse_pipeline(expand_pipeline(name, _pipeline_target(name, options)))
    if name not in PASSES:
        known = ", ".join([*PASSES, *PIPELINES])
        raise PipelineError(f"unknown pass '{name}' in pipeline '{text}'; known passes: {known}")
    return [from_options(PASSES[name], options)]


def _pipeline_target(name: str, options: dict[str, str]) -> str:
    """The `target` option of a named pipeline, checked."""
    unknown = sorted(set(options) - {"target"})
    if unknown:
        raise PipelineError(f"pipeline '{name}' has no option '{unknown[0]}'; its options "
                            "are: target")
    target = options.get("target", DEFAULT_TARGET)
    if target not in TARGETS:
        choices = " or ".join(TARGETS)
        raise PipelineError(f"option 'target' of pipeline '{name}' takes {choices}, "
                            f"got '{target}'")
    return target


def _parse_options(text: str) -> dict[str, str]:
    options = {}
    for item in text.strip("{}").split():
        key, sep, value = item.partition("=")
        if not sep:
            raise PipelineError(f"pass option '{item}' must be written key=value")
        options[key] = value
    return options


# after_pass(pass_instance, module) is called after each pass ran and verified.
AfterPass = Callable[[object, ir.Module], None]


def run_passes(module: ir.Module, passes: list, after_pass: AfterPass | None = None) -> None:
    """Run `passes` in order, verifying the IR after each one that changed it.

    A pass that leaves invalid IR is a compiler bug: the error names the pass
    and the passes before it.
    """
    done: list[str] = []
    for pass_ in passes:
        with ir.building(module):
            changed = pass_.run(module)
        try:
            if changed:
                ir.verify(module)
        except DiagnosticError as error:
            before = ", ".join(done) or "none"
            raise DiagnosticError([*error.diagnostics, _broke_note(pass_.name, before)]) from None
        done.append(pass_.name)
        if after_pass is not None:
            after_pass(pass_, module)


def _broke_note(name: str, before: str) -> Diagnostic:
    advice = ("run verify-axes first to check the input" if "verify-axes" not in before
              else "this is a pmapc bug, please report it")
    return Diagnostic("note", f"invalid IR after pass '{name}' (passes run before it: "
                      f"{before}); {advice}")
