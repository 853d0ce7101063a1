#!/usr/bin/env bash
# run.sh - `make run`: a private redis-server (unless MARKET_REDIS is set), the demo world, the service.
#
# The private Redis listens on 127.0.0.1:$MARKET_REDIS_PORT (default 6380)
# only, keeps its data under var/redis (AOF, appendfsync $MARKET_APPENDFSYNC,
# default always: see OPERATIONS.md, Durability), is reseeded from fixtures/demo.json, and is stopped when
# the service stops. A port that is taken (the service's or the Redis one) stops
# the run with a message: a Redis this checkout did not start may hold someone
# else's data, so it is never reset nor stopped. Every MARKET_* variable is
# passed on to market-server. The server's log goes to var/log/market-server.log
# (the previous run's is kept as .1); the terminal shows all of it but the
# one-line-per-request lines. While the service runs, var/run.env tells
# `make load` where it is.
set -eu
cd "$(dirname "$0")/.."
# shellcheck source=scripts/common.sh
. scripts/common.sh
BIN=${BIN:-bin}
LISTEN=${MARKET_LISTEN:-127.0.0.1:8080}
RUN_ENV=var/run.env
started=""
fifo_dir=""

die() {
    echo "run: $*" >&2
    exit 1
}

# The first port after $2 on host $1 that nothing answers on (or "" after 100 tries).
free_port_after() {
    local p=$2
    for _ in $(seq 100); do
        p=$((p + 1))
        port_taken "$1" "$p" || { echo "$p"; return 0; }
    done
    echo ""
}

# Whether a `make run` of this checkout is serving now.
run_alive() {
    local pid
    pid=$(sed -n 's/^pid=//p' "$RUN_ENV" 2>/dev/null) || return 1
    [ -n "$pid" ] && [ "$pid" != "$$" ] && tr '\0' ' ' 2>/dev/null <"/proc/$pid/cmdline" | grep -q 'run\.sh'
}

# shellcheck disable=SC2317 # called by the EXIT trap
cleanup() {
    [ -z "$started" ] || redis-cli -h 127.0.0.1 -p "$started" shutdown >/dev/null 2>&1 || true
    [ -z "$fifo_dir" ] || rm -rf "$fifo_dir"
    if [ "$(sed -n 's/^pid=//p' "$RUN_ENV" 2>/dev/null)" = "$$" ]; then rm -f "$RUN_ENV"; fi
}
trap cleanup EXIT
trap ':' INT TERM # the server stops gracefully on these; then we stop redis
trap 'exit 129' HUP

listen_split "$LISTEN"

# ---- the ports: stop before starting anything when one is taken ----

if run_alive; then
    die "make run is already serving from this checkout (pid $(sed -n 's/^pid=//p' "$RUN_ENV"), $(sed -n 's/^listen=//p' "$RUN_ENV")); stop it first (Ctrl-C in its terminal)"
fi
if [ "$port" != 0 ] && port_taken "$probe_host" "$port"; then
    alt=$(free_port_after "$probe_host" "$port")
    die "$LISTEN is taken: something already listens there (another make run's market-server?).
     Serve on another address with MARKET_LISTEN, e.g. MARKET_LISTEN=$host:${alt:-8081} make run"
fi

# Authentication is on: the secret is MARKET_AUTH_SECRET, or else the one kept
# in var/auth-secret (made once, readable by you only). MARKET_NO_AUTH=1 turns
# it off, as --no-auth does for the server.
noauth=""
secret_from="env"
if [ "${MARKET_NO_AUTH:-0}" = 1 ]; then
    noauth="--no-auth"
    secret_from="none"
elif [ -z "${MARKET_AUTH_SECRET:-}" ]; then
    secret_from="file"
    if [ ! -s var/auth-secret ]; then
        mkdir -p var
        (umask 077 && od -An -N32 -tx1 /dev/urandom | tr -d ' \n' >var/auth-secret)
        echo "run: made an auth secret in var/auth-secret"
    fi
    MARKET_AUTH_SECRET=$(cat var/auth-secret)
    export MARKET_AUTH_SECRET
fi

