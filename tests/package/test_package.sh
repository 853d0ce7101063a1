#!/bin/sh
# test_package.sh - the service as an operator installs it: make install, make deb, and the
# files of the Docker deployment that can be checked without Docker.
#
#   1. make install DESTDIR=<temporary folder> PREFIX=/usr/local: the three programs run
#      --help from there; a man page each, with its .TH line, that man -l and groff render
#      without a warning, all of groff's warnings on (-ww), at 80 and 120 columns (lintian's
#      way), with no environment variable run into an option's text; the docs; market-server.service naming the installed binary (and
#      passing systemd-analyze verify where it runs); lock/ as a library still;
#   2. make deb: the package's files and control fields; the conffile
#      /etc/gamemarket/market-server.env in DEBIAN/conffiles; postinst, prerm and postrm
#      executable and passing sh -n; the maintainer scripts run in a sandbox (DPKG_ROOT=<a
#      folder>, stubs for deb-systemd-helper, deb-systemd-invoke, systemctl and
#      dpkg-statoverride first on PATH; the package is never installed): configure makes the
#      key file once, both files 0600, enables and starts the unit, restarts it on an
#      upgrade; remove stops it and keeps /etc/gamemarket; purge deletes it; lintian finds no
#      error or warning (skipped, with a message, where lintian is missing; CI=true installs
#      it first);
#   3. deploy/redis/start.sh (the compose file's redis, its image's entrypoint stubbed): the
#      default user needs REDIS_PASSWORD, `market` (deploy/redis/market.acl) works on its
#      keys and is refused FLUSHALL; a bad password stops it;
#   4. deploy/docker/seed-if-empty.sh against that redis: an empty store is seeded, a store
#      holding data is left as it is;
#   5. Dockerfile and docker-compose.yml: pinned images, HEALTHCHECK on /healthz, market-load
#      in the image, a password on every redis, the service's URL with the ACL user, the
#      monitoring profile's mounts.
#
# Prints cmocka-style lines, as scripts/examples.sh does, so that tests/run.sh counts its
# checks; exits non-zero when one failed. BUILD (build) and BIN (bin, or the folder of
# $MARKET_SERVER_BIN) say where make test built; MAKE may be set; redis-server and redis-cli
# come from PATH. Everything
# it makes is in one temporary folder (and $BUILD/deb, make deb's), removed at the end.
# shellcheck disable=SC2317 # the functions below run through check()
set -u
cd "$(dirname "$0")/../.." || exit 2
BUILD=${BUILD:-build}
BIN=${BIN:-$(dirname "${MARKET_SERVER_BIN:-bin/market-server}")}
MAKE=${MAKE:-make}
PROGS="market-server market-seed market-load"
unset MAKEFLAGS MFLAGS MAKELEVEL # a make of our own, not a part of the caller's

tmp=$(mktemp -d /tmp/gm-package-XXXXXX) || exit 2
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

fail() {
    echo "$*"
    return 1
}

# ---- 1. make install ----

root="$tmp/root"
prefix=/usr/local

install_all() {
    "$MAKE" --no-print-directory BUILD="$BUILD" BIN="$BIN" install DESTDIR="$root" \
        PREFIX="$prefix"
}

installed_programs_run() {
    for p in $PROGS; do
        f="$root$prefix/bin/$p"
        [ -x "$f" ] || fail "missing: ${f#"$root"}" || return 1
        "$f" --help >"$tmp/help" 2>&1 || fail "$p --help exited $?" || return 1
        grep -q "^usage: .*$p" "$tmp/help" || fail "$p --help printed no usage line" || return 1
        echo "$p --help: $(head -n 1 "$tmp/help")"
    done
    # lock/ as a library (with rconn/, whose header lock.h includes) is still part of make install
    for f in include/gamemarket/lock.h include/gamemarket/rconn/rconn.h lib/liblock.a \
        lib/liblock.so lib/pkgconfig/lock.pc; do
        [ -e "$root$prefix/$f" ] || fail "missing: $prefix/$f" || return 1
    done
    echo "lock/ library installed too"
}

