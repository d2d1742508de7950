#!/usr/bin/env bash
# Developer entry point: `bash scripts/dev.sh demo` or `bash scripts/dev.sh test`.
# Both create (or reuse) .venv/ at the repository root and install fusegrad
# into it with its pinned dependencies before doing their job.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT="$(pwd)"
VENV="$ROOT/.venv"
PY="$VENV/bin/python"

install() {
    if [ ! -x "$PY" ]; then
        echo "==> creating $VENV"
        python3 -m venv "$VENV"
    fi
    # Fast path: the editable install is current and every pin is satisfied.
    # `pip check` alone does not see missing extras, so also probe the tools.
    if "$PY" -c "import fusegrad.opt, lit, pytest, xdist, expecttest" 2>/dev/null \
        && [ -x "$VENV/bin/fusegrad-opt" ] && [ -x "$VENV/bin/filecheck" ] \
        && [ -x "$VENV/bin/lit" ] && [ "$ROOT/pyproject.toml" -ot "$VENV/.fusegrad-installed" ]; then
        return 0
    fi
    echo "==> installing fusegrad and its pinned dependencies into $VENV"
    # a checkout from before the package moved under python/ may hold the old layout's
    # metadata at the root, which Python finds first from here (its entry points name
    # modules that no longer exist)
    rm -rf "$ROOT/fusegrad.egg-info"
    "$PY" -m pip install --quiet --disable-pip-version-check -e "$ROOT[test]"
    touch "$VENV/.fusegrad-installed"
}

run_tests() {
    local status=0
    echo "==> lit test/"
    "$VENV/bin/lit" "$ROOT/test" || status=1
    echo "==> pytest test/python"
    set +e
    # one worker per core (CI: 2, 16 min -> 10); -rs prints why tests skipped, and the
    # slowest tests are listed so a CI log shows where the suite's time goes
    "$PY" -m pytest -q -n auto -rs --durations=15 "$ROOT/test/python"
    local rc=$?
    set -e
    # 5: no tests collected, which is not a failure of the code under test
    if [ "$rc" -ne 0 ] && [ "$rc" -ne 5 ]; then
        status=1
    fi
    if [ "$status" -ne 0 ]; then
        echo "==> FAILED" >&2
    else
        echo "==> all tests passed"
    fi
    return "$status"
}

case "${1:-}" in
    demo)
        install
        exec "$PY" "$ROOT/examples/demo.py"
        ;;
    test)
        install
        run_tests
        ;;
    *)
        echo "usage: bash scripts/dev.sh demo|test" >&2
        exit 2
        ;;
esac
