#!/usr/bin/env bash
# load.sh - `make load`: a short market-load run against the service `make run` is serving.
#
# Reads where `make run` (or `make run-ha`) serves from var/run.env (written while it runs),
# seeds a generated world into its Redis next to the demo (players p0.., items
# i0..; market-seed --generate without --reset: it replaces those players and
# lists those items again, undoing the last make load, and deletes nothing
# else; it stops when a player p0 exists that make load did not make), runs
# bin/market-load as those players only (--players 'p[0-9]*'), so the demo's
# players and listings are left as they were. It sends the buyers' tokens made
# with make run's secret (MARKET_AUTH_SECRET, or var/auth-secret), prints the
# report, and keeps the JSON one in var/log/market-load.json. Its exit status
# is market-load's (see bin/market-load --help), or 1 when make run is not
# serving.
#
#   make load
#   LOAD_SECONDS=30 LOAD_BUYERS=64 LOAD_MIX=contended make load
#
# Environment: LOAD_SECONDS (10), LOAD_BUYERS (16), LOAD_MIX (distinct),
# BIN (bin). The world is players=1000 and items=250000 (25000 per second
# for longer runs; distinct purchases ran at ~10,000/s on a 2-core box), each
# player with funds for the whole market; a run that buys every item stops
# early and says so.
set -u
cd "$(dirname "$0")/.." || exit 1
# shellcheck source=scripts/common.sh
. scripts/common.sh
BIN=${BIN:-bin}
SECS=${LOAD_SECONDS:-10}
BUYERS=${LOAD_BUYERS:-16}
MIX=${LOAD_MIX:-distinct}
RUN_ENV=var/run.env
MARK=load:world # this key says that make load made the players p0..

die() {
    echo "load: $*" >&2
    exit 1
}
for b in market-seed market-load; do
    [ -x "$BIN/$b" ] || die "$BIN/$b is missing (run make build)"
done
case $SECS in '' | *[!0-9]* | 0) die "LOAD_SECONDS must be a whole number of seconds > 0 ('$SECS')" ;; esac
PLAYERS=1000
ITEMS=$((SECS * 25000))
[ "$ITEMS" -ge 250000 ] || ITEMS=250000

# ---- is make run serving? ----
not_running="make run is not running: start it first, in another terminal (make run), then make load"
[ -f "$RUN_ENV" ] || die "$not_running"
field() { sed -n "s/^$1=//p" "$RUN_ENV"; }
pid=$(field pid)
listen=$(field listen)
redis=$(field redis)
secret_from=$(field secret)
log=$(field log)
log=${log:-var/log/market-server.log} # a run.env of an older make run names none
if [ -z "$pid" ] || ! tr '\0' ' ' 2>/dev/null <"/proc/$pid/cmdline" | grep -Eq 'run(_ha)?\.sh'; then
    die "$not_running ($RUN_ENV is left from a make run that has stopped)"
fi
listen_split "$listen"
# shellcheck disable=SC2016 # the inner bash expands them
health=$(timeout 5 bash -c 'exec 3<>"/dev/tcp/$0/$1" || exit 1
    printf "GET /healthz HTTP/1.0\r\nHost: %s\r\n\r\n" "$0" >&3
    head -c 12 <&3' "$probe_host" "$port" 2>/dev/null)
case $health in
"HTTP/1."?" 200") ;;
"") die "make run (pid $pid) does not answer on $listen: it may still be starting (try again in a moment), or its server stopped (see $log)" ;;
*) die "make run answers GET /healthz on $listen with '${health#HTTP/1.? }': is its Redis up? (see $log)" ;;
esac

# ---- the buyers' tokens: make run's secret ----
auth=()
case $secret_from in
none) echo "load: make run serves without authentication; sending no tokens" ;;
env)
    [ -n "${MARKET_AUTH_SECRET:-}" ] ||
        die "make run uses the secret in MARKET_AUTH_SECRET: give make load the same (MARKET_AUTH_SECRET=... make load)"
    auth=(--auth-secret "$MARKET_AUTH_SECRET")
    ;;
*)
    [ -s var/auth-secret ] || die "var/auth-secret is missing, but make run uses it"
    auth=(--auth-secret "$(cat var/auth-secret)")
    ;;
esac

# redis-cli does not speak redis-sentinel://: for it, the master the first Sentinel names
# (market-seed and market-load take the Sentinel URL itself and follow the group).
cli_url=$redis
case $redis in
redis-sentinel://*)
    rest=${redis#redis-sentinel://}
    userinfo=""
    case ${rest%%/*} in *@*) userinfo="${rest%%@*}@" rest=${rest#*@} ;; esac
    first=${rest%%[,/]*}
    path=${rest#*/}
    name=${path%%/*}
    db=0
    case $path in */*) db=${path#*/} ;; esac
    shost=${first%:*}
    sport=${first##*:}
    [ "$sport" != "$first" ] || sport=26379
    addr=$(redis-cli -h "$shost" -p "$sport" --raw SENTINEL get-master-addr-by-name "$name" 2>/dev/null)
    mhost=$(echo "$addr" | sed -n 1p)
    mport=$(echo "$addr" | sed -n 2p)
    [ -n "$mport" ] || die "the Sentinel $shost:$sport names no master '$name'"
    cli_url="redis://$userinfo$mhost:$mport/$db"
    ;;
esac

# ---- the world: players p0.. and items i0.., next to the demo ----
# market-seed --generate without --reset replaces the players p0.. (funds,
# inventory) and lists the items i0.. again, and deletes nothing else. Only
# players that make load made before are replaced: the mark says so.
if [ "$(redis-cli --no-auth-warning -u "$cli_url" exists "users:{main}:p0" 2>/dev/null)" = 1 ] &&
    [ "$(redis-cli --no-auth-warning -u "$cli_url" exists "$MARK" 2>/dev/null)" != 1 ]; then
    die "$redis already has a player p0 that make load did not make; it would be replaced, so make load stops"
fi
world="players=$PLAYERS,items=$ITEMS,funds=1000000000,prices=1-1000,seed=1"
redis-cli --no-auth-warning -u "$cli_url" set "$MARK" "$world" >/dev/null 2>&1 || die "cannot write to $redis"
echo "load: adding the world $world to $redis (the demo stays)"
"$BIN/market-seed" --redis "$redis" --generate "$world" || die "seeding failed"

# ---- the run ----
mkdir -p var/log
echo "load: $BUYERS buyers for $SECS s against http://$listen ($MIX mix)"
"$BIN/market-load" --url "http://$listen" --redis "$redis" --players 'p[0-9]*' --mix "$MIX" \
    --buyers "$BUYERS" --duration "$SECS" --json var/log/market-load.json "${auth[@]}"
status=$?
echo "load: JSON report in var/log/market-load.json; the server's log in $log"
exit "$status"
