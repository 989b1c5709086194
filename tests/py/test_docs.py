"""The docs say what is: no commit hashes and no words that only meant something on
the day they were written, in README, CONTRIBUTING, CHANGELOG and docs/ (benchmark
tables, which stamp the commit they were measured at, live in benchmarks/)."""

from __future__ import annotations

import ast
import io
import pathlib
import re
import subprocess
import sys
import tokenize

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
DOCS = sorted(
    [ROOT / "README.md", ROOT / "CONTRIBUTING.md", ROOT / "CHANGELOG.md", *ROOT.glob("docs/*.md")]
)

# A git commit, abbreviated or whole: 7 to 40 hex digits with a letter and a digit.
COMMIT = re.compile(r"\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*[0-9])[0-9a-f]{7,40}\b")
# Words that point at a moment or a conversation a reader never saw.
OF_THE_DAY = re.compile(r"\b(this session|that day|the issue|this work)\b", re.IGNORECASE)


def offending(pattern: re.Pattern, path: pathlib.Path) -> list[str]:
    lines = path.read_text().splitlines()
    return [
        f"{path.name}:{number}: {match[0]!r}"
        for number, line in enumerate(lines, 1)
        for match in pattern.finditer(line)
    ]


@pytest.mark.parametrize("path", DOCS, ids=lambda path: str(path.relative_to(ROOT)))
def test_no_commit_hashes(path):
    assert offending(COMMIT, path) == []


@pytest.mark.parametrize("path", DOCS, ids=lambda path: str(path.relative_to(ROOT)))
def test_no_words_of_the_day(path):
    assert offending(OF_THE_DAY, path) == []


def test_the_checks_find_what_they_look_for(tmp_path):
    sample = tmp_path / "sample.md"
    sample.write_text("measured at 99fc2e0 in this session\nshape 1024x4096, f32\n")
    assert [line.split(": ", 1)[1] for line in offending(COMMIT, sample)] == ["'99fc2e0'"]
    assert [line.split(": ", 1)[1] for line in offending(OF_THE_DAY, sample)] == ["'this session'"]


# The package's folders (pyproject.toml maps them into `pmapc`).
PACKAGE = ("pmapc", "compiler", "passes", "lowering", "tools")
# A measured time or share: "1.2 ms", "40 µs", "12-17 %".
TIMING = re.compile(r"\b\d+(?:\.\d+)?(?:[-\u2013]\d+(?:\.\d+)?)? ?(?:ms|µs|us|ns|%)(?!\w)")


def prose_of(path: pathlib.Path) -> list[tuple[int, str]]:
    """(line, text) of every comment and docstring of a Python file."""
    source = path.read_text()
    found = [
        (token.start[0], token.string)
        for token in tokenize.generate_tokens(io.StringIO(source).readline)
        if token.type == tokenize.COMMENT
    ]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                if isinstance(body[0].value.value, str):
                    found.append((body[0].lineno, body[0].value.value))
    return found


def test_no_measurements_in_the_packages_docstrings_or_comments():
    """A figure goes stale where no benchmark rewrites it: the package says why a
    choice is made and names the benchmark that measures it (benchmarks/)."""
    found = [
        f"{path.relative_to(ROOT)}:{line}: {match[0]!r}"
        for folder in PACKAGE
        for path in sorted((ROOT / folder).rglob("*.py"))
        for line, text in prose_of(path)
        for match in TIMING.finditer(text)
    ]
    assert found == []


# ----------------------------------------------------------------------------
# The API reference (docs/api, Sphinx's autodoc) and the command line's (docs/cli.md)

API = ROOT / "docs" / "api"


def test_the_api_reference_names_every_public_name():
    """docs/api/index.rst documents each of `pmapc.__all__` (autodoc reads its
    docstring): a public name added without its entry fails here."""
    import pmapc

    text = (API / "index.rst").read_text()
    documented = set(re.findall(r"^\.\. auto\w+:: pmapc\.(\w+)", text, re.MULTILINE))
    documented |= set(re.findall(r"``pmapc\.(__\w+__)``", text))
    assert sorted(set(pmapc.__all__) - documented) == []


def test_the_api_reference_builds_without_a_warning(tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "sphinx", "-W", "-q", "-b", "text", str(API), str(tmp_path)],
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "pmapc.pmap(" in (tmp_path / "index.txt").read_text()


def cli_sections() -> dict[str, str]:
    """docs/cli.md's text of each command, by the command's name."""
    text = (ROOT / "docs" / "cli.md").read_text()
    parts = re.split(r"^## pmapc (\w+)\n", text, flags=re.MULTILINE)
    return dict(zip(parts[1::2], parts[2::2]))


@pytest.mark.parametrize("command", ["opt", "trace", "run", "plan"])
def test_the_cli_reference_has_an_entry_for_every_flag(command):
    from pmapc.tools import opt, plan_cmd, run_cmd, trace_cmd

    module = {"opt": opt, "trace": trace_cmd, "run": run_cmd, "plan": plan_cmd}[command]
    parser = module.build_parser()
    flags = {flag for action in parser._actions for flag in action.option_strings} - {
        "-h",
        "--help",
    }
    section = cli_sections()[command]
    assert sorted(flag for flag in flags if f"`{flag}" not in section) == []


# ----------------------------------------------------------------------------
# Commit messages (CONTRIBUTING.md, "Commits")

# The last commit before the rule; every commit after it follows it.
RULE_FROM = "99fc2e0"


def test_commit_subjects_are_at_most_72_characters():
    done = subprocess.run(
        ["git", "log", "--format=%h %s", f"{RULE_FROM}..HEAD"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        pytest.skip(f"no git history with {RULE_FROM} here: {done.stderr.strip()}")
    long = [line for line in done.stdout.splitlines() if len(line.split(" ", 1)[1]) > 72]
    assert long == []


def test_readme_is_a_front_page():
    """README is an overview with links (at most 350 lines); the reference is docs/."""
    assert len((ROOT / "README.md").read_text().splitlines()) <= 350
