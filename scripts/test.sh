#!/usr/bin/env bash
# Run every check (ruff check and format, basedpyright, pytest on tests/py, lit on
# tests/lit) on one JAX release of each minor pyproject.toml admits, each in a
# virtualenv of its own that this script makes or brings up to date; pytest and
# lit each run a worker per core. The releases are read from the package registry
# (scripts/jax_legs.py), so a release that appears tomorrow is tested tomorrow:
#
#   oldest   .venv            Python 3.11 (else 3.10+), jax/jaxlib at the range's lower bound
#   MINOR    .venv-MINOR      Python 3.12+, the newest release of each minor in between
#                             (today one leg, 0.11: 0.11.2)
#   newest   .venv-newest     the newest Python found that it supports, the newest jax/jaxlib
#                             the registry serves in the range; it fails if pip installed
#                             any other
#   targets  .venv-targets    only where the newest release lacks a plugin (libtpu, the
#                             CUDA PJRT plugin): the newest release of its minor that has
#                             both, running the tests that compile for GPUs and TPUs
#
# Each leg installs the compilers for GPU and TPU targets that its release has and
# requires them (PMAPC_REQUIRE_TARGETS): a missing one fails those tests.
#
#   bash scripts/test.sh [--leg=oldest|newest|targets|MINOR] [PYTEST_ARGS...]
#
# Python 3.12+ is looked for in $PMAPC_NEWEST_PYTHON, python3.13 and python3.12 on
# PATH, then under pyenv; without one the legs that need it fail, saying so.
# Exits non-zero if any check fails or a leg cannot run.
set -uo pipefail
cd "$(dirname "$0")/.."

