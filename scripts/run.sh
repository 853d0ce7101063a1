#!/bin/sh
# run.sh - `make run`: a private redis-server (unless MARKET_REDIS is set), the demo world, the service.
#
# The private Redis listens on 127.0.0.1 only, keeps its data under var/redis
# (AOF, appendfsync $MARKET_APPENDFSYNC, default everysec) and is stopped when
# the service stops. Every MARKET_* variable is passed on to market-server.
set -eu
cd "$(dirname "$0")/.."
BIN=${BIN:-bin}
LISTEN=${MARKET_LISTEN:-127.0.0.1:8080}
started=""

[ -n "${MARKET_REDIS:-}" ] && MARKET_REDIS_GIVEN=1
if [ -z "${MARKET_REDIS:-}" ]; then
    port=${MARKET_REDIS_PORT:-6380}
    dir="$PWD/var/redis"
    mkdir -p "$dir"
    if redis-cli -h 127.0.0.1 -p "$port" ping >/dev/null 2>&1; then
        echo "run: using the redis-server already on 127.0.0.1:$port"
    else
        redis-server --port "$port" --bind 127.0.0.1 --protected-mode yes --dir "$dir" \
            --appendonly yes --appendfsync "${MARKET_APPENDFSYNC:-everysec}" --save "" \
            --daemonize yes --pidfile "$dir/redis.pid" --logfile "$dir/redis.log"
        i=0
        until redis-cli -h 127.0.0.1 -p "$port" ping >/dev/null 2>&1; do
            i=$((i + 1))
            [ "$i" -lt 100 ] || { echo "run: redis-server did not start (see $dir/redis.log)" >&2; exit 1; }
            sleep 0.1
        done
        started="$port"
        echo "run: started a private redis-server on 127.0.0.1:$port (data in var/redis)"
    fi
    MARKET_REDIS="redis://127.0.0.1:$port/0"
    export MARKET_REDIS
fi

stop_redis() {
    [ -n "$started" ] && redis-cli -h 127.0.0.1 -p "$started" shutdown >/dev/null 2>&1 || true
}
trap stop_redis EXIT
trap ':' INT TERM # the server stops gracefully on these; then we stop redis

# The private Redis is ours: start it from the demo world. A Redis named in
# MARKET_REDIS may hold someone's data: add the demo without deleting anything.
if [ -n "$started" ] || [ -z "${MARKET_REDIS_GIVEN:-}" ]; then
    "$BIN/market-seed" --reset fixtures/demo.json
else
    "$BIN/market-seed" fixtures/demo.json
fi

host=${LISTEN%:*}
port=${LISTEN##*:}
# Authentication is on: the secret is MARKET_AUTH_SECRET, or else the one kept
# in var/auth-secret (made once, readable by you only). MARKET_NO_AUTH=1 turns
# it off, as --no-auth does for the server.
noauth=""
secret_file=""
if [ "${MARKET_NO_AUTH:-0}" = 1 ]; then
    noauth="--no-auth"
elif [ -z "${MARKET_AUTH_SECRET:-}" ]; then
    secret_file="$PWD/var/auth-secret"
    if [ ! -s "$secret_file" ]; then
        mkdir -p var
        (umask 077 && od -An -N32 -tx1 /dev/urandom | tr -d ' \n' >"$secret_file")
        echo "run: made an auth secret in var/auth-secret"
    fi
    MARKET_AUTH_SECRET=$(cat "$secret_file")
    export MARKET_AUTH_SECRET
fi
auth=""
if [ -n "$noauth" ]; then
    tokens="authentication is off (MARKET_NO_AUTH): any client may act for any player"
else
    auth="-H 'Authorization: Bearer $("$BIN/market-seed" --print-token B)' "
    secret='"$MARKET_AUTH_SECRET"'
    [ -z "$secret_file" ] || secret='"$(cat var/auth-secret)"'
    tokens="the purchase carries B's token; any player's token:
  bin/market-seed --auth-secret $secret --print-token A"
fi
cat <<MSG

market-server on http://$LISTEN  (Ctrl-C stops it)
try:
  curl -s -X POST $host:$port/purchase $auth-d '{"buyer":"B","seller":"A","item":"axe"}'
  curl -s $host:$port/players/B
  curl -s '$host:$port/market?limit=10'
$tokens

MSG
status=0
# shellcheck disable=SC2086
"$BIN/market-server" --listen "$LISTEN" $noauth "$@" || status=$?
exit "$status"
