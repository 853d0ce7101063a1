#!/bin/sh
# ci_deps.sh - installs, when missing, the extra tools of `make fuzz`, `make valgrind`
# and the deploy/ checks of `make test`.
#
#   scripts/ci_deps.sh fuzz       clang with libFuzzer and the sanitizer runtimes
#   scripts/ci_deps.sh valgrind   valgrind
#   scripts/ci_deps.sh promtool   promtool (Debian's prometheus package, 2.42 on Debian 12)
#   scripts/ci_deps.sh lintian    lintian (tests/package/test_package.sh checks the .deb with it)
#   scripts/ci_deps.sh stress     stress-ng (make test-stress keeps the CPUs busy with it)
#
# scripts/deps.sh installs the base packages; these are only for the hardening
# targets. "Present" is judged by use, not by package name: for fuzz, $FUZZ_CC
# (default clang) must link a tiny harness with -fsanitize=fuzzer,address,undefined.
set -eu
what=${1:-}
FUZZ_CC=${FUZZ_CC:-clang}

fuzz_works() {
    tmp=$(mktemp -d)
    cat >"$tmp/t.c" <<'C'
#include <stddef.h>
#include <stdint.h>
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) { return size > 0 && data[0] == 1; }
C
    ok=0
    "$FUZZ_CC" -fsanitize=fuzzer,address,undefined "$tmp/t.c" -o "$tmp/t" >"$tmp/log" 2>&1 || ok=1
    [ "$ok" -eq 0 ] || sed 's/^/  /' "$tmp/log" >&2
    rm -rf "$tmp"
    return "$ok"
}

install() { # $@: Debian packages
    echo "ci_deps: installing $*"
    SUDO=""
    [ "$(id -u)" -eq 0 ] || SUDO="sudo"
    export DEBIAN_FRONTEND=noninteractive
    $SUDO apt-get update -qq
    $SUDO apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}

case "$what" in
fuzz)
    fuzz_works 2>/dev/null && exit 0
    # clang is 14 on Debian 12; libclang-rt-dev pulls the matching libFuzzer and sanitizer runtimes.
    install clang libclang-rt-dev
    if ! fuzz_works; then
        echo "ci_deps: $FUZZ_CC cannot link -fsanitize=fuzzer (see above)" >&2
        exit 1
    fi
    ;;
valgrind)
    command -v valgrind >/dev/null 2>&1 && exit 0
    install valgrind
    ;;
promtool)
    # Debian has promtool only in the prometheus package, which brings the server too
    # (on a host run by systemd, the package starts one on :9090; tests never use it).
    command -v promtool >/dev/null 2>&1 && exit 0
    install prometheus
    ;;
lintian)
    command -v lintian >/dev/null 2>&1 && exit 0
    install lintian
    ;;
stress)
    command -v stress-ng >/dev/null 2>&1 && exit 0
    install stress-ng
    ;;
*)
    echo "usage: scripts/ci_deps.sh fuzz|valgrind|promtool|lintian|stress" >&2
    exit 2
    ;;
esac