only=""
if [[ "${1:-}" == --leg=* ]]; then
    only=${1#--leg=}
    shift
fi

# The lower bound of the jax requirement in pyproject.toml ("jax>=X,...").
oldest_jax() {
    sed -n 's/^ *"jax>=\([0-9.]*\),.*/\1/p' pyproject.toml
}

python_at_least() {  # python_at_least PYTHON MINOR: whether PYTHON runs and is 3.MINOR+
    "$1" -c "import sys; sys.exit(sys.version_info < (3, $2))" >/dev/null 2>&1
}

python_version() {
    "$1" -c 'import sys; print(".".join(map(str, sys.version_info[:3])))'
}

find_oldest_python() {
    for candidate in python3.11 python3; do
        if python_at_least "$candidate" 10; then echo "$candidate"; return 0; fi
    done
    return 1
}

# Every Python 3.12+ found, one a line, newest first.
newer_pythons() {
    local candidate
    {
        for candidate in ${PMAPC_NEWEST_PYTHON:-} python3.13 python3.12; do
            if python_at_least "$candidate" 12; then
                echo "$(python_version "$candidate") $(command -v "$candidate")"
            fi
        done
        if command -v pyenv >/dev/null 2>&1; then
            for candidate in "$(pyenv root)"/versions/3.1[2-9]*/bin/python3; do
                if python_at_least "$candidate" 12; then
                    echo "$(python_version "$candidate") $candidate"
                fi
            done
        fi
    } | sort -V -r -k1,1 | awk '!seen[$1]++ { print $2 }'
}

# The Python a user of the newest JAX has: the newest found whose pip is served the
# newest admitted release (a JAX can come out before its wheels for a new Python).
# Prints "PYTHON VERSION".
find_newest() {
    local python version best="" best_version=""
    while read -r python; do
        version=$("$python" scripts/jax_legs.py newest 2>/dev/null) || continue
        if [ -z "$best" ] || [ "$(printf '%s\n%s\n' "$best_version" "$version" | sort -V | tail -1)" != "$best_version" ]; then
            best=$python best_version=$version
        fi
    done < <(newer_pythons)
    [ -n "$best" ] && echo "$best $best_version"
}

NO_PYTHON_312="no Python 3.12 or newer found (looked at \$PMAPC_NEWEST_PYTHON, python3.13 \
and python3.12 on PATH, pyenv's versions); JAX 0.11+ needs one: install it (e.g. pyenv \
install 3.12) or point PMAPC_NEWEST_PYTHON at it"

# make_venv DIR PYTHON VERSION PLATFORMS: DIR with pmapc, its test tools, the libraries
# the tests run on it (Flax, Optax: the extra libs), jax and jaxlib at VERSION, and the
# compilers of PLATFORMS ("gpu,tpu"): the CUDA PJRT plugin and libtpu of that release.
make_venv() {
    local venv=$1 python=$2 version=$3 platforms=$4
    local -a wanted=("jax==$version" "jaxlib==$version")
    local -a unwanted=()
    [[ ,$platforms, == *,tpu,* ]] && wanted+=("jax[tpu]==$version") || unwanted+=(libtpu)
    [[ ,$platforms, == *,gpu,* ]] && wanted+=("jax-cuda12-pjrt==$version") \
        || unwanted+=(jax-cuda12-pjrt)
    # A venv of another Python (a leg that moved to a newer one) is made anew.
    if [ -x "$venv/bin/python" ] \
        && [ "$(python_version "$venv/bin/python")" != "$(python_version "$python")" ]; then
        rm -rf "$venv"
    fi
    [ -x "$venv/bin/python" ] || "$python" -m venv "$venv" || return 1
    "$venv/bin/python" -m pip install --quiet --upgrade pip >/dev/null 2>&1
    "$venv/bin/python" -m pip install --quiet "${wanted[@]}" -e '.[test,libs]' || return 1
    # A plugin of an earlier release, left by an earlier run, would compile with the
    # wrong release's compiler.
    if [ ${#unwanted[@]} -gt 0 ]; then
        "$venv/bin/python" -m pip uninstall --quiet --yes "${unwanted[@]}" >/dev/null 2>&1
    fi
    return 0
}

# run_checks DIR PLATFORMS [PYTEST_ARGS...]: ruff, basedpyright, pytest and lit with
# DIR's tools, the targets of PLATFORMS required.
run_checks() {
    local venv=$1 status=0
    export PMAPC_REQUIRE_TARGETS=$2
    shift 2
    # JAX on this machine's CPU only (with libtpu and the CUDA plugin installed, JAX
    # would try to start a TPU and a GPU first).
    export JAX_PLATFORMS=cpu
    "$venv/bin/ruff" check . || status=1
    "$venv/bin/ruff" format --check . || status=1
    "$venv/bin/python" scripts/typecheck.py || status=1
    "$venv/bin/python" -m pytest tests/py -q -p no:cacheprovider --numprocesses=auto "$@" \
        || status=1
    PATH="$PWD/$venv/bin:$PATH" "$venv/bin/lit" -sv tests/lit || status=1
    return $status
}

# The tests that compile for GPU machines and TPU pods, alone (the targets leg).
TARGET_TESTS=(tests/py/test_targets.py tests/py/test_targets_cli.py tests/py/test_gpu_check.py)
TARGET_LIT=(tests/lit/tools/plan-topology.mlir)

run_target_checks() {  # run_target_checks DIR PLATFORMS [PYTEST_ARGS...]
    local venv=$1 status=0
    export PMAPC_REQUIRE_TARGETS=$2 JAX_PLATFORMS=cpu
    shift 2
    "$venv/bin/python" -m pytest "${TARGET_TESTS[@]}" -q -p no:cacheprovider \
        --numprocesses=auto "$@" || status=1
    PATH="$PWD/$venv/bin:$PATH" "$venv/bin/lit" -sv "${TARGET_LIT[@]}" || status=1
    return $status
}

describe() {  # the Python and JAX a venv runs
    "$1/bin/python" -c "import sys, jax, jaxlib; print(f'Python {sys.version.split()[0]}, \
jax {jax.__version__}, jaxlib {jaxlib.__version__}')"
}

status=0
summary=()
fail() { summary+=("$1"); status=1; }

# run_leg NAME VENV PYTHON VERSION [full|targets] [PYTEST_ARGS...]
run_leg() {
    local leg=$1 venv=$2 python=$3 version=$4 scope=$5 platforms what note=""
    shift 5
    platforms=$("$python" scripts/jax_legs.py targets "$version")
    echo "== $leg leg: $venv from $python, jax $version, targets: ${platforms:-none}"
    if ! make_venv "$venv" "$python" "$version" "$platforms"; then
        fail "$leg: installing pmapc with jax $version into $venv failed"; return
    fi
    what=$(describe "$venv")
    echo "== $leg leg: $what"
    if [ "$leg" = newest ] && ! "$venv/bin/python" scripts/jax_legs.py check; then
        fail "newest ($what): FAILED, not the registry's newest jax and jaxlib"; return
    fi
    if [ "$platforms" != gpu,tpu ]; then
        note="; targets not compiled here:"
        [[ ,$platforms, == *,gpu,* ]] || note+=" no jax-cuda12-pjrt $version"
        [[ ,$platforms, == *,tpu,* ]] || note+=" no libtpu for jax[tpu]==$version"
        [ -n "$WITH_TARGETS" ] && note+="; compiled on the targets leg (jax $WITH_TARGETS)"
    fi
    if [ "$scope" = targets ]; then
        run_target_checks "$venv" "$platforms" "$@"
    else
        run_checks "$venv" "$platforms" "$@"
    fi
    if [ $? -eq 0 ]; then
        summary+=("$leg ($what): passed$note")
    else
        fail "$leg ($what): FAILED$note"
    fi
}

newest_python="" newest_jax="" WITH_TARGETS="" middle=()
if [ "$only" != oldest ]; then
    if read -r newest_python newest_jax < <(find_newest); then
        middle_python=$(newer_pythons | tail -1)  # the oldest 3.12+: a 0.11 user's
        read -r -a middle < <("$middle_python" scripts/jax_legs.py minors)
        if [ "$("$newest_python" scripts/jax_legs.py targets "$newest_jax")" != gpu,tpu ]; then
            WITH_TARGETS=$("$middle_python" scripts/jax_legs.py with-targets)
        fi
    fi
fi

legs=(oldest)
minor_of() { cut -d. -f1,2 <<<"$1"; }
for version in "${middle[@]}"; do legs+=("$(minor_of "$version")"); done
legs+=(newest)
[ -n "$WITH_TARGETS" ] && legs+=(targets)
if [ -n "$only" ]; then
    if [[ " ${legs[*]} " != *" $only "* ]] && [ -n "$newest_python" ]; then
        echo "scripts/test.sh: unknown leg '$only'; the legs are: ${legs[*]}" >&2
        exit 2
    fi
    legs=("$only")
fi

for leg in "${legs[@]}"; do
    case $leg in
        oldest)
            python=$(find_oldest_python) || { fail "oldest: no Python 3.10 or newer found"; continue; }
            run_leg oldest .venv "$python" "$(oldest_jax)" full "$@"
            ;;
        newest)
            [ -n "$newest_python" ] || { fail "newest: NOT RUN, $NO_PYTHON_312"; continue; }
            run_leg newest .venv-newest "$newest_python" "$newest_jax" full "$@"
            ;;
        targets)
            run_leg targets .venv-targets "$middle_python" "$WITH_TARGETS" targets "$@"
            ;;
        *)
            [ -n "$newest_python" ] || { fail "$leg: NOT RUN, $NO_PYTHON_312"; continue; }
            for version in "${middle[@]}"; do
                [ "$(minor_of "$version")" = "$leg" ] || continue
                run_leg "$leg" ".venv-$leg" "$middle_python" "$version" full "$@"
            done
            ;;
    esac
done

echo
for line in "${summary[@]}"; do echo "== $line"; done
exit $status
