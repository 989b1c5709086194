"""benchmarks/README.md's tables are what benchmarks/tables.py renders from the
results files the benchmarks wrote (benchmarks/results/*.json): a table edited by
hand, or results committed without their table, fail here."""

from __future__ import annotations

import difflib
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
BENCHMARKS = ROOT / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))

import tables  # noqa: E402


def test_every_table_is_rendered_from_its_results():
    text = tables.README.read_text()
    rendered, changed = tables.regenerate(text)
    diff = difflib.unified_diff(text.splitlines(), rendered.splitlines(), lineterm="", n=1)
    assert changed == [], "run `python benchmarks/tables.py`:\n" + "\n".join(list(diff)[:40])


def test_every_table_of_the_readme_is_known_and_every_known_table_is_there():
    names = re.findall(r"<!-- table: ([\w-]+) -->", tables.README.read_text())
    assert sorted(names) == sorted([*tables.TABLES, "targets"])


def test_every_results_file_is_stamped():
    for path in sorted(tables.RESULTS.glob("*.json")):
        stamp = tables.load(path.name)["environment"]
        for field in ("date", "pmapc_commit", "cpu_count", "jax", "python", "command"):
            assert field in stamp, f"{path.name}: no {field!r} in its environment"


def test_the_readme_is_short():
    assert len(tables.README.read_text().splitlines()) <= 300