man_pages_valid() {
    for p in $PROGS; do
        f="$root$prefix/share/man/man1/$p.1"
        [ -s "$f" ] || fail "missing or empty: ${f#"$root"}" || return 1
        grep -q "^\.TH \"*$(echo "$p" | tr '[:lower:]' '[:upper:]')" "$f" ||
            fail "$p.1 has no .TH line" || return 1
        # market-server's --help names each flag's variable at its right; scripts/man.sh moves
        # it to the end of the entry ("Environment: MARKET_X."), not into the text
        if grep -n '[^ ]  *MARKET_[A-Z0-9_]*\(=1\)\{0,1\}$' "$f" | grep -v 'Environment: MARKET_'; then
            fail "$p.1: an environment variable runs into an option's text" || return 1
        fi
        if command -v man >/dev/null 2>&1; then
            # as lintian runs it (120 columns), then at 80 with every groff warning on (-ww:
            # "cannot adjust line" is one only -ww shows): any message is a fault of the page
            for w in 120 80; do
                LC_ALL=C.UTF-8 MANROFFSEQ='' MANWIDTH=$w man --warnings=w -E UTF-8 -l -Tutf8 -Z \
                    "$f" >/dev/null 2>"$tmp/man.err"
                [ ! -s "$tmp/man.err" ] || { cat "$tmp/man.err"; fail "man -l $p.1 warns at $w columns"; } ||
                    return 1
            done
            LC_ALL=C MANWIDTH=80 man -l "$f" >"$tmp/man" 2>"$tmp/man.err" ||
                { cat "$tmp/man.err"; fail "man -l $p.1 failed"; } || return 1
            grep -q "^NAME" "$tmp/man" && grep -q "^SYNOPSIS\|^DESCRIPTION" "$tmp/man" ||
                fail "man -l $p.1: no NAME and SYNOPSIS/DESCRIPTION" || return 1
            echo "$p.1: $(sed -n '/^NAME/{n;p;q}' "$tmp/man" | sed 's/^ *//')"
        elif command -v groff >/dev/null 2>&1; then
            groff -man -Tutf8 -ww -z "$f" >"$tmp/groff" 2>&1
            [ ! -s "$tmp/groff" ] || { cat "$tmp/groff"; fail "$p.1: groff warns"; } || return 1
            echo "$p.1: man is not installed; groff renders it"
        else
            echo "$p.1: neither man nor groff is installed; checked the .TH line only"
        fi
    done
}

docs_and_unit() {
    for f in README.md API.md LOCKING.md OPERATIONS.md examples/market-server.env.example \
        examples/market.acl examples/demo.json; do
        [ -s "$root$prefix/share/doc/gamemarket/$f" ] ||
            fail "missing: $prefix/share/doc/gamemarket/$f" || return 1
    done
    for f in index.html app.js style.css; do
        [ -s "$root$prefix/share/gamemarket/web/$f" ] ||
            fail "missing: $prefix/share/gamemarket/web/$f" || return 1
    done
    unit="$root$prefix/lib/systemd/system/market-server.service"
    [ -s "$unit" ] || fail "missing: ${unit#"$root"}" || return 1
    grep -qx "Environment=MARKET_WEB_DIR=$prefix/share/gamemarket/web" "$unit" ||
        fail "the unit does not point MARKET_WEB_DIR at the page's files" || return 1
    grep -qx "ExecStart=$prefix/bin/market-server" "$unit" ||
        fail "the unit does not start $prefix/bin/market-server" || return 1
    for key in DynamicUser=yes ProtectSystem=strict NoNewPrivileges=yes \
        EnvironmentFile=/etc/gamemarket/market-server.env; do
        grep -qx "$key" "$unit" || fail "the unit lacks $key" || return 1
    done
    echo "docs, examples and the unit installed"
    if ! command -v systemd-analyze >/dev/null 2>&1; then
        echo "systemd-analyze is not installed: the unit is not verified"
        return 0
    fi
    # verify wants the binary where ExecStart says: point it into the DESTDIR tree
    mkdir -p "$tmp/unit"
    sed "s|^ExecStart=.*|ExecStart=$root$prefix/bin/market-server|" "$unit" \
        >"$tmp/unit/market-server.service"
    SYSTEMD_LOG_LEVEL=warning systemd-analyze verify "$tmp/unit/market-server.service" \
        >"$tmp/verify" 2>&1
    rc=$?
    # (its man page is in the DESTDIR tree, not where man looks)
    grep -v "Failed to \\(connect\\|open\\)\\|^\$\\|Command 'man market-server(1)'" "$tmp/verify" |
        grep -i 'market-server' >"$tmp/verify.ours"
    cat "$tmp/verify"
    [ "$rc" -eq 0 ] || [ ! -s "$tmp/verify.ours" ] ||
        fail "systemd-analyze verify finds fault with the unit" || return 1
    echo "systemd-analyze verify: exit $rc, nothing about the unit"
}

