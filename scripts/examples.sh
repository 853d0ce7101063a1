#!/bin/sh
# examples.sh - lock/ as a library, end to end, the way another program would use it.
#
#   1. make lib, then make install-lib DESTDIR=<temporary folder> PREFIX=/usr;
#   2. check the installed tree: lock.h, liblock.a, liblock.so.MAJOR (its soname) and its
#      links, lock.pc; liblock.so exports only lock_* names; pkg-config's version is lock.h's;
#   3. build examples/*.c against that tree with nothing but
#      `pkg-config --cflags --libs lock` (PKG_CONFIG_PATH = the tree's pkgconfig folder; lock.pc
#      is relocatable), and fenced_write once more against liblock.a (--static);
#   4. start a throwaway redis-server on a free loopback port and run the examples: each
#      must pass its check, and fail it (exit 1) without its safeguard (--no-watchdog,
#      --no-fence-check), which shows the check can fail.
#
# Prints cmocka-style lines ("[ RUN      ]", "[       OK ]", "[  FAILED  ]", and the
# "[  PASSED  ] N test(s)." summary) so that tests/run.sh counts its checks like a test
# binary's; exits non-zero when any check failed. `make examples` and `make test` run it.
# BUILD (default build) is where make builds the library; REDIS_SERVER, CC and MAKE may be
# set. Everything it makes is in one temporary folder, removed at the end.
# shellcheck disable=SC2317 # the functions below run through check()
set -u
cd "$(dirname "$0")/.." || exit 2
BUILD=${BUILD:-build}
MAKE=${MAKE:-make}
CC=${CC:-cc}
REDIS_SERVER=${REDIS_SERVER:-redis-server}
unset MAKEFLAGS MFLAGS MAKELEVEL # a make of our own, not a part of the caller's

