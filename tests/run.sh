#!/bin/sh
# run.sh - runs every unit test binary, then every integration test binary.
#
# Integration tests start their own redis-server processes (tests/helpers/
# redis_proc.c) on free loopback ports in temporary folders and stop them
# when they end. VALGRIND=1 runs the integration tests under valgrind. Then
# tests/openapi/check_openapi.py checks docs/openapi.yaml against a running
# server, tests/openapi/lint_openapi.py lints it (OpenAPI 3.1 field names,
# nulls, $refs, security), tests/docs/check_docs.py runs the examples of
# README.md and docs/API.md against fresh make-run worlds and compares their
# answers, and tests/web/test_page.py drives the market page in headless
# Chromium. Last, scripts/examples.sh installs lock/ as a library and runs
# examples/ against it, and scripts/check_deploy.sh checks deploy/ (the
# Prometheus rules and config, the Grafana files). promtool, which test_http
# and check_deploy.sh use, is installed first when missing (scripts/ci_deps.sh
# promtool); without it their checks skip. tests/package/test_package.sh
# checks make install, make deb and the Docker files.
set -u
BUILD=${BUILD:-build}
export BUILD # scripts/examples.sh builds the library there
export MARKET_SERVER_BIN="${BIN:-bin}/market-server"
export MARKET_SEED_BIN="${BIN:-bin}/market-seed"
export MARKET_LOAD_BIN="${BIN:-bin}/market-load"
scripts/ci_deps.sh promtool || echo "run: promtool could not be installed: its checks are skipped"
out=$(mktemp)
trap 'rm -f "$out"' EXIT
passed=0
failed=0
bad=""

run_one() { # $1: binary, $2: wrapper
    name=$(basename "$1")
    echo "== $name"
    # shellcheck disable=SC2086
    timeout 600 $2 "$1" >"$out" 2>&1
    rc=$?
    cat "$out"
    p=$(sed -n 's/^\[  PASSED  \] \([0-9]*\) test.*/\1/p' "$out" | awk '{s+=$1} END {if (NR) print s}')
    f=$(sed -n 's/^\[  FAILED  \] \([0-9]*\) test.*/\1/p' "$out" | awk '{s+=$1} END {if (NR) print s}')
    passed=$((passed + ${p:-0}))
    if [ -n "$f" ] && [ "$f" -gt 0 ]; then
        failed=$((failed + f)); bad="$bad $name"
    elif [ -z "$p" ] || [ "$rc" -ne 0 ]; then # crashed, timed out, or valgrind errors
        failed=$((failed + 1)); bad="$bad $name(exit $rc)"
    fi
}

for src in tests/unit/test_*.c; do
    [ -e "$src" ] || continue
    run_one "$BUILD/tests/$(basename "$src" .c)" ""
done
wrap=""
if [ "${VALGRIND:-0}" = 1 ]; then
    # --max-threads: test_http_events serves 501 event streams with a thread each
    wrap="valgrind -q --max-threads=2000 --leak-check=full --errors-for-leak-kinds=definite --error-exitcode=99"
fi
for src in tests/integration/test_*.c; do
    [ -e "$src" ] || continue
    run_one "$BUILD/tests/$(basename "$src" .c)" "$wrap"
done
# docs/openapi.yaml against a live server: Debian's python3 (jsonschema, yaml; scripts/deps.sh).
PY=/usr/bin/python3
[ -x "$PY" ] || PY=python3
run_one tests/openapi/check_openapi.py "$PY"
# docs/openapi.yaml linted as strictly as redocly's recommended rules' errors (no server).
run_one tests/openapi/lint_openapi.py "$PY"
# The examples of README.md and docs/API.md (bash, curl, redis-cli), run and compared.
run_one tests/docs/check_docs.py "$PY"
# The market page in headless Chromium (chromium, chromium-driver, python3-selenium).
run_one tests/web/test_page.py "$PY"
# lock/ as a library: make install into a temporary DESTDIR, build examples/ with pkg-config,
# run them against a throwaway redis-server; it prints cmocka's summary lines.
run_one scripts/examples.sh ""
run_one scripts/check_deploy.sh ""
# make install, make deb (lintian when installed), the Docker deployment's scripts and files.
run_one tests/package/test_package.sh ""

echo
[ -n "$bad" ] && echo "failing:$bad"
echo "tests: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