# ---- 2. make deb ----

deb=""
deb_build() {
    "$MAKE" --no-print-directory BUILD="$BUILD" BIN="$BIN" deb >"$tmp/deb.out" 2>&1 ||
        { cat "$tmp/deb.out"; fail "make deb failed"; } || return 1
    deb=$(tail -n 1 "$tmp/deb.out")
    [ -f "$deb" ] || fail "no package at '$deb'" || return 1
    echo "built $deb ($(du -k "$deb" | cut -f1) KiB)"
    dpkg-deb --field "$deb" Package Version Architecture Depends
    dpkg-deb --contents "$deb" | awk '{print $6}' >"$tmp/contents"
    for f in ./usr/bin/market-server ./usr/bin/market-seed ./usr/bin/market-load \
        ./usr/share/man/man1/market-server.1.gz ./usr/share/man/man1/market-seed.1.gz \
        ./usr/share/man/man1/market-load.1.gz ./lib/systemd/system/market-server.service \
        ./usr/share/doc/gamemarket/copyright ./usr/share/doc/gamemarket/changelog.gz \
        ./usr/share/doc/gamemarket/OPERATIONS.md ./usr/share/gamemarket/web/index.html; do
        grep -qx "$f" "$tmp/contents" || fail "the package lacks $f" || return 1
    done
    dpkg-deb --field "$deb" Depends | grep -q libhiredis || fail "Depends lacks libhiredis" ||
        return 1
    grep -qx ./etc/gamemarket/market-server.env "$tmp/contents" ||
        fail "the package lacks /etc/gamemarket/market-server.env" || return 1
    mkdir -p "$tmp/control"
    dpkg-deb -e "$deb" "$tmp/control" || return 1
    [ "$(cat "$tmp/control/conffiles" 2>/dev/null)" = /etc/gamemarket/market-server.env ] ||
        fail "DEBIAN/conffiles does not list just /etc/gamemarket/market-server.env" || return 1
    ! grep -q ' etc/' "$tmp/control/md5sums" || fail "md5sums lists the conffile" || return 1
    for s in postinst prerm postrm; do
        [ -x "$tmp/control/$s" ] || fail "DEBIAN/$s is missing or not executable" || return 1
        sh -n "$tmp/control/$s" || fail "DEBIAN/$s: sh -n fails" || return 1
        head -n 1 "$tmp/control/$s" | grep -qx '#!/bin/sh' || fail "DEBIAN/$s: not #!/bin/sh" ||
            return 1
        grep -qx 'set -e' "$tmp/control/$s" || fail "DEBIAN/$s: no set -e" || return 1
    done
    echo "conffile and maintainer scripts: $(tr '\n' ' ' <"$tmp/control/conffiles")"
    mkdir -p "$tmp/x"
    dpkg-deb -x "$deb" "$tmp/x" || return 1
    grep -qx "ExecStart=/usr/bin/market-server" "$tmp/x/lib/systemd/system/market-server.service" ||
        fail "the packaged unit does not start /usr/bin/market-server" || return 1
    "$tmp/x/usr/bin/market-server" --help >/dev/null || fail "packaged market-server --help" ||
        return 1
    echo "contents and control fields as expected"
}

# Runs DEBIAN/$1 with the rest of the arguments in the sandbox: the root $sb/root, the stubs of
# $sb/stub first on PATH (each records its command line in $sb/calls). Prints its output.
sb_run() {
    script=$1
    shift
    : >"$sb/calls"
    DPKG_ROOT="$sb/root" PATH="$sb/stub:$PATH" sh "$tmp/control/$script" "$@" 2>&1
}

sb_called() {
    grep -qx "$1" "$sb/calls" || fail "$script did not run: $1 (it ran: $(tr '\n' ';' <"$sb/calls"))"
}

