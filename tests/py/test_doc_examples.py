"""Every example in README.md and docs/ runs, so that none can go stale.

- A ```python block runs in a new process after README's quick start (which
  defines `step` and `x` on 8 CPU devices); the quick start runs alone.
- A ```sh block's `pmapc ...` and `python ...` lines run in a folder holding
  `examples/`, with this environment's `pmapc` and Python. Lines that install or
  set up (`pip`, `python3 -m venv`, `export`, `bash scripts/test.sh`) are what CI
  itself runs, and are not run again.
- A block after `<!-- from: FILE -->` is a part of FILE, which a test runs: each of
  its lines must be one of FILE's.
- A block after `<!-- needs: tpu -->` (or `gpu`) compiles for that platform: it
  skips without the plugin, or fails where PMAPC_REQUIRE_TARGETS names it.
"""

from __future__ import annotations

import dataclasses
import os
import pathlib
import re
import shlex
import subprocess
import sys
import textwrap

import pytest
from test_targets import REQUIRED

from pmapc.compiler import targets

ROOT = pathlib.Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", *sorted(ROOT.glob("docs/*.md"))]
FENCE = re.compile(
    r"^(?P<note>[ \t]*<!-- (?P<key>from|needs): (?P<value>\S+) -->\n)?"
    r"(?P<indent>[ \t]*)```(?P<lang>python|sh)\n(?P<body>.*?)^(?P=indent)```",
    re.MULTILINE | re.DOTALL,
)
SET_UP = ("pip ", "python3 -m venv", "export ", "bash scripts/test.sh")


@dataclasses.dataclass(frozen=True)
class Example:
    path: pathlib.Path
    line: int
    lang: str
    code: str
    key: str | None
    value: str | None

    @property
    def id(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"


def examples() -> list[Example]:
    found = []
    for path in DOCS:
        text = path.read_text()
        for match in FENCE.finditer(text):
            line = text.count("\n", 0, match.start("indent")) + 1
            code = textwrap.dedent(match["body"])
            found.append(Example(path, line, match["lang"], code, match["key"], match["value"]))
    return found


EXAMPLES = examples()
QUICK_START = next(e for e in EXAMPLES if e.lang == "python" and "def step" in e.code)


def run(argv: list[str], cwd: pathlib.Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        argv, cwd=cwd, capture_output=True, text=True, timeout=600, check=False,
        env={**os.environ, "JAX_PLATFORMS": "cpu"},
    )  # fmt: skip


def needs(example: Example) -> None:
    """Skip (or fail, where CI requires the plugin) an example whose platform's
    compiler is not installed."""
    if example.key != "needs":
        return
    missing = targets.plugin_missing(example.value)
    if missing is not None:
        (pytest.fail if example.value in REQUIRED else pytest.skip)(missing)


PYTHON = [e for e in EXAMPLES if e.lang == "python"]
SHELL = [e for e in EXAMPLES if e.lang == "sh"]


@pytest.mark.parametrize("example", PYTHON, ids=lambda e: e.id)
def test_python_example_runs(example: Example, tmp_path):
    if example.key == "from":
        source = {line.strip() for line in (ROOT / example.value).read_text().splitlines()}
        missing = [line for line in example.code.splitlines() if line.strip() not in source]
        assert missing == [], f"{example.id}: lines not in {example.value}"
        return
    needs(example)
    code = example.code if example is QUICK_START else QUICK_START.code + "\n" + example.code
    done = run([sys.executable, "-c", code], tmp_path)
    assert done.returncode == 0, f"{example.id}:\n{done.stderr[-3000:]}"


def commands(example: Example) -> list[str]:
    lines = [line.split("  #")[0].strip() for line in example.code.splitlines()]
    return [line for line in lines if line and not line.startswith(SET_UP)]


@pytest.mark.parametrize("example", SHELL, ids=lambda e: e.id)
def test_shell_example_runs(example: Example, tmp_path):
    (tmp_path / "examples").symlink_to(ROOT / "examples")
    tool = pathlib.Path(sys.executable).parent / "pmapc"
    for command in commands(example):
        argv = shlex.split(command)
        if argv[0] == "pmapc":
            if "--topology" in argv:
                needs(Example(example.path, example.line, "sh", "", "needs", _platform(argv)))
            argv = [str(tool), *argv[1:]]
        elif argv[0] == "python":
            argv = [sys.executable, *argv[1:]]
        else:
            pytest.fail(f"{example.id}: a command this test does not know how to run: {command}")
        done = run(argv, tmp_path)
        assert done.returncode == 0, f"{example.id}: {command}\n{done.stderr[-3000:]}"


def _platform(argv: list[str]) -> str:
    return argv[argv.index("--topology") + 1].split(":")[0]


def test_every_example_is_found():
    """The fence pattern sees each block: the quick start, and the command lines."""
    assert QUICK_START.path.name == "README.md"
    fenced = sum(path.read_text().count("```python") for path in DOCS)
    assert len(PYTHON) == fenced
