#!/bin/sh
# seed-if-empty.sh - the compose file's seed step: `market-seed --reset FIXTURE` only into an
# empty store, so that a volume that already holds data (a restart, `docker compose up` again)
# keeps it.
#
#   MARKET_REDIS=redis://:PASS@redis:6379/0 seed-if-empty.sh /app/fixtures/demo.json
#
# Empty means DBSIZE 0 in MARKET_REDIS's database (its keys, whatever they are: a store that
# holds anything is not ours to reset). Needs redis-cli (redis-tools) and market-seed on PATH;
# MARKET_REDIS is a redis:// URL of a user that may run DBSIZE and market-seed's commands (the
# administrator: the service's user may not, see deploy/redis/market.acl). What market-seed
# prints is shown with the URL's credentials masked. Exits 0 when it seeded or left the data
# alone, market-seed's status when seeding failed, 1 when DBSIZE could not be read, 2 on bad
# usage.
set -eu
[ $# -eq 1 ] || {
    echo "usage: seed-if-empty.sh FIXTURE.json (MARKET_REDIS names the store)" >&2
    exit 2
}
url=${MARKET_REDIS:?MARKET_REDIS names the store}
# redis-cli reads redis://:PASS@ as the user "" (AUTH "" PASS): name the default user
cli_url=$(printf '%s\n' "$url" | sed 's|^redis://:|redis://default:|')
keys=$(redis-cli --no-auth-warning -u "$cli_url" DBSIZE 2>&1) || keys="$keys (exit $?)"
case $keys in
'' | *[!0-9]*)
    echo "seed: cannot read the store's DBSIZE: $keys" >&2
    exit 1
    ;;
esac
if [ "$keys" -gt 0 ]; then
    echo "seed: the store holds $keys keys: left as it is, not seeded"
    exit 0
fi
echo "seed: the store is empty: seeding $1"
# market-seed names the URL it wrote to, password and all: keep that out of the logs
status=0
out=$(market-seed --reset "$1" 2>&1) || status=$?
printf '%s\n' "$out" | sed 's|://[^/@]*@|://***@|g'
exit "$status"