deb_maintainer_scripts_in_sandbox() {
    [ -n "$deb" ] && [ -d "$tmp/control" ] || fail "no package was built" || return 1
    sb="$tmp/sandbox"
    mkdir -p "$sb/stub" "$sb/root/run/systemd/system"
    dpkg-deb -x "$deb" "$sb/root" || return 1
    # was-enabled answers "yes", as deb-systemd-helper does on a first install
    for c in deb-systemd-helper deb-systemd-invoke systemctl dpkg-statoverride; do
        rc=0
        [ "$c" = dpkg-statoverride ] && rc=1 # no override registered
        printf '#!/bin/sh\necho "%s $*" >>"%s/calls"\nexit %s\n' "$c" "$sb" "$rc" >"$sb/stub/$c"
        chmod 755 "$sb/stub/$c"
        [ "$(PATH="$sb/stub:$PATH" command -v "$c")" = "$sb/stub/$c" ] ||
            fail "the stub of $c is not the one found" || return 1
    done
    etc="$sb/root/etc/gamemarket"
    key="$etc/market-server.secret.env"

    sb_run postinst configure || fail "postinst configure failed" || return 1
    grep -qx 'MARKET_AUTH_SECRET=[0-9a-f]\{64\}' "$key" ||
        fail "postinst made no 64-hex-digit MARKET_AUTH_SECRET in market-server.secret.env" ||
        return 1
    for f in "$key" "$etc/market-server.env"; do
        [ "$(stat -c %a "$f")" = 600 ] || fail "${f#"$sb/root"} is mode $(stat -c %a "$f")" ||
            return 1
    done
    sb_called "deb-systemd-helper enable market-server.service" || return 1
    sb_called "deb-systemd-invoke start market-server.service" || return 1
    first=$(grep '^MARKET_AUTH_SECRET=' "$key")

    sb_run postinst configure 0.0.9 || fail "postinst configure (upgrade) failed" || return 1
    [ "$(grep '^MARKET_AUTH_SECRET=' "$key")" = "$first" ] ||
        fail "an upgrade made a new key (every player logged out)" || return 1
    sb_called "deb-systemd-invoke restart market-server.service" || return 1
    sb_run prerm upgrade 0.1.1 || fail "prerm upgrade failed" || return 1
    ! grep -q 'stop' "$sb/calls" || fail "prerm stopped the service for an upgrade" || return 1
    echo "configure: a key made once, both files 0600, the unit enabled, started, restarted"

    sb_run prerm remove || fail "prerm remove failed" || return 1
    sb_called "deb-systemd-invoke stop market-server.service" || return 1
    sb_run postrm remove || fail "postrm remove failed" || return 1
    [ -f "$etc/market-server.env" ] && [ -f "$key" ] ||
        fail "remove deleted a file of /etc/gamemarket" || return 1
    sb_run postrm purge || fail "postrm purge failed" || return 1
    [ ! -e "$etc" ] || fail "purge left /etc/gamemarket: $(ls -A "$etc")" || return 1
    sb_called "deb-systemd-helper purge market-server.service" || return 1
    echo "remove: stopped, /etc/gamemarket kept; purge: /etc/gamemarket deleted"

    for s in postinst prerm postrm; do
        if sb_run "$s" no-such-action >/dev/null; then
            fail "$s took an unknown action" || return 1
        fi
    done
    echo "an unknown action is refused by each script"
}

deb_lintian() {
    [ -n "$deb" ] || fail "no package was built" || return 1
    if [ "$BUILD" != build ]; then
        echo "lintian skipped: it checks make test's own build (BUILD=build), not $BUILD"
        return 0
    fi
    if ! command -v lintian >/dev/null 2>&1 && [ "${CI:-}" = true ]; then
        timeout 300 scripts/ci_deps.sh lintian || echo "could not install lintian"
    fi
    if ! command -v lintian >/dev/null 2>&1; then
        echo "lintian skipped: not installed (scripts/ci_deps.sh lintian installs it)"
        return 0
    fi
    start=$(date +%s)
    timeout 300 lintian --fail-on error,warning --tag-display-limit 0 "$deb"
    rc=$?
    echo "lintian: exit $rc in $(($(date +%s) - start)) s"
    [ "$rc" -eq 0 ]
}

# ---- 3 and 4. the compose file's redis and seed step, without Docker ----

