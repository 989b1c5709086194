#!/usr/bin/env bash
# Install pmapc with its test tools into .venv (if needed) and run every check:
# ruff (the project's lint config), pytest (tests/py) and lit (tests/lit).
# Exits non-zero if any fails.
set -uo pipefail
cd "$(dirname "$0")/.."

python3 -m venv .venv || exit 1
.venv/bin/python -m pip install --quiet --upgrade pip >/dev/null 2>&1
.venv/bin/python -m pip install --quiet -e '.[test]' || exit 1

status=0
.venv/bin/ruff check . || status=1
.venv/bin/python -m pytest tests/py -q -p no:cacheprovider "$@" || status=1
PATH="$PWD/.venv/bin:$PATH" .venv/bin/lit -sv tests/lit || status=1
exit $status
