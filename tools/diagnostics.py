"""`--verify-diagnostics`: match `expected-error` comments against diagnostics.

As in mlir-opt: `// expected-error {{text}}` expects an error on its own line,
`// expected-error@+N {{text}}` (or `@-N`) N lines below (above). The text
must occur in the message. Every diagnostic must be expected and every
expectation met; errors and warnings are checked, notes only where expected.
"""

from __future__ import annotations

import dataclasses
import re

from pmapc.errors import Diagnostic

_EXPECTED = re.compile(r"expected-(error|warning|note|remark)(?:@([+-]\d+))?\s*\{\{(.*?)\}\}")


@dataclasses.dataclass
class Expectation:
    severity: str
    line: int
    text: str
    matched: bool = False


def expectations_in(text: str, first_line: int = 1) -> list[Expectation]:
    found = []
    for number, line in enumerate(text.splitlines(), start=first_line):
        for match in _EXPECTED.finditer(line):
            severity, offset, message = match.groups()
            target = number + int(offset) if offset else number
            found.append(Expectation(severity, target, message))
    return found


def verify(expected: list[Expectation], diagnostics: list[Diagnostic], filename: str) -> list[str]:
    """Problems as `file:line: error: ...` strings (empty when all matched)."""
    problems = []
    checked_notes = any(e.severity == "note" for e in expected)
    flattened = []
    for diagnostic in diagnostics:
        flattened.append(diagnostic)
        if checked_notes:
            flattened.extend(diagnostic.notes)
    for diagnostic in flattened:
        line = diagnostic.loc.line if diagnostic.loc else None
        match = next(
            (
                e
                for e in expected
                if not e.matched
                and e.severity == diagnostic.severity
                and e.line == line
                and e.text in diagnostic.message
            ),
            None,
        )
        if match is None:
            where = f"{filename}:{line}" if line else filename
            problems.append(
                f"{where}: error: unexpected {diagnostic.severity}: {diagnostic.message}"
            )
            continue
        match.matched = True
    for expectation in expected:
        if not expectation.matched:
            problems.append(
                f"{filename}:{expectation.line}: error: expected "
                f'{expectation.severity} "{expectation.text}" was not produced'
            )
    return problems