# Where this run serves, for `make load` (mode 0600: the Redis URL may carry a
# password); written before Redis starts, so that make load can tell "starting".
mkdir -p var/log
(umask 077 && cat >"$RUN_ENV" <<ENV) || die "cannot write $RUN_ENV"
# written by scripts/run.sh while make run serves; read by make load
pid=$$
listen=$LISTEN
redis=${MARKET_REDIS:-redis://127.0.0.1:${MARKET_REDIS_PORT:-6380}/0}
secret=$secret_from
log=var/log/market-server.log
ENV

if [ -z "${MARKET_REDIS:-}" ]; then
    rport=${MARKET_REDIS_PORT:-6380}
    dir="$PWD/var/redis"
    mkdir -p "$dir"
    if port_taken 127.0.0.1 "$rport"; then
        # Ours only when it is the redis-server this checkout started (its
        # pidfile names the process that answers) and no make run uses it.
        theirs=$(redis-cli -h 127.0.0.1 -p "$rport" info server 2>/dev/null |
            sed -n 's/^process_id:\([0-9]*\).*/\1/p') || theirs=""
        if [ -n "$theirs" ] && [ -s "$dir/redis.pid" ] && [ "$theirs" = "$(cat "$dir/redis.pid")" ]; then
            started="$rport"
            echo "run: reusing the redis-server this checkout started before (pid $theirs, data in var/redis)"
        else
            alt=$(free_port_after 127.0.0.1 "$rport")
            what="a redis-server that this checkout did not start answers there (another make run?)"
            [ -n "$theirs" ] || what="something listens there that make run cannot identify as a redis-server"
            die "127.0.0.1:$rport is taken: $what.
     make run resets and stops only a Redis it started, so it leaves this one alone. Either
     start a private Redis on another port:  MARKET_REDIS_PORT=${alt:-6381} make run
     or add the demo world to that Redis, deleting nothing:  MARKET_REDIS=redis://127.0.0.1:$rport/0 make run"
        fi
    else
        redis-server --port "$rport" --bind 127.0.0.1 --protected-mode yes --dir "$dir" \
            --appendonly yes --appendfsync "${MARKET_APPENDFSYNC:-always}" --save "" \
            --daemonize yes --pidfile "$dir/redis.pid" --logfile "$dir/redis.log" ||
            die "redis-server did not start (see var/redis/redis.log)"
        started="$rport"
        i=0
        # PONG, not just an answer: while it loads its AOF it answers LOADING.
        until [ "$(redis-cli -h 127.0.0.1 -p "$rport" ping 2>/dev/null)" = PONG ]; do
            i=$((i + 1))
            [ "$i" -lt 300 ] || die "redis-server did not start (see var/redis/redis.log)"
            sleep 0.1
        done
        echo "run: started a private redis-server on 127.0.0.1:$rport (data in var/redis)"
    fi
    MARKET_REDIS="redis://127.0.0.1:$rport/0"
    export MARKET_REDIS
fi

# The private Redis is ours: start it from the demo world. A Redis named in
# MARKET_REDIS may hold someone's data: add the demo without deleting anything.
if [ -n "$started" ]; then
    "$BIN/market-seed" --reset fixtures/demo.json
else
    "$BIN/market-seed" fixtures/demo.json
fi
# A flash sale to try, running for a day: 100 potions at 10, at most 5 a player (an
# existing sale of that id, in a Redis named by MARKET_REDIS, is left as it is).
"$BIN/market-seed" --sale id=potions,item=potion,stock=100,price=10,limit=5 ||
    echo "run: the demo sale 'potions' was not created (see above); the rest works without it"
# An auction to watch end: Erin's ring, from 50, for 5 minutes (the page counts it down).
"$BIN/market-seed" --auction seller=E,item=ring-9,start=50,minutes=5,buyout=500,step=5 ||
    echo "run: the demo auction of E's ring was not created (see above); the rest works without it"

url="http://$LISTEN"
log=var/log/market-server.log
if [ -n "$noauth" ]; then
    auth=""
    token_line=""
    tokens="Authentication is off (MARKET_NO_AUTH): any client may act for any player."
else
    auth="-H \"Authorization: Bearer \$TOKEN\" "
    # shellcheck disable=SC2016 # printed for the user's shell to expand
    secret='"$MARKET_AUTH_SECRET"'
    # shellcheck disable=SC2016
    [ "$secret_from" = env ] || secret='"$(cat var/auth-secret)"'
    # The command, not a token: a token (a JWT) expires an hour after it is made.
    token_line="  TOKEN=\$($BIN/market-seed --auth-secret $secret --print-token B)
"
    tokens="TOKEN is B's, valid for an hour (--ttl 1d for longer). Any player's token:
bin/market-seed --auth-secret $secret --print-token A"
fi
cat <<MSG

market-server on $url  (Ctrl-C stops it; request log: $log)

The market page: open $url/ in a browser; paste a player's token (echo \$TOKEN,
made as below) to see their funds and trades and to buy.

Try it from another terminal. Bob (B) buys Alice's axe; the same purchase again answers
404 item_not_listed, since the axe is Bob's now; then Bob's funds and inventory, and the
market. make run seeds the demo world afresh at every start.
$token_line  curl -s -X POST $url/purchase $auth-d '{"buyer":"B","seller":"A","item":"axe"}'
  curl -s -X POST $url/purchase $auth-d '{"buyer":"B","seller":"A","item":"axe"}'
  curl -s $url/players/B
  curl -s '$url/market?limit=10'
A flash sale runs: 100 potions at 10 each, at most 5 a player. Bob buys 2; then what is left.
  curl -s -X POST $url/sales/potions/buy $auth-d '{"buyer":"B","quantity":2}'
  curl -s $url/sales/potions
An auction of Erin's ring runs for 5 minutes from 50 (the page shows it); Bob bids 60:
  curl -s -X POST $url/auctions/1/bid $auth-d '{"bidder":"B","amount":60}'
$tokens

MSG

# The server's stderr goes to the log, and all of it but the request lines
# to the terminal. The filter runs in the background, so it ignores the
# Ctrl-C that stops the server and still shows the server's last lines.
[ ! -f "$log" ] || mv -f "$log" "$log.1"
fifo_dir=$(mktemp -d -t gm-run.XXXXXX) || die "mktemp failed"
mkfifo "$fifo_dir/log" || die "mkfifo failed"
tee -a "$log" <"$fifo_dir/log" | grep --line-buffered -v ' msg=request ' >&2 &
filter=$!
status=0
# shellcheck disable=SC2086
"$BIN/market-server" --listen "$LISTEN" $noauth "$@" 2>"$fifo_dir/log" || status=$?
wait "$filter" || true
[ "$status" -eq 0 ] || echo "run: market-server exited $status (its log: $log)" >&2
exit "$status"