case $BIN in /*) bin_abs=$BIN ;; *) bin_abs=$PWD/$BIN ;; esac
admin_pass=admin-pass-0123456789
market_pass=market-pass-0123456789
port=""

# redis-cli against the started server; $1: "admin", "market" or "none".
rcli() {
    who=$1
    shift
    case $who in
    admin) REDISCLI_AUTH=$admin_pass redis-cli --no-auth-warning -p "$port" "$@" ;;
    market) redis-cli --no-auth-warning --user market --pass "$market_pass" -p "$port" "$@" ;;
    *) redis-cli -p "$port" "$@" ;;
    esac
}

redis_start_script() {
    mkdir -p "$tmp/stub" "$tmp/redis"
    printf '#!/bin/sh\nexec "$@"\n' >"$tmp/stub/docker-entrypoint.sh"
    chmod +x "$tmp/stub/docker-entrypoint.sh"
    # a password outside [A-Za-z0-9_-] is refused before anything starts
    PATH="$tmp/stub:$PATH" REDIS_PASSWORD='bad pass 0123456789' MARKET_REDIS_PASSWORD=$market_pass \
        sh deploy/redis/start.sh --port 1 >"$tmp/bad" 2>&1
    rc=$?
    cat "$tmp/bad"
    [ "$rc" -eq 2 ] || fail "start.sh took a bad password (exit $rc)" || return 1
    i=0
    while [ "$i" -lt 20 ]; do
        i=$((i + 1))
        port=$(awk -v s="$$$i$(date +%N)" 'BEGIN { srand(s % 2147483647); print 20000 + int(rand() * 40000) }')
        PATH="$tmp/stub:$PATH" REDIS_PASSWORD=$admin_pass MARKET_REDIS_PASSWORD=$market_pass \
            sh deploy/redis/start.sh --port "$port" --bind 127.0.0.1 \
            --dir "$tmp/redis" --save '' --appendonly no --logfile "$tmp/redis/redis.log" &
        redis_pid=$!
        j=0
        while [ "$j" -lt 100 ]; do
            if rcli admin info server 2>/dev/null | grep -q "^process_id:$redis_pid.$"; then
                echo "start.sh's redis-server on 127.0.0.1:$port"
                break 2
            fi
            kill -0 "$redis_pid" 2>/dev/null || break # exited: the port was taken
            sleep 0.05
            j=$((j + 1))
        done
        kill "$redis_pid" 2>/dev/null
        wait "$redis_pid" 2>/dev/null
        redis_pid=""
    done
    [ -n "$redis_pid" ] || { cat "$tmp/redis/redis.log" 2>/dev/null; fail "no redis-server"; } ||
        return 1
    out=$(rcli none ping 2>&1)
    echo "no password: $out"
    case $out in *NOAUTH*) ;; *) fail "the default user answers without a password" || return 1 ;; esac
    [ "$(rcli market hset 'users:{t}:x' funds 1)" = 1 ] || fail "market may not HSET users:*" ||
        return 1
    for cmd in flushall config keys set; do
        case $cmd in
        config) out=$(rcli market config get maxmemory 2>&1) ;;
        keys) out=$(rcli market keys '*' 2>&1) ;;
        set) out=$(rcli market set other 1 2>&1) ;;
        *) out=$(rcli market "$cmd" 2>&1) ;;
        esac
        echo "market: $cmd -> $out"
        case $out in *NOPERM*) ;; *) fail "market may run $cmd" || return 1 ;; esac
    done
    rcli admin del 'users:{t}:x' >/dev/null
}

seed_if_empty() {
    [ -n "$port" ] || fail "no redis-server" || return 1
    url="redis://:$admin_pass@127.0.0.1:$port/0"
    PATH="$bin_abs:$PATH" MARKET_REDIS=$url sh deploy/docker/seed-if-empty.sh fixtures/demo.json \
        >"$tmp/first" 2>&1 || { cat "$tmp/first"; fail "seeding an empty store failed"; } || return 1
    cat "$tmp/first"
    ! grep -q "$admin_pass" "$tmp/first" || fail "the seed printed the password" || return 1
    [ "$(rcli admin hget 'users:{main}:B' funds)" = 800 ] || fail "the empty store was not seeded" ||
        return 1
    rcli admin hset 'users:{main}:B' funds 1 >/dev/null
    PATH="$bin_abs:$PATH" MARKET_REDIS=$url sh deploy/docker/seed-if-empty.sh fixtures/demo.json \
        >"$tmp/again" 2>&1 || { cat "$tmp/again"; fail "the second run failed"; } || return 1
    cat "$tmp/again"
    grep -q "not seeded" "$tmp/again" || fail "the second run did not say it left the store" ||
        return 1
    [ "$(rcli admin hget 'users:{main}:B' funds)" = 1 ] || fail "a store holding data was reset" ||
        return 1
    MARKET_REDIS="redis://:wrong-pass@127.0.0.1:$port/0" sh deploy/docker/seed-if-empty.sh \
        fixtures/demo.json >"$tmp/wrong" 2>&1
    rc=$?
    cat "$tmp/wrong"
    [ "$rc" -eq 1 ] || fail "a store it cannot read: exit $rc, expected 1"
}

# ---- 5. Dockerfile and docker-compose.yml ----

docker_files() {
    ok=0
    froms=$(grep -c '^FROM ' Dockerfile)
    pinned=$(grep -c '^FROM [^ ]*:[^ ]*@sha256:[0-9a-f]\{64\}' Dockerfile)
    echo "Dockerfile: $pinned of $froms FROM lines pinned by tag and digest"
    [ "$froms" -gt 0 ] && [ "$pinned" -eq "$froms" ] || ok=1
    if ! grep -A2 '^HEALTHCHECK' Dockerfile | grep -q '/healthz'; then
        echo "Dockerfile: no HEALTHCHECK on /healthz"
        ok=1
    fi
    grep -q '^COPY .*bin/market-load' Dockerfile || { echo "Dockerfile: no market-load"; ok=1; }
    grep -q '^RUN make .*bin/market-load' Dockerfile || { echo "Dockerfile: market-load not built"; ok=1; }
    unpinned=$(grep -E '^\s*image:' docker-compose.yml | grep -v 'gamemarket:local' |
        grep -Ev 'image: [^:]+:[0-9v][0-9.]*[0-9](-[a-z]+)?$')
    [ -z "$unpinned" ] || { echo "docker-compose.yml: not an exact version: $unpinned"; ok=1; }
    if python3 -c 'import yaml' 2>/dev/null; then
        python3 - <<'PY' || ok=1
import sys, yaml
c = yaml.safe_load(open("docker-compose.yml"))
s = c["services"]
bad = []
for name, svc in s.items():
    if str(svc.get("image", "")).startswith("redis:") and "start.sh" not in " ".join(svc.get("entrypoint", [])):
        bad.append(f"{name}: a redis without deploy/redis/start.sh (no password)")
if not s["market"]["environment"]["MARKET_REDIS"].startswith("redis://market:"):
    bad.append("market: not the ACL user")
if "market-seed-if-empty" not in s["seed"]["entrypoint"][0]:
    bad.append("seed: not seed-if-empty")
for name in ("prometheus", "grafana"):
    if s[name].get("profiles") != ["monitoring"]:
        bad.append(f"{name}: not in the monitoring profile")
mounts = " ".join(s["prometheus"]["volumes"] + s["grafana"]["volumes"])
for path in ("deploy/prometheus/prometheus.yml", "deploy/prometheus/alerts.yml",
             "deploy/grafana/market.json", "deploy/grafana/provisioning"):
    if "./" + path + ":" not in mounts:
        bad.append(f"monitoring: {path} is not mounted")
print("docker-compose.yml: services " + ", ".join(s))
for b in bad:
    print("docker-compose.yml: " + b)
sys.exit(1 if bad else 0)
PY
    else
        echo "python3-yaml is not installed: docker-compose.yml checked with grep only"
        grep -q 'redis://market:' docker-compose.yml || ok=1
    fi
    return "$ok"
}

echo "[==========] Running the installation and packaging checks."
check install_make_install_into_destdir install_all
check install_programs_run_help_and_lib_installed installed_programs_run
check install_man_pages_valid man_pages_valid
check install_docs_and_hardened_unit docs_and_unit
check deb_builds_with_programs_man_pages_and_unit deb_build
check deb_maintainer_scripts_in_sandbox deb_maintainer_scripts_in_sandbox
check deb_lintian_finds_no_error_or_warning deb_lintian
check compose_redis_start_passwords_and_acl_user redis_start_script
check compose_seed_only_an_empty_store seed_if_empty
check docker_files_pinned_healthchecked_with_acl docker_files

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
