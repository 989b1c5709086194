#!/usr/bin/env bash
# Run every check (ruff check and format, basedpyright, pytest on tests/py, lit
# on tests/lit) on both ends of the JAX range pyproject.toml admits, each in a
# virtualenv of its own that this script makes or brings up to date; pytest and
# lit each run a worker per core:
#
#   oldest  .venv         Python 3.11 (else python3), jax/jaxlib at the range's lower bound
#   newest  .venv-newest  Python 3.12 or newer, the newest jax/jaxlib the registry serves
#                         (JAX 0.11 and later need Python 3.12)
#
#   bash scripts/test.sh [--leg=oldest|newest] [PYTEST_ARGS...]
#
# The newest leg looks for Python 3.12+ in $PMAPC_NEWEST_PYTHON, then python3.12
# and python3.13 on PATH, then under pyenv; without one it says so and fails.
# Exits non-zero if any check fails or a leg cannot run.
set -uo pipefail
cd "$(dirname "$0")/.."

legs=(oldest newest)
if [[ "${1:-}" == --leg=* ]]; then
    legs=("${1#--leg=}")
    shift
fi

# The lower bound of the jax requirement in pyproject.toml ("jax>=X,..."): the
# oldest leg pins jax and jaxlib to it.
oldest_jax() {
    sed -n 's/^ *"jax>=\([0-9.]*\),.*/\1/p' pyproject.toml
}

python_at_least() {  # python_at_least PYTHON MINOR: whether PYTHON runs and is 3.MINOR+
    "$1" -c "import sys; sys.exit(sys.version_info < (3, $2))" >/dev/null 2>&1
}

find_oldest_python() {
    for candidate in python3.11 python3; do
        if python_at_least "$candidate" 10; then echo "$candidate"; return 0; fi
    done
    return 1
}

find_newest_python() {
    local candidate
    for candidate in ${PMAPC_NEWEST_PYTHON:-} python3.12 python3.13; do
        if python_at_least "$candidate" 12; then echo "$candidate"; return 0; fi
    done
    if command -v pyenv >/dev/null 2>&1; then
        for candidate in "$(pyenv root)"/versions/3.1[2-9]*/bin/python3; do
            if python_at_least "$candidate" 12; then echo "$candidate"; return 0; fi
        done
    fi
    return 1
}

# make_venv DIR PYTHON PIP_ARGS...: DIR with pmapc, its test tools, the libraries the
# tests run on it (Flax, Optax: the extra libs) and XLA's TPU and GPU compilers (the
# extra targets: libtpu and the CUDA PJRT plugin, about 1 GB), the plugin at the
# installed jaxlib's release.
make_venv() {
    local venv=$1 python=$2 jaxlib
    shift 2
    [ -x "$venv/bin/python" ] || "$python" -m venv "$venv" || return 1
    "$venv/bin/python" -m pip install --quiet --upgrade pip >/dev/null 2>&1
    "$venv/bin/python" -m pip install --quiet "$@" -e '.[test,libs,targets]' || return 1
    jaxlib=$("$venv/bin/python" -c 'from importlib import metadata; print(metadata.version("jaxlib"))')
    "$venv/bin/python" -m pip install --quiet "jax-cuda12-pjrt==$jaxlib"
}

# run_checks DIR [PYTEST_ARGS...]: ruff, basedpyright, pytest and lit with DIR's tools.
run_checks() {
    local venv=$1 status=0
    shift
    # JAX on this machine's CPU only (with libtpu and the CUDA plugin installed, JAX
    # would try to start a TPU and a GPU first); the tests that compile for TPU pods
    # and GPU machines fail, rather than skip, where a plugin is missing.
    export JAX_PLATFORMS=cpu PMAPC_REQUIRE_TARGETS=1
    "$venv/bin/ruff" check . || status=1
    "$venv/bin/ruff" format --check . || status=1
    "$venv/bin/python" scripts/typecheck.py || status=1
    "$venv/bin/python" -m pytest tests/py -q -p no:cacheprovider --numprocesses=auto "$@" \
        || status=1
    PATH="$PWD/$venv/bin:$PATH" "$venv/bin/lit" -sv tests/lit || status=1
    return $status
}

describe() {  # the Python and JAX a venv runs
    "$1/bin/python" -c "import sys, jax, jaxlib; print(f'Python {sys.version.split()[0]}, \
jax {jax.__version__}, jaxlib {jaxlib.__version__}')"
}

status=0
summary=()
for leg in "${legs[@]}"; do
    case $leg in
        oldest)
            venv=.venv
            python=$(find_oldest_python) || {
                summary+=("oldest: no Python 3.10 or newer found"); status=1; continue; }
            pins=(--constraint /dev/stdin)
            pin_text="jax==$(oldest_jax)
jaxlib==$(oldest_jax)
jax-cuda12-pjrt==$(oldest_jax)"
            ;;
        newest)
            venv=.venv-newest
            python=$(find_newest_python) || {
                summary+=("newest: NOT RUN, no Python 3.12 or newer found (looked at \
\$PMAPC_NEWEST_PYTHON, python3.12 and python3.13 on PATH, pyenv's versions); JAX 0.11+ \
needs one: install it (e.g. pyenv install 3.12) or point PMAPC_NEWEST_PYTHON at it")
                status=1; continue; }
            pins=(--upgrade)
            pin_text=""
            ;;
        *)
            echo "scripts/test.sh: unknown leg '$leg'; use --leg=oldest or --leg=newest" >&2
            exit 2
            ;;
    esac
    echo "== $leg leg: $venv from $python"
    if ! make_venv "$venv" "$python" "${pins[@]}" <<<"$pin_text"; then
        summary+=("$leg: installing pmapc into $venv failed"); status=1; continue
    fi
    what=$(describe "$venv")
    echo "== $leg leg: $what"
    if run_checks "$venv" "$@"; then
        summary+=("$leg ($what): passed")
    else
        summary+=("$leg ($what): FAILED"); status=1
    fi
done

echo
for line in "${summary[@]}"; do echo "== $line"; done
exit $status