tmp=$(mktemp -d /tmp/gm-examples-XXXXXX) || exit 2
redis_pid=""
cleanup() {
    if [ -n "$redis_pid" ]; then
        kill "$redis_pid" 2>/dev/null
        wait "$redis_pid" 2>/dev/null
    fi
    rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 2' INT TERM

passed=0
failed=0
failed_names=""
ran=0

# check NAME COMMAND...: runs the command as one test; its output is shown indented.
check() {
    name=$1
    shift
    ran=$((ran + 1))
    echo "[ RUN      ] $name"
    "$@" >"$tmp/out" 2>&1
    rc=$?
    sed 's/^/    /' "$tmp/out"
    if [ "$rc" -eq 0 ]; then
        echo "[       OK ] $name"
        passed=$((passed + 1))
    else
        echo "[  FAILED  ] $name (exit $rc)"
        failed=$((failed + 1))
        failed_names="$failed_names $name"
    fi
}

# fails_check COMMAND...: the command must exit 1 (its check failed), not 0 nor 2 (setup).
# Its own verdict lines are marked as expected, so a log search for FAILED finds real ones.
fails_check() {
    "$@" >"$tmp/neg" 2>&1
    rc=$?
    sed 's/FAILED/failed (as expected without the safeguard)/' "$tmp/neg"
    echo "(exit $rc; expected 1: the check fails without the safeguard)"
    [ "$rc" -eq 1 ]
}

root="$tmp/root"
prefix=/usr
libdir="$root$prefix/lib"
export PKG_CONFIG_PATH="$libdir/pkgconfig"
unset PKG_CONFIG_SYSROOT_DIR PKG_CONFIG_LIBDIR

install_lib() {
    "$MAKE" --no-print-directory BUILD="$BUILD" lib &&
        "$MAKE" --no-print-directory BUILD="$BUILD" install-lib DESTDIR="$root" PREFIX="$prefix"
}

installed_tree() {
    major=$(sed -n 's/^#define LOCK_VERSION_MAJOR \([0-9]*\)$/\1/p' lock/lock.h)
    minor=$(sed -n 's/^#define LOCK_VERSION_MINOR \([0-9]*\)$/\1/p' lock/lock.h)
    patch=$(sed -n 's/^#define LOCK_VERSION_PATCH \([0-9]*\)$/\1/p' lock/lock.h)
    ok=0
    for f in "$root$prefix/include/gamemarket/lock.h" \
        "$root$prefix/include/gamemarket/rconn/rconn.h" "$libdir/liblock.a" \
        "$libdir/liblock.so.$major.$minor.$patch" "$libdir/liblock.so.$major" \
        "$libdir/liblock.so" "$libdir/pkgconfig/lock.pc"; do
        if [ -e "$f" ]; then echo "installed: ${f#"$root"}"; else echo "missing: ${f#"$root"}"; ok=1; fi
    done
    soname=$(readelf -d "$libdir/liblock.so" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
    echo "soname: $soname"
    [ "$soname" = "liblock.so.$major" ] || ok=1
    exported=$(nm -D --defined-only "$libdir/liblock.so" | awk '{print $3}')
    echo "exported: $(echo "$exported" | tr '\n' ' ')"
    others=$(echo "$exported" | grep -v '^lock_[a-z]\|^rconn_[a-z]' || true)
    if [ -n "$others" ]; then echo "exported beyond lock_*, rconn_*: $others"; ok=1; fi
    echo "$exported" | grep -qx lock_acquire_owned || ok=1
    echo "$exported" | grep -qx rconn_addr_parse || ok=1
    version=$(pkg-config --modversion lock) || ok=1
    echo "pkg-config lock: version $version, cflags $(pkg-config --cflags lock), libs $(pkg-config --libs lock)"
    [ "$version" = "$major.$minor.$patch" ] || ok=1
    return "$ok"
}

build_examples() {
    mkdir -p "$tmp/bin" || return 1
    cflags=$(pkg-config --cflags lock) || return 1
    libs=$(pkg-config --libs lock) || return 1
    rpath=$(pkg-config --variable=libdir lock) || return 1
    for src in examples/*.c; do
        out="$tmp/bin/$(basename "$src" .c)"
        echo "$CC -std=c11 -Wall -Wextra -Werror $src \$(pkg-config --cflags --libs lock)"
        # shellcheck disable=SC2086
        "$CC" -std=c11 -Wall -Wextra -Werror -o "$out" "$src" $cflags $libs -Wl,-rpath,"$rpath" ||
            return 1
        readelf -d "$out" | grep -q 'NEEDED.*liblock\.so' || { echo "$out: liblock.so not linked"; return 1; }
    done
    # static: liblock.a in place of -llock, and what it needs from --static
    static_libs=$(pkg-config --static --libs lock | sed 's/-llock\b/-l:liblock.a/') || return 1
    echo "$CC -std=c11 examples/fenced_write.c $cflags $static_libs"
    # shellcheck disable=SC2086
    "$CC" -std=c11 -Wall -Wextra -Werror -o "$tmp/bin/fenced_write_static" examples/fenced_write.c \
        $cflags $static_libs || return 1
    if readelf -d "$tmp/bin/fenced_write_static" | grep -q 'NEEDED.*liblock'; then
        echo "fenced_write_static still needs liblock.so"
        return 1
    fi
}

# Starts redis-server on a free loopback port (retrying when the port was taken); sets url.
start_redis() {
    i=0
    while [ "$i" -lt 20 ]; do
        i=$((i + 1))
        port=$(awk -v s="$$$i$(date +%N)" 'BEGIN { srand(s % 2147483647); print 20000 + int(rand() * 40000) }')
        "$REDIS_SERVER" --port "$port" --bind 127.0.0.1 --save '' --appendonly no \
            --dir "$tmp" --logfile "$tmp/redis.log" --daemonize no &
        redis_pid=$!
        j=0
        while [ "$j" -lt 100 ]; do
            # ours answers, not another server that had the port (ours then exits)
            if redis-cli -h 127.0.0.1 -p "$port" info server 2>/dev/null |
                grep -q "^process_id:$redis_pid.$"; then
                url="redis://127.0.0.1:$port"
                echo "redis-server on $url"
                return 0
            fi
            kill -0 "$redis_pid" 2>/dev/null || break # exited: the port was taken
            sleep 0.05
            j=$((j + 1))
        done
        kill "$redis_pid" 2>/dev/null
        wait "$redis_pid" 2>/dev/null
        redis_pid=""
    done
    cat "$tmp/redis.log" 2>/dev/null
    return 1
}

echo "[==========] Running the lock library examples."
check examples_make_install_into_destdir install_lib
check examples_installed_tree_exports_only_lock_names installed_tree
check examples_build_with_pkg_config_shared_and_static build_examples
url=""
check examples_redis_server_started start_redis
if [ -n "$url" ] && [ -x "$tmp/bin/counter_watchdog" ] && [ -x "$tmp/bin/fenced_write" ]; then
    check example_counter_watchdog_two_processes_no_lost_update \
        "$tmp/bin/counter_watchdog" "$url"
    check example_counter_without_watchdog_check_fails \
        fails_check "$tmp/bin/counter_watchdog" --no-watchdog "$url"
    check example_fenced_write_stale_holder_refused "$tmp/bin/fenced_write" "$url"
    check example_fenced_write_without_fence_check_fails \
        fails_check "$tmp/bin/fenced_write" --no-fence-check "$url"
    check example_fenced_write_static_stale_holder_refused \
        "$tmp/bin/fenced_write_static" "$url"
else
    for name in example_counter_watchdog_two_processes_no_lost_update \
        example_counter_without_watchdog_check_fails example_fenced_write_stale_holder_refused \
        example_fenced_write_without_fence_check_fails \
        example_fenced_write_static_stale_holder_refused; do
        ran=$((ran + 1))
        echo "[  FAILED  ] $name (not run: no build or no redis-server)"
        failed=$((failed + 1))
        failed_names="$failed_names $name"
    done
fi

echo "[==========] $ran test(s) run."
echo "[  PASSED  ] $passed test(s)."
if [ "$failed" -gt 0 ]; then
    echo "[  FAILED  ] $failed test(s), listed below:"
    for name in $failed_names; do
        echo "[  FAILED  ] $name"
    done
    exit 1
fi
exit 0
